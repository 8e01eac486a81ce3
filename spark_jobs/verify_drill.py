"""Batch verifier: read a drill topic with Spark and check it against the drill's ledger.

The ledger (clusterctl.chaos.ledger, JSON Lines) lists every write the cluster acknowledged; the
check is the chaos module's own pure `verify`: no acknowledged write may be missing from the topic
and acknowledged writes keep their per-partition order. Duplicates and unacknowledged records that
made it in are counted, not failures. The topic is read from earliest to its current end offsets.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import functions as F

from clusterctl.chaos.ledger import read_ledger, verify
from clusterctl.errors import UsageError

DESCRIPTION = "batch: read a drill topic and check it against a drill ledger (no acknowledged write lost)"
KIND = "batch"
OPTIONS = {"ledger": "", "topic": ""}
INPUT_TOPICS = ("topic",)
OUTPUT_TOPICS: tuple[str, ...] = ()


def resolve_options(opts: dict[str, str]) -> dict[str, str]:
    """`ledger` is required; `topic` defaults to the one named in the ledger's header."""
    if not opts.get("ledger"):
        raise UsageError("job verify_drill needs --option ledger=<drill ledger file>")
    if not opts.get("topic"):
        return {**opts, "topic": read_ledger(opts["ledger"]).topic}
    return opts


def run(ctx: Any) -> dict[str, Any]:
    ledger = read_ledger(ctx.option("ledger"))
    topic = ctx.option("topic")
    records = ctx.read_batch(topic).select(
        "topic",
        "partition",
        "offset",
        F.col("key").cast("string").alias("key"),
        F.col("value").cast("string").alias("value"),
    )
    result = verify(ledger.entries, records.toLocalIterator())
    return {
        "ok": result.ok,
        "summary": result.summary(),
        "topic": topic,
        "ledger": ctx.option("ledger"),
        "acked": result.acked,
        "consumed": result.consumed,
        "lost": result.lost_count,
        "duplicated": result.duplicated_count,
        "unacked_present": result.unacked_present_count,
        "reordered": result.reordered_count,
        "moved": result.moved_count,
        "first_lost": [f"{e.topic}-{e.partition}@{e.offset} key={e.key} seq={e.seq}" for e in result.lost[:5]],
    }
