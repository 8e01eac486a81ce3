"""The end-to-end half of bench/perf_vs_java.py (see its docstring): `clusterctl perf e2e` against Kafka's
EndToEndLatency tool (one record in flight) and against Kafka's Java clients at the same fixed rate, measured
the same way (bench/E2ELatencyAtRate.java), with the broker's GC pauses during each run from its GC log."""

from __future__ import annotations

import json
import os
import re
import statistics
import subprocess
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from java_runs import PercentileRuns, fresh_topic, java_env, rotated
from perf_vs_kcat import clusterctl_cmd

from clusterctl.output import Column, emit, info

E2E_RATE = 10_000
E2E_TOOL = "org.apache.kafka.tools.EndToEndLatency"  # Kafka 3.5+; kafka.tools.EndToEndLatency before
AT_RATE_SOURCE = Path(__file__).resolve().parent / "E2ELatencyAtRate.java"
JAVA_WARM_UP_S = 5  # untimed seconds at the rate inside each Java-clients run: its fresh JVM's JIT warms up
JAVA_E2E = re.compile(r"Percentiles: 50th = (?P<p50>\d+), 99th = (?P<p99>\d+), 99.9th = (?P<p999>\d+)")
AT_RATE_LINE = re.compile(
    r"e2e: records \d+ received (?P<received>\d+) achieved/s (?P<rate>[\d.]+) p50 (?P<p50>[\d.]+) "
    r"p99 (?P<p99>[\d.]+) p99.9 (?P<p999>[\d.]+) max [\d.]+ cpu_s (?P<cpu>[\d.]+)"
)
# `perf e2e` as it was before it capped requests in flight and read uncommitted (librdkafka's defaults)
BEFORE_PROPS = ["--producer-prop", "max.in.flight.requests.per.connection=1000000",
                "--consumer-prop", "isolation.level=read_committed"]  # fmt: skip
# a pause in the broker's GC log (`-Xlog:gc*:...:time,tags`): its wall-clock start and length; G1 logs each
# under `gc`, ZGC its (sub-millisecond) Pause Mark Start / Mark End / Relocate Start under `gc,phases`
GC_PAUSE = re.compile(r"^\[(?P<at>[^\]]+)\]\[gc(?:,phases)?\s*\] GC\(\d+\) Pause .* (?P<ms>[\d.]+)ms$")


@dataclass
class E2ERow(PercentileRuns):
    tool: str
    records: int
    target: str
    rates: list[float] = field(default_factory=list)
    p50s: list[float] = field(default_factory=list)
    p99s: list[float] = field(default_factory=list)
    p999s: list[float] = field(default_factory=list)
    gc_shares: list[float] = field(default_factory=list)  # broker GC pause ms per second of the run (%)
    rate: float = 0.0
    p50_ms: float = 0.0
    p99_ms: float = 0.0
    p999_ms: float = 0.0
    gc_share_pct: float | None = None
    sched_p99s: list[float] = field(default_factory=list)  # from each record's slot in the schedule (fixed rate)
    sched_p99_ms: float | None = None
    cpu_s: list[float] = field(default_factory=list)  # the client's CPU seconds over the timed phase (fixed rate)
    compared_to: str = "-"  # the row measured the same way
    p99_le: bool | None = None

    def add(self, got: dict[str, float], gc_share: float | None) -> None:
        self.add_run(got.get("rate", 0.0), got["p50"], got["p99"], got["p999"])
        if gc_share is not None:
            self.gc_shares.append(gc_share)
        if "sched_p99" in got:
            self.sched_p99s.append(got["sched_p99"])
        if "cpu" in got:
            self.cpu_s.append(got["cpu"])

    def settle(self) -> None:
        self.rate, self.p50_ms, self.p99_ms, self.p999_ms = self.medians()
        self.sched_p99_ms = statistics.median(self.sched_p99s) if self.sched_p99s else None
        self.gc_share_pct = round(statistics.median(self.gc_shares), 2) if self.gc_shares else None


def run_java_e2e(home: Path, bootstrap: str, topic: str, records: int) -> dict[str, float]:
    cmd = [str(home / "bin" / "kafka-run-class.sh"), E2E_TOOL, bootstrap, topic, str(records), "1", "100"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=900, env=java_env())
    m = JAVA_E2E.search(proc.stdout)
    if proc.returncode != 0 or m is None:
        raise SystemExit(f"{E2E_TOOL} failed ({proc.returncode}): {(proc.stderr or proc.stdout).strip()[-500:]}")
    return {k: float(v) for k, v in m.groupdict().items()}


def run_java_at_rate(home: Path, bootstrap: str, topic: str, records: int, rate: int) -> dict[str, float]:
    """Kafka's Java clients at `rate`, measured as `perf e2e` is (bench/E2ELatencyAtRate.java, run as a
    single-file program by kafka-run-class.sh: the tools' JVM options and the installation's client jars),
    after JAVA_WARM_UP_S untimed seconds at the rate in the same JVM."""
    cmd = [str(home / "bin" / "kafka-run-class.sh"), str(AT_RATE_SOURCE), bootstrap, topic, str(records),
           str(rate), "100", str(JAVA_WARM_UP_S)]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=java_env())
    m = AT_RATE_LINE.search(proc.stdout)
    if proc.returncode != 0 or m is None:
        raise SystemExit(f"{AT_RATE_SOURCE.name} failed ({proc.returncode}): {(proc.stderr or proc.stdout)[-500:]}")
    got = {k: float(v) for k, v in m.groupdict().items()}
    if got["received"] < records:
        raise SystemExit(f"{AT_RATE_SOURCE.name} received {got['received']:.0f} of {records}")
    return got


def run_cc_e2e(
    bootstrap: str, topic: str, records: int, rate: int | None, props: list[str] | None = None
) -> dict[str, float]:
    """`perf e2e` at `rate` records/s, or with one record in flight (rate None); `props`: more options."""
    pace = ["--one-in-flight"] if rate is None else ["--throughput", str(rate)]
    cmd = [*clusterctl_cmd(), "perf", "e2e", topic, "-n", str(records), *pace, *(props or []),
           "--record-size", "100", "--acks", "1", "-b", bootstrap, "--json"]  # fmt: skip
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise SystemExit(f"clusterctl perf e2e failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    r = json.loads(proc.stdout)
    got = {"rate": r["records_per_sec"], "p50": r["p50_ms"], "p99": r["p99_ms"], "p999": r["p999_ms"]}
    return got if rate is None else {**got, "sched_p99": r["scheduled_p99_ms"], "cpu": r["cpu_seconds"]}


def gc_pause_share(gc_log: Path | None, start: float, end: float) -> float | None:
    """The broker's GC pause time that began between the wall-clock times `start` and `end`, as % of it."""
    if gc_log is None or not gc_log.exists() or end <= start:
        return None
    paused = 0.0
    for line in gc_log.read_text(errors="replace").splitlines():
        m = GC_PAUSE.match(line)
        if m and start <= datetime.strptime(m["at"], "%Y-%m-%dT%H:%M:%S.%f%z").timestamp() <= end:
            paused += float(m["ms"])
    return round(paused / 10 / (end - start), 2)


def _run_one(tool: str, home: Path, bootstrap: str, topic: str, n: int, rate: int) -> dict[str, float]:
    if tool == "java":
        return run_java_e2e(home, bootstrap, topic, n)
    if tool == "one":
        return run_cc_e2e(bootstrap, topic, n, None)
    if tool == "jrate":
        return run_java_at_rate(home, bootstrap, topic, n, rate)
    return run_cc_e2e(bootstrap, topic, n, rate, BEFORE_PROPS if tool == "old" else None)


def compare_e2e(
    home: Path, bootstrap: str, runs: int, records: int, seconds: float, rate: int = E2E_RATE,
    gc_log: Path | None = None, before: bool = False,
) -> list[E2ERow]:  # fmt: skip
    """Java's EndToEndLatency (`records`, one in flight) and ours the same way; ours and the Java clients at
    `rate` records/s for `seconds`, measured the same way. Rotating order, a fresh 1-partition topic each run
    (Java's tool reads one partition), 100 B, acks=1.

    The fixed-rate runs are about as long as the EndToEndLatency runs: at a fixed rate a stall of D ms delays
    rate x D records, with one in flight it delays one. One untimed round first, twice as long: the broker's
    JIT is cold, and a cold broker at 10k/s stalls for seconds. `before`: ours with BEFORE_PROPS too, in the
    same rotation."""
    at_rate = int(rate * seconds)
    rows = {
        "java": E2ERow("EndToEndLatency (1 in flight)", records, "-"),
        "one": E2ERow("clusterctl perf e2e --one-in-flight", records, "-", compared_to="EndToEndLatency"),
        "jrate": E2ERow("Java clients (E2ELatencyAtRate.java)", at_rate, f"{rate:,}/s"),
        "cc": E2ERow("clusterctl perf e2e", at_rate, f"{rate:,}/s", compared_to="Java clients at the rate"),
    }
    if before:
        rows["old"] = E2ERow(
            "clusterctl perf e2e, before", at_rate, f"{rate:,}/s", compared_to="Java clients at the rate"
        )
    for i, tool in rotated(list(rows), runs, warm_up=True):
        n = (records if i >= 0 else 1000) if tool in ("java", "one") else (at_rate if i >= 0 else 2 * at_rate)
        with fresh_topic(bootstrap, f"bench-java-e2e-{tool}-{i + 1}") as topic:
            start = time.time()
            try:
                got = _run_one(tool, home, bootstrap, topic, n, rate)
            except SystemExit as e:
                if i >= 0:
                    raise
                info(f"e2e warm-up {rows[tool].tool} failed (not counted): {e}")  # the broker was still cold
                continue
        share = gc_pause_share(gc_log, start, time.time())
        row = rows[tool]
        if i < 0:
            info(f"e2e warm-up {row.tool}: p99 {got['p99']} ms (not counted)")
            continue
        row.add(got, share)
        info(f"e2e run {i + 1} {row.tool}: p50 {got['p50']} p99 {got['p99']} p99.9 {got['p999']} ms, "
             f"load {os.getloadavg()[0]:.1f}, broker GC {share if share is not None else '-'} %")  # fmt: skip
    for row in rows.values():
        row.settle()
    # EndToEndLatency truncates each latency to whole ms, so ours is compared at that resolution
    rows["one"].p99_le = int(rows["one"].p99_ms) <= rows["java"].p99_ms
    for key in ("cc", "old") if before else ("cc",):
        rows[key].p99_le = rows[key].p99_ms <= rows["jrate"].p99_ms
    return list(rows.values())


def show_e2e(e2e: list[E2ERow], runs: int) -> None:
    if not e2e:
        return
    java_tool_p99 = e2e[0].p99_ms
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
             Column("client CPU s", "cpu_s", fmt=lambda v: " ".join(f"{x:g}" for x in v) or "-"),
             Column("broker GC %", "gc_share_pct", justify="right", fmt=lambda v: "-" if v is None else f"{v:g}"),
             Column("p99 <= (same measure)", "p99_le", fmt=lambda v: "-" if v is None else ("yes" if v else "NO")),
             Column("vs", "compared_to"),
         ])  # fmt: skip
    cc = next(r for r in e2e if r.tool == "clusterctl perf e2e")
    print(f"clusterctl perf e2e at {cc.target}: p99 {cc.p99_ms:g} ms; EndToEndLatency (1 in flight) p99 "
          f"{java_tool_p99:g} ms: {'<=' if int(cc.p99_ms) <= java_tool_p99 else '>'} (a fixed rate against one "
          "record in flight: not the same measure)")  # fmt: skip
