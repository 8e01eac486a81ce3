"""What an operation on the whole cluster (a migration, its rollback) must leave as it was: a snapshot of every
topic's partition count, replication factor and per-topic configs, and every consumer group's committed offsets.

The `snapshot` scenario step takes one; with `same_as` it compares it with an earlier one and fails on any
difference. The records themselves are the ledger verifier's business, not this one's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from clusterctl.errors import ClusterctlError, NotFoundError


@dataclass
class TopicShape:
    partitions: int
    replication_factor: int
    configs: dict[str, str] = field(default_factory=dict)  # per-topic configs (DYNAMIC_TOPIC_CONFIG)


@dataclass
class ClusterSnapshot:
    name: str
    taken: float  # epoch seconds
    topics: dict[str, TopicShape]  # non-internal topics
    groups: dict[str, dict[str, int]]  # group -> "topic-partition" -> committed offset

    def summary(self) -> str:
        offsets = sum(len(g) for g in self.groups.values())
        topics, groups = len(self.topics), len(self.groups)
        return f"snapshot {self.name}: {topics} topics, {groups} groups, {offsets} committed offsets"


def take_snapshot(bootstrap: str, name: str) -> ClusterSnapshot:
    """Read the snapshot from the cluster; a topic whose configs cannot be read fails it (never an empty guess)."""
    import time

    from clusterctl.kafka.admin import describe_topics
    from clusterctl.kafka.configs import topic_overrides
    from clusterctl.kafka.connection import admin
    from clusterctl.kafka.groups import describe_group, list_groups

    taken = time.time()
    described = describe_topics(bootstrap)
    configs = topic_overrides(admin(bootstrap), [t.name for t in described]) if described else {}
    unread = [t.name for t in described if t.name not in configs]
    if unread:
        raise ClusterctlError(f"snapshot {name}: the configs of {', '.join(unread[:5])} could not be read")
    topics = {t.name: TopicShape(t.partition_count, t.replication_factor, configs[t.name]) for t in described}
    groups: dict[str, dict[str, int]] = {}
    for g in list_groups(bootstrap):
        try:
            rows = describe_group(bootstrap, g.group).offsets
        except NotFoundError:  # listed, then gone (or dead with nothing committed): it holds no offsets to keep
            continue
        groups[g.group] = {f"{r.topic}-{r.partition}": r.committed for r in rows if r.committed is not None}
    return ClusterSnapshot(name, taken, topics, groups)


def differences(before: ClusterSnapshot, after: ClusterSnapshot) -> list[str]:
    """Every difference between two snapshots, one line each (empty: identical)."""
    out: list[str] = []
    for topic in sorted(before.topics.keys() - after.topics.keys()):
        out.append(f"topic {topic} is gone")
    for topic in sorted(after.topics.keys() - before.topics.keys()):
        out.append(f"topic {topic} is new")
    for topic in sorted(before.topics.keys() & after.topics.keys()):
        a, b = before.topics[topic], after.topics[topic]
        if (a.partitions, a.replication_factor) != (b.partitions, b.replication_factor):
            out.append(
                f"topic {topic}: {a.partitions} partitions RF {a.replication_factor} -> "
                f"{b.partitions} partitions RF {b.replication_factor}"
            )
        for key in sorted(a.configs.keys() | b.configs.keys()):
            if a.configs.get(key) != b.configs.get(key):
                out.append(f"topic {topic}: {key} {a.configs.get(key, '(unset)')} -> {b.configs.get(key, '(unset)')}")
    for group in sorted(before.groups.keys() | after.groups.keys()):
        if group not in after.groups:
            out.append(f"group {group} is gone")
            continue
        if group not in before.groups:
            out.append(f"group {group} is new")
            continue
        a_off, b_off = before.groups[group], after.groups[group]
        for tp in sorted(a_off.keys() | b_off.keys()):
            if a_off.get(tp) != b_off.get(tp):
                out.append(f"group {group} {tp}: committed {a_off.get(tp, '(none)')} -> {b_off.get(tp, '(none)')}")
    return out
