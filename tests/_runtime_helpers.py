"""Helpers for tests that drive a real cluster through the real CLI (spec → render → compose)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from clusterctl.runtime import allocate
from clusterctl.runtime import docker as dk
from clusterctl.testing import cleanup, ownership

REPO = Path(__file__).resolve().parent.parent
CLI = str(Path(sys.executable).parent / "clusterctl")  # the console script of the running environment


def free_addresses(ports: int) -> tuple[str, int]:
    """A free private subnet (/24) and the first of `ports` consecutive free host ports, from the allocator the
    plugin uses (runtime/allocate.py: 10.200.0.0-10.255.255.255, ports 30000-32700), so a test cluster runs
    beside any other cluster on the machine; a pick another session makes at the same moment shows as a clash."""
    return allocate.free_subnet(), allocate.free_port_block(ports)


def write_spec(
    directory: Path,
    name: str,
    subnet: str | None = None,
    zk_port: int | None = None,
    broker_port: int | None = None,
    engine: str = "tansu",
    brokers: int = 1,
    zk_nodes: int = 3,
    tick_time_ms: int | None = 500,
) -> Path:
    """A test-only spec (its own name, subnet and host ports, free ones where not given) in `directory`;
    `tick_time_ms=None` leaves the ZooKeeper tick, and with it the session timeouts, at their own defaults (as a
    production cluster has)."""
    rf = 1 if engine == "tansu" else min(3, brokers)
    if subnet is None:
        subnet = allocate.free_subnet()
    if zk_port is None or broker_port is None:
        base = allocate.free_port_block(zk_nodes + brokers)
        zk_port = base if zk_port is None else zk_port
        broker_port = base + zk_nodes if broker_port is None else broker_port
    spec: dict[str, Any] = {
        "name": name,
        "profile": "offline",
        "network": {"subnet": subnet},
        "zookeeper": {"nodes": zk_nodes, "client_port": zk_port}
        | ({} if tick_time_ms is None else {"tick_time_ms": tick_time_ms}),
        "kafka": {
            "engine": engine,
            "brokers": brokers,
            "host_port": broker_port,
            "jmx_port": None if engine == "tansu" else 9999,
            "defaults": {"replication_factor": rf, "min_insync_replicas": max(1, rf - 1), "heap": "384m"},
        },
        "kafka_manager": {"enabled": False},
    }
    path = directory / "clusterctl.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


def write_kraft_spec(directory: Path, name: str, version: str, **kraft: Any) -> Path:
    """A test-only KRaft spec beside `write_spec`: 3 controllers (with `kraft` settings) + 3 brokers of
    clusterctl/kafka:<version>, RF 3 and min.insync 2, on a free subnet and free host ports."""
    spec: dict[str, Any] = {
        "name": name,
        "profile": "offline",
        "network": {"subnet": allocate.free_subnet()},
        "kafka": {
            "mode": "kraft",
            "version": version,
            "brokers": 3,
            "host_port": allocate.free_port_block(3),
            "defaults": {"replication_factor": 3, "min_insync_replicas": 2, "heap": "384m"},
        },
        "kraft": {"controllers": 3, **kraft},
        "kafka_manager": {"enabled": False},
    }
    path = directory / "clusterctl.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return path


@contextmanager
def running_cluster(
    directory: Path,
    name: str,
    subnet: str | None = None,
    zk_port: int | None = None,
    broker_port: int | None = None,
    *,
    extra: dict[str, Any] | None = None,
    zk_nodes: int = 3,
    heal: bool = False,
    up_timeout: int = 120,
) -> Iterator[Path]:
    """A ZooKeeper + tansu cluster from `write_spec` (plus `extra` top-level sections) up for the block; then
    (`heal`: faults healed, then) `release`d, also when the block or the start fails."""
    spec_path = write_spec(directory, name, subnet, zk_port=zk_port, broker_port=broker_port, zk_nodes=zk_nodes)
    if extra:
        spec_path.write_text(yaml.safe_dump({**yaml.safe_load(spec_path.read_text()), **extra}, sort_keys=False))
    render(spec_path)
    try:
        res = cli(spec_path, "up", "--timeout", str(up_timeout))
        assert res.returncode == 0, res.stderr
        yield spec_path
    finally:
        if heal:
            cli(spec_path, "chaos", "heal", "--no-wait")
        release(spec_path)


def release(spec_path: Path) -> list[str]:
    """`down --volumes`, then whatever of the spec's compose project is still in the engine (a volume a
    migration took out of the spec, say) removed by its label; returns what that second step found."""
    cli(spec_path, "down", "--volumes")
    name = yaml.safe_load(spec_path.read_text())["name"]
    with cleanup.signals_held():
        return ownership.remove_project(name)


def cli(spec_path: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run the real `clusterctl -s SPEC ARGS...` from the spec's directory, the spec's project owned by the run.

    A command given `--timeout N` gets N plus room for its own teardown, so its own error is what a test sees.
    """
    if "--timeout" in args:
        given = _number(args[args.index("--timeout") + 1 :])
        if given is not None and math.isfinite(given):
            timeout = max(timeout, given + 240)
    if args and args[0] in CREATES:
        own(spec_path)
    return run_group([CLI, "-s", str(spec_path), *args], timeout=timeout, cwd=spec_path.parent)


# the commands that can create containers, networks or volumes (the others only read or remove)
CREATES = frozenset({"up", "scenario", "migrate", "upgrade", "swarm", "spark", "chaos"})


def own(spec_path: Path) -> None:
    """Claim the spec's compose project for this test run before a command that can create something of it (the
    first time in this process: leftovers of an earlier run are removed, another live owner's refused, so a
    user's cluster of the same name is neither reused nor removed)."""
    try:
        name = (yaml.safe_load(spec_path.read_text()) or {}).get("name")
    except (OSError, yaml.YAMLError, AttributeError):
        return  # a test of a bad or missing spec file: nothing will be created
    if isinstance(name, str) and name:
        ownership.current().ensure_fresh(name)


def run_group(
    cmd: list[str], timeout: float, cwd: Path | None = None, stdin: str | None = None
) -> subprocess.CompletedProcess[str]:
    """`subprocess.run` in a process group of its own, claimed by the run; when the wait is interrupted (SIGTERM
    or Ctrl-C to pytest, a timeout) the group gets SIGTERM, then SIGKILL after 20 s: a CLI and the `docker
    compose` under it never outlive the test that started them."""
    proc = subprocess.Popen(
        cmd, stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, cwd=cwd, start_new_session=True,
    )  # fmt: skip
    run = ownership.current()
    claim = run.claim_pid(proc.pid)
    try:
        out, err = proc.communicate(stdin, timeout=timeout)
    except BaseException:
        stop_group(proc)
        raise
    finally:
        if claim is not None and proc.poll() is not None and not _group_alive(proc.pid):
            run.release(claim)  # a process it left running on purpose (a fault's handler) keeps the claim
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def stop_group(proc: subprocess.Popen[str], grace: float = 20) -> None:
    """SIGTERM to the process group (its own cleanup), SIGKILL when it is still there after `grace` seconds."""
    with cleanup.signals_held():
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 10)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            try:
                proc.communicate(timeout=wait)
                break
            except subprocess.TimeoutExpired:
                continue
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # what the leader left in its group


def _number(values: tuple[str, ...]) -> float | None:
    """The first value as a number, or None when there is none or it is not one."""
    try:
        return float(values[0]) if values else None
    except ValueError:
        return None


def up_json(spec_path: Path, timeout: float = 300) -> Any:
    """`up --json`; when the cluster does not get healthy, fail with up's error and every service's last log lines."""
    res = cli(spec_path, "up", "--timeout", str(timeout), "--keep-on-failure", "--json")
    if res.returncode != 0:
        logs = cli(spec_path, "logs", "--tail", "20", timeout=120)
        raise AssertionError(f"up failed: {res.stderr.strip()}\n{(logs.stdout + logs.stderr)[-8000:]}")
    return json.loads(res.stdout)


def cli_json(spec_path: Path, *args: str) -> Any:
    res = cli(spec_path, *args, "--json")
    assert res.returncode == 0, f"clusterctl {' '.join(args)} failed: {res.stderr}"
    return json.loads(res.stdout)


def render(spec_path: Path) -> Path:
    res = cli(spec_path, "render")
    assert res.returncode == 0, f"render failed: {res.stderr}"
    name = yaml.safe_load(spec_path.read_text())["name"]
    compose_file = spec_path.parent / "compose" / name / "docker-compose.yml"
    assert compose_file.is_file(), f"render wrote no {compose_file}"
    return compose_file


def leftovers(project: str) -> dict[str, list[str]]:
    """What of the compose project still exists in the engine."""
    return {
        "containers": sorted(c.name for c in dk.project_containers(project)),
        "networks": dk.project_networks(project),
        "volumes": dk.project_volumes(project),
    }


def wait_for(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.5) -> Any:
    """Poll until `predicate()` is truthy; fail naming `what` and the last value."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what} (last: {last!r})")
