"""DescribeQuorum (Kafka API 55, KIP-595/836) over a plain socket: the KRaft controller quorum as Kafka reports it.

This module is the wire protocol only (encode the request, decode the answer into QuorumInfo);
clusterctl.kafka.kraft.quorum is the view over that answer (leader, voters, observers, fenced brokers).

Why not confluent-kafka: librdkafka's AdminClient has no DescribeQuorum, and `kafka-metadata-quorum.sh` through
`docker exec` starts a JVM per call (seconds), too slow for the observer's sub-second polling. The request is
tiny, so it is encoded here, for partition 0 of `__cluster_metadata`: version 1 (Kafka 3.3+), or version 2 (Kafka
3.9+, KIP-853) for a dynamic quorum, whose answer adds each replica's directory id and the voters' endpoints.

A broker forwards the request to the active controller; a controller answers it itself when it is the leader
(a follower answers NOT_LEADER_OR_FOLLOWER). `describe_quorum` tries each address until one gives the full view.
"""

from __future__ import annotations

import base64
import struct
from dataclasses import dataclass, field

from clusterctl.errors import UnreachableError
from clusterctl.kafka.protocol import Reader, compact_str, exchange, frame, header, uvarint

API_KEY = 55
API_VERSION = 1
DYNAMIC_VERSION = 2  # KIP-853: directory ids and voter endpoints
METADATA_TOPIC = "__cluster_metadata"

# Kafka error codes this module names (anything else is shown by number)
ERRORS = {
    0: None,
    3: "UNKNOWN_TOPIC_OR_PARTITION",
    6: "NOT_LEADER_OR_FOLLOWER",
    7: "REQUEST_TIMED_OUT",
    15: "COORDINATOR_NOT_AVAILABLE",
    35: "UNSUPPORTED_VERSION",
    41: "NOT_CONTROLLER",
    42: "INVALID_REQUEST",
    89: "BROKER_NOT_AVAILABLE",
}


@dataclass
class ReplicaState:
    """A voter or observer as the quorum leader sees it."""

    node_id: int
    log_end_offset: int  # -1: unknown
    last_fetch_ms: int = -1  # epoch ms of its last fetch (-1: unknown)
    last_caught_up_ms: int = -1
    directory_id: str | None = None  # v2: its metadata log directory's id (None: v1, or a static voter's zero id)


@dataclass
class QuorumInfo:
    """The DescribeQuorum answer for __cluster_metadata-0."""

    leader_id: int  # -1: no leader
    leader_epoch: int
    high_watermark: int
    voters: list[ReplicaState] = field(default_factory=list)
    observers: list[ReplicaState] = field(default_factory=list)
    answered_by: str = ""
    endpoints: dict[int, list[str]] = field(default_factory=dict)  # v2: voter node id -> NAME://host:port


class QuorumError(UnreachableError):
    """No address gave a full DescribeQuorum answer."""


# ---------------------------------------------------------------- encoding


def encode_request(correlation_id: int, version: int = API_VERSION) -> bytes:
    """Size-prefixed DescribeQuorum request (header v2, flexible body) for __cluster_metadata-0."""
    body = (
        uvarint(2)  # one topic
        + compact_str(METADATA_TOPIC)
        + uvarint(2)  # one partition
        + struct.pack(">i", 0)
        + uvarint(0)  # partition tags
        + uvarint(0)  # topic tags
        + uvarint(0)  # request tags
    )
    return frame(header(API_KEY, version, correlation_id, flexible=True) + body)


# ---------------------------------------------------------------- decoding


def decode_response(payload: bytes, correlation_id: int, version: int = API_VERSION) -> tuple[int, QuorumInfo | None]:
    """(error code, info) from a response payload (without its size prefix)."""
    r = Reader(payload, "DescribeQuorum response")
    got = r.int32()
    if got != correlation_id:
        raise ValueError(f"correlation id {got}, expected {correlation_id}")
    r.tags()  # response header v1
    top_error = r.int16()
    if version >= 2:
        r.compact_str()  # error message (nullable: null reads as "")
    info: QuorumInfo | None = None
    error = top_error
    for _ in range(r.array_len()):
        topic = r.compact_str()
        for _ in range(r.array_len()):
            index = r.int32()
            perr = r.int16()
            if version >= 2:
                r.compact_str()
            leader, epoch, hwm = r.int32(), r.int32(), r.int64()
            voters = [_replica(r, version) for _ in range(r.array_len())]
            observers = [_replica(r, version) for _ in range(r.array_len())]
            r.tags()
            if topic == METADATA_TOPIC and index == 0:
                error = error or perr
                info = QuorumInfo(leader, epoch, hwm, voters, observers)
        r.tags()
    endpoints = _nodes(r) if version >= 2 else {}
    r.tags()
    if info is not None:
        info.endpoints = endpoints
    return error, (info if error == 0 else None)


def _replica(r: Reader, version: int) -> ReplicaState:
    node = r.int32()
    directory = uuid_text(r.take(16)) if version >= 2 else None
    leo = r.int64()
    fetch = caught = -1
    if version >= 1:
        fetch, caught = r.int64(), r.int64()
    r.tags()
    return ReplicaState(node, leo, fetch, caught, directory)


def _nodes(r: Reader) -> dict[int, list[str]]:
    """v2's Nodes: each voter's listeners."""
    out: dict[int, list[str]] = {}
    for _ in range(r.array_len()):
        node = r.int32()
        listeners = []
        for _ in range(r.array_len()):
            name, host, port = r.compact_str(), r.compact_str(), struct.unpack(">H", r.take(2))[0]
            r.tags()
            listeners.append(f"{name}://{host}:{port}")
        r.tags()
        out[node] = listeners
    return out


def uuid_text(raw: bytes) -> str | None:
    """Kafka's Uuid as it prints it (base64url, no padding); None for the zero id (no directory)."""
    if raw == bytes(16):
        return None
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


# ---------------------------------------------------------------- transport


def describe_one(host: str, port: int, timeout: float = 2.0, version: int = API_VERSION) -> QuorumInfo:
    """Ask one broker or controller; QuorumError with the reason when it gives no full answer."""
    cid = 0x5155  # any; one request per connection
    try:
        error, info = decode_response(exchange(host, port, encode_request(cid, version), timeout), cid, version)
    except (OSError, ValueError) as exc:
        raise QuorumError(f"{host}:{port}: {exc or type(exc).__name__}") from None
    if info is None:
        raise QuorumError(f"{host}:{port}: {ERRORS.get(error) or f'error {error}'}")
    info.answered_by = f"{host}:{port}"
    return info


def describe_quorum(addresses: list[tuple[str, int]], timeout: float = 2.0, version: int = API_VERSION) -> QuorumInfo:
    """The first full answer among `addresses`, asked in parallel (a paused node must not delay the answer)."""
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    if not addresses:
        raise QuorumError("no address to ask for the controller quorum")
    reasons: list[str] = []
    pool = ThreadPoolExecutor(max_workers=len(addresses), thread_name_prefix="describe-quorum")
    try:
        pending = {pool.submit(describe_one, h, p, timeout, version) for h, p in addresses}
        while pending:
            done, pending = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                exc = fut.exception()
                if exc is None:
                    return fut.result()
                reasons.append(exc.message if isinstance(exc, QuorumError) else str(exc))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    raise QuorumError("no controller quorum answer: " + "; ".join(reasons[:4]))
