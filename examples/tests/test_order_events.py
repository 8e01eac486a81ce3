"""The order publisher against a cluster from clusterctl's pytest plugin (kafka_cluster, kafka_topic, kafka_drill)."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from order_events.app import OrderPublisher


def orders(n: int) -> list[dict[str, object]]:
    return [{"id": f"order-{i}", "amount": i} for i in range(n)]


def published_ids(bootstrap: str, topic: str, expect: int, timeout: float = 60.0) -> set[str]:
    """Order ids on the topic (the app's records only; the drill's have other keys).

    Partitions are assigned, not subscribed: a consumer group needs __consumer_offsets, which Kafka creates on
    first use and cannot create with its full replication factor while a broker is down.
    """
    partitions = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10).topics[topic].partitions
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in partitions])
    seen: set[str] = set()
    deadline = time.monotonic() + timeout
    while len(seen) < expect and time.monotonic() < deadline:
        msg = consumer.poll(0.5)
        if msg is not None and msg.error() is None and (key := msg.key() or b"").startswith(b"order-"):
            seen.add(key.decode())
    consumer.close()
    return seen


@pytest.mark.clusterctl_engine("kafka")  # needs replication: a killed leader is replaced by a follower
def test_orders_survive_a_broker_kill(kafka_cluster, kafka_topic, kafka_drill):
    publisher = OrderPublisher(kafka_cluster.bootstrap_servers, kafka_topic)
    kafka_drill.wait_acked(300)  # acks=all load with a ledger runs around the whole test

    victim = kafka_cluster.kill_leader(kafka_topic, partition=0)
    new_leader = kafka_cluster.wait_leader_changed(kafka_topic, partition=0)
    assert new_leader != victim

    report = publisher.publish(orders(200))  # one broker down: RF 3, min.insync.replicas 2 still take writes
    assert len(report.delivered) == 200
    kafka_drill.wait_acked(kafka_drill.acked + 300)
    assert published_ids(kafka_cluster.bootstrap_servers, kafka_topic, 200) == {f"order-{i}" for i in range(200)}
    # after the test body the plugin heals the cluster and verifies: no acknowledged drill write lost


def test_publisher_retries_while_the_leader_is_unavailable(kafka_cluster, kafka_topic):
    publisher = OrderPublisher(kafka_cluster.bootstrap_servers, kafka_topic, delivery_timeout_ms=2000)
    leader = kafka_cluster.leader(kafka_topic, partition=0)
    # freeze the leader for longer than a delivery may take: sends fail with timeouts until it is back
    kafka_cluster.pause_broker(leader)  # until heal()
    healer = threading.Timer(5.0, kafka_cluster.heal)
    healer.start()
    try:
        report = publisher.publish(orders(100))
    finally:
        healer.join()
    assert report.resent > 0, f"expected transient failures while broker {leader} was paused: {report}"
    assert len(report.delivered) == 100
    assert published_ids(kafka_cluster.bootstrap_servers, kafka_topic, 100) == {f"order-{i}" for i in range(100)}
