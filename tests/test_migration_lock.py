"""A `migrate` run holds the lock beside the spec (clusterctl.runowner): `--status` tells the phase it runs from an
interrupted one, and a second run is refused with one line naming the holder's pid.

Real processes, no Docker: the child runs the real `clusterctl migrate kraft` code path (cli.run → runtime.migrate)
with only phase 1's Docker work replaced by a sleep, so the lock, the state file and the signal handling are the
ones a real run has. The test starts no cluster.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from clusterctl import runowner
from clusterctl.compose.migration import PHASES
from clusterctl.errors import ClusterctlError
from clusterctl.kafka.kraft import migration as plan
from clusterctl.testing import ownership

CLI = str(Path(sys.executable).parent / "clusterctl")
ZK_SPEC = {"name": "mig", "profile": "offline", "network": {"subnet": "10.91.0.0/24"},
           "images": {"kafka": "clusterctl/kafka:3.7.0"}}  # fmt: skip
BEGUN = "phase 1 begun"
# The real command; phase 1's action (start the controllers in Docker) sleeps instead.
CHILD = textwrap.dedent(f"""
    import sys, time
    from clusterctl.cli import run
    from clusterctl.runtime import migrate

    def controllers_sleep(run_):
        print({BEGUN!r}, flush=True)
        time.sleep(300)
        return [], ""

    migrate.PHASE_ACTIONS[1] = controllers_sleep
    sys.exit(run(["-s", sys.argv[1], "migrate", "kraft", "--to", "1"]))
""")
SINCE = r"since \d\d:\d\d:\d\dZ"
Children = list[tuple[subprocess.Popen[str], str | None]]


@pytest.fixture
def spec_path(tmp_path: Path) -> Path:
    """A ZooKeeper-mode spec with a migration recorded but not begun (the cluster id known: no ZooKeeper read)."""
    path = tmp_path / "clusterctl.yaml"
    path.write_text(yaml.safe_dump(ZK_SPEC))
    plan.save_state(plan.state_path(path), plan.MigrationState("mig", "3.7", 3, "cid"))
    return path


@pytest.fixture
def children() -> Iterator[Children]:
    """The child runs a test starts, with their claims (a killed pytest's next run sweeps them): killed at its end."""
    started: Children = []
    yield started
    for proc, claim in started:
        if proc.poll() is None:
            proc.kill()
        proc.communicate(timeout=30)
        if claim is not None:
            ownership.current().release(claim)


def start_run(spec_path: Path, children: Children) -> subprocess.Popen[str]:
    """The child `migrate kraft --to 1`, once it is inside phase 1 (it holds the lock and the state says begun)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(spec_path)], cwd=spec_path.parent, text=True,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    children.append((proc, ownership.current().claim_pid(proc.pid)))
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.strip() == BEGUN, f"{line!r} {proc.stderr.read() if proc.poll() is not None and proc.stderr else ''}"
    return proc


def clusterctl(spec_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CLI, "-s", str(spec_path), *args], capture_output=True, text=True, cwd=spec_path.parent, timeout=60
    )


def status_json(spec_path: Path) -> dict[str, object]:
    proc = clusterctl(spec_path, "migrate", "kraft", "--status", "--json")
    assert proc.returncode == 0, proc.stderr
    data: dict[str, object] = json.loads(proc.stdout)
    return data


def phase_states(data: dict[str, object]) -> list[str]:
    rows = data["phases"]
    assert isinstance(rows, list)
    return [str(r["state"]) for r in rows]


def test_status_running_then_interrupted_after_sigkill_and_a_new_run_takes_over(
    spec_path: Path, children: Children
) -> None:
    first = start_run(spec_path, children)
    data = status_json(spec_path)
    states = phase_states(data)
    assert re.fullmatch(rf"running \(pid {first.pid}, {SINCE}\)", states[0]), states
    assert states[1:] == ["pending"] * 4
    running = data["running"]
    assert isinstance(running, dict)
    assert (running["pid"], running["command"]) == (first.pid, "migrate kraft")
    assert abs(float(running["started"]) - time.time()) < 60

    text = clusterctl(spec_path, "migrate", "kraft", "--status")
    assert text.returncode == 0, text.stderr
    assert re.search(rf"│ running \(pid {first.pid}, {SINCE}\) +│", text.stdout), text.stdout
    assert f"`migrate kraft` is running (pid {first.pid}, since" in text.stderr
    summary = plan.summary_beside(spec_path)  # what `clusterctl status` and the console show
    assert summary is not None and summary.state == states[0] and not summary.interrupted
    assert summary.running is not None and summary.running.pid == first.pid
    assert summary.next.startswith(f"none while `migrate kraft` runs (pid {first.pid}")

    first.kill()  # SIGKILL: no cleanup runs, the kernel lets go of the lock
    first.communicate(timeout=30)
    assert plan.lock_path(spec_path).exists()  # left behind, held by nobody
    data = status_json(spec_path)
    assert phase_states(data) == ["interrupted"] + ["pending"] * 4 and data["running"] is None
    assert "running" not in clusterctl(spec_path, "migrate", "kraft", "--status").stderr
    summary = plan.summary_beside(spec_path)
    assert summary is not None and summary.state == "interrupted" and summary.interrupted
    assert summary.next.startswith("`migrate kraft` runs phases 1-5 (again from its start)")

    second = start_run(spec_path, children)  # the interrupted phase runs again, under a new holder
    assert re.fullmatch(rf"running \(pid {second.pid}, {SINCE}\)", phase_states(status_json(spec_path))[0])


@pytest.mark.parametrize("args", [["migrate", "kraft", "--to", "1"], ["migrate", "rollback"]])
def test_a_second_run_is_refused_with_one_line_before_any_work(
    spec_path: Path, children: Children, args: list[str]
) -> None:
    first = start_run(spec_path, children)
    state = plan.state_path(spec_path).read_bytes()
    started = time.monotonic()
    proc = clusterctl(spec_path, *args)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert re.fullmatch(
        rf"error: migrate kraft is already running \(pid {first.pid}, {SINCE}; it holds "
        rf"{re.escape(str(plan.lock_path(spec_path)))}\): wait for it to end, or stop it, then run again\n",
        proc.stderr,
    ), proc.stderr
    assert time.monotonic() - started < 30
    assert plan.state_path(spec_path).read_bytes() == state  # nothing read under the lock, nothing written
    assert first.poll() is None and runowner.holder(plan.lock_path(spec_path)) is not None
    refused = clusterctl(spec_path, *args, "--json")
    assert refused.returncode == 2 and json.loads(refused.stdout)["exit_code"] == 2


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_a_stop_signal_lets_go_of_the_lock_and_leaves_the_phase_interrupted(
    spec_path: Path, children: Children, sig: signal.Signals
) -> None:
    proc = start_run(spec_path, children)
    proc.send_signal(sig)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 128 + sig, err
    assert err.splitlines()[-1] == f"error: interrupted by {sig.name}", err
    assert not plan.lock_path(spec_path).exists()  # let go and removed
    state = plan.load_state(plan.state_path(spec_path))
    assert state is not None and state.current == PHASES[0].name and state.done == []
    assert phase_states(status_json(spec_path))[0] == "interrupted"


def test_the_lock_itself(tmp_path: Path) -> None:
    """In-process: held → holder names this process; a second taker is refused; let go → the file is gone.
    (flock locks belong to an open file, so a second open in the same process conflicts as another process would.)"""
    lock = tmp_path / "x.lock"
    assert runowner.holder(lock) is None
    with runowner.own(lock, "upgrade") as me:
        assert me.pid == os.getpid()
        assert runowner.holder(lock) == me
        with pytest.raises(runowner.AlreadyRunning) as refused, runowner.own(lock, "upgrade"):
            pytest.fail("a second holder")
        assert refused.value.owner == me and refused.value.exit_code == 2
        assert f"upgrade is already running (pid {os.getpid()}, since " in str(refused.value)
    assert not lock.exists() and runowner.holder(lock) is None
    with runowner.own(lock, "upgrade"):  # taken again once let go
        assert lock.exists()


def test_a_lock_beside_a_missing_directory_is_one_line(tmp_path: Path) -> None:
    lock = tmp_path / "gone" / "x.lock"
    with pytest.raises(ClusterctlError) as err, runowner.own(lock, "upgrade"):
        pytest.fail("taken")
    assert str(err.value) == f"cannot create the lock file {lock}: No such file or directory"


def test_during_a_rollback_the_phase_stays_interrupted_and_the_run_is_named(spec_path: Path) -> None:
    state = plan.MigrationState("mig", "3.7", 3, "cid")
    state.started(PHASES[0])
    plan.save_state(plan.state_path(spec_path), state)
    with runowner.own(plan.lock_path(spec_path), "migrate rollback"):  # as runtime.migrate.rollback takes it
        summary = plan.summary_beside(spec_path)
        assert summary is not None and summary.state == "interrupted" and not summary.interrupted
        assert summary.line.startswith(
            "migration to KRaft: phase 1 controllers interrupted; `migrate rollback` running;"
        )
        data = status_json(spec_path)
    assert phase_states(data)[0] == "interrupted"
    running = data["running"]
    assert isinstance(running, dict) and (running["command"], running["pid"]) == ("migrate rollback", os.getpid())
