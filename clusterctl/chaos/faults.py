"""Faults on the real containers of a cluster, through the Docker SDK.

Every action returns a `FaultResult` (what was done, to which container, state before/after, how
long it took). Targets come from the spec (`spec.broker_container(i)`, `spec.zk_container(i)`,
`spec.network_name`); an unknown id, a missing container or a container in the wrong state is one
`ClusterctlError` line. Timed faults (pause, network partition) always heal in a `finally`.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from docker.errors import APIError, NotFound
from docker.models.containers import Container

from clusterctl.errors import ClusterctlError, NotFoundError, TimeoutError_, UsageError
from clusterctl.spec.model import ClusterSpec


@dataclass
class FaultResult:
    """One fault (or heal) action and its effect on the container."""

    action: str
    target: str  # broker 2 | zk 1 | kafka1 ...
    container: str
    before: str
    after: str
    started: float  # epoch seconds
    took_s: float
    note: str | None = None


@dataclass
class Detached:
    """A container taken off the cluster network, with what is needed to put it back unchanged."""

    container: str
    network: str
    ipv4: str | None
    aliases: list[str] = field(default_factory=list)


def _docker() -> object:
    from clusterctl.runtime.docker import client

    return client()


def _container(name: str) -> Container:
    from clusterctl.runtime.docker import get_container

    c = get_container(name)
    c.reload()
    return c


def state_of(c: Container) -> str:
    """The container's status, fresh from the engine."""
    c.reload()
    return str(c.attrs.get("State", {}).get("Status", "unknown"))


def container_state(name: str) -> str:
    """running | paused | exited | ... of a container; 'missing' when there is none."""
    from clusterctl.runtime.docker import find_container

    c = find_container(name)
    return "missing" if c is None else state_of(c)


def broker_target(spec: ClusterSpec, broker_id: int) -> tuple[str, str]:
    if broker_id not in spec.topology.broker_ids:
        raise NotFoundError(f"unknown broker id {broker_id}; the spec has brokers {_ids(spec.topology.broker_ids)}")
    return f"broker {broker_id}", spec.topology.broker_container(broker_id)


def zk_target(spec: ClusterSpec, zk_id: int) -> tuple[str, str]:
    if spec.kraft_mode:
        raise UsageError(f"cluster {spec.name} runs in KRaft mode: there is no ZooKeeper node to break")
    if zk_id not in spec.topology.zk_ids:
        raise NotFoundError(f"unknown ZooKeeper id {zk_id}; the spec has nodes {_ids(spec.topology.zk_ids)}")
    return f"zk {zk_id}", spec.topology.zk_container(zk_id)


def node_target(spec: ClusterSpec, name: str) -> tuple[str, str]:
    """A service ('kafka2', 'zk1') or container name of the spec."""
    services = [spec.topology.zk_service(i) for i in spec.topology.zk_ids] + [
        spec.topology.broker_service(i) for i in spec.topology.broker_ids
    ]
    services += [spec.topology.controller_service(i) for i in spec.topology.dedicated_controller_ids]
    if spec.kafka_manager.enabled:
        services.append(spec.topology.manager_service)
    for s in services:
        if name in (s, spec.topology.container_name(s)):
            return s, spec.topology.container_name(s)
    raise NotFoundError(f"unknown node {name!r}; the spec has {', '.join(services)}")


def _ids(ids: list[int]) -> str:
    return ",".join(str(i) for i in ids)


def _require(c: Container, target: str, *states: str) -> str:
    st = state_of(c)
    if st not in states:
        raise ClusterctlError(f"{target} ({c.name}) is {st}, expected {' or '.join(states)}")
    return st


def _act(action: str, target: str, name: str, need: tuple[str, ...], fn: Callable[[Container], None]) -> FaultResult:
    c = _container(name)
    before = _require(c, target, *need)
    started = time.time()
    t0 = time.monotonic()
    try:
        fn(c)
    except APIError as exc:
        raise ClusterctlError(f"{action} {target} ({name}) failed: {exc.explanation or exc}") from None
    return FaultResult(action, target, name, before, state_of(c), started, round(time.monotonic() - t0, 3))


def kill(action: str, target: str, name: str) -> FaultResult:
    """SIGKILL (like kill -9): no controlled shutdown, the ZK session expires on its own."""
    return _act(action, target, name, ("running",), lambda c: c.kill(signal="SIGKILL"))


def stop(action: str, target: str, name: str, grace_s: int) -> FaultResult:
    """SIGTERM then wait up to `grace_s` (a broker's controlled shutdown) before SIGKILL."""
    return _act(action, target, name, ("running",), lambda c: c.stop(timeout=grace_s))


def start(action: str, target: str, name: str) -> FaultResult:
    return _act(action, target, name, ("exited", "created"), lambda c: c.start())


def restart(action: str, target: str, name: str, grace_s: int) -> FaultResult:
    return _act(action, target, name, ("running", "exited", "created"), lambda c: c.restart(timeout=grace_s))


FREEZE_ATTEMPTS = 4


def pause(target: str, name: str) -> FaultResult:
    """SIGSTOP every process of the container (docker pause: the cgroup freezer)."""

    def freeze(c: Container) -> None:
        # runc gives up ("unable to freeze") when a task is busy in the kernel at that moment, e.g. a broker
        # flushing its log under load; it thaws the cgroup again, so another attempt is safe
        for attempt in range(1, FREEZE_ATTEMPTS + 1):
            try:
                c.pause()
                return
            except APIError as exc:
                if "unable to freeze" not in str(exc) or attempt == FREEZE_ATTEMPTS:
                    raise
                time.sleep(0.2 * attempt)

    return _act("pause", target, name, ("running",), freeze)


def unpause(target: str, name: str) -> FaultResult:
    return _act("unpause", target, name, ("paused",), lambda c: c.unpause())


def kill_broker(spec: ClusterSpec, broker_id: int) -> FaultResult:
    return kill("kill-broker", *broker_target(spec, broker_id))


def stop_broker(spec: ClusterSpec, broker_id: int) -> FaultResult:
    return stop("stop-broker", *broker_target(spec, broker_id), grace_s=spec.kafka.stop_grace_seconds)


def start_broker(spec: ClusterSpec, broker_id: int) -> FaultResult:
    return start("start-broker", *broker_target(spec, broker_id))


def restart_broker(spec: ClusterSpec, broker_id: int) -> FaultResult:
    return restart("restart-broker", *broker_target(spec, broker_id), grace_s=spec.kafka.stop_grace_seconds)


def kill_zk(spec: ClusterSpec, zk_id: int) -> FaultResult:
    return kill("kill-zk", *zk_target(spec, zk_id))


def stop_zk(spec: ClusterSpec, zk_id: int) -> FaultResult:
    return stop("stop-zk", *zk_target(spec, zk_id), grace_s=10)


def start_zk(spec: ClusterSpec, zk_id: int) -> FaultResult:
    return start("start-zk", *zk_target(spec, zk_id))


# ---------------------------------------------------------------- the controller (either mode)


def controller_target(spec: ClusterSpec, node_id: int) -> tuple[str, str]:
    """A KRaft voter: its container is controllerN, or kafkaN in combined mode."""
    if not spec.kraft_mode:
        raise UsageError(f"cluster {spec.name} runs ZooKeeper mode: its controller is a broker (use kill-controller)")
    if node_id not in spec.topology.controller_ids:
        raise NotFoundError(
            f"unknown controller node id {node_id}; the quorum's voters are {_ids(spec.topology.controller_ids)}"
        )
    return f"controller {node_id}", spec.topology.controller_container(node_id)


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


def kill_controller(spec: ClusterSpec) -> FaultResult:
    """SIGKILL the active controller: the quorum leader (KRaft) or the controller broker (ZooKeeper mode)."""
    cid = active_controller(spec)
    if spec.kraft_mode:
        res = kill("kill-controller", *controller_target(spec, cid))
        res.note = f"quorum leader was node {cid}"
    else:
        res = kill("kill-controller", *broker_target(spec, cid))
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
        res = kill("kill-controller-quorum", *controller_target(spec, v))
        res.note = f"voter {v} of {len(voters)}" + (" (the leader)" if v == leader else "")
        out.append(res)
    return out


def start_controller(spec: ClusterSpec, node_id: int) -> FaultResult:
    return start("start-controller", *controller_target(spec, node_id))


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
    t0 = time.monotonic()
    last = "no metadata yet"
    while time.monotonic() - t0 < timeout:
        try:
            leader = current_leader(bootstrap, topic, partition)
            if leader != old_leader:
                return leader
            last = f"leader still {leader}"
        except ClusterctlError as exc:
            last = str(exc)
        time.sleep(0.2)
    raise TimeoutError_(f"{topic}-{partition} still had no new leader (was {old_leader}) after {timeout:.0f}s: {last}")


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
    out: list[FaultResult] = []
    try:
        for target, name in targets:
            r = pause(target, name)
            r.action = "pause-follower"
            r.note = f"follower of {topic}-{partition} (leader: broker {leader})"
            out.append(r)
        if on_paused is not None:
            on_paused(list(out))
        if seconds is None:
            return out
        _sleep(seconds, stop_event)
    finally:
        if seconds is not None or len(out) < len(targets):
            for r in list(out):
                if r.action == "pause-follower":
                    with contextlib.suppress(ClusterctlError):
                        out.append(unpause(r.target, r.container))
    return out


def kill_leader(spec: ClusterSpec, bootstrap: str, topic: str, partition: int) -> FaultResult:
    """SIGKILL the broker currently leading the partition (seed 002: `kill -9` the leader)."""
    leader = current_leader(bootstrap, topic, partition)
    broker = spec_broker(spec, leader)
    res = kill("kill-leader", *broker_target(spec, broker))
    res.note = f"leader of {topic}-{partition} was broker {leader}"
    if broker != leader:
        res.note += f" (the spec's broker {broker})"
    return res


def spec_broker(spec: ClusterSpec, metadata_id: int) -> int:
    """The spec's broker id for a broker id seen in metadata.

    Apache Kafka brokers carry the spec's ids (broker.id). tansu always reports node id 111 and cannot be
    told otherwise, so on the tansu engine (one broker) every id maps to that broker.
    """
    if spec.kafka.engine == "tansu" and len(spec.topology.broker_ids) == 1:
        return spec.topology.broker_ids[0]
    return metadata_id


# ---------------------------------------------------------------- network partition


def disconnect(spec: ClusterSpec, name: str) -> tuple[FaultResult, Detached]:
    """Take a node off the cluster network, remembering its static IP and aliases."""
    target, cname = node_target(spec, name)
    c = _container(cname)
    before = _require(c, target, "running", "paused")
    nets = c.attrs.get("NetworkSettings", {}).get("Networks") or {}
    entry = nets.get(spec.topology.network_name)
    if entry is None:
        raise ClusterctlError(
            f"{target} ({cname}) is not attached to {spec.topology.network_name} (already partitioned?)"
        )
    ipv4 = (entry.get("IPAMConfig") or {}).get("IPv4Address") or entry.get("IPAddress") or None
    aliases = [a for a in (entry.get("Aliases") or []) if a not in (c.id, c.id[:12], c.name)]
    if target not in aliases:
        aliases.append(target)
    detached = Detached(cname, spec.topology.network_name, ipv4, aliases)
    started = time.time()
    t0 = time.monotonic()
    try:
        _docker().networks.get(spec.topology.network_name).disconnect(c)  # type: ignore[attr-defined]
    except (APIError, NotFound) as exc:
        raise ClusterctlError(f"disconnecting {target} from {spec.topology.network_name} failed: {exc}") from None
    res = FaultResult(
        "partition-node", target, cname, before, "disconnected", started, round(time.monotonic() - t0, 3),
        note=f"off {spec.topology.network_name} (was {ipv4})",
    )  # fmt: skip
    return res, detached


def reconnect(d: Detached) -> FaultResult:
    """Put a node back on its network with the same static IP and aliases."""
    started = time.time()
    t0 = time.monotonic()
    try:
        _docker().networks.get(d.network).connect(d.container, ipv4_address=d.ipv4, aliases=d.aliases)  # type: ignore[attr-defined]
    except APIError as exc:
        if "already exists" not in str(exc):
            raise ClusterctlError(f"reconnecting {d.container} to {d.network} failed: {exc}") from None
    return FaultResult(
        "reconnect", d.container, d.container, "disconnected", "connected", started, round(time.monotonic() - t0, 3),
        note=f"on {d.network} as {d.ipv4}",
    )  # fmt: skip


@contextlib.contextmanager
def _always(heal: Callable[[], FaultResult], out: list[FaultResult]) -> Iterator[None]:
    """Run `heal` on exit, whatever happened (Ctrl-C included)."""
    try:
        yield
    finally:
        out.append(heal())


def _sleep(seconds: float, stop_event: threading.Event | None) -> None:
    if stop_event is None:
        time.sleep(seconds)
    else:
        stop_event.wait(seconds)


def pause_for(
    spec: ClusterSpec, target: str, name: str, seconds: float, stop_event: threading.Event | None = None
) -> list[FaultResult]:
    """Pause a container for `seconds`, then unpause (also on Ctrl-C or error)."""
    if seconds <= 0:
        raise UsageError(f"--for must be positive, got {seconds}")
    out = [pause(target, name)]
    with _always(lambda: unpause(target, name), out):
        _sleep(seconds, stop_event)
    return out


def pause_broker(
    spec: ClusterSpec, broker_id: int, seconds: float, stop_event: threading.Event | None = None
) -> list[FaultResult]:
    return pause_for(spec, *broker_target(spec, broker_id), seconds=seconds, stop_event=stop_event)


def partition_node(
    spec: ClusterSpec, name: str, seconds: float, stop_event: threading.Event | None = None
) -> list[FaultResult]:
    """Disconnect a node from the cluster network for `seconds`, then reconnect it (also on error)."""
    if seconds <= 0:
        raise UsageError(f"--for must be positive, got {seconds}")
    res, detached = disconnect(spec, name)
    out = [res]
    with _always(lambda: reconnect(detached), out):
        _sleep(seconds, stop_event)
    return out
