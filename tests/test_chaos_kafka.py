"""Broker-side drills on the shared real 3-broker Apache Kafka cluster (tests/conftest.py: the session's Kafka).

Runs the shipped scenarios through the real CLI: the no-loss drills must lose no acknowledged write, and the
negative controls must lose some (the verifier is shown to catch a real loss). Every test leaves the cluster
healed and healthy (the real_kafka fixture), so none depends on another's order.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from _runtime_helpers import cli, cli_json
from conftest import RealKafka

from clusterctl.kafka import brokers
from clusterctl.zookeeper import client as zk

pytestmark = [pytest.mark.real_kafka, pytest.mark.docker]


def new_leader_bound_s(real_kafka: RealKafka) -> float:
    """A dead broker's partitions get a new leader once its ZooKeeper session expires: the spec's timeout + 5 s."""
    return real_kafka.spec.kafka.defaults.zookeeper_session_timeout_ms / 1000 + 5


def run_drill(real_kafka: RealKafka, report_dir: Path, scenario: str) -> dict[str, Any]:
    """`scenario run NAME --json`: exit 0, a passing verdict, and a ledger that saw writes acknowledged."""
    res = cli(real_kafka.spec_path, "scenario", "run", scenario, "--report-dir", str(report_dir), "--json",
              timeout=900)  # fmt: skip
    assert res.returncode == 0, f"{scenario}: {res.stdout[-2000:]} / {res.stderr[-2000:]}"
    data: dict[str, Any] = json.loads(res.stdout)
    assert data["ok"] is True and data["scenario"] == scenario and all(s["ok"] for s in data["steps"])
    assert data["verify"]["acked"] > 1000 and data["load"]["failed"] == 0, data["load"]
    return data


@pytest.mark.parametrize(
    ("scenario", "broker"),
    [("kill-leader", None), ("preferred-election-after-restart", 2), ("graceful-stop", 2), ("pause-broker", 3),
     ("network-partition", 1)],
)  # fmt: skip
def test_drill_loses_no_acknowledged_write(
    real_kafka: RealKafka, tmp_path: Path, scenario: str, broker: int | None
) -> None:
    """Each no-loss drill whose fault takes a broker away: 0 lost, and its partitions get a new leader in time."""
    data = run_drill(real_kafka, tmp_path, scenario)
    v = data["verify"]
    assert v["lost_count"] == 0 and v["reordered_count"] == 0 and data["expect"] == "no-loss"
    assert data["loss_settings"] == []
    assert data["bounds"] == {"zookeeper.session.timeout.ms": "6000", "replica.lag.time.max.ms": "10000"}
    fault = data["faults"][0]
    assert fault["detected_s"] is not None
    if broker is not None:
        assert fault["broker"] == broker, fault
    led = [p for p in fault["partitions"] if p["led_by_target"]]
    new_leader = [p["time_to_new_leader_s"] for p in led]
    assert led and all(t is not None and 0 <= t <= new_leader_bound_s(real_kafka) for t in new_leader), fault
    print(f"\n{scenario}: acked {v['acked']}, lost 0, detected {fault['detected_s']} s by {fault['detected_by']}, "
          f"new leader {new_leader} s (bound {new_leader_bound_s(real_kafka)} s)")  # fmt: skip


def test_rolling_restart_loses_no_acknowledged_write(real_kafka: RealKafka, tmp_path: Path) -> None:
    """Every broker restarted in turn under acks=all load: nothing lost, every broker back in the end."""
    data = run_drill(real_kafka, tmp_path, "rolling-restart")
    v = data["verify"]
    assert v["lost_count"] == 0 and v["reordered_count"] == 0 and data["expect"] == "no-loss"
    # one restart per broker, in order, each on the timeline with its partitions' failover
    assert [(f["action"], f["broker"]) for f in data["faults"]] == [("restart-broker", b) for b in (1, 2, 3)]
    new_leader = [p["time_to_new_leader_s"] for f in data["faults"] for p in f["partitions"] if p["led_by_target"]]
    assert new_leader and all(t is not None and 0 <= t <= new_leader_bound_s(real_kafka) for t in new_leader)
    with zk.zk_client(real_kafka.spec.topology.zk_connect) as c:
        assert zk.registered_brokers(c) == [1, 2, 3]
    print(f"\nrolling-restart: acked {v['acked']}, lost 0, new leader {new_leader} s")


@pytest.mark.parametrize(
    ("scenario", "setting"),
    [("acks1-leader-isolated", "acks=1"), ("unclean-election", "unclean.leader.election.enable=true")],
)
def test_negative_control_loses_acknowledged_writes(
    real_kafka: RealKafka, tmp_path: Path, scenario: str, setting: str
) -> None:
    """The verifier catches a real loss: the run passes only because lost > 0, and says which setting allowed it."""
    res = cli(real_kafka.spec_path, "scenario", "run", scenario, "--report-dir", str(tmp_path), "--json",
              timeout=900)  # fmt: skip
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    v = data["verify"]
    assert data["ok"] and data["expect"] == "loss" and v["lost_count"] > 0 and v["acked"] > 1000, v
    fault = [f for f in data["faults"] if f["action"] == "kill-leader"][-1]
    led = [p for p in fault["partitions"] if p["led_by_target"] and p["partition"] == 0]
    assert led and led[0]["time_to_new_leader_s"] is not None, fault
    assert any(s.startswith(setting) for s in data["loss_settings"])
    lost = [p for p in v["partitions"] if p["lost"]]
    assert lost and all(p["lost_offsets"] for p in lost)
    assert sum(p["lost"] for p in lost) == v["lost_count"]
    page = (tmp_path / "report.html").read_text()
    assert "Lost acknowledged offsets per partition" in page and f"allowed by: {setting}" in page
    print(f"\n{scenario}: acked {v['acked']}, lost {v['lost_count']}, duplicated {v['duplicated_count']}, "
          f"lost offsets {[(p['partition'], p['lost_offsets']) for p in lost]}")  # fmt: skip


def test_leader_imbalance_and_elect(real_kafka: RealKafka) -> None:
    data = cli_json(real_kafka.spec_path, "leader", "imbalance")
    assert {b["broker"] for b in data["brokers"]} <= {1, 2, 3}
    res = cli(real_kafka.spec_path, "leader", "elect", "--preferred", "--all", "--json")
    assert res.returncode == 0, res.stderr
    assert cli_json(real_kafka.spec_path, "leader", "imbalance")["not_preferred"] == []


def test_kill_leader_then_heal_waits_until_the_broker_is_back(real_kafka: RealKafka) -> None:
    """`chaos heal` returns only once the restarted broker is registered and in every broker's metadata."""
    spec_path, spec = real_kafka.spec_path, real_kafka.spec
    topic = f"kl-{uuid.uuid4().hex[:6]}"
    res = cli(spec_path, "topic", "create", topic, "--partitions", "1", "--replication-factor", "3")
    assert res.returncode == 0, res.stderr
    (killed,) = cli_json(spec_path, "chaos", "kill-leader", topic, "0")
    assert killed["after"] == "exited"
    broker = int(killed["target"].split()[1])
    started = time.monotonic()
    healed = cli_json(spec_path, "chaos", "heal")
    took = time.monotonic() - started
    assert [h["target"] for h in healed["healed"]] == [f"broker {broker}"]
    assert healed["wait"]["brokers"] == [1, 2, 3]
    # no waiting here: the very next command sees the broker
    with zk.zk_client(spec.topology.zk_connect) as c:
        assert zk.registered_brokers(c) == [1, 2, 3]
    views = brokers.metadata_per_broker(
        {b: f"{spec.topology.host}:{spec.topology.broker_host_port(b)}" for b in spec.topology.broker_ids}
    )
    assert all(not isinstance(v, str) and v.brokers == {1, 2, 3} for v in views.values()), views
    print(f"\nchaos heal after kill-leader (broker {broker}): {took:.1f}s, waited {healed['wait']['seconds']}s")


def test_throttled_reassignment_moves_replicas_and_removes_throttle(real_kafka: RealKafka, tmp_path: Path) -> None:
    spec_path = real_kafka.spec_path
    topic = f"ra-{uuid.uuid4().hex[:6]}"
    res = cli(spec_path, "topic", "create", topic, "--partitions", "3", "--replication-factor", "2")
    assert res.returncode == 0, res.stderr
    assert cli(spec_path, "perf", "produce", topic, "--num-records", "20000", "--record-size", "1000").returncode == 0
    (desc,) = cli_json(spec_path, "topic", "describe", topic)
    # each partition gets the broker it lacks as its new preferred leader
    moves = [
        {"topic": topic, "partition": p["partition"],
         "replicas": [next(b for b in (1, 2, 3) if b not in p["replicas"]), p["replicas"][0]]}
        for p in desc["partitions"]
    ]  # fmt: skip
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"version": 1, "partitions": moves}))
    res = cli(spec_path, "reassign", topic, "--plan", str(plan), "--execute", "--throttle", "5000000", "--json")
    assert res.returncode == 0, res.stderr
    out = json.loads(res.stdout)
    assert out["moved"] == 3 and out["throttle"] == 5000000 and out["throttle_removed"] is True
    (after,) = cli_json(spec_path, "topic", "describe", topic)
    assert {p["partition"]: sorted(p["replicas"]) for p in after["partitions"]} == {
        m["partition"]: sorted(m["replicas"]) for m in moves
    }
    assert not {"leader.replication.throttled.replicas", "follower.replication.throttled.replicas"} & set(
        after["configs"]
    )
    print(f"\nthrottled reassignment of 3 partitions (60 MB at 5 MB/s per broker): {out['seconds']}s")


def test_leader_elect_with_a_failed_partition_exits_non_zero(real_kafka: RealKafka) -> None:
    """A preferred election whose preferred replica is down fails: one line, a non-zero exit, and with --json one
    document (the error object carrying each partition's result)."""
    spec_path, cluster = real_kafka.spec_path, real_kafka.cluster
    topic = cluster.create_topic(f"el-{uuid.uuid4().hex[:6]}", partitions=1, replication_factor=3)
    preferred = cluster.describe(topic).partitions[0].replicas[0]
    cluster.stop_broker(preferred)
    res = cli(spec_path, "leader", "elect", "--preferred", "--topic", topic, "--partition", "0")
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 1 and "1 of 1 elections failed" in lines[-1] and "Traceback" not in res.stderr, res.stderr
    res = cli(spec_path, "leader", "elect", "--preferred", "--topic", topic, "--partition", "0", "--json")
    doc = json.loads(res.stdout)
    assert res.returncode == 1 and doc["exit_code"] == 1 and "elections failed" in doc["error"], res.stdout
    assert [(r["topic"], r["partition"], r["ok"]) for r in doc["result"]] == [(topic, 0, False)]
