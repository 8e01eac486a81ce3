#!/usr/bin/env python3
"""Benchmark: many broker kill + heal cycles on one cluster, heal to a full ISR each time, logs of the slow ones.

One isolated 3 + 3 cluster of real Kafka (KRaft by default) is brought up once; a 6-partition RF 3 topic is
created; then each cycle SIGKILLs a broker (1, 2, 3, 1, ... in turn), waits until it has left every ISR
(`--heal-after out-of-isr`, as bench/up_time.py does) or not at all (`now`: `chaos kill` followed at once by
`chaos heal`), and times the heal as `chaos heal` does it (start it again, `wait_healed`, `wait_full_isr`).
From the restarted broker's log (docker's receive time of each line) it reads when it registered and was
unfenced, and how many registrations the controller refused. A heal slower than `--slow` seconds (or one that
failed) has the victim's and every controller's log since the kill written to `--logs DIR/cycle-N/`.
Needs the Docker lock on a shared machine; ~15-20 s a cycle, and no cycle starts after `--budget` seconds:

    flock /tmp/docker-tests.lock .venv/bin/python bench/heal_loop.py --cycles 20 --logs /tmp/heal-logs
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from up_time import KRAFT_REGISTERED, KRAFT_UNFENCED, TOPIC, _first, _log_lines, _spec_data, save_logs

REPO = Path(__file__).resolve().parent.parent
REFUSED = "Unable to register broker"  # BrokerLifecycleManager, once per refused registration


@dataclass
class Cycle:
    n: int
    broker: int
    load: float  # 1-minute load average when the heal began
    heal_s: float | None = None  # heal called -> every partition's ISR full again
    steps: dict[str, float] = field(default_factory=dict)  # seconds after the heal was called
    refused: int = 0  # registrations the controller refused before one was accepted
    error: str | None = None


def drop_topic_id(cluster: Any, service: str, topic: str) -> None:
    """Remove partition.metadata of the (killed) broker's replica of topic-0, as a kill between the replica's
    creation and Kafka's asynchronous write of its topic ID leaves it (KAFKA-16814)."""
    from clusterctl.runtime import docker as dk

    c = cluster.container(service)
    path = f"{cluster.spec.image_profile.kafka_data_dir}/{topic}-0/partition.metadata"
    dk.client().containers.run(
        c.image.id, ["bash", "-c", f"test -f {path} && rm {path}"], volumes_from=[c.id], user="root", remove=True
    )


@dataclass
class Options:
    heal_after: str = "out-of-isr"
    slow: float = 10.0
    logs: Path | None = None
    fresh_topic: bool = False  # a new topic right before each kill (its replicas are being created)
    drop_topic_id: bool = False  # and the killed broker loses one replica's partition.metadata
    heal_timeout: float = 150.0


def one_cycle(cluster: Any, n: int, opts: Options) -> Cycle:
    from clusterctl.chaos import recovery
    from clusterctl.kafka import admin
    from clusterctl.wait import wait_until

    spec = cluster.spec
    topo = spec.topology
    victim = topo.broker_ids[n % len(topo.broker_ids)]
    service = topo.broker_service(victim)
    topic = f"{TOPIC}-{n + 1}" if opts.fresh_topic else TOPIC
    if opts.fresh_topic:
        admin.create_topic(topo.bootstrap_servers, topic, 6, 3)
    killed = time.time()
    cluster.kill(service)
    if opts.drop_topic_id:
        drop_topic_id(cluster, service, topic)
    if opts.heal_after == "out-of-isr":

        def out_of_isr() -> bool:
            described = admin.describe_topics(topo.bootstrap_servers, [topic], timeout=5.0)
            return all(victim not in p.isr for t in described for p in t.partitions)

        wait_until(out_of_isr, timeout=120, what=f"broker {victim} out of the ISR", interval=0.5)
    cycle = Cycle(n + 1, victim, os.getloadavg()[0])
    t0 = time.time()
    try:
        recovery.heal_all(spec)
        recovery.wait_healed(spec, opts.heal_timeout)
        recovery.wait_full_isr(topo.bootstrap_servers, opts.heal_timeout)
        cycle.heal_s = round(time.time() - t0, 2)
    except Exception as exc:  # reported with the logs; the next cycles still run
        cycle.error = getattr(exc, "message", None) or str(exc) or type(exc).__name__
    lines = _log_lines(cluster.container(service), since=t0 - 1)
    marks = {"broker registered": _first(lines, KRAFT_REGISTERED), "broker unfenced": _first(lines, KRAFT_UNFENCED)}
    cycle.steps = {k: round(v - t0, 2) for k, v in marks.items() if v is not None}
    cycle.refused = sum(1 for _, s in lines if REFUSED in s)
    if opts.logs is not None and (cycle.error is not None or (cycle.heal_s or 0) > opts.slow):
        others = [topo.controller_service(c) for c in topo.dedicated_controller_ids]
        save_logs(cluster, [service, *others], killed - 2, opts.logs / f"cycle-{n + 1}")
    return cycle


def run(mode: str, cycles: int, opts: Options, budget: float, image: str | None) -> list[Cycle]:
    from clusterctl.compose.render import render
    from clusterctl.kafka import admin
    from clusterctl.runtime.cluster import Cluster
    from clusterctl.testing import specdata

    spec, _ = specdata.isolated(_spec_data(mode, image), True)
    work = Path(tempfile.mkdtemp(prefix=f"{spec.name}-"))
    render(spec, out_dir=work / spec.topology.compose_dir)
    cluster = Cluster(spec, root=work)
    out: list[Cycle] = []
    stop_at = time.monotonic() + budget
    try:
        cluster.up(240, keep_on_failure=True)
        admin.create_topic(spec.topology.bootstrap_servers, TOPIC, 6, 3)
        for n in range(cycles):
            if time.monotonic() > stop_at:
                print(f"stopping after {n} cycles: the {budget:.0f} s budget is spent", file=sys.stderr)
                break
            out.append(one_cycle(cluster, n, opts))
            print(json.dumps(asdict(out[-1])), file=sys.stderr, flush=True)
    finally:
        cluster.down(volumes=True, kill_first=True)
    return out


def summary(cycles: list[Cycle], slow: float) -> dict[str, Any]:
    times = [c.heal_s for c in cycles if c.heal_s is not None]
    return {
        "cycles": len(cycles),
        "failed": sum(1 for c in cycles if c.error is not None),
        "slower_than": {"seconds": slow, "count": sum(1 for t in times if t > slow)},
        "heal_s_median": round(statistics.median(times), 2) if times else None,
        "heal_s_max": max(times) if times else None,
        "refused_registrations": sum(c.refused for c in cycles),
        "load_min_max": [min(c.load for c in cycles), max(c.load for c in cycles)] if cycles else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cycles", type=int, default=20)
    ap.add_argument("--mode", choices=("kraft", "zookeeper"), default="kraft")
    ap.add_argument("--heal-after", choices=("out-of-isr", "now"), default="out-of-isr")
    ap.add_argument("--slow", type=float, default=10.0, help="a heal slower than this (s) has its logs kept")
    ap.add_argument("--logs", type=Path, help="directory for the logs of slow or failed heals")
    ap.add_argument("--fresh-topic", action="store_true", help="create a new topic right before each kill")
    ap.add_argument("--drop-topic-id", action="store_true", help="remove a replica's partition.metadata after the kill")
    ap.add_argument("--heal-timeout", type=float, default=150.0, help="a heal not done after this (s) failed")
    ap.add_argument("--image", help="the Kafka image (default: the profile's)")
    ap.add_argument("--budget", type=float, default=480.0, help="start no cycle after this many seconds")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    sys.path.insert(0, str(REPO))
    opts = Options(args.heal_after, args.slow, args.logs, args.fresh_topic or args.drop_topic_id, args.drop_topic_id)
    opts.heal_timeout = args.heal_timeout
    cycles = run(args.mode, args.cycles, opts, args.budget, args.image)
    result = {"mode": args.mode, **{k: str(v) for k, v in asdict(opts).items()}, **summary(cycles, args.slow)}
    if args.json:
        print(json.dumps({**result, "each": [asdict(c) for c in cycles]}, indent=2))
        return
    for c in cycles:
        steps = ", ".join(f"{k} {v:.1f}" for k, v in c.steps.items())
        print(f"cycle {c.n:2d} broker {c.broker}: heal {c.heal_s} s ({steps}; refused {c.refused}; load {c.load:.1f})"
              + (f" FAILED: {c.error}" if c.error else ""))  # fmt: skip
    print(json.dumps(result))


if __name__ == "__main__":
    main()
