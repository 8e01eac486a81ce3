"""Connecting to Kafka: error translation, and the metadata and offset queries that admin, clients, groups, perf
and the Spark connector all build on. The client settings themselves live in `settings` (re-exported here).
"""

from __future__ import annotations

import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ClusterMetadata, OffsetSpec

from clusterctl.errors import (
    AuthenticationError,
    ClusterctlError,
    NotAuthorizedError,
    NotFoundError,
    TimeoutError_,
    UnreachableError,
)
from clusterctl.kafka.settings import (  # noqa: F401  (re-exported: callers import settings from here)
    ADVERTISED_HINT,
    JOIN_TIMEOUT_S,
    LIBRDKAFKA_LOGGER,
    METADATA_TIMEOUT_S,
    REQUEST_TIMEOUT_S,
    Acks,
    admin_config,
    consumer_config,
    producer_config,
    security_settings,
)
from clusterctl.spec import validate

PARTIAL_BACKOFF_S = 0.2


def kafka_error(exc: BaseException, bootstrap: str, waited: float | None = None) -> ClusterctlError:
    """Translate a KafkaException into one user-facing line (its Kafka error name kept as `kafka_code`)."""
    err = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
    if err is None:
        return ClusterctlError(str(exc))
    out = _kafka_error(err, bootstrap, waited)
    out.kafka_code = err.name()
    return out


def _kafka_error(err: KafkaError, bootstrap: str, waited: float | None) -> ClusterctlError:
    code = err.code()
    refused = (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._AUTHENTICATION, KafkaError._SSL)
    # librdkafka says only "transport failure": a secured listener is asked why
    if code in refused and (why := _refusal(bootstrap)):
        return AuthenticationError(why, hint="the cluster's secrets are in compose/<name>/secrets (docs/security.md)")
    if code in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE):
        within = f" within {waited:.0f}s" if waited is not None else ""
        return UnreachableError(f"no Kafka broker answered at {bootstrap}{within}", hint=ADVERTISED_HINT)
    if code == KafkaError._TIMED_OUT or code == KafkaError.REQUEST_TIMED_OUT:
        within = f" after {waited:.0f}s" if waited is not None else ""
        return TimeoutError_(f"timed out talking to {bootstrap}{within}: {err.str()}", hint=ADVERTISED_HINT)
    if code == KafkaError._UNSUPPORTED_FEATURE:
        return ClusterctlError(f"the broker at {bootstrap} does not support this: {err.str()}")
    if err.name().endswith("_AUTHORIZATION_FAILED"):  # the client's user lacks an ACL (security.authorizer)
        line = f"not authorized at {bootstrap}: {err.name()} ({err.str()})"
        return NotAuthorizedError(line, hint="clusterctl acl list")
    if code == KafkaError.UNKNOWN_TOPIC_OR_PART:
        return NotFoundError(f"unknown topic or partition ({err.str()})")
    return ClusterctlError(f"{err.name()}: {err.str()}")


def _refusal(bootstrap: str) -> str | None:
    from clusterctl.kafka import protocol

    return protocol.refusal(bootstrap.split(",")[0].strip()) if security_settings(bootstrap) else None


def check_topic(bootstrap: str, topic: str, timeout: float = METADATA_TIMEOUT_S) -> int:
    """Fail with one line unless `topic` exists; return its partition count."""
    validate.topic_name(topic)
    md = fetch_metadata(bootstrap, timeout)
    t = md.topics.get(topic)
    if t is None or (t.error is not None and t.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART):
        raise NotFoundError(f"unknown topic {topic!r} on {bootstrap}", hint="clusterctl topic list")
    return len(t.partitions)


def admin(bootstrap: str) -> AdminClient:
    return AdminClient(admin_config(bootstrap))


def fetch_metadata(
    bootstrap: str, timeout: float = METADATA_TIMEOUT_S, client: AdminClient | None = None
) -> ClusterMetadata:
    """One metadata request with a short timeout; an unreachable cluster is one line naming the address.

    librdkafka answers `_PARTIAL` when a broker connection dropped or changed under the request (a cluster that
    has just started or is rolling): a read, so it is asked again while `timeout` lasts.
    """
    client = client or admin(bootstrap)
    start = time.monotonic()
    while True:
        left = timeout - (time.monotonic() - start)
        try:
            return client.list_topics(timeout=max(left, 0.1))
        except KafkaException as exc:
            error = kafka_error(exc, bootstrap, waited=time.monotonic() - start)
            if getattr(error, "kafka_code", None) == "_PARTIAL" and left > PARTIAL_BACKOFF_S:
                time.sleep(PARTIAL_BACKOFF_S)
                continue
            raise error from None


def _result(future: Any, bootstrap: str, timeout: float = REQUEST_TIMEOUT_S) -> Any:
    start = time.monotonic()
    try:
        return future.result(timeout=timeout)
    except KafkaException as exc:
        raise kafka_error(exc, bootstrap, waited=time.monotonic() - start) from None
    except TimeoutError:
        raise kafka_error(
            KafkaException(KafkaError(KafkaError._TIMED_OUT, "no answer")), bootstrap, waited=timeout
        ) from None


def log_end_offsets(bootstrap: str, tps: list[tuple[str, int]], client: Any = None) -> dict[tuple[str, int], int]:
    """Log-end offset (high watermark) per partition: ListOffsets, cross-checked by one fetch.

    Some Kafka-protocol brokers (tansu) answer ListOffsets(latest) with the last record batch's
    base offset + 1; the high watermark in a fetch response is right, so fetch one record just
    below the listed end and keep the larger value. Real Kafka gives the same number both ways.
    """
    client = client or admin(bootstrap)
    if not tps:
        return {}
    futs = client.list_offsets(
        {TopicPartition(t, p): OffsetSpec.latest() for t, p in tps}, request_timeout=REQUEST_TIMEOUT_S
    )
    listed = {(tp.topic, tp.partition): _result(f, bootstrap).offset for tp, f in futs.items()}
    probe = [TopicPartition(t, p, end - 1) for (t, p), end in listed.items() if end > 0]
    if not probe:
        return listed
    consumer = Consumer(consumer_config(bootstrap, fetch_max_bytes=1_048_576))
    try:
        consumer.assign(probe)
        pending = {(tp.topic, tp.partition) for tp in probe}
        deadline = time.monotonic() + 3.0
        while pending and time.monotonic() < deadline:
            consumer.poll(0.2)
            for key in list(pending):
                _low, high = consumer.get_watermark_offsets(TopicPartition(*key), cached=True)
                if high >= 0:
                    listed[key] = max(listed[key], high)
                    pending.discard(key)
    finally:
        consumer.close()
    return listed


# ---------------------------------------------------------------- topic changes
