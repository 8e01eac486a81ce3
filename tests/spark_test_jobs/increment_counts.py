"""Test only: a count per key whose sink adds each batch's counts to the totals already in the output topic,
without the batch-id check. A replayed batch (a driver restarted from its checkpoint after its sink wrote)
adds its counts a second time: the negative control of the exact-results drill (tests/test_spark_exact.py).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from pyspark.sql import functions as F

DESCRIPTION = "test only: per-key counts added to the output's totals each batch, replays double-count"
KIND = "streaming"
OPTIONS = {"input": "", "output": ""}
INPUT_TOPICS = ("input",)
OUTPUT_TOPICS = ("output",)


def expected(records: Iterable[tuple[str | None, str | None]], options: dict[str, str]) -> dict[str, str]:
    """The same expected counts as spark_jobs/key_counts.py."""
    return {k: str(n) for k, n in Counter("" if key is None else key for key, _v in records).items()}


def build(ctx: Any) -> Any:
    from confluent_kafka import Producer

    from clusterctl.kafka.connection import producer_config
    from clusterctl.spark.changelog import BATCH_HEADER, compact, read_topic

    keys = ctx.read_stream(ctx.option("input")).select(F.coalesce(F.col("key").cast("string"), F.lit("")).alias("key"))
    bootstrap, out = ctx.bootstrap, ctx.option("output")

    def add(batch: Any, batch_id: int) -> None:
        totals = compact(read_topic(bootstrap, out)).values
        producer = Producer(producer_config(bootstrap, "all"))
        for row in batch.groupBy("key").count().collect():
            # deliberately no "skip when the output already holds this batch": a replay counts twice
            total = int(totals.get(row["key"]) or 0) + int(row["count"])
            headers: list[tuple[str, str | bytes | None]] = [(BATCH_HEADER, str(batch_id).encode())]
            producer.produce(out, key=row["key"].encode(), value=str(total).encode(), headers=headers)
        assert producer.flush(60) == 0

    return keys.writeStream.outputMode("append").foreachBatch(add)
