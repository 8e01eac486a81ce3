"""Full 3 ZooKeeper + 3 Apache Kafka broker cluster from the offline images (needs CLUSTERCTL_KAFKA_DIST).

Builds clusterctl/kafka from the supplied distribution, brings the cluster up with the real CLI and checks
broker registration, the controller, and that a topic with RF 3 has an ISR of 3 (via the admin API and
the partition state znode). Test-only spec: subnet 10.78.0.0/25, ZK 22181-22183, brokers 29092-29094.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from _runtime_helpers import cli, cli_json, leftovers, render, wait_for, write_spec

from clusterctl import images, zk
from clusterctl.spec import load_spec

pytestmark = [pytest.mark.real_kafka, pytest.mark.docker]
os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")


@pytest.fixture(scope="module")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    dist = Path(os.environ[images.KAFKA_DIST_ENV])
    images.build_images(["zookeeper", "kafka"], kafka_dist=dist)
    work = tmp_path_factory.mktemp("kafka-cluster")
    spec_path = write_spec(
        work,
        f"ctlkafka-{uuid.uuid4().hex[:6]}",
        "10.78.0.0/25",
        zk_port=22181,
        broker_port=29092,
        engine="kafka",
        brokers=3,
    )
    render(spec_path)
    try:
        res = cli(spec_path, "up", "--timeout", "300")
        assert res.returncode == 0, res.stderr
        yield spec_path
    finally:
        cli(spec_path, "down", "--volumes")


def test_all_brokers_registered_and_controller(kafka_cluster: Path) -> None:
    status = cli_json(kafka_cluster, "status")
    assert status["brokers_registered"] == [1, 2, 3]
    assert status["brokers_missing"] == []
    assert status["controller"] in (1, 2, 3)
    ids = cli_json(kafka_cluster, "zk", "ls", "/brokers/ids")
    assert ids["children"] == ["1", "2", "3"]
    controller = cli_json(kafka_cluster, "zk", "get", "/controller")
    assert controller["data"]["brokerid"] == status["controller"]


def test_topic_with_rf3_has_isr_of_3(kafka_cluster: Path) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    spec = load_spec(kafka_cluster)
    topic = f"rf3-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": spec.bootstrap_servers})
    admin.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3)])[topic].result(timeout=30)

    def all_isr_3() -> bool:
        md = admin.list_topics(topic, timeout=10).topics[topic]
        return len(md.partitions) == 3 and all(len(p.isrs) == 3 for p in md.partitions.values())

    wait_for(all_isr_3, 60, f"ISR of 3 on every partition of {topic}")
    with zk.zk_client(spec.zk_connect) as client:
        for p in range(3):
            state = zk.get(client, f"/brokers/topics/{topic}/partitions/{p}/state").data
            assert sorted(state["isr"]) == [1, 2, 3]
            assert state["leader"] in (1, 2, 3)


def test_down_volumes_leaves_nothing(kafka_cluster: Path) -> None:
    project = yaml.safe_load(kafka_cluster.read_text())["name"]
    res = cli(kafka_cluster, "down", "--volumes")
    assert res.returncode == 0, res.stderr
    assert leftovers(project) == {"containers": [], "networks": [], "volumes": []}
