"""Kafka 4.x from Maven Central boots in KRaft mode: 3 controllers + 3 brokers of clusterctl/kafka:<newest 4.x>.

The image is built by this test (`images build kafka --kafka-version 4.x`: Maven resolves the newest 4.x, the tag is
the version in its jars); the cluster runs on a free subnet and free host ports (the plugin's KafkaCluster), takes
acks=all writes and reads them back, and every broker logs the 4.x version it runs.
"""

from __future__ import annotations

import subprocess
import uuid

import pytest
from confluent_kafka import Consumer, Producer

from clusterctl.images import build as images
from clusterctl.images import kafka_maven
from clusterctl.testing import KafkaCluster

pytestmark = [pytest.mark.real_kafka, pytest.mark.docker]

RECORDS = 2000


def test_newest_kafka_4_from_maven_boots_in_kraft_mode() -> None:
    built = {r.target: r for r in images.build_images(["kafka"], kafka_version=kafka_maven.NEWEST_KAFKA_LINE)}
    version = built["kafka"].image.rpartition(":")[2]
    assert version.split(".")[0] == "4", built["kafka"]
    assert kafka_maven.installed(version) is not None
    spec = {
        "profile": "offline",
        "kafka": {
            "mode": "kraft",
            "version": version,
            "brokers": 3,
            "defaults": {"replication_factor": 3, "min_insync_replicas": 2, "heap": "384m"},
        },
        "kraft": {"controllers": 3},
    }
    with KafkaCluster(spec, engine="kafka", timeout=300) as cluster:
        assert cluster.spec is not None and cluster.spec.kraft_mode
        topo = cluster.spec.topology
        assert cluster.spec.broker_image == f"clusterctl/kafka:{version}"
        for container in [*(topo.broker_container(b) for b in topo.broker_ids),
                          *(topo.controller_container(c) for c in topo.controller_ids)]:  # fmt: skip
            logs = subprocess.run(["docker", "logs", container], capture_output=True, text=True, timeout=60)
            assert f"Kafka version: {version}" in logs.stdout + logs.stderr, container

        topic = f"k4-{uuid.uuid4().hex[:8]}"
        cluster.create_topic(topic, partitions=3)
        producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all"})
        acked: list[int] = []
        for i in range(RECORDS):
            producer.produce(topic, str(i).encode(), on_delivery=lambda err, msg: acked.append(0 if err else 1))
        assert producer.flush(60) == 0
        assert sum(acked) == RECORDS

        consumer = Consumer(
            {"bootstrap.servers": cluster.bootstrap_servers, "group.id": topic, "auto.offset.reset": "earliest"}
        )
        consumer.subscribe([topic])
        seen: set[bytes] = set()
        try:
            for _ in range(120):
                for msg in consumer.consume(500, timeout=1.0):
                    if msg.error() is None and msg.value() is not None:
                        seen.add(msg.value())  # type: ignore[arg-type]
                if len(seen) == RECORDS:
                    break
        finally:
            consumer.close()
        assert seen == {str(i).encode() for i in range(RECORDS)}
    assert cluster.leftovers() == {}
