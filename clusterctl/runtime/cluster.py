"""Cluster lifecycle on top of compose: up (and really wait), down, status."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterctl.errors import ClusterctlError, NotFoundError
from clusterctl.runtime import compose, health
from clusterctl.runtime import docker as dk
from clusterctl.spec import profiles
from clusterctl.spec.model import ClusterSpec
from clusterctl.zookeeper import client as zk


def check_rendered(spec: ClusterSpec) -> Path:
    """The rendered compose file, refusing when it is missing or no longer matches the spec."""
    from clusterctl.compose.render import render_compose

    path = compose.require_compose_file(spec)
    if path.read_text(encoding="utf-8") != render_compose(spec):
        raise ClusterctlError(
            f"{spec.topology.compose_file} is stale: the spec (or templates) changed since it was rendered",
            hint="run `clusterctl render`",
        )
    return path


def check_images(spec: ClusterSpec) -> None:
    """Offline profile: every image the compose file names must exist locally (nothing can be pulled)."""
    if spec.profile != "offline":
        return
    missing = dk.missing_images(sorted(set(compose.file_images(spec).values())))
    if missing:
        ours = [m for m in missing if profiles.ours(m)]
        hint = (
            f"run `{profiles.build_hint(ours)}`"
            if ours
            else "the offline profile never pulls: build or `docker load` it (`clusterctl images build` makes ours)"
        )
        what = f"image{'s' if len(missing) > 1 else ''} {', '.join(missing)}"
        raise NotFoundError(f"{what} not present locally", hint=hint)


@dataclass
class UpResult:
    project: str
    compose_file: str
    seconds_to_healthy: float
    zk_serving: int
    zk_nodes: int
    zk_leader: int | None
    brokers_registered: list[int] = field(default_factory=list)
    controller: int | None = None
    broker_reachable: bool | None = None
    mode: str = "zookeeper"
    quorum_voters: list[int] = field(default_factory=list)  # kraft: voters the quorum reports


def up(
    spec: ClusterSpec,
    timeout: float = 180.0,
    keep_on_failure: bool = False,
    on_report: Callable[[health.HealthReport, float], None] | None = None,
) -> UpResult:
    """`compose up -d`, then wait until really healthy; a failed first start is torn down again."""
    check_rendered(spec)
    check_images(spec)
    existed = bool(dk.project_containers(spec.topology.project))
    had_volumes = bool(dk.project_volumes(spec.topology.project))
    started = time.monotonic()
    try:
        compose.up(spec, pull="never" if spec.profile == "offline" else "missing")
        # the time `compose up` took counts: --timeout is from the start, not from the first health check
        report, _ = health.wait_healthy(spec, timeout, on_report=on_report, started=started)
    except (ClusterctlError, KeyboardInterrupt) as exc:
        if not keep_on_failure and not existed:
            try:
                compose.down(spec, volumes=not had_volumes)
            except ClusterctlError as down_exc:
                if isinstance(exc, ClusterctlError):
                    exc.message += f"; teardown also failed: {down_exc.message}"
        elif isinstance(exc, ClusterctlError) and not keep_on_failure:
            exc.message += " (containers that were already running are left as they were)"
        raise
    return UpResult(
        project=spec.topology.project,
        compose_file=str(spec.topology.compose_file),
        seconds_to_healthy=round(time.monotonic() - started, 1),
        zk_serving=report.zk_serving,
        zk_nodes=report.zk_nodes,
        zk_leader=report.zk_leaders[0] if len(report.zk_leaders) == 1 else None,
        brokers_registered=report.brokers_registered,
        controller=report.controller,
        broker_reachable=report.broker_reachable,
        mode=spec.kafka.mode,
        quorum_voters=report.quorum_voters,
    )


@dataclass
class DownResult:
    project: str
    containers_removed: list[str]
    networks_removed: list[str]
    volumes_removed: list[str]
    volumes_kept: list[str]


def down(spec: ClusterSpec, volumes: bool = False) -> DownResult:
    """Remove the project's containers and network (and volumes); harmless when nothing runs."""
    before_c = sorted(c.name for c in dk.project_containers(spec.topology.project))
    before_n = dk.project_networks(spec.topology.project)
    before_v = dk.project_volumes(spec.topology.project)
    if before_c or before_n or (volumes and before_v):
        compose.down(spec, volumes=volumes)
    after_v = dk.project_volumes(spec.topology.project)
    return DownResult(
        project=spec.topology.project,
        containers_removed=before_c,
        networks_removed=sorted(set(before_n) - set(dk.project_networks(spec.topology.project))),
        volumes_removed=sorted(set(before_v) - set(after_v)),
        volumes_kept=sorted(after_v),
    )


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


def status(spec: ClusterSpec) -> ClusterStatus:
    """Containers, ZooKeeper Mode per node, quorum, broker registrations and controller."""
    if spec.kraft_mode:
        return _status_kraft(spec)
    containers = dk.container_states(spec)
    nodes = zk.node_statuses(spec)
    mode_by_service = {spec.topology.zk_service(n.id): n.mode for n in nodes}
    services = [
        ServiceStatus(
            c.service, c.container, c.role, c.state, c.health, c.ip, c.host_port, mode_by_service.get(c.service)
        )
        for c in containers
    ]
    q = zk.summarize(nodes)
    registered: list[int] | None = None
    missing: list[int] | None = None
    controller: int | None = None
    reachable: bool | None = None
    lines = [q.summary]
    if all(c.state == "missing" for c in containers):
        lines = [f"cluster {spec.name} is not running: no containers (start it with `clusterctl up`)"]
    elif spec.kafka.engine == "tansu":
        reachable, _ = health.tansu_metadata_ok(spec.topology.bootstrap_servers)
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


def _status_kraft(spec: ClusterSpec) -> ClusterStatus:
    """Containers, the controller quorum (leader / followers / observers with lag) and broker fencing."""
    from clusterctl.kafka.kraft import quorum as kraft
    from clusterctl.kafka.kraft.describe_quorum import QuorumInfo

    containers = dk.container_states(spec)
    services = [ServiceStatus(c.service, c.container, c.role, c.state, c.health, c.ip, c.host_port) for c in containers]
    q = zk.summarize([])
    result = ClusterStatus(
        cluster=spec.name, engine=spec.kafka.engine, services=services, zookeeper=[], quorum=q,
        brokers_registered=None, brokers_missing=None, controller=None, mode="kraft",
    )  # fmt: skip
    if all(c.state == "missing" for c in containers):
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
    live, err = kraft.metadata_brokers(spec.topology.bootstrap_servers)
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
