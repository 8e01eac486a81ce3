"""By which rule each partition got its next leader (KIP-966), from the observer's timeline.

Kafka 4.x's controller (PartitionChangeBuilder) elects, in order: a live ISR member; with the ISR empty, an
unfenced member of the ELR (eligible leader replicas, ELR on); with ISR and ELR empty, the last known leader
(ELR on); and only with unclean.leader.election.enable, any live replica. The observer's ELR samples
(DescribeTopicPartitions, elrwatch.py) hold each partition's state just before a leader change, so each election
is named by the first rule that explains it. Without ELR samples (3.x) metadata's leader and ISR tell an ISR
election from an unclean one.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from clusterctl.chaos.timeline import Timeline

ISR, ELR, LAST_KNOWN, UNCLEAN = "isr", "elr", "last-known-leader", "unclean"


@dataclass
class Election:
    """A partition's leader changed to `leader`, and the rule that allowed it."""

    t: float
    topic: str
    partition: int
    leader_before: int  # -1: it had none
    leader: int
    rule: str  # isr | elr | last-known-leader | unclean
    isr_before: list[int]
    elr_before: list[int] | None  # None: not known (no DescribeTopicPartitions samples)
    last_known_before: list[int] | None
    leaderless_s: float | None  # how long it had no leader before (None: it had one)
    detail: str


@dataclass
class _State:
    t: float
    leader: int
    isr: list[int]
    elr: list[int] | None
    known: list[int] | None


def _states(tl: Timeline) -> dict[tuple[str, int], list[_State]]:
    """Each partition's samples in time order: DescribeTopicPartitions' where there are any, else metadata's."""
    out: dict[tuple[str, int], list[_State]] = defaultdict(list)
    for e in tl.elr:
        out[(e.topic, e.partition)].append(_State(e.t, e.leader, e.isr, e.elr, e.last_known_elr))
    with_elr = set(out)
    for p in tl.partitions:
        if (p.topic, p.partition) not in with_elr:
            out[(p.topic, p.partition)].append(_State(p.t, p.leader, p.isr, None, None))
    for states in out.values():
        states.sort(key=lambda s: s.t)
    return out


def _rule(leader: int, before: _State, after: _State) -> str:
    if leader in before.isr:
        return ISR
    if before.isr and set(before.isr) <= set(after.isr) and leader in after.isr:
        return ISR  # the ISR grew to it between two samples: an unclean or ELR election leaves the leader alone in it
    if before.elr is not None and not before.isr and leader in before.elr:
        return ELR
    if before.elr is not None and not before.isr and not before.elr and before.known == [leader]:
        return LAST_KNOWN
    return UNCLEAN


def _detail(e: Election, min_isr: int | None) -> str:
    part = f"{e.topic}-{e.partition}"
    after = f" after {e.leaderless_s:.1f}s without a leader" if e.leaderless_s is not None else ""
    below = f"min.insync.replicas={min_isr}" if min_isr else "min.insync.replicas"
    if e.rule == ISR:
        return f"ISR: broker {e.leader} leads {part}{after}, elected from the ISR {e.isr_before}"
    if e.rule == ELR:
        return (
            f"ELR: broker {e.leader} leads {part}{after}, elected from the ELR {sorted(e.elr_before or [])} with the "
            f"ISR empty: it left the ISR while the ISR was below {below}, so the high watermark never passed its "
            "log end (it has every committed record)"
        )
    if e.rule == LAST_KNOWN:
        return (
            f"last known leader: broker {e.leader} leads {part}{after}, elected with ISR and ELR empty "
            f"(last known ELR {e.last_known_before}): the leader that held the last committed records"
        )
    where = f"the ISR {e.isr_before}" + (f" nor the ELR {sorted(e.elr_before)}" if e.elr_before is not None else "")
    return f"unclean election: broker {e.leader} leads {part}{after}, in neither {where}"


def elections(tl: Timeline | None, min_isr: int | None = None) -> list[Election]:
    """Every leader change the timeline shows, with its rule, in time order."""
    if tl is None:
        return []
    out = []
    for (topic, partition), states in _states(tl).items():
        leaderless_since: float | None = None
        prev: _State | None = None
        for s in states:
            if prev is not None and s.leader >= 0 and s.leader != prev.leader:
                gone = round(s.t - leaderless_since, 1) if leaderless_since is not None else None
                e = Election(s.t, topic, partition, prev.leader, s.leader, _rule(s.leader, prev, s), list(prev.isr),
                             prev.elr, prev.known, gone, "")  # fmt: skip
                e.detail = _detail(e, min_isr)
                out.append(e)
            if s.leader < 0 and leaderless_since is None:
                leaderless_since = s.t
            elif s.leader >= 0:
                leaderless_since = None
            prev = s
    return sorted(out, key=lambda e: e.t)


def safety(elections_: list[Election], verify: Any, expect: str) -> str | None:
    """Which rule kept a drill's acknowledged writes (no loss), or which election lost them; None when no election
    from outside the ISR happened (the ISR rule and the verifier say it all)."""
    if verify is None:
        return None
    unclean = [e for e in elections_ if e.rule == UNCLEAN]
    kept = _first_each([e for e in elections_ if e.rule in (ELR, LAST_KNOWN)])
    if verify.lost_count:
        lossy = {(p.topic, p.partition) for p in verify.partitions if p.lost}
        losing = _first_each([e for e in unclean if (e.topic, e.partition) in lossy])
        if not losing:
            return None
        return f"{verify.lost_count} acknowledged lost by " + "; ".join(e.detail for e in losing)
    if not kept:
        return None
    tail = "; no unclean election" if not unclean else f"; also {len(unclean)} unclean election(s), nothing lost"
    return "0 lost, kept safe by " + "; ".join(e.detail for e in kept) + tail


def _first_each(found: list[Election]) -> list[Election]:
    """The first election of each partition."""
    seen: set[tuple[str, int]] = set()
    out = []
    for e in found:
        if (e.topic, e.partition) not in seen:
            seen.add((e.topic, e.partition))
            out.append(e)
    return out


BOUNDS = {
    ELR: "the return of broker {b}, an ELR member (KIP-966)",
    LAST_KNOWN: "the return of broker {b}, the last known leader (KIP-966)",
    UNCLEAN: "the return of broker {b}, elected uncleanly",
}


def mark_failovers(faults: list[Any], elections_: list[Election]) -> None:
    """Name, on each fault's partition rows, the election from outside the ISR after it that ended a wait without a
    leader (the one that gave the row's new leader, else the first): the new leader's time and the write gap are
    bounded by that broker's return, not by a session timeout (bounds.explain shows it). An election at the moment
    the old leader was fenced (its broker back already) stays bounded by the session timeout."""
    for f in faults:
        for p in f.partitions:
            after = [e for e in elections_ if e.t >= f.t and e.rule != ISR and e.leaderless_s is not None
                     and (e.topic, e.partition) == (p.topic, p.partition)]  # fmt: skip
            e = next((e for e in after if e.leader == p.new_leader), after[0] if after else None)
            if e is not None:
                p.elected_by = BOUNDS[e.rule].format(b=e.leader)
