"""Scenario files: every shipped scenario validates; bad files fail with one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from clusterctl.chaos.scenario import SCENARIO_DIR, list_scenarios, load_scenario, parse_scenario
from clusterctl.errors import SpecError

CLI = str(Path(sys.executable).parent / "clusterctl")  # the console script of the running environment
SHIPPED = {
    "kill-leader", "graceful-stop", "pause-broker", "network-partition", "zk-node-loss", "rolling-restart",
    "preferred-election-after-restart", "short-pause", "short-partition", "acks1-leader-isolated", "unclean-election",
    "kill-controller", "kill-controller-quorum", "slow-follower", "lossy-leader", "disk-full-broker", "slow-zookeeper",
    "slow-controller-quorum", "zk-to-kraft", "zk-to-kraft-rollback", "zk-to-kraft-rollback-from-kraft-brokers",
    "zk-to-kafka4", "upgrade-to-kafka4",
    "upgrade-rollback", "spark-kill-worker", "spark-kill-leader",
    "spark-restart-driver", "kill-node", "group-member-crash", "group-coordinator-loss", "replace-dead-controller",
    "last-replica-standing",
    "last-replica-standing-unclean", "unclean-election-elr",
}  # fmt: skip
# the tests that run shipped scenarios end to end: tansu/ZooKeeper (CI) and real Apache Kafka (ZooKeeper and KRaft mode)
DRILL_TESTS = (
    "test_chaos_zk.py", "test_chaos_kafka.py", "test_kraft_cluster.py", "test_scenario_compare.py",
    "test_chaos_degraded.py", "test_chaos_disk.py", "test_migration_drill_kafka.py", "test_spark_drills.py",
    "test_spark_drill_kafka.py", "test_swarm_kafka.py", "test_upgrade_kafka.py", "test_group_drills_kafka.py",
    "test_dynamic_quorum_kafka.py", "test_elr_kafka.py",
)  # fmt: skip


def test_shipped_scenarios_validate() -> None:
    infos = {s.name: s for s in list_scenarios()}
    assert set(infos) >= SHIPPED
    assert infos["zk-node-loss"].requires == "zookeeper" and infos["kill-leader"].requires == "kafka"
    assert infos["short-pause"].requires == infos["short-partition"].requires == "any"
    negative = {"acks1-leader-isolated", "unclean-election", "unclean-election-elr", "last-replica-standing-unclean"}
    assert {n for n, i in infos.items() if i.expect == "loss"} == negative
    for p in SCENARIO_DIR.glob("*.yaml"):
        assert parse_scenario(p.read_text(), str(p)).name == p.stem


def test_spark_drills_need_what_they_drill() -> None:
    """spark-kill-leader kills a partition leader: it needs replication (RF 3 on 3 brokers, min.insync 2) and is
    refused before anything starts elsewhere; spark-restart-driver kills only the driver and runs on any broker."""
    from clusterctl.chaos.runner import Runner
    from clusterctl.errors import UsageError
    from clusterctl.spec.model import parse_spec

    leader, driver = load_scenario("spark-kill-leader"), load_scenario("spark-restart-driver")
    assert (leader.requires, driver.requires) == ("kafka", "any")
    t = leader.topic
    assert (t.partitions, t.replication_factor, t.min_insync_replicas) == (3, 3, 2)
    for sc in (leader, driver):
        kinds = [(s.kind, getattr(s.args, "job", None), getattr(s.args, "action", None)) for s in sc.parsed_steps()]
        spark = [k for k in kinds if "spark" in k[0]]
        assert spark[0] == ("spark_job", "key_counts", "start") and spark[-1] == ("spark_job", "key_counts", "stop")
        assert ("verify_spark", "key_counts", None) in spark and ("verify", None, None) in kinds
        assert [k[0] for k in kinds].index("start_load") < [k[0] for k in kinds].index("stop_load")
    assert ("fault", None, "kill-leader") in [(s.kind, None, getattr(s.args, "action", None))
                                                for s in leader.parsed_steps()]  # fmt: skip
    rf1 = {"replication_factor": 1, "min_insync_replicas": 1}
    tansu = parse_spec({"name": "lab", "profile": "offline", "kafka_manager": {"enabled": False},
                        "kafka": {"engine": "tansu", "brokers": 1, "defaults": rf1}})  # fmt: skip
    with pytest.raises(UsageError, match=r"^scenario spark-kill-leader needs replication \(real Apache Kafka\)"):
        Runner(tansu, leader).preflight()
    one = parse_spec({"name": "lab", "profile": "offline", "kafka_manager": {"enabled": False},
                      "kafka": {"engine": "kafka", "brokers": 1, "defaults": rf1}})  # fmt: skip
    with pytest.raises(UsageError, match=r"^scenario spark-kill-leader wants RF 3 but the spec has 1 brokers"):
        Runner(one, leader).preflight()


def test_every_shipped_scenario_is_run_by_a_test() -> None:
    """A shipped scenario nobody runs is a claim nobody checks: each is named in a drill test."""
    here = Path(__file__).parent
    text = "\n".join((here / name).read_text() for name in DRILL_TESTS)
    shipped = {p.stem for p in SCENARIO_DIR.glob("*.yaml")}
    assert shipped == SHIPPED
    assert sorted(n for n in shipped if f'"{n}"' not in text) == []


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ("name: x\nsteps: []\n", "<s>: steps: List should have at least 1 item after validation, not 0"),
        ("name: x\nsteps:\n  - explode: {}\n", "<s>: step 1: unknown step 'explode'"),
        ("name: x\nsteps:\n  - sleep: -1\n", "<s>: step 1 (sleep): expected seconds >= 0, got -1"),
        ("name: x\nsteps:\n  - fault: {action: kill-broker}\n", "<s>: step 1 (fault): kill-broker needs broker: <id>"),
        ("name: x\nsteps:\n  - fault: {action: melt}\n", "<s>: step 1 (fault): action: Input should be"),
        (
            "name: x\nsteps:\n  - fault: {action: kill-spark-worker}\n",
            "<s>: step 1 (fault): kill-spark-worker needs spark_worker: <N of spark-workerN>",
        ),
        ("name: x\nsteps:\n  - fault: {action: delay, ms: 100}\n", "<s>: step 1 (fault): delay needs node:"),
        ("name: x\nsteps:\n  - fault: {action: delay, node: kafka1, ms: -3}\n", "<s>: step 1 (fault): delay must be"),
        ("name: x\nsteps:\n  - fault: {action: loss, node: leader}\n", "<s>: step 1 (fault): loss must be 0.01..100%"),
        ("name: x\nsteps:\n  - wait_for: {timeout: 5}\n", "<s>: step 1 (wait_for): give exactly one condition"),
        ("name: x\nsteps:\n  - wait_for: {zk_quorum: maybe}\n", "<s>: step 1 (wait_for): zk_quorum: Input should be"),
        ("name: x\nsteps:\n  - sleep: 1\n    heal: {}\n", "<s>: step 1 must be a one-key mapping"),
        ("name: x\nbogus: 1\nsteps:\n  - sleep: 1\n", "<s>: bogus: Extra inputs are not permitted"),
        ("name: [\n", "<s>: line"),
    ],
)
def test_bad_scenarios_are_one_line(doc: str, message: str) -> None:
    with pytest.raises(SpecError) as exc:
        parse_scenario(doc, "<s>")
    assert str(exc.value).startswith(message), str(exc.value)
    assert "\n" not in str(exc.value)


def test_cli_list_validate_and_errors(tmp_path: Path) -> None:
    res = subprocess.run([CLI, "scenario", "list", "--json"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and '"kill-leader"' in res.stdout
    res = subprocess.run([CLI, "scenario", "validate", "preferred-election-after-restart"], capture_output=True,
                         text=True, timeout=60)  # fmt: skip
    assert res.returncode == 0 and "elect" in res.stdout and "preferred_leaders" in res.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: bad\nsteps:\n  - fault: {action: kill-zk}\n")
    res = subprocess.run([CLI, "scenario", "validate", str(bad)], capture_output=True, text=True, timeout=60)
    assert res.returncode == 2
    assert res.stderr.strip().splitlines() == [f"error: {bad}: step 1 (fault): kill-zk needs zk: <id>"]
    res = subprocess.run([CLI, "scenario", "run", "no-such-scenario"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 3 and "scenario no-such-scenario not found" in res.stderr


def test_a_condition_about_the_fault_means_the_latest_of_its_kind_or_the_one_it_names() -> None:
    """Issue 51: killing the active controller and, a second later, partition 0's leader: controller_changed compares
    with the controller fault (not the kill-leader, when the quorum may have had no leader), leader_changed with
    the latest fault; `fault: N` picks one, and a `fault: N` that is not an earlier fault is refused."""
    from clusterctl.chaos.conditions import Conditions
    from clusterctl.chaos.scenario_checks import fault_refs
    from clusterctl.spec.model import parse_spec

    text = """\
name: two-kills
mode: kraft
steps:
  - create_topic: {}
  - start_load: {}
  - fault: {action: kill-controller}
  - fault: {action: kill-leader, partition: 0}
  - wait_for: {controller_changed: {}}
  - wait_for: {leader_changed: {partition: 0}}
  - wait_for: {leader_changed: {partition: 0, fault: 3}}
  - stop_load: {}
"""
    sc = parse_scenario(text, "two-kills.yaml")
    assert fault_refs(sc.parsed_steps()) == {5: 3, 6: 4, 7: 3}
    spec = parse_spec(
        {"name": "lab", "profile": "offline", "kafka": {"mode": "kraft"}, "kafka_manager": {"enabled": False}}
    )
    cond = Conditions(spec, "127.0.0.1:1", "t", lambda: "127.0.0.1:1")
    cond.fault_refs = fault_refs(sc.parsed_steps())
    cond.at_fault = {3: ({("t", 0): 1}, 101), 4: ({("t", 0): 2}, None)}  # the quorum had no leader at step 4
    cond.leaders_at_fault, cond.controller_at_fault = {("t", 0): 2}, None
    cond.step = 5
    assert cond._at_fault()[1] == 101
    cond.step = 6
    assert cond._at_fault()[0] == {("t", 0): 2}
    cond.step = 7
    assert cond._at_fault()[0] == {("t", 0): 1}
    for bad, why in [("fault: 7", "names a step that is not before it"), ("fault: 2", "not a fault")]:
        with pytest.raises(SpecError) as exc:
            parse_scenario(text.replace("partition: 0, fault: 3", f"partition: 0, {bad}"), "two-kills.yaml")
        assert exc.value.message.startswith("two-kills.yaml: step 7 (wait_for): leader_changed fault:") and why in str(
            exc.value
        ), exc.value.message


def test_load_value_size_bound_is_the_real_record_bound() -> None:
    """Key (p<partition>, at most 5 bytes) + value stay within librdkafka's record bound: 999964 bytes."""
    from clusterctl.spec import validate

    doc = "name: x\ntopic: {name: t}\nsteps:\n  - start_load: {rate: 1, value_size: %d}\n  - stop_load: {}\n"
    top = validate.MAX_RECORD_BYTES - len(f"p{validate.MAX_PARTITIONS - 1}")
    assert parse_scenario(doc % top, "<s>").parsed_steps()[0].kind == "start_load"
    with pytest.raises(SpecError, match=rf"value_size: Input should be less than or equal to {top}$"):
        parse_scenario(doc % (top + 1), "<s>")
