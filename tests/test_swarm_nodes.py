"""kill-node without a swarm: a rack's stop/start commands in the spec, a node fault's target in the analysis, the
kill_node step's checks, and the one-line refusals (compose cluster, rack without a stop command) that touch
nothing. tests/test_swarm_kafka.py runs the fault on three namespace hosts with real Kafka."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from _runtime_helpers import CLI, write_spec

from clusterctl.chaos.analysis import analyze
from clusterctl.chaos.nodes import rack_target
from clusterctl.chaos.scenario import load_scenario, parse_scenario
from clusterctl.chaos.timeline import Marker, PartitionSample, Timeline, target_ids
from clusterctl.errors import SpecError
from clusterctl.runtime.swarm_nodes import rack_services
from clusterctl.spec.model import parse_spec

RACK = {"name": "r1", "address": "10.99.0.2", "endpoint": "unix:///run/x/h1.sock"}


def _swarm(racks: list[dict[str, Any]], brokers: int = 3) -> dict[str, Any]:
    return {
        "name": "sw", "profile": "offline", "zookeeper": {"nodes": 3}, "kafka_manager": {"enabled": False},
        "kafka": {"brokers": brokers, "defaults": {"replication_factor": min(3, brokers), "min_insync_replicas": 1}},
        "deploy": {"target": "swarm", "racks": racks},
    }  # fmt: skip


def _racks(n: int, **extra: Any) -> list[dict[str, Any]]:
    return [{"name": f"r{i}", "address": f"10.99.0.{i + 1}", "endpoint": f"unix:///run/x/h{i}.sock"} | extra
            for i in range(1, n + 1)]  # fmt: skip


@pytest.mark.parametrize(
    ("rack", "message"),
    [
        (RACK | {"stop_command": ["true"]}, "rack r1: give stop_command and start_command together"),
        ({"name": "r1", "address": "10.99.0.2", "stop_command": ["true"], "start_command": ["true"]},
         "rack r1: kill-node needs the rack's endpoint"),
        (RACK | {"stop_command": [], "start_command": ["true"]}, "a rack's stop/start command is a list of 1-64"),
        (RACK | {"stop_command": [""], "start_command": ["true"]}, "a rack's stop/start command is a list of 1-64"),
    ],
)  # fmt: skip
def test_bad_rack_commands_are_one_line(rack: dict[str, Any], message: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_spec(_swarm([rack], brokers=1))
    assert message in err.value.message and "\n" not in str(err.value)


def test_a_rack_names_what_runs_on_it() -> None:
    spec = parse_spec(_swarm(_racks(3, stop_command=["true"], start_command=["true"])))
    assert spec.deploy.racks[1].stop_command == ["true"]
    assert rack_services(spec, "r2") == ["zk2", "kafka2"]
    assert rack_target(spec, "r2") == "rack r2 (broker 2, zk 2)"
    two = parse_spec(_swarm(_racks(2), brokers=3))  # round robin: broker 3 shares r1 with broker 1
    assert rack_target(two, "r1") == "rack r1 (broker 1, broker 3, zk 1, zk 3)"
    assert rack_services(two, "r1") == ["zk1", "zk3", "kafka1", "kafka3"]


def test_a_node_fault_is_analysed_as_the_loss_of_its_broker() -> None:
    """The marker `rack r2 (broker 2, zk 2)` counts as broker 2's loss: leader moves, ISR, heal to full ISR."""
    assert target_ids(Marker(0, "kill-node", "rack r2 (broker 2, zk 2)")) == (2, 2)
    assert target_ids(Marker(0, "kill-node", "rack r9")) == (None, None)
    t0 = 1000.0
    tl = Timeline(t0 - 5, t0 + 60, ["drill"])
    target = "rack r2 (broker 2, zk 2)"
    tl.markers = [Marker(t0, "kill-node", target), Marker(t0 + 30, "start-node", target, heal=True)]
    tl.partitions = [
        PartitionSample(t0 - 1, "drill", 0, 2, [1, 2, 3], [1, 2, 3]),
        PartitionSample(t0 + 6.5, "drill", 0, 3, [1, 2, 3], [1, 3]),
        PartitionSample(t0 + 34.0, "drill", 0, 3, [1, 2, 3], [1, 2, 3]),
    ]
    (m,) = analyze(tl)
    assert (m.action, m.broker, m.zk, m.heal_t) == ("kill-node", 2, 2, t0 + 30)
    (p,) = m.partitions
    assert (p.led_by_target, p.new_leader, p.time_to_new_leader_s, p.isr_shrunk_s, p.isr_full_s) == (
        True, 3, 6.5, 6.5, 4.0,
    )  # fmt: skip


def test_kill_node_needs_a_swarm_scenario() -> None:
    doc = "name: x\nsteps:\n  - kill_node: {rack: leader}\n"
    with pytest.raises(SpecError) as err:
        parse_scenario(doc, "<s>")
    assert str(err.value) == "<s>: step 1 (kill_node): a node drill needs deploy: swarm (got deploy: any)"
    with pytest.raises(SpecError) as err:
        parse_scenario("name: x\ndeploy: swarm\nsteps:\n  - kill_node: {}\n", "<s>")
    assert str(err.value).startswith("<s>: step 1 (kill_node): rack: Field required")
    sc = load_scenario("kill-node")
    topic = (sc.topic.replication_factor, sc.topic.min_insync_replicas)
    assert (sc.deploy, sc.requires, topic) == ("swarm", "kafka", (3, 2))
    assert [s.kind for s in sc.parsed_steps()].count("kill_node") == 1


def _cli(spec: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CLI, "-s", str(spec), *args], capture_output=True, text=True, timeout=60, cwd=spec.parent)


def test_kill_node_on_compose_is_refused_before_anything(tmp_path: Path) -> None:
    """No cluster is needed to refuse: one line, exit 2, no report written."""
    spec = write_spec(tmp_path, "cmp", "10.99.250.0/24", zk_port=42181, broker_port=49092, engine="kafka", brokers=3)
    res = _cli(spec, "scenario", "run", "kill-node")
    assert res.returncode == 2, res.stderr
    line = "error: scenario kill-node stops whole hosts (deploy: swarm); cluster cmp runs deploy.target=compose, one "
    hint = "(hint: run it on a spec with deploy.target: swarm (docs/swarm.md))"
    assert res.stderr.strip().splitlines() == [f"{line}engine {hint}"]
    assert not (tmp_path / "reports").exists()
    res = _cli(spec, "chaos", "kill-node", "r1")
    assert res.returncode == 2 and res.stderr.startswith("error: cluster cmp runs deploy.target=compose"), res.stderr


def test_kill_node_of_a_rack_without_a_stop_command_is_refused(tmp_path: Path) -> None:
    spec = tmp_path / "clusterctl.yaml"
    spec.write_text(yaml.safe_dump(_swarm(_racks(3))))
    res = _cli(spec, "chaos", "kill-node", "r2")
    assert res.returncode == 2
    assert res.stderr.startswith("error: rack r2 names no stop_command/start_command"), res.stderr
