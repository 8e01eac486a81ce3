"""Streaming word count, topic to topic: each output record is (word, running total).

Input values are text lines split on whitespace. Output mode is update, so every micro-batch
writes only the words it saw, with their new totals; the last record per key in the output topic
is that word's total over everything read so far (compacted topics keep exactly that).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

from pyspark.sql import functions as F

DESCRIPTION = "streaming word count: input topic lines -> (word, running total) records on the output topic"
KIND = "streaming"
OPTIONS = {"input": "words", "output": "word-counts", "lowercase": "false"}
INPUT_TOPICS = ("input",)
OUTPUT_TOPICS = ("output",)


def counts(lines: Any, lowercase: bool = False) -> Any:
    """word, count over a frame with a binary `value` column of text lines."""
    text = F.col("value").cast("string")
    if lowercase:
        text = F.lower(text)
    words = lines.select(F.explode(F.split(text, r"\s+")).alias("word")).where(F.col("word") != "")
    return words.groupBy("word").count()


def expected(records: Iterable[tuple[str | None, str | None]], options: dict[str, str]) -> dict[str, str]:
    """What the output's newest value per word must be, computed from the input (key, value) records."""
    lowercase = options.get("lowercase", "false").lower() == "true"
    words: Counter[str] = Counter()
    for _key, value in records:
        text = (value or "").lower() if lowercase else value or ""
        words.update(w for w in re.split(r"\s+", text, flags=re.ASCII) if w)  # ASCII \s, as in Spark's (Java's) split
    return {w: str(n) for w, n in words.items()}


def build(ctx: Any) -> Any:
    lines = ctx.read_stream(ctx.option("input"))
    totals = counts(lines, ctx.option("lowercase").lower() == "true")
    out = totals.select(F.col("word").alias("key"), F.col("count").cast("string").alias("value"))
    return ctx.write_stream(out, ctx.option("output"), mode="update")
