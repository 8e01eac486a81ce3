"""Metadata (Kafka API 3, v12) from one broker exactly, over a plain socket, with each partition's leader epoch.

librdkafka answers `list_topics` from whichever broker it picks (a fresh client with one bootstrap address learns
the others from the first answer and may ask them next), and it does not return leader epochs. Both matter right
after a healed network partition: the broker that was cut off keeps answering from its old metadata image — itself
as leader, its old high watermark, a full ISR — until it reaches the controllers again (on Kafka 4.4.0 here, 13 s
after the heal: the JVM caches the failed name lookups of the partition for `networkaddress.cache.negative.ttl`,
10 s). `converged` is the check that every broker has moved past that.
"""

from __future__ import annotations

import secrets
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from clusterctl.kafka.protocol import Reader, check_correlation, compact_str, exchange, frame, header, uvarint

API_KEY = 3
VERSION = 12  # flexible; Kafka 3.1+ and 4.x (4.0 dropped v0-v3, KIP-896)
_UUID_ZERO = bytes(16)


@dataclass(frozen=True)
class PartitionState:
    partition: int
    leader: int  # -1: none
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    error: int = 0


@dataclass
class BrokerMetadata:
    """One broker's own answer: the brokers it lists, its controller, and the asked topics' partitions."""

    address: str
    brokers: set[int]
    controller: int
    topics: dict[str, list[PartitionState]] = field(default_factory=dict)  # absent: the broker does not know it


def encode_request(correlation_id: int, topics: list[str] | None) -> bytes:
    """Metadata v12 for `topics` (None: every topic), no auto-creation."""
    if topics is None:
        body = uvarint(0)  # null array: all topics
    else:
        body = uvarint(len(topics) + 1) + b"".join(_UUID_ZERO + compact_str(t) + uvarint(0) for t in topics)
    body += b"\x00\x00" + uvarint(0)  # allow_auto_topic_creation, include_topic_authorized_operations, tags
    return frame(header(API_KEY, VERSION, correlation_id, flexible=True) + body)


def decode_response(payload: bytes, correlation_id: int, address: str) -> BrokerMetadata:
    r = Reader(payload, "Metadata response")
    check_correlation(r.int32(), correlation_id)
    r.tags()  # response header v1
    r.int32()  # throttle time
    brokers = set()
    for _ in range(r.array_len()):
        node = r.int32()
        r.compact_str()  # host
        r.int32()  # port
        r.compact_str()  # rack (nullable)
        r.tags()
        brokers.add(node)
    r.compact_str()  # cluster id
    controller = r.int32()
    topics: dict[str, list[PartitionState]] = {}
    for _ in range(r.array_len()):
        error = r.int16()
        name = r.compact_str()
        r.take(16)  # topic id
        r.int8()  # is_internal
        parts = []
        for _ in range(r.array_len()):
            p_error, index, leader, epoch = r.int16(), r.int32(), r.int32(), r.int32()
            replicas, isr = tuple(r.int32_array()), tuple(r.int32_array())
            r.int32_array()  # offline replicas
            r.tags()
            parts.append(PartitionState(index, leader, epoch, replicas, isr, p_error))
        r.int32()  # topic authorized operations
        r.tags()
        if error == 0:
            topics[name] = sorted(parts, key=lambda p: p.partition)
    r.tags()
    return BrokerMetadata(address, brokers, controller, topics)


def ask(address: str, topics: list[str] | None, timeout: float = 2.0) -> BrokerMetadata:
    """The metadata answer of the broker at host:port itself (OSError/ValueError when it gives none)."""
    host, _, port = address.rpartition(":")
    cid = secrets.randbelow(1 << 31)
    return decode_response(exchange(host, int(port), encode_request(cid, topics), timeout), cid, address)


def ask_each(addresses: list[str], topics: list[str] | None, timeout: float = 2.0) -> dict[str, BrokerMetadata | str]:
    """Every address asked on its own, in parallel: its answer, or the one-line reason it gave none."""

    def one(address: str) -> tuple[str, BrokerMetadata | str]:
        try:
            return address, ask(address, topics, timeout)
        except (OSError, ValueError) as exc:
            return address, f"{type(exc).__name__}: {exc}"

    if not addresses:
        return {}
    with ThreadPoolExecutor(max_workers=len(addresses)) as pool:
        return dict(pool.map(one, addresses))


def converged(answers: dict[str, BrokerMetadata | str], topic: str) -> str | None:
    """None when every answering broker gives each partition of `topic` the same leader and leader epoch; else
    the first disagreement, one line (a broker that does not answer is left out: it serves no client either)."""
    views = {a: m.topics.get(topic) for a, m in answers.items() if isinstance(m, BrokerMetadata)}
    if not views:
        return "no broker answered metadata"
    if missing := sorted(a for a, parts in views.items() if not parts):
        return f"{missing[0]} does not know topic {topic} yet"
    seen: dict[int, tuple[str, int, int]] = {}
    for address, parts in sorted(views.items()):
        for p in parts or []:
            first = seen.setdefault(p.partition, (address, p.leader, p.leader_epoch))
            if (first[1], first[2]) != (p.leader, p.leader_epoch):
                return (
                    f"{topic}-{p.partition}: {first[0]} says leader {first[1]} (epoch {first[2]}), "
                    f"{address} says leader {p.leader} (epoch {p.leader_epoch})"
                )
    return None
