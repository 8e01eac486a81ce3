"""The consume and end-to-end halves of bench/perf_vs_java.py (see its docstring): `clusterctl perf consume`
against kafka-consumer-perf-test.sh, and `clusterctl perf e2e` against Kafka's EndToEndLatency tool."""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from perf_vs_kcat import clusterctl_cmd

from clusterctl.kafka import admin
from clusterctl.kafka.perf_consume_native import THROUGHPUT_CONFIG
from clusterctl.output import Column, emit, info

CONSUME_CASES = [(100, 2_000_000), (1024, 500_000)]
E2E_RATE = 10_000
E2E_TOOL = "org.apache.kafka.tools.EndToEndLatency"  # Kafka 3.5+; kafka.tools.EndToEndLatency before
JAVA_E2E = re.compile(r"Percentiles: 50th = (?P<p50>\d+), 99th = (?P<p99>\d+), 99.9th = (?P<p999>\d+)")
# The Java tool gets our fetch size (its default, 1 MiB per partition, more than halves its rate here) and the
# OS's socket buffer, as librdkafka uses (the tool's default forces a 2 MiB receive buffer).
JAVA_CONSUME_ARGS = ["--fetch-size", str(THROUGHPUT_CONFIG["max.partition.fetch.bytes"]), "--socket-buffer-size", "-1"]
# kafka-consumer-perf-test.sh's summary columns, in its order
JAVA_CONSUME_COLS = ("mb", "mbps", "records", "rps", "rebalance_ms", "fetch_ms", "fetch_mbps", "fetch_rps")


@dataclass
class ConsumeRow:
    record_size: int
    records: int
    tool: str
    runs: dict[str, list[float]] = field(default_factory=dict)
    mbps: float = 0.0
    rps: float = 0.0
    rebalance_ms: float = 0.0
    fetch_ms: float = 0.0
    fetch_mbps: float = 0.0
    fetch_rps: float = 0.0
    ratio_vs_java: float | None = None
    fetch_ratio_vs_java: float | None = None

    def add(self, got: dict[str, float]) -> None:
        for k in ("mbps", "rps", "rebalance_ms", "fetch_ms", "fetch_mbps", "fetch_rps"):
            self.runs.setdefault(k, []).append(got[k])

    def settle(self) -> None:
        for k, values in self.runs.items():
            setattr(self, k, round(statistics.median(values), 2))


@dataclass
class E2ERow:
    tool: str
    records: int
    target: str
    rates: list[float] = field(default_factory=list)
    p50s: list[float] = field(default_factory=list)
    p99s: list[float] = field(default_factory=list)
    p999s: list[float] = field(default_factory=list)
    rate: float = 0.0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    p999_ms: float = 0.0
    sched_p99s: list[float] = field(default_factory=list)  # from each record's slot in the schedule (fixed rate)
    sched_p99_ms: float | None = None
    p99_le_java: bool | None = None


def _java_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "JMX_PORT"}


def run_java_consume(home: Path, bootstrap: str, topic: str, records: int) -> dict[str, float]:
    cmd = [str(home / "bin" / "kafka-consumer-perf-test.sh"), "--bootstrap-server", bootstrap, "--topic", topic,
           "--messages", str(records), "--timeout", "10000", *JAVA_CONSUME_ARGS]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=_java_env())
    if proc.returncode != 0:
        raise SystemExit(f"kafka-consumer-perf-test.sh failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    last = [ln for ln in proc.stdout.splitlines() if ln.strip() and not ln.startswith("start.time")][-1]
    got = dict(zip(JAVA_CONSUME_COLS, (float(x) for x in last.split(", ")[2:]), strict=True))
    if got["records"] < records:
        raise SystemExit(f"kafka-consumer-perf-test.sh read {got['records']:.0f} of {records}: {proc.stdout[-300:]}")
    return got


def run_cc_consume(bootstrap: str, topic: str, records: int) -> dict[str, float]:
    cmd = [*clusterctl_cmd(), "perf", "consume", topic, "-n", str(records), "-b", bootstrap, "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"clusterctl perf consume failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    r = json.loads(proc.stdout)
    return {"mbps": r["mb_per_sec"], "rps": r["records_per_sec"], "rebalance_ms": r["rebalance_time_ms"],
            "fetch_ms": r["fetch_time_ms"], "fetch_mbps": r["fetch_mb_per_sec"],
            "fetch_rps": r["fetch_records_per_sec"]}  # fmt: skip


def fill_topic(bootstrap: str, topic: str, size: int, records: int, partitions: int) -> None:
    cmd = [*clusterctl_cmd(), "perf", "produce", topic, "-n", str(records), "--record-size", str(size),
           "--partitions", str(partitions), "--reporting-interval", "3600", "-b", bootstrap, "--json"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"filling {topic} failed: {proc.stderr.strip()[-500:]}")


def compare_consume(home: Path, bootstrap: str, runs: int, scale: float, partitions: int) -> list[ConsumeRow]:
    """Per size: one topic, filled once; both tools read all of it alternately, each with a fresh group."""
    rows: list[ConsumeRow] = []
    for size, base in CONSUME_CASES:
        records = max(10_000, int(base * scale))
        topic = f"bench-java-consume-{size}"
        fill_topic(bootstrap, topic, size, records, partitions)
        java = ConsumeRow(size, records, "kafka-consumer-perf-test.sh")
        cc = ConsumeRow(size, records, "clusterctl perf consume")
        for i in range(runs):
            for tool in ("java", "clusterctl") if i % 2 == 0 else ("clusterctl", "java"):
                got = run_java_consume(home, bootstrap, topic, records) if tool == "java" else (
                    run_cc_consume(bootstrap, topic, records))  # fmt: skip
                (java if tool == "java" else cc).add(got)
                info(f"consume {size} B run {i + 1} {tool}: {got['rps']:,.0f}/s overall, "
                     f"{got['fetch_rps']:,.0f}/s fetch, rebalance {got['rebalance_ms']:.0f} ms")  # fmt: skip
        admin.delete_topic(bootstrap, topic)
        java.settle()
        cc.settle()
        cc.ratio_vs_java = round(cc.rps / java.rps, 2)
        cc.fetch_ratio_vs_java = round(cc.fetch_rps / java.fetch_rps, 2)
        rows += [java, cc]
    return rows


def run_java_e2e(home: Path, bootstrap: str, topic: str, records: int) -> dict[str, float]:
    cmd = [str(home / "bin" / "kafka-run-class.sh"), E2E_TOOL, bootstrap, topic, str(records), "1", "100"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=_java_env())
    m = JAVA_E2E.search(proc.stdout)
    if proc.returncode != 0 or m is None:
        raise SystemExit(f"{E2E_TOOL} failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip()[-500:]}")
    return {k: float(v) for k, v in m.groupdict().items()}


def run_cc_e2e(bootstrap: str, topic: str, records: int, rate: int | None) -> dict[str, float]:
    """`perf e2e` at `rate` records/s, or with one record in flight (rate None)."""
    pace = ["--one-in-flight"] if rate is None else ["--throughput", str(rate)]
    cmd = [*clusterctl_cmd(), "perf", "e2e", topic, "-n", str(records), *pace,
           "--record-size", "100", "--acks", "1", "-b", bootstrap, "--json"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"clusterctl perf e2e failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    r = json.loads(proc.stdout)
    got = {"rate": r["records_per_sec"], "p50": r["p50_ms"], "p99": r["p99_ms"], "p999": r["p999_ms"]}
    return got if rate is None else {**got, "sched_p99": r["scheduled_p99_ms"]}


def compare_e2e(
    home: Path, bootstrap: str, runs: int, records: int, seconds: float, rate: int = E2E_RATE
) -> list[E2ERow]:
    """Java's EndToEndLatency (`records`, one in flight), ours the same way, and ours at `rate` records/s for
    `seconds`, rotating, a fresh 1-partition topic each run (Java's tool reads one partition), 100 B, acks=1.

    The fixed-rate runs are about as long as Java's: at a fixed rate a stall of D ms delays rate x D records,
    with one in flight it delays one, so a short run would let a single stall of this shared machine decide
    its p99. One untimed round first: the broker's JIT is cold, and a cold broker at 10k/s stalls (ours runs
    twice as long in it: after a third of that the broker was still warming up here)."""
    java = E2ERow("EndToEndLatency (1 in flight)", records, "-")
    one = E2ERow("clusterctl perf e2e --one-in-flight", records, "-")
    cc = E2ERow("clusterctl perf e2e", int(rate * seconds), f"{rate:,}/s")
    tools = ["java", "one", "cc"]
    for i in range(-1, runs):
        for tool in tools[i % 3 :] + tools[: i % 3]:
            topic = f"bench-java-e2e-{tool}-{i + 1}"
            admin.create_topic(bootstrap, topic, 1, 1)
            if tool == "java":
                got = run_java_e2e(home, bootstrap, topic, records if i >= 0 else 1000)
            elif tool == "one":
                got = run_cc_e2e(bootstrap, topic, records, None)
            else:
                got = run_cc_e2e(bootstrap, topic, cc.records if i >= 0 else cc.records * 2, rate)
            admin.delete_topic(bootstrap, topic)
            row = {"java": java, "one": one, "cc": cc}[tool]
            if i < 0:
                info(f"e2e warm-up {row.tool}: p99 {got['p99']} ms (not counted)")
                continue
            row.rates.append(got.get("rate", 0.0))
            row.p50s.append(got["p50"])
            row.p99s.append(got["p99"])
            row.p999s.append(got["p999"])
            if "sched_p99" in got:
                row.sched_p99s.append(got["sched_p99"])
            info(f"e2e run {i + 1} {row.tool}: p50 {got['p50']} p99 {got['p99']} p99.9 {got['p999']} ms")
    for row in (java, one, cc):
        row.p50_ms = statistics.median(row.p50s)
        row.p99_ms = statistics.median(row.p99s)
        row.p999_ms = statistics.median(row.p999s)
        row.rate = round(statistics.median(row.rates), 1)
        row.sched_p99_ms = statistics.median(row.sched_p99s) if row.sched_p99s else None
    for row in (one, cc):
        row.p99_le_java = int(row.p99_ms) <= java.p99_ms  # Java truncates each latency to whole ms
    return [java, one, cc]


def show(consume: list[ConsumeRow], e2e: list[E2ERow], runs: int, bootstrap: str) -> None:
    ratio = lambda v: "-" if v is None else f"{v:.2f}"  # noqa: E731
    if consume:
        emit(consume, as_json=False, title=f"consume, medians of {runs} runs, fresh group each ({bootstrap})",
             columns=[
                 Column("Size", "record_size", justify="right", fmt=lambda v: f"{v} B"),
                 Column("Records", "records", justify="right"),
                 Column("Tool", "tool"),
                 Column("MB/s", "mbps", justify="right"),
                 Column("records/s", "rps", justify="right", fmt=lambda v: f"{v:,.0f}"),
                 Column("rebalance ms", "rebalance_ms", justify="right", fmt=lambda v: f"{v:,.0f}"),
                 Column("fetch ms", "fetch_ms", justify="right", fmt=lambda v: f"{v:,.0f}"),
                 Column("fetch MB/s", "fetch_mbps", justify="right"),
                 Column("fetch records/s", "fetch_rps", justify="right", fmt=lambda v: f"{v:,.0f}"),
                 Column("ratio", "ratio_vs_java", justify="right", fmt=ratio),
                 Column("fetch ratio", "fetch_ratio_vs_java", justify="right", fmt=ratio),
             ])  # fmt: skip
    if e2e:
        emit(e2e, as_json=False, title=f"end-to-end latency, 100 B, acks=1, medians of {runs} runs",
             columns=[
                 Column("Tool", "tool"),
                 Column("Records", "records", justify="right"),
                 Column("Rate", "target"),
                 Column("Achieved/s", "rate", justify="right", fmt=lambda v: f"{v:,.0f}" if v else "-"),
                 Column("p50 ms", "p50_ms", justify="right", fmt=lambda v: f"{v:g}"),
                 Column("p99 ms", "p99_ms", justify="right", fmt=lambda v: f"{v:g}"),
                 Column("p99.9 ms", "p999_ms", justify="right", fmt=lambda v: f"{v:g}"),
                 Column("p99 from schedule", "sched_p99_ms", justify="right",
                        fmt=lambda v: "-" if v is None else f"{v:g}"),
                 Column("Runs p99 ms", "p99s", fmt=lambda v: " ".join(f"{x:g}" for x in v)),
                 Column("p99 <= java", "p99_le_java", fmt=lambda v: "-" if v is None else ("yes" if v else "NO")),
             ])  # fmt: skip
