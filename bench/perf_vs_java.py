#!/usr/bin/env python3
"""Benchmark: `clusterctl perf produce` against Java's kafka-producer-perf-test.sh on a real Apache Kafka.

Needs CLUSTERCTL_KAFKA_DIST: a Kafka 3.x distribution (a .tgz or an unpacked directory). The script starts
ZooKeeper and one Kafka broker (ZK mode) from it on loopback, or uses CLUSTERCTL_BOOTSTRAP_SERVER if set
(required for Kafka 4.x, which has no ZK mode). For 100 B and 1 KiB records with acks=1 it runs both
tools alternately with the same settings (linger.ms, batch.size, no compression), >= 3 runs each, and
prints medians and the ratio clusterctl/java. Both sides are timed by their own clock (first send to
last ack), which is what both tools print. Without CLUSTERCTL_KAFKA_DIST it says so and exits 0.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("COLUMNS", "170")

from perf_vs_kcat import run_clusterctl  # noqa: E402

from clusterctl.kafka import admin  # noqa: E402
from clusterctl.output import Column, emit, info  # noqa: E402
from clusterctl.testing.tansu import free_port, wait_for_port  # noqa: E402

DIST_ENV = "CLUSTERCTL_KAFKA_DIST"
LINGER_MS = 5
BATCH_SIZE = 262_144  # same bytes-per-partition-batch on both sides (Java's default of 16 KiB would handicap it)
CASES = [(100, 1_000_000), (1024, 300_000)]
JAVA_LINE = re.compile(
    r"(?P<records>\d+) records sent, (?P<rps>[\d.]+) records/sec \((?P<mbps>[\d.]+) MB/sec\), "
    r"(?P<avg>[\d.]+) ms avg latency, (?P<max>[\d.]+) ms max latency, (?P<p50>\d+) ms 50th, (?P<p95>\d+) ms 95th, "
    r"(?P<p99>\d+) ms 99th, (?P<p999>\d+) ms 99.9th"
)


@dataclass
class Row:
    record_size: int
    records: int
    tool: str
    rates: list[float] = field(default_factory=list)
    p99_ms: list[float] = field(default_factory=list)
    median_rps: float = 0.0
    median_mbps: float = 0.0
    median_p99_ms: float = 0.0
    ratio_vs_java: float | None = None


def parse_java_summary(stdout: str) -> dict[str, float]:
    """The final line of kafka-producer-perf-test.sh (the one with percentiles)."""
    for line in reversed(stdout.splitlines()):
        m = JAVA_LINE.search(line)
        if m:
            return {k: float(v) for k, v in m.groupdict().items()}
    raise SystemExit(f"no summary line in kafka-producer-perf-test.sh output: {stdout.strip()[-300:]}")


def unpack(dist: Path, into: Path) -> Path:
    if dist.is_dir():
        return dist
    with tarfile.open(dist) as tf:
        tf.extractall(into, filter="data")
    tops = [p for p in into.iterdir() if p.is_dir()]
    if len(tops) != 1 or not (tops[0] / "bin").is_dir():
        raise SystemExit(f"{dist} does not look like a Kafka distribution (no single top directory with bin/)")
    return tops[0]


class LocalKafka:
    """ZooKeeper + one broker from the distribution, on loopback ports, data in a temp dir."""

    def __init__(self, home: Path, work: Path) -> None:
        self.home, self.work = home, work
        self.procs: list[subprocess.Popen[bytes]] = []
        self.zk_port, self.port = free_port(), free_port()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def _start(self, script: str, props: Path, log: str) -> None:
        env = {**os.environ, "LOG_DIR": str(self.work / "logs")}
        env.pop("JMX_PORT", None)  # the seed's pitfall: a global JMX_PORT breaks every second JVM
        fh = (self.work / log).open("wb")
        self.procs.append(
            subprocess.Popen(
                [str(self.home / "bin" / script), str(props)], stdout=fh, stderr=subprocess.STDOUT, env=env
            )
        )

    def start(self) -> None:
        if not (self.home / "bin" / "zookeeper-server-start.sh").exists():
            raise SystemExit("this distribution has no ZooKeeper mode (Kafka 4.x): set CLUSTERCTL_BOOTSTRAP_SERVER")
        zk = self.work / "zookeeper.properties"
        zk.write_text(
            f"dataDir={self.work / 'zk'}\nclientPort={self.zk_port}\nclientPortAddress=127.0.0.1\n"
            "admin.enableServer=false\nmaxClientCnxns=0\n"
        )
        self._start("zookeeper-server-start.sh", zk, "zookeeper.out")
        wait_for_port("127.0.0.1", self.zk_port, timeout=60)
        server = self.work / "server.properties"
        server.write_text(
            f"broker.id=0\nlisteners=PLAINTEXT://127.0.0.1:{self.port}\n"
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}\nlog.dirs={self.work / 'kafka-logs'}\n"
            f"zookeeper.connect=127.0.0.1:{self.zk_port}\noffsets.topic.replication.factor=1\n"
            "transaction.state.log.replication.factor=1\ntransaction.state.log.min.isr=1\n"
            "group.initial.rebalance.delay.ms=0\nauto.create.topics.enable=false\n"
        )
        self._start("kafka-server-start.sh", server, "kafka.out")
        wait_for_port("127.0.0.1", self.port, timeout=90)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # the port opens before the broker registers
            try:
                if admin.cluster_info(self.bootstrap).brokers:
                    return
            except Exception:
                time.sleep(1)
        raise SystemExit(f"Kafka did not come up; see {self.work / 'kafka.out'}")

    def stop(self) -> None:
        for p in reversed(self.procs):
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait(timeout=10)


def run_java(home: Path, bootstrap: str, topic: str, size: int, records: int) -> dict[str, float]:
    cmd = [
        str(home / "bin" / "kafka-producer-perf-test.sh"),
        "--topic", topic, "--num-records", str(records), "--record-size", str(size), "--throughput", "-1",
        "--producer-props", f"bootstrap.servers={bootstrap}", "acks=1", f"linger.ms={LINGER_MS}",
        f"batch.size={BATCH_SIZE}", "compression.type=none",
    ]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k != "JMX_PORT"}
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"kafka-producer-perf-test.sh failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    return parse_java_summary(proc.stdout)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--scale", type=float, default=1.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    dist = os.environ.get(DIST_ENV)
    if not dist:
        print(
            f"perf_vs_java: skipped, {DIST_ENV} is not set (no Apache Kafka distribution exists in this workplace; "
            "set it to a Kafka 3.x .tgz or directory to compare against kafka-producer-perf-test.sh)"
        )
        return 0
    if args.runs < 3:
        ap.error("--runs must be at least 3")
    work = Path(tempfile.mkdtemp(prefix="bench-java-"))
    home = unpack(Path(dist), work / "dist")
    external = os.environ.get("CLUSTERCTL_BOOTSTRAP_SERVER")
    kafka = None if external else LocalKafka(home, work)
    rows: list[Row] = []
    try:
        if kafka is not None:
            kafka.start()
        bootstrap = external or kafka.bootstrap  # type: ignore[union-attr]
        info(f"Kafka at {bootstrap}; java tool from {home}")
        seq = 0
        for size, base in CASES:
            records = max(10_000, int(base * args.scale))
            java, cc = Row(size, records, "kafka-producer-perf-test.sh"), Row(size, records, "clusterctl perf produce")
            for i in range(args.runs):
                for tool in ("java", "clusterctl") if i % 2 == 0 else ("clusterctl", "java"):
                    seq += 1
                    topic = f"bench-java-{size}-{seq}"
                    admin.create_topic(bootstrap, topic, 1, 1)
                    if tool == "java":
                        s = run_java(home, bootstrap, topic, size, records)
                        java.rates.append(s["rps"])
                        java.p99_ms.append(s["p99"])
                    else:
                        res, _ = run_clusterctl(bootstrap, topic, size, records, "auto", [], batch_size=BATCH_SIZE)
                        cc.rates.append(res["records_per_sec"])
                        cc.p99_ms.append(res["p99_ms"])
                    admin.delete_topic(bootstrap, topic)
            for row in (java, cc):
                row.median_rps = round(statistics.median(row.rates), 1)
                row.median_mbps = round(row.median_rps * size / 2**20, 2)
                row.median_p99_ms = statistics.median(row.p99_ms)
            cc.ratio_vs_java = round(cc.median_rps / java.median_rps, 3)
            rows += [java, cc]
    finally:
        if kafka is not None:
            kafka.stop()
        shutil.rmtree(work, ignore_errors=True)
    emit(
        {"bootstrap": bootstrap, "batch.size": BATCH_SIZE, "linger.ms": LINGER_MS, "acks": "1", "rows": rows},
        as_json=args.json,
        rows=rows,
        title=f"perf produce vs kafka-producer-perf-test.sh, acks=1, medians of {args.runs} runs",
        columns=[
            Column("Size", "record_size", justify="right", fmt=lambda v: f"{v} B"),
            Column("Records", "records", justify="right"),
            Column("Tool", "tool"),
            Column("Median records/s", "median_rps", justify="right", fmt=lambda v: f"{v:,.0f}"),
            Column("Median MB/s", "median_mbps", justify="right"),
            Column("Median p99 (ms)", "median_p99_ms", justify="right"),
            Column("Ratio vs java", "ratio_vs_java", justify="right", fmt=lambda v: "-" if v is None else f"{v:.2f}"),
        ],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
