"""Consumer groups and lag through the real CLI against tansu."""

from __future__ import annotations

import json

import pytest
from _dataplane import run
from conftest import RealKafka

from clusterctl.kafka import admin, clients, connection, groups

pytestmark = pytest.mark.tansu


def _lag(bootstrap: str, group: str) -> dict:
    r = run("group", "describe", group, "-b", bootstrap, "--json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_lag_goes_to_zero_and_reset(bootstrap: str, unique_name: str) -> None:
    topic, group = unique_name, f"{unique_name}-g"
    admin.create_topic(bootstrap, topic, 1, 1)
    clients.produce(bootstrap, topic, [(f"k{i}", f"v{i}") for i in range(200)])

    r = run("consume", topic, "--group", group, "-n", "80", "-b", bootstrap, "--json")
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 80
    d = _lag(bootstrap, group)
    assert d["members"] == [] and d["total_lag"] == 120 and d["uncommitted_partitions"] == 0
    assert d["offsets"] == [
        {
            "topic": topic,
            "partition": 0,
            "committed": 80,
            "log_end": 200,
            "lag": 120,
            "member_id": None,
            "client_id": None,
            "host": None,
        }
    ]
    assert group in [g["group"] for g in json.loads(run("group", "list", "-b", bootstrap, "--json").stdout)]

    r = run("consume", topic, "--group", group, "--timeout", "2", "-b", bootstrap, "--json")
    assert len(r.stdout.splitlines()) == 120
    assert _lag(bootstrap, group)["total_lag"] == 0

    # dry run shows current -> new and changes nothing
    r = run("group", "reset", group, "--topic", topic, "--to-earliest", "-b", bootstrap, "--json")
    assert r.returncode == 0, r.stderr
    plan = json.loads(r.stdout)
    assert plan["executed"] is False
    assert plan["partitions"] == [{"topic": topic, "partition": 0, "current": 200, "new": 0}]
    assert _lag(bootstrap, group)["offsets"][0]["committed"] == 200

    r = run("group", "reset", group, "--topic", topic, "--to-offset", "150", "--execute", "-b", bootstrap)
    assert r.returncode == 0, r.stderr
    assert "150" in r.stdout
    d = _lag(bootstrap, group)
    assert d["offsets"][0]["committed"] == 150 and d["total_lag"] == 50

    r = run("group", "reset", group, "--topic", topic, "--to-offset", "9999", "--execute", "-b", bootstrap, "--json")
    assert json.loads(r.stdout)["partitions"][0]["new"] == 200  # clamped to the log end

    r = run("group", "reset", group, "--topic", topic, "--to-earliest", "--to-latest", "-b", bootstrap)
    assert r.returncode == 2 and "exactly one of" in r.stderr


def _active_consumer(bootstrap: str, topic: str, group: str):
    from confluent_kafka import Consumer

    c = Consumer(connection.consumer_config(bootstrap, group, client_id="lag-test-client"))
    c.subscribe([topic])
    for _ in range(60):
        c.poll(0.5)
        if c.assignment():
            break
    assert c.assignment()
    return c


def test_reset_refused_while_group_active(bootstrap: str, unique_name: str) -> None:
    topic, group = unique_name, f"{unique_name}-g"
    admin.create_topic(bootstrap, topic, 2, 1)
    clients.produce(bootstrap, topic, [(f"k{i}", "v") for i in range(10)])
    c = _active_consumer(bootstrap, topic, group)
    try:
        r = run("group", "reset", group, "--topic", topic, "--to-earliest", "--execute", "-b", bootstrap)
        assert r.returncode == 1 and "Kafka only resets offsets of an inactive group" in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
    finally:
        c.close()


@pytest.mark.real_kafka
def test_describe_active_group_members_real_kafka(real_kafka: RealKafka, unique_name: str) -> None:
    """tansu's DescribeGroups answer carries no members, so member/assignment columns need real Kafka."""
    bootstrap = real_kafka.bootstrap
    topic, group = unique_name, f"{unique_name}-g"
    admin.create_topic(bootstrap, topic, 2, 1)
    c = _active_consumer(bootstrap, topic, group)
    try:
        d = groups.describe_group(bootstrap, group)
        assert d.state == "STABLE"
        assert len(d.members) == 1 and d.members[0].client_id == "lag-test-client"
        assert sorted(d.members[0].assignment) == [f"{topic}-0", f"{topic}-1"]
        assert {(o.partition, o.client_id) for o in d.offsets} == {(0, "lag-test-client"), (1, "lag-test-client")}
    finally:
        c.close()


def test_unknown_group_and_delete(bootstrap: str, unique_name: str) -> None:
    r = run("group", "describe", "no-such-group", "-b", bootstrap)
    assert r.returncode == 3 and "consumer group 'no-such-group' not found" in r.stderr
    topic, group = unique_name, f"{unique_name}-g"
    admin.create_topic(bootstrap, topic, 1, 1)
    clients.produce(bootstrap, topic, [(None, "v")])
    list(clients.consume(bootstrap, topic, group=group, timeout=1))
    r = run("group", "delete", group, "-b", bootstrap, "--json")
    assert r.returncode == 0, r.stderr and json.loads(r.stdout) == {"group": group, "deleted": True}
    assert group not in [g.group for g in groups.list_groups(bootstrap)]


def test_partition_never_committed_has_unknown_lag(bootstrap: str, unique_name: str) -> None:
    topic, group = unique_name, f"{unique_name}-g"
    admin.create_topic(bootstrap, topic, 2, 1)
    clients.produce(bootstrap, topic, [(None, f"v{i}") for i in range(30)], partition=0)
    r = run("consume", topic, "--group", group, "--timeout", "2", "-b", bootstrap, "--json")
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 30
    clients.produce(bootstrap, topic, [(None, f"w{i}") for i in range(7)], partition=1)
    d = _lag(bootstrap, group)
    by_partition = {o["partition"]: (o["committed"], o["log_end"], o["lag"]) for o in d["offsets"]}
    assert by_partition == {0: (30, 30, 0), 1: (None, 7, None)}
    # the 7 unread records are not "lag 0": the partition is counted as unknown
    assert d["total_lag"] == 0 and d["uncommitted_partitions"] == 1
    r = run("group", "describe", group, "-b", bootstrap)
    assert "1 partition(s): lag unknown" in r.stdout
