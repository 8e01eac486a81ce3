"""runtime's Cluster and the KafkaCluster face over it, without a Docker engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterctl.errors import ClusterctlError, NotFoundError, TimeoutError_, UsageError
from clusterctl.runtime.cluster import Cluster
from clusterctl.spec.model import parse_spec
from clusterctl.testing import KafkaCluster
from clusterctl.testing.drill import DrillTarget
from clusterctl.testing.tansu import free_port, wait_for_port


def test_compose_file_lies_under_root(tmp_path: Path) -> None:
    spec = parse_spec({"name": "svc"})
    assert Cluster(spec, root=tmp_path).compose_file == tmp_path / "compose" / "svc" / "docker-compose.yml"
    assert Cluster(spec).compose_file == (Path.cwd() / "compose" / "svc" / "docker-compose.yml").resolve()


def test_unknown_service_names_the_services() -> None:
    cluster = Cluster(
        parse_spec(
            {
                "name": "svc",
                "zookeeper": {"nodes": 1},
                "kafka": {"brokers": 1, "defaults": {"replication_factor": 1, "min_insync_replicas": 1}},
            }
        )
    )
    assert cluster.services()[:2] == ["zk1", "kafka1"]
    with pytest.raises(NotFoundError, match=r"no service 'kafka9' in cluster svc; services: zk1, kafka1"):
        cluster.container_name("kafka9")


def test_options_chain_and_are_refused_only_for_bad_values() -> None:
    cluster = KafkaCluster().with_brokers(3).with_zookeepers(1).with_engine("kafka").with_timeout(60)
    assert isinstance(cluster, KafkaCluster) and cluster.timeout == 60 and not cluster.running
    with pytest.raises(UsageError, match="engine must be auto, kafka or tansu"):
        KafkaCluster(engine="redpanda")  # type: ignore[arg-type]


def test_facts_need_a_running_cluster() -> None:
    cluster = KafkaCluster(brokers=1)
    with pytest.raises(ClusterctlError, match="not running"):
        _ = cluster.bootstrap_servers
    with pytest.raises(ClusterctlError, match="not running"):
        _ = cluster.cluster
    assert cluster.leftovers() == {}
    cluster.stop()  # harmless before start


def test_a_kafka_cluster_is_a_drill_target() -> None:
    target: DrillTarget = KafkaCluster()
    assert callable(target.heal)


def test_wait_for_port_times_out_in_the_common_words() -> None:
    port = free_port()
    with pytest.raises(TimeoutError_, match=rf"^timed out after \ds waiting for a listener on 127.0.0.1:{port}"):
        wait_for_port("127.0.0.1", port, timeout=0.3)
