"""deploy.target swarm for real: a one-node swarm on a namespace host (tests/_nshosts.py) runs ZooKeeper + tansu
from the rendered stack file, `up` waits for real health, `status` names each task's node and rack, `down
--volumes` leaves nothing; a spec the swarm cannot satisfy is refused with one line and nothing deployed.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from _nshosts import NsHosts

from clusterctl.compose.render import render
from clusterctl.errors import SpecError
from clusterctl.runtime.cluster import Cluster
from clusterctl.spec.model import ClusterSpec, parse_spec

pytestmark = [
    pytest.mark.docker,
    pytest.mark.skipif(os.geteuid() != 0, reason="namespace hosts need root (ip netns, dockerd)"),
    pytest.mark.skipif(not (shutil.which("dockerd") and shutil.which("nsenter")), reason="no dockerd/nsenter"),
]
IMAGES = ["clusterctl/zookeeper:3.8.0", "clusterctl/tansu:0.6.0"]


def _spec(hosts: NsHosts, name: str) -> ClusterSpec:
    data: dict[str, Any] = {
        "name": name,
        "profile": "offline",
        "network": {"subnet": hosts.free_subnet()},
        "zookeeper": {"nodes": 1},
        "kafka": {
            "engine": "tansu", "brokers": 1, "jmx_port": None,
            "defaults": {"replication_factor": 1, "min_insync_replicas": 1},
        },
        "kafka_manager": {"enabled": False},
        "deploy": {
            "target": "swarm", "endpoint": hosts.manager.endpoint,
            "racks": [{"name": f"r{h.index}", "address": h.ip, "endpoint": h.endpoint} for h in hosts.hosts],
        },
    }  # fmt: skip
    return parse_spec(data)


def test_swarm_without_a_swarm_is_refused(tmp_path: Path) -> None:
    """The local engine is no swarm here: one line, exit 2, nothing deployed."""
    spec = parse_spec(
        {"name": "noswarm", "profile": "offline", "zookeeper": {"nodes": 1}, "kafka_manager": {"enabled": False},
         "kafka": {"engine": "tansu", "brokers": 1, "defaults": {"replication_factor": 1, "min_insync_replicas": 1}},
         "deploy": {"target": "swarm", "racks": [{"name": "r1", "address": "127.0.0.1"}]}}
    )  # fmt: skip
    render(spec, tmp_path / spec.topology.compose_dir)
    with pytest.raises(SpecError) as err:
        Cluster(spec, root=tmp_path).up(timeout=30)
    assert "is not in a swarm" in err.value.message and "nothing was deployed" in err.value.message
    assert "\n" not in str(err.value)


def test_single_node_swarm_up_status_down(tmp_path: Path) -> None:
    hosts = NsHosts(1, images=IMAGES)
    try:
        with hosts:
            spec = _spec(hosts, f"sw{hosts.tag}")
            render(spec, tmp_path / spec.topology.compose_dir)
            cluster = Cluster(spec, root=tmp_path)
            # the node carries no rack label yet: refused before anything is deployed
            with pytest.raises(SpecError) as err:
                cluster.up(timeout=30)
            assert "rack r1: no swarm node is labelled clusterctl.rack=r1 (unlabelled nodes:" in err.value.message
            assert cluster.leftovers() == {}
            hosts.label_racks()
            up = cluster.up(timeout=240)
            assert up.zk_serving == 1 and up.broker_reachable is True
            status = cluster.status()
            rows = {s.service: s for s in status.services}
            assert sorted(rows) == ["kafka1", "zk1"]
            for row in rows.values():
                assert (row.state, row.rack) == ("running", "r1"), row
                assert row.node
            assert rows["zk1"].zk_mode == "standalone"
            assert status.broker_reachable is True
            # the broker is reached from this machine at what it advertises: the rack's address
            assert spec.topology.bootstrap_servers == f"{hosts.hosts[0].ip}:9092"
            left = cluster.leftovers()
            assert left["volumes"] == [f"{spec.name}_zk1-data", f"{spec.name}_zk1-datalog"], left
            down = cluster.down(volumes=True)
            assert sorted(down.containers_removed) == [f"{spec.name}_kafka1", f"{spec.name}_zk1"]
            assert sorted(down.volumes_removed) == [f"{spec.name}_zk1-data", f"{spec.name}_zk1-datalog"]
            assert cluster.leftovers() == {}
            assert cluster.down(volumes=True).containers_removed == []  # twice is harmless
    finally:
        left_hosts = hosts.leftovers()
    assert left_hosts == {}, left_hosts
