"""Topics and cluster metadata on confluent-kafka's AdminClient: what kafka-topics.sh shows and does.

Stable API used by the chaos observer and failover drills:
`describe_topics`, `cluster_info` (leader elections: clusterctl.kafka.elections; broker configs and versions:
clusterctl.kafka.configs; replica moves: clusterctl.kafka.reassign; retries of retriable errors:
clusterctl.kafka.retry).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from clusterctl.errors import ClusterctlError, NotFoundError, UsageError
from clusterctl.kafka.brokers import BrokerView, metadata_per_broker, unknown_topic
from clusterctl.kafka.configs import ConfigValue, config_values, topic_overrides
from clusterctl.kafka.connection import (
    METADATA_TIMEOUT_S,
    REQUEST_TIMEOUT_S,
    _result,
    admin,
    fetch_metadata,
)
from clusterctl.kafka.retry import (
    AMBIGUOUS,
    CREATE_RETRIABLE,
    DELETE_RETRIABLE,
    controller_admin,
    retrying,
)
from clusterctl.spec import validate
from clusterctl.wait import wait_until

INTERNAL_PREFIX = "__"  # __consumer_offsets, __transaction_state


@dataclass
class PartitionState:
    """One partition as kafka-topics.sh --describe shows it; leader is -1 when there is none."""

    topic: str
    partition: int
    leader: int
    replicas: list[int]
    isr: list[int]
    offline: bool
    under_replicated: bool
    error: str | None = None
    elr: list[int] | None = None  # eligible leader replicas (KIP-966); None: not reported (3.x, ELR off)
    last_known_elr: list[int] | None = None  # the last known leader while the partition has none (ELR on)


@dataclass
class TopicDescription:
    name: str
    partition_count: int
    replication_factor: int
    internal: bool
    partitions: list[PartitionState]
    configs: dict[str, str] = field(default_factory=dict)


@dataclass
class BrokerInfo:
    id: int
    host: str
    port: int
    rack: str | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass
class ClusterInfo:
    cluster_id: str | None
    controller_id: int
    brokers: list[BrokerInfo]


@dataclass
class TopicSummary:
    name: str
    partitions: int
    replication_factor: int
    internal: bool


@dataclass
class TopicChange:
    """Result of create/delete/alter: what was asked and whether the cluster changed."""

    topic: str
    action: str
    changed: bool
    partitions: int | None = None
    replication_factor: int | None = None
    configs: dict[str, str] = field(default_factory=dict)
    deleted_configs: list[str] = field(default_factory=list)
    note: str | None = None


def _partition_state(topic: str, p: Any) -> PartitionState:
    leader = p.leader if p.leader is not None else -1
    return PartitionState(
        topic=topic,
        partition=p.id,
        leader=leader,
        replicas=list(p.replicas),
        isr=list(p.isrs),
        offline=leader < 0,
        under_replicated=len(p.isrs) < len(p.replicas),
        error=p.error.name() if p.error is not None else None,
    )


def _is_internal(name: str) -> bool:
    return name.startswith(INTERNAL_PREFIX)


# ---------------------------------------------------------------- describe


def describe_topics(
    bootstrap: str,
    names: list[str] | None = None,
    include_internal: bool = False,
    with_configs: bool = False,
    timeout: float = METADATA_TIMEOUT_S,
    client: AdminClient | None = None,
) -> list[TopicDescription]:
    """Leader, replicas and ISR of every partition, from one metadata request.

    `names=None` means every topic (internal ones only with `include_internal`). A named topic
    that does not exist raises NotFoundError. `with_configs` adds the topic's non-default configs
    (as kafka-topics.sh prints under Configs:) when the broker supports DescribeConfigs.
    A long-lived `client` (the console's poller) saves a connection per call.
    """
    for name in names or []:
        validate.topic_name(name)
    client = client or admin(bootstrap)
    md = fetch_metadata(bootstrap, timeout, client)
    if names:
        missing = [n for n in names if n not in md.topics or unknown_topic(md.topics[n])]
        if missing:
            raise NotFoundError(f"unknown topic {', '.join(map(repr, missing))} on {bootstrap}")
        selected = list(dict.fromkeys(names))
    else:
        selected = sorted(n for n in md.topics if include_internal or not _is_internal(n))
    out = [_topic_description(name, md.topics[name]) for name in selected]
    if with_configs and out:
        configs = topic_overrides(client, [t.name for t in out])
        for desc in out:
            desc.configs = configs.get(desc.name, {})
    return out


def _topic_description(name: str, t: Any) -> TopicDescription:
    parts = [_partition_state(name, p) for p in sorted(t.partitions.values(), key=lambda p: p.id)]
    rf = max((len(p.replicas) for p in parts), default=0)
    return TopicDescription(name, len(parts), rf, _is_internal(name), parts)


def metadata_snapshot(
    bootstrap: str, client: AdminClient | None = None, timeout: float = METADATA_TIMEOUT_S
) -> tuple[ClusterInfo, list[TopicDescription]]:
    """Brokers, controller and every topic (internal ones too) from one metadata request (the console's poll)."""
    md = fetch_metadata(bootstrap, timeout, client or admin(bootstrap))
    brokers = sorted((BrokerInfo(b.id, b.host or "", b.port) for b in md.brokers.values()), key=lambda b: b.id)
    topics = [_topic_description(n, md.topics[n]) for n in sorted(md.topics) if not unknown_topic(md.topics[n])]
    return ClusterInfo(md.cluster_id, md.controller_id, brokers), topics


def describe_topic(bootstrap: str, name: str, with_configs: bool = False) -> TopicDescription:
    return describe_topics(bootstrap, [name], with_configs=with_configs)[0]


def cluster_info(bootstrap: str, timeout: float = METADATA_TIMEOUT_S, client: AdminClient | None = None) -> ClusterInfo:
    """Cluster id, controller and brokers (DescribeCluster, falling back to metadata)."""
    client = client or admin(bootstrap)
    md = fetch_metadata(bootstrap, timeout, client)
    try:
        desc = client.describe_cluster(request_timeout=timeout).result()
        brokers = [BrokerInfo(n.id, n.host, n.port, n.rack) for n in desc.nodes]
        controller = desc.controller.id if desc.controller is not None else -1
        cluster_id = desc.cluster_id
    except KafkaException:
        brokers = [BrokerInfo(b.id, b.host or "", b.port) for b in md.brokers.values()]
        controller = md.controller_id
        cluster_id = md.cluster_id
    return ClusterInfo(cluster_id, controller, sorted(brokers, key=lambda b: b.id))


def list_topics(bootstrap: str, include_internal: bool = False) -> list[TopicSummary]:
    return [
        TopicSummary(t.name, t.partition_count, t.replication_factor, t.internal)
        for t in describe_topics(bootstrap, include_internal=include_internal)
    ]


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int,
    replication_factor: int,
    configs: dict[str, str] | None = None,
    if_not_exists: bool = False,
    wait_served_s: float = 30.0,
    replica_assignment: list[list[int]] | None = None,
) -> TopicChange:
    """Create a topic; RF above the live broker count is refused before asking the broker. `replica_assignment`:
    partition i on these brokers, the first its preferred leader (kafka-topics.sh --replica-assignment).

    Retriable errors (NOT_CONTROLLER after the controller moved, ...) are retried within RETRY_BUDGET_S. So is a
    request whose answer was lost (a timeout, the broker's handle dropped): the next attempt first looks for the topic.
    The topic counts as created once every live broker serves its metadata with a leader for every
    partition (brokers learn new topics asynchronously): `wait_served_s` bounds that wait (0: do not wait).
    -1 for partitions or replication factor means the broker's default (num.partitions,
    default.replication.factor).
    """
    validate.topic_name(name)
    validate.count(partitions, "--partitions", broker_default=True)
    validate.count(
        replication_factor, "--replication-factor", broker_default=True, maximum=validate.MAX_REPLICATION_FACTOR
    )
    lost = False

    def create_once() -> TopicChange:
        nonlocal lost
        try:
            # after a lost answer, the topic found is the one that request created (it did not exist before it)
            return _create_topic_once(
                bootstrap, name, partitions, replication_factor, configs, if_not_exists or lost, replica_assignment
            )
        except ClusterctlError as exc:
            lost = lost or getattr(exc, "kafka_code", None) in AMBIGUOUS
            raise

    change = retrying(f"create topic {name}", create_once, retriable=CREATE_RETRIABLE | AMBIGUOUS)
    if lost and not change.changed:
        note = "the answer to the create request was lost; the topic it asked for exists"
        change = TopicChange(name, "create", True, partitions, replication_factor, dict(configs or {}), note=note)
    if change.changed and wait_served_s > 0:
        wait_topic_served(bootstrap, name, partitions, wait_served_s)
    return change


def not_serving(views: dict[int, BrokerView | str], partitions: int) -> list[str]:
    """The brokers (a line each) whose view lacks the topic asked for, a partition of it or a leader; and any broker
    another one lists that was not asked (one just back, which the first metadata answer did not list yet)."""
    behind = [
        f"broker {b}: {v}" if isinstance(v, str) else f"broker {b}"
        for b, v in views.items()
        if isinstance(v, str)
        or v.leaders is None
        or len(v.leaders) < partitions
        or any(leader < 0 for leader in v.leaders.values())
    ]
    listed = set().union(*(v.brokers for v in views.values() if not isinstance(v, str)))
    return behind + [f"broker {b} (not asked yet)" for b in sorted(listed - set(views))]


def wait_topic_served(
    bootstrap: str, name: str, partitions: int, timeout: float = 30.0, done: str = "was created"
) -> float:
    """Wait until every live broker's metadata has `name` with `partitions` partitions, each with a leader."""
    started = time.monotonic()

    def lagging() -> list[str]:
        md = fetch_metadata(bootstrap, timeout=min(5.0, timeout))
        addresses = {b.id: f"{b.host}:{b.port}" for b in md.brokers.values()}
        return not_serving(metadata_per_broker(addresses, timeout=2.0, topic=name), partitions)

    wait_until(
        lagging,
        timeout=timeout,
        what=f"every broker to serve topic {name!r} with leaders elected",
        interval=0.2,
        done=lambda behind: not behind,
        seen=lambda behind: f"not yet: {', '.join(behind)}",
        retry_on=lambda exc: isinstance(exc, ClusterctlError),
        started=started,
        hint=f"topic {name!r} {done}",
    )
    return round(time.monotonic() - started, 3)


def partitions_behind(bootstrap: str, topics: list[str] | None = None, timeout: float = 5.0) -> list[PartitionState]:
    """The partitions (of `topics`, default all, internal ones too) without a leader or with a replica out of sync."""
    described = describe_topics(bootstrap, topics, include_internal=True, timeout=timeout)
    return [p for t in described for p in t.partitions if p.leader < 0 or set(p.isr) != set(p.replicas)]


def behind_line(p: PartitionState) -> str:
    return f"{p.topic}-{p.partition} leader {p.leader} isr {_ids(p.isr)} of {_ids(p.replicas)}"


def wait_full_isr(bootstrap: str, timeout: float, poll: float = 0.5, topics: list[str] | None = None) -> float:
    """Wait until every partition (of `topics`, default all, internal ones too) is led and has its full replica set
    in sync: the next broker may go down without a partition losing its ISR. Seconds waited."""
    started = time.monotonic()
    wait_until(
        lambda: [behind_line(p) for p in partitions_behind(bootstrap, topics, timeout=min(5.0, timeout))],
        timeout=timeout,
        what="every partition fully in sync",
        interval=poll,
        done=lambda b: not b,
        seen=lambda b: f"{len(b)} partitions behind (e.g. {'; '.join(b[:3])})",
        retry_on=lambda exc: isinstance(exc, ClusterctlError),
        started=started,
    )
    return round(time.monotonic() - started, 3)


def _ids(ids: list[int]) -> str:
    return ",".join(map(str, ids))


def _create_topic_once(
    bootstrap: str,
    name: str,
    partitions: int,
    replication_factor: int,
    configs: dict[str, str] | None,
    if_not_exists: bool,
    assignment: list[list[int]] | None = None,
) -> TopicChange:
    client = admin(bootstrap)
    md = fetch_metadata(bootstrap, client=client)
    configs = dict(configs or {})
    if name in md.topics and not unknown_topic(md.topics[name]):
        if if_not_exists:
            t = md.topics[name]
            rf = max((len(p.replicas) for p in t.partitions.values()), default=0)
            return TopicChange(name, "create", False, len(t.partitions), rf, note="already exists")
        raise ClusterctlError(f"topic {name!r} already exists", hint="use --if-not-exists to accept that")
    live = len(md.brokers)
    if replication_factor > live:
        raise UsageError(f"RF {replication_factor} > {live} live brokers; cannot create topic {name!r}")
    new = (
        NewTopic(name, partitions, replication_factor, config=configs)
        if assignment is None
        else NewTopic(name, len(assignment), replica_assignment=assignment, config=configs)
    )
    fut = client.create_topics([new], request_timeout=REQUEST_TIMEOUT_S)[name]
    try:
        _result(fut, bootstrap)
    except ClusterctlError as exc:
        if "TOPIC_ALREADY_EXISTS" in str(exc):
            if if_not_exists:
                return TopicChange(name, "create", False, note="already exists")
            raise ClusterctlError(f"topic {name!r} already exists", hint="use --if-not-exists to accept that") from None
        raise
    return TopicChange(name, "create", True, partitions, replication_factor, configs)


def delete_topic(bootstrap: str, name: str) -> TopicChange:
    validate.topic_name(name)
    client = admin(bootstrap)
    md = fetch_metadata(bootstrap, client=client)
    if name not in md.topics or unknown_topic(md.topics[name]):
        raise NotFoundError(f"unknown topic {name!r} on {bootstrap}")
    attempts = 0

    def delete_once() -> None:
        nonlocal attempts
        attempts += 1
        attempt = client if attempts == 1 else controller_admin(bootstrap)
        try:
            _result(attempt.delete_topics([name], request_timeout=REQUEST_TIMEOUT_S)[name], bootstrap)
        except NotFoundError:
            if attempts == 1:
                raise  # deleted meanwhile by someone else; on a retry it is our own earlier attempt that did it

    # a delete may be asked again: right after a failover the controller can answer UNKNOWN (seen on 3.7.0 after
    # a paused leader came back) or time out while it still deletes the topic
    retrying(f"delete topic {name}", delete_once, retriable=DELETE_RETRIABLE)
    return TopicChange(name, "delete", True)


def create_partitions(bootstrap: str, name: str, total: int, wait_served_s: float = 30.0) -> TopicChange:
    """Grow a topic to `total` partitions (Kafka can only add partitions, never remove them).

    Done means every live broker serves all `total` partitions with a leader: the controller answers
    before the brokers learn of the new partitions, and a describe right after must not show the old count.
    """
    validate.count(total, "--partitions")
    current = describe_topic(bootstrap, name).partition_count
    if total <= current:
        raise UsageError(f"topic {name!r} already has {current} partitions; --partitions must be more than that")

    lost = False

    def create_once() -> None:
        nonlocal lost
        if lost and describe_topic(bootstrap, name).partition_count == total:
            return  # the request whose answer was lost did it
        client = controller_admin(bootstrap)  # held until the answer: a collected client cancels its requests
        try:
            _result(
                client.create_partitions([NewPartitions(name, total)], request_timeout=REQUEST_TIMEOUT_S)[name],
                bootstrap,
            )
        except ClusterctlError as exc:
            lost = lost or getattr(exc, "kafka_code", None) in AMBIGUOUS
            raise

    retrying(f"create partitions of {name}", create_once, retriable=CREATE_RETRIABLE | AMBIGUOUS)
    if wait_served_s > 0:
        wait_topic_served(bootstrap, name, total, wait_served_s, done=f"has {total} partitions")
    return TopicChange(name, "alter", True, partitions=total, note=f"partitions {current} -> {total}")


def alter_topic_configs(
    bootstrap: str, name: str, set_configs: dict[str, str] | None = None, delete: list[str] | None = None
) -> TopicChange:
    """Incrementally set and/or delete topic configs (IncrementalAlterConfigs)."""
    set_configs = set_configs or {}
    delete = delete or []
    if not set_configs and not delete:
        raise UsageError("nothing to alter: give --partitions, --config k=v or --delete-config k")
    describe_topic(bootstrap, name)  # unknown topic → one line
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in set_configs.items()]
    entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in delete]
    res = ConfigResource(ConfigResource.Type.TOPIC, name, incremental_configs=entries)
    client = admin(bootstrap)

    def alter() -> None:
        for fut in client.incremental_alter_configs([res], request_timeout=REQUEST_TIMEOUT_S).values():
            _result(fut, bootstrap)

    retrying(f"alter configs of {name}", alter)
    return TopicChange(name, "alter", True, configs=dict(set_configs), deleted_configs=list(delete))


def describe_configs(bootstrap: str, name: str, include_defaults: bool = False) -> list[ConfigValue]:
    """A topic's configs with their source (dynamic topic config, broker default, ...)."""
    validate.topic_name(name)
    describe_topic(bootstrap, name)
    client = admin(bootstrap)
    futs = client.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, name)], request_timeout=REQUEST_TIMEOUT_S)
    out: list[ConfigValue] = []
    for fut in futs.values():
        out += config_values(_result(fut, bootstrap), include_defaults)
    return out
