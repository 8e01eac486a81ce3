"""Event-time windowed counts with a watermark: events per key per window, topic to topic.

Event time is the record timestamp, or a field of a JSON value (option `time_field`, epoch
seconds/millis or an ISO timestamp). Output mode is append: a (key, window) count is written once,
when the watermark (max event time seen minus `watermark`) passes the window's end; later events
for a closed window are dropped, as Spark's watermark semantics say.
Output record: key = "<key>@<window start ISO>", value = JSON {key, window_start, window_end, count}.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import functions as F

DESCRIPTION = "event-time windowed counts per key with a watermark (append mode) -> output topic as JSON"
KIND = "streaming"
OPTIONS = {
    "input": "events",
    "output": "event-counts",
    "window": "10 seconds",
    "watermark": "10 seconds",
    "time_field": "",
}
INPUT_TOPICS = ("input",)
OUTPUT_TOPICS = ("output",)


def event_time(records: Any, time_field: str) -> Any:
    """records with `key` (string) and `event_time` (timestamp) columns."""
    key = F.coalesce(F.col("key").cast("string"), F.lit(""))
    if not time_field:
        return records.select(key.alias("key"), F.col("timestamp").alias("event_time"))
    raw = F.get_json_object(F.col("value").cast("string"), f"$.{time_field}")
    num = raw.cast("double")
    # numbers above 1e11 are epoch millis, below are epoch seconds; anything else is parsed as a timestamp
    ts = F.when(num.isNotNull(), F.timestamp_seconds(F.when(num > 1e11, num / 1000).otherwise(num))).otherwise(
        raw.cast("timestamp")
    )
    return records.select(key.alias("key"), ts.alias("event_time")).where(F.col("event_time").isNotNull())


def windowed(events: Any, window: str, watermark: str) -> Any:
    w = events.withWatermark("event_time", watermark).groupBy(F.window("event_time", window), "key").count()
    return w.select(
        "key", F.col("window.start").alias("window_start"), F.col("window.end").alias("window_end"), "count"
    )


def build(ctx: Any) -> Any:
    events = event_time(ctx.read_stream(ctx.option("input")), ctx.option("time_field"))
    counts = windowed(events, ctx.option("window"), ctx.option("watermark"))
    iso = "yyyy-MM-dd'T'HH:mm:ss'Z'"
    out = counts.select(
        F.concat_ws("@", "key", F.date_format("window_start", iso)).alias("key"),
        F.to_json(
            F.struct(
                "key",
                F.date_format("window_start", iso).alias("window_start"),
                F.date_format("window_end", iso).alias("window_end"),
                "count",
            )
        ).alias("value"),
    )
    return ctx.write_stream(out, ctx.option("output"), mode="append")
