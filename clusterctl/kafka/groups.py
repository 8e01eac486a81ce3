"""Consumer groups, as kafka-consumer-groups.sh shows them: members, committed offsets, lag, resets."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException, TopicPartition
from confluent_kafka.admin import OffsetSpec

from clusterctl.errors import ClusterctlError, NotFoundError, UsageError
from clusterctl.kafka.admin import describe_topics
from clusterctl.kafka.connection import REQUEST_TIMEOUT_S, _result, admin, fetch_metadata, kafka_error, log_end_offsets


@dataclass
class GroupListing:
    group: str
    state: str
    simple: bool


@dataclass
class GroupMember:
    member_id: str
    client_id: str
    host: str
    assignment: list[str]  # "topic-partition", as kafka-consumer-groups.sh prints


@dataclass
class PartitionLag:
    topic: str
    partition: int
    committed: int | None  # None: the group has no committed offset here
    log_end: int
    lag: int | None
    member_id: str | None = None
    client_id: str | None = None
    host: str | None = None


@dataclass
class GroupDescription:
    group: str
    state: str
    coordinator: int | None
    assignor: str | None
    members: list[GroupMember]
    offsets: list[PartitionLag]
    total_lag: int  # over partitions with a committed offset, as kafka-consumer-groups.sh sums it
    uncommitted_partitions: int = 0  # partitions the group never committed: their lag is unknown, not 0
    protocol: str | None = None  # classic | consumer (KIP-848); None: the broker did not say
    # what bounds the time to notice a dead member: the group's consumer.session.timeout.ms (consumer protocol), or
    # each member's own session.timeout.ms (classic: a client setting the coordinator does not report)
    session_timeout: str | None = None


@dataclass
class OffsetReset:
    topic: str
    partition: int
    current: int | None
    new: int


@dataclass
class ResetPlan:
    group: str
    topic: str
    to: str
    executed: bool
    partitions: list[OffsetReset] = field(default_factory=list)


@dataclass(frozen=True)
class AtTime:
    """A reset to the first offset whose timestamp is at or after `ms` (epoch ms); the log end where none is."""

    ms: int


ResetTarget = Literal["earliest", "latest"] | int | AtTime
INACTIVE_STATES = ("EMPTY", "DEAD", "UNKNOWN")


def _state(s: Any) -> str:
    name = getattr(s, "name", None)
    return str(name if name is not None else s)


def list_groups(bootstrap: str) -> list[GroupListing]:
    client = admin(bootstrap)
    fetch_metadata(bootstrap, client=client)
    res = _result(client.list_consumer_groups(request_timeout=REQUEST_TIMEOUT_S), bootstrap)
    return sorted(
        (GroupListing(g.group_id, _state(g.state), bool(g.is_simple_consumer_group)) for g in res.valid),
        key=lambda g: g.group,
    )


def _describe(client: Any, bootstrap: str, group: str) -> Any:
    return _result(client.describe_consumer_groups([group], request_timeout=REQUEST_TIMEOUT_S)[group], bootstrap)


def _committed(client: Any, bootstrap: str, group: str) -> dict[tuple[str, int], int]:
    fut = client.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)], request_timeout=REQUEST_TIMEOUT_S)[
        group
    ]
    res = _result(fut, bootstrap)
    return {(tp.topic, tp.partition): tp.offset for tp in res.topic_partitions or [] if tp.offset >= 0}


def _offsets(client: Any, bootstrap: str, tps: list[tuple[str, int]], spec: OffsetSpec) -> dict[tuple[str, int], int]:
    if not tps:
        return {}
    futs = client.list_offsets({TopicPartition(t, p): spec for t, p in tps}, request_timeout=REQUEST_TIMEOUT_S)
    return {(tp.topic, tp.partition): _result(f, bootstrap).offset for tp, f in futs.items()}


def describe_group(bootstrap: str, group: str) -> GroupDescription:
    """State, members and per-partition committed offset, log-end offset and lag."""
    client = admin(bootstrap)
    fetch_metadata(bootstrap, client=client)
    desc = _describe(client, bootstrap, group)
    committed = _committed(client, bootstrap, group)
    state = _state(desc.state)
    if (
        not desc.members
        and not committed
        and (state in ("DEAD", "UNKNOWN") or group not in {g.group for g in list_groups(bootstrap)})
    ):
        raise NotFoundError(f"consumer group {group!r} not found on {bootstrap}", hint="clusterctl group list")
    members: list[GroupMember] = []
    owner: dict[tuple[str, int], GroupMember] = {}
    for m in desc.members:
        tps = list(m.assignment.topic_partitions) if m.assignment else []
        gm = GroupMember(m.member_id, m.client_id, m.host, [f"{tp.topic}-{tp.partition}" for tp in tps])
        members.append(gm)
        for tp in tps:
            owner[(tp.topic, tp.partition)] = gm
    known = set(committed) | set(owner)
    # every partition of the group's topics, so partitions it never committed show up too
    topics = sorted({t for t, _ in known})
    if topics:
        for t in describe_topics(bootstrap, topics):
            known.update((t.name, p.partition) for p in t.partitions)
    keys = sorted(known)
    log_end = log_end_offsets(bootstrap, keys, client)
    rows = []
    for key in keys:
        c = committed.get(key)
        end = log_end.get(key, 0)
        lag = max(0, end - c) if c is not None else None
        m = owner.get(key)
        rows.append(
            PartitionLag(
                key[0],
                key[1],
                c,
                end,
                lag,
                m.member_id if m else None,
                m.client_id if m else None,
                m.host if m else None,
            )
        )
    coordinator = desc.coordinator.id if desc.coordinator is not None else None
    kind = _state(getattr(desc, "type", None)).lower()
    return GroupDescription(
        group,
        state,
        coordinator,
        desc.partition_assignor or None,
        members,
        rows,
        sum(r.lag or 0 for r in rows),
        sum(1 for r in rows if r.committed is None),
        kind if kind in ("classic", "consumer") else None,
        _session_timeout(bootstrap, group, kind),
    )


def _session_timeout(bootstrap: str, group: str, protocol: str) -> str | None:
    if protocol == "classic":
        return "session.timeout.ms of each member (client side)"
    if protocol != "consumer":
        return None
    from clusterctl.kafka.configs import group_configs

    try:
        ms = group_configs(bootstrap, group).get("consumer.session.timeout.ms")
    except ClusterctlError:
        return None
    default = "broker default: group.consumer.session.timeout.ms"
    return None if ms is None else f"consumer.session.timeout.ms={ms} (group config; {default})"


def group_coordinator(bootstrap: str, group: str) -> int:
    """The broker coordinating `group` now: the leader of its __consumer_offsets partition (FindCoordinator)."""
    client = admin(bootstrap)
    desc = _describe(client, bootstrap, group)
    if desc.coordinator is None or desc.coordinator.id < 0:
        raise ClusterctlError(f"consumer group {group!r} has no coordinator right now")
    return int(desc.coordinator.id)


def reset_offsets(
    bootstrap: str,
    group: str,
    topic: str,
    to: ResetTarget,
    execute: bool = False,
) -> ResetPlan:
    """Plan (and with `execute`, apply) new committed offsets for every partition of `topic`.

    Like kafka-consumer-groups.sh --reset-offsets: a dry run by default, refused while the group
    has active members, and an explicit offset is clamped into [earliest, log-end].
    """
    client = admin(bootstrap)
    parts = describe_topics(bootstrap, [topic])[0].partitions
    desc = _describe(client, bootstrap, group)
    state = _state(desc.state)
    if desc.members or state not in INACTIVE_STATES:
        who = f"{len(desc.members)} active member(s)" if desc.members else f"state {state}"
        raise ClusterctlError(
            f"consumer group {group!r} has {who}; Kafka only resets offsets of an inactive group (Empty or Dead)",
            hint="stop its consumers first",
        )
    committed = _committed(client, bootstrap, group)
    keys = [(topic, p.partition) for p in parts]
    earliest = _offsets(client, bootstrap, keys, OffsetSpec.earliest())
    latest = log_end_offsets(bootstrap, keys, client)
    at_time = _offsets(client, bootstrap, keys, OffsetSpec.for_timestamp(to.ms)) if isinstance(to, AtTime) else {}
    plan = []
    for key in keys:
        if to == "earliest":
            new = earliest[key]
        elif to == "latest":
            new = latest[key]
        elif isinstance(to, AtTime):
            new = latest[key] if at_time[key] < 0 else min(max(at_time[key], earliest[key]), latest[key])
        else:
            if to < 0:
                raise UsageError(f"--to-offset must be >= 0, got {to}")
            new = min(max(to, earliest[key]), latest[key])
        plan.append(OffsetReset(topic, key[1], committed.get(key), new))
    if execute:
        req = ConsumerGroupTopicPartitions(group, [TopicPartition(r.topic, r.partition, r.new) for r in plan])
        res = _result(client.alter_consumer_group_offsets([req], request_timeout=REQUEST_TIMEOUT_S)[group], bootstrap)
        bad = [tp for tp in res.topic_partitions or [] if tp.error is not None]
        if bad:
            raise ClusterctlError(f"offset reset failed for {bad[0].topic}-{bad[0].partition}: {bad[0].error}")
    label = to if isinstance(to, str) else f"timestamp {to.ms}" if isinstance(to, AtTime) else f"offset {to}"
    return ResetPlan(group, topic, label, execute, plan)


def delete_group(bootstrap: str, group: str) -> str:
    client = admin(bootstrap)
    fetch_metadata(bootstrap, client=client)
    try:
        client.delete_consumer_groups([group], request_timeout=REQUEST_TIMEOUT_S)[group].result(
            timeout=REQUEST_TIMEOUT_S
        )
    except KafkaException as exc:
        name = exc.args[0].name() if exc.args else ""
        if name == "GROUP_ID_NOT_FOUND":
            raise NotFoundError(f"consumer group {group!r} not found on {bootstrap}") from None
        if name == "NON_EMPTY_GROUP":
            raise ClusterctlError(
                f"consumer group {group!r} still has active members", hint="stop its consumers first"
            ) from None
        raise kafka_error(exc, bootstrap) from None
    return group
