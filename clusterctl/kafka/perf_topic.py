"""The perf test topic: looked up (its own layout wins), created, or capped with retention.bytes."""

from __future__ import annotations

from dataclasses import dataclass

from clusterctl.errors import ClusterctlError, NotFoundError
from clusterctl.kafka.settings import METADATA_TIMEOUT_S, admin_config


@dataclass
class TopicPlan:
    """The perf topic as found (or to be created): its RF feeds the disk estimate."""

    topic: str
    exists: bool
    partitions: int
    replication_factor: int


def plan_topic(bootstrap: str, topic: str, partitions: int, replication_factor: int) -> TopicPlan:
    """Look the topic up; an existing topic's own partition count and RF win over the defaults."""
    from clusterctl.spec import validate

    validate.topic_name(topic)
    validate.count(partitions, "--partitions", broker_default=True)
    validate.count(
        replication_factor, "--replication-factor", broker_default=True, maximum=validate.MAX_REPLICATION_FACTOR
    )
    found = _topic_layout(bootstrap, topic)
    if found is None:
        return TopicPlan(topic, False, partitions, replication_factor)
    return TopicPlan(topic, True, found[0], max(found[1], 1))


def _topic_layout(bootstrap: str, topic: str) -> tuple[int, int] | None:
    """(partitions, replication factor) of `topic`, None when it does not exist.

    Asked through librdkafka directly when it loads (no confluent-kafka import); a failed request is worded by
    the same translation as every other command's.
    """
    from clusterctl.kafka import perf_native

    if perf_native.available():
        try:
            return perf_native.topic_layout(admin_config(bootstrap), topic, METADATA_TIMEOUT_S)
        except perf_native.MetadataError as exc:
            from confluent_kafka import KafkaError, KafkaException

            from clusterctl.kafka.connection import kafka_error

            raise kafka_error(KafkaException(KafkaError(exc.code, exc.name)), bootstrap, waited=exc.waited) from None
    from clusterctl.kafka.connection import fetch_metadata

    t = fetch_metadata(bootstrap).topics.get(topic)
    if t is None or t.error is not None or not t.partitions:
        return None
    return len(t.partitions), max(len(p.replicas) for p in t.partitions.values())


def prepare_topic(
    bootstrap: str, plan: TopicPlan, *, create: bool, retention_bytes: int | None
) -> tuple[bool, str | None]:
    """Create the topic (with retention.bytes when asked) or cap an existing one; returns (created, note)."""
    configs = {"retention.bytes": str(retention_bytes)} if retention_bytes is not None else {}
    if not plan.exists:
        if not create:
            raise NotFoundError(f"unknown topic {plan.topic!r} on {bootstrap}", hint="drop --no-create-topic")
        from clusterctl.kafka.admin import create_topic  # only now: an existing topic needs no admin module

        create_topic(bootstrap, plan.topic, plan.partitions, plan.replication_factor, configs, if_not_exists=True)
        return True, None
    if configs:
        from clusterctl.kafka.admin import alter_topic_configs

        try:
            alter_topic_configs(bootstrap, plan.topic, configs)
        except ClusterctlError as exc:
            raise ClusterctlError(
                f"cannot set retention.bytes on existing topic {plan.topic!r}: {exc.message}",
                hint="use a new topic (it is created with the cap) or drop --retention-bytes",
            ) from None
        return False, f"retention.bytes={retention_bytes} set"
    return False, None
