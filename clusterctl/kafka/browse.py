"""Reading a topic to look at it: a bounded window of records (newest first), a live tail, one record produced.

What a console's message browser needs beside `clients` (which decodes to text for the CLI): the raw bytes of
key, value and headers, the record's timestamp, and bounds. A window never holds more than `limit` records
(a heap of the newest that match), looks at no more than `scan` records, and keeps at most `keep_bytes` of any
key, value or header (the full size is kept beside it), so a 10 MB record costs a 64 KiB preview.
"""

from __future__ import annotations

import heapq
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition

from clusterctl.errors import ClusterctlError, UsageError
from clusterctl.kafka.connection import (
    REQUEST_TIMEOUT_S,
    check_topic,
    consumer_config,
    kafka_error,
    log_end_offsets,
    producer_config,
)
from clusterctl.spec import validate

MAX_LIMIT = 500  # records one window returns
MAX_SCAN = 20_000  # records one filtered window looks at (all partitions together)
KEEP_BYTES = 64 * 1024  # of each key, value and header value
# librdkafka's prefetch queue per partition (KiB): small, but a single record larger than it still comes through
QUEUED_KBYTES = 16 * 1024
READ_TIMEOUT_S = 10.0


@dataclass
class Record:
    """One record as read: its bytes cut at KEEP_BYTES (`*_size` is the full length; None for a null key/value)."""

    partition: int
    offset: int
    timestamp_ms: int | None
    key: bytes | None
    value: bytes | None
    key_size: int | None
    value_size: int | None
    headers: list[tuple[str, bytes | None]] = field(default_factory=list)


@dataclass
class Window:
    """What one read returned: the records (newest first), how many were looked at, and each partition's span."""

    topic: str
    records: list[Record]
    scanned: int
    spans: dict[int, tuple[int, int]]  # partition -> (first offset read, end offset exclusive)
    older: bool  # records before the spans exist within the asked range (not looked at)


@dataclass
class Delivered:
    topic: str
    partition: int
    offset: int


def _cut(b: bytes | None, keep: int) -> tuple[bytes | None, int | None]:
    return (None, None) if b is None else (b[:keep], len(b))


def to_record(msg: Any, keep: int = KEEP_BYTES) -> Record:
    key, key_size = _cut(msg.key(), keep)
    value, value_size = _cut(msg.value(), keep)
    ts_type, ts = msg.timestamp()
    headers = [(str(k), None if v is None else bytes(v[:keep])) for k, v in (msg.headers() or [])]
    return Record(msg.partition(), msg.offset(), ts if ts_type else None, key, value, key_size, value_size, headers)


def matches(msg: Any, needle: bytes) -> bool:
    """Case-insensitive substring of the key, the value, or a header's name or value."""
    parts = [msg.key(), msg.value()] + [p for k, v in (msg.headers() or []) for p in (k.encode(), v)]
    return any(p is not None and needle in p.lower() for p in parts)


def _consumer(bootstrap: str) -> Consumer:
    return Consumer(consumer_config(bootstrap, queued_max_messages_kbytes=QUEUED_KBYTES, enable_partition_eof=True))


def _bounds(
    consumer: Consumer, bootstrap: str, topic: str, parts: list[int], ts_from: int | None, ts_to: int | None
) -> dict[int, tuple[int, int]]:
    """(low, end) per partition, narrowed to the timestamp range [ts_from, ts_to] (milliseconds) when given."""
    ends = {p: e for (_t, p), e in log_end_offsets(bootstrap, [(topic, p) for p in parts]).items()}
    out = {}
    for p in parts:
        try:
            low, _high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=REQUEST_TIMEOUT_S)
        except KafkaException as exc:
            raise kafka_error(exc, bootstrap) from None
        out[p] = (max(low, 0), ends[p])
    for ts, is_end in ((ts_from, False), (ts_to, True)):
        if ts is None:
            continue
        asked = [TopicPartition(topic, p, ts + 1 if is_end else ts) for p in parts]
        try:
            found = consumer.offsets_for_times(asked, timeout=REQUEST_TIMEOUT_S)
        except KafkaException as exc:
            raise kafka_error(exc, bootstrap) from None
        for tp in found:
            low, end = out[tp.partition]
            at = end if tp.offset < 0 else tp.offset  # -1: no record that late
            if not is_end:
                out[tp.partition] = (max(low, at), end)
            elif at > low:  # an end at or before the start is not trusted (tansu answers 0): the filter decides
                out[tp.partition] = (low, min(end, at))
    return out


def read_window(
    bootstrap: str,
    topic: str,
    *,
    partition: int | None = None,
    offset_from: int | None = None,
    offset_to: int | None = None,
    ts_from: int | None = None,
    ts_to: int | None = None,
    search: str = "",
    limit: int = 50,
    scan: int = MAX_SCAN,
    keep_bytes: int = KEEP_BYTES,
    timeout: float = READ_TIMEOUT_S,
) -> Window:
    """The newest `limit` records in the range (offsets inclusive, timestamps in ms inclusive) that match `search`.

    Without a search or times each partition is read for its last `limit` records; with them, for its last
    `scan / partitions` (at least `limit`). Either way only the newest `limit` are kept while reading.
    """
    validate.at_most(limit, "limit", MAX_LIMIT)
    count = check_topic(bootstrap, topic)
    if partition is not None and not 0 <= partition < count:
        raise UsageError(f"topic {topic!r} has partitions 0..{count - 1}; partition {partition} does not exist")
    parts = [partition] if partition is not None else list(range(count))
    needle = search.lower().encode()
    filtered = bool(needle) or ts_from is not None or ts_to is not None
    per_part = max(limit, min(scan, MAX_SCAN) // len(parts)) if filtered else limit
    times = (-1 if ts_from is None else ts_from, 2**63 - 1 if ts_to is None else ts_to)
    consumer = _consumer(bootstrap)
    try:
        spans: dict[int, tuple[int, int]] = {}
        older = False
        for p, (low, end) in _bounds(consumer, bootstrap, topic, parts, ts_from, ts_to).items():
            low = max(low, offset_from) if offset_from is not None else low
            end = min(end, offset_to + 1) if offset_to is not None else end
            first = max(low, end - per_part)
            older = older or first > low
            if first < end:
                spans[p] = (first, end)
        kept, scanned = _read_spans(consumer, bootstrap, topic, spans, needle, times, limit, keep_bytes, timeout)
    finally:
        consumer.close()
    records = [r for _key, r in kept]
    return Window(topic, records, scanned, spans, older)


def _read_spans(
    consumer: Consumer,
    bootstrap: str,
    topic: str,
    spans: dict[int, tuple[int, int]],
    needle: bytes,
    times: tuple[int, int],
    limit: int,
    keep: int,
    timeout: float,
) -> tuple[list[tuple[tuple[int, int, int], Record]], int]:
    """Read each partition's [first, end); keep the newest `limit` matches in a heap (by timestamp, then offset).

    `times` is the inclusive timestamp range (ms): the offsets a broker gives for times only narrow the read.
    """
    if not spans:
        return [], 0
    consumer.assign([TopicPartition(topic, p, first) for p, (first, _end) in spans.items()])
    pending = set(spans)
    heap: list[tuple[int, int, int]] = []  # (timestamp, offset, partition) of the records kept
    kept: dict[tuple[int, int, int], Record] = {}
    scanned = 0
    deadline = time.monotonic() + timeout
    while pending and time.monotonic() < deadline:
        msg = consumer.poll(0.2)
        if msg is None:
            continue
        err = msg.error()
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:
                pending.discard(msg.partition())
            elif err.fatal() or err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise kafka_error(KafkaException(err), bootstrap)
            continue
        p, offset = msg.partition(), msg.offset()
        assert p is not None and offset is not None  # set on every record
        if p not in pending or offset >= spans[p][1]:
            pending.discard(p)
            continue
        scanned += 1
        if offset >= spans[p][1] - 1:
            pending.discard(p)
        ts_type, ts = msg.timestamp()
        ts = ts if ts_type else -1
        if not times[0] <= ts <= times[1] or (needle and not matches(msg, needle)):
            continue
        key = (ts, offset, p)
        if len(heap) < limit:
            heapq.heappush(heap, key)
        elif key > heap[0]:
            del kept[heapq.heapreplace(heap, key)]
        else:
            continue
        kept[key] = to_record(msg, keep)
    if pending:
        raise ClusterctlError(
            f"read of {topic!r} stopped after {timeout:g}s with partition(s) {sorted(pending)} unfinished"
        )
    return sorted(kept.items(), key=lambda e: e[0], reverse=True), scanned


class Tail:
    """New records as they arrive: assigned at each partition's end now; `poll()` returns what came since."""

    def __init__(self, bootstrap: str, topic: str, partition: int | None = None) -> None:
        count = check_topic(bootstrap, topic)
        if partition is not None and not 0 <= partition < count:
            raise UsageError(f"topic {topic!r} has partitions 0..{count - 1}; partition {partition} does not exist")
        parts = [partition] if partition is not None else list(range(count))
        ends = log_end_offsets(bootstrap, [(topic, p) for p in parts])
        self.bootstrap = bootstrap
        self._lock = threading.Lock()  # a poll abandoned by a closed page may still run when close() comes
        self.consumer = _consumer(bootstrap)
        self.consumer.assign([TopicPartition(topic, p, ends[(topic, p)]) for p in parts])

    def poll(self, wait: float = 0.5, most: int = 100) -> list[Record]:
        """Records that arrived (at most `most`), waiting up to `wait` seconds for the first."""
        with self._lock:
            return self._poll(wait, most)

    def _poll(self, wait: float, most: int) -> list[Record]:
        out: list[Record] = []
        deadline = time.monotonic() + wait
        while len(out) < most:
            msg = self.consumer.poll(max(0.0, deadline - time.monotonic()) if not out else 0)
            if msg is None:
                break
            err = msg.error()
            if err is None:
                out.append(to_record(msg))
            elif err.fatal() or err.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise kafka_error(KafkaException(err), self.bootstrap)
        return out

    def close(self) -> None:
        with self._lock:
            self.consumer.close()


def produce_one(
    bootstrap: str,
    topic: str,
    value: bytes,
    key: bytes | None = None,
    headers: list[tuple[str, bytes]] | None = None,
    partition: int | None = None,
) -> Delivered:
    """Send one record with acks=all and wait for its delivery report."""
    count = check_topic(bootstrap, topic)
    if partition is not None and not 0 <= partition < count:
        raise UsageError(f"topic {topic!r} has partitions 0..{count - 1}; partition {partition} does not exist")
    producer = Producer(producer_config(bootstrap, "all"))
    report: list[tuple[Any, Any]] = []
    kwargs: dict[str, Any] = {} if partition is None else {"partition": partition}
    try:
        producer.produce(topic, value=value, key=key, headers=list(headers or []) or None,
                         on_delivery=lambda err, msg: report.append((err, msg)), **kwargs)  # fmt: skip
    except KafkaException as exc:
        raise kafka_error(exc, bootstrap) from None
    producer.flush(REQUEST_TIMEOUT_S * 2)
    if not report:
        raise ClusterctlError(f"no delivery report for the record to {topic!r} within {REQUEST_TIMEOUT_S * 2:g}s")
    err, msg = report[0]
    if err is not None:
        raise kafka_error(KafkaException(err), bootstrap)
    return Delivered(topic, msg.partition(), msg.offset())
