"""The drill's load generator and its verification.

`DrillLoad` produces sequence-numbered records (acks=all and enable.idempotence=true unless a negative
control asks for acks=1/0 or no idempotence) round-robin over
a topic's partitions, with key "p<partition>" and value `encode_value(seq)`, and appends every
acknowledged write to a ledger (see ledger.py). It keeps per-interval throughput and error counts
for the observer's timeline. `consume_all` reads a topic from the beginning up to its end offsets;
`verify_drill` compares that with the ledger (acked ⊆ consumed, per-partition order).
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, Producer

from clusterctl.chaos.ledger import (
    LedgerEntry,
    LedgerWriter,
    VerifyResult,
    encode_value,
    parse_seq,
    read_ledger,
    verify,
)
from clusterctl.chaos.timeline import INTERVAL_S
from clusterctl.errors import ClusterctlError, TimeoutError_
from clusterctl.kafka.clients import ConsumedRecord
from clusterctl.kafka.connection import check_topic, producer_config
from clusterctl.kafka.readback import read_to_end
from clusterctl.kafka.settings import DRILL_LINGER_MS
from clusterctl.wait import wait_until


@dataclass
class LoadInterval:
    """Producer activity in one interval: acknowledged writes, failed deliveries, error names."""

    t: float  # epoch seconds, interval start
    acked: int = 0
    errors: int = 0
    error_names: dict[str, int] = field(default_factory=dict)


@dataclass
class LoadSummary:
    topic: str
    ledger: str
    sent: int
    acked: int
    failed: int
    pending: int  # sent but never reported (delivery timed out at shutdown)
    seconds: float
    errors: dict[str, int]
    intervals: list[LoadInterval]
    fatal: str | None = None  # the producer stopped on a fatal error (idempotence broken by a loss, ...)


class DrillLoad:
    """A background producer writing numbered records and a ledger of acknowledged ones."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        ledger_path: str | Path,
        rate: float = 500.0,
        value_size: int = 64,
        partitions: int | None = None,
        acks: str = "all",
        idempotence: bool | None = None,
        linger_ms: int = DRILL_LINGER_MS,
        **producer_overrides: Any,
    ) -> None:
        self.bootstrap = bootstrap
        self.topic = topic
        self.rate = rate
        self.value_size = value_size
        self.partitions = partitions or check_topic(bootstrap, topic)
        conf = producer_config(bootstrap, acks, **{"linger.ms": linger_ms, **producer_overrides})
        self.acks = str(conf["acks"])
        self.idempotence = self.acks in ("all", "-1") if idempotence is None else idempotence
        conf["enable.idempotence"] = self.idempotence
        self._producer = Producer(conf)
        self._ledger = LedgerWriter(
            ledger_path,
            topic,
            partitions=self.partitions,
            acks=self.acks,
            idempotence=self.idempotence,
            bootstrap=bootstrap,
        )
        self.ledger_path = str(ledger_path)
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.sent = 0
        self.acked = 0
        self.failed = 0
        self.errors: Counter[str] = Counter()
        self.intervals: list[LoadInterval] = []
        self._started = 0.0
        self._fatal: str | None = None
        self.on_interval: Callable[[LoadInterval], None] | None = None  # each interval once it is closed

    # -- delivery reports run on the producer thread inside poll()/flush()
    def _interval(self, now: float) -> LoadInterval:
        if not self.intervals or now - self.intervals[-1].t >= INTERVAL_S:
            start = self._started + INTERVAL_S * int((now - self._started) / INTERVAL_S)
            closed = len(self.intervals)
            while self.intervals and self.intervals[-1].t + INTERVAL_S < start - 1e-9:
                self.intervals.append(LoadInterval(self.intervals[-1].t + INTERVAL_S))
            if self.on_interval is not None:
                for iv in self.intervals[max(0, closed - 1) :]:
                    self.on_interval(iv)
            self.intervals.append(LoadInterval(start))
        return self.intervals[-1]

    def _on_delivery(self, err: KafkaError | None, msg: Any) -> None:
        now = time.time()
        with self._lock:
            iv = self._interval(now)
            if err is not None:
                self.failed += 1
                iv.errors += 1
                iv.error_names[err.name()] = iv.error_names.get(err.name(), 0) + 1
                self.errors[err.name()] += 1
                if err.fatal():
                    self._fatal = f"{err.name()}: {err.str()}"
                return
            self.acked += 1
            iv.acked += 1
            value = msg.value().decode()
            seq = parse_seq(value)
            self._ledger.append(
                LedgerEntry(
                    msg.topic(),
                    msg.partition(),
                    -1 if msg.offset() is None else msg.offset(),  # an idempotent retry's ack may carry none
                    msg.key().decode(),
                    value,
                    -1 if seq is None else seq,
                    now,
                )
            )

    def _run(self) -> None:
        try:
            self._produce_loop()
        except Exception as exc:  # surfaced through `fatal` and stop()
            self._fatal = f"{type(exc).__name__}: {exc}"

    def _produce_loop(self) -> None:
        seq = 0
        t0 = time.monotonic()
        while not self._stop.is_set():
            if self.rate > 0:
                due = t0 + seq / self.rate
                delay = due - time.monotonic()
                if delay > 0:
                    # librdkafka waits whole milliseconds: a shorter wait would be 0, a busy loop up to the due time
                    # (a quarter of a core at 500/s); the schedule keeps the rate whatever one wait overshoots
                    self._producer.poll(min(max(delay, 0.001), 0.05))
                    continue
            p = seq % self.partitions
            try:
                self._producer.produce(
                    self.topic,
                    key=f"p{p}".encode(),
                    value=encode_value(seq, self.value_size).encode(),
                    partition=p,
                    on_delivery=self._on_delivery,
                )
                seq += 1
                self.sent = seq
            except BufferError:
                self._producer.poll(0.05)
                continue
            self._producer.poll(0)
            if self._fatal:
                break

    def start(self) -> DrillLoad:
        self._started = time.time()
        self._thread = threading.Thread(target=self._run, name="drill-load", daemon=True)
        self._thread.start()
        return self

    def stats(self) -> tuple[int, int, int]:
        with self._lock:
            return self.sent, self.acked, self.failed

    def stop(self, flush_timeout: float = 60.0) -> LoadSummary:
        """Stop producing, wait for outstanding deliveries, close the ledger."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        try:
            pending = self._producer.flush(flush_timeout)
        except Exception as exc:  # a fatal producer error (e.g. OUT_OF_ORDER_SEQUENCE_NUMBER) surfaces here
            self._fatal = self._fatal or f"{type(exc).__name__}: {exc}"
            pending = len(self._producer)
        self._ledger.close()
        if self._fatal and self.sent == 0:
            raise ClusterctlError(f"drill producer failed: {self._fatal}")
        with self._lock:
            return LoadSummary(
                topic=self.topic,
                ledger=self.ledger_path,
                sent=self.sent,
                acked=self.acked,
                failed=self.failed,
                pending=pending,
                seconds=round(time.time() - self._started, 3),
                errors=dict(self.errors),
                intervals=list(self.intervals),
                fatal=self._fatal,
            )

    @property
    def fatal(self) -> str | None:
        return self._fatal


def consume_all(bootstrap: str, topic: str, timeout: float = 120.0) -> list[ConsumedRecord]:
    """Every record of `topic` from the beginning up to the end offsets taken now (read_committed off)."""
    return read_to_end(bootstrap, topic, _consumed, timeout)


def _consumed(msg: Any) -> ConsumedRecord:
    key, value = msg.key(), msg.value()
    return ConsumedRecord(
        msg.topic(),
        msg.partition(),
        msg.offset(),
        None if key is None else key.decode("utf-8", "replace"),
        None if value is None else value.decode("utf-8", "replace"),
        msg.timestamp()[1],
    )


REREAD_AFTER_S = 5.0
CONVERGE_TIMEOUT_S = 60.0  # 13 s seen after a healed partition on Kafka 4.4.0 (wiremeta)


def verify_drill(
    bootstrap: str,
    ledger_path: str | Path,
    timeout: float = 120.0,
    read: Callable[[str, str, float], list[ConsumedRecord]] = consume_all,
    reread_after: float = REREAD_AFTER_S,
    converge_timeout: float = CONVERGE_TIMEOUT_S,
) -> VerifyResult:
    """Read the ledger, consume its topic from the beginning, and compare.

    The read waits first (up to `converge_timeout`) until the brokers agree on the topic's leaders: right after a
    healed network partition, the broker that was cut off answers from its old metadata for a while (13 s on Kafka
    4.4.0 here), naming itself leader with its old high watermark, and a read through it stops short (1,850
    records once, in 1 run of 12, before this wait). A read back that still finds acknowledged records missing is
    done once more after `reread_after` seconds, from new end offsets: a record that is really gone is missing
    from both reads; the result is the second read's, with what the first one missed kept beside it.
    """
    ledger = read_ledger(ledger_path)
    waited = agree_on_leaders(bootstrap, ledger.topic, converge_timeout) if converge_timeout > 0 else ""
    try:
        result = verify(ledger.entries, read(bootstrap, ledger.topic, timeout))
    except ClusterctlError:  # no answer at all right after a heal was seen too (same run series): one more try
        time.sleep(reread_after)
        result = verify(ledger.entries, read(bootstrap, ledger.topic, timeout))
    else:
        if result.lost_count:
            first = result
            time.sleep(reread_after)
            result = verify(ledger.entries, read(bootstrap, ledger.topic, timeout))
            result.first_read_missing = first.lost_count
            result.first_read_where = "; ".join(
                f"{p.topic}-{p.partition}: {p.lost_offsets}" for p in first.partitions if p.lost
            )
    result.metadata_wait = waited
    return result


def _agreed(line: str | None) -> bool:
    return line is None


def _said(line: str | None) -> str:
    return line or "agreed"


def agree_on_leaders(bootstrap: str, topic: str, timeout: float = CONVERGE_TIMEOUT_S) -> str:
    """Wait until every broker, asked on its own, names the same leader and leader epoch for each partition of
    `topic`; "" when they did at once, else how long it took and the disagreement seen first (or still seen when
    `timeout` ran out: the read then goes ahead, and what it misses is counted as it finds it)."""
    from clusterctl.kafka import wiremeta

    started = time.monotonic()
    seen: list[str] = []

    def split() -> str | None:
        answers = wiremeta.ask_each(bootstrap.split(","), [topic])
        if all(isinstance(a, str) for a in answers.values()):
            return None  # nobody to agree: the read finds that out itself, and says so
        line = wiremeta.converged(answers, topic)
        if line:
            seen.append(line)
        return line

    try:
        wait_until(
            split, timeout=timeout, what=f"the brokers to agree on the leaders of {topic}", interval=0.25,
            done=_agreed, seen=_said,
        )  # fmt: skip
    except TimeoutError_:
        return f"the brokers still disagreeing after {timeout:.0f} s ({seen[-1]})"
    took = time.monotonic() - started
    return f"{took:.1f} s for the brokers to agree on the leaders (first seen: {seen[0]})" if seen else ""
