"""Whole swarm hosts: stop a rack's Docker daemon (every task on it gone at once) and start it again.

The Docker API cannot stop the daemon it is served by, so a rack names the commands that do
(`deploy.racks[].stop_command` / `start_command`, run on this machine without a shell: e.g. ssh to the host and
`systemctl kill -s KILL docker`). Its `endpoint` is how we see the daemon go and come back; the manager
(`deploy.endpoint`) is how we see the swarm's view of the node and its tasks. Chaos's kill-node (and kill-rack)
are built on `stop_node` / `start_node`.
"""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass

from clusterctl.errors import ClusterctlError, FaultNotAppliedError, NotFoundError, UsageError
from clusterctl.runtime import swarm
from clusterctl.spec.deploy import RACK_LABEL, RackSpec
from clusterctl.spec.model import ClusterSpec
from clusterctl.wait import wait_until

COMMAND_TIMEOUT_S = 120.0


@dataclass
class NodeChange:
    """A rack's host stopped or started: which swarm node, which of the stack's services run there."""

    rack: str
    node: str  # the swarm node's hostname (or id)
    action: str  # stop | start
    services: list[str]  # the stack's services placed on this rack
    started: float  # epoch seconds
    took_s: float  # the command, and the daemon gone (stop) / the node ready and its tasks running (start)
    swarm_state: str  # the node's state as the manager saw it last (ready | down | unknown)


def resolve_rack(spec: ClusterSpec, which: str) -> RackSpec:
    """A rack by its name, or by the hostname or id (a prefix of at least 6 characters) of its swarm node."""
    if not spec.swarm:
        raise UsageError(f"cluster {spec.name} runs deploy.target=compose: one engine, no host to stop")
    for r in spec.deploy.racks:
        if r.name == which:
            return r
    for n in swarm.nodes(spec):
        if n.rack and (which == n.hostname or (len(which) >= 6 and n.id.startswith(which))):
            for r in spec.deploy.racks:
                if r.name == n.rack:
                    return r
    return _unknown(spec, which)


def _unknown(spec: ClusterSpec, which: str) -> RackSpec:
    racks = ", ".join(r.name for r in spec.deploy.racks) or "none"
    raise NotFoundError(f"no rack or swarm node {which!r} in cluster {spec.name} (racks: {racks})")


def rack_services(spec: ClusterSpec, rack: str) -> list[str]:
    """The stack's services the spec places on `rack` (ZooKeeper nodes, controllers, brokers)."""
    t = spec.topology
    out = [t.zk_service(i) for i in t.zk_ids if t.zk_rack(i) == rack]
    out += [t.controller_service(n) for n in t.dedicated_controller_ids if t.controller_rack(n) == rack]
    return out + [t.broker_service(b) for b in t.broker_ids if t.broker_rack(b) == rack]


def _node_of(spec: ClusterSpec, rack: str) -> swarm.SwarmNode:
    on = [n for n in swarm.nodes(spec) if n.rack == rack]
    if len(on) != 1:
        raise ClusterctlError(f"rack {rack}: {len(on)} swarm nodes are labelled {RACK_LABEL}={rack}, not one")
    return on[0]


def check_killable(spec: ClusterSpec, rack: RackSpec) -> swarm.SwarmNode:
    """The rack's node, when stopping it is possible and leaves a swarm to heal through (else one line, exit 2)."""
    if not spec.swarm:
        raise UsageError(f"cluster {spec.name} runs deploy.target=compose: one engine, no host to stop")
    if rack.stop_command is None or rack.start_command is None:
        raise UsageError(
            f"rack {rack.name} names no stop_command/start_command: nothing here can stop its host's daemon",
            hint="set deploy.racks[].stop_command and start_command (e.g. ssh to the host and systemctl)",
        )
    node = _node_of(spec, rack.name)
    manager_id = json.loads(swarm.docker(spec, "info", "--format", "{{json .Swarm}}") or "{}").get("NodeID")
    if node.id == manager_id:
        raise UsageError(
            f"rack {rack.name} is the swarm manager deploy.endpoint talks to ({node.hostname}): stopping it leaves "
            "no manager to watch or heal through; pick another rack"
        )
    return node


def node_answers(spec: ClusterSpec, rack: RackSpec) -> bool:
    """Whether the rack's own Docker daemon answers at its endpoint."""
    try:
        swarm.docker(spec, "version", "--format", "{{.Server.Version}}", endpoint=rack.endpoint, timeout=10)
    except ClusterctlError:
        return False
    return True


def _run(rack: RackSpec, which: str, argv: list[str]) -> None:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, errors="replace", timeout=COMMAND_TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise FaultNotAppliedError(f"rack {rack.name}: {which} {argv[0]!r} did not run ({exc})") from None
    if proc.returncode != 0:
        last = ([ln for ln in (proc.stderr or proc.stdout).splitlines() if ln.strip()] or ["(no output)"])[-1]
        raise FaultNotAppliedError(f"rack {rack.name}: {which} exited {proc.returncode}: {last.strip()[:300]}")


def stop_node(spec: ClusterSpec, which: str, timeout: float = 60.0) -> NodeChange:
    """Stop the Docker daemon of a rack's host with its stop_command: every task there is gone at once.
    Returns once its endpoint no longer answers."""
    rack = resolve_rack(spec, which)
    node = check_killable(spec, rack)
    if not node_answers(spec, rack):
        raise UsageError(f"rack {rack.name}: its daemon at {rack.endpoint} does not answer: already stopped?")
    started, t0 = time.time(), time.monotonic()
    _run(rack, "stop_command", list(rack.stop_command or []))
    wait_until(
        lambda: not node_answers(spec, rack), timeout=timeout, interval=0.2,
        what=f"the daemon of rack {rack.name} ({rack.endpoint}) gone",
    )  # fmt: skip
    took = round(time.monotonic() - t0, 3)
    return NodeChange(rack.name, node.hostname or node.id[:12], "stop", rack_services(spec, rack.name), started, took,
                      node.state)  # fmt: skip


def start_node(spec: ClusterSpec, which: str, timeout: float = 180.0) -> NodeChange:
    """Start a stopped rack host's daemon with its start_command; returns once the swarm lists the node ready
    and every service placed on the rack runs a task again."""
    rack = resolve_rack(spec, which)
    if rack.start_command is None:
        raise UsageError(f"rack {rack.name} names no start_command")
    started, t0 = time.time(), time.monotonic()
    _run(rack, "start_command", list(rack.start_command))
    deadline = t0 + timeout
    wait_until(lambda: node_answers(spec, rack), timeout=timeout, what=f"the daemon of rack {rack.name} again")
    node = wait_until(
        lambda: _node_of(spec, rack.name), timeout=max(1.0, deadline - time.monotonic()),
        what=f"rack {rack.name}'s swarm node ready", done=lambda n: n.state == "ready",
        seen=lambda n: f"node {n.hostname} is {n.state}", retry_on=lambda e: isinstance(e, ClusterctlError),
    )  # fmt: skip
    services = rack_services(spec, rack.name)

    def not_running() -> list[str]:
        # the host's own daemon is the truth: a manager that never saw the node go may still list its old tasks
        ps = swarm.docker(spec, "ps", "--filter", f"label={swarm.STACK_LABEL}={spec.name}", "--filter",
                          "status=running", "--format", '{{.Label "com.docker.swarm.service.name"}}',
                          endpoint=rack.endpoint)  # fmt: skip
        running = set(ps.split())
        return [s for s in services if f"{spec.name}_{s}" not in running]

    wait_until(
        not_running, timeout=max(1.0, deadline - time.monotonic()), what=f"the tasks of rack {rack.name} running",
        done=lambda left: not left, seen=lambda left: f"not running yet: {', '.join(left)}",
    )  # fmt: skip
    took = round(time.monotonic() - t0, 3)
    return NodeChange(rack.name, node.hostname or node.id[:12], "start", services, started, took, node.state)


def stopped_racks(spec: ClusterSpec) -> list[str]:
    """The racks with a start_command whose daemon does not answer (a kill-node not healed yet)."""
    return [r.name for r in spec.deploy.racks if r.start_command is not None and not node_answers(spec, r)]
