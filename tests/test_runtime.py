"""`clusterctl up/status/logs/down` through the real CLI on a 3 ZK + tansu cluster in Docker.

Test-only spec: a free subnet and free host ports.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
import yaml
from _runtime_helpers import cli, cli_json, leftovers, release, render, write_spec

from clusterctl.images import build as images
from clusterctl.spec.model import load_spec

pytestmark = pytest.mark.docker
os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")


@pytest.fixture(scope="module", autouse=True)
def offline_images() -> None:
    images.build_images(["zookeeper", "tansu"])


@pytest.fixture
def spec_path(tmp_path: Path) -> Iterator[Path]:
    path = write_spec(
        tmp_path,
        f"ctlrt-{uuid.uuid4().hex[:6]}",
    )
    try:
        yield path
    finally:
        release(path)


def test_up_healthy_status_logs_down(spec_path: Path) -> None:
    project = yaml.safe_load(spec_path.read_text())["name"]
    render(spec_path)

    started = time.monotonic()
    res = cli(spec_path, "up", "--timeout", "120", "--json")
    assert res.returncode == 0, res.stderr
    up = json.loads(res.stdout)
    wall = time.monotonic() - started
    print(f"clusterctl up → healthy (3 ZK + tansu): {up['seconds_to_healthy']}s ({wall:.1f}s wall)")
    assert up["zk_serving"] == 3 and up["zk_leader"] in (1, 2, 3)
    assert up["broker_reachable"] is True
    assert up["pulled"] == []  # offline: nothing is pulled

    # the data volumes carry the profile and the image user; compose adopted the ones `up` created
    zk_data = docker.from_env().volumes.get(f"{load_spec(spec_path).topology.project}_zk1-data")
    labels = zk_data.attrs["Labels"]
    assert labels["io.clusterctl.profile"] == "offline"
    assert labels["io.clusterctl.image-user"] == "zookeeper (chowns at start)"
    assert labels["com.docker.compose.project"] == load_spec(spec_path).topology.project

    # up twice is harmless and quick
    res = cli(spec_path, "up", "--json")
    assert res.returncode == 0, res.stderr

    status = cli_json(spec_path, "status")
    assert status["quorum"]["has_quorum"] is True
    assert status["broker_reachable"] is True
    roles = {s["service"]: (s["role"], s["state"]) for s in status["services"]}
    assert roles == {
        "zk1": ("zookeeper", "running"),
        "zk2": ("zookeeper", "running"),
        "zk3": ("zookeeper", "running"),
        "kafka1": ("broker", "running"),
    }
    table = cli(spec_path, "status")
    assert table.returncode == 0 and "quorum ok: 3/3" in table.stdout and "leader" in table.stdout

    logs = cli(spec_path, "logs", "zk1", "--tail", "50")
    assert logs.returncode == 0 and "myid:1" in logs.stdout
    bad = cli(spec_path, "logs", "nope")
    assert bad.returncode == 3 and len(bad.stderr.strip().splitlines()) == 1

    # the broker's stop_grace_period reaches the engine, and `down` does not override it with --timeout
    broker = docker.from_env().containers.get(load_spec(spec_path).topology.broker_container(1))
    assert broker.attrs["Config"]["StopTimeout"] == 90

    for _ in range(2):
        res = cli(spec_path, "down", "--volumes")
        assert res.returncode == 0, res.stderr
    assert leftovers(project) == {"containers": [], "networks": [], "volumes": []}
    after = cli(spec_path, "status")
    assert after.returncode == 0 and "is not running" in after.stdout


def test_failed_up_tears_down_what_it_started(spec_path: Path) -> None:
    """A wait that cannot succeed in time leaves no containers, network or volumes behind."""
    project = yaml.safe_load(spec_path.read_text())["name"]
    render(spec_path)
    res = cli(spec_path, "up", "--timeout", "0.2")
    assert res.returncode == 5, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "waiting for a healthy cluster" in lines[0] and "still missing" in lines[0], res.stderr
    assert leftovers(project) == {"containers": [], "networks": [], "volumes": []}


def test_keep_on_failure_leaves_the_cluster(spec_path: Path) -> None:
    project = yaml.safe_load(spec_path.read_text())["name"]
    render(spec_path)
    res = cli(spec_path, "up", "--timeout", "0.2", "--keep-on-failure")
    assert res.returncode == 5
    assert len(leftovers(project)["containers"]) == 4
    res = cli(spec_path, "down", "--volumes")
    assert res.returncode == 0
    assert leftovers(project) == {"containers": [], "networks": [], "volumes": []}


def test_up_refuses_missing_image_and_stale_rendering(spec_path: Path) -> None:
    project = yaml.safe_load(spec_path.read_text())["name"]
    original = spec_path.read_text()

    # an image that was never built: refused before anything starts
    data = yaml.safe_load(original)
    data["images"] = {"zookeeper": "clusterctl/zookeeper:0.0-missing"}
    spec_path.write_text(yaml.safe_dump(data))
    render(spec_path)
    res = cli(spec_path, "up")
    assert res.returncode == 3, res.stderr
    assert "clusterctl/zookeeper:0.0-missing" in res.stderr and "clusterctl images build" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert leftovers(project) == {"containers": [], "networks": [], "volumes": []}

    # the spec changed after rendering: refused, suggests render
    spec_path.write_text(original)
    res = cli(spec_path, "up")
    assert res.returncode != 0 and "stale" in res.stderr and "clusterctl render" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
    assert leftovers(project)["containers"] == []

    # no rendering at all
    (spec_path.parent / "compose" / project / "docker-compose.yml").unlink()
    res = cli(spec_path, "up")
    assert res.returncode == 3 and "clusterctl render" in res.stderr
