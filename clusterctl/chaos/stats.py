"""`scenario run NAME --repeat N`: run a scenario N times on the live cluster and summarize the runs.

Per run: acked / lost / duplicated writes, and for the main fault (the first that took leadership away)
the detection time, the slowest new leader, the first ISR shrink and the longest write gap. Over the runs:
median, p95 and max of each, plus the broker settings that bound them (bounds.py).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

METRICS = (
    "acked", "lost", "duplicated", "detected_s", "new_leader_s", "isr_shrunk_s", "write_gap_s", "stall_s",
    "metadata_gap_s",
)  # fmt: skip


@dataclass
class RunStats:
    run: int
    ok: bool
    acked: int | None
    lost: int | None
    duplicated: int | None
    detected_s: float | None
    new_leader_s: float | None
    write_gap_s: float | None
    fault: str | None  # "kill-leader broker 2"
    report: str | None
    error: str | None = None
    isr_shrunk_s: float | None = None  # fault → the target first left an ISR of a partition it followed
    stall_s: float | None = None  # the main fault's pipeline stall (the longest over its Spark jobs)
    spark_exact: bool | None = None  # verify_spark's verdict (None: no Spark job verified)
    spark_missing: int | None = None  # keys missing from the job's output
    spark_mismatched: int | None = None  # keys with another value than the input gives (a double count among them)
    interrupted: bool = False  # a stop signal ended this run (healed, reported; the series ends with it)
    metadata_gap_s: float | None = None  # metadata_probe: the longest time without a committed metadata write
    load_average: float | None = None  # the machine's 1-minute load average as the probe stopped
    metadata_gap_bound: str | None = None  # what bounds that gap in this run (the leader lost, or not)
    elections: str | None = None  # elections from outside the ISR: "elr 3 after 12.1s" (KIP-966's rules)
    safety: str | None = None  # the rule that kept acknowledged writes, or the election that lost them
    elected_by: str | None = None  # the main fault's new leader from outside the ISR: what bounds its times

    @property
    def verdict(self) -> str:
        return "INTERRUPTED" if self.interrupted else "PASS" if self.ok else "FAIL"


@dataclass
class Summary:
    metric: str
    n: int
    median: float | None
    p95: float | None
    max: float | None
    bound: str | None = None  # the setting that bounds it, e.g. "zookeeper.session.timeout.ms 6000"


@dataclass
class RepeatResult:
    scenario: str
    expect: str
    runs: list[RunStats]
    summary: list[Summary]
    passed: int
    bounds: dict[str, str] = field(default_factory=dict)
    loss_settings: list[str] = field(default_factory=list)
    report_html: str | None = None
    interrupted: bool = False

    @property
    def ok(self) -> bool:
        return not self.interrupted and self.passed == len(self.runs) and bool(self.runs)


def main_fault(result: Any) -> Any:
    """The fault that matters for failover numbers: the last that moved a leader, else the first whose target
    led a partition, else the first. Negative controls pause followers first (a short pause moves nothing, a
    long one may move the paused broker's own partitions) and then kill the leader: the kill is the failover."""
    faults = list(result.faults or [])
    moved = (f for f in reversed(faults)
             if any(p.led_by_target and p.time_to_new_leader_s is not None for p in f.partitions))  # fmt: skip
    led = (f for f in faults if any(p.led_by_target for p in f.partitions))
    return next(moved, None) or next(led, None) or (faults[0] if faults else None)


def run_stats(index: int, result: Any) -> RunStats:
    """One run's row, from a ScenarioResult."""
    v = result.verify
    f = main_fault(result)
    led = [p.time_to_new_leader_s for p in (f.partitions if f else []) if p.led_by_target]
    gaps = [p.write_gap_s for p in (f.partitions if f else []) if p.write_gap_s is not None]
    shrunk = [p.isr_shrunk_s for p in (f.partitions if f else []) if p.isr_shrunk_s is not None]
    return RunStats(
        run=index,
        ok=bool(result.ok),
        acked=v.acked if v else None,
        lost=v.lost_count if v else None,
        duplicated=v.duplicated_count if v else None,
        detected_s=f.detected_s if f else None,
        new_leader_s=None if not led or None in led else max(x for x in led if x is not None),
        write_gap_s=max(gaps) if gaps else None,
        fault=f"{f.action} {f.target}" if f else None,
        report=result.report_html,
        error=result.error,
        isr_shrunk_s=min(shrunk) if shrunk else None,
        interrupted=bool(getattr(result, "interrupted", False)),
        elections=", ".join(
            f"{e.rule} {e.leader}" + (f" after {e.leaderless_s:.1f}s" if e.leaderless_s is not None else "")
            for e in getattr(result, "elections", None) or []
            if e.rule != "isr"
        )
        or None,
        safety=getattr(result, "safety", None),
        elected_by=next((p.elected_by for p in (f.partitions if f else []) if p.led_by_target and p.elected_by), None),
        **_spark_stats(result, f),
        **_metadata_stats(result),
    )


def _metadata_stats(result: Any) -> dict[str, Any]:
    m = getattr(result, "metadata_writes", None)
    if m is None:
        return {}
    return {"metadata_gap_s": m.longest_gap_s, "load_average": m.load_average, "metadata_gap_bound": m.bound}


def _spark_stats(result: Any, fault: Any) -> dict[str, Any]:
    sv, pipeline = getattr(result, "spark", None), getattr(result, "pipeline", None)
    stalls = [s.stall_s for s in (pipeline.stalls if pipeline and fault else []) if s.t == fault.t and s.stall_s]
    return {
        "stall_s": max(stalls) if stalls else None,
        "spark_exact": None if sv is None else bool(sv.ok),
        "spark_missing": None if sv is None else sv.missing_count,
        "spark_mismatched": None if sv is None else sv.mismatched_count,
    }


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolated percentile (q in 0..100), like numpy's default."""
    xs = sorted(values)
    if len(xs) == 1:
        return xs[0]
    pos = (len(xs) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


def summarize(runs: list[RunStats], settings: dict[str, Any], action: str | None) -> list[Summary]:
    from clusterctl.chaos.bounds import LEADER_LOST, bounding_setting

    out = []
    for m in METRICS:
        values = [float(v) for r in runs if (v := getattr(r, m)) is not None]
        bound = None
        if action and m.endswith("_s"):
            bound = bounding_setting(action, m.removesuffix("_s"), True, settings)
        if m == "metadata_gap_s":
            bound = next((r.metadata_gap_bound for r in runs if r.metadata_gap_bound), None)
        elected = {r.elected_by for r in runs}
        if m in ("new_leader_s", "write_gap_s") and len(elected) == 1 and None not in elected:
            bound = elected.pop()  # every run's new leader came from outside the ISR the same way
        if not values:
            bound = bound if action not in LEADER_LOST else None  # a follower wiped: no election to bound
            out.append(Summary(m, 0, None, None, None, bound))
            continue
        out.append(
            Summary(
                m,
                len(values),
                round(statistics.median(values), 3),
                round(percentile(values, 95), 3),
                round(max(values), 3),
                bound,
            )
        )
    return out


def repeat(
    run_once: Callable[[int, Path], Any],
    n: int,
    base_dir: Path,
    scenario: Any,
    settings: dict[str, Any],
    on_run: Callable[[RunStats], None] | None = None,
) -> RepeatResult:
    """Call `run_once(i, dir)` (it runs the scenario and writes its reports in dir) n times; summarize.

    A stop signal (Ctrl-C, SIGTERM, SIGHUP) ends the whole series: the run it came in is healed and kept as an
    interrupted run (its report written), no further run starts, and the runs so far are summarized.
    """
    runs: list[RunStats] = []
    interrupted = False
    action = None
    for i in range(1, n + 1):
        try:
            result = run_once(i, base_dir / f"run-{i:02d}")
        except KeyboardInterrupt:
            interrupted = True
            break
        row = run_stats(i, result)
        runs.append(row)
        action = action or (main_fault(result).action if main_fault(result) else None)
        if on_run is not None:
            on_run(row)
        if row.interrupted:
            interrupted = True
            break
    return RepeatResult(
        scenario=scenario.name,
        expect=scenario.expect,
        runs=runs,
        summary=summarize([r for r in runs if not r.interrupted], settings, action),
        passed=sum(r.ok for r in runs),
        bounds={k: str(v) for k, v in settings.items()},
        loss_settings=scenario.loss_settings(),
        interrupted=interrupted,
    )
