"""A real 3-node ZooKeeper ensemble from the offline image: Mode, quorum loss and recovery, clean teardown.

The compose file is rendered from a test-only spec (a free subnet and free host ports) and
started with testcontainers' DockerCompose; inspection goes through the real `clusterctl` CLI.
"""

from __future__ import annotations

import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pytest
from _runtime_helpers import CLI, cli, cli_json, leftovers, own, release, render, wait_for, write_spec
from testcontainers.compose import DockerCompose

from clusterctl.images import build as images
from clusterctl.runtime import docker as dk
from clusterctl.spec.model import ClusterSpec, load_spec
from clusterctl.zookeeper import client as zk

pytestmark = pytest.mark.docker
os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

ZK_SERVICES = ["zk1", "zk2", "zk3"]


@dataclass
class Ensemble:
    spec_path: Path
    spec: ClusterSpec
    compose: DockerCompose
    seconds_to_quorum: float


def modes(spec_path: Path) -> dict[int, str]:
    data = cli_json(spec_path, "zk", "status")
    return {n["id"]: n["mode"] for n in data["nodes"]}


def one_leader_two_followers(spec_path: Path) -> bool:
    return sorted(modes(spec_path).values()) == ["follower", "follower", "leader"]


@pytest.fixture(scope="module")
def ensemble(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Ensemble]:
    images.build_images(["zookeeper"])
    work = tmp_path_factory.mktemp("zk-ensemble")
    name = f"ctlzk-{uuid.uuid4().hex[:6]}"
    spec_path = write_spec(work, name)
    compose_file = render(spec_path)
    own(spec_path)  # started by compose here, not by `up`
    compose = DockerCompose(
        context=str(compose_file.parent), compose_file_name=compose_file.name, services=ZK_SERVICES, wait=False
    )
    started = time.monotonic()
    try:
        compose.start()  # inside the try: a failed start must not leave its network behind
        wait_for(lambda: one_leader_two_followers(spec_path), 90, "1 leader + 2 followers")
        yield Ensemble(spec_path, load_spec(spec_path), compose, round(time.monotonic() - started, 1))
    finally:
        compose.stop(down=True)
        release(spec_path)


def test_status_shows_one_leader_two_followers(ensemble: Ensemble) -> None:
    print(f"3-node ensemble: quorum with one leader {ensemble.seconds_to_quorum}s after compose up")
    data = cli_json(ensemble.spec_path, "zk", "status")
    assert data["quorum"]["has_quorum"] is True
    assert len(data["quorum"]["leaders"]) == 1
    assert all(n["ok"] and n["version"] == "3.8.0" for n in data["nodes"])
    status = cli_json(ensemble.spec_path, "status")
    zk_rows = [s for s in status["services"] if s["role"] == "zookeeper"]
    assert [s["state"] for s in zk_rows] == ["running"] * 3
    assert sorted(s["zk_mode"] for s in zk_rows) == ["follower", "follower", "leader"]
    assert [s["ip"] for s in zk_rows] == [ensemble.spec.topology.zk_ip(i) for i in (1, 2, 3)]
    assert [s["host_port"] for s in zk_rows] == [ensemble.spec.topology.zk_host_port(i) for i in (1, 2, 3)]
    table = cli(ensemble.spec_path, "zk", "status")
    assert table.returncode == 0 and "quorum ok: 3/3 nodes serving" in table.stdout


def test_quorum_loss_and_recovery(ensemble: Ensemble) -> None:
    spec, spec_path = ensemble.spec, ensemble.spec_path
    path = f"/clusterctl-test/{uuid.uuid4().hex[:6]}"
    leader = next(i for i, m in modes(spec_path).items() if m == "leader")
    followers = [i for i in spec.topology.zk_ids if i != leader]

    # one follower down: 2/3 still a quorum, writes work
    _stop(spec, followers[0])
    wait_for(lambda: modes(spec_path)[followers[0]] == "down", 30, f"zk{followers[0]} down")
    with zk.zk_client(spec.topology.zk_connect, timeout=10) as client:
        client.create(path, b'{"written":"with 2/3"}', makepath=True)
        assert zk.get(client, path).data == {"written": "with 2/3"}
    assert zk.quorum(spec).has_quorum

    # the leader down too: 1/3 left, quorum lost and status says so
    _stop(spec, leader)
    wait_for(lambda: not zk.quorum(spec).has_quorum, 30, "quorum lost")
    res = cli(spec_path, "status")
    assert res.returncode == 0, res.stderr
    assert "quorum lost: " in res.stdout and "/3 nodes serving" in res.stdout
    data = cli_json(spec_path, "status")
    assert data["quorum"]["has_quorum"] is False
    survivor = followers[1]
    assert data["zookeeper"][survivor - 1]["mode"] in ("not serving", "down")
    assert data["brokers_registered"] is None

    # both back: the ensemble re-forms and the znode written with 2/3 survived
    _start(spec, followers[0], leader)
    wait_for(lambda: one_leader_two_followers(spec_path), 90, "ensemble re-formed")
    with zk.zk_client(spec.topology.zk_connect, timeout=10) as client:
        assert zk.get(client, path).data == {"written": "with 2/3"}
    tree = cli_json(spec_path, "zk", "tree", "/clusterctl-test")
    assert any(e["path"] == path for e in tree)


def test_zk_get_missing_znode_is_one_line(ensemble: Ensemble) -> None:
    res = cli(ensemble.spec_path, "zk", "get", "/no/such/znode")
    assert res.returncode == 3
    assert res.stderr.strip().splitlines() == ["error: znode /no/such/znode does not exist"]


def test_piped_status_tables_keep_every_value(ensemble: Ensemble) -> None:
    """`status` and `zk status` into a pipe (80 columns, as in a CI log): every value whole, no `…`."""
    env = {**os.environ, "COLUMNS": "80"}
    spec_path = ensemble.spec_path
    for args in (["status"], ["zk", "status"]):
        cmd = [CLI, "-s", str(spec_path), *args]
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=spec_path.parent, timeout=60)
        assert res.returncode == 0, res.stderr
        assert "…" not in res.stdout, res.stdout
        cells = {c.strip() for line in res.stdout.splitlines() for c in line.replace("┃", "│").split("│")}
        data = cli_json(spec_path, *args)
        rows = data["services"] if args == ["status"] else data["nodes"]
        keys = ("service", "state", "ip", "zk_mode") if args == ["status"] else ("container", "address", "mode", "zxid")
        for row in rows:
            for key in keys:
                if row[key] is not None:
                    assert str(row[key]) in cells, f"{key}={row[key]!r} not a whole cell of:\n{res.stdout}"


def test_zk_get_times_are_iso_8601(ensemble: Ensemble) -> None:
    """mtime is ISO-8601 for people (UTC, or the local zone with --local-time); --json keeps the epoch."""
    with zk.zk_client(ensemble.spec.topology.zk_connect, timeout=10) as client:
        client.ensure_path("/clusterctl-test/times")
    doc = cli_json(ensemble.spec_path, "zk", "get", "/clusterctl-test/times")
    assert isinstance(doc["mtime"], float) and doc["mtime"] > 1.7e9
    utc = datetime.fromtimestamp(doc["mtime"], tz=timezone.utc)
    res = cli(ensemble.spec_path, "zk", "get", "/clusterctl-test/times")
    mtime = next(line.split()[-1] for line in res.stdout.splitlines() if line.startswith("mtime"))
    assert mtime == utc.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    res = subprocess.run(
        [CLI, "-s", str(ensemble.spec_path), "--local-time", "zk", "get", "/clusterctl-test/times"],
        capture_output=True, text=True, env={**os.environ, "TZ": "Asia/Tokyo"}, timeout=60,
    )  # fmt: skip
    mtime = next(line.split()[-1] for line in res.stdout.splitlines() if line.startswith("mtime"))
    assert mtime.endswith("+09:00") and datetime.fromisoformat(mtime) == utc


def test_down_leaves_nothing(ensemble: Ensemble) -> None:
    """Runs last in this module: `down` then `down --volumes` clean up everything, twice is harmless."""
    project = ensemble.spec.topology.project
    assert leftovers(project)["containers"], "ensemble should be running before down"
    res = cli(ensemble.spec_path, "down")
    assert res.returncode == 0, res.stderr
    left = leftovers(project)
    assert left["containers"] == [] and left["networks"] == []
    assert len(left["volumes"]) == 6, left  # data + datalog per node are kept without --volumes
    for _ in range(2):
        res = cli(ensemble.spec_path, "down", "--volumes")
        assert res.returncode == 0, res.stderr
    assert leftovers(project) == {"containers": [], "networks": [], "volumes": []}


def _stop(spec: ClusterSpec, *ids: int) -> None:
    for i in ids:
        dk.get_container(spec.topology.zk_container(i)).stop(timeout=10)


def _start(spec: ClusterSpec, *ids: int) -> None:
    for i in ids:
        dk.get_container(spec.topology.zk_container(i)).start()
