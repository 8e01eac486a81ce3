"""Scenario files: every shipped scenario validates; bad files fail with one line."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from clusterctl.chaos.scenario import SCENARIO_DIR, list_scenarios, parse_scenario
from clusterctl.errors import SpecError

CLI = str(Path(sys.executable).parent / "clusterctl")  # the console script of the running environment
SHIPPED = {
    "kill-leader", "graceful-stop", "pause-broker", "network-partition", "zk-node-loss", "rolling-restart",
    "preferred-election-after-restart", "short-pause", "short-partition", "acks1-leader-isolated", "unclean-election",
    "kill-controller", "kill-controller-quorum", "slow-follower", "lossy-leader", "disk-full-broker", "slow-zookeeper",
    "slow-controller-quorum", "zk-to-kraft", "zk-to-kraft-rollback", "kill-node",
}  # fmt: skip
# the tests that run shipped scenarios end to end: tansu/ZooKeeper (CI) and real Apache Kafka (ZooKeeper and KRaft mode)
DRILL_TESTS = (
    "test_chaos_zk.py", "test_chaos_kafka.py", "test_kraft_cluster.py", "test_scenario_compare.py",
    "test_chaos_degraded.py", "test_chaos_disk.py", "test_migration_drill_kafka.py", "test_swarm_kafka.py",
)  # fmt: skip


def test_shipped_scenarios_validate() -> None:
    infos = {s.name: s for s in list_scenarios()}
    assert set(infos) >= SHIPPED
    assert infos["zk-node-loss"].requires == "zookeeper" and infos["kill-leader"].requires == "kafka"
    assert infos["short-pause"].requires == infos["short-partition"].requires == "any"
    assert {n for n, i in infos.items() if i.expect == "loss"} == {"acks1-leader-isolated", "unclean-election"}
    for p in SCENARIO_DIR.glob("*.yaml"):
        assert parse_scenario(p.read_text(), str(p)).name == p.stem


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
