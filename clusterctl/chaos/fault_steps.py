"""The fault steps of a drill run: immediate faults, timed faults that heal themselves, and unpausing.

`FaultSteps` is a part of the Runner (runner.py): it marks every fault on the observer's timeline and keeps the
set of brokers the run paused, so metadata requests avoid them.
"""

from __future__ import annotations

import threading
from typing import Any

from clusterctl.chaos.conditions import Conditions
from clusterctl.chaos.group_steps import GROUP_FAULTS
from clusterctl.chaos.scenario import NET_ACTIONS, Fault
from clusterctl.chaos.timeline import HEAL_ACTIONS
from clusterctl.errors import ClusterctlError, UsageError
from clusterctl.spec.model import ClusterSpec


class FaultSteps:
    """The `fault` step; the Runner supplies the state declared here."""

    spec: ClusterSpec
    bootstrap: str
    topic: str
    observer: Any
    cond: Conditions
    paused: set[int]
    stopped: set[int]  # brokers on a host a kill_node step stopped (conditions share the set)
    freeze_retries: int
    detached: list[Any]
    background: list[tuple[threading.Thread, threading.Event]]

    def _unpause_brokers(self) -> str:
        """Unpause every paused broker (and nothing else: killed brokers stay down until heal)."""
        from clusterctl.chaos import faults

        done = []
        for b in self.spec.topology.broker_ids:
            target, name = faults.broker_target(self.spec, b)
            if faults.container_state(name) == "paused":
                r = faults.unpause(target, name, self.spec)
                self.observer.mark(r.action, r.target, heal=True, t=r.started)
                done.append(target)
        self.paused.clear()
        return f"unpaused {', '.join(done)}" if done else "no broker was paused"

    def _group_fault(self, f: Fault) -> str:
        """kill-member and kill-coordinator act on the drill's group (group_run.py)."""
        raise UsageError(f"{f.action}: no start_group step started a group before it")

    def _step_fault(self, f: Fault) -> str:
        from clusterctl.chaos import faults, recovery

        spec = self.spec
        a = f.action
        if a == "unpause-brokers":
            return self._unpause_brokers()
        self.cond.snapshot_leaders()
        if a in GROUP_FAULTS:
            return self._group_fault(f)
        if a in NET_ACTIONS:
            return self._net_fault(f)
        if a == "fill-disk":
            from clusterctl.chaos import disk

            r = disk.fill_disk(spec, self._net_node(f))
            self._mark(r, heal=False)
            return f"{r.action} {r.target}: {r.note}"
        if a in ("pause-broker", "partition-node", "pause-followers") and f.for_ is not None:
            return self._timed_fault(f)
        if a == "pause-followers":
            res = faults.pause_followers(spec, self._live_bootstrap(), f.topic or self.topic, f.partition)
            self._on_paused(res)
            return ", ".join(f"pause {r.target}: {r.note}" for r in res)
        if a == "pause-broker":
            r = faults.pause(*faults.broker_target(spec, f.broker or 0), spec)
            self.paused.add(f.broker or 0)
        elif a == "partition-node":
            r, d = faults.disconnect(spec, f.node or "")
            self.detached.append(d)
        elif a == "kill-leader":
            r = faults.kill_leader(spec, self._live_bootstrap(), f.topic or self.topic, f.partition)
        elif a == "kill-controller":
            r = faults.kill_controller(spec)
        elif a == "start-controller":
            r = faults.start_controller(spec, f.controller or 0)
        elif a == "kill-controller-quorum":
            killed = faults.kill_controller_quorum(spec)
            for k in killed:
                self.observer.mark(k.action, k.target, heal=False, note=k.note, t=k.started)
            return ", ".join(f"{k.target} ({k.container}) killed" for k in killed)
        elif a == "rolling-restart":
            steps = recovery.rolling_restart(
                spec,
                self.bootstrap,
                f.timeout,
                on_step=lambda s: self.observer.mark(
                    s.restart.action, s.restart.target, heal=False, t=s.restart.started
                ),
            )
            return ", ".join(f"broker {s.broker} back in ISR after {s.isr_full_after_s:.1f}s" for s in steps)
        else:
            fn = getattr(faults, a.replace("-", "_"))
            r = fn(spec, f.spark_worker if a.endswith("-spark-worker") else f.broker if a.endswith("-broker") else f.zk)
        self._mark(r, heal=a.startswith("start-"))
        return f"{r.action} {r.target} ({r.container}): {r.before} -> {r.after}" + (f"; {r.note}" if r.note else "")

    def _timed_fault(self, f: Fault) -> str:
        """Start a fault that heals itself after `for` seconds in the background; return once it is applied.

        A fault that could not be applied fails the step with its own error (FaultNotAppliedError stays one).
        """
        from clusterctl.chaos import faults
        from clusterctl.runtime.docker import FREEZE_TIMEOUT_S

        stop = threading.Event()
        errors: list[ClusterctlError] = []
        seconds = float(f.for_ or 0)
        applied = threading.Event()

        def on_applied(rs: list[Any]) -> None:
            self._on_paused(rs)
            applied.set()

        def body() -> None:
            try:
                if f.action == "pause-broker":
                    res = faults.pause_broker(self.spec, f.broker or 0, seconds, stop, on_applied=on_applied)
                elif f.action == "pause-followers":
                    res = faults.pause_followers(
                        self.spec, self._live_bootstrap(), f.topic or self.topic, f.partition, seconds, stop,
                        on_paused=on_applied,
                    )  # fmt: skip
                else:
                    res = faults.partition_node(self.spec, f.node or "", seconds, stop, on_applied=on_applied)
                self.paused.difference_update(_broker_ids(res))
                for r in res:
                    if r.action in HEAL_ACTIONS:
                        self.observer.mark(r.action, r.target, note=r.note, t=r.started)
            except ClusterctlError as exc:
                errors.append(exc)
            finally:
                applied.set()

        t = threading.Thread(target=body, name=f"fault-{f.action}", daemon=True)
        t.start()
        self.background.append((t, stop))
        # each pause may retry a busy container's freeze for FREEZE_TIMEOUT_S; the step waits for the outcome
        applied.wait(3 * FREEZE_TIMEOUT_S + 30)
        if errors:
            raise errors[0]
        target = {"pause-broker": f"broker {f.broker}", "pause-followers": f"followers of partition {f.partition}"}
        return f"{f.action} {target.get(f.action, str(f.node))} for {seconds:g}s (heals itself)"

    def _net_node(self, f: Fault) -> str:
        """The node a network or disk fault names: a service, the leader / a follower of topic-partition now, the
        ZooKeeper ensemble's leader (zk-leader), or the active controller (controller)."""
        from clusterctl.chaos import faults

        if f.node in ("zk-leader", "controller"):
            return faults.role_node(self.spec, f.node)
        if f.node not in ("leader", "follower"):
            return f.node or ""
        leader, followers = faults.replicas_of(self._live_bootstrap(), f.topic or self.topic, f.partition)
        if f.node == "follower" and not followers:
            raise ClusterctlError(f"{f.topic or self.topic}-{f.partition} has no follower (replication factor 1)")
        pick = leader if f.node == "leader" else self._follower(followers)
        return self.spec.topology.broker_service(faults.spec_broker(self.spec, pick))

    def _follower(self, followers: list[int]) -> int:
        """The last follower that is not the active controller (any, if every follower is): a fault on the
        controller also holds back its AlterPartition answers and metadata updates, a second fault."""
        from clusterctl.chaos import faults

        try:
            controller = faults.active_controller(self.spec)
        except ClusterctlError:  # no controller right now: any follower is as good
            return followers[-1]
        return ([b for b in followers if b != controller] or followers)[-1]

    def _net_fault(self, f: Fault) -> str:
        """Degrade a node's network; with `for`, in the background, healing itself after that long."""
        from clusterctl.chaos import degrade

        node = self._net_node(f)
        to = [self._net_node(f.model_copy(update={"node": t})) for t in f.to]
        fault = degrade.NetFault(f.action, f.net_value() or 0.0, f.jitter, to)
        if f.for_ is None:
            r = degrade.degrade(self.spec, node, fault)
            self.observer.mark(r.action, r.target, heal=False, note=r.note, t=r.started)
            return f"{r.action} {r.target}: {r.note}"
        stop = threading.Event()
        applied = threading.Event()
        errors: list[str] = []

        def body() -> None:
            try:
                r, take_back = degrade.apply(self.spec, node, fault)
                self.observer.mark(r.action, r.target, heal=False, note=r.note, t=r.started)
                applied.set()
                stop.wait(float(f.for_ or 0))
                h = take_back()  # this fault only: another on the node stays until its own end or `heal`
                self.observer.mark(h.action, h.target, heal=True, note=h.note, t=h.started)
            except ClusterctlError as exc:
                errors.append(str(exc))
            finally:
                applied.set()

        t = threading.Thread(target=body, name=f"fault-{f.action}", daemon=True)
        t.start()
        self.background.append((t, stop))
        applied.wait(60.0)
        if errors:
            raise ClusterctlError(errors[0])
        return f"{fault.describe()} on {node} for {f.for_:g}s (heals itself)"

    def _on_paused(self, res: list[Any]) -> None:
        for r in res:
            self._mark(r)
        self.paused.update(_broker_ids(res))

    def _mark(self, r: Any, heal: bool | None = None) -> None:
        """Put a fault on the timeline and count the engine's refusals before it took (freeze retries)."""
        self.freeze_retries += r.retries
        self.observer.mark(r.action, r.target, heal=heal, note=r.note, t=r.started)

    def _live_bootstrap(self) -> str:
        """The bootstrap list without the brokers this run paused or whose host it stopped (they never answer)."""
        t = self.spec.topology
        live = [b for b in t.broker_ids if b not in self.paused and b not in self.stopped]
        if not live or live == t.broker_ids or self.bootstrap != t.bootstrap_servers:
            return self.bootstrap
        return ",".join(f"{t.broker_host(b)}:{t.broker_host_port(b)}" for b in live)


def _broker_ids(results: list[Any]) -> set[int]:
    return {int(r.target.split()[1]) for r in results if r.target.startswith("broker ")}
