"""Real Apache Kafka on a swarm of namespace hosts (tests/_nshosts.py): a drained manager host and three rack
hosts, one ZooKeeper node and one broker per rack, through the real CLI. `up` is healthy, `status` shows each
broker's node and rack, `scenario run kill-node` (RF 3, min.insync 2, acks=all load; the host of partition 0's
leader lost at once: link down, its daemon, containerd and every container SIGKILLed) loses no acknowledged
write, moves leaders to the surviving racks and heals when the host returns; `down --volumes` leaves no service,
network, volume, daemon or namespace. Runs the session's Kafka (conftest pins it).

KILL_NODE_RUNS=N runs the scenario N times on the same cluster and prints each run's numbers.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from _nshosts import NsHosts
from _runtime_helpers import cli
from conftest import kafka_dist

from clusterctl.images import build as images
from clusterctl.spec import kafkadist

pytestmark = [
    pytest.mark.docker,
    pytest.mark.real_kafka,
    pytest.mark.skipif(os.geteuid() != 0, reason="namespace hosts need root (ip netns, dockerd)"),
    pytest.mark.skipif(not (shutil.which("dockerd") and shutil.which("nsenter")), reason="no dockerd/nsenter"),
]
# the session's Kafka (conftest pins it), loaded into every namespace host's engine
IMAGES = ["clusterctl/zookeeper:3.8.0", kafkadist.resolve_offline_image()]


def _spec(hosts: NsHosts, racks: dict[str, str]) -> dict[str, Any]:
    return {
        "name": f"sk{hosts.tag}", "profile": "offline", "network": {"subnet": hosts.free_subnet()},
        "zookeeper": {"nodes": 3},
        "kafka": {"engine": "kafka", "brokers": 3,
                  "defaults": {"replication_factor": 3, "min_insync_replicas": 2, "heap": "384m"}},
        "kafka_manager": {"enabled": False},
        "deploy": {
            "target": "swarm", "endpoint": hosts.manager.endpoint, "rack_spread": "strict",
            "racks": [
                {"name": rack, "address": address, "endpoint": hosts.racks[rack].endpoint,
                 "stop_command": hosts.racks[rack].command("lose"),
                 "start_command": hosts.racks[rack].command("restore")}
                for rack, address in racks.items()
            ],
        },
    }  # fmt: skip


def _json(res: Any) -> Any:
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout)


def _kill_node_run(spec_path: Path, report: Path) -> dict[str, Any]:
    """One `scenario run kill-node`: checked, and its numbers (acked, lost, leader move, write gap, heal)."""
    load_before = os.getloadavg()[0]
    data = _json(cli(spec_path, "scenario", "run", "kill-node", "--json", "--report-dir", str(report), timeout=900))
    assert data["ok"] is True and all(s["ok"] for s in data["steps"]), [s for s in data["steps"] if not s["ok"]]
    load, v = data["load"], data["verify"]
    assert load["acked"] > 1000 and v["acked"] == load["acked"] and v["lost_count"] == 0, v
    (fault,) = [f for f in data["faults"] if f["action"] == "kill-node"]
    (heal,) = [s for s in data["steps"] if s["kind"] == "heal"]
    assert "start-node" in heal["detail"], heal
    broker = fault["broker"]
    led = [p for p in fault["partitions"] if p["led_by_target"]]
    assert led and all(p["new_leader"] not in (None, broker) for p in led), fault
    return {
        "target": fault["target"], "acked": load["acked"], "lost": v["lost_count"],
        "leader_move_s": max(p["time_to_new_leader_s"] for p in led),
        "write_gap_s": max(p["write_gap_s"] or 0.0 for p in fault["partitions"]),
        "heal_to_isr_full_s": max((p["isr_full_s"] or 0.0) for p in fault["partitions"]),
        "load_avg": (round(load_before, 1), round(os.getloadavg()[0], 1)),
    }  # fmt: skip


def test_kill_node_on_three_racks(tmp_path: Path) -> None:
    images.build_images(["zookeeper", "kafka"], kafka_dist=kafka_dist())  # what the hosts load (no-op when built)
    hosts = NsHosts(4, images=IMAGES)  # one `docker load`, the other hosts' stores hard-linked from it
    t0 = time.monotonic()
    try:
        with hosts:
            print(f"\n4 hosts up, swarm formed, images in every host in {time.monotonic() - t0:.1f}s")
            racks = hosts.label_racks(dedicated_manager=True)
            spec_path = tmp_path / "clusterctl.yaml"
            spec_path.write_text(yaml.safe_dump(_spec(hosts, racks), sort_keys=False))
            name = f"sk{hosts.tag}"
            assert cli(spec_path, "render").returncode == 0
            up = _json(cli(spec_path, "up", "--timeout", "400", "--json"))
            print(f"healthy after {up['seconds_to_healthy']}s (load {os.getloadavg()[0]:.1f})")
            rows = {s["service"]: s for s in _json(cli(spec_path, "status", "--json"))["services"]}
            for i, rack in enumerate(racks, 1):
                for service in (f"kafka{i}", f"zk{i}"):
                    assert (rows[service]["state"], rows[service]["rack"]) == ("running", rack), rows[service]
                    assert rows[service]["node"], rows[service]
            runs = [
                _kill_node_run(spec_path, tmp_path / f"report{k}")
                for k in range(1, int(os.environ.get("KILL_NODE_RUNS", "1")) + 1)
            ]
            for k, run in enumerate(runs, 1):
                print(f"kill-node run {k}: {run}")
            down = _json(cli(spec_path, "down", "--volumes", "--json"))
            assert sorted(down["volumes_removed"]) and not down.get("volumes_kept"), down
            services = hosts.manager.docker(
                "service", "ls", "-q", "--filter", f"label=com.docker.stack.namespace={name}"
            )
            networks = hosts.manager.docker(
                "network", "ls", "-q", "--filter", f"label=com.docker.stack.namespace={name}"
            )
            volumes = [h.docker("volume", "ls", "-q") for h in hosts.hosts]
            assert (services.split(), networks.split(), [v.split() for v in volumes]) == ([], [], [[]] * 4)
    finally:
        left = hosts.leftovers()
    assert left == {}, left
