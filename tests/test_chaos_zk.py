"""Faults and the observer against a real cluster: 3 ZooKeeper nodes (offline image) + a tansu broker container.

Test-only spec: name ctlchaos-*, a free subnet and free host ports; brought up
and torn down with the real CLI. The ZK side of the observer (Mode per node, quorum, session) and every
container fault are checked for real, and so is the drill path under a broker pause (short-pause: load,
ledger, observer, verify); broker-side failover (ISR, leaders) needs real Kafka
(tests/test_chaos_kafka.py).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from _runtime_helpers import cli, cli_json, running_cluster, wait_for

from clusterctl.chaos import faults, recovery
from clusterctl.chaos.analysis import analyze
from clusterctl.chaos.observer import Observer
from clusterctl.images import build as images
from clusterctl.runtime import docker as dk
from clusterctl.spec.model import ClusterSpec, load_spec
from clusterctl.zookeeper import client as zk

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    images.build_images(["zookeeper", "tansu"])
    work = tmp_path_factory.mktemp("chaos")
    with running_cluster(
        work,
        f"ctlchaos-{uuid.uuid4().hex[:6]}",
    ) as spec_path:
        yield spec_path


def state(name: str) -> str:
    c = dk.get_container(name)
    c.reload()
    return str(c.attrs["State"]["Status"])


def healthy(spec: ClusterSpec) -> bool:
    return zk.quorum(spec, timeout=1.0).healthy


def test_zk_quorum_holds_then_is_lost_then_reforms(cluster: Path) -> None:
    spec = load_spec(cluster)
    wait_for(lambda: healthy(spec), 60, "healthy ensemble")
    leader = zk.quorum(spec).leaders[0]
    followers = [i for i in spec.topology.zk_ids if i != leader]
    obs = Observer(spec, None).start()
    try:
        time.sleep(1)
        r1 = faults.kill_zk(spec, followers[0])
        obs.mark(r1.action, r1.target, t=r1.started)
        assert (r1.before, r1.after) == ("running", "exited") and state(r1.container) == "exited"
        wait_for(lambda: zk.quorum(spec, 1.0).serving == 2, 30, "2/3 serving")
        assert zk.quorum(spec).has_quorum  # 2 of 3 is a quorum
        time.sleep(1)
        r2 = faults.kill_zk(spec, leader)
        obs.mark(r2.action, r2.target, t=r2.started)
        wait_for(lambda: not zk.quorum(spec, 1.0).has_quorum, 30, "quorum lost")
        time.sleep(1)
        heal_t = time.time()
        for i in (followers[0], leader):
            r = faults.start_zk(spec, i)
            obs.mark(r.action, r.target, t=r.started)
            assert r.after == "running"
        wait_for(lambda: healthy(spec), 90, "ensemble re-formed")
        reformed_s = time.time() - heal_t
        time.sleep(0.5)
    finally:
        tl = obs.stop()
        recovery.heal_all(spec)
    kinds = [(e.kind, e.value) for e in tl.events if e.kind == "quorum"]
    assert kinds[0] == ("quorum", True) and ("quorum", False) in kinds and kinds[-1] == ("quorum", True)
    m1, m2 = analyze(tl)
    assert m1.zk == followers[0] and m1.detected_s is not None
    assert m2.zk == leader and m2.quorum_lost_s is not None and m2.quorum_ok_after_heal_s is not None
    # the follower is still down when the leader dies: the quorum loss falls in both faults' windows (either could
    # explain it), and each fault names the other as in effect at the same time
    assert m1.quorum_lost_s is not None and m1.quorum_lost_s > m2.quorum_lost_s
    assert m1.overlaps == [f"{m2.action} {m2.target}"] and m2.overlaps == [f"{m1.action} {m1.target}"]
    # the watching kazoo client saw its session suspend while the ensemble had no quorum
    assert any(e.kind == "session" and e.value == "SUSPENDED" for e in tl.events)
    print(
        f"\nZK drill: node loss detected {m1.detected_s:.2f}s, quorum loss observed {m2.quorum_lost_s:.2f}s after "
        f"the 2nd kill, quorum back {m2.quorum_ok_after_heal_s:.2f}s after its start (healthy {reformed_s:.2f}s)"
    )


def test_broker_container_faults(cluster: Path) -> None:
    spec = load_spec(cluster)
    name = spec.topology.broker_container(1)
    out = cli_json(cluster, "chaos", "kill-broker", "1")
    assert out[0]["action"] == "kill-broker" and out[0]["after"] == "exited" and state(name) == "exited"
    assert dk.get_container(name).attrs["State"]["ExitCode"] == 137  # SIGKILL
    res = cli(cluster, "chaos", "kill-broker", "1")
    assert res.returncode == 1 and res.stderr.strip().splitlines() == [
        f"error: broker 1 ({name}) is exited, expected running"
    ]
    assert cli_json(cluster, "chaos", "start-broker", "1")[0]["after"] == "running"
    assert cli_json(cluster, "chaos", "stop-broker", "1")[0]["after"] == "exited"
    assert cli_json(cluster, "chaos", "restart-broker", "1")[0]["after"] == "running"

    # kill-leader finds the leader in metadata (tansu reports node id 111: the spec's only broker)
    wait_for(lambda: cli(cluster, "topic", "list").returncode == 0, 30, "broker answers", interval=0.5)
    topic = f"kl-{uuid.uuid4().hex[:6]}"
    assert cli(cluster, "topic", "create", topic, "--partitions", "2").returncode == 0
    # a partition the topic lacks is not found (3), asked while its broker answers (once killed: unreachable, 4)
    res = cli(cluster, "chaos", "kill-leader", topic, "5")
    assert res.returncode == 3 and len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert "no partition 5" in res.stderr and state(name) == "running"
    out = cli_json(cluster, "chaos", "kill-leader", topic, "1")
    assert out[0]["action"] == "kill-leader" and out[0]["container"] == name and state(name) == "exited"
    assert out[0]["note"] == f"leader of {topic}-1 was broker 111 (the spec's broker 1)"
    assert cli_json(cluster, "chaos", "start-broker", "1")[0]["after"] == "running"

    # rolling restart: one broker at a time, each step waits for full ISR again
    wait_for(lambda: cli(cluster, "topic", "list").returncode == 0, 30, "broker answers", interval=0.5)
    steps = cli_json(cluster, "chaos", "rolling-restart")
    assert [s["broker"] for s in steps] == [1] and state(name) == "running"

    # pause: frozen while it lasts, running again afterwards
    t = _background(cluster, "chaos", "pause-broker", "1", "--for", "3", "--json")
    wait_for(lambda: state(name) == "paused", 10, "paused", interval=0.1)
    rows = _finish(t)
    assert [r["action"] for r in rows] == ["pause", "unpause"] and state(name) == "running"

    # network partition: off the cluster network, back with the same static IP
    t = _background(cluster, "chaos", "partition-node", "kafka1", "--for", "3", "--json")
    wait_for(lambda: spec.topology.network_name not in _networks(name), 10, "disconnected", interval=0.1)
    rows = _finish(t)
    assert [r["action"] for r in rows] == ["partition-node", "reconnect"]
    nets = _networks(name)
    assert nets[spec.topology.network_name]["IPAddress"] == spec.topology.broker_ip(1)
    assert "kafka1" in (nets[spec.topology.network_name].get("Aliases") or [])


def test_heal_waits_until_zk_serves_and_the_broker_answers(cluster: Path) -> None:
    """`chaos heal` returns once the healed ZK node serves and the broker answers; --no-wait does not wait."""
    spec = load_spec(cluster)
    wait_for(lambda: healthy(spec), 60, "healthy ensemble")
    follower = next(i for i in spec.topology.zk_ids if i not in zk.quorum(spec).leaders)
    cli_json(cluster, "chaos", "kill-zk", str(follower))
    cli_json(cluster, "chaos", "kill-broker", "1")
    res = cli(cluster, "chaos", "heal")
    assert res.returncode == 0, res.stderr
    assert "ZK 1,2,3 serving" in res.stderr or "ZK 1,2,3 serving" in res.stdout, res.stdout + res.stderr
    # nothing left to wait for: the ensemble is whole and the broker answers right away
    assert healthy(spec)
    assert cli(cluster, "topic", "list").returncode == 0
    data = cli_json(cluster, "chaos", "heal")  # nothing to heal: returns at once, still checked
    assert data["healed"] == [] and data["wait"]["zk_serving"] == [1, 2, 3] and data["wait"]["seconds"] < 5
    cli_json(cluster, "chaos", "kill-zk", str(follower))
    started = time.monotonic()
    data = cli_json(cluster, "chaos", "heal", "--no-wait")
    assert data["wait"] is None and [h["target"] for h in data["healed"]] == [f"zk {follower}"]
    assert time.monotonic() - started < 15
    wait_for(lambda: healthy(spec), 60, "healthy ensemble")
    res = cli(cluster, "chaos", "heal", "--timeout", "0")
    assert res.returncode == 2 and res.stderr.strip().splitlines() == [
        "error: Invalid value for '--timeout': seconds must be positive, got 0 (see `clusterctl chaos heal --help`)"
    ]


def test_scenario_repeat_summarizes_the_runs(cluster: Path, tmp_path: Path) -> None:
    """`scenario run --repeat 2`: per-run numbers, median/p95/max, and an HTML summary linking each report."""
    wait_for(lambda: cli(cluster, "topic", "list").returncode == 0, 30, "broker answers", interval=0.5)
    res = cli(cluster, "scenario", "run", "short-pause", "--repeat", "2", "--report-dir", str(tmp_path), "--json",
              timeout=300)  # fmt: skip
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["passed"] == 2 and [r["run"] for r in data["runs"]] == [1, 2] and not data["interrupted"]
    assert all(r["lost"] == 0 and r["acked"] > 2000 and 4.5 <= r["write_gap_s"] <= 8.0 for r in data["runs"])
    by = {s["metric"]: s for s in data["summary"]}
    gaps = sorted(r["write_gap_s"] for r in data["runs"])
    assert by["write_gap_s"]["max"] == gaps[-1] and by["write_gap_s"]["n"] == 2
    assert by["write_gap_s"]["median"] == pytest.approx(sum(gaps) / 2, abs=1e-3)
    assert data["bounds"] == {}  # tansu: no replication, no setting bounds these times
    page = (tmp_path / "summary.html").read_text()
    assert "2/2 passed" in page and "href='run-01/report.html'" in page and "href='run-02/report.html'" in page
    assert (tmp_path / "run-01" / "report.html").is_file() and (tmp_path / "run-02" / "report.json").is_file()
    human = cli(cluster, "scenario", "run", "short-pause", "--repeat", "1", "--report-dir", str(tmp_path / "one"))
    assert human.returncode == 0, human.stderr
    assert "scenario short-pause x1 of 1: 1/1 passed" in human.stdout, human.stdout  # a series of one
    assert (tmp_path / "one" / "summary.html").is_file() and (tmp_path / "one" / "run-01" / "report.json").is_file()


def test_failed_repeat_is_one_json_document(cluster: Path, tmp_path: Path) -> None:
    """A `loss` scenario that loses nothing fails; with --json, stdout is one error object carrying the runs."""
    scenario = tmp_path / "expects-loss.yaml"
    scenario.write_text(
        "name: expects-loss\nrequires: any\nexpect: loss\n"
        "topic: {partitions: 1, replication_factor: 1, min_insync_replicas: 1}\n"
        "steps: [{create_topic: {}}, {start_load: {rate: 200}}, {sleep: 1}, {stop_load: {}}, {verify: {}}]\n"
    )
    wait_for(lambda: cli(cluster, "topic", "list").returncode == 0, 30, "broker answers", interval=0.5)
    res = cli(cluster, "scenario", "run", str(scenario), "--repeat", "2", "--report-dir", str(tmp_path / "r"), "--json",
              timeout=180)  # fmt: skip
    assert res.returncode == 6, res.stderr  # a drill failed
    data = json.loads(res.stdout)  # exactly one document
    assert data["error"].startswith("2 of 2 runs failed (hint: see ") and data["exit_code"] == res.returncode
    assert data["result"]["passed"] == 0 and [r["lost"] for r in data["result"]["runs"]] == [0, 0]


def test_fault_errors_are_one_line(cluster: Path) -> None:
    for args, code, expected in [
        (("chaos", "kill-broker", "7"), 3, "error: unknown broker id 7; the spec has brokers 1"),
        (("chaos", "kill-zk", "9"), 3, "error: unknown ZooKeeper id 9; the spec has nodes 1,2,3"),
        (
            ("chaos", "partition-node", "nope", "--for", "1"),
            3,
            "error: unknown node 'nope'; the spec has zk1, zk2, zk3, kafka1",
        ),
        (("chaos", "pause-broker", "1", "--for", "0"), 2, "error: --for must be positive, got 0.0"),
    ]:
        res = cli(cluster, *args)
        assert res.returncode == code and res.stderr.strip().splitlines() == [expected], (args, res.stderr)


def test_zk_node_loss_scenario_end_to_end(cluster: Path, tmp_path: Path) -> None:
    spec = load_spec(cluster)
    wait_for(lambda: healthy(spec), 60, "healthy ensemble")
    report_dir = tmp_path / "report"
    started = time.monotonic()
    res = cli(cluster, "scenario", "run", "zk-node-loss", "--report-dir", str(report_dir), "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["ok"] is True and all(s["ok"] for s in data["steps"])
    # zk 1 is still down when zk 2 is killed: the quorum loss falls in both faults' windows, each names the other
    lost = [f for f in data["faults"] if f["quorum_lost_s"] is not None]
    assert [f["target"] for f in lost] == ["zk 1", "zk 2"], data["faults"]
    assert all(f["quorum_ok_after_heal_s"] is not None for f in lost)
    assert [f["overlaps"] for f in lost] == [["kill-zk zk 2"], ["kill-zk zk 1"]]
    print(f"\nzk-node-loss scenario: {time.monotonic() - started:.1f}s, faults {data['faults']}")
    full = json.loads((report_dir / "report.json").read_text())
    assert full["timeline"]["zk_modes"] and full["timeline"]["markers"]
    # the HTML report renders in headless Chromium with its timeline plot
    dom = _chromium(report_dir / "report.html", "--dump-dom")
    assert "Scenario zk-node-loss" in dom and "PASS" in dom
    assert '<div class="plot" id="timeline"><svg' in dom
    assert healthy(spec)


@pytest.mark.parametrize(
    ("scenario", "action", "target", "max_gap"),
    [("short-pause", "pause", "broker 1", 8.0), ("short-partition", "partition-node", "kafka1", 12.0)],
)
def test_short_broker_fault_scenario_loses_nothing(
    cluster: Path, tmp_path: Path, scenario: str, action: str, target: str, max_gap: float
) -> None:
    """The whole drill path on a real broker process under a fault: load, fault, observer, ledger, verify."""
    spec = load_spec(cluster)
    wait_for(lambda: cli(cluster, "topic", "list").returncode == 0, 30, "broker answers", interval=0.5)
    report_dir = tmp_path / "report"
    res = cli(cluster, "scenario", "run", scenario, "--report-dir", str(report_dir), "--json")
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    assert data["ok"] is True and all(s["ok"] for s in data["steps"])
    load, v = data["load"], data["verify"]
    assert load["failed"] == 0 and load["pending"] == 0 and load["acked"] == load["sent"] > 2000
    assert v["acked"] == load["acked"] and v["lost_count"] == 0 and v["reordered_count"] == 0
    assert v["duplicated_count"] == 0  # idempotent retries after a broken connection write nothing twice
    (fault,) = [f for f in data["faults"] if f["action"] == action]
    assert fault["target"] == target
    # a lone broker out of reach is seen as metadata going unanswered (the observer's request times out after 1 s)
    assert fault["detected_by"] == "metadata (no answer)" and 0.9 <= fault["detected_s"] <= 3.0, fault
    parts = fault["partitions"]
    assert len(parts) == 3 and all(p["led_by_target"] and p["leader_before"] == 1 for p in parts)
    # the fault lasts 5 s: every partition's writes wait at least that long, then flow again
    gaps = [p["write_gap_s"] for p in parts]
    assert all(4.5 <= g <= max_gap for g in gaps), gaps
    print(f"\n{scenario} on tansu: acked {load['acked']}, lost 0, detected {fault['detected_s']} s, gaps {gaps} s")
    dom = _chromium(report_dir / "report.html", "--dump-dom")
    assert f"Scenario {scenario}" in dom and "PASS" in dom and "longest wait for an ack s" in dom
    assert state(spec.topology.broker_container(1)) == "running"


def test_kafka_scenarios_are_refused_on_tansu(cluster: Path) -> None:
    res = cli(cluster, "scenario", "run", "kill-leader")
    assert res.returncode == 2
    assert res.stderr.startswith("error: scenario kill-leader needs replication (real Apache Kafka)")
    assert len(res.stderr.strip().splitlines()) == 1


def _networks(name: str) -> dict:
    c = dk.get_container(name)
    c.reload()
    return dict(c.attrs["NetworkSettings"]["Networks"])


def _background(spec_path: Path, *args: str) -> subprocess.Popen[str]:
    from _runtime_helpers import CLI

    return subprocess.Popen(
        [CLI, "-s", str(spec_path), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def _finish(proc: subprocess.Popen[str]) -> list[dict]:
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return list(json.loads(out))


def _chromium(page: Path, *flags: str) -> str:
    with tempfile.TemporaryDirectory() as profile:
        res = subprocess.run(
            ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--no-first-run", f"--user-data-dir={profile}", *flags, page.as_uri()],
            capture_output=True, text=True, timeout=90,
        )  # fmt: skip
    assert res.returncode == 0, res.stderr[-500:]
    return res.stdout
