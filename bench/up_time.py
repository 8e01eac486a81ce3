#!/usr/bin/env python3
"""Benchmark: how long `up` takes to a healthy cluster, and `chaos heal` to a full ISR, with a breakdown.

Each run renders a fresh, isolated 3 ZooKeeper + 3 broker cluster (or KRaft: 3 controllers + 3 brokers) of real
Apache Kafka (offline images), times `Cluster.up` to clusterctl's health verdict, then creates a topic, SIGKILLs a
broker, waits until it has left the ISR, and times the heal (start it again, as `chaos heal` does) until the broker
is back in the ISR of every partition. The milestones come from the containers' own clocks: `docker inspect`
State.StartedAt, and the engine's receive time of the first and of telling log lines; ZooKeeper mode's registrations
and controller are the znodes' ctime. Every milestone is seconds after `up` was called (after the kill was seen, for
the heal).

With `--baseline DIR` (a checkout of other clusterctl code, e.g. `git worktree add /tmp/base main`) every run is
made twice, alternating which code goes first, so both see the same machine load; each run is a child process
with that checkout on PYTHONPATH; `--baseline-image` gives the baseline runs another Kafka image (one built before
an image change). Needs the Docker lock on a shared machine:

    flock /tmp/docker-tests.lock .venv/bin/python bench/up_time.py --mode zookeeper --runs 3
    .venv/bin/python bench/up_time.py --runs 5 --json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
MODES = ("zookeeper", "kraft")
TOPIC = "bench-up"
TARGETS = {"zookeeper": 12.0, "kraft": 12.0, "heal": 10.0}

# log lines that mark a milestone (docker's receive time of the line is its clock)
ZK_ELECTED = ("LEADING - LEADER ELECTION TOOK", "FOLLOWING - LEADER ELECTION TOOK")
KAFKA_STARTED = ("] started (kafka.server.KafkaServer)", "Kafka Server started")
KRAFT_LEADER = "Completed transition to Leader"
KRAFT_REGISTERED = "Successfully registered broker"
KRAFT_UNFENCED = "The broker has been unfenced"


@dataclass
class Run:
    mode: str
    code: str  # "current" or "baseline"
    healthy_s: float = 0.0  # clusterctl's health verdict: Cluster.up returned
    milestones: dict[str, float] = field(default_factory=dict)
    heal: dict[str, float] = field(default_factory=dict)
    error: str | None = None


# ---------------------------------------------------------------- clocks


def _ts(text: str) -> float:
    """An RFC 3339 timestamp with nanoseconds (docker's) as epoch seconds."""
    text = text.strip().rstrip("Z")
    head, _, frac = text.partition(".")
    return datetime.fromisoformat(head + "+00:00").timestamp() + float(f"0.{frac or 0}")


def _log_lines(container: Any, since: float | None = None) -> list[tuple[float, str]]:
    raw = container.logs(timestamps=True, since=int(since) if since else None).decode("utf-8", "replace")
    out = []
    for line in raw.splitlines():
        stamp, _, text = line.partition(" ")
        try:
            out.append((_ts(stamp), text))
        except ValueError:
            continue
    return [(t, s) for t, s in out if since is None or t >= since]


def _first(lines: list[tuple[float, str]], needles: tuple[str, ...] | str) -> float | None:
    needles = (needles,) if isinstance(needles, str) else needles
    return next((t for t, s in lines if any(n in s for n in needles)), None)


def _latest(values: list[float | None]) -> float | None:
    return None if not values or any(v is None for v in values) else max(v for v in values if v is not None)


def _kth(values: list[float | None], k: int) -> float | None:
    have = sorted(v for v in values if v is not None)
    return have[k - 1] if len(have) >= k else None


# ---------------------------------------------------------------- one run


def _spec_data(mode: str, image: str | None = None) -> dict[str, Any]:
    kafka: dict[str, Any] = {"engine": "kafka", "brokers": 3, "mode": mode}
    data: dict[str, Any] = {"profile": "offline", "kafka": kafka, "kafka_manager": {"enabled": False}}
    if image:
        data["images"] = {"kafka": image}
    if mode == "kraft":
        data["kraft"] = {"controllers": 3}
    else:
        data["zookeeper"] = {"nodes": 3}
    return data


def _up_milestones(cluster: Any, t0: float) -> dict[str, float]:
    spec = cluster.spec
    topo = spec.topology
    logs: dict[str, list[tuple[float, str]]] = {}
    started: list[float | None] = []
    for service in cluster.services():
        c = cluster.container(service)
        started.append(_ts(c.attrs["State"]["StartedAt"]))
        logs[service] = _log_lines(c)
    jvm = [lines[0][0] if lines else None for lines in logs.values()]
    brokers = [logs[topo.broker_service(b)] for b in topo.broker_ids]
    m: dict[str, float | None] = {"containers started": _latest(started), "first log line": _latest(jvm)}
    if spec.kraft_mode:
        voters = [logs[topo.controller_service(i)] for i in topo.dedicated_controller_ids]
        m["quorum leader"] = _kth([_first(v, KRAFT_LEADER) for v in voters], 1)
        m["brokers registered"] = _latest([_first(b, KRAFT_REGISTERED) for b in brokers])
        m["brokers unfenced"] = _latest([_first(b, KRAFT_UNFENCED) for b in brokers])
    else:
        zks = [logs[topo.zk_service(i)] for i in topo.zk_ids]
        m["ZK quorum"] = _kth([_first(z, ZK_ELECTED) for z in zks], len(zks) // 2 + 1)
        registered, m["controller znode"] = _znode_ctimes(topo.zk_connect, list(topo.broker_ids))
        m["brokers registered"] = _latest(registered)
    return {k: round(v - t0, 2) for k, v in m.items() if v is not None}


def _znode_ctimes(zk_connect: str, brokers: list[int]) -> tuple[list[float | None], float | None]:
    """ZooKeeper's creation time of each broker's /brokers/ids/N and of /controller (epoch seconds)."""
    from clusterctl.zookeeper import client as zk

    def ctime(client: Any, path: str) -> float | None:
        stat = client.exists(path)
        return stat.ctime / 1000 if stat is not None else None

    with zk.zk_client(zk_connect, timeout=3.0) as client:
        return [ctime(client, f"/brokers/ids/{b}") for b in brokers], ctime(client, "/controller")


def _heal(cluster: Any) -> dict[str, float]:
    """Kill broker 2, wait until it left the ISR, then heal and time it back into every ISR."""
    from clusterctl.chaos import recovery
    from clusterctl.kafka import admin

    spec = cluster.spec
    bootstrap = spec.topology.bootstrap_servers
    admin.create_topic(bootstrap, TOPIC, 6, 3)
    victim = spec.topology.broker_ids[1]
    service = spec.topology.broker_service(victim)
    cluster.kill(service)

    def out_of_isr() -> bool:
        parts = [p for t in admin.describe_topics(bootstrap, [TOPIC], timeout=5.0) for p in t.partitions]
        return all(victim not in p.isr for p in parts)

    from clusterctl.wait import wait_until

    wait_until(out_of_isr, timeout=120, what=f"broker {victim} out of the ISR", interval=0.5)
    t0 = time.time()
    recovery.heal_all(spec)
    recovery.wait_healed(spec, 120)
    recovery.wait_full_isr(bootstrap, 120)
    done = time.time()
    c = cluster.container(service)
    lines = _log_lines(c, since=t0 - 1)
    back = KRAFT_UNFENCED if spec.kraft_mode else KAFKA_STARTED
    m: dict[str, float | None] = {
        "container started": _ts(c.attrs["State"]["StartedAt"]),
        "first log line": lines[0][0] if lines else None,
        "broker back": _first(lines, back),
        "ISR full": done,
    }
    return {k: round(v - t0, 2) for k, v in m.items() if v is not None}


def save_logs(cluster: Any, services: list[str], since: float, where: Path) -> None:
    """Each service's stdout since `since` (docker's receive time first) into where/SERVICE.log, and Kafka's
    file-only logs (the quorum controller's controller.log, state-change.log) beside it."""
    where.mkdir(parents=True, exist_ok=True)
    for service in services:
        c = cluster.container(service)
        lines = _log_lines(c, since=since)
        stamp = "%H:%M:%S"
        text = "".join(f"{time.strftime(stamp, time.gmtime(t))}.{int(t % 1 * 1000):03d} {s}\n" for t, s in lines)
        (where / f"{service}.log").write_text(text)
        for name in ("controller.log", "state-change.log"):
            code, out = c.exec_run(["cat", f"/var/log/kafka/{name}"])
            if code == 0 and out:
                (where / f"{service}.{name}").write_bytes(out)


def one_run(mode: str, code: str, heal: bool, image: str | None = None, logs: Path | None = None) -> Run:
    from clusterctl.compose.render import render
    from clusterctl.runtime.cluster import Cluster
    from clusterctl.testing import specdata

    run = Run(mode, code)
    spec, _ = specdata.isolated(_spec_data(mode, image), True)
    work = Path(tempfile.mkdtemp(prefix=f"{spec.name}-"))
    render(spec, out_dir=work / spec.topology.compose_dir)
    cluster = Cluster(spec, root=work)
    try:
        t0 = time.time()
        cluster.up(240, keep_on_failure=True)
        run.healthy_s = round(time.time() - t0, 2)
        run.milestones = _up_milestones(cluster, t0)
        if heal:
            run.heal = _heal(cluster)
    except Exception as exc:  # a failed run is reported, the others still count
        run.error = getattr(exc, "message", None) or str(exc) or type(exc).__name__
        if logs is not None:  # every service's whole log, for the why
            save_logs(cluster, cluster.services(), 0, logs / f"{spec.name}")
    finally:
        cluster.down(volumes=True, kill_first=True)
    return run


def child_run(mode: str, code: str, pythonpath: Path, heal: bool, image: str | None, logs: Path | None) -> Run:
    """One run in a child process with `pythonpath`'s clusterctl (this script's code, that checkout's package)."""
    env = {**os.environ, "PYTHONPATH": str(pythonpath)}
    argv = [sys.executable, __file__, "--one", mode, "--code", code] + ([] if heal else ["--no-heal"])
    argv += ["--image", image] if image else []
    argv += ["--logs", str(logs)] if logs else []
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        return Run(mode, code, error=(proc.stderr.strip().splitlines() or ["failed"])[-1])
    return Run(**json.loads(proc.stdout))


# ---------------------------------------------------------------- summary


def medians(runs: list[Run]) -> list[dict[str, Any]]:
    """One row per (mode, code): the median of every milestone over the good runs."""
    rows: list[dict[str, Any]] = []
    for mode in MODES:
        for code in ("baseline", "current"):
            mine = [r for r in runs if r.mode == mode and r.code == code]
            if not mine:
                continue
            good = [r for r in mine if r.healthy_s > 0]  # a failed heal still timed its up
            row: dict[str, Any] = {"mode": mode, "code": code, "runs": len(good)}
            row["failed"] = sum(1 for r in mine if r.error is not None)
            keys = list(dict.fromkeys(k for r in good for k in r.milestones))
            row["breakdown"] = {k: _med([r.milestones.get(k) for r in good]) for k in keys}
            row["healthy_s"] = _med([r.healthy_s for r in good])
            row["healthy_all"] = [r.healthy_s for r in good]
            healed = [r for r in mine if r.heal]
            heal_keys = list(dict.fromkeys(k for r in healed for k in r.heal))
            row["heal"] = {k: _med([r.heal.get(k) for r in healed]) for k in heal_keys}
            rows.append(row)
    return rows


def _med(values: list[float | None]) -> float | None:
    have = [v for v in values if v is not None]
    return round(statistics.median(have), 2) if have else None


def show(rows: list[dict[str, Any]], runs: list[Run], load: tuple[float, float]) -> None:
    from clusterctl.output import Column, emit, info

    def steps(d: dict[str, float | None]) -> str:
        return ", ".join(f"{k} {v:.1f}" for k, v in d.items() if v is not None)

    emit(
        rows,
        as_json=False,
        columns=[
            Column("Mode", "mode"),
            Column("Code", "code"),
            Column("Runs", "runs", justify="right"),
            Column("Breakdown (median s after up was called)", lambda r: steps(r["breakdown"])),
            Column("Healthy s", "healthy_s", justify="right", fmt=lambda v: "-" if v is None else f"{v:.1f}"),
            Column("Each run", "healthy_all", fmt=lambda v: " ".join(f"{x:.1f}" for x in v)),
            Column("Heal (median s after heal)", lambda r: steps(r["heal"])),
        ],
        title="up to healthy, and heal to a full ISR (real Kafka, 3 + 3)",
    )
    for r in runs:
        if r.error is not None:
            info(f"{r.mode} {r.code} run failed: {r.error}")
    info(f"load average (1 min) before/after: {load[0]:.1f} / {load[1]:.1f}; targets: {TARGETS}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--mode", choices=(*MODES, "both"), default="both")
    ap.add_argument("--baseline", type=Path, help="another clusterctl checkout, run alternately with this one")
    ap.add_argument("--baseline-image", help="the Kafka image the baseline runs use (an image built before a change)")
    ap.add_argument("--no-heal", action="store_true", help="time up only")
    ap.add_argument("--logs", type=Path, help="directory for every service's log of a failed run")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--one", choices=MODES, help=argparse.SUPPRESS)  # a child run: print one Run as JSON
    ap.add_argument("--code", default="current", help=argparse.SUPPRESS)
    ap.add_argument("--image", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        print(json.dumps(asdict(one_run(args.one, args.code, not args.no_heal, args.image, args.logs))))
        return
    sys.path.insert(0, str(REPO))
    load0 = os.getloadavg()[0]
    modes = MODES if args.mode == "both" else (args.mode,)
    trees: list[tuple[str, Path, str | None]] = [("current", REPO, None)]
    if args.baseline or args.baseline_image:
        trees.append(("baseline", (args.baseline or REPO).resolve(), args.baseline_image))
    runs: list[Run] = []
    for i in range(args.runs):
        for mode in modes:
            for code, tree, image in trees if i % 2 == 0 else trees[::-1]:
                runs.append(child_run(mode, code, tree, not args.no_heal, image, args.logs))
                print(f"{mode} {code}: {asdict(runs[-1])}", file=sys.stderr, flush=True)
    rows = medians(runs)
    load = (load0, os.getloadavg()[0])
    if args.json:
        print(json.dumps({"load": load, "summary": rows, "runs": [asdict(r) for r in runs]}, indent=2))
    else:
        show(rows, runs, load)


if __name__ == "__main__":
    main()
