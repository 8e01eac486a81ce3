"""The swarm's nodes as the racks of a spec: each node with its rack label and this stack's tasks, setting or
removing that label, a node's availability (drain, active), and the container of a service's task on the host
it runs on (through that host's Docker endpoint: the rack's `endpoint`, or the manager's for the manager's node).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

import docker
from docker.errors import DockerException, NotFound
from docker.models.containers import Container

from clusterctl.errors import ClusterctlError, NotFoundError, SpecError, UnreachableError, UsageError
from clusterctl.runtime import swarm
from clusterctl.spec.deploy import RACK_LABEL
from clusterctl.spec.model import ClusterSpec


@dataclass
class NodeRow:
    """One swarm node as `clusterctl swarm nodes` shows it."""

    hostname: str
    id: str
    address: str
    state: str  # ready | down | unknown
    availability: str  # active | pause | drain
    role: str  # manager | worker
    label: str | None  # its clusterctl.rack label
    rack: str | None  # the spec's rack that label names; None when it names none of deploy.racks
    tasks: list[str] = field(default_factory=list)  # services of this stack whose current task is on it


@dataclass
class LabelChange:
    """What `clusterctl swarm label` did to one node's clusterctl.rack label."""

    node: str
    id: str
    before: str | None
    after: str | None
    changed: bool


def require_swarm_spec(spec: ClusterSpec, nothing: str = "nothing was changed") -> str:
    """A spec with deploy.target swarm whose endpoint is a swarm manager (else one line, exit 2); its node id."""
    if not spec.swarm:
        raise SpecError(f"cluster {spec.name} has deploy.target compose: it has no swarm nodes; {nothing}")
    return swarm.require_manager(spec, nothing)


def current_tasks(spec: ClusterSpec) -> dict[str, dict[str, Any]]:
    """Service (kafka1, zk1 ...) -> its current task (`docker inspect` of it), for services that have one."""
    services = {s["ID"]: s["Spec"]["Name"] for s in swarm._stack_services(spec)}
    tasks = swarm._tasks(spec)
    for t in tasks:
        t["ServiceName"] = services.get(t.get("ServiceID", ""), "")
    prefix = f"{spec.name}_"
    return {name.removeprefix(prefix): t for name, t in swarm._current(tasks).items() if name.startswith(prefix)}


def running_on(spec: ClusterSpec, node_id: str) -> list[str]:
    """Services of this stack with a task running on the node: any task, the ones shutting down included."""
    services = {s["ID"]: s["Spec"]["Name"] for s in swarm._stack_services(spec)}
    prefix = f"{spec.name}_"
    return sorted(
        {
            services.get(t.get("ServiceID", ""), "").removeprefix(prefix)
            for t in swarm._tasks(spec)
            if t.get("NodeID") == node_id and (t.get("Status") or {}).get("State") == "running"
        }
    )


def node_rows(spec: ClusterSpec) -> list[NodeRow]:
    """Every node of the swarm with its rack label, the spec's rack it is, and this stack's tasks on it."""
    require_swarm_spec(spec, "nothing was listed")
    racks = {r.name for r in spec.deploy.racks}
    on: dict[str, list[str]] = {}
    for service, t in current_tasks(spec).items():
        if t.get("DesiredState") == "running" and t.get("NodeID"):
            on.setdefault(t["NodeID"], []).append(service)
    rows = []
    for n in swarm.nodes(spec):
        rack = n.rack if n.rack in racks else None
        rows.append(NodeRow(n.hostname, n.id, n.address, n.state, n.availability, n.role, n.rack, rack))
        rows[-1].tasks = sorted(on.get(n.id, []))
    return rows


def find_node(rows: list[NodeRow], node: str) -> NodeRow:
    """The node named by id (or a unique id prefix), hostname or address; NotFoundError or one line if ambiguous."""
    exact = [r for r in rows if node in (r.id, r.hostname, r.address)]
    found = exact or [r for r in rows if len(node) >= 4 and r.id.startswith(node)]
    if not found:
        known = ", ".join(f"{r.hostname} ({r.id[:12]}, {r.address})" for r in rows)
        raise NotFoundError(f"no swarm node {node!r}; nodes: {known}")
    if len(found) > 1:
        ids = ", ".join(r.id[:12] for r in found)
        raise UsageError(f"{node!r} names {len(found)} swarm nodes ({ids}): name one by its id")
    return found[0]


def set_rack(spec: ClusterSpec, node: str, rack: str | None) -> LabelChange:
    """Set a node's clusterctl.rack label to `rack` (None: remove it). Refused with one line, nothing changed: a
    rack not in the spec, a rack another node has, a node that carries this stack's tasks (they are pinned to its
    rack: changing it would stop them)."""
    require_swarm_spec(spec)
    rows = node_rows(spec)
    row = find_node(rows, node)
    names = [r.name for r in spec.deploy.racks]
    if rack is not None and rack not in names:
        raise SpecError(f"rack {rack!r} is not in deploy.racks ({', '.join(names)}); nothing was changed")
    other = next((r for r in rows if rack is not None and r.label == rack and r.id != row.id), None)
    if other is not None:
        raise UsageError(
            f"rack {rack} is on node {other.hostname} ({other.id[:12]}) already: a rack is one host; nothing was "
            "changed",
            hint=f"`clusterctl swarm label {other.id[:12]} --remove` first",
        )
    change = LabelChange(row.hostname, row.id, row.label, rack, row.label != rack)
    if not change.changed:
        return change
    if row.tasks:
        raise UsageError(
            f"node {row.hostname} ({row.id[:12]}) runs {', '.join(row.tasks)} of stack {spec.name}, pinned to rack "
            f"{row.label}: changing its label would stop them; nothing was changed",
            hint="`clusterctl down` first",
        )
    if rack is None:
        swarm.docker(spec, "node", "update", "--label-rm", RACK_LABEL, row.id)
    else:
        swarm.docker(spec, "node", "update", "--label-add", f"{RACK_LABEL}={rack}", row.id)
    return change


def set_availability(spec: ClusterSpec, node_id: str, availability: str) -> None:
    """`docker node update --availability` (active | pause | drain)."""
    swarm.docker(spec, "node", "update", "--availability", availability, node_id)


# ---------------------------------------------------------------- a task's container on its host


@lru_cache(maxsize=16)
def host_client(endpoint: str | None) -> docker.DockerClient:
    """A Docker client for one host's engine (None: the local one; ssh:// through the ssh command, as the docker
    CLI does)."""
    try:
        if endpoint is None:
            c = docker.from_env(timeout=30)
        else:
            c = docker.DockerClient(base_url=endpoint, timeout=30, use_ssh_client=endpoint.startswith("ssh://"))
        c.ping()
    except DockerException as exc:
        where = endpoint or "the local engine"
        raise UnreachableError(f"the Docker engine at {where} does not answer ({str(exc)[:120]})") from None
    return c


def node_endpoint(spec: ClusterSpec, row: NodeRow, manager_id: str) -> str | None:
    """How to reach a node's engine: its rack's endpoint, else the manager's when it is the manager's node."""
    ep = next((r.endpoint for r in spec.deploy.racks if r.name == row.rack and r.endpoint), None)
    if ep is None and row.id == manager_id:
        return swarm._manager(spec)  # None: the local engine
    if ep is None:
        raise SpecError(
            f"node {row.hostname} ({row.id[:12]}, rack {row.rack or '-'}) has no Docker endpoint in the spec: "
            "per-container faults on a swarm need deploy.racks[].endpoint of its rack"
        )
    return ep


def task_container(spec: ClusterSpec, service: str) -> Container:
    """The container of `service`'s current task, from the engine of the node it is on."""
    manager_id = require_swarm_spec(spec, "nothing was done")
    task = current_tasks(spec).get(service)
    status = (task or {}).get("Status") or {}
    cid = (status.get("ContainerStatus") or {}).get("ContainerID")
    if task is None or not cid:
        state = status.get("State", "missing")
        raise ClusterctlError(f"service {spec.name}_{service} has no task container now (its task is {state})")
    rows = {r.id: r for r in node_rows(spec)}
    row = rows.get(str(task.get("NodeID", "")))
    if row is None:
        raise ClusterctlError(f"the task of {spec.name}_{service} is on no known swarm node")
    try:
        return host_client(node_endpoint(spec, row, manager_id)).containers.get(cid)
    except NotFound:
        raise NotFoundError(f"the container of {spec.name}_{service}'s task is gone from {row.hostname}") from None
