"""The consume half of bench/perf_vs_java.py (see its docstring): `clusterctl perf consume` against
kafka-consumer-perf-test.sh."""

from __future__ import annotations

import json
import statistics
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from java_runs import java_env, rotated
from perf_vs_kcat import clusterctl_cmd

from clusterctl.kafka import admin
from clusterctl.kafka.perf_consume_native import THROUGHPUT_CONFIG
from clusterctl.output import Column, emit, info

CONSUME_CASES = [(100, 2_000_000), (1024, 500_000)]
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


def run_java_consume(home: Path, bootstrap: str, topic: str, records: int) -> dict[str, float]:
    cmd = [str(home / "bin" / "kafka-consumer-perf-test.sh"), "--bootstrap-server", bootstrap, "--topic", topic,
           "--messages", str(records), "--timeout", "10000", *JAVA_CONSUME_ARGS]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=java_env())
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
        for i, tool in rotated(("java", "clusterctl"), runs):
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


def show_consume(consume: list[ConsumeRow], runs: int, bootstrap: str) -> None:
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
