"""Broker-side drills on a real 3-broker Apache Kafka cluster (needs CLUSTERCTL_KAFKA_DIST; skipped otherwise).

Test-only spec: subnet 10.79.0.0/24, ZK 23181-23183, brokers 29492-29494. Runs the shipped kill-leader and
preferred-election-after-restart scenarios through the real CLI and requires 0 acknowledged writes lost.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from _runtime_helpers import cli, cli_json, render, write_spec

from clusterctl import images

pytestmark = [pytest.mark.real_kafka, pytest.mark.docker]


@pytest.fixture(scope="module")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    images.build_images(["zookeeper", "kafka"], kafka_dist=Path(os.environ[images.KAFKA_DIST_ENV]))
    work = tmp_path_factory.mktemp("chaos-kafka")
    spec_path = write_spec(work, f"ctlchaosk-{uuid.uuid4().hex[:6]}", "10.79.0.0/24", zk_port=23181,
                           broker_port=29492, engine="kafka", brokers=3)  # fmt: skip
    render(spec_path)
    try:
        res = cli(spec_path, "up", "--timeout", "300")
        assert res.returncode == 0, res.stderr
        yield spec_path
    finally:
        cli(spec_path, "down", "--volumes")


@pytest.mark.parametrize("scenario", ["kill-leader", "preferred-election-after-restart", "graceful-stop"])
def test_drill_loses_no_acknowledged_write(kafka_cluster: Path, tmp_path: Path, scenario: str) -> None:
    res = cli(kafka_cluster, "scenario", "run", scenario, "--report-dir", str(tmp_path), "--json", timeout=900)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["ok"] and data["verify"]["lost_count"] == 0 and data["verify"]["reordered_count"] == 0
    assert data["verify"]["acked"] > 0
    fault = data["faults"][0]
    assert fault["detected_s"] is not None
    led = [p for p in fault["partitions"] if p["led_by_target"]]
    assert led and all(p["time_to_new_leader_s"] is not None for p in led)
    print(f"\n{scenario}: {json.dumps(fault)}")


def test_leader_imbalance_and_elect(kafka_cluster: Path) -> None:
    data = cli_json(kafka_cluster, "leader", "imbalance")
    assert {b["broker"] for b in data["brokers"]} <= {1, 2, 3}
    res = cli(kafka_cluster, "leader", "elect", "--preferred", "--all", "--json")
    assert res.returncode == 0, res.stderr
    assert cli_json(kafka_cluster, "leader", "imbalance")["not_preferred"] == []


def test_kill_leader_command_moves_leadership(kafka_cluster: Path) -> None:
    topic = f"kl-{uuid.uuid4().hex[:6]}"
    assert (
        cli(kafka_cluster, "topic", "create", topic, "--partitions", "1", "--replication-factor", "3").returncode == 0
    )
    out = cli_json(kafka_cluster, "chaos", "kill-leader", topic, "0")
    assert out[0]["after"] == "exited"
    cli(kafka_cluster, "chaos", "heal")


def test_throttled_reassignment_moves_replicas_and_removes_throttle(kafka_cluster: Path, tmp_path: Path) -> None:
    topic = f"ra-{uuid.uuid4().hex[:6]}"
    res = cli(kafka_cluster, "topic", "create", topic, "--partitions", "3", "--replication-factor", "2")
    assert res.returncode == 0, res.stderr
    assert (
        cli(kafka_cluster, "perf", "produce", topic, "--num-records", "20000", "--record-size", "1000").returncode == 0
    )
    (desc,) = cli_json(kafka_cluster, "topic", "describe", topic)
    # each partition gets the broker it lacks as its new preferred leader
    moves = [
        {"topic": topic, "partition": p["partition"],
         "replicas": [next(b for b in (1, 2, 3) if b not in p["replicas"]), p["replicas"][0]]}
        for p in desc["partitions"]
    ]  # fmt: skip
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": moves}))
    res = cli(kafka_cluster, "reassign", topic, "--plan", str(plan), "--execute", "--throttle", "5000000", "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["moved"] == 3 and out["throttle"] == 5000000 and out["throttle_removed"] is True
    (after,) = cli_json(kafka_cluster, "topic", "describe", topic)
    assert {p["partition"]: sorted(p["replicas"]) for p in after["partitions"]} == {
        m["partition"]: sorted(m["replicas"]) for m in moves
    }
    assert not {"leader.replication.throttled.replicas", "follower.replication.throttled.replicas"} & set(
        after["configs"]
    )
    print(f"\nthrottled reassignment of 3 partitions (60 MB at 5 MB/s per broker): {out['seconds']}s")
