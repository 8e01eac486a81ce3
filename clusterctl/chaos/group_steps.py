"""The consumer-group steps of a drill (group_run.py runs them): a group beside the load, its faults and its check.

    - start_group: {members: 3, protocol: consumer}   # N member processes, committing; returns once every
                                                       # partition is assigned
    - fault: {action: kill-member, member: 1}          # SIGKILL member 1's process (no LeaveGroup)
    - fault: {action: kill-coordinator}                # SIGKILL the broker coordinating the drill's group
    - wait_for: {group_consuming: {}, timeout: 120}    # on every partition, a record written after the latest
                                                       # fault read by a live member
    - verify_group: {timeout: 60}                      # the group read every acknowledged record (at least once)

`protocol` is the group protocol every member uses: classic (JoinGroup/SyncGroup, the client's session.timeout.ms)
or consumer (KIP-848, GA in Kafka 4.0: the broker assigns incrementally; the session timeout is the group's,
broker side). The report gives each fault's consume gap (group_timeline.py defines it).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from clusterctl.spec import validate

GroupProtocol = Literal["classic", "consumer"]
GROUP_PROTOCOLS: tuple[str, ...] = ("classic", "consumer")
GROUP_FAULTS = ("kill-member", "kill-coordinator")
NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class StartGroup(_M):
    members: int = Field(default=3, ge=1, le=validate.MAX_GROUP_MEMBERS, description="member processes")
    protocol: GroupProtocol = Field(default="classic", description="group.protocol of every member")
    group: str | None = Field(default=None, pattern=NAME, description="default: drill-<scenario>-<run id>")
    session_timeout_ms: int | None = Field(
        default=None,
        ge=1000,
        le=3_600_000,
        description="classic: each member's session.timeout.ms; consumer: the group's consumer.session.timeout.ms "
        "(within the broker's group.consumer.min/max.session.timeout.ms); default: Kafka's, 45000 for both",
    )
    commit_interval_ms: int = Field(default=1000, ge=100, le=60_000, description="auto.commit.interval.ms")
    timeout: float = Field(
        default=60.0, gt=0, le=validate.MAX_SECONDS, description="wait for every partition to be assigned"
    )


class VerifyGroup(_M):
    timeout: float = Field(
        default=120.0, gt=0, le=validate.MAX_SECONDS, description="wait for the group to read every acked record"
    )
    max_consume_gap: float | None = Field(
        default=None, gt=0, le=validate.MAX_SECONDS, description="fail when a fault's consume gap is longer (s)"
    )


class GroupConsuming(_M):
    """wait_for: on every partition a live member read a record written after the latest fault (or the group's
    start): records it had fetched before the fault do not count."""


def check_group_steps(steps: list[tuple[str, object]]) -> None:
    """A group fault, group_consuming or verify_group needs a start_group before it; one group per drill."""
    started: int | None = None
    for index, (kind, args) in enumerate(steps, 1):
        uses = (kind == "fault" and getattr(args, "action", None) in GROUP_FAULTS) or kind == "verify_group"
        uses = uses or (kind in ("wait_for", "assert") and getattr(args, "group_consuming", None) is not None)
        if kind == "start_group":
            if started is not None:
                raise ValueError(f"step {index} (start_group): the group started at step {started} runs already")
            started = index
        elif uses and started is None:
            raise ValueError(f"step {index} ({kind}): no start_group step comes before it")
        if kind == "fault" and getattr(args, "action", None) == "kill-member":
            members = getattr(steps[started - 1][1], "members", 0) if started else 0
            if not 1 <= (getattr(args, "member", None) or 0) <= members:
                raise ValueError(f"step {index} (fault): kill-member member: 1..{members} (the group's members)")
