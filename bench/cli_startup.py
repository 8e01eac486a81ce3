#!/usr/bin/env python3
"""Benchmark: how long the CLI takes to start, against the bare `python -c 'import typer, rich'`.

Runs each command as a fresh process (stdout to a pipe, as in a script or CI log), interleaved round by round
so that load on a shared machine hits every command alike, and prints the median wall time of N runs (10 by
default) and its ratio to the bare import. Targets (issue 15): `clusterctl --help` <= 2.5x, `clusterctl topic
list -b <broker>` against a running broker (tansu on loopback, started here) <= 3x. `topic --help`,
`--version` and a shell-completion request are measured too. Each run's CPU time (user + sys of the child)
is shown beside the wall time: on a shared machine it is far less sensitive to other jobs than the wall clock.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from clusterctl.kafka import admin  # noqa: E402
from clusterctl.output import Column, emit, info  # noqa: E402
from clusterctl.testing.tansu import start_tansu  # noqa: E402

TARGETS = {"clusterctl --help": 2.5, "clusterctl topic list -b <tansu>": 3.0}


@dataclass
class Row:
    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    runs_s: list[float] = field(default_factory=list)
    cpu_s: list[float] = field(default_factory=list)
    median_ms: float = 0.0
    ratio: float | None = None
    median_cpu_ms: float = 0.0
    cpu_ratio: float | None = None
    target: float | None = None
    meets: bool | None = None


def clusterctl() -> str:
    exe = Path(sys.executable).with_name("clusterctl")
    if not exe.exists():
        raise SystemExit(f"no clusterctl next to {sys.executable}: run with the venv's python")
    return str(exe)


def run_once(row: Row) -> tuple[float, float]:
    """(wall, cpu) seconds of one run."""
    env = {**os.environ, **row.env}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(row.argv, capture_output=True, text=True, env=env, timeout=60)
    took = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{row.name} failed ({proc.returncode}): {proc.stderr.strip()[-400:]}")
    return took, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=10, help="runs per command (median reported)")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    args = ap.parse_args()
    if args.runs < 3:
        ap.error("--runs must be at least 3")
    ctl = clusterctl()
    broker = start_tansu()
    try:
        bootstrap = broker.bootstrap
        for name in ("startup-a", "startup-b"):
            admin.create_topic(bootstrap, name, 3, 1)
        rows = [
            Row("python -c 'import typer, rich'", [sys.executable, "-c", "import typer, rich"]),
            Row("clusterctl --help", [ctl, "--help"]),
            Row("clusterctl topic --help", [ctl, "topic", "--help"]),
            Row("clusterctl topic list -b <tansu>", [ctl, "topic", "list", "-b", bootstrap]),
            Row("clusterctl --version", [ctl, "--version"]),
            Row(
                "completion: clusterctl topic <Tab>",
                [ctl],
                {"_CLUSTERCTL_COMPLETE": "complete_bash", "COMP_WORDS": "clusterctl topic ", "COMP_CWORD": "2"},
            ),
        ]
        for row in rows:  # warm the page cache; not counted
            run_once(row)
        for i in range(args.runs):
            order = rows if i % 2 == 0 else rows[::-1]
            for row in order:
                wall, cpu = run_once(row)
                row.runs_s.append(wall)
                row.cpu_s.append(cpu)
    finally:
        broker.stop()
    base = statistics.median(rows[0].runs_s)
    base_cpu = statistics.median(rows[0].cpu_s)
    for row in rows:
        med = statistics.median(row.runs_s)
        row.median_ms = round(med * 1000, 1)
        row.ratio = round(med / base, 2)
        row.median_cpu_ms = round(statistics.median(row.cpu_s) * 1000, 1)
        row.cpu_ratio = round(statistics.median(row.cpu_s) / base_cpu, 2)
        row.target = TARGETS.get(row.name)
        row.meets = None if row.target is None else row.ratio <= row.target
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    data = {"runs": args.runs, "baseline_ms": round(base * 1000, 1), "load_average_1m": round(load, 2), "rows": rows}
    emit(
        data,
        as_json=args.json,
        rows=rows,
        title=f"CLI start-up, median of {args.runs} runs (stdout piped), ratio vs bare import (wall clock; CPU beside)",
        columns=[
            Column("Command", "name"),
            Column("Runs (ms)", "runs_s", fmt=lambda v: " ".join(f"{x * 1000:.0f}" for x in v)),
            Column("Median ms", "median_ms", justify="right", fmt=lambda v: f"{v:.0f}"),
            Column("Ratio", "ratio", justify="right", fmt=lambda v: f"{v:.2f}x"),
            Column("CPU ms", "median_cpu_ms", justify="right", fmt=lambda v: f"{v:.0f}"),
            Column("CPU ratio", "cpu_ratio", justify="right", fmt=lambda v: f"{v:.2f}x"),
            Column("Target", "target", justify="right", fmt=lambda v: "-" if v is None else f"<= {v}x"),
            Column("Meets (wall)", "meets", fmt=lambda v: "-" if v is None else ("yes" if v else "NO")),
        ],
    )
    if not args.json:
        info(f"load average (1 min) at the end: {load:.2f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    sys.exit(main())
