#!/usr/bin/env python3
"""`clusterctl perf produce` beside Kafka's own ProducerPerformance on the same running cluster: one run each.

Both tools run on this host as clients of the spec's cluster, through its host-side bootstrap address (the one
every clusterctl command uses), with the same settings as bench/perf_vs_java.py (acks=1, linger.ms=5, batch.size
256 KiB, no compression), each on its own topic of the same partitions and replication factor, after an untimed
warm-up. The Java tool is kafka-producer-perf-test.sh of the Apache Kafka installation assembled from Maven
Central in the version the cluster's broker image runs (clusterctl/images/kafka_maven.py; CLUSTERCTL_KAFKA_DIST
overrides it). Printed: a two-row table of records/s, MB/s and avg / p50 / p99 / p99.9 latency (ms).

One run each shows the two side by side; it is not a benchmark (bench/perf_vs_java.py: medians of >= 3
alternating runs, fixed rates, consume, end to end). scripts/demo.sh runs this against its cluster. Without a
spec file it says so and exits 0.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("COLUMNS", "150")

from java_runs import kafka_home  # noqa: E402
from perf_vs_java import BATCH_SIZE, LINGER_MS, run_java  # noqa: E402
from perf_vs_kcat import run_clusterctl  # noqa: E402

from clusterctl.images.kafka_maven import DEFAULT_KAFKA_VERSION  # noqa: E402
from clusterctl.kafka import admin  # noqa: E402
from clusterctl.output import Column, emit, info  # noqa: E402
from clusterctl.spec.kafkadist import OFFLINE_KAFKA_REPO  # noqa: E402
from clusterctl.spec.model import ClusterSpec, load_spec  # noqa: E402
from clusterctl.spec.profiles import kafka_version_of  # noqa: E402


@dataclass
class Side:
    tool: str
    records_per_sec: float
    mb_per_sec: float
    avg_ms: float
    p50_ms: float
    p99_ms: float
    p999_ms: float


def broker_kafka_version(spec: ClusterSpec) -> str:
    """The Kafka version (exact, or a line) the spec's broker image runs, for the Java tools to match."""
    image = spec.broker_image
    repo, _, tag = image.rpartition(":")
    if repo == OFFLINE_KAFKA_REPO:
        return tag  # clusterctl/kafka:<exact version>
    found = kafka_version_of(image)
    return f"{found[0]}.{found[1]}.x" if found else DEFAULT_KAFKA_VERSION


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default="clusterctl.yaml", help="the cluster's spec file (default: ./clusterctl.yaml)")
    ap.add_argument("--topic", default="bench-side-by-side", help="ours; the Java tool's gets a -java suffix")
    ap.add_argument("-n", "--num-records", type=int, default=200_000)
    ap.add_argument("--record-size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=3)
    ap.add_argument("--replication-factor", type=int, help="default: the spec's")
    ap.add_argument("--warm-up", type=int, default=20_000, help="records of the untimed warm-up (0: none)")
    args = ap.parse_args()
    if not Path(args.spec).is_file():
        print(f"produce_side_by_side: skipped, no spec file {args.spec} (run it beside a cluster's clusterctl.yaml)")
        return 0
    spec = load_spec(args.spec)
    bootstrap = os.environ.get("CLUSTERCTL_BOOTSTRAP_SERVER") or spec.topology.bootstrap_servers
    rf = args.replication_factor or min(spec.kafka.defaults.replication_factor, spec.kafka.brokers)
    version = broker_kafka_version(spec)
    home, source = kafka_home(Path(tempfile.mkdtemp(prefix="bench-side-")), version)
    info(f"brokers {bootstrap} ({spec.broker_image}); Java tool {home}/bin/kafka-producer-perf-test.sh ({source})")
    java_topic = f"{args.topic}-java"
    for topic in (args.topic, java_topic):
        admin.create_topic(bootstrap, topic, args.partitions, rf, if_not_exists=True)
    if args.warm_up:
        warm = f"{args.topic}-warm-up"
        admin.create_topic(bootstrap, warm, args.partitions, rf, if_not_exists=True)
        run_clusterctl(bootstrap, warm, args.record_size, args.warm_up, "auto", [], batch_size=BATCH_SIZE)
        admin.delete_topic(bootstrap, warm)
    size, n = args.record_size, args.num_records
    j = run_java(home, bootstrap, java_topic, size, n)
    ours, _ = run_clusterctl(bootstrap, args.topic, size, n, "auto", [], batch_size=BATCH_SIZE)
    rows = [
        Side("kafka-producer-perf-test.sh (Java)", j["rps"], j["mbps"], j["avg"], j["p50"], j["p99"], j["p999"]),
        Side("clusterctl perf produce", ours["records_per_sec"], ours["mb_per_sec"], ours["avg_latency_ms"],
             ours["p50_ms"], ours["p99_ms"], ours["p999_ms"]),
    ]  # fmt: skip
    ms = lambda v: f"{v:g}"  # noqa: E731
    emit(
        rows,
        as_json=False,
        title=f"{n:,} x {size} B to {args.partitions} partitions (RF {rf}), acks=1, one run each",
        columns=[
            Column("Tool", "tool"),
            Column("records/s", "records_per_sec", justify="right", fmt=lambda v: f"{v:,.0f}"),
            Column("MB/s", "mb_per_sec", justify="right", fmt=lambda v: f"{v:.2f}"),
            Column("avg ms", "avg_ms", justify="right", fmt=ms),
            Column("p50 ms", "p50_ms", justify="right", fmt=ms),
            Column("p99 ms", "p99_ms", justify="right", fmt=ms),
            Column("p99.9 ms", "p999_ms", justify="right", fmt=ms),
        ],
    )
    print(f"both: linger.ms={LINGER_MS}, batch.size={BATCH_SIZE}, no compression; the Java tool prints whole ms")
    admin.delete_topic(bootstrap, java_topic)
    return 0


if __name__ == "__main__":
    sys.exit(main())
