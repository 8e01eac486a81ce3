"""Real health: ZooKeeper quorum with one leader, brokers registered, a controller, and every broker's own metadata
listing every broker (or tansu answering).

KRaft mode (kraft.py): a controller quorum with a leader, every broker registered and unfenced, and a
metadata round trip.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from clusterctl.errors import ClusterctlError
from clusterctl.runtime.docker import ContainerState, container_states
from clusterctl.spec.model import ClusterSpec
from clusterctl.wait import wait_until
from clusterctl.zookeeper import client as zk


@dataclass
class HealthReport:
    """One look at the cluster: what is ready and what is still missing."""

    zk_serving: int
    zk_nodes: int
    zk_leaders: list[int]
    brokers_registered: list[int] = field(default_factory=list)
    controller: int | None = None
    broker_reachable: bool | None = None  # tansu engine: answered a metadata request
    missing: list[str] = field(default_factory=list)
    quorum_leader: int | None = None  # kraft: the active controller's node id
    quorum_voters: list[int] = field(default_factory=list)  # kraft: voters the quorum reports

    @property
    def healthy(self) -> bool:
        return not self.missing


def states(spec: ClusterSpec) -> list[ContainerState]:
    """Every service's container (compose) or current task (swarm)."""
    if spec.swarm:
        from clusterctl.runtime import swarm

        return list(swarm.task_states(spec))
    return container_states(spec)


def check(spec: ClusterSpec, zk_timeout: float = 1.5) -> HealthReport:
    """Probe everything `up` waits for; never raises for an unhealthy cluster."""
    if spec.kraft_mode:
        return _check_kraft(spec)
    statuses = zk.node_statuses(spec, timeout=zk_timeout)
    summary = zk.summarize(statuses)
    report = HealthReport(summary.serving, summary.nodes, summary.leaders)
    for c in states(spec):
        if c.state != "running":
            code = f", exit code {c.exit_code}" if c.exit_code not in (None, 0) else ""
            report.missing.append(f"container {c.container} {c.state}{code}")
        elif c.role == "kafka-manager" and c.health in ("starting", "unhealthy"):  # the console's healthcheck
            report.missing.append(f"container {c.container} {c.health}")
    for s in statuses:
        if not s.ok:
            report.missing.append(f"zk{s.id} {s.mode}")
    if len(summary.leaders) != 1 and summary.serving >= summary.needed:
        report.missing.append(f"zk leader ({len(summary.leaders)} leaders)")
    if spec.kafka.engine == "tansu":
        from clusterctl.kafka.brokers import metadata_brokers

        ids, err = metadata_brokers(spec.topology.bootstrap_servers)
        ok = bool(ids)
        report.broker_reachable = ok
        if not ok:
            report.missing.append(f"broker metadata on {spec.topology.bootstrap_servers} ({err or 'no brokers'})")
        return report
    if not summary.has_quorum:
        report.missing.append(f"broker registrations (ZooKeeper has no quorum: {summary.serving}/{summary.nodes})")
        return report
    gaps, report.brokers_registered, report.controller = zk_broker_gaps(spec, ask_brokers=not report.missing)
    report.missing += gaps
    return report


def zk_broker_gaps(spec: ClusterSpec, ask_brokers: bool = True) -> tuple[list[str], list[int], int | None]:
    """ZooKeeper mode, with a quorum: what the brokers lack (a line each), the registered brokers and the controller.

    A broker counts once it is in /brokers/ids, there is a /controller and (`ask_brokers`) every broker, asked on its
    own address, lists every broker: a registration is not yet known to the others (the controller's UpdateMetadata).
    """
    try:
        with zk.zk_client(spec.topology.zk_connect, timeout=3.0) as client:
            registered = zk.registered_brokers(client)
            controller = zk.controller_id(client)
    except ClusterctlError as exc:
        return [f"ZooKeeper session ({exc.message})"], [], None
    gaps = [f"broker {b} in /brokers/ids" for b in spec.topology.broker_ids if b not in registered]
    if controller is None:
        gaps.append("/controller")
    if not gaps and ask_brokers:
        from clusterctl.kafka.brokers import metadata_gaps

        gaps += metadata_gaps(spec.topology.broker_addresses(), set(spec.topology.broker_ids))
    return gaps, registered, controller


def _check_kraft(spec: ClusterSpec) -> HealthReport:
    from clusterctl.kafka.kraft import quorum as kraft

    report = HealthReport(0, 0, [])
    for c in states(spec):
        if c.state != "running":
            code = f", exit code {c.exit_code}" if c.exit_code not in (None, 0) else ""
            report.missing.append(f"container {c.container} {c.state}{code}")
    k = kraft.check(spec)
    report.missing += k.missing
    if k.quorum is not None:
        report.quorum_leader = k.quorum.leader_id if k.quorum.leader_id >= 0 else None
        report.quorum_voters = sorted(r.node_id for r in k.quorum.voters)
    if k.live_brokers is not None:
        report.brokers_registered = [b for b in spec.topology.broker_ids if b in k.live_brokers]
    report.controller = report.quorum_leader
    return report


def wait_healthy(
    spec: ClusterSpec,
    timeout: float,
    on_report: Callable[[HealthReport, float], None] | None = None,
    interval: float = 0.5,
    started: float | None = None,
) -> tuple[HealthReport, float]:
    """Poll `check` until healthy; return (report, seconds waited) or raise TimeoutError_ naming what is missing.

    `started` (a time.monotonic() reading) counts the wait from an earlier moment; at least one check is made.
    """
    started = time.monotonic() if started is None else started
    report = wait_until(
        lambda: check(spec),
        timeout=timeout,
        what="a healthy cluster",
        interval=interval,
        done=lambda r: r.healthy,
        seen=lambda r: f"still missing: {', '.join(r.missing)}",
        on_poll=on_report,
        started=started,
        hint="`clusterctl status` and `clusterctl logs SERVICE` show why",
    )
    return report, time.monotonic() - started
