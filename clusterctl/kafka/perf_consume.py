"""The consume side of `perf`: T consumers in one group, measured as kafka-consumer-perf-test.sh does."""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from clusterctl.kafka.latency import MB
from clusterctl.kafka.settings import JOIN_TIMEOUT_S, consumer_config
from clusterctl.spec import validate


@dataclass
class ConsumeResult:
    """kafka-consumer-perf-test.sh's columns (times in ms, MB = MiB)."""

    topic: str
    group: str
    threads: int
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


def _now_iso() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


class _GroupRun:
    """The shared state of one run: what the worker threads counted, and when."""

    def __init__(
        self, bootstrap: str, topic: str, group: str, messages: int, threads: int, timeout: float,
        extra_config: dict[str, str] | None, batch: int,
    ) -> None:  # fmt: skip
        self.bootstrap, self.topic, self.group = bootstrap, topic, group
        self.messages, self.threads, self.timeout = messages, threads, timeout
        self.extra_config, self.batch = extra_config, batch
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.state = {"records": 0, "bytes": 0}
        self.errors: dict[str, int] = {}
        self.assigned_at: list[float] = []
        self.last_record = [time.monotonic()]
        self.failures: list[BaseException] = []

    def _on_assign(self, _c: Any, _parts: Any) -> None:
        with self.lock:
            now = time.monotonic()
            if len(self.assigned_at) < self.threads:
                self.assigned_at.append(now)
            if self.state["records"] == 0:
                self.last_record[0] = now  # the idle timeout counts from assignment, not from the join

    def _count(self, msgs: list[Any]) -> None:
        n = size = 0
        for m in msgs:
            err = m.error()
            if err is None:
                n += 1
                size += len(m)
            else:
                with self.lock:
                    self.errors[err.name()] = self.errors.get(err.name(), 0) + 1
        with self.lock:
            self.state["records"] += n
            self.state["bytes"] += size
            self.last_record[0] = time.monotonic()
            if self.state["records"] >= self.messages:
                self.done.set()

    def worker(self) -> None:
        from confluent_kafka import Consumer

        conf = consumer_config(self.bootstrap, self.group, auto_offset_reset="earliest")
        conf.update(self.extra_config or {})
        c = Consumer(conf)
        try:
            c.subscribe([self.topic], on_assign=self._on_assign)
            while not self.done.is_set():
                msgs = c.consume(num_messages=self.batch, timeout=0.2)
                if not msgs:
                    limit = self.timeout if self.assigned_at else max(self.timeout, JOIN_TIMEOUT_S)
                    if time.monotonic() - self.last_record[0] > limit:
                        self.done.set()
                    continue
                self._count(msgs)
        except BaseException as exc:
            self.failures.append(exc)
            self.done.set()
        finally:
            c.close()

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
        )


def check_consume_args(messages: int, threads: int) -> None:
    validate.at_most(messages, "--messages", validate.MAX_RECORDS)
    validate.at_most(threads, "--threads", validate.MAX_CONSUMER_THREADS)


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
) -> ConsumeResult:
    """T consumers in one group read until `messages` records arrived or `timeout` s passed with none."""
    check_consume_args(messages, threads)
    from confluent_kafka import KafkaException

    from clusterctl.kafka.connection import kafka_error

    run = _GroupRun(
        bootstrap, topic, group or f"perf-consumer-{uuid.uuid4().hex[:6]}", messages, threads, timeout, extra_config,
        batch,
    )  # fmt: skip
    start_wall = _now_iso()
    start = time.monotonic()
    run.last_record[0] = start
    pool = [threading.Thread(target=run.worker, name=f"perf-consumer-{i}", daemon=True) for i in range(threads)]
    for t in pool:
        t.start()
    try:
        for t in pool:
            while t.is_alive():
                t.join(0.2)
    except KeyboardInterrupt:
        run.done.set()
        raise
    end = time.monotonic()
    if run.failures:
        exc = run.failures[0]
        if isinstance(exc, KafkaException):
            raise kafka_error(exc, bootstrap)
        raise exc
    return run.result(start, end, start_wall)
