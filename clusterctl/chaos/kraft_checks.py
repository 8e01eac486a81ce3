"""Scenario conditions on the KRaft controller quorum and broker fencing (and the controller in either mode)."""

from __future__ import annotations

from typing import Any

from clusterctl.errors import ClusterctlError, UsageError
from clusterctl.spec.model import ClusterSpec


def check_condition(
    spec: ClusterSpec, c: Any, controller_at_fault: int | None, bootstrap: str
) -> tuple[str | None, str]:
    """(what holds, or None; what was seen) for controller_quorum, controller_changed, broker_fenced and
    broker_registered (kraft: listed in metadata)."""
    from clusterctl.chaos.faults import active_controller
    from clusterctl.kafka.kraft import quorum as kraft

    name = c.name
    if name == "controller_changed":
        if controller_at_fault is None:
            raise UsageError("controller_changed needs a fault step before it (with a known active controller)")
        try:
            now = active_controller(spec)
        except ClusterctlError as exc:
            return None, str(exc)
        seen = f"active controller {now} (was {controller_at_fault})"
        return (seen if now != controller_at_fault else None), seen
    if name == "controller_quorum":
        if not spec.kraft_mode:
            raise UsageError(f"controller_quorum is a KRaft condition; cluster {spec.name} runs ZooKeeper mode")
        try:
            info = kraft.describe(spec, timeout=1.5)
        except ClusterctlError as exc:
            seen = f"no quorum answer ({exc.message})"
            return (seen if c.controller_quorum == "lost" else None), seen
        v = kraft.view(spec, info)
        voters = [m for m in v.members if m.role != "observer"]
        caught_up = [m for m in voters if m.lag == 0 and (m.role == "leader" or (m.last_fetch_ago_ms or 0) < 5000)]
        n = len(spec.topology.controller_ids)
        seen = f"leader {v.leader_id}, epoch {v.leader_epoch}, {len(caught_up)}/{n} voters caught up"
        if c.controller_quorum == "lost":
            return (seen if v.leader_id is None else None), seen
        if c.controller_quorum == "ok":
            return (seen if v.leader_id is not None else None), seen
        return (seen if v.leader_id is not None and len(caught_up) == n else None), seen
    live, err = kraft.metadata_brokers(bootstrap)
    if live is None:
        return None, f"metadata unanswered ({err})"
    seen = f"unfenced brokers {live}"
    if name == "broker_fenced":
        b = c.broker_fenced
        return (seen if (b.id not in live) == b.fenced else None), seen
    b = c.broker_registered
    return (seen if (b.id in live) == b.registered else None), seen
