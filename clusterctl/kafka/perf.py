"""Producer and consumer perf tests: what kafka-producer-perf-test.sh / kafka-consumer-perf-test.sh measure.

The roles live apart: perf_produce.py (the produce driver, its result, the `client` engine; perf_native.py is
the `native` one), perf_consume.py (the consumer group run), perf_topic.py (the test topic), latency.py
(HDR histogram, progress windows). This module is the face the CLI and tests use: `produce_test` runs a whole
`perf produce` (validate -> plan the topic -> disk guard -> create or cap the topic -> run), and the pieces are
re-exported under their old names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from clusterctl.kafka import clientprops, diskguard
from clusterctl.kafka.latency import ProduceWindow
from clusterctl.kafka.perf_produce import (
    PROGRESS_INTERVAL_S,
    ProduceResult,
    build_payloads,
    check_produce_args,
    max_record_bytes,
    perf_producer_config,
    run_produce,
)
from clusterctl.kafka.perf_topic import plan_topic, prepare_topic
from clusterctl.spec import validate


@dataclass
class ProduceRequest:
    """What `perf produce` was asked for; None partitions / RF take the target's defaults."""

    topic: str
    num_records: int
    record_size: int = 100
    payload_file: Path | None = None
    throughput: float = -1
    acks: str = "1"
    compression: str = "none"
    batch_size: int | None = None
    linger_ms: float | None = None
    extra_config: dict[str, str] = field(default_factory=dict)
    create_topic: bool = True
    partitions: int | None = None
    replication_factor: int | None = None
    retention_bytes: int | None = None
    force: bool = False
    disk_path: str | None = None
    engine: str = "auto"
    progress_interval: float = PROGRESS_INTERVAL_S


@dataclass
class ProduceTarget:
    """Where the records go: the bootstrap list, a created topic's default layout, and whether the brokers
    are the spec's own (local: their disk is the Docker data root's)."""

    bootstrap: str
    partitions: int = 1
    replication_factor: int = 1
    local: bool = False


def produce_test(
    req: ProduceRequest,
    target: Callable[[], ProduceTarget],
    *,
    progress: Callable[[ProduceWindow], None] | None = None,
    notify: Callable[[str], None] = lambda _line: None,
) -> ProduceResult:
    """One `perf produce`: every argument is checked before `target()` is asked and the cluster touched (a
    refused run leaves no topic behind); then the topic is planned, the disk guard consulted, the topic created
    or capped (`notify` hears about it) and the records sent."""
    from clusterctl.kafka import perf_native

    if req.retention_bytes is not None:
        validate.at_most(req.retention_bytes, "--retention-bytes", validate.INT64_MAX)
    clientprops.check(req.extra_config, "producer", "--producer-prop")
    conf = perf_producer_config("x:1", req.acks, req.compression, req.batch_size, req.linger_ms, req.extra_config)
    perf_native.check_config(conf)
    check_produce_args(req.num_records, req.throughput, req.engine)
    payloads = build_payloads(req.record_size, req.payload_file, max_bytes=max_record_bytes(conf))
    where = target()
    plan = plan_topic(
        where.bootstrap,
        req.topic,
        where.partitions if req.partitions is None else req.partitions,
        where.replication_factor if req.replication_factor is None else req.replication_factor,
    )
    size = sum(len(p) for p in payloads) // len(payloads)
    path, source = diskguard.resolve_path(req.disk_path, where.local)
    disk = diskguard.check(req.num_records, size, plan.replication_factor, path=path, source=source, force=req.force)
    created, note = prepare_topic(where.bootstrap, plan, create=req.create_topic, retention_bytes=req.retention_bytes)
    if created:
        notify(f"created topic {req.topic} ({plan.partitions} partitions, RF {plan.replication_factor})")
    if note:
        notify(note)
    result = run_produce(
        where.bootstrap,
        req.topic,
        req.num_records,
        payloads,
        throughput=req.throughput,
        acks=req.acks,
        compression=req.compression,
        batch_size=req.batch_size,
        linger_ms=req.linger_ms,
        extra_config=req.extra_config,
        progress=progress,
        progress_interval=req.progress_interval,
        engine=req.engine,
    )
    result.disk, result.topic_created, result.retention_bytes = disk, created, req.retention_bytes
    return result
