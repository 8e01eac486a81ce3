"""Topic commands through the real CLI against tansu (and real Kafka where supplied)."""

from __future__ import annotations

import json

import pytest
from _dataplane import run
from conftest import RealKafka

from clusterctl.kafka import admin, elections
from clusterctl.testing.tansu import free_port

pytestmark = pytest.mark.tansu


def test_create_list_describe_delete(bootstrap: str, unique_name: str) -> None:
    r = run("topic", "create", unique_name, "-p", "3", "-r", "1", "-b", bootstrap, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) | {} == {
        "topic": unique_name,
        "action": "create",
        "changed": True,
        "partitions": 3,
        "replication_factor": 1,
        "configs": {},
        "deleted_configs": [],
        "note": None,
    }

    listed = json.loads(run("topic", "list", "-b", bootstrap, "--json").stdout)
    assert {"name": unique_name, "partitions": 3, "replication_factor": 1, "internal": False} in listed

    r = run("topic", "describe", unique_name, "-b", bootstrap, "--json")
    assert r.returncode == 0, r.stderr
    (desc,) = json.loads(r.stdout)
    assert desc["partition_count"] == 3 and desc["replication_factor"] == 1
    assert [p["partition"] for p in desc["partitions"]] == [0, 1, 2]
    for p in desc["partitions"]:
        assert p["leader"] >= 0 and p["replicas"] == [p["leader"]] and p["isr"] == [p["leader"]]
        assert p["offline"] is False and p["under_replicated"] is False

    table = run("topic", "describe", unique_name, "-b", bootstrap).stdout
    assert f"Topic: {unique_name}  PartitionCount: 3  ReplicationFactor: 1  Configs:" in table
    assert "Leader" in table and "Isr" in table

    # the filters select nothing on a healthy single-broker topic
    r = run("topic", "describe", unique_name, "--under-replicated", "--unavailable", "-b", bootstrap, "--json")
    assert json.loads(r.stdout) == []

    r = run("topic", "delete", unique_name, "-b", bootstrap)  # no --yes, no terminal: refused
    assert r.returncode == 2 and "without --yes" in r.stderr
    assert unique_name in [t.name for t in admin.list_topics(bootstrap)]

    r = run("topic", "delete", unique_name, "--yes", "-b", bootstrap)
    assert r.returncode == 0, r.stderr
    assert unique_name not in [t.name for t in admin.list_topics(bootstrap)]


def test_create_if_not_exists_and_exists_error(bootstrap: str, unique_name: str) -> None:
    assert run("topic", "create", unique_name, "-p", "2", "-b", bootstrap).returncode == 0
    r = run("topic", "create", unique_name, "-p", "2", "-b", bootstrap)
    assert r.returncode == 1
    assert r.stderr.strip().splitlines() == [
        f"error: topic '{unique_name}' already exists (hint: use --if-not-exists to accept that)"
    ]
    r = run("topic", "create", unique_name, "-p", "2", "--if-not-exists", "-b", bootstrap, "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["changed"] is False


def test_rf_larger_than_live_brokers(bootstrap: str, unique_name: str) -> None:
    r = run("topic", "create", unique_name, "-p", "1", "-r", "3", "-b", bootstrap)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [f"error: RF 3 > 1 live brokers; cannot create topic '{unique_name}'"]
    assert unique_name not in [t.name for t in admin.list_topics(bootstrap)]


def test_unknown_topic_is_one_line(bootstrap: str) -> None:
    for args in (("topic", "describe", "no-such-topic"), ("consume", "no-such-topic"), ("produce", "no-such-topic")):
        r = run(*args, "-b", bootstrap, stdin="x\n")
        assert r.returncode == 3, (args, r.stderr)
        lines = r.stderr.strip().splitlines()
        assert len(lines) == 1 and "unknown topic 'no-such-topic'" in lines[0]


def test_unreachable_bootstrap_is_one_line() -> None:
    addr = f"127.0.0.1:{free_port()}"  # closed loopback port
    r = run("topic", "list", "-b", addr)
    assert r.returncode == 4
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr  # no librdkafka log flood
    assert f"no Kafka broker answered at {addr} within 5s" in lines[0] and "advertised.listeners" in lines[0]


def test_bad_config_pair_is_usage_error(bootstrap: str, unique_name: str) -> None:
    r = run("topic", "create", unique_name, "-c", "retention.ms", "-b", bootstrap)
    assert r.returncode == 2 and "--config expects key=value" in r.stderr


# ---------------------------------------------------------------- real Kafka only


@pytest.fixture
def kafka_bootstrap(real_kafka: RealKafka) -> str:
    """The session's real Kafka cluster (tests/conftest.py), started from CLUSTERCTL_KAFKA_DIST."""
    return real_kafka.bootstrap


@pytest.mark.real_kafka
def test_alter_partitions_real_kafka(kafka_bootstrap: str, unique_name: str) -> None:
    assert run("topic", "create", unique_name, "-p", "2", "-r", "1", "-b", kafka_bootstrap).returncode == 0
    r = run("topic", "alter", unique_name, "--partitions", "4", "-b", kafka_bootstrap, "--json")
    assert r.returncode == 0, r.stderr
    assert admin.describe_topic(kafka_bootstrap, unique_name).partition_count == 4
    r = run("topic", "alter", unique_name, "--partitions", "3", "-b", kafka_bootstrap)
    assert r.returncode == 2 and "already has 4 partitions" in r.stderr


@pytest.mark.real_kafka
def test_alter_and_describe_configs_real_kafka(kafka_bootstrap: str, unique_name: str) -> None:
    run("topic", "create", unique_name, "-p", "1", "-r", "1", "-c", "retention.ms=3600000", "-b", kafka_bootstrap)
    r = run("topic", "alter", unique_name, "-c", "cleanup.policy=compact", "-b", kafka_bootstrap)
    assert r.returncode == 0, r.stderr
    configs = {c.name: c.value for c in admin.describe_configs(kafka_bootstrap, unique_name)}
    assert configs["retention.ms"] == "3600000" and configs["cleanup.policy"] == "compact"
    assert admin.describe_topic(kafka_bootstrap, unique_name, with_configs=True).configs["cleanup.policy"] == "compact"
    run("topic", "alter", unique_name, "--delete-config", "cleanup.policy", "-b", kafka_bootstrap)
    configs = {c.name: c.value for c in admin.describe_configs(kafka_bootstrap, unique_name)}
    assert "cleanup.policy" not in configs and configs["retention.ms"] == "3600000"


@pytest.mark.real_kafka
def test_rf3_describe_isr_real_kafka(kafka_bootstrap: str, unique_name: str) -> None:
    assert len(admin.cluster_info(kafka_bootstrap).brokers) >= 3
    assert run("topic", "create", unique_name, "-p", "3", "-r", "3", "-b", kafka_bootstrap).returncode == 0
    t = admin.describe_topic(kafka_bootstrap, unique_name)
    assert t.replication_factor == 3
    for p in t.partitions:
        assert len(p.replicas) == 3 and sorted(p.isr) == sorted(p.replicas) and p.leader in p.replicas
    results = elections.elect_leaders(kafka_bootstrap, "preferred", [(unique_name, 0)])
    assert results and all(r.ok for r in results)


def test_tansu_lacks_create_partitions_one_line(bootstrap: str, unique_name: str) -> None:
    """On tansu, `topic alter --partitions` reaches the broker and fails with one clear line."""
    run("topic", "create", unique_name, "-p", "1", "-b", bootstrap)
    r = run("topic", "alter", unique_name, "--partitions", "2", "-b", bootstrap)
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "does not support" in lines[0] and "CreatePartitions" in lines[0]


def test_tansu_election_reaches_the_broker_one_line(bootstrap: str, unique_name: str) -> None:
    """`leader elect` on tansu gets as far as the broker (the client call itself is sound) and ends in one line."""
    run("topic", "create", unique_name, "-p", "1", "-b", bootstrap)
    r = run("leader", "elect", "--topic", unique_name, "-b", bootstrap)
    lines = r.stderr.strip().splitlines()
    # the broker's refusal is a failure (1), not an internal error (70, e.g. a client call that cannot be made)
    assert r.returncode == 1, r.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), r.stderr
