"""Whole-host faults on a swarm: kill-node stops the Docker daemon of a rack's host (every task there gone at
once, runtime/swarm_nodes.py) and start-node (or heal) starts it again.

A node fault's target names the rack and what ran there, `rack r2 (broker 2, zk 2)`, so the observer's analysis
(leader moves, ISR, write gaps) treats it as the loss of that broker and ZooKeeper node.
"""

from __future__ import annotations

from clusterctl.chaos.targets import FaultResult
from clusterctl.runtime import swarm_nodes
from clusterctl.spec.model import ClusterSpec


def rack_target(spec: ClusterSpec, rack: str) -> str:
    """`rack r2 (broker 2, zk 2)`: the rack and the brokers, controllers and ZooKeeper nodes placed on it."""
    t = spec.topology
    ids = [f"broker {b}" for b in t.broker_ids if t.broker_rack(b) == rack]
    ids += [f"zk {i}" for i in t.zk_ids if t.zk_rack(i) == rack]
    ids += [f"controller {n}" for n in t.dedicated_controller_ids if t.controller_rack(n) == rack]
    return f"rack {rack} ({', '.join(ids)})" if ids else f"rack {rack}"


def rack_brokers(spec: ClusterSpec, rack: str) -> list[int]:
    return [b for b in spec.topology.broker_ids if spec.topology.broker_rack(b) == rack]


def _result(spec: ClusterSpec, ch: swarm_nodes.NodeChange, action: str, before: str, after: str) -> FaultResult:
    verb = "stopped; gone" if ch.action == "stop" else "started; running again"
    return FaultResult(
        action, rack_target(spec, ch.rack), ch.node, before, after, ch.started, ch.took_s,
        note=f"node {ch.node}'s daemon {verb}: {', '.join(ch.services) or 'no task of the stack'}",
    )  # fmt: skip


def kill_node(spec: ClusterSpec, which: str) -> FaultResult:
    """Stop the Docker daemon of a rack's host (RACK, or the swarm node's hostname): every task there at once."""
    return _result(spec, swarm_nodes.stop_node(spec, which), "kill-node", "running", "stopped")


def start_node(spec: ClusterSpec, which: str, timeout: float = 180.0) -> FaultResult:
    """Start a killed host's daemon again; returns once its node is ready and its tasks run."""
    return _result(spec, swarm_nodes.start_node(spec, which, timeout), "start-node", "stopped", "running")


def heal_nodes(spec: ClusterSpec) -> list[FaultResult]:
    """Start every rack host whose daemon does not answer (and that names a start_command)."""
    if not spec.swarm:
        return []
    return [start_node(spec, rack) for rack in swarm_nodes.stopped_racks(spec)]
