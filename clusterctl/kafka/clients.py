"""Produce and consume: the console producer and consumer behind `clusterctl produce` / `consume`."""

from __future__ import annotations

import contextlib
import functools
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO, Literal

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_END,
    OFFSET_STORED,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from clusterctl.errors import ClusterctlError, InputError, TimeoutError_, UsageError
from clusterctl.kafka.connection import (
    JOIN_TIMEOUT_S,
    Acks,
    check_topic,
    consumer_config,
    kafka_error,
    log_end_offsets,
    producer_config,
)
from clusterctl.spec import validate

# ---------------------------------------------------------------- produce


@dataclass
class PartitionCount:
    partition: int
    delivered: int


@dataclass
class ProduceSummary:
    """What a produce run delivered: totals, per-partition counts and the first errors.

    `stopped` says why input stopped early (a bad line, Ctrl-C); `bad_line` is that line's number,
    and nothing from it onwards was sent.
    """

    topic: str
    acks: str
    sent: int
    delivered: int
    failed: int
    elapsed_s: float
    partitions: list[PartitionCount] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    stopped: str | None = None
    bad_line: int | None = None


def parse_line(
    line: str | Oversize, key_separator: str | None, number: int | None = None
) -> tuple[str | None, str | Oversize]:
    """Split `key<SEP>value` (no separator in the line: an InputError, as the console producer would fail)."""
    if key_separator is None or isinstance(line, Oversize):
        return None, line
    if not key_separator:
        raise UsageError("--key-separator must not be empty")
    key, sep, value = line.partition(key_separator)
    if not sep:
        message = f"no key separator {key_separator!r} in {line[:60]!r}"
        if number is None:
            raise UsageError(f"line has {message}")
        raise InputError(number, f"has {message}")
    return key, value


MAX_ERRORS_KEPT = 5


@dataclass(frozen=True)
class Oversize:
    """An input line longer than the producer's message.max.bytes: read no further than that, only its size kept."""

    size: int


class EndlessLine(Exception):
    """An input line with no end within MAX_LINE_SKIP_BYTES (`/dev/zero`): the input stops there."""

    def __init__(self, skimmed: int) -> None:
        super().__init__(skimmed)
        self.skimmed = skimmed


def read_lines(
    fh: BinaryIO, max_bytes: int = validate.MAX_RECORD_BYTES, skip_bytes: int = validate.MAX_LINE_SKIP_BYTES
) -> Iterator[bytes | Oversize]:
    """Lines without their line end, never holding more than `max_bytes` (+ the line end) of one line: a longer
    line is skimmed in bounded chunks and comes out as `Oversize` (one long line cannot fill the memory); a line
    with no end within `skip_bytes` (`/dev/zero`) raises EndlessLine (it cannot keep the reader spinning)."""
    while True:
        raw = fh.readline(max_bytes + 2)
        if not raw:
            return
        line = raw.rstrip(b"\r\n")
        if len(line) <= max_bytes:
            yield line
            continue
        size = len(raw)
        while not raw.endswith(b"\n"):
            if size > skip_bytes:
                raise EndlessLine(size)
            raw = fh.readline(65_536)
            if not raw:
                break
            size += len(raw)
        yield Oversize(size - (len(raw) - len(raw.rstrip(b"\r\n"))))


@dataclass
class _Tally:
    """What came back for the records sent so far: delivered per partition, failures and the first few errors."""

    on_delivery: Callable[[int, int], None] | None = None
    counts: dict[int, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    failed: int = 0

    def fail(self, text: str) -> None:
        self.failed += 1
        if len(self.errors) < MAX_ERRORS_KEPT:
            self.errors.append(text)

    def report(self, number: int, err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            self.fail(f"line {number} (partition {msg.partition()}): {err.str()}")
            return
        self.counts[msg.partition()] = self.counts.get(msg.partition(), 0) + 1
        if self.on_delivery is not None:
            self.on_delivery(msg.partition(), msg.offset())


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[str | bytes | None, str | bytes | Oversize]],
    *,
    acks: Acks | str = "all",
    partition: int | None = None,
    flush_timeout: float = 60.0,
    on_delivery: Callable[[int, int], None] | None = None,
    **overrides: Any,
) -> ProduceSummary:
    """Send (key, value) records and wait for every delivery report.

    Record n (1-based, = the input line number) that fails — refused locally (e.g. larger than
    message.max.bytes) or by the broker — is counted and named in `errors`; the rest still go. If the
    input itself fails (a ClusterctlError such as InputError, or Ctrl-C), what was sent is flushed and
    the exception is re-raised with the summary as its `result` (KeyboardInterrupt included).
    """
    validate.topic_name(topic)
    partitions = check_topic(bootstrap, topic)
    if partition is not None and not 0 <= partition < partitions:
        raise UsageError(f"topic {topic!r} has partitions 0..{partitions - 1}; --partition {partition} does not exist")
    producer = Producer(producer_config(bootstrap, acks, **overrides))
    tally = _Tally(on_delivery)
    sent = 0
    start = time.monotonic()
    kwargs: dict[str, Any] = {} if partition is None else {"partition": partition}
    stop: BaseException | None = None
    try:
        for number, (key, value) in enumerate(records, start=1):
            sent += 1
            _send(producer, topic, number, key, value, kwargs, tally)
            producer.poll(0)
    except (ClusterctlError, KeyboardInterrupt) as exc:
        stop = exc
    try:
        remaining = producer.flush(flush_timeout)
    except KeyboardInterrupt as exc:  # a second Ctrl-C while waiting: count what is still queued
        stop, remaining = stop or exc, len(producer)
    elapsed = time.monotonic() - start
    if remaining:
        tally.failed += remaining
        tally.errors.append(f"{remaining} messages still undelivered after waiting {flush_timeout:.0f}s")
    summary = ProduceSummary(
        topic=topic,
        acks=str(acks),
        sent=sent,
        delivered=sum(tally.counts.values()),
        failed=tally.failed,
        elapsed_s=round(elapsed, 3),
        partitions=[PartitionCount(p, n) for p, n in sorted(tally.counts.items())],
        errors=tally.errors,
    )
    if stop is not None:
        summary.stopped = "interrupted" if isinstance(stop, KeyboardInterrupt) else str(stop)
        summary.bad_line = getattr(stop, "line", None)
        stop.result = summary  # type: ignore[attr-defined]
        raise stop
    return summary


def _send(
    producer: Producer,
    topic: str,
    number: int,
    key: str | bytes | None,
    value: str | bytes | Oversize,
    kwargs: dict[str, Any],
    tally: _Tally,
) -> None:
    """Queue record `number`; a full local queue is drained (delivery reports served) and asked again."""
    if isinstance(value, Oversize):  # never read whole: refused here as librdkafka would refuse it
        tally.fail(
            f"line {number}: message of {value.size} bytes is larger than a record may be "
            f"({validate.MAX_RECORD_BYTES}: the producer's message.max.bytes {validate.MAX_MESSAGE_BYTES} less "
            f"{validate.RECORD_OVERHEAD} bytes of record overhead); not read past that"
        )
        return
    while True:
        try:
            producer.produce(topic, value=value, key=key, on_delivery=functools.partial(tally.report, number), **kwargs)
            return
        except BufferError:  # local queue full: serve delivery reports, then retry
            producer.poll(0.1)
        except KafkaException as exc:  # refused before sending (too large, unknown partition ...)
            tally.fail(f"line {number}: {_local_refusal(exc, value)}")
            return


def _local_refusal(exc: KafkaException, value: str | bytes) -> str:
    err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
    if err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE:
        size = len(value.encode("utf-8") if isinstance(value, str) else value)
        return f"message of {size} bytes is larger than the producer's message.max.bytes ({err.str()})"
    return err.str() if err is not None else str(exc)


# ---------------------------------------------------------------- consume


@dataclass
class ConsumedRecord:
    topic: str
    partition: int
    offset: int
    key: str | None
    value: str | None
    timestamp_ms: int | None


def _decode(b: bytes | None) -> str | None:
    return None if b is None else b.decode("utf-8", errors="replace")


class Reader:
    """A consume session: iterate the records, `ack()` the ones handled, `close()` commits exactly those.

    With `group` and no explicit start, subscribe() and read from the committed offsets (like the
    console consumer); only acknowledged records are ever committed (enable.auto.offset.store off), so
    a record read but never shown to anyone is delivered again to the group's next reader. Without
    `group`, assign() partitions directly and commit nothing, so no group is left behind on the
    cluster. An int `start` is an absolute offset (needs `partition`, or applies to every partition).
    """

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        *,
        start: Literal["beginning", "latest", "committed"] | int = "committed",
        partition: int | None = None,
        group: str | None = None,
        max_messages: int | None = None,
        timeout: float = 10.0,
        group_protocol: str = "classic",
        **overrides: Any,
    ) -> None:
        partitions = check_topic(bootstrap, topic)
        if partition is not None and not 0 <= partition < partitions:
            raise UsageError(
                f"topic {topic!r} has partitions 0..{partitions - 1}; --partition {partition} does not exist"
            )
        self.bootstrap, self.topic, self.start, self.partition = bootstrap, topic, start, partition
        self.group, self.max_messages, self.timeout = group, max_messages, timeout
        self.partitions = partitions
        self.ends: dict[int, int] = {}
        if start == "latest":  # resolved here, cross-checked (see connection.log_end_offsets), not by OFFSET_END
            ends = log_end_offsets(bootstrap, [(topic, p) for p in range(partitions)])
            self.ends = {p: off for (_t, p), off in ends.items()}
        reset = "latest" if start == "latest" else "earliest"
        if group is not None:
            overrides.setdefault("enable_auto_offset_store", False)
        conf = consumer_config(bootstrap, group, auto_offset_reset=reset, group_protocol=group_protocol, **overrides)
        # the consumer protocol (KIP-848) and cooperative-sticky change an assignment incrementally
        self.incremental = group_protocol == "consumer" or "cooperative" in str(
            conf.get("partition.assignment.strategy", "")
        )
        self.consumer = Consumer(conf)
        self.acked = 0
        self._closed = False

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def ack(self, records: Iterable[ConsumedRecord]) -> None:
        """Mark records as handled: their offsets (+1) are what the group commits."""
        if self.group is None:
            return
        latest: dict[int, int] = {}
        for r in records:
            latest[r.partition] = max(latest.get(r.partition, -1), r.offset)
            self.acked += 1
        if latest:
            tps = [TopicPartition(self.topic, p, off + 1) for p, off in latest.items()]
            with contextlib.suppress(KafkaException):  # a partition revoked meanwhile: its new owner re-reads it
                self.consumer.store_offsets(offsets=tps)

    def close(self) -> None:
        """Commit the acknowledged offsets (group only) and leave the group."""
        if self._closed:
            return
        self._closed = True
        try:
            if self.group is not None:
                try:
                    self.consumer.commit(asynchronous=False)
                except KafkaException as exc:  # nothing acknowledged → nothing to commit
                    if exc.args[0].code() != KafkaError._NO_OFFSET:
                        raise
        finally:
            self.consumer.close()

    def __iter__(self) -> Iterator[ConsumedRecord]:
        """Yield records until `max_messages` or `timeout` seconds pass with nothing new."""
        consumer, start, topic, partition, group = self.consumer, self.start, self.topic, self.partition, self.group
        ends = self.ends
        use_subscribe = group is not None and partition is None
        # the idle timeout counts from the moment partitions are assigned (a group join can take seconds)
        assigned_at: list[float] = []
        if use_subscribe:
            initial: int | None = None
            if start == "beginning":
                initial = OFFSET_BEGINNING
            elif start == "latest":
                initial = OFFSET_END
            elif isinstance(start, int):
                initial = start

            def on_assign(c: Consumer, tps: list[TopicPartition]) -> None:
                if initial is not None:
                    for tp in tps:
                        tp.offset = ends.get(tp.partition, initial) if start == "latest" else initial
                    (c.incremental_assign if self.incremental else c.assign)(tps)
                assigned_at.append(time.monotonic())

            consumer.subscribe([topic], on_assign=on_assign)
        else:
            if start == "beginning":
                off = OFFSET_BEGINNING
            elif isinstance(start, int):
                off = start
            elif start == "latest":
                off = OFFSET_END
            else:  # committed offsets of `group`, or the beginning without one
                off = OFFSET_BEGINNING if group is None else OFFSET_STORED
            parts = [partition] if partition is not None else list(range(self.partitions))
            consumer.assign([TopicPartition(topic, p, ends.get(p, off)) for p in parts])
            assigned_at.append(time.monotonic())
        seen = 0
        started = time.monotonic()
        last = started
        while self.max_messages is None or seen < self.max_messages:
            msg = consumer.poll(0.5)
            if msg is None:
                now = time.monotonic()
                if assigned_at and now - max(last, assigned_at[-1]) >= self.timeout:
                    break
                if not assigned_at and now - started >= self.timeout + JOIN_TIMEOUT_S:
                    raise TimeoutError_(
                        f"consumer group {group!r} got no partition assignment for {topic!r} "
                        f"after waiting {now - started:.0f}s"
                    )
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    continue
                if err.fatal() or err.code() in (
                    KafkaError.UNKNOWN_TOPIC_OR_PART,
                    KafkaError.TOPIC_AUTHORIZATION_FAILED,
                ):
                    raise kafka_error(KafkaException(err), self.bootstrap)
                continue
            last = time.monotonic()
            seen += 1
            ts_type, ts = msg.timestamp()
            topic_, part, offset = msg.topic(), msg.partition(), msg.offset()
            assert topic_ is not None and part is not None and offset is not None  # set on every record
            yield ConsumedRecord(
                topic=topic_,
                partition=part,
                offset=offset,
                key=_decode(msg.key()),
                value=_decode(msg.value()),
                timestamp_ms=ts if ts_type else None,
            )
            if group is not None and self.acked and seen % 500 == 0:
                with contextlib.suppress(KafkaException):
                    consumer.commit(asynchronous=True)


def consume(
    bootstrap: str,
    topic: str,
    *,
    start: Literal["beginning", "latest", "committed"] | int = "committed",
    partition: int | None = None,
    group: str | None = None,
    max_messages: int | None = None,
    timeout: float = 10.0,
    group_protocol: str = "classic",
    **overrides: Any,
) -> Iterator[ConsumedRecord]:
    """Yield records (see `Reader`); a record counts as handled once the caller asks for the next one.

    So with `group`, what is committed at the end is every record the caller moved past; a record
    being handled when the caller stopped (break, Ctrl-C) is not committed.
    """
    with Reader(
        bootstrap,
        topic,
        start=start,
        partition=partition,
        group=group,
        max_messages=max_messages,
        timeout=timeout,
        group_protocol=group_protocol,
        **overrides,
    ) as reader:
        for rec in reader:
            yield rec
            reader.ack([rec])
