"""Kafka's wire protocol at its smallest: framing, the primitive types and one request/response exchange.

For the few requests librdkafka's AdminClient does not send (DescribeQuorum in clusterctl.kafka.kraft,
DescribeLogDirs in clusterctl.kafka.logdirs), each encoded by its own module over these helpers. Requests go
one per connection: a fresh socket, the size-prefixed request, the size-prefixed answer.
"""

from __future__ import annotations

import io
import socket
import ssl
import struct
from collections.abc import Callable
from dataclasses import dataclass

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


@dataclass(frozen=True)
class WireSecurity:
    """How to reach one listener of a secured cluster: TLS (CA, optional client certificate; ca None: no TLS)
    and SASL/SCRAM."""

    ca: str | None
    cert: str | None = None
    key: str | None = None
    sasl: tuple[str, str, str] | None = None  # mechanism, user, password


# host:port -> its security, resolved when first used (a spec names it before `render` has made the secrets)
_SECURED: dict[tuple[str, int], Callable[[], WireSecurity]] = {}
SASL_HANDSHAKE_KEY = 17
SASL_AUTHENTICATE_KEY = 36


def use_security(addresses: list[tuple[str, int]], security: Callable[[], WireSecurity]) -> None:
    """Requests to these addresses go through TLS (and SASL) as `security` says."""
    for address in addresses:
        _SECURED[address] = security


def _connect(host: str, port: int, timeout: float) -> socket.socket:
    sock = socket.create_connection((host, port), timeout=timeout)
    sock.settimeout(timeout)
    found = _SECURED.get((host, port))
    if found is None:
        return sock
    sec = found()
    if sec.ca is not None:
        context = ssl.create_default_context(cafile=sec.ca)
        if sec.cert and sec.key:
            context.load_cert_chain(sec.cert, sec.key)
        sock = context.wrap_socket(sock, server_hostname=host)
    if sec.sasl is not None:
        _scram(sock, *sec.sasl)
    return sock


def _ask(sock: socket.socket, request: bytes) -> bytes:
    sock.sendall(request)
    size = struct.unpack(">i", recv_exact(sock, 4))[0]
    if not 0 < size < MAX_RESPONSE:
        raise ValueError(f"implausible response size {size}")
    return recv_exact(sock, size)


def _scram(sock: socket.socket, mechanism: str, user: str, password: str) -> None:
    """SaslHandshake v1 and SaslAuthenticate v1 (KIP-152) with SCRAM; ValueError naming the refusal."""
    from scramp import ScramClient

    name = mechanism.encode()
    r = Reader(_ask(sock, frame(header(SASL_HANDSHAKE_KEY, 1, 1, False) + struct.pack(">h", len(name)) + name)))
    check_correlation(r.int32(), 1)
    if error := r.int16():
        raise ValueError(f"SASL mechanism {mechanism} refused (error {error})")
    client = ScramClient([mechanism], user, password)
    client.set_server_first(_authenticate(sock, client.get_client_first().encode(), 2, user, mechanism))
    client.set_server_final(_authenticate(sock, client.get_client_final().encode(), 3, user, mechanism))


def _authenticate(sock: socket.socket, token: bytes, correlation_id: int, user: str, mechanism: str) -> str:
    body = header(SASL_AUTHENTICATE_KEY, 1, correlation_id, False) + struct.pack(">i", len(token)) + token
    r = Reader(_ask(sock, frame(body)), "SaslAuthenticate response")
    check_correlation(r.int32(), correlation_id)
    error = r.int16()
    n = r.int16()
    message = r.take(n).decode("utf-8", "replace") if n > 0 else ""
    if error:
        raise ValueError(f"authentication failed for user {user} ({mechanism}): {message or f'error {error}'}")
    return r.take(r.int32()).decode("utf-8")


def refusal(address: str, timeout: float = 3.0) -> str | None:
    """Why a secured listener at host:port refuses this client (TLS or SASL), in one line; None when it is not
    secured here, lets the client in, or does not answer at all."""
    host, _, port = address.rpartition(":")
    if (host, int(port)) not in _SECURED:
        return None
    try:
        with _connect(host, int(port), timeout):
            return None
    except ssl.SSLError as exc:
        return f"TLS handshake with {address} failed: {exc.reason or exc}"
    except ValueError as exc:
        return f"{exc} at {address}"
    except OSError:
        return None


def exchange(host: str, port: int, request: bytes, timeout: float) -> bytes:
    """Send one framed request on a new connection (TLS and SASL first where the address is secured, see
    `use_security`); the answer's payload (OSError/ValueError on failure)."""
    with _connect(host, port, timeout) as sock:
        return _ask(sock, request)
