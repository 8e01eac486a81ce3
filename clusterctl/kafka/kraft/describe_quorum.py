"""DescribeQuorum (Kafka API 55, KIP-595/836) over a plain socket: the KRaft controller quorum as Kafka reports it.

This module is the wire protocol only (encode the request, decode the answer into QuorumInfo);
clusterctl.kafka.kraft.quorum is the view over that answer (leader, voters, observers, fenced brokers).

Why not confluent-kafka: librdkafka's AdminClient has no DescribeQuorum, and `kafka-metadata-quorum.sh` through
`docker exec` starts a JVM per call (seconds), too slow for the observer's sub-second polling. The request is
tiny, so it is encoded here: version 1 (Kafka 3.3+), for partition 0 of `__cluster_metadata`.

A broker forwards the request to the active controller; a controller answers it itself when it is the leader
(a follower answers NOT_LEADER_OR_FOLLOWER). `describe_quorum` tries each address until one gives the full view.
"""

from __future__ import annotations

import io
import socket
import struct
from dataclasses import dataclass, field

from clusterctl.errors import UnreachableError

API_KEY = 55
API_VERSION = 1
METADATA_TOPIC = "__cluster_metadata"
CLIENT_ID = "clusterctl"

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


@dataclass
class QuorumInfo:
    """The DescribeQuorum answer for __cluster_metadata-0."""

    leader_id: int  # -1: no leader
    leader_epoch: int
    high_watermark: int
    voters: list[ReplicaState] = field(default_factory=list)
    observers: list[ReplicaState] = field(default_factory=list)
    answered_by: str = ""


class QuorumError(UnreachableError):
    """No address gave a full DescribeQuorum answer."""


# ---------------------------------------------------------------- encoding


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _compact_str(s: str) -> bytes:
    raw = s.encode("utf-8")
    return _uvarint(len(raw) + 1) + raw


def encode_request(correlation_id: int, version: int = API_VERSION) -> bytes:
    """Size-prefixed DescribeQuorum request (header v2, flexible body) for __cluster_metadata-0."""
    client = CLIENT_ID.encode("ascii")
    header = struct.pack(">hhih", API_KEY, version, correlation_id, len(client)) + client + _uvarint(0)
    body = (
        _uvarint(2)  # one topic
        + _compact_str(METADATA_TOPIC)
        + _uvarint(2)  # one partition
        + struct.pack(">i", 0)
        + _uvarint(0)  # partition tags
        + _uvarint(0)  # topic tags
        + _uvarint(0)  # request tags
    )
    msg = header + body
    return struct.pack(">i", len(msg)) + msg


# ---------------------------------------------------------------- decoding


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.buf = io.BytesIO(data)

    def take(self, n: int) -> bytes:
        b = self.buf.read(n)
        if len(b) != n:
            raise ValueError("truncated DescribeQuorum response")
        return b

    def int16(self) -> int:
        return int(struct.unpack(">h", self.take(2))[0])

    def int32(self) -> int:
        return int(struct.unpack(">i", self.take(4))[0])

    def int64(self) -> int:
        return int(struct.unpack(">q", self.take(8))[0])

    def uvarint(self) -> int:
        shift = result = 0
        while True:
            b = self.take(1)[0]
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 35:
                raise ValueError("malformed varint in DescribeQuorum response")

    def compact_str(self) -> str:
        n = self.uvarint() - 1
        return "" if n < 0 else self.take(n).decode("utf-8")

    def array_len(self) -> int:
        return max(0, self.uvarint() - 1)

    def tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())


def decode_response(payload: bytes, correlation_id: int, version: int = API_VERSION) -> tuple[int, QuorumInfo | None]:
    """(error code, info) from a response payload (without its size prefix)."""
    r = _Reader(payload)
    got = r.int32()
    if got != correlation_id:
        raise ValueError(f"correlation id {got}, expected {correlation_id}")
    r.tags()  # response header v1
    top_error = r.int16()
    info: QuorumInfo | None = None
    error = top_error
    for _ in range(r.array_len()):
        topic = r.compact_str()
        for _ in range(r.array_len()):
            index = r.int32()
            perr = r.int16()
            leader, epoch, hwm = r.int32(), r.int32(), r.int64()
            voters = [_replica(r, version) for _ in range(r.array_len())]
            observers = [_replica(r, version) for _ in range(r.array_len())]
            r.tags()
            if topic == METADATA_TOPIC and index == 0:
                error = error or perr
                info = QuorumInfo(leader, epoch, hwm, voters, observers)
        r.tags()
    r.tags()
    return error, (info if error == 0 else None)


def _replica(r: _Reader, version: int) -> ReplicaState:
    node, leo = r.int32(), r.int64()
    fetch = caught = -1
    if version >= 1:
        fetch, caught = r.int64(), r.int64()
    r.tags()
    return ReplicaState(node, leo, fetch, caught)


# ---------------------------------------------------------------- transport


def describe_one(host: str, port: int, timeout: float = 2.0) -> QuorumInfo:
    """Ask one broker or controller; QuorumError with the reason when it gives no full answer."""
    cid = 0x5155  # any; one request per connection
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(encode_request(cid))
            size = struct.unpack(">i", _recv(sock, 4))[0]
            if not 0 < size < 1 << 20:
                raise QuorumError(f"{host}:{port}: implausible response size {size}")
            error, info = decode_response(_recv(sock, size), cid)
    except (OSError, ValueError) as exc:
        raise QuorumError(f"{host}:{port}: {exc or type(exc).__name__}") from None
    if info is None:
        raise QuorumError(f"{host}:{port}: {ERRORS.get(error) or f'error {error}'}")
    info.answered_by = f"{host}:{port}"
    return info


def _recv(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("connection closed by the peer")
        out += chunk
    return bytes(out)


def describe_quorum(addresses: list[tuple[str, int]], timeout: float = 2.0) -> QuorumInfo:
    """The first full answer among `addresses`, asked in parallel (a paused node must not delay the answer)."""
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    if not addresses:
        raise QuorumError("no address to ask for the controller quorum")
    reasons: list[str] = []
    pool = ThreadPoolExecutor(max_workers=len(addresses), thread_name_prefix="describe-quorum")
    try:
        pending = {pool.submit(describe_one, h, p, timeout) for h, p in addresses}
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
