"""Table and JSON shapes of topic describe, group describe and cluster describe (pure output tests)."""

from __future__ import annotations

import json

import pytest
from rich.console import Console

from clusterctl import output
from clusterctl.cli import group as group_cli
from clusterctl.cli import topic as topic_cli
from clusterctl.kafka.admin import BrokerInfo, ClusterInfo, PartitionState, TopicDescription
from clusterctl.kafka.groups import GroupDescription, GroupMember, PartitionLag


@pytest.fixture
def out(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    monkeypatch.setattr(output, "console", Console(width=200, force_terminal=False, color_system=None))
    return capsys


def _topic() -> TopicDescription:
    return TopicDescription(
        name="arnold_test_many_three",
        partition_count=3,
        replication_factor=3,
        internal=False,
        partitions=[
            PartitionState("arnold_test_many_three", 0, 3, [3, 1, 2], [3, 1], False, True),
            PartitionState("arnold_test_many_three", 1, 1, [1, 2, 3], [1, 2, 3], False, False),
            PartitionState("arnold_test_many_three", 2, -1, [2], [], True, True, "LEADER_NOT_AVAILABLE"),
        ],
        configs={"retention.ms": "3600000"},
    )


def test_topic_describe_table(out) -> None:
    topic_cli.render_describe([_topic()], as_json=False)
    text = out.readouterr().out
    lines = text.splitlines()
    assert lines[0] == (
        "Topic: arnold_test_many_three  PartitionCount: 3  ReplicationFactor: 3  Configs: retention.ms=3600000"
    )
    header = next(line for line in lines if "Partition" in line and "Leader" in line)
    assert [h.strip() for h in header.strip("┃│ ").replace("┃", "|").replace("│", "|").split("|")] == [
        "Partition",
        "Leader",
        "Replicas",
        "Isr",
        "Status",
    ]
    rows = [[c.strip() for c in line.replace("│", "|").strip("| ").split("|")] for line in lines if "│" in line]
    assert ["0", "3", "3,1,2", "3,1", "under-replicated"] in rows
    assert ["1", "1", "1,2,3", "1,2,3", "ok"] in rows
    assert ["2", "-1", "2", "", "offline"] in rows  # Leader -1 like kafka-topics.sh after a broker stops


def test_topic_describe_json_and_filters(out) -> None:
    t = _topic()
    topic_cli.render_describe(topic_cli.filter_partitions([t], under_replicated=False, unavailable=True), True)
    (doc,) = json.loads(out.readouterr().out)
    assert list(doc) == ["name", "partition_count", "replication_factor", "internal", "partitions", "configs"]
    assert [p["partition"] for p in doc["partitions"]] == [2]
    assert doc["partitions"][0] == {
        "topic": "arnold_test_many_three",
        "partition": 2,
        "leader": -1,
        "replicas": [2],
        "isr": [],
        "offline": True,
        "under_replicated": True,
        "error": "LEADER_NOT_AVAILABLE",
        "elr": None,  # KIP-966 (Kafka 4.x with ELR on): from DescribeTopicPartitions; None where not reported
        "last_known_elr": None,
    }
    under = topic_cli.filter_partitions([t], under_replicated=True, unavailable=False)
    assert [p.partition for p in under[0].partitions] == [0, 2]
    healthy = TopicDescription("ok", 1, 1, False, [PartitionState("ok", 0, 1, [1], [1], False, False)])
    assert topic_cli.filter_partitions([healthy], True, True) == []


def _group() -> GroupDescription:
    return GroupDescription(
        group="g1",
        state="STABLE",
        coordinator=2,
        assignor="range",
        members=[GroupMember("m-1", "client-a", "/10.77.0.1", ["t-0", "t-1"])],
        offsets=[
            PartitionLag("t", 0, 80, 200, 120, "m-1", "client-a", "/10.77.0.1"),
            PartitionLag("t", 1, None, 5, None, "m-1", "client-a", "/10.77.0.1"),
        ],
        total_lag=120,
        uncommitted_partitions=1,
    )


def test_group_describe_table(out) -> None:
    group_cli.render_group(_group(), as_json=False)
    text = out.readouterr().out
    assert any(line.startswith("Total lag") and line.split()[-1] == "120" for line in text.splitlines())
    assert any(
        line.startswith("No committed offset") and "1 partition(s): lag unknown" in line for line in text.splitlines()
    )
    kv = {line.split()[0]: line.split()[-1] for line in text.splitlines()[:6] if line.strip()}
    assert kv["Group"] == "g1" and kv["State"] == "STABLE" and kv["Members"] == "1"
    rows = [
        [c.strip() for c in line.replace("│", "|").strip("| ").split("|")] for line in text.splitlines() if "│" in line
    ]
    assert ["t", "0", "80", "200", "120", "client-a", "/10.77.0.1"] in rows
    assert ["t", "1", "-", "5", "-", "client-a", "/10.77.0.1"] in rows
    assert ["m-1", "client-a", "/10.77.0.1", "t-0,t-1"] in rows
    for header in ("Current-Offset", "Log-End-Offset", "Lag", "Client-Id", "Assignment"):
        assert header in text


def test_group_describe_json(out) -> None:
    group_cli.render_group(_group(), as_json=True)
    doc = json.loads(out.readouterr().out)
    assert list(doc) == [
        "group", "state", "coordinator", "assignor", "members", "offsets", "total_lag", "uncommitted_partitions",
        "protocol", "session_timeout",
    ]  # fmt: skip
    assert doc["members"] == [
        {"member_id": "m-1", "client_id": "client-a", "host": "/10.77.0.1", "assignment": ["t-0", "t-1"]}
    ]
    assert doc["offsets"][1] == {
        "topic": "t",
        "partition": 1,
        "committed": None,
        "log_end": 5,
        "lag": None,
        "member_id": "m-1",
        "client_id": "client-a",
        "host": "/10.77.0.1",
    }
    assert doc["total_lag"] == 120 and doc["uncommitted_partitions"] == 1


def test_cluster_describe_shapes(out) -> None:
    from clusterctl.cli import cluster as cluster_cli

    info = ClusterInfo("abc123", 2, [BrokerInfo(1, "127.0.0.1", 9092, "r1"), BrokerInfo(2, "127.0.0.1", 9093)])
    output.emit(info, as_json=True)
    doc = json.loads(out.readouterr().out)
    assert doc == {
        "cluster_id": "abc123",
        "controller_id": 2,
        "brokers": [
            {"id": 1, "host": "127.0.0.1", "port": 9092, "rack": "r1"},
            {"id": 2, "host": "127.0.0.1", "port": 9093, "rack": None},
        ],
    }
    assert hasattr(cluster_cli, "cmd_cluster_describe")
    cols = [output.Column("Broker", "id"), output.Column("Address", "address"), output.Column("Rack", "rack")]
    output.emit(info.brokers, as_json=False, columns=cols)
    rows = [
        [c.strip() for c in line.replace("│", "|").strip("| ").split("|")]
        for line in out.readouterr().out.splitlines()
        if "│" in line
    ]
    assert rows == [["1", "127.0.0.1:9092", "r1"], ["2", "127.0.0.1:9093", "-"]]
