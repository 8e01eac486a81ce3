"""produce / consume through the real CLI and the clients module, against tansu."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
from _dataplane import run

from clusterctl.errors import UsageError
from clusterctl.kafka import admin, clients, connection

pytestmark = pytest.mark.tansu


def test_client_configs() -> None:
    p = connection.producer_config("127.0.0.1:1", acks="all", linger_ms=20)
    assert p["enable.idempotence"] is True and p["acks"] == "all" and p["linger.ms"] == 20
    assert connection.producer_config("127.0.0.1:1", acks="1")["enable.idempotence"] is False
    with pytest.raises(UsageError):
        connection.producer_config("127.0.0.1:1", acks="2")
    c = connection.consumer_config("127.0.0.1:1")
    assert c["group.id"].startswith("clusterctl-nogroup-") and c["enable.auto.commit"] is False
    assert c["session.timeout.ms"] == 6000
    assert connection.consumer_config("127.0.0.1:1", "g1")["group.id"] == "g1"


def test_keyed_round_trip_preserves_order_within_partition(bootstrap: str, unique_name: str) -> None:
    admin.create_topic(bootstrap, unique_name, 3, 1)
    lines = "".join(f"key{i % 7}:value-{i}\n" for i in range(300))
    r = run("produce", unique_name, "--key-separator", ":", "-b", bootstrap, "--json", stdin=lines)
    assert r.returncode == 0, r.stderr
    summary = json.loads(r.stdout)
    assert summary["sent"] == summary["delivered"] == 300 and summary["failed"] == 0
    assert sum(p["delivered"] for p in summary["partitions"]) == 300

    r = run("consume", unique_name, "--from-beginning", "--timeout", "3", "-b", bootstrap, "--json")
    assert r.returncode == 0, r.stderr
    records = [json.loads(line) for line in r.stdout.splitlines()]
    assert len(records) == 300
    assert {(p["partition"], p["delivered"]) for p in summary["partitions"]} == {
        (p, sum(1 for x in records if x["partition"] == p)) for p in {x["partition"] for x in records}
    }
    key_partition: dict[str, set[int]] = defaultdict(set)
    per_key: dict[str, list[int]] = defaultdict(list)
    for rec in records:
        key_partition[rec["key"]].add(rec["partition"])
        per_key[rec["key"]].append(int(rec["value"].removeprefix("value-")))
    assert all(len(parts) == 1 for parts in key_partition.values())  # a key always lands on one partition
    for key, seq in per_key.items():  # ... and keeps its produce order there
        assert seq == sorted(seq), key
        assert len(seq) == len([i for i in range(300) if f"key{i % 7}" == key])
    # offsets within a partition are consecutive from 0
    by_part: dict[int, list[int]] = defaultdict(list)
    for rec in records:
        by_part[rec["partition"]].append(rec["offset"])
    assert all(offs == list(range(len(offs))) for offs in by_part.values())


@pytest.mark.parametrize("acks", ["0", "1", "all"])
def test_acks_variants_and_partition(bootstrap: str, unique_name: str, acks: str, tmp_path) -> None:
    admin.create_topic(bootstrap, unique_name, 2, 1)
    f = tmp_path / "in.txt"
    f.write_text("".join(f"m{i}\n" for i in range(50)))
    r = run("produce", unique_name, "--file", str(f), "--acks", acks, "--partition", "1", "-b", bootstrap, "--json")
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["acks"] == acks and s["delivered"] == 50 and s["partitions"] == [{"partition": 1, "delivered": 50}]
    recs = list(clients.consume(bootstrap, unique_name, start="beginning", partition=1, timeout=2))
    assert [r.value for r in recs] == [f"m{i}" for i in range(50)] and all(r.key is None for r in recs)
    assert list(clients.consume(bootstrap, unique_name, start="beginning", partition=0, timeout=1)) == []


def test_consume_offsets_and_max_messages(bootstrap: str, unique_name: str) -> None:
    admin.create_topic(bootstrap, unique_name, 1, 1)
    clients.produce(bootstrap, unique_name, [(None, f"v{i}") for i in range(20)])
    r = run("consume", unique_name, "--offset", "15", "--partition", "0", "--timeout", "2", "-b", bootstrap, "--json")
    assert [json.loads(x)["offset"] for x in r.stdout.splitlines()] == [15, 16, 17, 18, 19]
    r = run("consume", unique_name, "--from-beginning", "-n", "4", "-b", bootstrap)
    assert r.returncode == 0
    lines = r.stdout.splitlines()
    assert lines == [f"partition=0 offset={i} key=- value=v{i}" for i in range(4)]
    assert "consumed 4 messages" in r.stderr
    r = run("consume", unique_name, "--offset", "latest", "--timeout", "1", "-b", bootstrap, "--json")
    assert r.returncode == 0 and r.stdout == ""
    r = run("consume", unique_name, "--from-beginning", "--offset", "3", "-b", bootstrap)
    assert r.returncode == 2 and "either --from-beginning or --offset" in r.stderr
    r = run("consume", unique_name, "--partition", "5", "-b", bootstrap)
    assert r.returncode == 2 and "partitions 0..0" in r.stderr


def test_consume_without_group_leaves_no_group(bootstrap: str, unique_name: str) -> None:
    from clusterctl.kafka import groups

    admin.create_topic(bootstrap, unique_name, 1, 1)
    clients.produce(bootstrap, unique_name, [(None, "x")])
    before = {g.group for g in groups.list_groups(bootstrap)}
    assert len(list(clients.consume(bootstrap, unique_name, start="beginning", timeout=1))) == 1
    after = {g.group for g in groups.list_groups(bootstrap)}
    assert after == before


def test_missing_key_separator_is_usage_error(bootstrap: str, unique_name: str) -> None:
    admin.create_topic(bootstrap, unique_name, 1, 1)
    r = run("produce", unique_name, "--key-separator", ":", "-b", bootstrap, stdin="no-separator-here\n")
    assert r.returncode == 2 and "no key separator" in r.stderr
