"""Streaming count of records per Kafka key, topic to topic: each output record is (key, running total).

Output mode is update through foreachBatch: every micro-batch writes only the keys it saw, with their new
totals, and each record carries the batch id (header `clusterctl.batch`). The newest batch's record per key
is that key's count over everything read so far, also after a replayed batch (docs/spark.md, exact results).
Records without a key count under the empty key.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from pyspark.sql import functions as F

DESCRIPTION = "streaming count per record key: input topic -> (key, running total) records on the output topic"
KIND = "streaming"
OPTIONS = {"input": "events", "output": "key-counts"}
INPUT_TOPICS = ("input",)
OUTPUT_TOPICS = ("output",)


def expected(records: Iterable[tuple[str | None, str | None]], options: dict[str, str]) -> dict[str, str]:
    """What the output's newest value per key must be, computed from the input (key, value) records."""
    return {k: str(n) for k, n in Counter("" if key is None else key for key, _v in records).items()}


def build(ctx: Any) -> Any:
    records = ctx.read_stream(ctx.option("input"))
    keys = records.select(F.coalesce(F.col("key").cast("string"), F.lit("")).alias("key"))
    out = keys.groupBy("key").count().select("key", F.col("count").cast("string").alias("value"))
    return ctx.write_stream(out, ctx.option("output"), mode="update")
