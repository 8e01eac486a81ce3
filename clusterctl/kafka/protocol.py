"""Kafka's wire protocol at its smallest: framing, the primitive types and one request/response exchange.

For the few requests librdkafka's AdminClient does not send (DescribeQuorum in clusterctl.kafka.kraft,
DescribeLogDirs in clusterctl.kafka.logdirs), each encoded by its own module over these helpers. Requests go
one per connection: a fresh socket, the size-prefixed request, the size-prefixed answer.
"""

from __future__ import annotations

import io
import socket
import struct

CLIENT_ID = "clusterctl"
API_VERSIONS_KEY = 18
MAX_RESPONSE = 16 << 20  # a broker with thousands of partitions answers DescribeLogDirs in a few MiB


def uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def compact_str(s: str) -> bytes:
    raw = s.encode("utf-8")
    return uvarint(len(raw) + 1) + raw


def header(api_key: int, version: int, correlation_id: int, flexible: bool) -> bytes:
    """Request header v1 (classic) or v2 (flexible: with its empty tag section)."""
    client = CLIENT_ID.encode("ascii")
    out = struct.pack(">hhih", api_key, version, correlation_id, len(client)) + client
    return out + uvarint(0) if flexible else out


def frame(msg: bytes) -> bytes:
    return struct.pack(">i", len(msg)) + msg


class Reader:
    """Reads Kafka's primitive types from one response payload; ValueError when it is cut short or malformed."""

    def __init__(self, data: bytes, what: str = "response") -> None:
        self.buf = io.BytesIO(data)
        self.what = what

    def take(self, n: int) -> bytes:
        b = self.buf.read(n)
        if len(b) != n:
            raise ValueError(f"truncated {self.what}")
        return b

    def int8(self) -> int:
        return int(struct.unpack(">b", self.take(1))[0])

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
                raise ValueError(f"malformed varint in {self.what}")

    def compact_str(self) -> str:
        n = self.uvarint() - 1
        return "" if n < 0 else self.take(n).decode("utf-8")

    def array_len(self) -> int:
        return max(0, self.uvarint() - 1)

    def int32_array(self) -> list[int]:
        """A compact array of int32 (replica and ISR lists)."""
        return [self.int32() for _ in range(self.array_len())]

    def tags(self) -> None:
        for _ in range(self.uvarint()):
            self.uvarint()
            self.take(self.uvarint())


def check_correlation(got: int, expected: int) -> None:
    if got != expected:
        raise ValueError(f"correlation id {got}, expected {expected}")


def encode_api_versions(correlation_id: int) -> bytes:
    """ApiVersions v0: header v1, empty body (every broker answers it, whatever else it speaks)."""
    return frame(header(API_VERSIONS_KEY, 0, correlation_id, flexible=False))


def decode_api_versions(payload: bytes, correlation_id: int) -> dict[int, tuple[int, int]]:
    """api key -> (min, max version) from an ApiVersions v0 answer."""
    r = Reader(payload, "ApiVersions response")
    check_correlation(r.int32(), correlation_id)
    error = r.int16()
    if error:
        raise ValueError(f"ApiVersions error {error}")
    out = {}
    for _ in range(r.int32()):
        key, low, high = r.int16(), r.int16(), r.int16()
        out[key] = (low, high)
    return out


def recv_exact(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ConnectionError("connection closed by the peer")
        out += chunk
    return bytes(out)


def exchange(host: str, port: int, request: bytes, timeout: float) -> bytes:
    """Send one framed request on a new connection; the answer's payload (OSError/ValueError on failure)."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.settimeout(timeout)
        sock.sendall(request)
        size = struct.unpack(">i", recv_exact(sock, 4))[0]
        if not 0 < size < MAX_RESPONSE:
            raise ValueError(f"implausible response size {size}")
        return recv_exact(sock, size)
