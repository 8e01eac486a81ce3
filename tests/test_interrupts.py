"""Issues 11 and 32: Ctrl-C (a real SIGINT), SIGTERM (CI, `timeout`) and SIGHUP (a closed terminal) during `up`,
a pause fault and `scenario run` on a Docker cluster.

Each must exit 128 + the signal with "interrupted by SIG...", having cleaned up: `up` tears down what it started,
the pause is undone, and `scenario run` heals, stops its load and writes a partial report marked interrupted.
Test-only spec: a free subnet and free host ports (offline tansu images, one ZooKeeper node).
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
from _runtime_helpers import CLI, cli, leftovers, release, render, wait_for, write_spec

pytestmark = [pytest.mark.docker]


def start(spec: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [CLI, "-s", str(spec), *args],
        cwd=spec.parent,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def read_stderr_until(proc: subprocess.Popen[str], needle: str, timeout: float = 120) -> list[str]:
    assert proc.stderr is not None
    seen: list[str] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            raise AssertionError(f"exited before {needle!r}: {''.join(seen)}")
        seen.append(line)
        if needle in line:
            return seen
    raise AssertionError(f"no {needle!r} within {timeout}s: {''.join(seen)}")


def interrupt(
    proc: subprocess.Popen[str], sig: signal.Signals = signal.SIGINT, timeout: float = 180
) -> tuple[int, str, str]:
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 128 + sig, err
    assert [ln for ln in err.splitlines() if ln.startswith("error: ")] == [f"error: interrupted by {sig.name}"], err
    return proc.returncode, out, err


STOPS = pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)


@STOPS
def test_up_ctrl_c_tears_down_what_it_started(tmp_path: Path, sig: signal.Signals) -> None:
    project = f"ctlint-{uuid.uuid4().hex[:6]}"  # the compose project is the spec's name
    spec = write_spec(tmp_path, project, zk_nodes=1)
    render(spec)
    proc = start(spec, "up", "--timeout", "300")
    try:
        wait_for(lambda: leftovers(project)["containers"], 120, "the first container", interval=0.2)
        _rc, _out, err = interrupt(proc, sig)
        assert "Traceback" not in err
        assert leftovers(project) == {"containers": [], "networks": [], "volumes": []}
    finally:
        if proc.poll() is None:
            proc.kill()
        release(spec)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    work = tmp_path_factory.mktemp("interrupts")
    spec = write_spec(work, f"ctlint-{uuid.uuid4().hex[:6]}", zk_nodes=1)
    render(spec)
    try:
        res = cli(spec, "up", "--timeout", "240")
        assert res.returncode == 0, res.stderr
        yield spec
    finally:
        release(spec)


def broker_state(spec: Path) -> str:
    status = json.loads(cli(spec, "status", "--json").stdout)
    broker = next(s for s in status["services"] if s["service"] == "kafka1")
    return str(docker.from_env().containers.get(broker["container"]).status)


@STOPS
def test_pause_fault_ctrl_c_unpauses(cluster: Path, sig: signal.Signals) -> None:
    proc = start(cluster, "chaos", "pause-broker", "1", "--for", "120")
    try:
        read_stderr_until(proc, "pausing broker 1")
        wait_for(lambda: broker_state(cluster) == "paused", 30, "the broker to be paused")
        _rc, _out, err = interrupt(proc, sig)
        assert "Traceback" not in err
        assert broker_state(cluster) == "running"
    finally:
        if proc.poll() is None:
            proc.kill()
        cli(cluster, "chaos", "heal")


SCENARIO = """\
name: long-sleep
description: a load and a long sleep, to be interrupted
requires: any
topic: {partitions: 1, replication_factor: 1, min_insync_replicas: 1}
steps:
  - create_topic: {}
  - start_load: {rate: 50}
  - fault: {action: pause-broker, broker: 1, for: 120}
  - sleep: 120
  - stop_load: {}
  - verify: {}
"""


@STOPS
def test_scenario_run_ctrl_c_writes_a_partial_report(cluster: Path, tmp_path: Path, sig: signal.Signals) -> None:
    scenario = tmp_path / "long-sleep.yaml"
    scenario.write_text(SCENARIO)
    reports = tmp_path / "reports"
    proc = start(cluster, "scenario", "run", str(scenario), "--report-dir", str(reports))
    try:
        read_stderr_until(proc, "step 4/6")
        wait_for(lambda: broker_state(cluster) == "paused", 60, "the broker to be paused")
        time.sleep(1)
        _rc, _out, err = interrupt(proc, sig)
        assert "Traceback" not in err
        assert broker_state(cluster) == "running"  # the fault was healed
        report = json.loads((reports / "report.json").read_text())
        assert report["interrupted"] is True and report["ok"] is False
        assert [s["ok"] for s in report["steps"]] == [True, True, True, False]
        assert report["steps"][-1]["detail"] == "interrupted" and "interrupted during step 4" in report["error"]
        assert "INTERRUPTED" in (reports / "report.html").read_text()
    finally:
        if proc.poll() is None:
            proc.kill()
        cli(cluster, "chaos", "heal")


REPEATED = """\
name: pause-twice
description: a short pause under load, repeated; the second run is interrupted while the broker is paused
requires: any
topic: {partitions: 1, replication_factor: 1, min_insync_replicas: 1}
steps:
  - create_topic: {}
  - start_load: {rate: 50}
  - fault: {action: pause-broker, broker: 1, for: 4}
  - sleep: 4
  - stop_load: {}
"""


def test_scenario_run_repeat_one_signal_ends_the_series(cluster: Path, tmp_path: Path) -> None:
    """Issue 51: SIGTERM in run 2 of 3 ends the whole series: run 2 healed and INTERRUPTED (not FAIL), no run 3,
    the summary written, exit 143."""
    scenario = tmp_path / "pause-twice.yaml"
    scenario.write_text(REPEATED)
    reports = tmp_path / "reports"
    status = json.loads(cli(cluster, "status", "--json").stdout)
    name = next(s["container"] for s in status["services"] if s["service"] == "kafka1")
    broker = docker.from_env().containers.get(name)

    def paused() -> bool:
        broker.reload()
        return broker.status == "paused"

    proc = start(cluster, "scenario", "run", str(scenario), "--repeat", "3", "--report-dir", str(reports))
    try:
        seen = read_stderr_until(proc, "run 2/3")
        seen += read_stderr_until(proc, "step 3/5")
        wait_for(paused, 30, "the broker to be paused", interval=0.05)
        t0 = time.monotonic()
        _rc, _out, err = interrupt(proc, signal.SIGTERM)
        took = time.monotonic() - t0
        assert took < 30, took
        err = "".join(seen) + err
        assert "run 1/3: PASS" in err and "run 2/3: INTERRUPTED" in err and "run 3/3" not in err, err
        assert "Traceback" not in err
        assert broker_state(cluster) == "running"
        report = json.loads((reports / "run-02" / "report.json").read_text())
        assert report["interrupted"] is True and report["verdict"] == "INTERRUPTED"
        assert not (reports / "run-03").exists()
        summary = (reports / "summary.html").read_text()
        assert "INTERRUPTED" in summary and "(interrupted)" in summary
        assert not list((cluster.parent / "compose").glob("*/.clusterctl-faults/*.json"))  # the pause's record gone
    finally:
        if proc.poll() is None:
            proc.kill()
        cli(cluster, "chaos", "heal")


def test_a_sigkilled_pause_is_recorded_reported_and_healed(cluster: Path, tmp_path: Path) -> None:
    """Issue 51: SIGKILL cannot be handled, so the pause recorded itself before it froze the broker: `status` reports
    it, `scenario run` refuses to drill on it, `chaos heal` reports and undoes it and forgets the record."""
    proc = start(cluster, "chaos", "pause-broker", "1", "--for", "300")
    try:
        read_stderr_until(proc, "pausing broker 1")
        wait_for(lambda: broker_state(cluster) == "paused", 30, "the broker to be paused")
        proc.kill()
        proc.communicate(timeout=30)
        assert broker_state(cluster) == "paused"  # nothing could undo it
        records = list((cluster.parent / "compose").glob("*/.clusterctl-faults/*.pause.json"))
        assert len(records) == 1, records
        status = json.loads(cli(cluster, "status", "--json").stdout)
        left = [s for s in status["summary"] if s.startswith("fault left applied: broker 1")]
        assert len(left) == 1 and f"pid {proc.pid}, which is gone" in left[0], status["summary"]
        scenario = tmp_path / "pause-twice.yaml"
        scenario.write_text(REPEATED)
        refused = cli(cluster, "scenario", "run", str(scenario), "--report-dir", str(tmp_path / "r"))
        assert refused.returncode == 1 and "error: fault left applied: broker 1" in refused.stderr, refused.stderr
        assert not (tmp_path / "r").exists()  # refused before any work
        healed = cli(cluster, "chaos", "heal", "--json")
        assert healed.returncode == 0, healed.stderr
        data = json.loads(healed.stdout)
        assert [r["target"] for r in data["left_behind"]] == ["broker 1"]
        assert any(r["action"] == "unpause" and r["target"] == "broker 1" for r in data["healed"])
        assert broker_state(cluster) == "running" and not records[0].exists()
        status = json.loads(cli(cluster, "status", "--json").stdout)
        assert not [s for s in status["summary"] if s.startswith("fault left applied")]
    finally:
        if proc.poll() is None:
            proc.kill()
        cli(cluster, "chaos", "heal")


def test_a_topic_a_step_names_must_exist_before_the_run_starts(cluster: Path, tmp_path: Path) -> None:
    """Issue 51: a step naming a topic the run does not create is refused at the start (exit 2), not mid-drill."""
    scenario = tmp_path / "names-a-topic.yaml"
    scenario.write_text(
        "name: names-a-topic\nrequires: any\ntopic: {partitions: 1, replication_factor: 1, min_insync_replicas: 1}\n"
        "steps:\n  - create_topic: {}\n  - wait_for: {isr_full: {topic: no-such-topic-51}, timeout: 5}\n"
    )
    res = cli(cluster, "scenario", "run", str(scenario), "--report-dir", str(tmp_path / "r"))
    assert res.returncode == 2, res.stderr
    assert [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")] == [
        "error: scenario names-a-topic: step 2 names topic 'no-such-topic-51', which does not exist"
    ], res.stderr
    assert not (tmp_path / "r").exists()
