"""What a test run owns (clusterctl.testing.ownership) is gone after it: at its end, when a start fails, when
pytest gets SIGTERM mid-`up`, and at the next run's start when an earlier run died. Cheap clusters only
(one ZooKeeper node + tansu, or bare labelled volumes and networks); a free subnet and free host ports.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from _runtime_helpers import REPO, free_addresses, leftovers, own, render, running_cluster, wait_for

from clusterctl.errors import ClusterctlError
from clusterctl.runtime import allocate
from clusterctl.runtime import docker as dk
from clusterctl.testing import ownership

TAKEN = r"already allocated|address already in use"
EMPTY: dict[str, list[str]] = {"containers": [], "networks": [], "volumes": []}


def _dead_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _dead_run(root: Path, *projects: str, pids: tuple[int, ...] = ()) -> ownership.Run:
    """A run directory as a pytest killed with SIGKILL leaves it: its owner gone, its claims written."""
    run = ownership.Run(f"run-{uuid.uuid4().hex[:12]}", root)
    run.dir.mkdir(parents=True)
    (run.dir / "owner").write_text(f"{_dead_pid()} 1\n")
    for p in projects:
        run.claim_project(p)
    for pid in pids:
        run.claim_pid(pid)
    return run


def _plant(project: str) -> None:
    """A volume and a network labelled as compose labels them, as an interrupted `up` leaves them."""
    labels = {ownership.PROJECT_LABEL: project}
    dk.client().volumes.create(name=f"{project}_zk1-data", labels=labels)
    dk.client().networks.create(f"{project}-net", labels=labels)


def test_a_live_runs_claims_are_not_swept(tmp_path: Path) -> None:
    run = ownership.Run.begin(tmp_path)
    run.claim_project("ctlown-live")
    assert run.owner_alive()
    assert ownership.sweep(tmp_path) == {} and run.dir.is_dir()
    reused = _dead_run(tmp_path)
    (reused.dir / "owner").write_text(f"{os.getpid()} 1\n")  # our pid, another start time: a reused pid
    assert not reused.owner_alive()


@pytest.mark.docker
def test_the_sweep_removes_what_a_dead_run_left(tmp_path: Path) -> None:
    project = f"ctlown-{uuid.uuid4().hex[:6]}"
    _plant(project)
    orphan = subprocess.Popen(["sleep", "300"], start_new_session=True)  # a `docker compose up` left running
    try:
        run = _dead_run(tmp_path, project, pids=(orphan.pid,))
        swept = ownership.sweep(tmp_path)
        assert sorted(swept[run.id]) == sorted(
            [f"pid {orphan.pid}", f"volume {project}_zk1-data", f"network {project}-net"]
        )
        assert orphan.wait(timeout=10) == -signal.SIGKILL
        assert leftovers(project) == EMPTY and not run.dir.exists()
    finally:
        orphan.kill()
        ownership.remove_project(project)


@pytest.mark.docker
def test_a_leftover_is_removed_or_refused_before_a_start_never_reused(tmp_path: Path) -> None:
    project = f"ctlown-{uuid.uuid4().hex[:6]}"
    _plant(project)
    try:
        run = ownership.Run.begin(tmp_path)
        with pytest.raises(ClusterctlError) as refused:  # nobody's: maybe a user's cluster of that name
            run.ensure_fresh(project)
        assert refused.value.message == (
            f"compose project {project} already exists (networks {project}-net; volumes {project}_zk1-data), "
            "owned by no test run; not reused"
        )
        assert leftovers(project) != EMPTY
        _dead_run(tmp_path, project)  # an earlier run's: removed, then ours
        run.ensure_fresh(project)
        assert leftovers(project) == EMPTY and project in run.claims().projects
    finally:
        ownership.remove_project(project)


@contextlib.contextmanager
def _port_taken() -> Iterator[int]:
    """A host port Docker has published for another container (the clash of the issue: "Bind for
    127.0.0.1:PORT failed: port is already allocated"); the container is removed after the block."""
    blocker = f"ctlown-blocker-{uuid.uuid4().hex[:6]}"
    port = allocate.free_port_block(1)
    try:
        box = dk.client().containers.run(
            "clusterctl/zookeeper:3.8.0", ["600"], detach=True, name=blocker, entrypoint=["sleep"],
            ports={"2181/tcp": ("127.0.0.1", port)}, labels={ownership.PROJECT_LABEL: blocker},
        )  # fmt: skip
        box.reload()
        assert box.status == "running" and box.ports, (box.status, box.ports)
        yield port
    finally:
        ownership.remove_project(blocker)


@pytest.mark.docker
def test_a_cluster_that_fails_at_start_leaves_nothing(tmp_path: Path) -> None:
    """The planted failure: the broker's host port is taken, so `up` fails after the network, the volumes and
    the ZooKeeper container exist."""
    from clusterctl.images import build as images

    images.build_images(["zookeeper", "tansu"])
    project = f"ctlown-{uuid.uuid4().hex[:6]}"
    with _port_taken() as port:
        failing = running_cluster(tmp_path, project, broker_port=port, zk_nodes=1)
        with pytest.raises(AssertionError, match=TAKEN), failing:
            pytest.fail("the cluster started on a taken port")
        assert leftovers(project) == EMPTY


@pytest.mark.docker
@pytest.mark.real_kafka
def test_a_profile_proof_that_fails_at_start_leaves_nothing(tmp_path: Path) -> None:
    """The harness that left its volumes behind (reused by the next run: "Invalid cluster.id in meta.properties"):
    a proof whose broker 1 port is taken fails at `docker compose up` and removes what it made."""
    from _profile_proof import boot
    from conftest import kafka_dist

    from clusterctl.images import build as images
    from clusterctl.spec import kafkadist

    images.build_images(["zookeeper", "kafka"], kafka_dist=kafka_dist())
    project = f"proof-ctlown-{uuid.uuid4().hex[:6]}"
    with _port_taken() as port:
        subnet, base = free_addresses(1)
        data = {"name": project, "profile": "default", "network": {"subnet": subnet},
                "zookeeper": {"nodes": 1, "client_port": base},
                "kafka": {"brokers": 1, "host_port": port,
                          "defaults": {"heap": "256m", "replication_factor": 1, "min_insync_replicas": 1}},
                "kafka_manager": {"enabled": False}}  # fmt: skip
        spec_path = tmp_path / "clusterctl.yaml"
        spec_path.write_text(yaml.safe_dump(data, sort_keys=False))
        compose_file = render(spec_path)
        own(spec_path)
        with pytest.raises(AssertionError, match=TAKEN):
            boot(compose_file, kafkadist.offline_image(kafkadist.dist_version(kafka_dist())), None)
        assert leftovers(project) == EMPTY


INNER_TEST = """
import time
import uuid
from pathlib import Path

from _runtime_helpers import running_cluster


def test_sleeps_in_a_cluster(tmp_path: Path) -> None:
    with running_cluster(tmp_path, "{project}", zk_nodes=1):
        Path("{ready}").touch()
        time.sleep(600)
"""
INNER_CONFTEST = """
import importlib.util
import sys

sys.path.insert(0, "{tests}")
_spec = importlib.util.spec_from_file_location("suite_conftest", "{tests}/conftest.py")
_suite = sys.modules["suite_conftest"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_suite)
pytest_configure = _suite.pytest_configure
pytest_unconfigure = _suite.pytest_unconfigure
"""


def _processes_naming(text: str) -> list[str]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if text in cmd and str(os.getpid()) != d.name:
                out.append(f"{d.name}: {cmd[:120]}")
    return out


@pytest.mark.docker
@pytest.mark.parametrize("moment", ["during up", "after up"])
def test_sigterm_to_pytest_leaves_nothing_within_60s(moment: str, tmp_path: Path) -> None:
    from clusterctl.images import build as images

    images.build_images(["zookeeper", "tansu"])
    project = f"ctlown-{uuid.uuid4().hex[:6]}"
    inner = tmp_path / "inner"
    inner.mkdir()
    (inner / "conftest.py").write_text(textwrap.dedent(INNER_CONFTEST.format(tests=REPO / "tests")))
    (inner / "test_inner.py").write_text(textwrap.dedent(INNER_TEST.format(project=project, ready=tmp_path / "ready")))
    env = {k: v for k, v in os.environ.items() if k != ownership.RUN_ENV} | {
        ownership.STATE_ENV: str(tmp_path / "state"), "PYTHONPATH": f"{REPO}:{REPO / 'tests'}"}  # fmt: skip
    pytest_run = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-s", "--rootdir", str(inner),
         "--basetemp", str(tmp_path / "base"), str(inner / "test_inner.py")],
        cwd=inner, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        if moment == "during up":
            wait_for(lambda: leftovers(project)["containers"], 120, f"containers of {project}", interval=0.2)
        else:
            wait_for((tmp_path / "ready").exists, 180, f"{project} up", interval=0.5)
        pytest_run.send_signal(signal.SIGTERM)
        t0 = time.monotonic()
        out, _ = pytest_run.communicate(timeout=90)
        assert pytest_run.returncode == 2, out[-3000:]  # pytest's "interrupted"
        wait_for(lambda: leftovers(project) == EMPTY, max(1, 60 - (time.monotonic() - t0)), f"{project} gone")
        took = round(time.monotonic() - t0, 1)
        assert _processes_naming(str(tmp_path)) == [] and _processes_naming(project) == []
        assert not any((tmp_path / "state").glob("run-*")), "the interrupted run's own claims were not removed"
        print(f"\nSIGTERM {moment}: pytest exited {pytest_run.returncode}, nothing of {project} left after {took}s")
    finally:
        if pytest_run.poll() is None:
            pytest_run.kill()
        ownership.remove_project(project)
