"""DescribeTopicPartitions (Kafka API 75, KIP-966) over a plain socket: each partition's eligible leader replicas.

Metadata (what librdkafka's AdminClient asks) carries leader, replicas and ISR but not the Eligible Leader
Replicas (ELR) nor the last known ELR; confluent-kafka's `describe_topics` has neither. Kafka 4.x brokers answer
DescribeTopicPartitions v0 (flexible: compact arrays, tagged fields) with both, so it is encoded here over
clusterctl.kafka.protocol, as DescribeLogDirs is. ApiVersions goes first: a broker without API 75 (3.x in
ZooKeeper mode) gets no request it would drop. Answers come in pages of at most `RESPONSE_PARTITION_LIMIT`
partitions; a next cursor asks for the rest.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

from clusterctl.errors import UnreachableError
from clusterctl.kafka import features
from clusterctl.kafka.protocol import (
    Reader,
    check_correlation,
    compact_str,
    decode_api_versions,
    encode_api_versions,
    exchange,
    frame,
    header,
    uvarint,
)

if TYPE_CHECKING:
    from clusterctl.kafka.admin import TopicDescription

API_KEY = 75
VERSION = 0
RESPONSE_PARTITION_LIMIT = 2000  # Kafka's default
MAX_PAGES = 64  # at most this many requests for one call (128000 partitions)
ERRORS = {3: "UNKNOWN_TOPIC_OR_PARTITION", 29: "TOPIC_AUTHORIZATION_FAILED", 35: "UNSUPPORTED_VERSION"}


@dataclass
class PartitionElr:
    """One partition as DescribeTopicPartitions reports it; leader -1: none. `elr`/`last_known_elr` None: the
    broker sent null (the field unset)."""

    topic: str
    partition: int
    leader: int
    leader_epoch: int
    replicas: list[int]
    isr: list[int]
    elr: list[int] | None
    last_known_elr: list[int] | None
    offline: list[int]
    error: str | None = None


class DescribePartitionsError(UnreachableError):
    """No broker gave a DescribeTopicPartitions answer (unreachable, an error, a malformed reply)."""


def _cursor(cursor: tuple[str, int] | None) -> bytes:
    """A nullable struct in a flexible version: -1 for null, else 1 and its fields (with their tag section)."""
    if cursor is None:
        return struct.pack(">b", -1)
    return struct.pack(">b", 1) + compact_str(cursor[0]) + struct.pack(">i", cursor[1]) + uvarint(0)


def encode_request(correlation_id: int, topics: list[str], cursor: tuple[str, int] | None = None) -> bytes:
    """DescribeTopicPartitions v0 for `topics` (header v2), starting at `cursor` (topic, partition) when given."""
    body = uvarint(len(topics) + 1) + b"".join(compact_str(t) + uvarint(0) for t in topics)
    body += struct.pack(">i", RESPONSE_PARTITION_LIMIT) + _cursor(cursor) + uvarint(0)
    return frame(header(API_KEY, VERSION, correlation_id, flexible=True) + body)


def _nullable_ints(r: Reader) -> list[int] | None:
    n = r.uvarint()
    return None if n == 0 else [r.int32() for _ in range(n - 1)]


def _error(code: int) -> str | None:
    return None if code == 0 else ERRORS.get(code, f"error {code}")


def decode_response(
    payload: bytes, correlation_id: int
) -> tuple[list[PartitionElr], dict[str, str], tuple[str, int] | None]:
    """(partitions, topic errors by name, next cursor or None) from a DescribeTopicPartitions v0 answer."""
    r = Reader(payload, "DescribeTopicPartitions response")
    check_correlation(r.int32(), correlation_id)
    r.tags()  # response header v1
    r.int32()  # throttle time
    parts: list[PartitionElr] = []
    errors: dict[str, str] = {}
    for _ in range(r.array_len()):
        code, name = r.int16(), r.compact_str()
        r.take(16)  # topic id
        r.int8()  # is internal
        for _ in range(r.array_len()):
            p_code, index, leader, epoch = r.int16(), r.int32(), r.int32(), r.int32()
            replicas, isr = r.int32_array(), r.int32_array()
            elr, last_known = _nullable_ints(r), _nullable_ints(r)
            offline = r.int32_array()
            r.tags()
            parts.append(PartitionElr(name, index, leader, epoch, replicas, isr, elr, last_known, offline,
                                      _error(p_code)))  # fmt: skip
        r.int32()  # topic authorized operations
        r.tags()
        if code:
            errors[name] = _error(code) or ""
    cursor = None
    if r.int8() >= 0:
        cursor = (r.compact_str(), r.int32())
        r.tags()
    r.tags()
    return parts, errors, cursor


def supported(host: str, port: int, timeout: float) -> bool:
    """Whether the broker lists API 75 at version 0 in its ApiVersions answer."""
    versions = decode_api_versions(exchange(host, port, encode_api_versions(1), timeout), 1)
    low, high = versions.get(API_KEY, (0, -1))
    return low <= VERSION <= high


def describe_on(host: str, port: int, topics: list[str], timeout: float) -> tuple[list[PartitionElr], dict[str, str]]:
    """Every page of one broker's answer for `topics` (OSError/ValueError when it gives none)."""
    out: list[PartitionElr] = []
    errors: dict[str, str] = {}
    cursor: tuple[str, int] | None = None
    for page in range(MAX_PAGES):
        cid = page + 2
        parts, errs, cursor = decode_response(exchange(host, port, encode_request(cid, topics, cursor), timeout), cid)
        out += parts
        errors |= errs
        if cursor is None:
            break
    return out, errors


def describe_partitions(
    addresses: list[tuple[str, int]], topics: list[str], timeout: float = 3.0
) -> tuple[list[PartitionElr], dict[str, str]] | None:
    """The first broker's answer for `topics`: (partitions sorted by topic and index, topic errors by name).

    None when a broker answered ApiVersions without API 75 (a Kafka without KIP-966's request);
    DescribePartitionsError when no broker answered at all.
    """
    problems: list[str] = []
    for host, port in addresses:
        try:
            if not supported(host, port, timeout):
                return None
            parts, errors = describe_on(host, port, topics, timeout)
        except (OSError, ValueError, struct.error) as exc:
            problems.append(f"{host}:{port}: {exc or type(exc).__name__}")
            continue
        return sorted(parts, key=lambda p: (p.topic, p.partition)), errors
    raise DescribePartitionsError("no broker answered DescribeTopicPartitions: " + "; ".join(problems[:3]))


def elr_view(
    addresses: list[tuple[str, int]], topics: list[str], timeout: float = 3.0
) -> dict[tuple[str, int], PartitionElr] | None:
    """Each partition of `topics` by (topic, partition), where the cluster has ELR on: a broker with API 75 and a
    finalized eligible.leader.replicas.version of 1 or more. None otherwise (3.x, ELR off, tansu): the topic view
    then shows no ELR columns. DescribePartitionsError when no broker answers."""
    problems: list[str] = []
    for host, port in addresses:
        try:
            if not supported(host, port, timeout):
                return None
            found = features.decode_response(exchange(host, port, features.encode_request(), timeout))
            if found.finalized.get(features.ELR_VERSION, 0) < 1:
                return None
            parts, _errors = describe_on(host, port, topics, timeout)
        except (OSError, ValueError, struct.error) as exc:
            problems.append(f"{host}:{port}: {exc or type(exc).__name__}")
            continue
        return {(p.topic, p.partition): p for p in parts}
    raise DescribePartitionsError("no broker answered DescribeTopicPartitions: " + "; ".join(problems[:3]))


def with_elr(bootstrap: str, topics: list[TopicDescription], timeout: float = 3.0) -> bool:
    """Fill each partition's `elr` and `last_known_elr` from DescribeTopicPartitions where the cluster has ELR on
    (elr_view); whether it has. Partitions the answer lacks (a topic deleted meanwhile) keep None."""
    if not topics:
        return False
    view = elr_view(parse_bootstrap(bootstrap), [t.name for t in topics], timeout)
    if view is None:
        return False
    for t in topics:
        for p in t.partitions:
            got = view.get((t.name, p.partition))
            if got is not None:
                p.elr, p.last_known_elr = list(got.elr or []), list(got.last_known_elr or [])
    return True


def parse_bootstrap(bootstrap: str) -> list[tuple[str, int]]:
    """'h1:9092,[::1]:9093' -> [('h1', 9092), ('::1', 9093)] (entries without a port are skipped)."""
    out = []
    for entry in bootstrap.split(","):
        host, _, port = entry.strip().rpartition(":")
        if host and port.isdigit():
            out.append((host.strip("[]"), int(port)))
    return out
