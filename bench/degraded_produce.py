#!/usr/bin/env python3
"""Benchmark: acks=all produce latency with one follower delayed by 100 ms, against none, side by side.

Starts an isolated 3 ZooKeeper + 3 broker cluster of real Apache Kafka (offline images, clusterctl.testing), or uses
a running one (`--spec FILE`), creates a 1-partition topic with replication factor 3 and min.insync.replicas 2, and
runs `clusterctl perf produce --acks all --throughput N` in rounds: once clean, once with
`clusterctl chaos delay <follower> --ms 100` (everything that follower sends, its fetch requests included, leaves
100 ms late; healed with `chaos heal` after the round), alternating which goes first so both see the same machine
load. The delayed follower stays in the ISR (100 ms is far below replica.lag.time.max.ms), so every acks=all write
waits for its next fetch: a user should expect p50 and p99 to grow by about the delay. Prints p50/p99/max per round
and the medians over the rounds. Needs the Docker lock on a shared machine:

    flock /tmp/docker-tests.lock .venv/bin/python bench/degraded_produce.py --rounds 3
    .venv/bin/python bench/degraded_produce.py --spec clusterctl.yaml --json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
CLI = str(Path(sys.executable).parent / "clusterctl")
SPEC = {
    "profile": "offline",
    "zookeeper": {"nodes": 3, "tick_time_ms": 500},
    "kafka": {"engine": "kafka", "brokers": 3,
              "defaults": {"replication_factor": 3, "min_insync_replicas": 2, "heap": "384m"}},
    "kafka_manager": {"enabled": False},
}  # fmt: skip


@dataclass
class Round:
    round: int
    fault: str  # "none" or "delay 100ms kafka2"
    records: int
    failed: int
    records_per_sec: float
    p50_ms: float
    p99_ms: float
    max_ms: float


def clusterctl(spec: Path, *args: str, timeout: float = 600) -> Any:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    res = subprocess.run([CLI, "-s", str(spec), *args, "--json"], capture_output=True, text=True, cwd=spec.parent,
                         env=env, timeout=timeout)  # fmt: skip
    if res.returncode != 0:
        raise SystemExit(f"clusterctl {' '.join(args)} failed: {res.stderr.strip()[-500:]}")
    return json.loads(res.stdout)


def produce(spec: Path, topic: str, args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = clusterctl(
        spec, "perf", "produce", topic, "--num-records", str(args.records), "--record-size", str(args.record_size),
        "--throughput", str(args.throughput), "--acks", "all", "--no-create-topic",
    )  # fmt: skip
    return out


def run_rounds(spec: Path, args: argparse.Namespace) -> list[Round]:
    topic = f"bench-degraded-{uuid.uuid4().hex[:6]}"
    clusterctl(spec, "topic", "create", topic, "--partitions", "1", "--replication-factor", "3",
               "--config", "min.insync.replicas=2")  # fmt: skip
    (desc,) = clusterctl(spec, "topic", "describe", topic)
    part = desc["partitions"][0]
    follower = f"kafka{next(b for b in part['replicas'] if b != part['leader'])}"
    produce(spec, topic, argparse.Namespace(**{**vars(args), "records": min(args.records, 2000)}))  # warm-up
    rows: list[Round] = []
    for i in range(1, args.rounds + 1):
        for faulted in (False, True) if i % 2 else (True, False):
            label = "none"
            if faulted:
                clusterctl(spec, "chaos", "delay", follower, "--ms", str(args.ms))
                label = f"delay {args.ms}ms {follower}"
            try:
                r = produce(spec, topic, args)
            finally:
                if faulted:
                    clusterctl(spec, "chaos", "heal")
            rows.append(Round(i, label, r["delivered"], r["failed"], r["records_per_sec"], r["p50_ms"], r["p99_ms"],
                              r["max_latency_ms"]))  # fmt: skip
            print(f"round {i} {label:>22}: p50 {r['p50_ms']:8.1f} ms  p99 {r['p99_ms']:8.1f} ms  "
                  f"max {r['max_latency_ms']:8.1f} ms  {r['records_per_sec']:.0f} rec/s  failed {r['failed']}",
                  file=sys.stderr)  # fmt: skip
    return rows


def summarize(rows: list[Round]) -> dict[str, dict[str, float]]:
    """Medians over the rounds, without the fault and with it."""
    out = {}
    for name in ("none", "delay"):
        sel = [r for r in rows if (r.fault == "none") == (name == "none")]
        out[name] = {k: round(statistics.median(getattr(r, k) for r in sel), 1) for k in ("p50_ms", "p99_ms", "max_ms")}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", type=Path, help="a running cluster's spec (default: start an isolated one)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--records", type=int, default=15000)
    ap.add_argument("--throughput", type=int, default=1000, help="records/s (fixed)")
    ap.add_argument("--record-size", type=int, default=100)
    ap.add_argument("--ms", type=int, default=100, help="the follower's delay")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    cluster = None
    spec = args.spec
    if spec is None:
        from clusterctl.testing import KafkaCluster

        cluster = KafkaCluster(SPEC, engine="kafka", timeout=300).start()
        spec = cluster.spec_file
    try:
        rows = run_rounds(spec.resolve(), args)
    finally:
        if cluster is not None:
            cluster.stop()
    summary = summarize(rows)
    if args.json:
        print(json.dumps({"rounds": [asdict(r) for r in rows], "median": summary}, indent=2))
    else:
        print(f"{'median over ' + str(args.rounds) + ' rounds':<28}{'p50 ms':>10}{'p99 ms':>10}{'max ms':>10}")
        for name, s in summary.items():
            label = "no fault" if name == "none" else f"follower delayed {args.ms} ms"
            print(f"{label:<28}{s['p50_ms']:>10}{s['p99_ms']:>10}{s['max_ms']:>10}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
