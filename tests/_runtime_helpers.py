"""Helpers for tests that drive a real cluster through the real CLI (spec → render → compose)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from clusterctl.runtime import docker as dk

REPO = Path(__file__).resolve().parent.parent
CLI = str(Path(sys.executable).parent / "clusterctl")  # the console script of the running environment


def write_spec(
    directory: Path,
    name: str,
    subnet: str,
    zk_port: int,
    broker_port: int,
    engine: str = "tansu",
    brokers: int = 1,
    zk_nodes: int = 3,
    tick_time_ms: int | None = 500,
) -> Path:
    """A test-only spec (its own name, subnet and host ports) in `directory`; `tick_time_ms=None` leaves the
    ZooKeeper tick, and with it the session timeouts, at their own defaults (as a production cluster has)."""
    rf = 1 if engine == "tansu" else min(3, brokers)
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


@contextmanager
def running_cluster(
    directory: Path,
    name: str,
    subnet: str,
    zk_port: int,
    broker_port: int,
    *,
    extra: dict[str, Any] | None = None,
    heal: bool = False,
    up_timeout: int = 120,
) -> Iterator[Path]:
    """A ZooKeeper + tansu cluster from `write_spec` (plus `extra` top-level sections) up for the block; then
    (`heal`: faults healed, then) `down --volumes`, also when the block fails."""
    spec_path = write_spec(directory, name, subnet, zk_port=zk_port, broker_port=broker_port)
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
        cli(spec_path, "down", "--volumes")


def cli(spec_path: Path, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """Run the real `clusterctl -s SPEC ARGS...` from the spec's directory.

    A command given `--timeout N` gets N plus room for its own teardown, so its own error is what a test sees.
    """
    if "--timeout" in args:
        given = _number(args[args.index("--timeout") + 1 :])
        if given is not None and math.isfinite(given):
            timeout = max(timeout, given + 240)
    return subprocess.run(
        [CLI, "-s", str(spec_path), *args], capture_output=True, text=True, cwd=spec_path.parent, timeout=timeout
    )


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
