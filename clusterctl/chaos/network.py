"""Network partition: take a node off the cluster network and put it back with the same IP and aliases."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from docker.errors import APIError, NotFound

from clusterctl.chaos.targets import FaultResult, _always, _container, _require, _sleep, node_target
from clusterctl.errors import ClusterctlError, FaultNotAppliedError, UsageError
from clusterctl.spec.model import ClusterSpec


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
    from clusterctl.runtime import fault_records

    fault_records.record(spec, "partition", target, cname)  # first: a SIGKILL after the cut leaves the record
    try:
        _docker().networks.get(spec.topology.network_name).disconnect(c)  # type: ignore[attr-defined]
    except (APIError, NotFound) as exc:
        fault_records.forget(spec, "partition", cname)
        raise FaultNotAppliedError(f"disconnecting {target} from {spec.topology.network_name} failed: {exc}") from None
    res = FaultResult(
        "partition-node", target, cname, before, "disconnected", started, round(time.monotonic() - t0, 3),
        note=f"off {spec.topology.network_name} (was {ipv4})",
    )  # fmt: skip
    return res, detached


def reconnect(d: Detached, spec: ClusterSpec | None = None) -> FaultResult:
    """Put a node back on its network with the same static IP and aliases (and forget `spec`'s record of the cut)."""
    from clusterctl.runtime import fault_records

    started = time.time()
    t0 = time.monotonic()
    try:
        _docker().networks.get(d.network).connect(d.container, ipv4_address=d.ipv4, aliases=d.aliases)  # type: ignore[attr-defined]
    except APIError as exc:
        if "already exists" not in str(exc):
            raise ClusterctlError(f"reconnecting {d.container} to {d.network} failed: {exc}") from None
    fault_records.forget(spec, "partition", d.container)
    return FaultResult(
        "reconnect", d.container, d.container, "disconnected", "connected", started, round(time.monotonic() - t0, 3),
        note=f"on {d.network} as {d.ipv4}",
    )  # fmt: skip


def partition_node(
    spec: ClusterSpec,
    name: str,
    seconds: float,
    stop_event: threading.Event | None = None,
    on_applied: Callable[[list[FaultResult]], None] | None = None,
) -> list[FaultResult]:
    """Disconnect a node from the cluster network for `seconds`, then reconnect it (also on error); `on_applied`
    sees the disconnect."""
    if seconds <= 0:
        raise UsageError(f"--for must be positive, got {seconds}")
    res, detached = disconnect(spec, name)
    out = [res]
    with _always(lambda: reconnect(detached, spec), out):
        if on_applied is not None:
            on_applied(list(out))
        _sleep(seconds, stop_event)
    return out
