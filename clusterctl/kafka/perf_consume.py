"""The consume side of `perf`: T consumers in one group (or assigned without one), measured as
kafka-consumer-perf-test.sh does. Engines: `native` (perf_consume_native.py, batches through ctypes) and
`client` (confluent-kafka's Consumer)."""

from __future__ import annotations

import functools
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from clusterctl.errors import UsageError
from clusterctl.kafka import clientprops
from clusterctl.kafka.latency import MB
from clusterctl.kafka.settings import GROUP_PROTOCOLS, JOIN_TIMEOUT_S, consumer_config
from clusterctl.spec import validate


@dataclass
class ConsumeResult:
    """kafka-consumer-perf-test.sh's columns (times in ms, MB = MiB)."""

    topic: str
    group: str | None  # None: --no-group (partitions assigned directly)
    threads: int
    engine: str
    start_time: str
    end_time: str
    data_consumed_mb: float
    mb_per_sec: float
    records: int
    records_per_sec: float
    rebalance_time_ms: float
    fetch_time_ms: float
    fetch_mb_per_sec: float
    fetch_records_per_sec: float
    expected: int
    complete: bool
    errors: dict[str, int] = field(default_factory=dict)
    #: stopped by a signal (Ctrl-C, SIGTERM, SIGHUP): a partial result, what was read until then
    interrupted: bool = False
    group_protocol: str | None = None  # classic | consumer (KIP-848); None: --no-group


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class _GroupRun:
    """The shared state of one run: what the worker threads counted, and when."""

    def __init__(
        self, bootstrap: str, topic: str, group: str | None, messages: int, threads: int, timeout: float,
        extra_config: dict[str, str] | None, batch: int,
    ) -> None:  # fmt: skip
        self.bootstrap, self.topic, self.group = bootstrap, topic, group
        self.messages, self.threads, self.timeout = messages, threads, timeout
        self.extra_config, self.batch = extra_config, batch
        self.engine = "client"
        self.group_protocol = "classic"
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.state = {"records": 0, "bytes": 0}
        self.errors: dict[str, int] = {}
        self.assigned_at: list[float] = []
        self.last_record = [time.monotonic()]
        self.failures: list[BaseException] = []

    def assigned(self) -> None:
        """A consumer got its partitions (a group's assignment, or --no-group's own)."""
        with self.lock:
            now = time.monotonic()
            if len(self.assigned_at) < self.threads:
                self.assigned_at.append(now)
            if self.state["records"] == 0:
                self.last_record[0] = now  # the idle timeout counts from assignment, not from the join

    def _on_assign(self, _c: Any, _parts: Any) -> None:
        self.assigned()

    def add(self, records: int, size: int, errors: dict[str, int]) -> None:
        with self.lock:
            for name, n in errors.items():
                self.errors[name] = self.errors.get(name, 0) + n
            self.state["records"] += records
            self.state["bytes"] += size
            self.last_record[0] = time.monotonic()
            if self.state["records"] >= self.messages:
                self.done.set()

    def check_idle(self, now: float) -> None:
        """End the run once nothing came for --timeout (from assignment; a join may take JOIN_TIMEOUT_S)."""
        limit = self.timeout if self.assigned_at else max(self.timeout, JOIN_TIMEOUT_S)
        if now - self.last_record[0] > limit:
            self.done.set()

    def _count(self, msgs: list[Any]) -> None:
        n = size = 0
        errors: dict[str, int] = {}
        for m in msgs:
            err = m.error()
            if err is None:
                n += 1
                size += len(m)
            else:
                errors[err.name()] = errors.get(err.name(), 0) + 1
        self.add(n, size, errors)

    def client_worker(self) -> None:
        """The `client` engine: confluent-kafka's Consumer, a Message object per record."""
        from confluent_kafka import Consumer, KafkaException

        conf = consumer_config(
            self.bootstrap, self.group, auto_offset_reset="earliest", group_protocol=self.group_protocol
        )
        conf.update(self.extra_config or {})
        try:
            c = Consumer(conf)
        except KafkaException as exc:  # settings librdkafka refuses only together (rd_kafka_new)
            raise UsageError(f"invalid consumer settings: {exc.args[0].str() if exc.args else exc}") from None
        try:
            c.subscribe([self.topic], on_assign=self._on_assign)
            while not self.done.is_set():
                msgs = c.consume(num_messages=self.batch, timeout=0.2)
                if not msgs:
                    self.check_idle(time.monotonic())
                    continue
                self._count(msgs)
        finally:
            c.close()

    def guarded(self, work: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                work()
            except BaseException as exc:
                self.failures.append(exc)
                self.done.set()

        return run

    def result(self, start: float, end: float, start_wall: str) -> ConsumeResult:
        elapsed = end - start
        state, assigned_at = self.state, self.assigned_at
        # an idle tail (waiting out --timeout for records that never came) is not fetch time
        active_end = min(end, self.last_record[0]) if state["records"] else end
        rebalance = (max(assigned_at) - start) if assigned_at else elapsed
        fetch = max(active_end - start - rebalance, 0.0)
        mb = state["bytes"] / MB
        n = state["records"]
        return ConsumeResult(
            topic=self.topic,
            group=self.group,
            threads=self.threads,
            engine=self.engine,
            start_time=start_wall,
            end_time=_now_iso(),
            data_consumed_mb=round(mb, 4),
            mb_per_sec=round(mb / elapsed, 4) if elapsed > 0 else 0.0,
            records=n,
            records_per_sec=round(n / elapsed, 1) if elapsed > 0 else 0.0,
            rebalance_time_ms=round(rebalance * 1000, 1),
            fetch_time_ms=round(fetch * 1000, 1),
            fetch_mb_per_sec=round(mb / fetch, 4) if fetch > 0 else 0.0,
            fetch_records_per_sec=round(n / fetch, 1) if fetch > 0 else 0.0,
            expected=self.messages,
            complete=n >= self.messages,
            errors=self.errors,
            group_protocol=None if self.group is None else self.group_protocol,
        )


def check_consume_args(messages: int, threads: int) -> None:
    validate.at_most(messages, "--messages", validate.MAX_RECORDS)
    validate.at_most(threads, "--threads", validate.MAX_CONSUMER_THREADS)


ENGINES = ("auto", "native", "client")


def _split(partitions: int, threads: int) -> list[list[int]]:
    """Partitions dealt round robin over the threads (a thread may get none when there are fewer)."""
    return [list(range(i, partitions, threads)) for i in range(threads)]


def run_consume(
    bootstrap: str,
    topic: str,
    messages: int,
    *,
    group: str | None = None,
    threads: int = 1,
    timeout: float = 10.0,
    extra_config: dict[str, str] | None = None,
    batch: int = 500,
    engine: str = "auto",
    no_group: bool = False,
    partitions: int = 1,
    group_protocol: str = "classic",
) -> ConsumeResult:
    """T consumers read until `messages` records arrived or `timeout` s passed with none: in one group
    (subscribed; the rebalance is timed), or with `no_group` each assigned its share of the `partitions`."""
    if messages < 1:
        raise UsageError(f"--messages must be at least 1, got {messages}")
    if threads < 1:
        raise UsageError(f"--threads must be at least 1, got {threads}")
    check_consume_args(messages, threads)
    clientprops.check(extra_config or {}, "consumer", "--consumer-prop")
    if group is not None:
        clientprops.check_name(group, "the group id")
    if engine not in ENGINES:
        raise UsageError(f"--engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if no_group and group is not None:
        raise UsageError("--group and --no-group exclude each other")
    if group_protocol not in GROUP_PROTOCOLS:
        raise UsageError(f"--group-protocol must be classic or consumer, got {group_protocol!r}")
    if no_group and group_protocol != "classic":
        raise UsageError("--group-protocol and --no-group exclude each other (no group, no protocol)")
    if no_group and engine == "client":
        raise UsageError("--no-group needs --engine native")
    from clusterctl.kafka import perf_consume_native

    if engine == "auto":
        engine = "native" if perf_consume_native.available() else "client"
    elif engine == "native" and not perf_consume_native.available():
        raise UsageError(f"--engine native: {perf_consume_native.perf_native.unavailable_reason()}")
    if no_group and engine == "client":
        raise UsageError(f"--no-group: {perf_consume_native.perf_native.unavailable_reason()}")
    name = None if no_group else group or f"perf-consumer-{uuid.uuid4().hex[:6]}"
    run = _GroupRun(bootstrap, topic, name, messages, threads, timeout, extra_config, batch)
    run.engine, run.group_protocol = engine, group_protocol
    if engine == "native":
        conf = consumer_config(bootstrap, name, auto_offset_reset="earliest", group_protocol=group_protocol)
        conf.update(extra_config or {})
        perf_consume_native.check_config(conf)
        shares: list[list[int] | None] = list(_split(partitions, threads)) if no_group else [None] * threads
        work = [run.guarded(functools.partial(perf_consume_native.worker, run, conf, s)) for s in shares]
    else:
        work = [run.guarded(run.client_worker) for _ in range(threads)]
    return _run(run, work)


def _run(run: _GroupRun, work: list[Callable[[], None]]) -> ConsumeResult:
    from confluent_kafka import KafkaException

    from clusterctl.kafka.connection import kafka_error

    start_wall = _now_iso()
    start = time.monotonic()
    run.last_record[0] = start
    pool = [threading.Thread(target=w, name=f"perf-consumer-{i}", daemon=True) for i, w in enumerate(work)]
    for t in pool:
        t.start()
    try:
        for t in pool:
            while t.is_alive():
                t.join(0.2)
    except KeyboardInterrupt as stop:
        run.done.set()
        end = time.monotonic()
        for t in pool:  # the consumers stop at their next batch and leave the group
            t.join(2.0)
        partial = run.result(start, end, start_wall)
        partial.interrupted = True
        stop.result = partial  # type: ignore[attr-defined]  # printed by the CLI, `result` in --json
        raise
    end = time.monotonic()
    if run.failures:
        exc = run.failures[0]
        if isinstance(exc, KafkaException):
            raise kafka_error(exc, run.bootstrap)
        raise exc
    return run.result(start, end, start_wall)
