"""Connecting to Kafka: the one place client settings live, error translation, and the metadata and
offset queries that admin, clients, groups, perf and the Spark connector all build on.

librdkafka's own log lines are routed into a quiet Python logger (the CLI prints one error line,
not a flood of connection retries), timeouts are short enough for an operator's terminal, and
idempotence is on whenever acks=all.
"""

from __future__ import annotations

import logging
import time
import uuid
from typing import Any, Literal

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, ClusterMetadata, OffsetSpec

from clusterctl import validate
from clusterctl.errors import ClusterctlError, NotFoundError, TimeoutError_, UnreachableError, UsageError

REQUEST_TIMEOUT_S = 15.0
# librdkafka logs every failed connection attempt; keep them out of the user's terminal unless asked.
LIBRDKAFKA_LOGGER = logging.getLogger("clusterctl.librdkafka")
LIBRDKAFKA_LOGGER.addHandler(logging.NullHandler())
LIBRDKAFKA_LOGGER.propagate = False

METADATA_TIMEOUT_S = 5.0
JOIN_TIMEOUT_S = 30.0
ADVERTISED_HINT = (
    "check the cluster is up, and that every broker advertises a listener reachable from this host "
    "(advertised.listeners)"
)

Acks = Literal["0", "1", "all"]


def _base(bootstrap: str) -> dict[str, Any]:
    validate.bootstrap_servers(bootstrap, "bootstrap servers")
    return {
        "bootstrap.servers": bootstrap,
        "logger": LIBRDKAFKA_LOGGER,
        "socket.connection.setup.timeout.ms": 5000,
        "reconnect.backoff.max.ms": 2000,
    }


def admin_config(bootstrap: str, **overrides: Any) -> dict[str, Any]:
    """AdminClient settings (dotted librdkafka keys may be passed with `_` for `.`)."""
    return {**_base(bootstrap), **_dotted(overrides)}


def producer_config(bootstrap: str, acks: Acks | str = "all", **overrides: Any) -> dict[str, Any]:
    """Producer settings: idempotent with acks=all, a 30 s delivery timeout, small linger."""
    acks = str(acks)
    if acks not in ("0", "1", "all", "-1"):
        raise UsageError(f"--acks must be 0, 1 or all, got {acks!r}")
    conf: dict[str, Any] = {
        **_base(bootstrap),
        "acks": acks,
        "enable.idempotence": acks in ("all", "-1"),
        "linger.ms": 5,
        "message.timeout.ms": 30000,
    }
    conf.update(_dotted(overrides))
    return conf


def consumer_config(
    bootstrap: str, group: str | None = None, *, auto_offset_reset: str = "earliest", **overrides: Any
) -> dict[str, Any]:
    """Consumer settings. Without `group`, a throwaway group.id that never commits (use assign()).

    session.timeout.ms is 6 s (the broker's default minimum) so group joins finish quickly.
    """
    conf: dict[str, Any] = {
        **_base(bootstrap),
        "group.id": group or f"clusterctl-nogroup-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "auto.offset.reset": auto_offset_reset,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 1500,
        "enable.partition.eof": False,
    }
    conf.update(_dotted(overrides))
    return conf


def _dotted(overrides: dict[str, Any]) -> dict[str, Any]:
    return {k.replace("_", "."): v for k, v in overrides.items()}


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
    if code in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE):
        within = f" within {waited:.0f}s" if waited is not None else ""
        return UnreachableError(f"no Kafka broker answered at {bootstrap}{within}", hint=ADVERTISED_HINT)
    if code == KafkaError._TIMED_OUT or code == KafkaError.REQUEST_TIMED_OUT:
        within = f" after {waited:.0f}s" if waited is not None else ""
        return TimeoutError_(f"timed out talking to {bootstrap}{within}: {err.str()}", hint=ADVERTISED_HINT)
    if code == KafkaError._UNSUPPORTED_FEATURE:
        return ClusterctlError(f"the broker at {bootstrap} does not support this: {err.str()}")
    if code == KafkaError.UNKNOWN_TOPIC_OR_PART:
        return NotFoundError(f"unknown topic or partition ({err.str()})")
    return ClusterctlError(f"{err.name()}: {err.str()}")


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
    """One metadata request with a short timeout; an unreachable cluster is one line naming the address."""
    client = client or admin(bootstrap)
    start = time.monotonic()
    try:
        return client.list_topics(timeout=timeout)
    except KafkaException as exc:
        raise kafka_error(exc, bootstrap, waited=time.monotonic() - start) from None


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
