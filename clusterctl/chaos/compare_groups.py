"""`scenario compare ... --group-protocols classic,consumer`: the same group drill once per group protocol, on the
same cluster, side by side (compare.py runs the series and keeps its rows).

The scenario's start_group step runs with each protocol in turn (the runs alternate, so a change in the machine's
load falls on both); each row records the main fault's consume gap, the longest wait of the partitions that fault
did not take away itself (others' gap: the group's own rebalance), what the group left unread, the setting that
bounds the gap, and the load average when the run ended.
"""

from __future__ import annotations

from typing import Any

from clusterctl.chaos.group_steps import GROUP_PROTOCOLS
from clusterctl.chaos.scenario import Scenario
from clusterctl.errors import UsageError


def parse_group_protocols(text: str) -> list[str]:
    """The protocols of `--group-protocols` (classic and/or consumer, once each); one UsageError line otherwise."""
    wanted = [p.strip() for p in text.split(",") if p.strip()]
    if not wanted or len(set(wanted)) != len(wanted) or any(p not in GROUP_PROTOCOLS for p in wanted):
        raise UsageError(f"--group-protocols takes classic and/or consumer (comma-separated, once each), got {text!r}")
    return wanted


def scenario_for_protocol(scenario: Scenario, protocol: str) -> Scenario:
    """The scenario with every start_group step on `protocol` (refused when it starts no group)."""
    steps = [dict(s) for s in scenario.steps]
    found = False
    for s in steps:
        if "start_group" in s:
            s["start_group"] = {**(s["start_group"] or {}), "protocol": protocol}
            found = True
    if not found:
        raise UsageError(
            f"scenario {scenario.name} starts no consumer group (no start_group step): --group-protocols has "
            "nothing to compare"
        )
    return Scenario.model_validate({**scenario.model_dump(by_alias=True), "steps": steps})


def main_gap(result: Any) -> Any:
    """The consume gap of the run's main fault: its first fault after the group started (None without a group)."""
    group = getattr(result, "group", None)
    gaps = [g for g in (group.gaps if group is not None else []) if g.gap_s is not None]
    return gaps[0] if gaps else None


def group_fields(result: Any, protocol: str) -> dict[str, Any]:
    """The group part of a CompareRun row."""
    group, gap = result.group, main_gap(result)
    verify = group.verify if group is not None else None
    out: dict[str, Any] = {
        "group_protocol": protocol,
        "consume_gap_s": gap.gap_s if gap else None,
        "others_gap_s": gap.others_gap_s if gap else None,
        "gap_bound": gap.bound if gap else None,
        "unread": verify.unread_count if verify is not None else None,
        "duplicated_reads": verify.duplicated if verify is not None else None,
        "by": "group-protocol",
    }
    if group is not None:
        out |= {"bounding_setting": group.session_setting, "bounding_ms": group.session_timeout_ms}
    return out
