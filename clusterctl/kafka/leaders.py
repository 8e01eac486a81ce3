"""Partition leadership: which partitions are not led by their preferred replica, and leaders per broker."""

from __future__ import annotations

from typing import Any


def leader_imbalance(bootstrap: str) -> dict[str, Any]:
    """Partitions whose leader is not their preferred (first) replica, and leader counts per broker."""
    from clusterctl.kafka.admin import describe_topics

    topics = describe_topics(bootstrap)
    counts: dict[int, int] = {}
    preferred_counts: dict[int, int] = {}
    off: list[dict[str, Any]] = []
    total = 0
    for t in topics:
        for p in t.partitions:
            total += 1
            if p.leader >= 0:
                counts[p.leader] = counts.get(p.leader, 0) + 1
            if p.replicas:
                preferred_counts[p.replicas[0]] = preferred_counts.get(p.replicas[0], 0) + 1
                if p.leader != p.replicas[0]:
                    off.append(
                        {"topic": p.topic, "partition": p.partition, "leader": p.leader,
                         "preferred": p.replicas[0], "replicas": p.replicas, "isr": p.isr}
                    )  # fmt: skip
    brokers = sorted(set(counts) | set(preferred_counts))
    return {
        "partitions": total,
        "not_preferred": off,
        "brokers": [
            {"broker": b, "leaders": counts.get(b, 0), "preferred_leaders": preferred_counts.get(b, 0)} for b in brokers
        ],
    }
