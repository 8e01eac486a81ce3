"""The drill timeline: what the observer saw (events, samples, gaps) and what the drill did (markers)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

INTERVAL_S = 0.5  # the drill load's acked/s intervals (load.py), as the timeline and the live dashboard plot them

HEAL_ACTIONS = {
    "unpause",
    "reconnect",
    "start",
    "start-broker",
    "start-zk",
    "start-controller",
    "start-spark-worker",
    "start-node",
    "restart-broker",
    "heal",
    "heal-network",
    "free-disk",
    "provision-controller",
    "add-controller",
    "remove-controller",
}
PAUSE_ACTIONS = {"pause", "pause-broker", "pause-follower"}


@dataclass
class Event:
    """Something that changed, with where we saw it."""

    t: float  # epoch seconds
    source: str  # metadata | zk-watch | zk-mode | fault | step | load
    kind: str  # leader | isr | controller | brokers | mode | quorum | session | fault | heal | error ...
    subject: str  # "drill-0", "zk2", "broker 3", ...
    detail: str
    value: Any = None


@dataclass
class PartitionSample:
    t: float
    topic: str
    partition: int
    leader: int  # -1: no leader
    replicas: list[int]
    isr: list[int]
    source: str = "metadata"


@dataclass
class ZkModeSample:
    t: float
    zk_id: int
    mode: str


@dataclass
class ControllerSample:
    """KRaft: the quorum leader (-1: none, or no answer) and its epoch."""

    t: float
    leader: int
    epoch: int


@dataclass
class FencedSample:
    """KRaft: spec brokers missing from metadata (fenced or not registered)."""

    t: float
    brokers: list[int]


@dataclass
class ElrSample:
    """KRaft with ELR on (KIP-966): a partition as DescribeTopicPartitions reports it, recorded when it changes."""

    t: float
    topic: str
    partition: int
    leader: int  # -1: no leader
    isr: list[int]
    elr: list[int]  # eligible leader replicas: out of the ISR, safe to elect
    last_known_elr: list[int]  # the last known leader while there is none
    leader_epoch: int = -1


@dataclass
class Marker:
    """A fault or heal on the timeline (what the drill did)."""

    t: float
    action: str
    target: str
    heal: bool = False
    note: str | None = None


def target_ids(m: Marker) -> tuple[int | None, int | None]:
    """(broker id, ZooKeeper id) a marker's target names, each None when it names none."""
    if "(" in m.target:  # a node fault: `rack r2 (broker 2, zk 2)`, the first broker and ZooKeeper node on it
        inner = m.target.split("(", 1)[1].rstrip(")").split(",")
        found = [target_ids(Marker(m.t, m.action, part.strip(), m.heal)) for part in inner]
        return next((b for b, _ in found if b is not None), None), next((z for _, z in found if z is not None), None)
    words = m.target.replace("-", " ").split()
    if len(words) == 2 and words[1].isdigit():
        n = int(words[1])
        return {"broker": (n, None), "zk": (None, n), "zookeeper": (None, n)}.get(words[0], (None, None))
    if m.target.startswith("kafka") and m.target[5:].isdigit():
        return int(m.target[5:]), None
    if m.target.startswith("zk") and m.target[2:].isdigit():
        return None, int(m.target[2:])
    return None, None


@dataclass
class PhaseBand:
    """A phase of an operation the drill ran (a migration phase, its rollback): from its start to its end."""

    name: str  # "1 controllers", ..., "rollback"
    t0: float
    t1: float | None = None  # None while it runs; an unfinished phase ends where the timeline ends
    done: bool = False  # False: it failed or was interrupted


@dataclass
class Gap:
    """A time during which a source gave no answer (what it said before is not known to hold)."""

    t0: float
    t1: float
    source: str
    reason: str


@dataclass
class Timeline:
    started: float
    ended: float
    topics: list[str]
    events: list[Event] = field(default_factory=list)
    partitions: list[PartitionSample] = field(default_factory=list)
    zk_modes: list[ZkModeSample] = field(default_factory=list)
    markers: list[Marker] = field(default_factory=list)
    load: list[Any] = field(default_factory=list)  # LoadInterval rows
    gaps: list[Gap] = field(default_factory=list)
    controllers: list[ControllerSample] = field(default_factory=list)  # kraft mode
    fenced: list[FencedSample] = field(default_factory=list)  # kraft mode
    phases: list[PhaseBand] = field(default_factory=list)  # migrate steps
    elr: list[ElrSample] = field(default_factory=list)  # kraft with ELR on: DescribeTopicPartitions' changes
    mode: str = "zookeeper"
