"""A Kafka sink (streaming and batch) for Spark on PySpark's Python Data Source API.

`df.writeStream.format("clusterctl-kafka").option("kafka.bootstrap.servers", ...).option("topic", ...)`
writes the `value` column (and `key`, and a per-row `topic` overriding the option) as string or
binary, like Spark's own Kafka sink. The producer runs with acks=all and idempotence; each task
flushes before it returns, and any delivery error fails the task, hence the batch. Delivery is
at-least-once (a retried batch is written again), as with the standard connector. With option
`batchId` (set by the update-mode path through foreachBatch) every record carries the micro-batch id in
the `clusterctl.batch` header, so a reader can keep the newest batch's value per key (spark/changelog.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import BinaryType, StringType, StructType

from clusterctl.spark.changelog import BATCH_HEADER
from clusterctl.spark.options import FORMAT, KafkaOptions

FLUSH_TIMEOUT_S = 150.0  # past message.timeout.ms: every record is delivered or failed by then


@dataclass
class KafkaCommitMessage(WriterCommitMessage):
    """What one task delivered: records per topic."""

    delivered: dict[str, int] = field(default_factory=dict)


def check_sink_schema(schema: StructType, options: Mapping[str, str]) -> None:
    """Fail at query start (not in a task) when the frame cannot be written to Kafka."""
    fields = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in fields:
        raise ValueError(f"{FORMAT} sink: the frame needs a 'value' column (string or binary)")
    for name in ("key", "value", "topic"):
        dtype = fields.get(name)
        if dtype is not None and not isinstance(dtype, StringType | BinaryType):
            raise ValueError(f"{FORMAT} sink: column {name!r} must be string or binary, got {dtype.simpleString()}")
    if "topic" not in fields and not any(str(k).lower() == "topic" for k in options):
        raise ValueError(f"{FORMAT} sink: set option 'topic' or give the frame a 'topic' column")


def _bytes(v: Any) -> bytes | None:
    if v is None or isinstance(v, bytes):
        return v
    return str(v).encode("utf-8")


def write_batches(opts: KafkaOptions, batches: Iterable[Any]) -> KafkaCommitMessage:
    """Produce every row of the Arrow `batches`; raise with the first delivery error after flushing."""
    from confluent_kafka import KafkaException, Producer

    from clusterctl.kafka.connection import producer_config

    # a batch waits out a broker restart as Spark's own Kafka sink does (the Java producer's delivery.timeout.ms,
    # 120 s): with 30 s, records sent as a killed leader came back timed out and failed the query
    conf = producer_config(
        opts.bootstrap, "all", **{"linger.ms": 20, "batch.num.messages": 10000, "message.timeout.ms": 120000}
    )
    conf.update(opts.client)
    producer = Producer(conf)
    headers: list[tuple[str, str | bytes | None]] | None = (
        None if opts.batch_id is None else [(BATCH_HEADER, str(opts.batch_id).encode())]
    )
    errors: list[str] = []
    failed = 0
    delivered: dict[str, int] = {}

    def on_delivery(err: Any, msg: Any) -> None:
        nonlocal failed
        if err is not None:
            failed += 1
            if len(errors) < 3:
                errors.append(f"{msg.topic()}: {err.str()}")
        else:
            delivered[msg.topic()] = delivered.get(msg.topic(), 0) + 1

    for rb in batches:
        names = {n.lower(): i for i, n in enumerate(rb.schema.names)}
        n = rb.num_rows
        values = rb.column(names["value"]).to_pylist()
        keys = rb.column(names["key"]).to_pylist() if "key" in names else [None] * n
        topics = rb.column(names["topic"]).to_pylist() if "topic" in names else [None] * n
        for key, value, row_topic in zip(keys, values, topics, strict=True):
            topic = row_topic or opts.sink_topic
            if not topic:
                raise ValueError(f"{FORMAT} sink: a row has no topic and option 'topic' is not set")
            while True:
                try:
                    producer.produce(
                        topic, value=_bytes(value), key=_bytes(key), headers=headers, on_delivery=on_delivery
                    )
                    break
                except BufferError:
                    producer.poll(0.05)
                except KafkaException as exc:
                    producer.flush(FLUSH_TIMEOUT_S)
                    raise RuntimeError(f"Kafka produce to {topic} failed: {exc.args[0].str()}") from None
            if failed:
                break
        producer.poll(0)
        if failed:
            break
    remaining = producer.flush(FLUSH_TIMEOUT_S)
    if failed or remaining:
        detail = "; ".join(errors) or f"{remaining} records still unacknowledged after {FLUSH_TIMEOUT_S:.0f}s"
        raise RuntimeError(f"Kafka delivery failed for {failed + remaining} records ({opts.bootstrap}): {detail}")
    return KafkaCommitMessage(delivered)


class KafkaBatchWriter(DataSourceArrowWriter):
    """`df.write.format("clusterctl-kafka")`."""

    def __init__(self, opts: KafkaOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return write_batches(self.opts, iterator)


class KafkaStreamWriter(DataSourceStreamArrowWriter):
    """`df.writeStream.format("clusterctl-kafka")`: each micro-batch's tasks produce and flush."""

    def __init__(self, opts: KafkaOptions) -> None:
        self.opts = opts

    def write(self, iterator: Iterator[Any]) -> WriterCommitMessage:
        return write_batches(self.opts, iterator)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Records are already acknowledged (acks=all) when the tasks return."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Acknowledged records cannot be taken back; Spark reruns the batch (at-least-once)."""
