"""deploy.target swarm: the swarm's nodes and racks, `docker stack deploy`, task states, `docker stack rm`.

The manager is `deploy.endpoint` (else DOCKER_HOST or the local engine). A rack is the one swarm node labelled
`clusterctl.rack=<name>`; its `endpoint` (when the spec names one) is how per-host work reaches it: volumes
live on the host a task ran on, so `down --volumes` removes them there.
"""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterctl.errors import ClusterctlError, SpecError, UnreachableError
from clusterctl.runtime.docker import ContainerState, cluster_services
from clusterctl.spec.deploy import RACK_LABEL
from clusterctl.spec.model import ClusterSpec
from clusterctl.wait import wait_until

STACK_LABEL = "com.docker.stack.namespace"


@dataclass
class SwarmNode:
    id: str
    hostname: str
    address: str
    state: str  # ready | down | unknown
    availability: str  # active | pause | drain
    role: str  # manager | worker
    rack: str | None


def _manager(spec: ClusterSpec) -> str | None:
    return spec.deploy.endpoint or os.environ.get("DOCKER_HOST") or None


def _env(spec: ClusterSpec, endpoint: str | None, extra: dict[str, str] | None = None) -> dict[str, str]:
    env = dict(extra if extra is not None else os.environ)
    env.pop("DOCKER_CONTEXT", None)
    if endpoint:
        env["DOCKER_HOST"] = endpoint
    return env


def docker(spec: ClusterSpec, *args: str, endpoint: str | None = None, env: dict[str, str] | None = None,
           timeout: float = 120, check: bool = True) -> str:  # fmt: skip
    """The docker CLI against the manager (or `endpoint`); a failure is one line."""
    where = endpoint or _manager(spec) or "the local engine"
    try:
        proc = subprocess.run(
            ["docker", *args], capture_output=True, text=True, errors="replace", timeout=timeout,
            env=_env(spec, endpoint or _manager(spec), env),
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        raise ClusterctlError(f"`docker {args[0]} {args[1]}` on {where} did not finish within {timeout:.0f}s") from None
    if check and proc.returncode != 0:
        lines = [ln.strip() for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()] or ["(no output)"]
        if any("Cannot connect to the Docker daemon" in ln or "connection refused" in ln for ln in lines):
            raise UnreachableError(f"the Docker engine at {where} does not answer")
        raise ClusterctlError(f"docker {args[0]} {args[1]} on {where} failed: {lines[-1][:300]}")
    return proc.stdout


def nodes(spec: ClusterSpec) -> list[SwarmNode]:
    ids = docker(spec, "node", "ls", "-q").split()
    out = []
    for n in json.loads(docker(spec, "node", "inspect", *ids)) if ids else []:
        labels = (n.get("Spec") or {}).get("Labels") or {}
        out.append(
            SwarmNode(
                id=n["ID"], hostname=n["Description"]["Hostname"], address=n["Status"].get("Addr", ""),
                state=n["Status"]["State"], availability=n["Spec"].get("Availability", ""),
                role=n["Spec"].get("Role", ""), rack=labels.get(RACK_LABEL),
            )
        )  # fmt: skip
    return out


def require_manager(spec: ClusterSpec, nothing: str = "nothing was deployed") -> str:
    """The engine is a swarm manager (else one line, exit 2, ending with `nothing`); its own node id."""
    where = _manager(spec) or "the local engine"
    info = json.loads(docker(spec, "info", "--format", "{{json .Swarm}}") or "{}")
    if info.get("LocalNodeState") != "active":
        raise SpecError(
            f"deploy.target=swarm, but the engine at {where} is not in a swarm "
            f"(state {info.get('LocalNodeState') or 'unknown'}); {nothing}",
            hint="`docker swarm init` there, or point deploy.endpoint at a swarm manager",
        )
    if not info.get("ControlAvailable"):
        raise SpecError(f"the engine at {where} is a swarm worker; deploy.endpoint must name a manager; {nothing}")
    return str(info.get("NodeID", ""))


def check_swarm(spec: ClusterSpec) -> list[SwarmNode]:
    """The engine is a swarm manager and every rack of the spec is one ready, active node (else one line, exit 2)."""
    require_manager(spec)
    found = nodes(spec)
    for rack in spec.deploy.racks:
        on = [n for n in found if n.rack == rack.name]
        if not on:
            unlabelled = [n.hostname or n.id[:12] for n in found if n.rack is None]
            rest = f" (unlabelled nodes: {', '.join(unlabelled)})" if unlabelled else ""
            raise SpecError(
                f"rack {rack.name}: no swarm node is labelled {RACK_LABEL}={rack.name}{rest}; nothing was deployed",
                hint=f"docker node update --label-add {RACK_LABEL}={rack.name} NODE",
            )
        if len(on) > 1:
            raise SpecError(f"rack {rack.name}: {len(on)} nodes are labelled {RACK_LABEL}={rack.name}; a rack is one "
                            "host (its address is what its brokers advertise); nothing was deployed")  # fmt: skip
        node = on[0]
        if node.state != "ready" or node.availability != "active":
            raise SpecError(f"rack {rack.name}: node {node.hostname or node.id[:12]} is {node.state}/"
                            f"{node.availability}, not ready/active; nothing was deployed")  # fmt: skip
    return found


def deploy(spec: ClusterSpec, stack_file: Path) -> None:
    """`docker stack deploy` of the rendered stack (images are never resolved through a registry)."""
    from clusterctl.compose.render import stack_environment

    docker(
        spec, "stack", "deploy", "--detach=true", "--prune", "--resolve-image", "never",
        "-c", str(stack_file), spec.name, env=stack_environment(stack_file.parent), timeout=300,
    )  # fmt: skip


def _tasks(spec: ClusterSpec) -> list[dict[str, Any]]:
    ids = docker(spec, "stack", "ps", "-q", "--no-trunc", spec.name, check=False).split()
    if not ids:
        return []
    # the swarm prunes old tasks of a restarting service at any time: inspect prints those it still has
    out = docker(spec, "inspect", "--type", "task", *ids, check=False).strip()
    return list(json.loads(out)) if out.startswith("[") else []


def _current(tasks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """ServiceName -> its newest task (one the swarm wants running first, then the latest update)."""
    best: dict[str, tuple[tuple[bool, str], dict[str, Any]]] = {}
    for t in tasks:
        key = (t.get("DesiredState") == "running", str(t.get("UpdatedAt", "")))
        name = str(t.get("ServiceName", ""))
        if name not in best or key > best[name][0]:
            best[name] = (key, t)
    return {name: t for name, (_, t) in best.items()}


@dataclass
class TaskState(ContainerState):
    node: str | None = None  # the swarm node's hostname (or id) the task is on
    rack: str | None = None
    error: str | None = None
    desired: str | None = None
    extra: dict[str, str] = field(default_factory=dict)


def task_states(spec: ClusterSpec) -> list[TaskState]:
    """Every service of the stack: its current task's state, node and rack ('missing' when it has no task)."""
    services = {s["Spec"]["Name"]: s for s in _stack_services(spec)}
    by_id = {n.id: n for n in nodes(spec)}
    tasks = _tasks(spec)
    svc_names = {s["ID"]: name for name, s in services.items()}
    for t in tasks:
        t["ServiceName"] = svc_names.get(t.get("ServiceID", ""), "")
    current = _current(tasks)
    out = []
    for service, role, port in cluster_services(spec):
        full = f"{spec.name}_{service}"
        task = current.get(full)
        if task is None:
            out.append(TaskState(service, full, role, "missing", None, None, None))
            continue
        t = task
        status = t.get("Status") or {}
        node = by_id.get(t.get("NodeID", ""))
        running = status.get("State") == "running"
        nets = t.get("NetworksAttachments") or []
        ip = next((a.split("/")[0] for n in nets for a in n.get("Addresses") or []), None)
        out.append(
            TaskState(
                service=service, container=f"{full}.{t.get('Slot', 1)}", role=role, state=str(status.get("State")),
                health=None, ip=ip, host_port=port if running else None,
                exit_code=(status.get("ContainerStatus") or {}).get("ExitCode") if not running else None,
                node=(node.hostname or node.id[:12]) if node else None, rack=node.rack if node else None,
                error=status.get("Err"), desired=t.get("DesiredState"),
            )
        )  # fmt: skip
    return out


def _stack_services(spec: ClusterSpec) -> list[dict[str, Any]]:
    ids = docker(spec, "service", "ls", "-q", "--filter", f"label={STACK_LABEL}={spec.name}").split()
    return list(json.loads(docker(spec, "service", "inspect", *ids))) if ids else []


def _endpoints(spec: ClusterSpec) -> list[str | None]:
    """Every host's Docker endpoint the spec knows (the manager's included), once each."""
    eps: list[str | None] = [_manager(spec)]
    eps += [r.endpoint for r in spec.deploy.racks if r.endpoint]
    return list(dict.fromkeys(eps))


def _on_hosts(spec: ClusterSpec, kind: str) -> list[str]:
    """Containers or volumes of the stack on every known host."""
    out: list[str] = []
    for ep in _endpoints(spec):
        if kind == "container":
            args = ["ps", "-a", "--format", "{{.Names}}", "--filter", f"label={STACK_LABEL}={spec.name}"]
        else:
            args = ["volume", "ls", "-q", "--filter", f"label={STACK_LABEL}={spec.name}"]
        out += docker(spec, *args, endpoint=ep).split()
    return sorted(out)


def leftovers(spec: ClusterSpec) -> dict[str, list[str]]:
    """What of the stack still exists: services and networks (the swarm), containers and volumes (each host)."""
    nets = docker(spec, "network", "ls", "--format", "{{.Name}}", "--filter", f"label={STACK_LABEL}={spec.name}")
    found = {
        "services": sorted(s["Spec"]["Name"] for s in _stack_services(spec)),
        "networks": sorted(nets.split()),
        "containers": _on_hosts(spec, "container"),
        "volumes": _on_hosts(spec, "volume"),
    }
    return {k: v for k, v in found.items() if v}


@dataclass
class StackDownResult:
    stack: str
    services_removed: list[str]
    networks_removed: list[str]
    volumes_removed: list[str]
    volumes_kept: list[str]


def remove(spec: ClusterSpec, volumes: bool = False, timeout: float = 180) -> StackDownResult:
    """`docker stack rm`, then wait until no container or network of it is left (harmless when none is);
    with `volumes`, remove its volumes on every host the spec names an endpoint for."""
    before = leftovers(spec)
    if before.get("services") or before.get("networks"):
        docker(spec, "stack", "rm", spec.name)
    wait_until(
        lambda: {k: v for k, v in leftovers(spec).items() if k != "volumes"},
        timeout=timeout, what=f"stack {spec.name} removed", done=lambda left: not left,
        seen=lambda left: f"still there: {left}",
    )  # fmt: skip
    removed: list[str] = []
    if volumes:
        for ep in _endpoints(spec):
            names = docker(spec, "volume", "ls", "-q", "--filter", f"label={STACK_LABEL}={spec.name}", endpoint=ep)
            if names.split():
                docker(spec, "volume", "rm", *names.split(), endpoint=ep)
                removed += names.split()
    return StackDownResult(
        spec.name, before.get("services", []), before.get("networks", []), sorted(removed),
        _on_hosts(spec, "volume"),
    )  # fmt: skip


def missing_images(spec: ClusterSpec, images: list[str]) -> dict[str, list[str]]:
    """Host endpoint -> those of `images` it lacks, for the manager and every rack with an endpoint. Nothing
    can be pulled offline, and the swarm would leave such a task pending with `No such image`."""
    out: dict[str, list[str]] = {}
    for ep in _endpoints(spec):
        have = set(docker(spec, "image", "ls", "--format", "{{.Repository}}:{{.Tag}}", endpoint=ep).split())
        lacking = [i for i in images if i not in have]
        if lacking:
            out[ep or "the local engine"] = lacking
    return out


def passthrough(spec: ClusterSpec, *args: str) -> int:
    """A docker CLI command against the manager, attached to this terminal (service logs -f); its exit code."""
    try:
        return subprocess.call(["docker", *args], env=_env(spec, _manager(spec)))
    except KeyboardInterrupt:
        return 0
