"""ZooKeeper → KRaft migration offline: phase planning, the configs each phase renders (goldens and Kafka's
start-up rules), the state file's resume logic, and the one-line refusals of `clusterctl migrate`.

Regenerate the golden files after an intended change with UPDATE_GOLDEN=1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterctl.compose import contracts, kafkarules
from clusterctl.compose import migration as phases
from clusterctl.compose.render import PhaseRender, render, render_compose
from clusterctl.errors import UsageError
from clusterctl.kafka.kraft import migration as plan
from clusterctl.spec.model import ClusterSpec, load_spec, parse_spec
from clusterctl.spec.sections import KRaftSpec

CLI = str(Path(sys.executable).parent / "clusterctl")
GOLDEN = Path(__file__).resolve().parent / "golden" / "migration"
ZK_SPEC: dict[str, Any] = {
    "name": "mig",
    "profile": "offline",
    "network": {"subnet": "10.91.0.0/24"},
    "images": {"kafka": "clusterctl/kafka:3.7.0"},
}
SPEC = parse_spec(ZK_SPEC)
TARGET = phases.kraft_target(SPEC)


def derived(number: int, spec: ClusterSpec = SPEC, target: ClusterSpec = TARGET) -> list[contracts.NodeConfig]:
    if number == len(phases.PHASES):
        return contracts.derive(render_compose(target))
    return contracts.derive(render_compose(spec, context=phases.phase_context(spec, target, number, (3, 7))))


def node(nodes: list[contracts.NodeConfig], service: str) -> contracts.NodeConfig:
    return next(n for n in nodes if n.service == service)


# ---------------------------------------------------------------- phases and their configs


def test_five_phases_in_the_guides_order() -> None:
    assert [(p.number, p.name) for p in phases.PHASES] == [
        (1, "controllers"),
        (2, "migration-mode"),
        (3, "kraft-brokers"),
        (4, "finalize"),
        (5, "remove-zookeeper"),
    ]
    assert phases.phase("3") is phases.phase("kraft-brokers") is phases.PHASES[2]
    with pytest.raises(UsageError, match="no migration phase 'six'"):
        phases.phase("six")


@pytest.mark.parametrize("number", [1, 2, 3, 4, 5])
def test_each_phase_renders_configs_kafka_accepts(number: int) -> None:
    nodes = derived(number)
    assert kafkarules.check_cluster(nodes) == []
    roles = sorted({n.role for n in nodes})
    assert roles == (["broker", "controller"] if number == 5 else ["broker", "controller", "zookeeper"])


@pytest.mark.parametrize("number", [1, 2, 3, 4, 5])
def test_golden_configs_per_phase(number: int) -> None:
    """Every broker's and controller's server.properties as the image writes it, per phase."""
    text = "".join(f"# {n.service}\n{n.text}\n" for n in derived(number) if n.role != "zookeeper")
    golden = GOLDEN / f"phase-{number}.properties"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert golden.is_file(), f"no golden file {golden.name}: run with UPDATE_GOLDEN=1"
    assert text == golden.read_text(), f"phase {number} differs from {golden.name} (UPDATE_GOLDEN=1 if intended)"


def test_what_each_phase_sets_per_the_guide() -> None:
    """The settings the guide names for each section, on controller1 and kafka1."""
    p1, p2, p3, p4 = (derived(n) for n in (1, 2, 3, 4))
    c1 = node(p1, "controller1").properties
    assert c1["process.roles"] == "controller" and c1["node.id"] == "101"
    assert c1["zookeeper.metadata.migration.enable"] == "true"
    assert c1["zookeeper.connect"] == "zk1:2181,zk2:2181,zk3:2181"
    assert c1["inter.broker.listener.name"] == "INTERNAL"  # how it reaches the ZooKeeper-mode brokers
    assert c1["listener.security.protocol.map"] == "CONTROLLER:PLAINTEXT,INTERNAL:PLAINTEXT"
    assert "zookeeper.metadata.migration.enable" not in node(p1, "kafka1").properties  # brokers untouched
    b2 = node(p2, "kafka1").properties
    assert b2["broker.id"] == "1" and "process.roles" not in b2
    assert b2["inter.broker.protocol.version"] == "3.7"
    assert b2["zookeeper.metadata.migration.enable"] == "true"
    assert b2["controller.quorum.voters"] == c1["controller.quorum.voters"]
    assert b2["controller.listener.names"] == "CONTROLLER"
    assert b2["listener.security.protocol.map"].endswith(",CONTROLLER:PLAINTEXT")
    assert "CONTROLLER" not in b2["listeners"]  # a broker only talks to the controllers
    b3 = node(p3, "kafka1").properties
    assert b3["process.roles"] == "broker" and b3["node.id"] == "1" and "broker.id" not in b3
    for gone in ("zookeeper.connect", "zookeeper.metadata.migration.enable", "inter.broker.protocol.version"):
        assert gone not in b3
    assert node(p3, "controller1").properties["zookeeper.metadata.migration.enable"] == "true"  # not yet final
    c4 = node(p4, "controller1").properties
    assert "zookeeper.metadata.migration.enable" not in c4 and "zookeeper.connect" not in c4
    assert "inter.broker.listener.name" not in c4


def test_brokers_wait_for_the_controllers_and_the_cluster_keeps_its_names() -> None:
    text = render_compose(SPEC, context=phases.phase_context(SPEC, TARGET, 2, (3, 7)))
    services = yaml.safe_load(text)["services"]
    assert set(services) == {"zk1", "zk2", "zk3", "controller1", "controller2", "controller3", "kafka1", "kafka2",
                             "kafka3", "kafka-manager"}  # fmt: skip
    assert "controller1" in services["kafka1"]["depends_on"]
    assert services["controller1"]["container_name"] == "mig-controller1"
    assert services["controller1"]["networks"]["cluster"]["ipv4_address"] == "10.91.0.51"


def test_ibp_is_the_brokers_own_release() -> None:
    nodes = contracts.derive(render_compose(SPEC, context=phases.phase_context(SPEC, TARGET, 2, (3, 9))))
    assert node(nodes, "kafka2").properties["inter.broker.protocol.version"] == "3.9"


def _mutated(number: int, service: str, **props: str | None) -> list[str]:
    nodes = derived(number)
    n = node(nodes, service)
    for key, value in props.items():
        key = key.replace("_", ".")
        if value is None:
            n.properties.pop(key, None)
        else:
            n.properties[key] = value
    return kafkarules.check_cluster(nodes)


@pytest.mark.parametrize(
    ("number", "service", "props", "expected"),
    [
        (1, "controller1", {"zookeeper_connect": None}, "controller1: zookeeper.connect '' is not the ensemble's"),
        (2, "kafka1", {"inter_broker_protocol_version": None}, "kafka1: migration needs inter.broker.protocol.version"),
        (2, "kafka2", {"controller_quorum_voters": None}, "kafka2: migration enabled without controller.quorum.voters"),
        (2, "kafka3", {"listener_security_protocol_map": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT"},
         "kafka3: controller listener CONTROLLER has no security protocol"),
        (2, "controller2", {"zookeeper_metadata_migration_enable": None},
         "controller2: finalized (migration off) while kafka1 still runs in ZooKeeper mode"),
        (2, "controller1", {"node_id": "1"}, "broker id 1 is also a controller's node.id"),
        (3, "kafka1", {"zookeeper_connect": "zk1:2181"}, "kafka1: KRaft node with zookeeper.connect"),
        (1, "controller2", {"inter_broker_listener_name": None},
         "controller2: inter.broker.listener.name PLAINTEXT is not the brokers' INTERNAL"),
        (1, "controller3", {"process_roles": "broker,controller"},
         "controller3: combined broker and controller roles cannot migrate from ZooKeeper"),
    ],
)  # fmt: skip
def test_each_migration_rule_can_fail(number: int, service: str, props: dict[str, str | None], expected: str) -> None:
    assert any(p.startswith(expected) for p in _mutated(number, service, **props)), _mutated(number, service, **props)


def test_target_spec_keeps_the_cluster_and_drops_zookeeper() -> None:
    spec = parse_spec({**ZK_SPEC, "zookeeper": {"nodes": 5}, "kafka": {"brokers": 4}})
    target = phases.kraft_target(spec, KRaftSpec(controllers=5))
    assert target.kraft_mode and target.name == "mig" and target.kafka.brokers == 4
    assert target.topology.zk_ids == [] and target.topology.controller_ids == [101, 102, 103, 104, 105]
    assert target.topology.bootstrap_servers == spec.topology.bootstrap_servers


@pytest.mark.parametrize(
    ("built", "extra", "expected"),
    [
        (["3.9.2", "4.4.0"], {}, "clusterctl/kafka:3.9.2"),  # unpinned: KRaft alone would resolve to 4.4.0
        (["3.8.1", "3.9.2", "4.4.0"], {"kafka": {"version": "3.8.1"}}, "clusterctl/kafka:3.8.1"),
        (["3.9.2", "4.4.0"], {"images": {"kafka": "clusterctl/kafka:3.7.0"}}, "clusterctl/kafka:3.7.0"),
    ],
)
def test_target_runs_the_kafka_the_brokers_run(
    monkeypatch: pytest.MonkeyPatch, built: list[str], extra: dict[str, Any], expected: str
) -> None:
    """The controllers and the KRaft brokers run the ZooKeeper-mode brokers' Kafka, however the spec names it
    (a 4.x controller beside 3.9 brokers never took the cluster over: phase 2 timed out)."""
    from clusterctl.spec import kafkadist

    monkeypatch.delenv(kafkadist.KAFKA_DIST_ENV, raising=False)
    monkeypatch.setattr(kafkadist, "built_versions", lambda: built)
    spec = parse_spec({k: v for k, v in ZK_SPEC.items() if k != "images"} | extra)
    assert spec.broker_image == expected
    target = phases.kraft_target(spec)
    assert target.kraft_mode and target.broker_image == expected


def test_phase_render_writes_zookeepers_cluster_id(tmp_path: Path) -> None:
    out = tmp_path / "compose" / "mig"
    out.mkdir(parents=True)
    (out / ".env").write_text("KAFKA_CLUSTER_ID=AAAAAAAAAAAAAAAAAAAAAA\nMINE=1\n")
    context = phases.phase_context(SPEC, TARGET, 1, (3, 7))
    services = phases.phase_services(SPEC, TARGET)
    render(SPEC, out, validate=False, phase=PhaseRender(context, services, "Zk_cluster-id_1234567"))
    env = (out / ".env").read_text()
    assert "KAFKA_CLUSTER_ID=Zk_cluster-id_1234567\n" in env and "MINE=1\n" in env and "AAAA" not in env
    assert "controller1" in yaml.safe_load((out / "docker-compose.yml").read_text())["services"]


# ---------------------------------------------------------------- planning and the state file


def fresh() -> plan.MigrationState:
    return plan.MigrationState("mig", "3.7", 3, "cid")


def names(todo: list[phases.Phase]) -> list[int]:
    return [p.number for p in todo]


def test_plan_runs_phases_in_order_up_to_to() -> None:
    assert names(plan.plan(fresh(), "2")) == [1, 2]
    assert names(plan.plan(fresh(), "migration-mode")) == [1, 2]
    assert names(plan.plan(fresh(), None, yes=True)) == [1, 2, 3, 4, 5]
    state = fresh()
    for p in phases.PHASES[:2]:
        state.started(p)
        state.completed(p, "ok")
    assert names(plan.plan(state, "2")) == []  # already there: nothing runs again
    assert names(plan.plan(state, "3")) == [3]


def test_finalize_needs_yes() -> None:
    with pytest.raises(plan.MigrationRefused, match=r"point of no return.*--yes"):
        plan.plan(fresh())
    with pytest.raises(plan.MigrationRefused, match="--yes"):
        plan.plan(fresh(), "finalize")
    assert names(plan.plan(fresh(), "kraft-brokers")) == [1, 2, 3]


def test_single_phase_out_of_order_is_refused() -> None:
    state = fresh()
    with pytest.raises(plan.MigrationRefused, match=r"phase 3 \(kraft-brokers\) is out of order: phase 1"):
        plan.check_single(state, "3")
    for p in phases.PHASES[:3]:
        state.completed(p)
    with pytest.raises(plan.MigrationRefused, match="out of order: the migration is past it"):
        plan.check_single(state, "1")
    assert plan.check_single(state, "3").number == 3  # the last one done again: idempotent
    assert plan.check_single(state, "4").number == 4


def test_state_file_round_trip_and_resume(tmp_path: Path) -> None:
    spec_path = tmp_path / "clusterctl.yaml"
    path = plan.state_path(spec_path)
    assert path.name == "clusterctl.yaml.migration.json"
    assert plan.load_state(path) is None
    state = fresh()
    for p in phases.PHASES[:2]:
        state.started(p)
        state.completed(p, f"done {p.name}")
    state.started(phases.PHASES[2])  # then the run was interrupted (Ctrl-C in phase 3)
    plan.save_state(path, state)
    again = plan.load_state(path)
    assert again == state
    assert again is not None and again.last_done == 2 and again.current == "kraft-brokers"
    assert names(plan.plan(again, None, yes=True)) == [3, 4, 5]  # the interrupted phase runs again from its start
    status = plan.status(again, "mig", path)
    assert [p.state for p in status.phases] == ["done", "done", "interrupted", "pending", "pending"]
    assert status.next_phase == "kraft-brokers" and status.can_roll_back
    assert [r.phase for r in again.history] == ["controllers", "migration-mode", "kraft-brokers"]
    assert again.history[0].detail == "done controllers" and again.history[2].finished is None
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left behind


@pytest.mark.parametrize("text", ["{not json", '{"version": 1, "cluster": "mig"}', '{"version": 9}', "[]",
                                  json.dumps({"version": 1, "cluster": "m", "kafka_version": "3.7", "controllers": 3,
                                              "done": ["sixth"], "history": []})])  # fmt: skip
def test_a_state_file_not_ours_is_refused_and_kept(tmp_path: Path, text: str) -> None:
    path = tmp_path / "s.yaml.migration.json"
    path.write_text(text)
    with pytest.raises(plan.MigrationRefused, match=str(path)):
        plan.load_state(path)
    assert path.read_text() == text


def test_rollback_follows_the_furthest_phase_begun() -> None:
    state = fresh()
    assert plan.rollback_level(state) == 0
    state.started(phases.PHASES[0])
    assert plan.rollback_level(state) == 1
    state.completed(phases.PHASES[0])
    state.completed(phases.PHASES[1])
    state.started(phases.PHASES[2])
    assert plan.rollback_level(state) == 3
    assert plan.ROLLBACK_STEPS[3][0].startswith("roll the brokers back to ZooKeeper mode")
    state.completed(phases.PHASES[2])
    state.started(phases.PHASES[3])
    with pytest.raises(plan.MigrationRefused, match="can no longer go back to ZooKeeper"):
        plan.rollback_level(state)


def test_status_after_a_rollback() -> None:
    state = fresh()
    state.completed(phases.PHASES[0])
    state.completed(phases.PHASES[1])
    state.rolled_back = True
    status = plan.status(state, "mig", Path("s.json"))
    assert [p.state for p in status.phases] == ["rolled back", "rolled back", "pending", "pending", "pending"]
    assert status.next_phase is None and not status.can_roll_back


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    ("changes", "combined", "expected"),
    [
        ({"images": {"kafka": "clusterctl/kafka:3.6.2"}}, False,
         "image clusterctl/kafka:3.6.2 is Kafka 3.6; migrating to KRaft needs Kafka 3.7 or later"),
        ({"images": {"kafka": "confluentinc/cp-kafka:7.5.0"}}, False,
         "image confluentinc/cp-kafka:7.5.0 is Kafka 3.5; migrating to KRaft needs"),
        ({"images": {"kafka": "clusterctl/kafka:latest"}}, False, "cannot tell the Kafka version of image"),
        ({"kafka": {"mode": "kraft"}}, False, "cluster mig already runs in KRaft mode: there is nothing to migrate"),
        ({}, True, "combined mode (brokers that are also controllers) cannot migrate from ZooKeeper"),
        ({"profile": "wurstmeister", "images": {"kafka": "wurstmeister/kafka:2.13-3.7.0"}}, False,
         "profile wurstmeister's broker image has no KRaft support"),
        ({"deploy": {"target": "swarm", "racks": [{"name": "r1", "address": "127.0.0.1"}]},
          "kafka_manager": {"enabled": False}}, False,
         "cluster mig runs on a swarm (deploy.target swarm): the migration adds controllers"),
    ],
)  # fmt: skip
def test_refusals(changes: dict[str, Any], combined: bool, expected: str) -> None:
    spec = parse_spec({**ZK_SPEC, **changes})
    with pytest.raises(plan.MigrationRefused) as err:
        plan.check_migratable(spec, spec.broker_image, combined)
    assert str(err.value).startswith(expected) and "\n" not in str(err.value) and err.value.exit_code == 2


def test_cp_kafka_79_is_kafka_39_and_migrates() -> None:
    spec = parse_spec({**ZK_SPEC, "profile": "default", "images": {}})
    assert plan.check_migratable(spec, "confluentinc/cp-kafka:7.9.1") == (3, 9)


def _cli(tmp_path: Path, spec: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "clusterctl.yaml"
    path.write_text(yaml.safe_dump(spec))
    return subprocess.run([CLI, "-s", str(path), *args], capture_output=True, text=True, cwd=tmp_path, timeout=60)


@pytest.mark.parametrize(
    ("spec", "args", "code", "line"),
    [
        ({**ZK_SPEC, "images": {"kafka": "clusterctl/kafka:3.6.1"}}, ["migrate", "kraft"], 2,
         "error: image clusterctl/kafka:3.6.1 is Kafka 3.6; migrating to KRaft needs Kafka 3.7 or later"),
        ({**ZK_SPEC, "kafka": {"mode": "kraft"}}, ["migrate", "kraft", "--to", "1"], 2,
         "error: cluster mig already runs in KRaft mode"),
        (ZK_SPEC, ["migrate", "kraft", "--phase", "kraft-brokers"], 2,
         "error: phase 3 (kraft-brokers) is out of order: phase 1 (controllers) is not done yet"),
        (ZK_SPEC, ["migrate", "kraft", "--to", "4"], 2, "error: phase 4 (finalize) is the point of no return"),
        (ZK_SPEC, ["migrate", "kraft", "--combined", "--to", "1"], 2, "error: combined mode"),
        (ZK_SPEC, ["migrate", "kraft", "--to", "7"], 2, "error: no migration phase '7'"),
        (ZK_SPEC, ["migrate", "kraft", "--controllers", "4", "--to", "1"], 2,
         "error: kraft.controllers=4: an even quorum"),
        (ZK_SPEC, ["migrate", "rollback"], 3, "error: no migration of mig to roll back"),
    ],
)  # fmt: skip
def test_cli_refusals_are_one_line(tmp_path: Path, spec: dict[str, Any], args: list[str], code: int, line: str) -> None:
    proc = _cli(tmp_path, spec, *args)
    assert proc.returncode == code, proc.stderr
    assert proc.stderr.startswith(line) and proc.stderr.count("\n") == 1, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clusterctl.yaml"]  # nothing written, nothing started


def test_cli_status_json_and_refusal_json(tmp_path: Path) -> None:
    status = _cli(tmp_path, ZK_SPEC, "migrate", "kraft", "--status", "--json")
    assert status.returncode == 0, status.stderr
    data = json.loads(status.stdout)
    assert data["started"] is False and data["next_phase"] == "controllers"
    assert [p["state"] for p in data["phases"]] == ["pending"] * 5
    refused = _cli(tmp_path, ZK_SPEC, "migrate", "kraft", "--to", "finalize", "--json")
    assert refused.returncode == 2
    assert json.loads(refused.stdout)["exit_code"] == 2


def test_cli_status_reads_the_state_file(tmp_path: Path) -> None:
    state = fresh()
    state.completed(phases.PHASES[0], "quorum leader 102")
    state.started(phases.PHASES[1])
    plan.save_state(plan.state_path(tmp_path / "clusterctl.yaml"), state)
    proc = _cli(tmp_path, ZK_SPEC, "migrate", "kraft", "--status", "--json")
    data = json.loads(proc.stdout)
    assert [p["state"] for p in data["phases"]][:3] == ["done", "interrupted", "pending"]
    assert data["cluster_id"] == "cid" and data["can_roll_back"] is True


def test_phase_5_rewrites_the_spec_as_kraft_and_keeps_the_old_one(tmp_path: Path) -> None:
    from clusterctl.runtime.migrate import write_kraft_spec

    spec_path = tmp_path / "lab.yaml"
    original = "# my ZooKeeper cluster\n" + yaml.safe_dump(ZK_SPEC)
    spec_path.write_text(original)
    kept = write_kraft_spec(spec_path, TARGET)
    assert kept == tmp_path / "lab.zookeeper.yaml" and kept.read_text() == original
    rewritten = load_spec(spec_path)
    assert rewritten.kraft_mode and rewritten.name == "mig" and rewritten.topology.controller_ids == [101, 102, 103]
    assert rewritten.topology.broker_ip(1) == SPEC.topology.broker_ip(1)
    assert write_kraft_spec(spec_path, TARGET) == kept and kept.read_text() == original  # again: the first copy stays
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lab.yaml", "lab.zookeeper.yaml"]


class _Roll:
    """What a migration's in-sync wait did: the waits asked for, the containers restarted."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, stuck: bool) -> None:
        from clusterctl.kafka.admin import PartitionState
        from clusterctl.runtime import migrate

        self.waits: list[float] = []
        self.restarted: list[str] = []
        self.progress: list[str] = []

        def wait_full_isr(bootstrap: str, timeout: float, poll: float = 0.5) -> float:
            self.waits.append(timeout)
            if stuck and len(self.waits) == 1:
                raise migrate.TimeoutError_("timed out waiting for every partition fully in sync")
            return 1.0

        rows = [("t", 0, 1, [1, 3, 2]), ("t", 1, 1, [1, 2, 3]), ("u", 0, 2, [2, 3, 1])]  # broker 3 out of each ISR
        behind = [PartitionState(t, n, lead, rs, [lead, 1 if lead == 2 else 2], False, True) for t, n, lead, rs in rows]
        monkeypatch.setattr(migrate, "wait_full_isr", wait_full_isr)
        monkeypatch.setattr(migrate, "partitions_behind", lambda bootstrap: behind)
        monkeypatch.setattr(migrate.dk, "get_container", lambda name: name)
        monkeypatch.setattr(migrate.dk, "restart", self.restarted.append)
        monkeypatch.setattr(migrate.checks, "wait_broker_back", lambda *a: None)
        self.run = migrate._Run(SPEC, TARGET, plan.MigrationState(SPEC.name, "3.9", 3), Path("x.yaml"), None, 300.0,
                                self.progress.append)  # fmt: skip


@pytest.mark.parametrize("stuck", [False, True])
def test_leaders_of_partitions_stuck_behind_after_a_roll_are_restarted_once(
    monkeypatch: pytest.MonkeyPatch, stuck: bool
) -> None:
    from clusterctl.runtime.migrate import STUCK_ISR_S

    roll = _Roll(monkeypatch, stuck)
    roll.run.wait_in_sync("b:9092", in_zookeeper=True)
    if not stuck:  # a healthy roll: one bounded wait, nothing restarted
        assert (roll.waits, roll.restarted) == ([STUCK_ISR_S], [])
        return
    names = [SPEC.topology.container_name(SPEC.topology.broker_service(b)) for b in (1, 2)]
    assert (roll.waits, roll.restarted) == ([STUCK_ISR_S, 300.0], names)
    assert roll.progress[0].startswith("2 partitions led by broker 1 still behind after 60s (e.g. t-0 leader 1 isr 1,2")
