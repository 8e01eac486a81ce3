"""The migration drill offline: the `migrate`/`consume`/`snapshot` steps' validation, the plan of each `migrate`
step, the phase bands on the timeline and their write gaps, the before/after snapshot comparison, and the report.
(tests/test_migration_drill_kafka.py runs the shipped scenarios on real Kafka.)
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace as NS
from typing import Any

import pytest
import yaml

from clusterctl.chaos.analysis import phase_metrics
from clusterctl.chaos.migration_steps import Migrate, plan_migrations, planned_from_scratch
from clusterctl.chaos.observer import Observer
from clusterctl.chaos.report import render_html, timeline_svg
from clusterctl.chaos.results import ScenarioResult, StepResult
from clusterctl.chaos.scenario import load_scenario, parse_scenario
from clusterctl.chaos.snapshot import ClusterSnapshot, TopicShape, differences
from clusterctl.chaos.timeline import Event, PartitionSample, PhaseBand, Timeline
from clusterctl.compose import migration as phases
from clusterctl.errors import SpecError, UsageError
from clusterctl.kafka.kraft import migration as plan
from clusterctl.spec.model import parse_spec

CLI = str(Path(sys.executable).parent / "clusterctl")
T0 = 1_000.0
ZK_SPEC: dict[str, Any] = {
    "name": "mig",
    "profile": "offline",
    "network": {"subnet": "10.91.0.0/24"},
    "images": {"kafka": "clusterctl/kafka:3.7.0"},
}
HEAD = "name: m\nmode: zookeeper\nsteps:\n"


# ---------------------------------------------------------------- validation


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        ("  - migrate: {to: kraftt}\n", "<s>: step 1 (migrate): to: Input should be 'kraft' or 'zookeeper'"),
        ("  - migrate: {}\n", "<s>: step 1 (migrate): to: Field required"),
        ("  - migrate: {to: kraft, until_phase: 6}\n",
         "<s>: step 1 (migrate): until_phase: phase 6 does not exist: one of 1 controllers, 2 migration-mode, "
         "3 kraft-brokers, 4 finalize, 5 remove-zookeeper"),
        ("  - migrate: {to: kraft, until_phase: 0}\n", "<s>: step 1 (migrate): until_phase: phase 0 does not exist"),
        ("  - migrate: {to: zookeeper, until_phase: 2}\n",
         "<s>: step 1 (migrate): until_phase is for to: kraft"),
        ("  - snapshot: {name: after, same_as: before}\n",
         "<s>: step 1 (snapshot): same_as: no earlier snapshot is named 'before'"),
        ("  - snapshot: {name: a}\n  - snapshot: {name: a}\n",
         "<s>: step 2 (snapshot): a snapshot named 'a' was taken"),
        ("  - snapshot: {}\n", "<s>: step 1 (snapshot): name: Field required"),
        ("  - consume: {max_messages: 0}\n", "<s>: step 1 (consume): max_messages: Input should be greater than"),
        ("  - consume: {group: 'a b'}\n", "<s>: step 1 (consume): group: String should match pattern"),
    ],
)  # fmt: skip
def test_bad_migration_steps_are_one_line(steps: str, message: str) -> None:
    with pytest.raises(SpecError) as exc:
        parse_scenario(HEAD + steps, "<s>")
    assert str(exc.value).startswith(message), str(exc.value)
    assert "\n" not in str(exc.value)


@pytest.mark.parametrize("head", ["name: m\nsteps:\n", "name: m\nmode: zookeeper\nrequires: any\nsteps:\n"])
def test_migrate_needs_a_zookeeper_mode_kafka_scenario(head: str) -> None:
    with pytest.raises(SpecError, match=r"^<s>: step 1 \(migrate\): a migration drill needs mode: zookeeper and "):
        parse_scenario(head + "  - migrate: {to: kraft}\n", "<s>")


def test_shipped_migration_scenarios() -> None:
    kraft, back = load_scenario("zk-to-kraft"), load_scenario("zk-to-kraft-rollback")
    for sc in (kraft, back):
        assert (sc.mode, sc.requires, sc.expect) == ("zookeeper", "kafka", "no-loss")
        kinds = [s.kind for s in sc.parsed_steps()]
        loads = [s.args for s in sc.parsed_steps() if s.kind == "start_load"]
        assert [(a.acks, a.idempotent) for a in loads] == [("all", True)]
        # the group commits, the snapshot is taken, then the migration, then the comparison; the load runs throughout
        assert kinds.index("start_load") < kinds.index("consume") < kinds.index("snapshot") < kinds.index("migrate")
        assert kinds[-2:] == ["stop_load", "verify"] and sc.loss_settings() == []
        snaps = [s.args for s in sc.parsed_steps() if s.kind == "snapshot"]
        assert [(s.name, s.same_as) for s in snaps] == [("before", None), ("after", "before")]
    plans = [planned_from_scratch([(s.kind, s.args) for s in sc.parsed_steps()], sc.name) for sc in (kraft, back)]
    assert list(plans[0].values()) == ["phases 1 controllers, 2 migration-mode, 3 kraft-brokers, 4 finalize, "
                                       "5 remove-zookeeper"]  # fmt: skip
    assert list(plans[1].values()) == [
        "phases 1 controllers, 2 migration-mode",
        "roll back from phase 2: remove the controllers; delete /controller and /migration; "
        "roll the brokers without migration",
    ]


def test_cli_validate_shows_the_phases_and_run_help() -> None:
    res = subprocess.run([CLI, "scenario", "validate", "zk-to-kraft-rollback"], capture_output=True, text=True,
                         timeout=60)  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert "migrate to=kraft until_phase=2 (phases 1 controllers, 2 migration-mode)" in res.stdout
    assert "migrate to=zookeeper (roll back from phase 2:" in res.stdout
    res = subprocess.run([CLI, "scenario", "run", "zk-to-kraft", "--help"], capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "--report-dir" in res.stdout


# ---------------------------------------------------------------- the plan of each migrate step


def _m(to: str, until: int | None = None) -> Migrate:
    return Migrate(to=to, until_phase=until)  # type: ignore[arg-type]


def _done(*numbers: int, current: int | None = None) -> plan.MigrationState:
    state = plan.MigrationState("mig", "3.7", 3, "cid")
    for n in numbers:
        state.completed(phases.PHASES[n - 1])
    if current is not None:
        state.started(phases.PHASES[current - 1])
    return state


def test_step_plan_follows_the_recorded_migration() -> None:
    assert plan_migrations([(3, _m("kraft", 2)), (5, _m("kraft"))], None, "mig") == [
        "phases 1 controllers, 2 migration-mode",
        "phases 3 kraft-brokers, 4 finalize, 5 remove-zookeeper",
    ]
    # an interrupted phase 3 runs again from its start
    assert plan_migrations([(1, _m("kraft", 3))], _done(1, 2, current=3), "mig") == ["phases 3 kraft-brokers"]
    # an interrupted phase is backed out too; after a rollback a migration starts again from phase 1
    assert plan_migrations([(1, _m("zookeeper")), (2, _m("kraft", 1))], _done(1, 2, current=3), "mig") == [
        "roll back from phase 3: roll the brokers back to ZooKeeper mode (migration still enabled); remove the "
        "controllers; delete /controller and /migration; roll the brokers without migration",
        "phases 1 controllers",
    ]


@pytest.mark.parametrize(
    ("state", "steps", "message"),
    [
        (None, [(4, _m("zookeeper"))], "step 4 (migrate to zookeeper): nothing to roll back"),
        (_done(1, 2, 3, 4), [(2, _m("zookeeper"))],
         "step 2 (migrate to zookeeper): the migration of mig reached phase 4 (finalize): it can no longer go back"),
        (None, [(1, _m("kraft")), (2, _m("zookeeper"))], "step 2 (migrate to zookeeper): the migration of mig reached"),
        (_done(1, 2, 3, 4, 5), [(1, _m("zookeeper"))], "step 1 (migrate to zookeeper): the migration of mig reached"),
        # a step that would migrate nothing: a state file left by an earlier run, or the same step twice
        (_done(1, 2, 3, 4, 5), [(3, _m("kraft"))],
         "step 3 (migrate to kraft): nothing would run: the migration state records phases 1-5 done (left by an"),
        (None, [(1, _m("kraft", 3)), (2, _m("kraft", 2))],
         "step 2 (migrate to kraft): nothing would run: the migration state records phases 1-3 done"),
    ],
)  # fmt: skip
def test_step_plan_refusals_are_one_line(
    state: plan.MigrationState | None, steps: list[tuple[int, Migrate]], message: str
) -> None:
    with pytest.raises(plan.MigrationRefused) as exc:
        plan_migrations(steps, state, "mig")  # type: ignore[arg-type]
    assert str(exc.value).startswith(message) and "\n" not in str(exc.value)
    assert exc.value.exit_code == 2


def test_runner_refuses_a_migration_drill_before_any_work(tmp_path: Path) -> None:
    from clusterctl.chaos.runner import Runner

    spec_path = tmp_path / "clusterctl.yaml"
    spec_path.write_text(yaml.safe_dump(ZK_SPEC))
    spec = parse_spec(ZK_SPEC)
    back = load_scenario("zk-to-kraft-rollback")
    with pytest.raises(UsageError, match="needs the spec file's path"):
        Runner(spec, back, work_dir=tmp_path / "r")._migration_preflight(back.parsed_steps())
    plan.save_state(plan.state_path(spec_path), _done(1, 2))  # left by an earlier run: this one would test nothing
    runner = Runner(spec, back, work_dir=tmp_path / "r", spec_path=spec_path)
    with pytest.raises(plan.MigrationRefused, match=r"^step 7 \(migrate to kraft\): nothing would run: "):
        runner.preflight()
    plan.save_state(plan.state_path(spec_path), _done(1))  # phase 1 done: the drill goes on from phase 2
    runner = Runner(spec, back, work_dir=tmp_path / "r", spec_path=spec_path)
    assert runner._migration_preflight(back.parsed_steps()) == [
        "phases 2 migration-mode",
        "roll back from phase 2: remove the controllers; delete /controller and /migration; roll the brokers without "
        "migration",
    ]
    old = parse_spec({**ZK_SPEC, "images": {"kafka": "clusterctl/kafka:3.6.2"}})
    runner = Runner(old, load_scenario("zk-to-kraft"), work_dir=tmp_path / "r", spec_path=spec_path)
    with pytest.raises(plan.MigrationRefused, match=r"is Kafka 3.6; migrating to KRaft needs Kafka 3.7"):
        runner.preflight()
    assert not (tmp_path / "r").exists()  # refused before the run made anything


def test_migrate_step_marks_each_phase_on_the_timeline(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The step runs `migrate kraft` (runtime.migrate); its phases' Docker work is replaced by recording fakes."""
    from clusterctl.chaos.runner import Runner
    from clusterctl.runtime import migrate
    from clusterctl.runtime import migrate_checks as checks

    spec_path = tmp_path / "clusterctl.yaml"
    spec_path.write_text(yaml.safe_dump(ZK_SPEC))
    ran: list[int] = []

    def fake(number: int) -> Any:
        def action(_run: Any) -> tuple[list[str], str]:
            ran.append(number)
            return [], f"phase {number} checked"

        return action

    monkeypatch.setattr(migrate, "PHASE_ACTIONS", {n: fake(n) for n in range(1, 6)})
    monkeypatch.setattr(checks, "cluster_id", lambda _spec: "cid")
    runner = Runner(parse_spec(ZK_SPEC), load_scenario("zk-to-kraft-rollback"), work_dir=tmp_path, spec_path=spec_path)
    runner.observer = Observer(None, None, [], watch_zk=False)
    detail = runner._step_migrate(_m("kraft", 2))
    assert ran == [1, 2] and detail.startswith("phases 1 controllers ") and ", 2 migration-mode " in detail
    tl = runner.observer.stop()
    assert [(b.name, b.done) for b in tl.phases] == [("1 controllers", True), ("2 migration-mode", True)]
    assert tl.phases[0].t0 <= tl.phases[0].t1 <= tl.phases[1].t0 <= tl.phases[1].t1
    assert [e.kind for e in tl.events if e.source == "migrate"] == ["phase-start", "phase-end"] * 2
    assert plan.load_state(plan.state_path(spec_path)).done == ["controllers", "migration-mode"]  # type: ignore[union-attr]


def test_an_unfinished_phase_ends_with_the_run() -> None:
    obs = Observer(None, None, [], watch_zk=False)
    obs.phase("1 controllers", False)
    obs.phase("1 controllers", True)
    obs.phase("2 migration-mode", False)  # then the phase failed (or Ctrl-C)
    tl = obs.stop()
    assert [(b.name, b.done, b.t1 is not None) for b in tl.phases] == [
        ("1 controllers", True, True),
        ("2 migration-mode", False, True),
    ]
    assert tl.phases[1].t1 == tl.ended


# ---------------------------------------------------------------- per-phase write gap


def _migration_timeline() -> Timeline:
    tl = Timeline(T0, T0 + 60, ["t"])
    tl.phases = [
        PhaseBand("1 controllers", T0 + 10, T0 + 20, True),
        PhaseBand("2 migration-mode", T0 + 20, T0 + 40, True),
        PhaseBand("3 kraft-brokers", T0 + 40, T0 + 55, False),
    ]
    tl.partitions = [
        PartitionSample(T0 + 1, "t", 0, 1, [1, 2, 3], [1, 2, 3]),
        PartitionSample(T0 + 1, "t", 1, 2, [1, 2, 3], [1, 2, 3]),
        PartitionSample(T0 + 25, "t", 0, -1, [1, 2, 3], [2, 3]),  # broker 1 restarting: no leader for a moment
        PartitionSample(T0 + 25.5, "t", 0, 2, [1, 2, 3], [2, 3]),  # a leader move in phase 2
        PartitionSample(T0 + 30, "t", 1, 3, [1, 2, 3], [1, 3]),  # and another
        PartitionSample(T0 + 45, "t", 0, 2, [1, 2, 3], [1, 2, 3]),  # the same leader again: no move
    ]
    tl.events = [
        Event(T0 + 12, "zk-watch", "controller", "/controller", "controller 101", 101),  # KRaft takes /controller
        Event(T0 + 33, "zk-watch", "controller", "/controller", "controller 102", 102),
        Event(T0 + 33.1, "metadata", "controller", "cluster", "controller 2", 2),  # a broker's view: not counted
    ]
    return tl


def _acks() -> dict[tuple[str, int], list[float]]:
    # partition 0: every 0.5 s, a 3 s stall from 26 to 29; partition 1: every 0.5 s, a stall from 38.5 across the
    # end of phase 2 until 42 (phase 2 counts all 3.5 s of it, phase 3 the 2 s from its start), none after 50 (a
    # wait no write ended: not a gap)
    p0 = [T0 + i / 2 for i in range(0, 120) if not 26 < i / 2 < 29]
    p1 = [T0 + i / 2 for i in range(0, 101) if not 38.5 < i / 2 < 42]
    return {("t", 0): p0, ("t", 1): p1}


def test_phase_write_gaps_from_the_timeline_and_the_acks() -> None:
    rows = phase_metrics(_migration_timeline(), _acks())
    assert [(r.phase, r.started_s, r.seconds, r.done) for r in rows] == [
        ("1 controllers", 10.0, 10.0, True),
        ("2 migration-mode", 20.0, 20.0, True),
        ("3 kraft-brokers", 40.0, 15.0, False),
    ]
    assert [(r.write_gap_s, r.write_gap_partition) for r in rows] == [(0.5, "t-0"), (3.5, "t-1"), (2.0, "t-1")]
    assert [(r.leader_moves, r.controller_changes) for r in rows] == [(0, 1), (2, 1), (0, 0)]


def test_phase_write_gap_unknown_without_load() -> None:
    (row, *_rest) = phase_metrics(_migration_timeline(), None)
    assert (row.write_gap_s, row.write_gap_partition) == (None, None)
    # the load started during phase 1 (unknown there), stalled from 16 s to 30 s, and stopped in phase 2
    late = {("t", 0): [T0 + 15.0, T0 + 16.0, T0 + 30.0]}
    assert [r.write_gap_s for r in phase_metrics(_migration_timeline(), late)] == [None, 10.0, None]


# ---------------------------------------------------------------- snapshot comparison


def _snapshot(name: str, **changes: Any) -> ClusterSnapshot:
    topics = {
        "orders": TopicShape(6, 3, {"min.insync.replicas": "2", "retention.ms": "86400000"}),
        "drill-x": TopicShape(3, 3, {"min.insync.replicas": "2"}),
    }
    groups = {"billing": {"orders-0": 120, "orders-1": 98}, "drill-g": {"drill-x-0": 100}}
    snap = ClusterSnapshot(name, T0, topics, groups)
    for key, value in changes.items():
        setattr(snap, key, value)
    return snap


def test_identical_snapshots_have_no_differences() -> None:
    assert differences(_snapshot("before"), _snapshot("after")) == []
    assert _snapshot("before").summary() == "snapshot before: 2 topics, 2 groups, 3 committed offsets"


def test_every_difference_is_a_line() -> None:
    before = _snapshot("before")
    after = _snapshot(
        "after",
        topics={
            "orders": TopicShape(12, 3, {"min.insync.replicas": "1", "cleanup.policy": "compact"}),
            "new-one": TopicShape(1, 1),
        },
        groups={"billing": {"orders-0": 120, "orders-1": 97, "orders-2": 5}, "other": {}},
    )
    assert differences(before, after) == [
        "topic drill-x is gone",
        "topic new-one is new",
        "topic orders: 6 partitions RF 3 -> 12 partitions RF 3",
        "topic orders: cleanup.policy (unset) -> compact",
        "topic orders: min.insync.replicas 2 -> 1",
        "topic orders: retention.ms 86400000 -> (unset)",
        "group billing orders-1: committed 98 -> 97",
        "group billing orders-2: committed (none) -> 5",
        "group drill-g is gone",
        "group other is new",
    ]


# ---------------------------------------------------------------- the report


def test_report_draws_a_band_per_phase_and_a_row_with_its_write_gap() -> None:
    tl = _migration_timeline()
    tl.load = [NS(t=T0 + i / 2, acked=100, errors=0) for i in range(120)]
    svg = timeline_svg(tl)
    for k in (1, 2, 3):
        assert f'id="phase-band-{k}' in svg
    assert "1 controllers" in svg and "3 kraft-brokers (not done)" in svg
    rows = phase_metrics(tl, _acks())
    result = ScenarioResult(
        "zk-to-kraft", None, "lab", "t", True, T0, T0 + 60,
        [StepResult(1, "migrate", "migrate to=kraft", True, T0 + 10, 45.0, "phases ...")],
        timeline=tl, phases=rows,
    )  # fmt: skip
    page = render_html(result)
    assert "<h2>Migration phases</h2>" in page
    assert "<td>2 migration-mode</td><td>20.0</td><td>20.0</td><td>yes</td><td>3.5</td><td>t-1</td>" in page
    assert "<td>3 kraft-brokers</td><td>40.0</td><td>15.0</td><td>NO</td>" in page
    plain = render_html(ScenarioResult("kill-leader", None, "lab", "t", True, T0, T0 + 60, [], timeline=Timeline(
        T0, T0 + 60, ["t"])))  # fmt: skip
    assert "Migration phases" not in plain and "phase-band" not in timeline_svg(Timeline(T0, T0 + 60, ["t"]))


def test_consume_and_snapshot_steps_on_a_broker(bootstrap: str, unique_name: str, tmp_path: Path) -> None:
    """The `consume` and `snapshot` steps against a loopback tansu broker: the group's committed offsets are in the
    snapshot, an unchanged cluster compares identical, and one more commit is a difference that fails the step."""
    from clusterctl.chaos.migration_steps import Consume, Snapshot
    from clusterctl.chaos.runner import Runner
    from clusterctl.errors import VerificationError
    from clusterctl.kafka.admin import create_topic
    from clusterctl.kafka.clients import produce

    create_topic(bootstrap, unique_name, 2, 1)
    produce(bootstrap, unique_name, [(f"k{i}", f"v{i}") for i in range(50)])
    runner = Runner(parse_spec(ZK_SPEC), load_scenario("zk-to-kraft"), bootstrap, tmp_path, spec_path=None)
    runner.topic = unique_name
    group = f"drill-zk-to-kraft-{runner.run_id}"
    assert runner._step_consume(Consume(max_messages=30)) == f"group {group} read 30 records of {unique_name} and " \
        "committed them"  # fmt: skip
    runner._step_snapshot(Snapshot(name="before"))
    before = runner.snapshots["before"]
    assert sum(before.groups[group].values()) == 30 and before.topics[unique_name].partitions == 2
    assert runner._step_snapshot(Snapshot(name="after", same_as="before")).endswith("; identical to before")
    runner._step_consume(Consume(max_messages=5))
    differs = rf"^snapshot later differs from before \([12] differences?\): group {group} {unique_name}-\d: committed "
    with pytest.raises(VerificationError, match=differs):
        runner._step_snapshot(Snapshot(name="later", same_as="before"))
