"""ZooKeeper → KRaft migration on real Kafka 3.9 (the session's, from Maven Central): 3 ZooKeeper nodes + 3 brokers,
records written before, phases 1-2 and their done-check, then 3-5 started and stopped by SIGINT in phase 3 (the
cluster serves meanwhile; `--status` and `status` say where it stands), resumed, and every record read back from
the KRaft cluster. Test-only spec: a free subnet and free host ports. The
uninterrupted run took about 8 minutes here; the interruption shares its cluster and phases 1-2 (it adds a
produce/consume round trip and two status calls, not a second cluster).
"""

from __future__ import annotations

import glob
import json
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _runtime_helpers import CLI, cli, release, render, up_json, write_spec
from conftest import kafka_dist

from clusterctl.images import build as images
from clusterctl.runtime import docker as dk
from clusterctl.spec.model import load_spec
from clusterctl.wait import wait_until

pytestmark = [pytest.mark.real_kafka, pytest.mark.docker]
RECORDS = 2000
MID = 100  # records written while the migration stands interrupted in phase 3


@pytest.fixture(scope="module")
def zk_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    images.build_images(["kafka"], kafka_dist=kafka_dist())
    work = tmp_path_factory.mktemp("migration")
    spec_path = write_spec(work, f"ctlmig-{uuid.uuid4().hex[:6]}", engine="kafka", brokers=3, tick_time_ms=None)
    render(spec_path)
    try:
        up_json(spec_path, timeout=300)
        assert cli(spec_path, "topic", "create", "mig", "-p", "6", "-r", "3").returncode == 0
        lines = "".join(f"{i}\n" for i in range(RECORDS))
        produced = subprocess.run([CLI, "-s", str(spec_path), "produce", "mig"], input=lines, capture_output=True,
                                  text=True, cwd=spec_path.parent, timeout=120)  # fmt: skip
        assert produced.returncode == 0, produced.stderr
        yield spec_path
    finally:
        release(spec_path)


def _json(spec_path: Path, *args: str) -> Any:
    res = cli(spec_path, *args, "--json", timeout=900)
    assert res.returncode == 0, res.stderr[-3000:] + _broker_log_clues(spec_path)
    return json.loads(res.stdout)


def _broker_log_clues(spec_path: Path) -> str:
    """A failed step's clues: each broker's and controller's last ISR, AlterPartition, WARN and ERROR lines."""
    topology = load_spec(spec_path).topology
    services = [topology.broker_service(b) for b in topology.broker_ids] + ["controller1", "controller2", "controller3"]
    names = [topology.container_name(s) for s in services]  # the migration's controllers, where it started them
    clues = []
    for name in names:
        container = dk.find_container(name)
        if container is None:
            continue
        lines = container.logs(tail=4000).decode("utf-8", "replace").splitlines()
        hits = [
            ln
            for ln in lines
            if any(k in ln for k in ("ISR", "AlterPartition", "WARN", "ERROR")) and "could not be established" not in ln
        ]
        clues.append(f"\n--- {name}\n" + "\n".join(ln[:400] for ln in hits[-25:]))
    return "".join(clues)


def _container_id(spec_path: Path, service: str) -> str | None:
    container = dk.find_container(load_spec(spec_path).topology.container_name(service))
    return None if container is None or container.status != "running" else str(container.id)


def _children(pid: int) -> list[str]:
    """The processes `pid` started that still run (a `docker compose` call of the migration)."""
    found: list[str] = []
    for path in glob.glob(f"/proc/{pid}/task/*/children"):
        with open(path) as f:
            found += f.read().split()
    return found


def _interrupt_in_phase_3(spec_path: Path) -> None:
    """`migrate kraft --yes` stopped by SIGINT once phase 3 recreated kafka1 in KRaft mode and no compose call
    runs (it waits for the broker to come back): exit 130 and one line saying so."""
    before = _container_id(spec_path, "kafka1")
    proc = subprocess.Popen([CLI, "-s", str(spec_path), "migrate", "kraft", "--yes"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=spec_path.parent)  # fmt: skip
    try:
        assert proc.stderr is not None
        lines: list[str] = []
        for line in proc.stderr:  # progress lines; the run's own waits bound this loop
            lines.append(line.rstrip("\n"))
            if line.startswith("restarting kafka1"):
                break
        phases_begun = [ln.split(":")[0] for ln in lines if ln.startswith("phase ")]
        assert phases_begun == ["phase 3 kraft-brokers"], lines
        wait_until(lambda: _container_id(spec_path, "kafka1") not in (None, before) and not _children(proc.pid),
                   timeout=120, what="kafka1 recreated and no compose call running", interval=0.2)  # fmt: skip
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    rest = [ln for ln in err.splitlines() if ln.strip()]
    assert proc.returncode == 130, (proc.returncode, lines, rest)
    assert rest[-1] == "error: interrupted by SIGINT", rest
    assert sum("interrupted" in ln for ln in lines + rest) == 1, lines + rest
    assert out == ""


def _interrupted_cluster_serves(spec_path: Path) -> None:
    """Where the stopped migration stands, and a produce/consume round trip meanwhile."""
    states = [p["state"] for p in _json(spec_path, "migrate", "kraft", "--status")["phases"]]
    assert states == ["done", "done", "interrupted", "pending", "pending"]
    migration = _json(spec_path, "status")["migration"]
    assert (migration["phase"], migration["interrupted"]) == (3, True), migration
    assert migration["next"].startswith("`migrate kraft` runs phases 3-5 (again from its start)"), migration
    lines = "".join(f"mid-{i}\n" for i in range(MID))
    produced = subprocess.run([CLI, "-s", str(spec_path), "produce", "mig"], input=lines, capture_output=True,
                              text=True, cwd=spec_path.parent, timeout=120)  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    assert sorted(_values(spec_path, RECORDS + MID)) == sorted([str(i) for i in range(RECORDS)] + lines.split())


def _values(spec_path: Path, n: int) -> list[str]:
    consumed = cli(spec_path, "consume", "mig", "--from-beginning", "-n", str(n), "--timeout", "60")
    assert consumed.returncode == 0, consumed.stderr
    return [line.rpartition("value=")[2] for line in consumed.stdout.splitlines()]


def test_phases_1_and_2_then_interrupted_in_3_and_resumed(zk_cluster: Path) -> None:
    first = _json(zk_cluster, "migrate", "kraft", "--to", "2")
    ran = {r["name"]: r for r in first["ran"]}
    assert list(ran) == ["controllers", "migration-mode"]
    assert ran["controllers"]["restarted"] == ["controller1", "controller2", "controller3"]
    assert ran["migration-mode"]["restarted"] == ["kafka1", "kafka2", "kafka3"]
    assert "Completed migration of metadata from ZooKeeper to KRaft" in ran["migration-mode"]["detail"]
    print(f"\nphases 1-2: {json.dumps(first['ran'], indent=1)}")
    again = _json(zk_cluster, "migrate", "kraft", "--to", "2")
    assert again["ran"] == []  # done already: nothing restarts
    refused = cli(zk_cluster, "migrate", "kraft")
    assert refused.returncode == 2 and "point of no return" in refused.stderr

    _interrupt_in_phase_3(zk_cluster)
    _interrupted_cluster_serves(zk_cluster)
    rest = _json(zk_cluster, "migrate", "kraft", "--yes")
    print(f"phases 3-5: {json.dumps(rest['ran'], indent=1)}")
    assert [r["name"] for r in rest["ran"]] == ["kraft-brokers", "finalize", "remove-zookeeper"]
    assert "kafka1" not in rest["ran"][0]["restarted"]  # moved before the interruption: not restarted again
    spec = load_spec(zk_cluster)
    assert spec.kraft_mode and (zk_cluster.parent / "clusterctl.zookeeper.yaml").is_file()
    status = _json(zk_cluster, "status")
    voters = sorted(m["node_id"] for m in status["controllers"] if m["role"] != "observer")
    assert status["zookeeper"] == [] and voters == [101, 102, 103]
    assert status["migration"]["finished"] is True and status["migration"]["phase"] == 5
    left = subprocess.run(["docker", "ps", "-aq", "--filter", f"name=^{spec.name}-zk"], capture_output=True, text=True)
    assert left.returncode == 0 and left.stdout.strip() == ""  # the ZooKeeper containers are gone
    values = _values(zk_cluster, RECORDS + MID)  # every record written in ZooKeeper mode and while interrupted
    assert sorted(values) == sorted([str(i) for i in range(RECORDS)] + [f"mid-{i}" for i in range(MID)])
