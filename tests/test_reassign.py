"""`clusterctl reassign`: throttle configs (pure), plan validation through the real CLI against tansu.

Executing moves needs replication (real Apache Kafka): see tests/test_chaos_kafka.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _dataplane import run

from clusterctl.kafka import admin
from clusterctl.kafka.reassign import throttle_for


def test_throttle_configs_match_kafka_reassign_partitions() -> None:
    current = {("t", 0): [1, 2], ("t", 1): [2, 3], ("t", 2): [3, 1]}
    moves = {("t", 0): [1, 2], ("t", 1): [2, 4], ("t", 2): [4, 5]}  # partition 0 does not move
    th = throttle_for(current, moves, 10_000_000)
    assert th.rate == 10_000_000
    assert th.brokers == [1, 2, 3, 4, 5]
    assert th.topic_configs == {
        "t": {
            # every current replica of a moving partition may lead the throttled copy ...
            "leader.replication.throttled.replicas": "1:2,1:3,2:3,2:1",
            # ... and only the replicas being added follow it
            "follower.replication.throttled.replicas": "1:4,2:4,2:5",
        }
    }


def test_throttle_nothing_moves_and_bad_rate() -> None:
    same = {("t", 0): [1, 2]}
    th = throttle_for(same, dict(same), 1)
    assert th.brokers == [] and th.topic_configs == {}
    from clusterctl.errors import UsageError

    with pytest.raises(UsageError, match="positive rate"):
        throttle_for(same, same, 0)


@pytest.mark.tansu
def test_plan_validation_errors_are_one_line(bootstrap: str, unique_name: str, tmp_path: Path) -> None:
    admin.create_topic(bootstrap, unique_name, 2, 1)
    (me,) = [b.id for b in admin.cluster_info(bootstrap).brokers]

    # dry run: a valid plan is printed, nothing is started
    r = run("reassign", unique_name, "--generate", "--brokers", str(me), "-b", bootstrap, "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {
        "version": 1,
        "partitions": [{"topic": unique_name, "partition": p, "replicas": [me]} for p in (0, 1)],
    }

    def plan(entries: list[dict]) -> str:
        path = tmp_path / f"plan{len(list(tmp_path.iterdir()))}.json"
        path.write_text(json.dumps({"version": 1, "partitions": entries}))
        return str(path)

    other = me + 100
    cases = [
        (("--generate", "--brokers", f"{me},{other}"), f"--brokers names broker(s) {other} not in the cluster"),
        (("--plan", plan([{"topic": unique_name, "partition": 0, "replicas": [me, me]}])), "repeats a broker"),
        (("--plan", plan([{"topic": unique_name, "partition": 7, "replicas": [me]}])), "has 2 partitions"),
        (("--plan", plan([{"topic": "other", "partition": 0, "replicas": [me]}])), "topics other than"),
        (("--plan", plan([{"topic": unique_name, "partition": 0, "replicas": [other]}])), "not in the cluster"),
        (("--plan", str(tmp_path / "missing.json")), "does not exist"),
        (("--plan", plan([{"topic": unique_name}])), "is not a reassignment plan"),
        (("--generate", "--brokers", str(me), "--throttle", "1000"), "--throttle applies to --execute"),
        (("--verify", "--execute"), "--verify takes no plan"),
        ((), "give exactly one of --plan FILE or --generate"),
    ]
    for args, expected in cases:
        r = run("reassign", unique_name, *args, "-b", bootstrap)
        lines = r.stderr.strip().splitlines()
        assert r.returncode == 2 and len(lines) == 1 and expected in lines[0], (args, r.stderr)

    r = run("reassign", "no-such-topic", "--generate", "--brokers", str(me), "-b", bootstrap)
    assert r.returncode == 3 and len(r.stderr.strip().splitlines()) == 1 and "unknown topic" in r.stderr, r.stderr
