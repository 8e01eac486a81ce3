"""Faults on the real containers of a cluster, through the Docker SDK.

Every action returns a `FaultResult` (what was done, to which container, state before/after, how
long it took). Targets come from the spec (`spec.broker_container(i)`, `spec.zk_container(i)`,
`spec.network_name`); an unknown id, a missing container or a container in the wrong state is one
`ClusterctlError` line. Timed faults (pause, network partition) always heal in a `finally`.

Process faults (kill, stop, start, restart, pause) live here; targets.py names what they act on and
network.py cuts a node off its network. Both are re-exported here, so `faults.X` reaches every fault.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from docker.errors import APIError
from docker.models.containers import Container

from clusterctl.chaos.network import Detached, disconnect, partition_node, reconnect
from clusterctl.chaos.targets import (
    FaultResult,
    _always,
    _require,
    _sleep,
    broker_target,
    container_state,
    controller_target,
    locate,
    node_target,
    service_target,
    spark_worker_target,
    spec_broker,
    state_of,
    zk_target,
)
from clusterctl.compose.stack import RESTART_DELAY_S
from clusterctl.errors import ClusterctlError, FaultNotAppliedError, NotFoundError, UsageError
from clusterctl.runtime import docker as dk
from clusterctl.spec.model import ClusterSpec
from clusterctl.wait import wait_until

__all__ = [
    "Detached",
    "FaultResult",
    "broker_target",
    "container_state",
    "controller_target",
    "disconnect",
    "node_target",
    "partition_node",
    "reconnect",
    "service_target",
    "spark_worker_target",
    "spec_broker",
    "state_of",
    "zk_target",
]


def _act(
    action: str,
    target: str,
    name: str,
    need: tuple[str, ...],
    fn: Callable[[Container], int | None],
    spec: ClusterSpec | None = None,
) -> FaultResult:
    """Check the container's state, act on it; an engine's refusal is FaultNotAppliedError (nothing was done).

    With a swarm `spec`, the container is that of the service's current task, wherever it runs."""
    c = locate(name, spec)
    if spec is not None and spec.swarm:
        name = str(c.name)
    before = _require(c, target, *need)
    started = time.time()
    t0 = time.monotonic()
    try:
        retries = fn(c) or 0
    except APIError as exc:
        raise FaultNotAppliedError(f"{action} {target} ({name}) not applied: {exc.explanation or exc}") from None
    res = FaultResult(action, target, name, before, state_of(c), started, round(time.monotonic() - t0, 3))
    res.retries = retries
    return res


def _swarm_restarts(res: FaultResult, spec: ClusterSpec | None) -> FaultResult:
    if spec is not None and spec.swarm:
        res.note = f"the swarm starts a new task after its restart delay ({RESTART_DELAY_S} s)"
    return res


def kill(action: str, target: str, name: str, spec: ClusterSpec | None = None) -> FaultResult:
    """SIGKILL (like kill -9): no controlled shutdown, the ZK session expires on its own."""
    return _swarm_restarts(_act(action, target, name, ("running",), dk.kill, spec), spec)


def stop(action: str, target: str, name: str, grace_s: int, spec: ClusterSpec | None = None) -> FaultResult:
    """SIGTERM then wait up to `grace_s` (a broker's controlled shutdown) before SIGKILL."""
    return _swarm_restarts(_act(action, target, name, ("running",), lambda c: dk.stop(c, grace_s), spec), spec)


def _not_on_swarm(spec: ClusterSpec | None, action: str, target: str) -> None:
    if spec is not None and spec.swarm:
        raise UsageError(
            f"{action} {target}: on a swarm the service starts its task again by itself (after "
            f"{RESTART_DELAY_S} s); `chaos heal` waits for it"
        )


def start(action: str, target: str, name: str, spec: ClusterSpec | None = None) -> FaultResult:
    _not_on_swarm(spec, action, target)
    return _act(action, target, name, ("exited", "created"), dk.start)


def restart(action: str, target: str, name: str, grace_s: int, spec: ClusterSpec | None = None) -> FaultResult:
    _not_on_swarm(spec, action, target)
    return _act(action, target, name, ("running", "exited", "created"), lambda c: dk.restart(c, grace_s))


def pause(target: str, name: str, spec: ClusterSpec | None = None) -> FaultResult:
    """SIGSTOP every process of the container (docker pause: the cgroup freezer; a busy one is asked again for
    seconds, and `retries` counts the refusals)."""
    from clusterctl.runtime import fault_records

    fault_records.record(spec, "pause", target, name)  # first: a SIGKILL after the freeze still leaves the record
    try:
        res = _act("pause", target, name, ("running",), dk.pause, spec)
    except BaseException:
        try:
            frozen = state_of(locate(name, spec)) == "paused"
        except ClusterctlError:
            frozen = False
        if not frozen:
            fault_records.forget(spec, "pause", name)
        raise
    if res.retries:
        res.note = f"frozen after {res.retries} freeze {'retry' if res.retries == 1 else 'retries'}"
    return res


def pause_all(targets: list[tuple[str, str]], spec: ClusterSpec | None = None) -> list[FaultResult]:
    """Pause each (target, container) in turn, all or none: when one cannot be paused (or on Ctrl-C), those
    already paused are unpaused again, and FaultNotAppliedError names what was undone."""
    out: list[FaultResult] = []
    try:
        for target, name in targets:
            out.append(pause(target, name, spec))
    except BaseException as exc:
        _, undone = _unpause_each(out, spec)
        if not isinstance(exc, ClusterctlError):
            raise
        if not out and isinstance(exc, FaultNotAppliedError):
            raise
        raise FaultNotAppliedError(
            f"{exc.message}" + (f"; undone: {', '.join(undone)}" if undone else ""), hint=exc.hint
        ) from None
    return out


def _unpause_each(paused: list[FaultResult], spec: ClusterSpec | None = None) -> tuple[list[FaultResult], list[str]]:
    """Unpause every container of `paused` that is still paused: the unpauses, and one phrase per container."""
    done: list[FaultResult] = []
    said = []
    for r in paused:
        try:
            if state_of(locate(r.container, spec)) == "paused":
                done.append(unpause(r.target, r.container, spec))
                said.append(f"{r.target} unpaused")
        except ClusterctlError as exc:
            said.append(f"{r.target} NOT unpaused ({exc.message})")
    return done, said


def unpause(target: str, name: str, spec: ClusterSpec | None = None) -> FaultResult:
    from clusterctl.runtime import fault_records

    res = _act("unpause", target, name, ("paused",), dk.unpause, spec)
    fault_records.forget(spec, "pause", name)
    return res


def kill_broker(spec: ClusterSpec, broker_id: int) -> FaultResult:
    return kill("kill-broker", *broker_target(spec, broker_id), spec)


def stop_broker(spec: ClusterSpec, broker_id: int) -> FaultResult:
    return stop("stop-broker", *broker_target(spec, broker_id), grace_s=spec.kafka.stop_grace_seconds, spec=spec)


def start_broker(spec: ClusterSpec, broker_id: int) -> FaultResult:
    return start("start-broker", *broker_target(spec, broker_id), spec)


def restart_broker(spec: ClusterSpec, broker_id: int) -> FaultResult:
    return restart("restart-broker", *broker_target(spec, broker_id), grace_s=spec.kafka.stop_grace_seconds, spec=spec)


def kill_zk(spec: ClusterSpec, zk_id: int) -> FaultResult:
    return kill("kill-zk", *zk_target(spec, zk_id), spec)


def stop_zk(spec: ClusterSpec, zk_id: int) -> FaultResult:
    return stop("stop-zk", *zk_target(spec, zk_id), grace_s=10, spec=spec)


def start_zk(spec: ClusterSpec, zk_id: int) -> FaultResult:
    return start("start-zk", *zk_target(spec, zk_id), spec)


def kill_spark_worker(spec: ClusterSpec, worker_id: int) -> FaultResult:
    """SIGKILL a Spark worker container: its executors die with it, their running tasks are lost."""
    return kill("kill-spark-worker", *spark_worker_target(spec, worker_id))


def start_spark_worker(spec: ClusterSpec, worker_id: int) -> FaultResult:
    return start("start-spark-worker", *spark_worker_target(spec, worker_id))


def active_controller(spec: ClusterSpec) -> int:
    """The node id of the active controller: the quorum leader (KRaft) or /controller's broker (ZooKeeper)."""
    if spec.kraft_mode:
        from clusterctl.kafka.kraft import quorum as kraft

        leader = kraft.describe(spec).leader_id
        if leader < 0:
            raise ClusterctlError("the controller quorum has no leader right now")
        return leader
    from clusterctl.zookeeper import client as zk

    with zk.zk_client(spec.topology.zk_connect, timeout=3.0) as client:
        cid = zk.controller_id(client)
    if cid is None:
        raise ClusterctlError("no broker is the controller right now (/controller is empty)")
    return cid


def role_node(spec: ClusterSpec, role: str) -> str:
    """The service holding a role now: zk-leader (the ensemble's leader) or controller (the active controller:
    KRaft's quorum leader, or ZooKeeper mode's controller broker)."""
    if role == "controller":
        cid = active_controller(spec)
        return spec.topology.controller_service(cid) if spec.kraft_mode else spec.topology.broker_service(cid)
    from clusterctl.zookeeper import client as zk

    leaders = [s.id for s in zk.node_statuses(spec) if s.mode == "leader"]
    if not leaders:
        raise ClusterctlError("the ZooKeeper ensemble has no leader right now")
    return spec.topology.zk_service(leaders[0])


def kill_controller(spec: ClusterSpec) -> FaultResult:
    """SIGKILL the active controller: the quorum leader (KRaft) or the controller broker (ZooKeeper mode)."""
    cid = active_controller(spec)
    if spec.kraft_mode:
        res = kill("kill-controller", *controller_target(spec, cid), spec)
        res.note = f"quorum leader was node {cid}"
    else:
        res = kill("kill-controller", *broker_target(spec, cid), spec)
        res.note = f"controller was broker {cid}"
    return res


def kill_controller_quorum(spec: ClusterSpec) -> list[FaultResult]:
    """SIGKILL a majority of the voters, the active one first: the quorum can elect no leader."""
    if not spec.kraft_mode:
        raise UsageError(f"cluster {spec.name} runs ZooKeeper mode: break ZooKeeper's quorum with kill-zk instead")
    voters = spec.topology.controller_ids
    if len(voters) == 1:
        return [kill_controller(spec)]
    leader = active_controller(spec)
    order = [leader] + [v for v in voters if v != leader]
    out = []
    for v in order[: len(voters) // 2 + 1]:
        res = kill("kill-controller-quorum", *controller_target(spec, v), spec)
        res.note = f"voter {v} of {len(voters)}" + (" (the leader)" if v == leader else "")
        out.append(res)
    return out


def start_controller(spec: ClusterSpec, node_id: int) -> FaultResult:
    return start("start-controller", *controller_target(spec, node_id), spec)


def current_leader(bootstrap: str, topic: str, partition: int) -> int:
    """The broker that leads `topic`-`partition` now, from metadata; one line if there is none."""
    from clusterctl.kafka.admin import describe_topic

    desc = describe_topic(bootstrap, topic)
    for p in desc.partitions:
        if p.partition == partition:
            if p.leader < 0:
                raise ClusterctlError(f"{topic}-{partition} has no leader right now (Leader: -1)")
            return p.leader
    raise NotFoundError(f"topic {topic!r} has partitions 0..{desc.partition_count - 1}; no partition {partition}")


def wait_leader_changed(bootstrap: str, topic: str, partition: int, old_leader: int, timeout: float) -> int:
    """Wait until `topic`-`partition` has a leader other than `old_leader`; return the new leader."""

    def leader() -> int:
        return current_leader(bootstrap, topic, partition)

    return wait_until(
        leader,
        timeout=timeout,
        what=f"a new leader of {topic}-{partition} (was {old_leader})",
        interval=0.2,
        done=lambda now: now != old_leader,
        seen=lambda now: f"leader still {now}",
        retry_on=lambda exc: isinstance(exc, ClusterctlError),
    )


def replicas_of(bootstrap: str, topic: str, partition: int) -> tuple[int, list[int]]:
    """(leader, followers) of `topic`-`partition` now, from metadata."""
    from clusterctl.kafka.admin import describe_topic

    for p in describe_topic(bootstrap, topic).partitions:
        if p.partition == partition:
            if p.leader < 0:
                raise ClusterctlError(f"{topic}-{partition} has no leader right now (Leader: -1)")
            return p.leader, [r for r in p.replicas if r != p.leader]
    raise NotFoundError(f"topic {topic!r} has no partition {partition}")


def pause_followers(
    spec: ClusterSpec,
    bootstrap: str,
    topic: str,
    partition: int,
    seconds: float | None = None,
    stop_event: threading.Event | None = None,
    on_paused: Callable[[list[FaultResult]], None] | None = None,
) -> list[FaultResult]:
    """Pause every follower of a partition: its leader keeps taking writes that no follower fetches.

    With `seconds`, unpause them again after that long (also on error or Ctrl-C); without, they stay paused
    until `heal`. `on_paused` sees the pauses as soon as they happened.
    """
    leader, followers = replicas_of(bootstrap, topic, partition)
    if not followers:
        raise UsageError(f"{topic}-{partition} has no followers to pause (replication factor 1)")
    targets = [broker_target(spec, spec_broker(spec, b)) for b in followers]
    out = pause_all(targets, spec)
    for r in out:
        r.action = "pause-follower"
        r.note = f"follower of {topic}-{partition} (leader: broker {leader})" + (f"; {r.note}" if r.note else "")
    if seconds is None:
        if on_paused is not None:
            on_paused(list(out))
        return out
    paused = list(out)
    try:
        if on_paused is not None:
            on_paused(list(out))
        _sleep(seconds, stop_event)
    finally:  # every follower is asked, also when one of them fails
        healed, said = _unpause_each(paused, spec)
        out += healed
        problems = [p for p in said if " NOT " in p]
        if problems:
            raise ClusterctlError(f"healing pause-followers: {'; '.join(problems)}")
    return out


def kill_leader(spec: ClusterSpec, bootstrap: str, topic: str, partition: int) -> FaultResult:
    """SIGKILL the broker currently leading the partition (seed 002: `kill -9` the leader)."""
    leader = current_leader(bootstrap, topic, partition)
    broker = spec_broker(spec, leader)
    res = kill("kill-leader", *broker_target(spec, broker), spec)
    res.note = f"leader of {topic}-{partition} was broker {leader}"
    if broker != leader:
        res.note += f" (the spec's broker {broker})"
    return res


def kill_coordinator(spec: ClusterSpec, bootstrap: str, group: str) -> FaultResult:
    """SIGKILL the broker coordinating `group` (the leader of its __consumer_offsets partition)."""
    from clusterctl.kafka.groups import group_coordinator

    coordinator = group_coordinator(bootstrap, group)
    broker = spec_broker(spec, coordinator)
    res = kill("kill-coordinator", *broker_target(spec, broker), spec)
    res.note = f"coordinator of group {group} was broker {coordinator}"
    return res


def pause_for(
    spec: ClusterSpec,
    target: str,
    name: str,
    seconds: float,
    stop_event: threading.Event | None = None,
    on_applied: Callable[[list[FaultResult]], None] | None = None,
) -> list[FaultResult]:
    """Pause a container for `seconds`, then unpause (also on Ctrl-C or error); `on_applied` sees the pause."""
    if seconds <= 0:
        raise UsageError(f"--for must be positive, got {seconds}")
    out = [pause(target, name, spec)]
    with _always(lambda: unpause(target, name, spec), out):
        if on_applied is not None:
            on_applied(list(out))
        _sleep(seconds, stop_event)
    return out


def pause_broker(
    spec: ClusterSpec,
    broker_id: int,
    seconds: float,
    stop_event: threading.Event | None = None,
    on_applied: Callable[[list[FaultResult]], None] | None = None,
) -> list[FaultResult]:
    target, name = broker_target(spec, broker_id)
    return pause_for(spec, target, name, seconds=seconds, stop_event=stop_event, on_applied=on_applied)
