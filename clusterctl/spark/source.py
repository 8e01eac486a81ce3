"""A Kafka source (streaming and batch) for Spark on PySpark's Python Data Source API.

Register with `register(spark)` and read with `spark.readStream.format("clusterctl-kafka")`. The
options and the row schema follow Spark's own Kafka connector (spark-sql-kafka), so a job can switch
to `format("kafka")` where that connector is on the classpath:

- `kafka.bootstrap.servers` (or `bootstrap.servers`), `subscribe` (comma-separated topics);
- `startingOffsets`: earliest | latest | JSON `{"topic": {"0": 23, "1": -2}}` (-2 earliest, -1 latest);
- `endingOffsets` (batch only): latest | JSON as above;
- `maxOffsetsPerTrigger`: cap on records per micro-batch, spread over partitions by their lag;
- `failOnDataLoss` (default true): fail when offsets to read are gone (retention, truncation);
- `kafka.<librdkafka setting>`: passed to the consumer as `<setting>`.

The stream offset is `{"topic": {"partition": end offset}}`; Spark checkpoints it, so a restarted
query resumes exactly after the last committed batch. Each Spark task reads one partition's offset
range with assign() + seek (no group, no commits) and stops at the range's end offset.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from clusterctl.spark.options import EARLIEST, FORMAT, LATEST, KafkaOptions, Offsets

ARROW_BATCH_ROWS = 8192


# ---------------------------------------------------------------- offsets (driver side)


def topic_partitions(bootstrap: str, topics: tuple[str, ...]) -> list[tuple[str, int]]:
    """Every (topic, partition) of `topics`; a missing topic is an error naming it."""
    from clusterctl.kafka.connection import fetch_metadata

    md = fetch_metadata(bootstrap)
    out: list[tuple[str, int]] = []
    for name in topics:
        t = md.topics.get(name)
        if t is None or t.error is not None or not t.partitions:
            raise ValueError(f"{FORMAT}: unknown topic {name!r} on {bootstrap}")
        out.extend((name, p) for p in sorted(t.partitions))
    return out


def earliest_offsets(bootstrap: str, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """Log-start offset per partition (ListOffsets earliest)."""
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import OffsetSpec

    from clusterctl.kafka.connection import REQUEST_TIMEOUT_S, _result, admin

    if not tps:
        return {}
    client = admin(bootstrap)  # keep a reference until the futures resolve
    futs = client.list_offsets(
        {TopicPartition(t, p): OffsetSpec.earliest() for t, p in tps}, request_timeout=REQUEST_TIMEOUT_S
    )
    return {(tp.topic, tp.partition): max(0, _result(f, bootstrap).offset) for tp, f in futs.items()}


def latest_offsets(bootstrap: str, tps: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
    """Log-end offset (high watermark) per partition, cross-checked against a fetch (see admin).

    A partition whose leader is being elected (LEADER_NOT_AVAILABLE after its leader died) is asked again for up to
    60 s: the next batch is planned once the new leader answers, where failing would end the query
    (the spark-kill-leader drill found this). Only the driver plans, so executors never import the retry module."""
    from clusterctl.kafka.connection import log_end_offsets
    from clusterctl.kafka.retry import RETRIABLE, retrying

    # reading offsets is safe to ask twice, and a request that went to the dead leader times out (15 s) before the
    # next attempt's fresh client learns the new one: timeouts are retried here too
    retriable = RETRIABLE | {"_TIMED_OUT", "REQUEST_TIMED_OUT"}
    return retrying("the input's latest offsets", lambda: log_end_offsets(bootstrap, tps), budget_s=60.0,
                    retriable=retriable)  # fmt: skip


def _nest(flat: Mapping[tuple[str, int], int]) -> Offsets:
    out: Offsets = {}
    for (t, p), o in sorted(flat.items()):
        out.setdefault(t, {})[str(p)] = int(o)
    return out


def _flat(nested: Mapping[str, Mapping[str, int]]) -> dict[tuple[str, int], int]:
    return {(t, int(p)): int(o) for t, parts in nested.items() for p, o in parts.items()}


def resolve_offsets(
    spec: str | Offsets,
    tps: list[tuple[str, int]],
    bootstrap: str,
    *,
    earliest: dict[tuple[str, int], int] | None = None,
    latest: dict[tuple[str, int], int] | None = None,
) -> dict[tuple[str, int], int]:
    """Concrete offsets for `tps` from earliest/latest/JSON (-2/-1 inside the JSON; absent = default)."""
    lo, hi = earliest, latest

    def low() -> dict[tuple[str, int], int]:
        nonlocal lo
        if lo is None:
            lo = earliest_offsets(bootstrap, tps)
        return lo

    def high() -> dict[tuple[str, int], int]:
        nonlocal hi
        if hi is None:
            hi = latest_offsets(bootstrap, tps)
        return hi

    if spec == "earliest":
        return dict(low())
    if spec == "latest":
        return dict(high())
    assert isinstance(spec, dict)
    given = _flat(spec)
    out: dict[tuple[str, int], int] = {}
    for tp in tps:
        o = given.get(tp, LATEST if tp[0] not in spec else EARLIEST)
        out[tp] = low()[tp] if o == EARLIEST else high()[tp] if o == LATEST else o
    return out


def cap_offsets(
    start: dict[tuple[str, int], int], end: dict[tuple[str, int], int], limit: int
) -> dict[tuple[str, int], int]:
    """Move `end` back so at most `limit` records lie between start and end, spread by each partition's lag."""
    lag = {tp: max(0, e - start.get(tp, e)) for tp, e in end.items()}
    total = sum(lag.values())
    if total <= limit:
        return dict(end)
    share = {tp: (n * limit) // total for tp, n in lag.items()}
    if not any(share.values()):  # never stall: give the whole budget to the most lagging partition
        top = max(lag, key=lambda tp: lag[tp])
        share[top] = min(lag[top], limit)
    return {tp: start.get(tp, e) + share[tp] if tp in start else e for tp, e in end.items()}


# ---------------------------------------------------------------- reading (executor side)


@dataclass
class KafkaInputPartition(InputPartition):
    """One Spark task: records [start, end) of one topic-partition."""

    topic: str
    partition: int
    start: int
    end: int

    def __init__(self, topic: str, partition: int, start: int, end: int) -> None:
        self.topic, self.partition, self.start, self.end = topic, partition, start, end


def plan_partitions(
    start: Mapping[tuple[str, int], int], end: Mapping[tuple[str, int], int]
) -> list[KafkaInputPartition]:
    return [
        KafkaInputPartition(t, p, start.get((t, p), e), e)
        for (t, p), e in sorted(end.items())
        if e > start.get((t, p), e)
    ]


_TS_TYPE = {0: -1, 1: 0, 2: 1}  # librdkafka TIMESTAMP_* -> Kafka's TimestampType id (as the standard connector)


def _arrow_schema() -> Any:
    """The standard Kafka source's columns, as Arrow types."""
    import pyarrow as pa

    return pa.schema(
        [
            ("key", pa.binary()),
            ("value", pa.binary()),
            ("topic", pa.string()),
            ("partition", pa.int32()),
            ("offset", pa.int64()),
            ("timestamp", pa.timestamp("us", tz="UTC")),
            ("timestampType", pa.int32()),
        ]
    )


def _reader_config(opts: KafkaOptions) -> dict[str, Any]:
    from clusterctl.kafka.connection import consumer_config

    conf = consumer_config(opts.bootstrap, auto_offset_reset="earliest" if not opts.fail_on_data_loss else "error")
    # end offsets are high watermarks, so read up to them (librdkafka defaults to read_committed)
    conf.update({"enable.partition.eof": True, "fetch.max.bytes": 52_428_800, "isolation.level": "read_uncommitted"})
    conf.update(opts.client)
    return conf


def _append(cols: dict[str, list[Any]], part: KafkaInputPartition, msg: Any, offset: int) -> None:
    ts_type, ts = msg.timestamp()
    cols["key"].append(msg.key())
    cols["value"].append(msg.value())
    cols["topic"].append(part.topic)
    cols["partition"].append(part.partition)
    cols["offset"].append(offset)
    cols["timestamp"].append(ts * 1000 if ts >= 0 else None)
    cols["timestampType"].append(_TS_TYPE.get(ts_type, -1))


def read_range(opts: KafkaOptions, part: KafkaInputPartition) -> Iterator[Any]:
    """Yield Arrow record batches with every record of `part`; fail the task on data loss or a stall.

    librdkafka's batch consume straight into Arrow buffers (`arrowread`) where it loads, else
    confluent-kafka's Consumer."""
    from clusterctl.spark import arrowread

    if arrowread.available():
        return arrowread.read_range(
            _reader_config(opts),
            _arrow_schema(),
            (part.topic, part.partition, part.start, part.end),
            fail_on_data_loss=opts.fail_on_data_loss,
            poll_timeout_ms=opts.poll_timeout_ms,
        )
    return read_range_client(opts, part)


def read_range_client(opts: KafkaOptions, part: KafkaInputPartition) -> Iterator[Any]:
    """read_range through confluent-kafka's Consumer (a Message object per record: slower)."""
    import pyarrow as pa
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    schema = _arrow_schema()
    conf = _reader_config(opts)
    committed_only = conf["isolation.level"] == "read_committed"
    consumer = Consumer(conf)
    cols: dict[str, list[Any]] = {n: [] for n in schema.names}

    def batch() -> Any:
        rb = pa.RecordBatch.from_pydict(cols, schema=schema)
        for v in cols.values():
            v.clear()
        return rb

    tp = TopicPartition(part.topic, part.partition, part.start)
    where = f"{part.topic}[{part.partition}] offsets {part.start}..{part.end}"
    try:
        consumer.assign([tp])
        next_offset = part.start
        last_progress = time.monotonic()
        while next_offset < part.end:
            msgs = consumer.consume(num_messages=ARROW_BATCH_ROWS, timeout=0.5)
            for msg in msgs:
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        # the log ends before the planned end offset: records were truncated away
                        # (under read_committed the end may be an open transaction's start: wait instead)
                        log_end = msg.offset() or 0
                        if log_end < part.end and not committed_only:
                            if opts.fail_on_data_loss:
                                raise RuntimeError(
                                    f"data loss on {where}: the log ends at {log_end} (failOnDataLoss=true)"
                                )
                            next_offset = part.end
                        continue
                    if err.code() == KafkaError._AUTO_OFFSET_RESET:
                        raise RuntimeError(f"data loss on {where}: {err.str()} (failOnDataLoss=true)")
                    raise KafkaException(err)
                offset = msg.offset() or 0
                if offset >= part.end:
                    next_offset = part.end
                    break
                _append(cols, part, msg, offset)
                next_offset = offset + 1
            if msgs:
                last_progress = time.monotonic()
            if len(cols["offset"]) >= ARROW_BATCH_ROWS:
                yield batch()
            if next_offset < part.end:
                # transaction markers and compacted-away offsets never arrive as records; position says where we are
                pos = consumer.position([TopicPartition(part.topic, part.partition)])[0].offset or 0
                if pos >= part.end:
                    break
                if time.monotonic() - last_progress > opts.poll_timeout_ms / 1000:
                    raise RuntimeError(
                        f"no records from {where} at offset {next_offset} for {opts.poll_timeout_ms} ms "
                        f"(broker {opts.bootstrap})"
                    )
        if cols["offset"]:
            yield batch()
    finally:
        consumer.close()


# ---------------------------------------------------------------- Spark interfaces


class KafkaBatchReader(DataSourceReader):
    """`spark.read.format("clusterctl-kafka")`: records between startingOffsets and endingOffsets."""

    def __init__(self, opts: KafkaOptions) -> None:
        self.opts = opts

    def partitions(self) -> list[KafkaInputPartition]:
        tps = topic_partitions(self.opts.bootstrap, self.opts.topics)
        starting = "earliest" if self.opts.starting == "latest" else self.opts.starting
        start = resolve_offsets(starting, tps, self.opts.bootstrap)
        end = resolve_offsets(self.opts.ending, tps, self.opts.bootstrap)
        return plan_partitions(start, end)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        # with nothing to read Spark still runs one task, with a placeholder partition
        return read_range(self.opts, partition) if isinstance(partition, KafkaInputPartition) else iter(())


class KafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """`spark.readStream.format("clusterctl-kafka")`: micro-batches bounded by per-partition end offsets."""

    def __init__(self, opts: KafkaOptions) -> None:
        self.opts = opts
        self.target: dict[tuple[str, int], int] | None = None
        #: the log-end offsets latestOffset saw, reported as the trigger's latest (Spark's Kafka source does so)
        self.latest: dict[tuple[str, int], int] | None = None

    def prepareForTriggerAvailableNow(self) -> None:
        """Trigger.AvailableNow: read up to today's end offsets, in limit-sized batches, then stop."""
        tps = topic_partitions(self.opts.bootstrap, self.opts.topics)
        self.target = latest_offsets(self.opts.bootstrap, tps)

    def initialOffset(self) -> dict:
        tps = topic_partitions(self.opts.bootstrap, self.opts.topics)
        return _nest(resolve_offsets(self.opts.starting, tps, self.opts.bootstrap))

    def getDefaultReadLimit(self) -> ReadLimit:
        n = self.opts.max_offsets_per_trigger
        return ReadMaxRows(n) if n else ReadAllAvailable()

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        if self.target is not None:
            tps, end = list(self.target), dict(self.target)
        else:
            tps = topic_partitions(self.opts.bootstrap, self.opts.topics)
            end = latest_offsets(self.opts.bootstrap, tps)
        begin = _flat(start)
        new = [tp for tp in tps if tp not in begin]
        if new:  # partitions added since the query started are read from their beginning
            begin.update(earliest_offsets(self.opts.bootstrap, new))
        # never move backwards (e.g. a high watermark briefly lower after a leader change)
        end = {tp: max(e, begin.get(tp, 0)) for tp, e in end.items()}
        self.latest = dict(end)
        if isinstance(limit, ReadMaxRows):
            end = cap_offsets(begin, end, limit.max_rows)
        return _nest(end)

    def reportLatestOffset(self) -> dict | None:
        """The latest offsets of this trigger (for the progress' lag), asked of the brokers only when
        latestOffset did not (with Trigger.AvailableNow: its target, as Spark's own Kafka source)."""
        if self.latest is None:
            tps = topic_partitions(self.opts.bootstrap, self.opts.topics)
            self.latest = latest_offsets(self.opts.bootstrap, tps)
        return _nest(self.latest)

    def partitions(self, start: dict, end: dict) -> list[KafkaInputPartition]:
        begin = _flat(start)
        stop = _flat(end)
        new = [tp for tp in stop if tp not in begin]
        if new:
            begin.update(earliest_offsets(self.opts.bootstrap, new))
        return plan_partitions(begin, stop)

    def read(self, partition: InputPartition) -> Iterator[Any]:
        # with nothing to read Spark still runs one task, with a placeholder partition
        return read_range(self.opts, partition) if isinstance(partition, KafkaInputPartition) else iter(())

    def commit(self, end: dict) -> None:
        """Nothing to do: progress lives in Spark's checkpoint, never in a consumer group."""
