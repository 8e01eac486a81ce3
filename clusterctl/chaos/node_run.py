"""Runs the node step of a swarm drill (node_steps.py has its model) and the swarm checks before a run."""

from __future__ import annotations

from typing import Any

from clusterctl.chaos.fault_steps import FaultSteps
from clusterctl.chaos.node_steps import KillNode
from clusterctl.errors import ClusterctlError, UsageError


class NodeSteps(FaultSteps):
    """The kill_node step and the swarm checks before a run; the Runner supplies the state declared here."""

    sc: Any

    def _check_deploy(self) -> None:
        """deploy: swarm needs a swarm cluster (one line, exit 2, before anything is touched)."""
        if self.sc.deploy == "swarm" and not self.spec.swarm:
            raise UsageError(
                f"scenario {self.sc.name} stops whole hosts (deploy: swarm); cluster {self.spec.name} runs "
                "deploy.target=compose, one engine",
                hint="run it on a spec with deploy.target: swarm (docs/swarm.md)",
            )

    def _swarm_preflight(self) -> None:
        """On a swarm: every service runs a task, and every rack a kill_node step may stop can be stopped (a
        stop/start command, not the manager's host)."""
        from clusterctl.runtime import swarm, swarm_nodes

        down = [f"{s.service} {s.state}" for s in swarm.task_states(self.spec) if s.state != "running"]
        if down:
            raise ClusterctlError(f"cluster {self.spec.name} is not up ({', '.join(down)})", hint="clusterctl status")
        for s in self.sc.parsed_steps():
            if s.kind == "kill_node" and s.args.rack not in ("leader", "follower"):
                swarm_nodes.check_killable(self.spec, swarm_nodes.resolve_rack(self.spec, s.args.rack))
        for rack in self.spec.deploy.racks if any(s.kind == "kill_node" for s in self.sc.parsed_steps()) else []:
            if rack.stop_command is None:
                raise UsageError(
                    f"scenario {self.sc.name} stops a rack's host; rack {rack.name} names no stop_command",
                    hint="set deploy.racks[].stop_command and start_command",
                )

    def _step_kill_node(self, a: KillNode) -> str:
        from clusterctl.chaos import faults, nodes

        self.cond.snapshot_leaders()
        which, why = a.rack, ""
        if a.rack in ("leader", "follower"):
            topic = a.topic or self.topic
            leader, followers = faults.replicas_of(self._live_bootstrap(), topic, a.partition)
            if a.rack == "follower" and not followers:
                raise ClusterctlError(f"{topic}-{a.partition} has no follower (replication factor 1)")
            broker = faults.spec_broker(self.spec, leader if a.rack == "leader" else self._follower(followers))
            which = self.spec.topology.broker_rack(broker) or ""
            why = f" ({a.rack} of {topic}-{a.partition} was broker {broker})"
        r = nodes.kill_node(self.spec, which)
        self.stopped.update(nodes.rack_brokers(self.spec, _rack(r)))
        r.note = (r.note or "") + why
        self._mark(r, heal=False)
        return f"{r.action} {r.target} on {r.container} in {r.took_s:.2f}s: {r.note}"


def _rack(r: Any) -> str:
    """The rack of a node fault's target, `rack r2 (broker 2, zk 2)`."""
    return str(r.target.split()[1])
