"""Real Apache Kafka in ZooKeeper mode (the session's Kafka): `clusterctl up` and `down --volumes` through
the real CLI on a cluster of its own; on the shared cluster (3 ZooKeeper + 3 brokers, tests/conftest.py):
registration, controller, a topic with RF 3 and ISR 3 (admin API and the partition state znode), and `topic create`
meaning served."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest
from _runtime_helpers import cli, cli_json, leftovers, render, up_json, write_spec
from conftest import RealKafka

from clusterctl.kafka import brokers
from clusterctl.zookeeper import client as zk

pytestmark = [pytest.mark.real_kafka, pytest.mark.docker]


def test_up_waits_until_healthy_and_down_volumes_leaves_nothing(tmp_path: Path) -> None:
    """The CLI path users take: render, `up` (returns once ZK has a quorum, every broker is registered and a
    controller elected), `status` agrees, `down --volumes` removes every container, network and volume."""
    project = f"ctlkafka-{uuid.uuid4().hex[:6]}"
    spec_path = write_spec(tmp_path, project, engine="kafka", brokers=3)  # a free subnet and free ports
    render(spec_path)
    try:
        up = up_json(spec_path, timeout=300)
        assert (up["mode"], up["zk_serving"], up["zk_nodes"]) == ("zookeeper", 3, 3), up
        assert up["brokers_registered"] == [1, 2, 3] and up["controller"] in (1, 2, 3), up
        status = cli_json(spec_path, "status")
        assert status["brokers_registered"] == [1, 2, 3] and status["brokers_missing"] == []
        print(f"\nclusterctl up (3 ZK + 3 Kafka brokers): healthy after {up['seconds_to_healthy']}s")
    finally:
        res = cli(spec_path, "down", "--volumes")
    assert res.returncode == 0, res.stderr
    assert leftovers(project) == {"containers": [], "networks": [], "volumes": []}


def test_all_brokers_registered_and_controller(real_kafka: RealKafka) -> None:
    status = cli_json(real_kafka.spec_path, "status")
    assert status["brokers_registered"] == [1, 2, 3]
    assert status["brokers_missing"] == []
    assert status["controller"] in (1, 2, 3)
    ids = cli_json(real_kafka.spec_path, "zk", "ls", "/brokers/ids")
    assert ids["children"] == ["1", "2", "3"]
    controller = cli_json(real_kafka.spec_path, "zk", "get", "/controller")
    assert controller["data"]["brokerid"] == status["controller"]


def test_topic_with_rf3_has_isr_of_3(real_kafka: RealKafka) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    spec = real_kafka.spec
    topic = f"rf3-{uuid.uuid4().hex[:6]}"
    client = AdminClient({"bootstrap.servers": spec.topology.bootstrap_servers})
    client.create_topics([NewTopic(topic, num_partitions=3, replication_factor=3)])[topic].result(timeout=30)
    real_kafka.cluster.wait_isr_full(topic, timeout=60)
    md = client.list_topics(topic, timeout=10).topics[topic]
    assert len(md.partitions) == 3 and all(sorted(p.isrs) == [1, 2, 3] for p in md.partitions.values()), md
    with zk.zk_client(spec.topology.zk_connect) as c:
        for p in range(3):
            state = zk.get(c, f"/brokers/topics/{topic}/partitions/{p}/state").data
            assert sorted(state["isr"]) == [1, 2, 3]
            assert state["leader"] in (1, 2, 3)


def test_created_topic_is_served_by_every_broker(real_kafka: RealKafka) -> None:
    """`topic create` returns once every broker's metadata has the topic with a leader per partition."""
    topic = f"served-{uuid.uuid4().hex[:6]}"
    res = cli(real_kafka.spec_path, "topic", "create", topic, "--partitions", "6", "--replication-factor", "3")
    assert res.returncode == 0, res.stderr
    spec = real_kafka.spec
    views = brokers.metadata_per_broker(
        {b: f"{spec.topology.host}:{spec.topology.broker_host_port(b)}" for b in spec.topology.broker_ids},
        timeout=5.0,
        topic=topic,
    )
    for b, view in views.items():
        assert not isinstance(view, str), f"broker {b}: {view}"
        assert view.brokers == {1, 2, 3}
        assert view.leaders is not None and len(view.leaders) == 6 and min(view.leaders.values()) >= 1, (b, view)


def test_brokers_map_the_class_archive_their_image_recorded(real_kafka: RealKafka) -> None:
    """The image build recorded the broker's classes (record-class-archive); every broker's JVM is started with
    -XX:SharedArchiveFile, and the archive is valid for the image's java and jars: with -Xshare:on a JVM that
    cannot map it refuses to start, and this one prints Kafka's version."""
    import docker

    archive = "/opt/kafka/class-archive.jsa"
    for n in (1, 2, 3):
        box = docker.from_env().containers.get(real_kafka.spec.topology.broker_container(n))
        rc, out = box.exec_run(["bash", "-c", "tr '\\0' ' ' < /proc/$(pgrep -f kafka.Kafka | head -1)/cmdline"])
        assert rc == 0 and f"-XX:SharedArchiveFile={archive}" in out.decode(), out.decode()[-500:]
    rc, out = box.exec_run(
        ["kafka-run-class.sh", "kafka.Kafka", "--version"],
        environment={"KAFKA_OPTS": f"-XX:SharedArchiveFile={archive} -Xshare:on"},
    )
    assert rc == 0 and re.fullmatch(r"\d+\.\d+\.\d+", out.decode().strip().splitlines()[-1]), out.decode()[-1000:]
