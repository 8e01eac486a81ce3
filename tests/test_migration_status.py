"""`status` and the console's cluster page show a KRaft migration recorded beside the spec (no Docker: the state
file is written by the migration module's own functions; the console reads metadata from a loopback tansu)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from clusterctl import output
from clusterctl.cli.cluster import render_status
from clusterctl.compose.migration import PHASES
from clusterctl.console.app import Console as WebConsole
from clusterctl.console.data import ConsoleTarget
from clusterctl.kafka.kraft import migration as plan
from clusterctl.output import to_jsonable
from clusterctl.runtime.status import ClusterStatus, add_migration
from clusterctl.spec.model import parse_spec
from clusterctl.zookeeper import client as zk

SPEC = parse_spec({"name": "mig", "profile": "offline", "network": {"subnet": "10.91.0.0/24"},
                   "images": {"kafka": "clusterctl/kafka:3.7.0"}})  # fmt: skip


def _state(done: int, begun: bool = False, rolled_back: bool = False) -> plan.MigrationState:
    state = plan.MigrationState("mig", "3.7", 3, "cid")
    for p in PHASES[:done]:
        state.started(p)
        state.completed(p, "seen")
    if begun:
        state.started(PHASES[done])
    state.rolled_back = rolled_back
    return state


CASES = [
    # (phases done, next one begun, rolled back) → (phase, state, interrupted, next)
    ((0, False, False), (0, "not started", False, "`migrate kraft` runs phases 1-5; phase 4 needs --yes")),
    ((2, False, False), (2, "done", False, "`migrate kraft` runs phases 3-5; phase 4 needs --yes")),
    ((2, True, False),
     (3, "interrupted", True, "`migrate kraft` runs phases 3-5 (again from its start); phase 4 needs --yes")),
    ((4, False, False), (4, "done", False, "`migrate kraft` runs phase 5")),
    ((5, False, False), (5, "done", False, "nothing: the migration is finished")),
    ((2, True, True), (3, "rolled back", False, "`migrate kraft` starts the migration of mig again from phase 1")),
]  # fmt: skip


def _status() -> ClusterStatus:
    return ClusterStatus("mig", "kafka", [], [], zk.summarize([]), None, None, None, summary=["quorum ok"])


@pytest.fixture
def table(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> pytest.CaptureFixture[str]:
    monkeypatch.setattr(output, "console", Console(width=400, force_terminal=False, color_system=None))
    return capsys


@pytest.mark.parametrize(("recorded", "expected"), CASES)
def test_status_shows_the_phase_and_what_comes_next(
    tmp_path: Path, table: pytest.CaptureFixture[str], recorded: tuple[int, bool, bool], expected: tuple[Any, ...]
) -> None:
    spec_path = tmp_path / "clusterctl.yaml"
    plan.save_state(plan.state_path(spec_path), _state(*recorded))
    result = add_migration(_status(), spec_path)
    data = json.loads(json.dumps(to_jsonable(result)))["migration"]
    number, state, interrupted, next_action = expected
    assert (data["phase"], data["state"], data["interrupted"]) == (number, state, interrupted)
    assert data["phase_name"] == (PHASES[number - 1].name if number else None)
    assert data["next"].startswith(next_action), data["next"]
    assert data["finished"] is (recorded[0] == 5)
    assert data["state_file"] == str(tmp_path / "clusterctl.yaml.migration.json")

    render_status(result, SPEC)
    lines = [ln for ln in table.readouterr().out.splitlines() if ln.startswith("migration to KRaft")]
    where = f"phase {number} {PHASES[number - 1].name} " if number else ""
    assert lines == [f"migration to KRaft: {where}{state}; next: {data['next']}"]


def test_no_state_file_no_migration(tmp_path: Path, table: pytest.CaptureFixture[str]) -> None:
    result = add_migration(_status(), tmp_path / "clusterctl.yaml")
    assert to_jsonable(result)["migration"] is None
    render_status(result, SPEC)
    out = table.readouterr().out
    assert "quorum ok" in out and "migration" not in out


def test_an_unreadable_state_file_is_a_status_line(tmp_path: Path) -> None:
    spec_path = tmp_path / "clusterctl.yaml"
    plan.state_path(spec_path).write_text("{}")
    result = add_migration(_status(), spec_path)
    assert result.migration is None
    assert result.summary[-1].startswith("migration to KRaft: ") and "not a migration state file" in result.summary[-1]


@pytest.mark.tansu
def test_console_cluster_page_shows_the_migration(tmp_path: Path, bootstrap: str) -> None:
    spec_path = tmp_path / "clusterctl.yaml"
    without = WebConsole(ConsoleTarget(bootstrap, spec_path=spec_path)).render_fragment("cluster")
    assert "<h2>Kafka</h2>" in without and 'id="migration"' not in without
    plan.save_state(plan.state_path(spec_path), _state(2, begun=True))
    page = WebConsole(ConsoleTarget(bootstrap, spec_path=spec_path)).render_fragment("cluster")
    assert 'id="migration"' in page and "<h2>Kafka</h2>" in page
    assert '<td id="migration-phase" class="warn">3 kraft-brokers</td>' in page
    assert '<td id="migration-state">interrupted</td>' in page and 'id="migration-run"' not in page
    assert "`migrate kraft` runs phases 3-5 (again from its start); phase 4 needs --yes" in page
