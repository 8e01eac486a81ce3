#!/usr/bin/env python3
"""Benchmark: `clusterctl perf produce/consume/e2e` against Kafka's own Java perf tools on a real Apache Kafka.

The Java tools, and the ZooKeeper and broker the script starts, come from the Apache Kafka installation clusterctl
assembles from Kafka's Maven Central artifacts (`--kafka-version`, default 3.9.x: the artifacts the
clusterctl/kafka image carries; assembled on first use with Maven, cached in ~/.m2); CLUSTERCTL_KAFKA_DIST (a
Kafka .tgz or an unpacked directory) overrides it. The script starts ZooKeeper and one Kafka broker (ZK mode)
from it on loopback, or uses CLUSTERCTL_BOOTSTRAP_SERVER if set (e.g. a cluster from `clusterctl up`; required
for Kafka 4.x, which has no ZK mode). Both tools run on this host with the same settings (acks=1, linger.ms,
batch.size, no compression), alternately, >= 3 runs each:

1. unthrottled, 100 B and 1 KiB records: medians of records/s, p99, and the ratio clusterctl/java;
2. at fixed rates (default 10k, 50k, 100k records/s, `--throughput` on both), 100 B records: medians of the
   achieved rate and of p50/p99/p99.9 side by side, and whether ours is <= Java's p99 at every rate that
   both tools reach (>= 95 % of the target). Java prints whole milliseconds (it truncates each latency), so
   our p99 is compared at that resolution too; both exact figures are shown.

3. consume (bench/java_consume.py): per size (2,000,000 x 100 B, 500,000 x 1 KiB; 3 partitions), one topic
   filled once, read whole by kafka-consumer-perf-test.sh and `clusterctl perf consume` alternately, each
   run with a fresh group (both tools' default): medians of the Java tool's columns (MB/s, records/s,
   rebalance ms, fetch ms, fetch MB/s, fetch records/s) side by side, and the ratios overall and fetch;
4. end-to-end latency (bench/java_e2e.py), 100 B, acks=1, a fresh 1-partition topic each run, medians of
   p50/p99/p99.9, each compared with the run measured the same way:
   - Kafka's EndToEndLatency tool (one record in flight: send, wait for the ack, poll until consumed; 10,000
     records, ~20 s here; whole ms) against `clusterctl perf e2e --one-in-flight` (ours at that resolution);
   - Kafka's Java clients at 10,000 records/s for 10 s (bench/E2ELatencyAtRate.java: every record, from its
     send call to its consumer's poll) against `clusterctl perf e2e` at the same rate, measured the same way;
   with the broker's GC pause share during each run (from its GC log, when the script started the broker).

`--parts` picks among produce (1 and 2), consume and e2e. Producing, both sides are timed by their own clock
(first send to last ack) and measure latency from the send call to the served acknowledgement.
A short run (about 30 s here): `--parts produce --scale 0.02 --rates 10000 --rate-seconds 2`.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("COLUMNS", "170")

from java_consume import ConsumeRow, compare_consume, show_consume  # noqa: E402
from java_e2e import E2ERow, compare_e2e, show_e2e  # noqa: E402
from java_runs import PercentileRuns, fresh_topic, kafka_home, medians, rotated, run_producer_perf  # noqa: E402
from perf_vs_kcat import run_clusterctl  # noqa: E402

from clusterctl.images.kafka_maven import DEFAULT_KAFKA_VERSION  # noqa: E402
from clusterctl.kafka import admin  # noqa: E402
from clusterctl.output import Column, emit, info  # noqa: E402
from clusterctl.testing.tansu import free_port, wait_for_port  # noqa: E402

LINGER_MS = 5
BATCH_SIZE = 262_144  # same bytes-per-partition-batch on both sides (Java's default of 16 KiB would handicap it)
CASES = [(100, 1_000_000), (1024, 300_000)]
RATES = (10_000, 50_000, 100_000)
REACHED = 0.95  # a rate counts as reached at >= 95 % of the target


@dataclass
class Row:
    record_size: int
    records: int
    tool: str
    rates: list[float] = field(default_factory=list)
    p50_ms: list[float] = field(default_factory=list)
    p99_ms: list[float] = field(default_factory=list)
    p999_ms: list[float] = field(default_factory=list)
    median_rps: float = 0.0
    median_mbps: float = 0.0
    median_p50_ms: float = 0.0
    median_p99_ms: float = 0.0
    median_p999_ms: float = 0.0
    ratio_vs_java: float | None = None


@dataclass
class RateRow(PercentileRuns):
    record_size: int
    target: int
    records: int
    tool: str
    rates: list[float] = field(default_factory=list)
    p50s: list[float] = field(default_factory=list)
    p99s: list[float] = field(default_factory=list)
    p999s: list[float] = field(default_factory=list)
    median_rps: float = 0.0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    p999_ms: float = 0.0
    reached: bool = False
    p99_le_java: bool | None = None  # ours only, at rates both tools reach


class LocalKafka:
    """ZooKeeper + one broker from the installation, on loopback ports, data in a temp dir.

    Only the two start scripts with a properties file: Apache's distribution and clusterctl's Maven-assembled
    installation (its own kafka-run-class.sh, which has no -daemon / -name / -loggc) both take that. The broker's
    GC log is asked for through KAFKA_OPTS, which both launchers pass on."""

    def __init__(self, home: Path, work: Path) -> None:
        self.home, self.work = home, work
        self.procs: list[subprocess.Popen[bytes]] = []
        self.zk_port, self.port = free_port(), free_port()

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def gc_log(self) -> Path:
        return self.work / "logs" / "broker-gc.log"

    def _start(self, script: str, props: Path, log: str, opts: str = "") -> None:
        env = {**os.environ, "LOG_DIR": str(self.work / "logs")}
        env.pop("JMX_PORT", None)  # the seed's pitfall: a global JMX_PORT breaks every second JVM
        if opts:
            env["KAFKA_OPTS"] = f"{env.get('KAFKA_OPTS', '')} {opts}".strip()
        fh = (self.work / log).open("wb")
        self.procs.append(
            subprocess.Popen(
                [str(self.home / "bin" / script), str(props)], stdout=fh, stderr=subprocess.STDOUT, env=env
            )
        )

    def start(self) -> None:
        if not (self.home / "bin" / "zookeeper-server-start.sh").exists():
            raise SystemExit("this installation has no ZooKeeper mode (Kafka 4.x): set CLUSTERCTL_BOOTSTRAP_SERVER")
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
        (self.work / "logs").mkdir(exist_ok=True)
        self._start("kafka-server-start.sh", server, "kafka.out", f"-Xlog:gc*:file={self.gc_log}:time,tags")
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


def run_java(home: Path, bootstrap: str, topic: str, size: int, records: int, throughput: int = -1) -> dict[str, float]:
    props = ["acks=1", f"linger.ms={LINGER_MS}", f"batch.size={BATCH_SIZE}", "compression.type=none"]
    return run_producer_perf(home, bootstrap, topic, size, records, throughput, props)


def produce_runs(
    home: Path, bootstrap: str, args: argparse.Namespace, size: int, records: int, target: int, prefix: str
) -> Iterator[tuple[int, str, tuple[float, float, float, float]]]:
    """Both producers at `target` records/s (-1: flat out), alternately, each run on a fresh topic: per run its
    number, the tool and its records/s, p50, p99 and p99.9 (ms)."""
    for seq, (i, tool) in enumerate(rotated(("java", "clusterctl"), args.runs), 1):
        topic = f"{prefix}-{seq}"
        with fresh_topic(bootstrap, topic, args.partitions, args.replication_factor):
            if tool == "java":
                s = run_java(home, bootstrap, topic, size, records, target)
                got = (s["rps"], s["p50"], s["p99"], s["p999"])
            else:
                extra = [] if target < 0 else ["--throughput", str(target)]
                res, _ = run_clusterctl(bootstrap, topic, size, records, "auto", extra, batch_size=BATCH_SIZE)
                got = (res["records_per_sec"], res["p50_ms"], res["p99_ms"], res["p999_ms"])
        yield i, tool, got


def run_fixed_rates(home: Path, bootstrap: str, args: argparse.Namespace, rates: list[int]) -> list[RateRow]:
    """Both tools at each fixed rate, alternately; medians of the achieved rate and the percentiles."""
    rows: list[RateRow] = []
    size = args.rate_record_size
    for target in rates:
        records = max(1_000, int(target * args.rate_seconds))
        java = RateRow(size, target, records, "kafka-producer-perf-test.sh")
        cc = RateRow(size, target, records, "clusterctl perf produce")
        for i, tool, got in produce_runs(home, bootstrap, args, size, records, target, f"bench-java-rate-{target}"):
            (java if tool == "java" else cc).add_run(*got)
            info(f"{target:,}/s run {i + 1} {tool}: {got[0]:,.0f}/s, p50 {got[1]} p99 {got[2]} p99.9 {got[3]} ms")
        for row in (java, cc):
            row.median_rps, row.p50_ms, row.p99_ms, row.p999_ms = row.medians()
            row.reached = row.median_rps >= REACHED * target
        if java.reached and cc.reached:
            # Java truncates every latency to whole ms; compare at that resolution
            cc.p99_le_java = math.floor(cc.p99_ms) <= java.p99_ms
        rows += [java, cc]
    return rows


def run_unthrottled(home: Path, bootstrap: str, args: argparse.Namespace) -> list[Row]:
    """Both producers flat out, alternately, per record size; medians."""
    rows: list[Row] = []
    for size, base in CASES:
        records = max(10_000, int(base * args.scale))
        java, cc = Row(size, records, "kafka-producer-perf-test.sh"), Row(size, records, "clusterctl perf produce")
        for i, tool, got in produce_runs(home, bootstrap, args, size, records, -1, f"bench-java-{size}"):
            row = java if tool == "java" else cc
            for series, value in zip((row.rates, row.p50_ms, row.p99_ms, row.p999_ms), got, strict=True):
                series.append(value)
            info(f"{size} B unthrottled run {i + 1} {tool}: done")
        for row in (java, cc):
            row.median_rps, row.median_p50_ms, row.median_p99_ms, row.median_p999_ms = medians(
                row.rates, row.p50_ms, row.p99_ms, row.p999_ms
            )
            row.median_mbps = round(row.median_rps * size / 2**20, 2)
        cc.ratio_vs_java = round(cc.median_rps / java.median_rps, 3)
        rows += [java, cc]
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the unthrottled record counts")
    ap.add_argument("--rates", default=",".join(str(r) for r in RATES), help="fixed rates in records/s ('' = none)")
    ap.add_argument("--rate-seconds", type=float, default=10.0, help="length of each fixed-rate run")
    ap.add_argument("--rate-record-size", type=int, default=100, help="record size of the fixed-rate runs")
    ap.add_argument("--no-unthrottled", action="store_true", help="only the fixed-rate runs")
    ap.add_argument("--partitions", type=int, default=1, help="partitions of each test topic")
    ap.add_argument("--replication-factor", type=int, default=1, help="RF of each test topic")
    ap.add_argument("--parts", default="produce,consume,e2e", help="which comparisons to run (comma-separated)")
    ap.add_argument("--consume-partitions", type=int, default=3, help="partitions of the consume test topics")
    ap.add_argument("--e2e-records", type=int, default=10_000, help="records per EndToEndLatency run (Java)")
    ap.add_argument("--e2e-seconds", type=float, default=10.0, help="seconds of each fixed-rate e2e run")
    ap.add_argument(
        "--e2e-before",
        action="store_true",
        help="also run perf e2e with librdkafka's in-flight and isolation defaults (the old settings)",
    )
    ap.add_argument(
        "--gc",
        choices=("default", "zgc"),
        default="default",
        help="garbage collector of every JVM started here (broker, ZooKeeper, Java tools): Kafka's default (G1) "
        "or ZGC, whose sub-millisecond pauses take the broker's GC out of a fixed-rate latency tail",
    )
    ap.add_argument(
        "--kafka-version",
        default=DEFAULT_KAFKA_VERSION,
        help=f"the Maven-assembled Kafka to run (3.9.2, 3.9.x, 4.x; default {DEFAULT_KAFKA_VERSION}); "
        "CLUSTERCTL_KAFKA_DIST, when set, wins",
    )
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    if args.gc == "zgc":  # kafka-run-class.sh puts this on every JVM's command line instead of its G1 flags
        os.environ["KAFKA_JVM_PERFORMANCE_OPTS"] = "-server -XX:+UseZGC -XX:+DisableExplicitGC -Djava.awt.headless=true"
    if args.runs < 3:
        ap.error("--runs must be at least 3")
    rates = [int(r) for r in args.rates.split(",") if r.strip()]
    work = Path(tempfile.mkdtemp(prefix="bench-java-"))
    home, source = kafka_home(work, args.kafka_version)
    external = os.environ.get("CLUSTERCTL_BOOTSTRAP_SERVER")
    kafka = None if external else LocalKafka(home, work)
    rows: list[Row] = []
    rate_rows: list[RateRow] = []
    consume_rows: list[ConsumeRow] = []
    e2e_rows: list[E2ERow] = []
    try:
        if kafka is not None:
            kafka.start()
        bootstrap = external or kafka.bootstrap  # type: ignore[union-attr]
        info(f"Kafka at {bootstrap}; Java tools from {home} ({source})")
        parts = set(args.parts.split(","))
        if "produce" in parts:
            rows = [] if args.no_unthrottled else run_unthrottled(home, bootstrap, args)
            rate_rows = run_fixed_rates(home, bootstrap, args, rates)
        if "consume" in parts:
            consume_rows = compare_consume(home, bootstrap, args.runs, args.scale, args.consume_partitions)
        if "e2e" in parts:
            gc_log = None if kafka is None else kafka.gc_log
            e2e_rows = compare_e2e(
                home, bootstrap, args.runs, args.e2e_records, args.e2e_seconds, gc_log=gc_log, before=args.e2e_before
            )
    finally:
        if kafka is not None:
            kafka.stop()
        shutil.rmtree(work, ignore_errors=True)
    both = [r for r in rate_rows if r.p99_le_java is not None]
    verdict = all(r.p99_le_java for r in both) if both else None
    settings = {"batch.size": BATCH_SIZE, "linger.ms": LINGER_MS, "acks": "1", "compression": "none"}
    if args.json:
        emit({"bootstrap": bootstrap, **settings, "rows": rows, "fixed_rates": rate_rows, "p99_le_java": verdict,
              "consume": consume_rows, "e2e": e2e_rows}, as_json=True)  # fmt: skip
        return 0
    fmt_ms = lambda v: f"{v:g}"  # noqa: E731
    if rows:
        emit(
            rows,
            as_json=False,
            title=f"unthrottled, acks=1, medians of {args.runs} runs ({bootstrap})",
            columns=[
                Column("Size", "record_size", justify="right", fmt=lambda v: f"{v} B"),
                Column("Records", "records", justify="right"),
                Column("Tool", "tool"),
                Column("Median records/s", "median_rps", justify="right", fmt=lambda v: f"{v:,.0f}"),
                Column("Median MB/s", "median_mbps", justify="right"),
                Column("p50 ms", "median_p50_ms", justify="right", fmt=fmt_ms),
                Column("p99 ms", "median_p99_ms", justify="right", fmt=fmt_ms),
                Column("p99.9 ms", "median_p999_ms", justify="right", fmt=fmt_ms),
                Column("Ratio vs java", "ratio_vs_java", justify="right",
                       fmt=lambda v: "-" if v is None else f"{v:.2f}"),
            ],
        )  # fmt: skip
    if rate_rows:
        emit(
            rate_rows,
            as_json=False,
            title=f"fixed rates, {args.rate_record_size} B, acks=1, {args.rate_seconds:g} s each, medians of "
            f"{args.runs} runs",
            columns=[
                Column("Target/s", "target", justify="right", fmt=lambda v: f"{v:,}"),
                Column("Tool", "tool"),
                Column("Achieved/s", "median_rps", justify="right", fmt=lambda v: f"{v:,.0f}"),
                Column("Reached", "reached"),
                Column("p50 ms", "p50_ms", justify="right", fmt=fmt_ms),
                Column("p99 ms", "p99_ms", justify="right", fmt=fmt_ms),
                Column("p99.9 ms", "p999_ms", justify="right", fmt=fmt_ms),
                Column("Runs p99 ms", "p99s", fmt=lambda v: " ".join(f"{x:g}" for x in v)),
                Column("p99 <= java", "p99_le_java", fmt=lambda v: "-" if v is None else ("yes" if v else "NO")),
            ],
        )
        shown = "-" if verdict is None else ("yes" if verdict else "NO")
        print(f"our p99 <= Java's at every fixed rate both tools reach: {shown}")
    show_consume(consume_rows, args.runs, bootstrap)
    show_e2e(e2e_rows, args.runs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
