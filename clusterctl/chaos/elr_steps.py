"""KIP-966 (Eligible Leader Replicas) in a drill: the feature levels a scenario runs under, and the `elr` condition.

    mode: kraft
    features: {eligible.leader.replicas.version: 1}   # finalized for the run, the level before restored after it
    steps:
      - wait_for: {elr: {partition: 0, equals: [3]}}   # DescribeTopicPartitions: ELR [3] (as a set)
      - assert: {elr: {partition: 0, equals: [1, 3], last_known_elr: [1]}}

The ELR of a partition holds the replicas that left its ISR while the ISR was below min.insync.replicas: the
high watermark did not advance past them, so each has every committed record and may be elected once the ISR
is empty. The last known ELR holds the last leader of a partition that has none.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    from clusterctl.kafka.topicpartitions import PartitionElr

ELR_FEATURE = "eligible.leader.replicas.version"
# the feature levels a scenario may set (KIP-584 features a drill's outcome depends on): name -> (lowest, highest)
SETTABLE_FEATURES: dict[str, tuple[int, int]] = {ELR_FEATURE: (0, 1)}


class ElrIs(BaseModel):
    """A partition's ELR (and, when given, its last known ELR) equal these brokers, in any order."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    topic: str | None = None
    partition: int = Field(default=0, ge=0)
    equals: list[int] = Field(max_length=16, description="the eligible leader replicas ([] = none)")
    last_known_elr: list[int] | None = Field(default=None, max_length=16, description="the last known leader")


def check_features(features: dict[str, int], mode: str) -> None:
    """Only the settable features, within their levels, and only in a KRaft drill (ValueError, one line)."""
    for name, level in features.items():
        if name not in SETTABLE_FEATURES:
            raise ValueError(
                f"features: {name!r} is not a feature a drill sets (one of {', '.join(SETTABLE_FEATURES)})"
            )
        low, high = SETTABLE_FEATURES[name]
        if isinstance(level, bool) or not isinstance(level, int) or not low <= level <= high:
            raise ValueError(f"features: {name} must be a level from {low} to {high}, got {level!r}")
    if features and mode != "kraft":
        raise ValueError(f"features: finalized feature levels need mode: kraft (got mode: {mode})")


def check_assignment(assignment: list[list[int]], partitions: int, replication_factor: int) -> None:
    """A replica assignment has a list of distinct broker ids per partition, as many as the RF (ValueError)."""
    if len(assignment) != partitions:
        raise ValueError(f"replica_assignment has {len(assignment)} partitions; topic.partitions is {partitions}")
    for i, replicas in enumerate(assignment):
        if len(replicas) != replication_factor or len(set(replicas)) != len(replicas) or min(replicas) < 1:
            raise ValueError(
                f"replica_assignment[{i}] {replicas}: {replication_factor} distinct broker ids (1..N) expected"
            )


def elr_seen(p: PartitionElr) -> str:
    """'t-0 leader -1 isr [] elr [1, 3] last known elr [1]'."""
    return (
        f"{p.topic}-{p.partition} leader {p.leader} isr {p.isr} elr {sorted(p.elr or [])} "
        f"last known elr {sorted(p.last_known_elr or [])}"
    )


def check_elr(addresses: list[tuple[str, int]], c: ElrIs, topic: str) -> tuple[str | None, str]:
    """(what holds, or None; what was seen) for the `elr` condition, from DescribeTopicPartitions."""
    from clusterctl.errors import ClusterctlError
    from clusterctl.kafka.topicpartitions import describe_partitions

    name = c.topic or topic
    try:
        found = describe_partitions(addresses, [name], timeout=1.5)
    except ClusterctlError as exc:
        return None, str(exc)
    if found is None:
        return None, "the brokers have no DescribeTopicPartitions (KIP-966: Kafka 4.x)"
    p = next((x for x in found[0] if x.partition == c.partition), None)
    if p is None:
        return None, f"no partition {name}-{c.partition} ({found[1].get(name, 'not in the answer')})"
    seen = elr_seen(p)
    ok = sorted(p.elr or []) == sorted(c.equals)
    ok = ok and (c.last_known_elr is None or sorted(p.last_known_elr or []) == sorted(c.last_known_elr))
    return (seen if ok else None), seen
