"""What the benches against Kafka's Java tools share (bench/perf_vs_java.py, java_consume.py, java_e2e.py,
produce_side_by_side.py): where the Java tools come from, how kafka-producer-perf-test.sh runs and what its summary
says; the tools run alternately, each run on a fresh topic, and each figure is the median over the runs.

The Java tools are those of the Apache Kafka installation clusterctl assembles from Kafka's Maven Central
artifacts (clusterctl/images/kafka_maven.py), the same artifacts the clusterctl/kafka image carries: no second
source. CLUSTERCTL_KAFKA_DIST (a Kafka .tgz or an unpacked directory) overrides it."""

from __future__ import annotations

import contextlib
import os
import re
import statistics
import subprocess
import tarfile
from collections.abc import Iterator, Sequence
from pathlib import Path

from clusterctl.env import KAFKA_DIST_ENV
from clusterctl.images import kafka_maven
from clusterctl.kafka import admin

# the final line of kafka-producer-perf-test.sh (the one with percentiles)
JAVA_LINE = re.compile(
    r"(?P<records>\d+) records sent, (?P<rps>[\d.]+) records/sec \((?P<mbps>[\d.]+) MB/sec\), "
    r"(?P<avg>[\d.]+) ms avg latency, (?P<max>[\d.]+) ms max latency, (?P<p50>\d+) ms 50th, (?P<p95>\d+) ms 95th, "
    r"(?P<p99>\d+) ms 99th, (?P<p999>\d+) ms 99.9th"
)


def unpack(dist: Path, into: Path) -> Path:
    """A distribution's directory: `dist` itself, or the single top directory of the .tgz unpacked into `into`."""
    if dist.is_dir():
        return dist
    with tarfile.open(dist) as tf:
        tf.extractall(into, filter="data")
    tops = [p for p in into.iterdir() if p.is_dir()]
    if len(tops) != 1 or not (tops[0] / "bin").is_dir():
        raise SystemExit(f"{dist} does not look like a Kafka distribution (no single top directory with bin/)")
    return tops[0]


def kafka_home(work: Path, requested: str = kafka_maven.DEFAULT_KAFKA_VERSION) -> tuple[Path, str]:
    """The Kafka installation whose Java tools a bench runs, and where it came from: $CLUSTERCTL_KAFKA_DIST when
    set (unpacked into `work` if a .tgz), else the Maven-assembled installation of `requested` (assembled now
    if missing: Maven, cached in ~/.m2)."""
    dist = os.environ.get(KAFKA_DIST_ENV)
    if dist:
        return unpack(Path(dist), work / "dist"), KAFKA_DIST_ENV
    inst = kafka_maven.assemble(requested)
    return inst.path, f"Apache Kafka {inst.version} from Maven Central ({inst.action})"


def parse_java_summary(stdout: str) -> dict[str, float]:
    """The final line of kafka-producer-perf-test.sh (the one with percentiles)."""
    for line in reversed(stdout.splitlines()):
        m = JAVA_LINE.search(line)
        if m:
            return {k: float(v) for k, v in m.groupdict().items()}
    raise SystemExit(f"no summary line in kafka-producer-perf-test.sh output: {stdout.strip()[-300:]}")


def run_producer_perf(
    home: Path, bootstrap: str, topic: str, size: int, records: int, throughput: int, props: Sequence[str]
) -> dict[str, float]:
    """kafka-producer-perf-test.sh of `home` with these producer properties (k=v): its summary line."""
    cmd = [str(home / "bin" / "kafka-producer-perf-test.sh"), "--topic", topic, "--num-records", str(records),
           "--record-size", str(size), "--throughput", str(throughput),
           "--producer-props", f"bootstrap.servers={bootstrap}", *props]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=java_env())
    if proc.returncode != 0:
        raise SystemExit(f"kafka-producer-perf-test.sh failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    return parse_java_summary(proc.stdout)


def java_env() -> dict[str, str]:
    """This environment without JMX_PORT: a global JMX_PORT breaks every second JVM (the port is taken)."""
    return {k: v for k, v in os.environ.items() if k != "JMX_PORT"}


def rotated(tools: Sequence[str], runs: int, warm_up: bool = False) -> Iterator[tuple[int, str]]:
    """(run, tool) for every tool in each of `runs` rounds, the order rotated by one each round so that no tool
    always goes first; with `warm_up`, an untimed round -1 first."""
    for i in range(-1 if warm_up else 0, runs):
        k = i % len(tools)
        for tool in [*tools[k:], *tools[:k]]:
            yield i, tool


@contextlib.contextmanager
def fresh_topic(bootstrap: str, topic: str, partitions: int = 1, replication_factor: int = 1) -> Iterator[str]:
    """`topic`, created for one run and deleted after it."""
    admin.create_topic(bootstrap, topic, partitions, replication_factor)
    try:
        yield topic
    finally:
        admin.delete_topic(bootstrap, topic)


def medians(
    rates: list[float], p50s: list[float], p99s: list[float], p999s: list[float]
) -> tuple[float, float, float, float]:
    """The median rate (to 0.1 records/s) and the median p50, p99 and p99.9 over the runs."""
    return (round(statistics.median(rates), 1), statistics.median(p50s), statistics.median(p99s),
            statistics.median(p999s))  # fmt: skip


class PercentileRuns:
    """A row's rate and latency percentiles of each run (the dataclass's `rates`, `p50s`, `p99s`, `p999s`)."""

    rates: list[float]
    p50s: list[float]
    p99s: list[float]
    p999s: list[float]

    def add_run(self, rate: float, p50: float, p99: float, p999: float) -> None:
        for series, value in zip((self.rates, self.p50s, self.p99s, self.p999s), (rate, p50, p99, p999), strict=True):
            series.append(value)

    def medians(self) -> tuple[float, float, float, float]:
        return medians(self.rates, self.p50s, self.p99s, self.p999s)
