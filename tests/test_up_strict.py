"""`up` returns only when the cluster is really healthy, checked independently the moment it returns.

Brokers now start alongside ZooKeeper (and the controllers) instead of after their healthchecks, and health is
polled faster: these tests pin that the verdict did not get looser. Right after `Cluster.up` returns, each
condition is asked of the cluster with other means than clusterctl's health check (ZooKeeper's four-letter
words and a plain kazoo session; Kafka's own kafka-metadata-quorum.sh and a librdkafka metadata request), and a
broker that cannot register (paused at the first health poll) keeps `up` from returning at all. Needs
CLUSTERCTL_KAFKA_DIST (real Kafka, offline images).
"""

from __future__ import annotations

import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from kazoo.client import KazooClient

from clusterctl.compose.render import render
from clusterctl.errors import TimeoutError_
from clusterctl.runtime import docker as dk
from clusterctl.runtime.cluster import Cluster
from clusterctl.spec.model import ClusterSpec
from clusterctl.testing import specdata

pytestmark = [pytest.mark.real_kafka, pytest.mark.docker]


def _cluster(mode: str) -> Cluster:
    data: dict[str, Any] = {
        "profile": "offline",
        "kafka": {"engine": "kafka", "brokers": 3, "mode": mode, "defaults": {"heap": "384m"}},
        "kafka_manager": {"enabled": False},
    }
    data["kraft" if mode == "kraft" else "zookeeper"] = {"controllers": 3} if mode == "kraft" else {"nodes": 3}
    spec, _ = specdata.isolated(data, True)
    work = Path(tempfile.mkdtemp(prefix=f"{spec.name}-"))
    render(spec, out_dir=work / spec.topology.compose_dir)
    return Cluster(spec, root=work)


@pytest.fixture
def cluster_of(request: pytest.FixtureRequest) -> Iterator[Cluster]:
    cluster = _cluster(request.param)
    try:
        yield cluster
    finally:
        cluster.down(volumes=True, kill_first=True)


def _four_letter(host: str, port: int, word: str) -> str:
    with socket.create_connection((host, port), timeout=3) as s:
        s.sendall(word.encode())
        chunks = []
        while data := s.recv(4096):
            chunks.append(data)
    return b"".join(chunks).decode()


def _metadata_brokers(spec: ClusterSpec) -> set[int]:
    md = AdminClient({"bootstrap.servers": spec.topology.bootstrap_servers}).list_topics(timeout=10)
    return set(md.brokers)


@pytest.mark.parametrize("cluster_of", ["zookeeper"], indirect=True)
def test_zk_up_returns_with_quorum_every_broker_registered_and_a_controller(cluster_of: Cluster) -> None:
    spec = cluster_of.spec
    cluster_of.up(240)
    # asked at once, without clusterctl's health code: every node serves, one leader, all brokers, a controller
    modes = [
        _four_letter(spec.topology.host, spec.topology.zk_host_port(i), "srvr").split("Mode: ")[1].split()[0]
        for i in spec.topology.zk_ids
    ]
    assert sorted(modes) == ["follower", "follower", "leader"], modes
    zk = KazooClient(hosts=spec.topology.zk_connect, timeout=5)
    zk.start(timeout=10)
    try:
        assert sorted(int(b) for b in zk.get_children("/brokers/ids")) == [1, 2, 3]
        assert zk.exists("/controller") is not None
    finally:
        zk.stop()
        zk.close()
    assert _metadata_brokers(spec) == {1, 2, 3}


@pytest.mark.parametrize("cluster_of", ["kraft"], indirect=True)
def test_kraft_up_returns_with_quorum_leader_and_every_broker_unfenced(cluster_of: Cluster) -> None:
    spec = cluster_of.spec
    cluster_of.up(240)
    assert _metadata_brokers(spec) == {1, 2, 3}  # a KRaft broker lists only unfenced brokers
    controller = spec.topology.controller_service(spec.topology.dedicated_controller_ids[0])
    proc = subprocess.run(
        ["docker", "exec", spec.topology.container_name(controller), "kafka-metadata-quorum.sh",
         "--bootstrap-server", f"{spec.topology.broker_service(1)}:{spec.kafka.internal_port}", "describe", "--status"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    status = dict(line.split(":", 1) for line in proc.stdout.splitlines() if ":" in line)
    assert int(status["LeaderId"].strip()) in spec.topology.controller_ids, proc.stdout
    assert "101" in status["CurrentVoters"] and "102" in status["CurrentVoters"] and "103" in status["CurrentVoters"]


@pytest.mark.parametrize("cluster_of", ["zookeeper"], indirect=True)
def test_up_does_not_return_while_a_broker_cannot_register(cluster_of: Cluster) -> None:
    spec = cluster_of.spec
    victim = spec.topology.container_name(spec.topology.broker_service(3))
    paused: list[float] = []

    def pause_at_first_poll(_report: Any, elapsed: float) -> None:
        if not paused:  # compose up just returned: no JVM has registered yet
            dk.pause(dk.get_container(victim))
            paused.append(elapsed)

    with pytest.raises(TimeoutError_) as caught:
        cluster_of.up(45, on_report=pause_at_first_poll, keep_on_failure=True)
    assert paused, "the health wait never polled"
    assert "broker 3 in /brokers/ids" in caught.value.message, caught.value.message
