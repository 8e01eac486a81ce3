"""What the cluster is doing now: containers, ZooKeeper Mode per node (or the KRaft controller quorum),
broker registrations and the controller, as one `ClusterStatus` (`clusterctl status`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterctl.errors import ClusterctlError
from clusterctl.kafka.kraft.migration import MigrationSummary, summary_beside
from clusterctl.runtime import health
from clusterctl.spec.model import ClusterSpec
from clusterctl.zookeeper import client as zk


@dataclass
class ServiceStatus:
    service: str
    container: str
    role: str
    state: str
    health: str | None
    ip: str | None
    host_port: int | None
    zk_mode: str | None = None
    node: str | None = None  # deploy.target swarm: the node the service's task runs on
    rack: str | None = None  # and that node's clusterctl.rack


@dataclass
class ClusterStatus:
    cluster: str
    engine: str
    services: list[ServiceStatus]
    zookeeper: list[zk.ZkNodeStatus]
    quorum: zk.QuorumSummary
    brokers_registered: list[int] | None  # None: not known (no quorum / tansu)
    brokers_missing: list[int] | None
    controller: int | None
    broker_reachable: bool | None = None
    summary: list[str] = field(default_factory=list)
    mode: str = "zookeeper"
    controllers: list[Any] | None = None  # kraft: kraft.QuorumMember rows (voters and observers)
    brokers: list[Any] | None = None  # kraft: kraft.BrokerFencing rows
    manager: str | None = None  # kafka-manager kind (cmak | console), when enabled
    manager_url: str | None = None  # where its web UI answers on the host
    migration: MigrationSummary | None = None  # a ZooKeeper → KRaft migration recorded beside the spec


def cluster_status(spec: ClusterSpec) -> ClusterStatus:
    """Containers, ZooKeeper Mode per node, quorum, broker registrations and controller."""
    if spec.kraft_mode:
        return _status_kraft(spec)
    nodes = zk.node_statuses(spec)
    mode_by_service = {spec.topology.zk_service(n.id): n.mode for n in nodes}
    services = _services(spec, mode_by_service)
    q = zk.summarize(nodes)
    registered: list[int] | None = None
    missing: list[int] | None = None
    controller: int | None = None
    reachable: bool | None = None
    lines = [q.summary]
    if all(c.state == "missing" for c in services):
        lines = [f"cluster {spec.name} is not running: no containers (start it with `clusterctl up`)"]
    elif spec.kafka.engine == "tansu":
        from clusterctl.kafka.brokers import metadata_brokers

        reachable = bool(metadata_brokers(spec.topology.bootstrap_servers)[0])
        lines.append(
            f"broker (tansu) {'answers' if reachable else 'does not answer'} on {spec.topology.bootstrap_servers}"
        )
    elif q.has_quorum:
        try:
            with zk.zk_client(spec.topology.zk_connect, timeout=3.0) as client:
                registered = zk.registered_brokers(client)
                controller = zk.controller_id(client)
            missing = [b for b in spec.topology.broker_ids if b not in registered]
            reg = ",".join(map(str, registered)) or "none"
            line = f"brokers registered: {reg} of {len(spec.topology.broker_ids)}"
            if missing:
                line += f" (missing {','.join(map(str, missing))})"
            lines.append(line)
            lines.append(f"controller: broker {controller}" if controller is not None else "controller: none")
        except ClusterctlError as exc:
            lines.append(f"brokers: unknown ({exc.message})")
    else:
        lines.append("brokers: unknown (ZooKeeper has no quorum)")
    return ClusterStatus(
        cluster=spec.name,
        engine=spec.kafka.engine,
        services=services,
        zookeeper=nodes,
        quorum=q,
        brokers_registered=registered,
        brokers_missing=missing,
        controller=controller,
        broker_reachable=reachable,
        summary=lines,
    )


def add_migration(result: ClusterStatus, spec_path: Path) -> ClusterStatus:
    """The ZooKeeper → KRaft migration recorded beside the spec, if any (an unreadable state file is a summary
    line: status still answers)."""
    try:
        result.migration = summary_beside(spec_path)
    except ClusterctlError as exc:
        result.summary.append(f"migration to KRaft: {exc.message}")
    return result


def _status_kraft(spec: ClusterSpec) -> ClusterStatus:
    """Containers, the controller quorum (leader / followers / observers with lag) and broker fencing."""
    from clusterctl.kafka.kraft import quorum as kraft
    from clusterctl.kafka.kraft.describe_quorum import QuorumInfo

    services = _services(spec, {})
    q = zk.summarize([])
    result = ClusterStatus(
        cluster=spec.name, engine=spec.kafka.engine, services=services, zookeeper=[], quorum=q,
        brokers_registered=None, brokers_missing=None, controller=None, mode="kraft",
    )  # fmt: skip
    if all(c.state == "missing" for c in services):
        result.summary = [f"cluster {spec.name} is not running: no containers (start it with `clusterctl up`)"]
        return result
    info: QuorumInfo | None = None
    try:
        info = kraft.describe(spec)
        v = kraft.view(spec, info)
        result.controllers = v.members
        result.controller = v.leader_id
        voters = [m for m in v.members if m.role != "observer"]
        needed = len(spec.topology.controller_ids) // 2 + 1
        if v.leader_id is None:
            result.summary.append(f"controller quorum: no leader (epoch {v.leader_epoch})")
        else:
            result.summary.append(
                f"controller quorum ok: leader {v.leader_id} ({v.leader_service}), epoch {v.leader_epoch}, "
                f"{len(voters)}/{len(spec.topology.controller_ids)} voters (needs {needed}), "
                f"high watermark {v.high_watermark}"
            )
    except ClusterctlError as exc:
        result.summary.append(f"controller quorum: unknown ({exc.message})")
    from clusterctl.kafka.brokers import metadata_brokers

    live, err = metadata_brokers(spec.topology.bootstrap_servers)
    result.brokers = kraft.fencing(spec, info, live)
    if live is None:
        result.summary.append(f"brokers: metadata unanswered ({err})")
    else:
        result.brokers_registered = [f.broker for f in result.brokers if f.registered]
        result.brokers_missing = [f.broker for f in result.brokers if f.state != "unfenced"]
        fenced = [f"{f.broker} ({f.state})" for f in result.brokers if f.state != "unfenced"]
        unfenced = [f.broker for f in result.brokers if f.state == "unfenced"]
        line = f"brokers unfenced: {','.join(map(str, unfenced)) or 'none'} of {len(spec.topology.broker_ids)}"
        result.summary.append(line + (f"; not serving: {', '.join(fenced)}" if fenced else ""))
    return result


def _services(spec: ClusterSpec, zk_modes: dict[str, str]) -> list[ServiceStatus]:
    """Each service's container (compose), or its current task with node and rack (swarm)."""
    return [
        ServiceStatus(
            c.service, c.container, c.role, c.state, c.health, c.ip, c.host_port, zk_modes.get(c.service),
            getattr(c, "node", None), getattr(c, "rack", None),
        )
        for c in health.states(spec)
    ]  # fmt: skip
