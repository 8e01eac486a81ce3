"""Recovery: undo every fault, wait until the cluster is whole again, and the rolling restart that waits
for it between brokers.

"Whole" is what a user would check by hand: every ZooKeeper node serves, every broker is registered and
in every broker's metadata (KRaft: the quorum has its voters and every broker is unfenced), every Spark
worker of the spec is alive at its master, and for the rolling restart every partition's ISR is its full
replica set again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial

from clusterctl.chaos.faults import (
    Detached,
    FaultResult,
    broker_target,
    reconnect,
    restart_broker,
    start,
    state_of,
    unpause,
)
from clusterctl.errors import ClusterctlError
from clusterctl.kafka.admin import wait_full_isr
from clusterctl.spec.model import ClusterSpec
from clusterctl.wait import wait_until

# ---------------------------------------------------------------- heal everything


def heal_all(spec: ClusterSpec, detached: list[Detached] | None = None) -> list[FaultResult]:
    """Undo every fault: free filled disks (restarting their nodes), reconnect detached nodes, remove network
    degradations, unpause paused and start stopped containers; on a dynamic quorum, start a wiped controller on a
    fresh disk and make every controller of the spec a voter again."""
    from clusterctl.chaos.controllers import missing_controllers, provision_controller, restore_voters
    from clusterctl.chaos.degrade import heal_all_network
    from clusterctl.chaos.disk import heal_all_disks
    from clusterctl.runtime.cluster import Cluster

    cluster = Cluster(spec)
    out: list[FaultResult] = []
    problems: list[str] = []

    def undo(fn: Callable[[], FaultResult]) -> None:  # every undo is tried, also after one fails
        try:
            out.append(fn())
        except ClusterctlError as exc:
            problems.append(exc.message)

    if spec.swarm:  # a host a kill-node stopped started again; then drained nodes active, paused tasks unpaused,
        # every service's task running again
        from clusterctl.chaos.nodes import heal_nodes
        from clusterctl.chaos.swarm_faults import heal

        try:
            out.extend(heal_nodes(spec))
            out.extend(heal(spec))
        except ClusterctlError as exc:
            problems.append(exc.message)
        if not problems:
            from clusterctl.runtime import fault_records

            fault_records.forget_all(spec)
        _raise_problems(problems, out)
        return out
    try:  # first: a node must not be started on a full disk
        out.extend(heal_all_disks(spec))
    except ClusterctlError as exc:
        problems.append(exc.message)
    for d in detached or []:
        undo(partial(reconnect, d, spec))
    for node_id in missing_controllers(spec):  # wiped (kraft.quorum dynamic): a replacement on a fresh disk
        undo(partial(provision_controller, spec, node_id))
    for service, target in (
        [(spec.topology.zk_service(i), f"zk {i}") for i in spec.topology.zk_ids]
        + [(spec.topology.controller_service(i), f"controller {i}") for i in spec.topology.dedicated_controller_ids]
        + [(spec.topology.broker_service(i), f"broker {i}") for i in spec.topology.broker_ids]
        + [(spec.topology.spark_worker_service(i), f"spark-worker {i}") for i in spec.topology.spark_worker_ids]
    ):
        name = spec.topology.container_name(service)
        c = cluster.find(service)
        if c is None:
            continue
        st = state_of(c)
        if st == "paused":
            undo(partial(unpause, target, name))
        elif st in ("exited", "created"):
            undo(partial(start, "start", target, name))
        nets = c.attrs.get("NetworkSettings", {}).get("Networks") or {}
        if spec.topology.network_name not in nets and st in ("running", "paused"):
            ip = spec.topology.static_ips()[_ip_key(target)]
            undo(partial(reconnect, Detached(name, spec.topology.network_name, ip, [service]), spec))
    try:
        out.extend(heal_all_network(spec))
    except ClusterctlError as exc:
        problems.append(exc.message)
    try:  # after the network: a replaced controller must reach the leader to catch up
        out.extend(restore_voters(spec))
    except ClusterctlError as exc:
        problems.append(exc.message)
    _forget_healed(spec)
    _raise_problems(problems, out)
    return out


def _forget_healed(spec: ClusterSpec) -> None:
    """Remove the records of every pause and cut that no longer holds."""
    from clusterctl.runtime import fault_records

    still = {r.container for r in fault_records.still_applied(spec, fault_records.records(spec))}
    fault_records.forget_all(spec, keep=still)


def _raise_problems(problems: list[str], out: list[FaultResult]) -> None:
    """Every undo was tried; any that failed is raised as one error that carries what was healed."""
    if problems:
        err = ClusterctlError("; ".join(problems))
        err.result = out
        raise err


def _ip_key(target: str) -> str:
    kind, ident = target.split()
    keys = {"zk": "zookeeper node", "controller": "kraft controller", "broker": "kafka broker"}
    return keys.get(kind, kind.replace("-", " ")) + f" {ident}"  # spark-worker N: "spark worker N"


@dataclass
class HealWait:
    """What `heal` waited for once the containers were back: registrations, metadata, ZK serving."""

    seconds: float
    brokers: list[int]  # registered in /brokers/ids and listed in every live broker's metadata
    zk_serving: list[int]


def wait_healed(
    spec: ClusterSpec,
    timeout: float = 120.0,
    on_progress: Callable[[str], None] | None = None,
    interval: float = 0.5,
) -> HealWait:
    """Wait until every ZK node of the spec serves and every broker is registered and in metadata
    (KRaft: the quorum has a leader and every voter, every broker is unfenced), and with spark.enabled every
    Spark worker is alive at the master.

    A broker counts when it is in /brokers/ids and every broker answers a metadata request (each asked
    on its own address, 2 s bound) listing it. tansu (no registration) counts when it answers metadata.
    """
    started = time.monotonic()

    def missing() -> tuple[list[str], list[int]]:
        out, serving = _missing_for_heal(spec)
        if out and on_progress is not None:
            on_progress("waiting for: " + ", ".join(out[:4]) + (" ..." if len(out) > 4 else ""))
        return out, serving

    _, serving = wait_until(
        missing,
        timeout=timeout,
        what="the healed cluster to be whole",
        interval=interval,
        done=lambda r: not r[0],
        seen=lambda r: f"containers run, still missing: {', '.join(r[0])}",
        hint="`clusterctl status` and `clusterctl logs SERVICE` show why",
    )
    return HealWait(round(time.monotonic() - started, 3), list(spec.topology.broker_ids), serving)


def _missing_for_heal(spec: ClusterSpec) -> tuple[list[str], list[int]]:
    """What is not whole yet, and the ZooKeeper nodes that serve."""
    from clusterctl.zookeeper import client as zk

    statuses = zk.node_statuses(spec, timeout=1.0)
    serving = [s.id for s in statuses if s.serving]
    missing = [f"zk{s.id} {s.mode}" for s in statuses if not s.serving]
    if spec.kraft_mode:
        from clusterctl.kafka.kraft import quorum as kraft

        missing += kraft.check(spec).missing  # quorum leader, voters, brokers unfenced, metadata
    elif spec.kafka.engine == "kafka":
        from clusterctl.runtime import health

        if zk.summarize(statuses).has_quorum:
            missing += health.zk_broker_gaps(spec)[0]
        else:
            missing.append("broker registrations (no ZooKeeper quorum)")
    else:
        from clusterctl.kafka.brokers import metadata_brokers

        ids, err = metadata_brokers(spec.topology.bootstrap_servers)
        if not ids:
            missing.append(f"broker metadata ({err or 'no answer'})")
    if spec.spark.enabled:
        from clusterctl.spark.standalone import live_worker_hosts, master_ui

        live = live_worker_hosts(master_ui(spec))
        missing += [
            f"spark-worker{i} alive at the master"
            for i in spec.topology.spark_worker_ids
            if spec.topology.spark_worker_ip(i) not in live
        ]
    return missing, serving


# ---------------------------------------------------------------- rolling restart


@dataclass
class RollingStep:
    broker: int
    restart: FaultResult
    isr_full_after_s: float


def rolling_restart(
    spec: ClusterSpec,
    bootstrap: str,
    timeout: float = 300.0,
    brokers: list[int] | None = None,
    on_step: Callable[[RollingStep], None] | None = None,
) -> list[RollingStep]:
    """Restart brokers one at a time, waiting for full ISR on all partitions before the next."""
    ids = brokers or spec.topology.broker_ids
    for b in ids:
        broker_target(spec, b)
    wait_full_isr(bootstrap, timeout)
    steps: list[RollingStep] = []
    for b in ids:
        res = restart_broker(spec, b)
        waited = wait_full_isr(bootstrap, timeout)
        step = RollingStep(b, res, waited)
        steps.append(step)
        if on_step:
            on_step(step)
    return steps
