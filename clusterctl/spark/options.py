"""Options of the `clusterctl-kafka` Spark data source, shared by its reader and its writer.

Names follow Spark's own Kafka connector (spark-sql-kafka); see `clusterctl.spark.source` for what
each option means.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass

FORMAT = "clusterctl-kafka"
SCHEMA = "key binary, value binary, topic string, partition int, offset long, timestamp timestamp, timestampType int"
EARLIEST = -2
LATEST = -1
#: how long a task waits for a record it knows exists before declaring the partition unreadable
DEFAULT_POLL_TIMEOUT_MS = 60_000

Offsets = dict[str, dict[str, int]]


@dataclass(frozen=True)
class KafkaOptions:
    """Parsed, validated source/sink options (shared by the reader and the writer)."""

    bootstrap: str
    topics: tuple[str, ...]
    starting: str | Offsets
    ending: str | Offsets
    max_offsets_per_trigger: int | None
    fail_on_data_loss: bool
    poll_timeout_ms: int
    sink_topic: str | None
    client: dict[str, str]
    #: the sink's micro-batch id, written as the `clusterctl.batch` header of every record (None: no header)
    batch_id: int | None = None

    @classmethod
    def parse(cls, options: Mapping[str, str], *, need_topics: bool) -> KafkaOptions:
        opts = {str(k).lower(): str(v) for k, v in options.items()}
        bootstrap = opts.get("kafka.bootstrap.servers") or opts.get("bootstrap.servers")
        if not bootstrap:
            raise ValueError(f"{FORMAT}: option kafka.bootstrap.servers is required")
        if "subscribepattern" in opts or "assign" in opts:
            raise ValueError(f"{FORMAT}: only the 'subscribe' option is supported (not subscribePattern/assign)")
        topics = tuple(t.strip() for t in opts.get("subscribe", "").split(",") if t.strip())
        if need_topics and not topics:
            raise ValueError(f"{FORMAT}: option subscribe (comma-separated topics) is required")
        max_per_trigger = opts.get("maxoffsetspertrigger")
        limit = int(max_per_trigger) if max_per_trigger else None
        if limit is not None and limit <= 0:
            raise ValueError(f"{FORMAT}: maxOffsetsPerTrigger must be positive, got {limit}")
        client = {
            k[len("kafka.") :]: v
            for k, v in options.items()
            if str(k).lower().startswith("kafka.") and str(k).lower() != "kafka.bootstrap.servers"
        }
        return cls(
            bootstrap=bootstrap,
            topics=topics,
            starting=_parse_offsets(opts.get("startingoffsets", "latest"), "startingOffsets", topics),
            ending=_parse_offsets(opts.get("endingoffsets", "latest"), "endingOffsets", topics),
            max_offsets_per_trigger=limit,
            fail_on_data_loss=opts.get("failondataloss", "true").lower() != "false",
            poll_timeout_ms=int(opts.get("kafkaconsumer.polltimeoutms", DEFAULT_POLL_TIMEOUT_MS)),
            sink_topic=opts.get("topic"),
            client=client,
            batch_id=int(opts["batchid"]) if opts.get("batchid") else None,
        )


def _parse_offsets(raw: str, what: str, topics: tuple[str, ...]) -> str | Offsets:
    value = raw.strip()
    if value.lower() in ("earliest", "latest"):
        return value.lower()
    try:
        parsed = json.loads(value)
        offsets = {str(t): {str(p): int(o) for p, o in parts.items()} for t, parts in parsed.items()}
    except (ValueError, AttributeError, TypeError):
        raise ValueError(
            f'{FORMAT}: {what} must be earliest, latest or JSON like {{"topic": {{"0": 23}}}}, got {raw!r}'
        ) from None
    unknown = sorted(set(offsets) - set(topics))
    if unknown and topics:
        raise ValueError(f"{FORMAT}: {what} names topics not in subscribe: {', '.join(unknown)}")
    return offsets
