"""Failover times from an observer Timeline: detection, controller change, new leader, ISR, write gap per fault."""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from clusterctl.chaos.timeline import Marker, Timeline, target_ids


@dataclass
class PartitionFailover:
    topic: str
    partition: int
    leader_before: int
    led_by_target: bool
    new_leader: int | None
    time_to_new_leader_s: float | None  # fault → a live leader other than the failed broker
    isr_shrunk_s: float | None  # fault → the failed broker left the ISR
    isr_full_s: float | None  # heal → ISR == replicas again
    unavailable_s: float | None  # leaderless (or led by the dead broker) after the fault
    write_gap_s: float | None = None  # longest wait for an acknowledged write after the fault (drill ledger)
    # other faults whose windows hold this row's leader change or longest write gap too: either could explain it
    also: list[str] = field(default_factory=list)
    # a new leader from outside the ISR (election_rules.py): what bounds the time instead of a timeout
    elected_by: str | None = None


@dataclass
class FaultMetrics:
    action: str
    target: str
    t: float
    broker: int | None
    zk: int | None
    detected_s: (
        float | None
    )  # broker: gone from /brokers/ids or metadata; zk: node not serving; controller: leader moved
    detected_by: str | None
    controller_change_s: float | None
    quorum_lost_s: float | None
    quorum_ok_after_heal_s: float | None
    heal_t: float | None
    partitions: list[PartitionFailover]
    window_end: float | None = None  # its effects are looked for up to here (see `analyze`)
    overlaps: list[str] = field(default_factory=list)  # other faults in effect at the same time


def _controller_target(m: Marker) -> int | None:
    words = m.target.split()
    return int(words[1]) if len(words) == 2 and words[0] == "controller" and words[1].isdigit() else None


AckTimes = Mapping[tuple[str, int], Sequence[float]]


def analyze(tl: Timeline, acks: AckTimes | None = None) -> list[FaultMetrics]:
    """Failover times for every fault marker (heals are paired with the next heal of its target, else the next).

    `acks`: per (topic, partition), the sorted times of the drill's acknowledged writes (its ledger);
    they give each partition's write gap, the client's view of the unavailability window.

    A fault's window runs from it until the first fault that starts after it was healed (the end of the timeline
    when none does, or when it was never healed): faults that overlap (broker 2 killed, broker 3 a moment later)
    each see the leader changes and write gaps that happen while both are in effect, and each such row names
    the other faults whose windows hold it too (`also`), for either could explain it.
    """
    out: list[FaultMetrics] = []
    faults = [m for m in tl.markers if not m.heal]
    windows = [(m, _window_end(tl, faults, m)) for m in faults]
    for m, until in windows:
        broker, zk_id = target_ids(m)
        heal = _heal_of(tl, m)
        nxt = until
        detected_s, detected_by = None, None
        if broker is not None:
            # an unanswered metadata request means the broker is gone only when it was the only one live;
            # with several, it is a client timeout and the broker list tells when the cluster noticed
            live_before = [e.value for e in tl.events if e.t < m.t and e.kind == "brokers" and e.source == "metadata"]
            lone = not live_before or len(live_before[-1] or []) <= 1
            for e in tl.events:
                if e.t < m.t:
                    continue
                if e.kind == "brokers" and isinstance(e.value, list) and broker not in e.value:
                    detected_s, detected_by = round(e.t - m.t, 3), e.source
                    break
                if lone and e.kind == "error" and e.source == "metadata":  # no broker answered at all
                    detected_s, detected_by = round(e.t - m.t, 3), "metadata (no answer)"
                    break
        controller = _controller_target(m)
        if controller is not None:
            for e in tl.events:
                if e.t >= m.t and e.kind == "controller" and e.source == "quorum" and e.value != controller:
                    detected_s, detected_by = round(e.t - m.t, 3), "quorum"
                    break
        if zk_id is not None and detected_s is None:  # a node fault's broker is detected first, when it is
            for s in tl.zk_modes:
                if s.t >= m.t and s.zk_id == zk_id and s.mode in ("down", "not serving"):
                    detected_s, detected_by = round(s.t - m.t, 3), "zk-mode"
                    break
        ctrl = next(
            (e.t for e in tl.events if e.t >= m.t and e.kind == "controller" and e.source in ("metadata", "quorum")),
            None,
        )
        q_lost = next((e.t for e in tl.events if e.t >= m.t and e.kind == "quorum" and e.value is False), None)
        q_ok = None
        if heal is not None:
            q_ok = next((e.t for e in tl.events if e.t >= heal.t and e.kind == "quorum" and e.value is True), None)
        # every fault gets its partitions' write gaps; leader and ISR times only where a broker is the target
        parts = _partition_failovers(tl, m, broker, heal, nxt, acks or {})
        others = [(n, end) for n, end in windows if n is not m]
        for p in parts:
            p.also = _also_explained(p, m, nxt, others, acks or {})
        overlaps = [f"{n.action} {n.target}" for n, end in others if n.t < nxt and m.t < end]
        out.append(
            FaultMetrics(
                action=m.action,
                target=m.target,
                t=m.t,
                broker=broker,
                zk=zk_id,
                detected_s=detected_s,
                detected_by=detected_by,
                controller_change_s=None if ctrl is None or ctrl > nxt else round(ctrl - m.t, 3),
                quorum_lost_s=None if q_lost is None or q_lost > nxt else round(q_lost - m.t, 3),
                quorum_ok_after_heal_s=None if q_ok is None or heal is None else round(q_ok - heal.t, 3),
                heal_t=heal.t if heal else None,
                partitions=parts,
                window_end=nxt,
                overlaps=overlaps,
            )
        )
    return out


def _heal_of(tl: Timeline, m: Marker) -> Marker | None:
    heals = [h for h in tl.markers if h.heal and h.t >= m.t]
    return next((h for h in heals if h.target == m.target), heals[0] if heals else None)


def _window_end(tl: Timeline, faults: list[Marker], m: Marker) -> float:
    """Until the first fault that starts after `m` was healed; the timeline's end if none does or it never was."""
    heal = _heal_of(tl, m)
    if heal is None:
        return tl.ended
    return next((f.t for f in faults if f.t > m.t and f.t > heal.t), tl.ended)


def _also_explained(
    p: PartitionFailover, m: Marker, until: float, others: list[tuple[Marker, float]], acks: AckTimes
) -> list[str]:
    """The other faults whose windows hold this row's leader change or its longest write gap."""
    moments: list[tuple[float, float]] = []
    if p.time_to_new_leader_s is not None:
        t = m.t + p.time_to_new_leader_s
        moments.append((t, t))
    if p.write_gap_s is not None:
        span = longest_gap_span(acks.get((p.topic, p.partition), ()), m.t, until)
        if span is not None:
            moments.append(span)
    return [f"{n.action} {n.target}" for n, end in others if any(n.t < b and a < end for a, b in moments)]


def _partition_failovers(
    tl: Timeline, m: Marker, broker: int | None, heal: Marker | None, until: float, acks: AckTimes
) -> list[PartitionFailover]:
    out: list[PartitionFailover] = []
    keys = sorted({(s.topic, s.partition) for s in tl.partitions})
    for topic, pid in keys:
        samples = [s for s in tl.partitions if (s.topic, s.partition) == (topic, pid)]
        before = [s for s in samples if s.t <= m.t]
        after = [s for s in samples if m.t < s.t <= until]
        if not before:
            continue
        b = before[-1]
        led = broker is not None and b.leader == broker
        new_leader, ttnl, unavailable = None, None, None
        if led:
            for s in after:
                if s.leader not in (-1, broker):
                    new_leader, ttnl = s.leader, round(s.t - m.t, 3)
                    break
            unavailable = ttnl
        # ZooKeeper holds the ISR in ZooKeeper mode; a broker's metadata can lag it by as long as a delayed link
        # holds the controller's UpdateMetadata, so the first of the two sources counts
        zk_isrs = [
            (e.t, e.value["isr"])
            for e in tl.events
            if e.kind == "partition-state" and e.source == "zk-watch" and e.subject == f"{topic}-{pid}"
        ]
        shrunk_at = [s.t for s in after if broker is not None and broker not in s.isr][:1]
        shrunk_at += [t for t, isr in zk_isrs if m.t < t <= until and broker is not None and broker not in isr][:1]
        shrunk = round(min(shrunk_at) - m.t, 3) if shrunk_at else None
        full = None
        if heal is not None:
            at_heal = [s for s in samples if s.t <= heal.t]
            if at_heal and set(at_heal[-1].isr) == set(at_heal[-1].replicas) and at_heal[-1].leader >= 0:
                full = 0.0
            for s in samples if full is None else []:
                if s.t >= heal.t and s.t <= until and set(s.isr) == set(s.replicas) and s.leader >= 0:
                    full = round(s.t - heal.t, 3)
                    break
        gap = write_gap(acks.get((topic, pid), ()), m.t, until)
        out.append(PartitionFailover(topic, pid, b.leader, led, new_leader, ttnl, shrunk, full, unavailable, gap))
    return out


def longest_gap_span(ack_times: Sequence[float], fault_t: float, until: float) -> tuple[float, float] | None:
    """(start, end) of the longest wait `write_gap` measures: from the fault or an ack to the next ack."""
    first = bisect.bisect_right(ack_times, fault_t)
    last = bisect.bisect_right(ack_times, until)
    if first == 0 or first == last:
        return None
    points = [fault_t, *ack_times[first:last]]
    return max(itertools.pairwise(points), key=lambda ab: ab[1] - ab[0])


def write_gap(ack_times: Sequence[float], fault_t: float, until: float) -> float | None:
    """Longest wait for the next acknowledged write from `fault_t` on, among acks up to `until`.

    None when no write was acknowledged before the fault (the load was not running) or none after it.
    """
    first = bisect.bisect_right(ack_times, fault_t)
    last = bisect.bisect_right(ack_times, until)
    if first == 0 or first == last:
        return None
    points = [fault_t, *ack_times[first:last]]
    return round(max(b - a for a, b in itertools.pairwise(points)), 3)


@dataclass
class PhaseMetrics:
    """One phase band of the timeline (a migration phase, a rollback) and what writes and leaders did in it."""

    phase: str
    started_s: float  # since the timeline started
    seconds: float
    done: bool  # False: it failed or was interrupted
    write_gap_s: float | None  # longest wait for an acknowledged write from the phase's start on, any partition
    write_gap_partition: str | None  # topic-partition of that wait
    leader_moves: int  # partition leader changes seen in metadata during the phase
    controller_changes: int  # changes of ZooKeeper's /controller or of the KRaft quorum's active controller


def phase_metrics(tl: Timeline, acks: AckTimes | None = None) -> list[PhaseMetrics]:
    """Per phase band: the longest write gap (write_gap over the band), leader moves and controller changes.

    A wait counts from the phase's start (a stall already under way, from there) up to the next acknowledged write,
    also when that write comes after the phase ended; a wait no acknowledged write ended (the load stopped) is not
    a write gap. None where no write was acknowledged before the phase began.
    """
    out: list[PhaseMetrics] = []
    for band in tl.phases:
        t1 = band.t1 if band.t1 is not None else tl.ended
        worst: tuple[float, str] | None = None
        for (topic, pid), times in sorted((acks or {}).items()):
            after = bisect.bisect_right(times, t1)
            gap = write_gap(times, band.t0, times[after] if after < len(times) else t1)
            if gap is not None and (worst is None or gap > worst[0]):
                worst = (gap, f"{topic}-{pid}")
        out.append(
            PhaseMetrics(
                band.name,
                round(band.t0 - tl.started, 3),
                round(t1 - band.t0, 3),
                band.done,
                worst[0] if worst else None,
                worst[1] if worst else None,
                _leader_moves(tl, band.t0, t1),
                sum(1 for e in tl.events if band.t0 < e.t <= t1 and e.kind == "controller" and e.source in
                    ("zk-watch", "quorum")),
            )
        )  # fmt: skip
    return out


def _leader_moves(tl: Timeline, t0: float, t1: float) -> int:
    """Leader changes in (t0, t1]: a partition led by another broker than the last leader seen (none: -1 skipped)."""
    moves = 0
    last: dict[tuple[str, int], int] = {}
    for s in sorted(tl.partitions, key=lambda s: s.t):
        if s.t > t1 or s.leader < 0:
            continue
        key = (s.topic, s.partition)
        if s.t > t0 and key in last and last[key] != s.leader:
            moves += 1
        last[key] = s.leader
    return moves
