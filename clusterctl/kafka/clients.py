"""Produce and consume: the console producer and consumer behind `clusterctl produce` / `consume`."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

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

from clusterctl.errors import TimeoutError_, UsageError
from clusterctl.kafka.connection import (
    JOIN_TIMEOUT_S,
    Acks,
    check_topic,
    consumer_config,
    kafka_error,
    log_end_offsets,
    producer_config,
)

# ---------------------------------------------------------------- produce


@dataclass
class PartitionCount:
    partition: int
    delivered: int


@dataclass
class ProduceSummary:
    """What a produce run delivered: totals, per-partition counts and the first errors."""

    topic: str
    acks: str
    sent: int
    delivered: int
    failed: int
    elapsed_s: float
    partitions: list[PartitionCount] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def parse_line(line: str, key_separator: str | None) -> tuple[str | None, str]:
    """Split `key<SEP>value` (no separator in the line: no key, like the console producer would fail)."""
    if key_separator is None:
        return None, line
    key, sep, value = line.partition(key_separator)
    if not sep:
        raise UsageError(f"line has no key separator {key_separator!r}: {line[:60]!r}")
    return key, value


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[tuple[str | bytes | None, str | bytes]],
    *,
    acks: Acks | str = "all",
    partition: int | None = None,
    flush_timeout: float = 60.0,
    on_delivery: Callable[[int, int], None] | None = None,
    **overrides: Any,
) -> ProduceSummary:
    """Send (key, value) records and wait for every delivery report."""
    partitions = check_topic(bootstrap, topic)
    if partition is not None and not 0 <= partition < partitions:
        raise UsageError(f"topic {topic!r} has partitions 0..{partitions - 1}; --partition {partition} does not exist")
    producer = Producer(producer_config(bootstrap, acks, **overrides))
    counts: dict[int, int] = {}
    errors: list[str] = []
    failed = 0
    sent = 0

    def report(err: KafkaError | None, msg: Any) -> None:
        nonlocal failed
        if err is not None:
            failed += 1
            if len(errors) < 5:
                errors.append(f"partition {msg.partition()}: {err.str()}")
            return
        counts[msg.partition()] = counts.get(msg.partition(), 0) + 1
        if on_delivery is not None:
            on_delivery(msg.partition(), msg.offset())

    start = time.monotonic()
    kwargs: dict[str, Any] = {} if partition is None else {"partition": partition}
    for key, value in records:
        while True:
            try:
                producer.produce(topic, value=value, key=key, on_delivery=report, **kwargs)
                break
            except BufferError:  # local queue full: serve delivery reports, then retry
                producer.poll(0.1)
        sent += 1
        producer.poll(0)
    remaining = producer.flush(flush_timeout)
    elapsed = time.monotonic() - start
    if remaining:
        failed += remaining
        errors.append(f"{remaining} messages still undelivered after waiting {flush_timeout:.0f}s")
    return ProduceSummary(
        topic=topic,
        acks=str(acks),
        sent=sent,
        delivered=sum(counts.values()),
        failed=failed,
        elapsed_s=round(elapsed, 3),
        partitions=[PartitionCount(p, n) for p, n in sorted(counts.items())],
        errors=errors,
    )


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


def consume(
    bootstrap: str,
    topic: str,
    *,
    start: Literal["beginning", "latest", "committed"] | int = "committed",
    partition: int | None = None,
    group: str | None = None,
    max_messages: int | None = None,
    timeout: float = 10.0,
    **overrides: Any,
) -> Iterator[ConsumedRecord]:
    """Yield records until `max_messages` or `timeout` seconds pass with nothing new.

    With `group` and no explicit start, subscribe() and commit what was read (like the console
    consumer). Without `group`, assign() partitions directly and commit nothing, so no group is
    left behind on the cluster. An int `start` is an absolute offset (needs `partition`, or
    applies to every partition).
    """
    partitions = check_topic(bootstrap, topic)
    if partition is not None and not 0 <= partition < partitions:
        raise UsageError(f"topic {topic!r} has partitions 0..{partitions - 1}; --partition {partition} does not exist")
    ends: dict[int, int] = {}
    if start == "latest":  # resolved here, cross-checked (see connection.log_end_offsets), not by OFFSET_END
        ends = {p: off for (_t, p), off in log_end_offsets(bootstrap, [(topic, p) for p in range(partitions)]).items()}
    reset = "latest" if start == "latest" else "earliest"
    consumer = Consumer(consumer_config(bootstrap, group, auto_offset_reset=reset, **overrides))
    use_subscribe = group is not None and partition is None
    # the idle timeout counts from the moment partitions are assigned (a group join can take seconds)
    assigned_at: list[float] = []
    try:
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
                    c.assign(tps)
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
            parts = [partition] if partition is not None else list(range(partitions))
            consumer.assign([TopicPartition(topic, p, ends.get(p, off)) for p in parts])
            assigned_at.append(time.monotonic())
        seen = 0
        started = time.monotonic()
        last = started
        while max_messages is None or seen < max_messages:
            msg = consumer.poll(0.5)
            if msg is None:
                now = time.monotonic()
                if assigned_at and now - max(last, assigned_at[-1]) >= timeout:
                    break
                if not assigned_at and now - started >= timeout + JOIN_TIMEOUT_S:
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
                    raise kafka_error(KafkaException(err), bootstrap)
                continue
            last = time.monotonic()
            seen += 1
            ts_type, ts = msg.timestamp()
            topic_, partition, offset = msg.topic(), msg.partition(), msg.offset()
            assert topic_ is not None and partition is not None and offset is not None  # set on every record
            yield ConsumedRecord(
                topic=topic_,
                partition=partition,
                offset=offset,
                key=_decode(msg.key()),
                value=_decode(msg.value()),
                timestamp_ms=ts if ts_type else None,
            )
            if group is not None and seen % 500 == 0:
                consumer.commit(asynchronous=True)
    finally:
        try:
            if group is not None:
                try:
                    consumer.commit(asynchronous=False)
                except KafkaException as exc:  # nothing consumed → nothing to commit
                    if exc.args[0].code() != KafkaError._NO_OFFSET:
                        raise
        finally:
            consumer.close()
