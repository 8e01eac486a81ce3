"""A drill group's timeline from its members' logs: assignment changes, each fault's consume gap, and the check that
the group read every acknowledged record (pure: no Kafka, no I/O; drill_group.py reads the logs).

The consume gap of a partition, from a fault at F until the fault's window ends at U (analysis.analyze's window,
cut where the group stopped): the group makes *progress* on a partition when a member reads an offset past every
offset read of it before. Between two progress events at e_i and e_i+1 (e_0 = F), the partition *waits* from
max(e_i, A) to e_i+1, where A is the acknowledgement time (the drill ledger) of the first acknowledged record past
what was read by e_i: records were there to read and no member read a new one, whether the partition was assigned
to nobody, to a member that had died, or to a member that had stopped fetching. A wait still open at U counts up to
U. The fault's consume gap is the longest wait over all partitions; a partition with nothing to read (the load
stopped, or writes waited for a new leader) does not wait, so the write gap is not counted twice. Re-reading
records already read (after a rewind to the last commit) is not progress: that time counts too.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

# a partition stalled in a fault's window waited longer than this, or twice its normal wait, whichever is longer
STALLED_MIN_S = 1.0


@dataclass(frozen=True)
class Read:
    """One member's poll of one partition: offsets `lo`..`hi` (inclusive ranges) at `t`."""

    t: float
    member: int
    partition: int
    ranges: tuple[tuple[int, int], ...]

    @property
    def hi(self) -> int:
        return max(b for _a, b in self.ranges)


@dataclass
class AssignmentChange:
    t: float
    member: int
    kind: str  # assign | revoke | lost
    partitions: list[int]


@dataclass
class Wait:
    partition: int
    t0: float
    t1: float
    member_before: int | None  # the member whose read came last before it
    member_after: int | None  # the member whose read ended it (None: still open at the window's end)

    @property
    def seconds(self) -> float:
        return self.t1 - self.t0


@dataclass
class ConsumeGap:
    """A fault's consume gap: the longest wait of any partition in its window, and what the group did meanwhile."""

    action: str
    target: str
    t: float
    gap_s: float | None  # None: no partition had anything to read in the window
    partition: int | None
    gap_from: float | None  # epoch seconds
    member_before: int | None
    member_after: int | None
    unassigned_s: float | None  # within the gap: no live member had the partition assigned
    stalled_partitions: int  # partitions that waited past STALLED_MIN_S (and twice the normal wait)
    members_revoked: int  # members alive at the end of the window that had partitions taken away in it
    assignment_changes: int
    # the longest wait of a partition the fault did not take away itself (not held by the killed member, not led
    # by the killed broker): how far the group's own rebalance stopped the rest (classic: stop the world)
    others_gap_s: float | None = None
    bound: str | None = None  # the setting that bounds it (group_run.py names it)


@dataclass
class GroupVerify:
    """Every acknowledged record read by the group at least once; re-reads counted."""

    acked: int
    read: int  # records the members read, re-reads included
    unread_count: int
    duplicated: int  # re-reads of acknowledged records
    unread: list[str] = field(default_factory=list)  # "p0: 120-131", per partition
    ok: bool = False

    def summary(self) -> str:
        where = f" ({'; '.join(self.unread)})" if self.unread else ""
        return (
            f"{self.acked} acknowledged, {self.read} read by the group, {self.unread_count} unread{where}, "
            f"{self.duplicated} read more than once"
        )


def ownership(changes: Sequence[AssignmentChange], deaths: Mapping[int, float], end: float) -> dict[int, list[
        tuple[float, float, int]]]:  # fmt: skip
    """Per partition, (from, to, member) intervals of a live member holding it (a member holds nothing once dead)."""
    held: dict[tuple[int, int], float] = {}
    out: dict[int, list[tuple[float, float, int]]] = {}
    for c in sorted(changes, key=lambda c: c.t):
        for p in c.partitions:
            key = (c.member, p)
            if c.kind == "assign":
                held.setdefault(key, c.t)
            elif key in held:
                start = held.pop(key)
                out.setdefault(p, []).append((start, min(c.t, deaths.get(c.member, c.t)), c.member))
    for (member, p), start in held.items():
        out.setdefault(p, []).append((start, min(end, deaths.get(member, end)), member))
    return out


def unassigned(intervals: Sequence[tuple[float, float, int]], t0: float, t1: float) -> float:
    """How long within [t0, t1] no interval covers."""
    covered, reach = 0.0, t0
    for a, b, _m in sorted(intervals):
        a, b = max(a, reach), min(b, t1)
        if b > a:
            covered += b - a
            reach = b
    return round(max(0.0, (t1 - t0) - covered), 3)


def waits(
    partition: int, reads: Sequence[Read], acked: Sequence[tuple[int, float]], t0: float, t1: float
) -> list[Wait]:
    """One partition's waits in [t0, t1] (the module docstring defines them); `reads` sorted by time, `acked` the
    partition's acknowledged (offset, ack time) sorted by offset."""
    offsets = [o for o, _t in acked]
    high, last, member = -1, t0, None
    for r in reads:
        if r.t > t0:
            break
        if r.hi > high:
            high, member = r.hi, r.member
    out: list[Wait] = []
    for r in reads:
        if r.t <= t0 or r.t > t1 or r.hi <= high:
            continue
        i = bisect.bisect_right(offsets, high)
        if i < len(acked) and acked[i][1] < r.t:
            out.append(Wait(partition, max(last, acked[i][1]), r.t, member, r.member))
        high, last, member = r.hi, r.t, r.member
    i = bisect.bisect_right(offsets, high)
    if i < len(acked) and acked[i][1] < t1:
        out.append(Wait(partition, max(last, acked[i][1]), t1, member, None))
    return out


def longest(found: Sequence[Wait]) -> Wait | None:
    return max(found, key=lambda w: w.seconds) if found else None


def consume_gap(
    action: str,
    target: str,
    t: float,
    until: float,
    reads: Mapping[int, Sequence[Read]],
    acked: Mapping[int, Sequence[tuple[int, float]]],
    changes: Sequence[AssignmentChange],
    deaths: Mapping[int, float],
    normal_s: float,
    taken: frozenset[int] = frozenset(),
) -> ConsumeGap:
    """The consume gap of a fault at `t` whose window ends at `until` (see the module docstring); `taken`: the
    partitions the fault took away itself (held by the member it killed, led by the broker it killed)."""
    per = {p: longest(waits(p, reads.get(p, ()), acked.get(p, ()), t, until)) for p in sorted(acked)}
    worst = longest([w for w in per.values() if w is not None])
    others = longest([w for p, w in per.items() if w is not None and p not in taken])
    stalled = sum(1 for w in per.values() if w is not None and w.seconds > max(STALLED_MIN_S, 2 * normal_s))
    window = [c for c in changes if t <= c.t <= until]
    alive = {c.member for c in changes} - {m for m, d in deaths.items() if d <= until}
    revoked = {c.member for c in window if c.kind in ("revoke", "lost") and c.member in alive}
    gap = unassigned_s = None
    if worst is not None:
        gap = round(worst.seconds, 3)
        held = ownership(changes, deaths, until).get(worst.partition, [])
        unassigned_s = unassigned(held, worst.t0, worst.t1)
    return ConsumeGap(
        action=action,
        target=target,
        t=t,
        gap_s=gap,
        partition=worst.partition if worst else None,
        gap_from=worst.t0 if worst else None,
        member_before=worst.member_before if worst else None,
        member_after=worst.member_after if worst else None,
        unassigned_s=unassigned_s,
        stalled_partitions=stalled,
        members_revoked=len(revoked),
        assignment_changes=len(window),
        others_gap_s=round(others.seconds, 3) if others else (0.0 if set(per) - taken else None),
    )


def held_at(changes: Sequence[AssignmentChange], member: int, t: float) -> frozenset[int]:
    """The partitions `member` held at `t` by its own log."""
    held: set[int] = set()
    for c in sorted(changes, key=lambda c: c.t):
        if c.t > t:
            break
        if c.member == member:
            held = held | set(c.partitions) if c.kind == "assign" else held - set(c.partitions)
    return frozenset(held)


def normal_wait(reads: Mapping[int, Sequence[Read]], acked: Mapping[int, Sequence[tuple[int, float]]],
                t0: float, t1: float) -> float:  # fmt: skip
    """The longest wait of any partition in [t0, t1]: the group's normal wait before the first fault."""
    found = [w for p in acked for w in waits(p, reads.get(p, ()), acked[p], t0, t1) if w.member_after is not None]
    worst = longest(found)
    return round(worst.seconds, 3) if worst else 0.0


def verify_reads(reads: Mapping[int, Sequence[Read]], acked: Mapping[int, Sequence[tuple[int, float]]],
                 sample: int = 5) -> GroupVerify:  # fmt: skip
    """Every acknowledged (partition, offset) read at least once; re-reads of acknowledged records counted."""
    total = unread_count = duplicated = 0
    unread: list[str] = []
    for p in sorted(acked):
        counts: dict[int, int] = {}
        for r in reads.get(p, ()):
            for a, b in r.ranges:
                total += b - a + 1
                for o in range(a, b + 1):
                    counts[o] = counts.get(o, 0) + 1
        missing = [o for o, _t in acked[p] if o not in counts]
        duplicated += sum(counts[o] - 1 for o, _t in acked[p] if counts.get(o, 0) > 1)
        unread_count += len(missing)
        if missing and len(unread) < sample:
            unread.append(f"p{p}: {_ranges_text(missing)}")
    acked_n = sum(len(v) for v in acked.values())
    return GroupVerify(acked_n, total, unread_count, duplicated, unread, ok=unread_count == 0)


def _ranges_text(offsets: list[int], limit: int = 5) -> str:
    spans = ranges(offsets)
    shown = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in spans[:limit])
    return shown + (f" (+{len(spans) - limit} more ranges)" if len(spans) > limit else "")


def ranges(offsets: Sequence[int]) -> list[list[int]]:
    """Sorted offsets as inclusive [first, last] ranges (a member's log line)."""
    out: list[list[int]] = []
    for o in sorted(offsets):
        if out and o == out[-1][1] + 1:
            out[-1][1] = o
        elif not (out and o == out[-1][1]):
            out.append([o, o])
    return out


@dataclass
class GroupReport:
    """The drill group's part of a scenario result."""

    group: str
    protocol: str
    members: int
    session_setting: str  # what bounds noticing a dead member: session.timeout.ms, group.consumer.session.timeout.ms
    session_timeout_ms: int
    normal_s: float  # the longest wait before the first fault
    gaps: list[ConsumeGap] = field(default_factory=list)
    changes: list[AssignmentChange] = field(default_factory=list)
    killed: dict[int, float] = field(default_factory=dict)  # member → when the drill killed it
    verify: GroupVerify | None = None
    errors: list[str] = field(default_factory=list)  # what members logged as errors (the first few)
