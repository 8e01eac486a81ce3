"""Run the rolling upgrade of a KRaft cluster to another Kafka version, node by node, and finalize it on request.

The spec's kafka.version is set to the target (clusterctl.spec.edit: the user's file, comments kept) and the
compose file rendered once; then each node of kafka.upgrade_plan.roll_order is recreated on its own through
compose (`up --no-deps SERVICE`), a node already on the target image is left running (a resumed run restarts
nothing twice), and each is waited on before the next: a controller until it fetches from the quorum leader again,
a broker until it is back in its own metadata (unfenced) and every partition's ISR is full. Finalize runs Kafka's
own `kafka-features.sh upgrade --release-version` in a broker and is read back from ApiVersions.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterctl.compose.render import render
from clusterctl.errors import ClusterctlError
from clusterctl.kafka import upgrade_plan as plan
from clusterctl.kafka.admin import wait_full_isr
from clusterctl.kafka.features import Features, describe_features
from clusterctl.kafka.kraft import quorum as kraft
from clusterctl.kafka.kraft.migration import lock_path as migration_lock
from clusterctl.runowner import holder, own
from clusterctl.runtime import compose, volumes
from clusterctl.runtime import docker as dk
from clusterctl.runtime import migrate_checks as checks
from clusterctl.signals import held
from clusterctl.spec import edit
from clusterctl.spec.kafkadist import built_versions, offline_image
from clusterctl.spec.model import ClusterSpec, load_spec
from clusterctl.wait import wait_until

Progress = Callable[[str], None]
NodeHook = Callable[[str, bool], None]  # (service, done): False as its roll starts, True once it is back
FEATURE_TOOL = "kafka-features.sh"


@dataclass
class NodeRun:
    service: str
    seconds: float
    restarted: bool
    detail: str


@dataclass
class UpgradeResult:
    cluster: str
    state_file: str
    from_version: str
    to_version: str
    ran: list[NodeRun] = field(default_factory=list)
    finalized: str | None = None
    metadata_level: int | None = None
    features: dict[str, int] = field(default_factory=dict)
    status: plan.UpgradeStatus | None = None


def _retry(exc: BaseException) -> bool:
    return isinstance(exc, ClusterctlError)


def _addresses(spec: ClusterSpec) -> list[tuple[str, int]]:
    return [(spec.topology.host, spec.topology.broker_host_port(b)) for b in spec.topology.broker_ids]


def features(spec: ClusterSpec) -> Features:
    return describe_features(_addresses(spec))


def _image_of(spec: ClusterSpec, service: str) -> str | None:
    """The image `service`'s container runs; None when it is absent or not running (an interrupted recreate)."""
    container = dk.find_container(spec.topology.container_name(service))
    if container is None or container.status != "running":
        return None
    return str(container.attrs.get("Config", {}).get("Image") or "") or None


def _node_id(spec: ClusterSpec, service: str) -> tuple[str, int]:
    """("broker" | "controller", node.id) of a node's service; a combined node (kafkaN, a voter too) is a broker."""
    ids = {svc: node for node, svc in spec.topology.node_services.items()}
    if service not in ids:
        raise ClusterctlError(f"{service} is not a node of cluster {spec.name}")
    return ("broker" if ids[service] in spec.topology.broker_ids else "controller"), ids[service]


def _wait_voter_fetching(spec: ClusterSpec, node_id: int, since_ms: int, timeout: float) -> str:
    """The restarted voter fetches from the quorum leader again (a fetch after `since_ms`), caught up."""

    def look() -> tuple[str, str]:
        info = kraft.describe(spec)
        voter = next((v for v in info.voters if v.node_id == node_id), None)
        if info.leader_id < 0 or voter is None:
            return "", f"leader {info.leader_id}, voter {node_id} {'absent' if voter is None else 'present'}"
        if info.leader_id != node_id and voter.last_fetch_ms < since_ms:
            return "", f"voter {node_id} has not fetched since its restart"
        if voter.log_end_offset < info.high_watermark:
            return "", f"voter {node_id} at {voter.log_end_offset}, high watermark {info.high_watermark}"
        return f"quorum leader {info.leader_id}, epoch {info.leader_epoch}, voter {node_id} caught up", ""

    found = wait_until(look, timeout=timeout, what=f"controller {node_id} back in the quorum", interval=0.5,
                       done=lambda r: bool(r[0]), seen=lambda r: r[1], retry_on=_retry)  # fmt: skip
    return found[0]


def _roll(spec: ClusterSpec, service: str, image: str, timeout: float, root: Path | None) -> tuple[bool, str]:
    """Recreate `service` on `image` unless it runs it already; wait until it is back. (restarted, what was seen)"""
    kind, node_id = _node_id(spec, service)
    detail = ""
    bootstrap = spec.topology.bootstrap_servers
    if kind == "broker" or spec.kraft.combined:
        wait_full_isr(bootstrap, timeout, poll=1.0)  # the node may go down without a partition losing its ISR
    since_ms = 0  # a node left as it was must be back too: a run stopped during its roll may have left it starting
    restarted = _image_of(spec, service) != image
    if restarted:
        since_ms = int(time.time() * 1000)
        volumes.create(spec, volumes.check(spec, root))
        with held():  # a stop signal waits for the recreate: never a node left removed and not started again
            compose.run(spec, "up", "-d", "--no-deps", "--pull", "never", service, root=root)
    if kind == "controller" or spec.kraft.combined:
        detail = _wait_voter_fetching(spec, node_id, since_ms, timeout)
    if kind == "broker":
        checks.wait_broker_back(spec, node_id, timeout, in_zookeeper=False)
        waited = wait_full_isr(bootstrap, timeout, poll=1.0)
        detail = f"broker {node_id} back, every ISR full after {waited:.1f}s"
    return restarted, detail if restarted else f"already on {image}; {detail}"


def _tool(container: Any, *args: str) -> str:
    """Kafka's feature tool in `container`; its output (ClusterctlError with its last line when it fails)."""
    res = container.exec_run([FEATURE_TOOL, *args], demux=True)
    out = b"".join(part or b"" for part in res.output).decode("utf-8", "replace").strip()
    if res.exit_code != 0:
        last = out.splitlines()[-1] if out else ""
        raise ClusterctlError(f"`{FEATURE_TOOL} {' '.join(args)}` failed (exit {res.exit_code}): {last}")
    return out


def version_mapping(text: str) -> dict[str, int]:
    """`kafka-features version-mapping` output ("metadata.version=33 (4.4)", "kraft.version=1") as levels."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        m = re.match(r"^([a-z][a-z0-9_.]*)=(\d+)\b", line.strip())
        if m:
            out[m.group(1)] = int(m.group(2))
    return out


def finalize(spec: ClusterSpec, version: str, timeout: float) -> Features:
    """Kafka's feature tool in a broker: `upgrade --release-version <major.minor>`, then every feature level the
    release maps to (`version-mapping`) read back from ApiVersions."""
    broker = spec.topology.broker_ids[0]
    container = dk.get_container(spec.topology.broker_container(broker))
    bootstrap = f"{spec.topology.broker_service(broker)}:{spec.kafka.internal_port}"
    release = plan.release(version)
    wanted = version_mapping(_tool(container, "version-mapping", "--release-version", release))
    if "metadata.version" not in wanted:
        raise ClusterctlError(f"`{FEATURE_TOOL} version-mapping --release-version {release}` named no metadata.version")
    _tool(container, "--bootstrap-server", bootstrap, "upgrade", "--release-version", release)

    def behind(f: Features) -> list[str]:
        return [f"{n} {f.finalized.get(n, 0)} (not {lvl})" for n, lvl in wanted.items() if f.finalized.get(n, 0) < lvl]

    return wait_until(
        lambda: features(spec), timeout=timeout, what=f"the feature levels of {release} finalized", interval=1.0,
        done=lambda f: not behind(f), seen=lambda f: "; ".join(behind(f)), retry_on=_retry,
    )  # fmt: skip


def running_version(spec: ClusterSpec, state: plan.UpgradeState | None) -> str:
    """The Kafka version the nodes run, from their containers' image tags; mid-roll, the recorded start."""
    images = {s: _image_of(spec, s) for s in plan.roll_order(spec, None)}
    missing = [s for s, image in images.items() if image is None]
    resuming = state is not None and state.finalized is None
    if missing and not (resuming and state is not None and missing == [state.current]):
        raise plan.UpgradeRefused(
            f"cluster {spec.name} is not running ({', '.join(missing)} not running): `clusterctl up` first, then "
            "upgrade"
        )
    versions = sorted({str(image).rpartition(":")[2] for image in images.values() if image is not None})
    if resuming and state is not None and (missing or len(versions) > 1):
        return state.from_version  # mid-roll (the node being rolled when it stopped may be down)
    if len(versions) == 1:
        return versions[0]
    runs = ", ".join(f"{s} {str(i).rpartition(':')[2]}" for s, i in images.items())
    raise plan.UpgradeRefused(f"cluster {spec.name}'s nodes run different versions ({runs}) and no upgrade is recorded")


def upgrade(
    spec_path: Path,
    to: str,
    yes: bool = False,
    timeout: float = 300.0,
    root: Path | None = None,
    progress: Progress | None = None,
    on_node: NodeHook | None = None,
    until: str | None = None,
) -> UpgradeResult:
    """Roll every node to `to` (resuming a run that stopped; with `until`, only up to that node) and, with `yes`
    after a whole roll, finalize the feature levels."""
    say = progress or (lambda _m: None)
    spec = load_spec(spec_path)
    plan.check_target(spec, to)
    migrating = holder(migration_lock(spec_path))
    if migrating is not None:
        raise plan.UpgradeRefused(f"{migrating.command} is running on this spec ({migrating.where}): upgrade after it")
    with own(plan.lock_path(spec_path), f"upgrade --to {to}"):
        path = plan.state_path(spec_path)
        state = plan.load_state(path)
        if state is not None and state.cluster != spec.name:
            raise plan.UpgradeRefused(f"{path} records cluster {state.cluster}, not {spec.name}")
        running = running_version(spec, state)
        now = features(spec)
        plan.check_upgrade(spec, running, to, built_versions(), finalized=state.finalized if state else None,
                           metadata_level=now.metadata_level,
                           from_metadata_level=state.from_metadata_level if state else None)  # fmt: skip
        if state is None or state.to_version != to:
            carried = state.from_metadata_level if state is not None and state.finalized is None else None
            state = plan.UpgradeState(spec.name, running, to, carried if carried is not None else now.metadata_level)
        plan.save_state(path, state)
        if spec.kafka.version != to:
            say(f"spec {spec_path.name}: kafka.version {spec.kafka.version} → {to}")
            edit.write_value(spec_path, "kafka", "version", to)
            spec = load_spec(spec_path)
        out = spec.topology.compose_dir if root is None else root / spec.topology.compose_dir
        render(spec, out, protect=spec_path)
        image = offline_image(to)
        try:
            active: int | None = kraft.describe(spec).leader_id
        except ClusterctlError:
            active = None
        result = UpgradeResult(spec.name, str(path), state.from_version, to)
        order = plan.roll_order(spec, active)
        if until is not None:
            if until not in order:
                raise plan.UpgradeRefused(f"--until {until}: not a node of {spec.name} ({', '.join(order)})")
            if yes:
                raise plan.UpgradeRefused("--until stops the roll part way: finalize (--yes) needs every node on it")
            order = order[: order.index(until) + 1]
        for service in order:
            if service in state.done:
                continue
            say(f"{service}: to {image}")
            started = time.monotonic()
            state.started(service)
            plan.save_state(path, state)
            if on_node is not None:
                on_node(service, False)
            restarted, detail = _roll(spec, service, image, timeout, root)
            state.completed(service, restarted)
            plan.save_state(path, state)
            if on_node is not None:
                on_node(service, True)
            say(f"{service}: {detail}")
            result.ran.append(NodeRun(service, round(time.monotonic() - started, 1), restarted, detail))
        if yes and state.finalized is None:
            say(f"finalizing: {FEATURE_TOOL} upgrade --release-version {plan.release(to)}")
            done = finalize(spec, to, timeout)
            state.finalized = plan.release(to)
            plan.save_state(path, state)
            result.metadata_level, result.features = done.metadata_level, dict(done.finalized)
        else:
            now = features(spec)
            result.metadata_level, result.features = now.metadata_level, dict(now.finalized)
        result.finalized = state.finalized
        result.status = status(spec_path, spec, state, metadata_level=result.metadata_level)
        return result


def status(
    spec_path: Path,
    spec: ClusterSpec | None = None,
    state: plan.UpgradeState | None = None,
    metadata_level: int | None = None,
) -> plan.UpgradeStatus:
    """Where the recorded upgrade stands, with the metadata.version level the cluster reports now (asked here
    unless the caller has just read it)."""
    spec = spec or load_spec(spec_path)
    path = plan.state_path(spec_path)
    state = state if state is not None else plan.load_state(path)
    out = plan.status_of(state, plan.roll_order(spec, None), path, spec.name)
    out.running = holder(plan.lock_path(spec_path))
    out.metadata_level = metadata_level
    if metadata_level is None:
        try:
            out.metadata_level = features(spec).metadata_level
        except ClusterctlError:
            out.metadata_level = None
    return out
