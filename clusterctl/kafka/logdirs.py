"""DescribeLogDirs (Kafka API 35) over a plain socket: a broker's log dirs and the size of each partition in them.

librdkafka's AdminClient has no DescribeLogDirs (`kafka-log-dirs.sh` starts a JVM per call), so the request is
encoded here over clusterctl.kafka.protocol, as DescribeQuorum is. Each broker reports only its own log dirs: it
is asked on its own address. ApiVersions goes first: a broker that does not list API 35 (tansu) gets a plain
"not supported" answer rather than a request it would drop; versions 2-4 (flexible) are spoken.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from clusterctl.errors import UnreachableError
from clusterctl.kafka.protocol import (
    Reader,
    check_correlation,
    decode_api_versions,
    encode_api_versions,
    exchange,
    frame,
    header,
    uvarint,
)

API_KEY = 35
MIN_VERSION, MAX_VERSION = 2, 4  # 2: flexible; 3: a top-level error code; 4: total and usable bytes
ERRORS = {0: None, 35: "UNSUPPORTED_VERSION", 57: "KAFKA_STORAGE_ERROR", 31: "CLUSTER_AUTHORIZATION_FAILED"}


@dataclass
class PartitionSize:
    topic: str
    partition: int
    size: int  # bytes on disk
    offset_lag: int  # a future replica's lag behind the current one (0 otherwise)
    is_future: bool  # a replica being moved between this broker's log dirs


@dataclass
class LogDir:
    path: str
    error: str | None  # the broker's error for this dir (KAFKA_STORAGE_ERROR: an offline dir)
    total_bytes: int = -1  # -1: not reported (DescribeLogDirs before v4)
    usable_bytes: int = -1
    partitions: list[PartitionSize] = field(default_factory=list)

    @property
    def size(self) -> int:
        return sum(p.size for p in self.partitions)


@dataclass
class BrokerLogDirs:
    """One broker's answer: its log dirs, or why there are none (`supported` False: the broker lacks the API)."""

    address: str
    supported: bool
    version: int | None = None
    log_dirs: list[LogDir] = field(default_factory=list)


class LogDirsError(UnreachableError):
    """The broker gave no DescribeLogDirs answer (unreachable, an error, a malformed reply)."""


def encode_request(correlation_id: int, version: int) -> bytes:
    """DescribeLogDirs for every topic (a null topic list) at `version` (2-4: flexible)."""
    return frame(header(API_KEY, version, correlation_id, flexible=True) + uvarint(0) + uvarint(0))


def decode_response(payload: bytes, correlation_id: int, version: int) -> tuple[int, list[LogDir]]:
    """(top-level error code, log dirs) from a DescribeLogDirs answer (payload without its size prefix)."""
    r = Reader(payload, "DescribeLogDirs response")
    check_correlation(r.int32(), correlation_id)
    r.tags()  # response header v1
    r.int32()  # throttle time
    error = r.int16() if version >= 3 else 0
    dirs = []
    for _ in range(r.array_len()):
        code, path = r.int16(), r.compact_str()
        d = LogDir(path, None if code == 0 else (ERRORS.get(code) or f"error {code}"))
        for _ in range(r.array_len()):
            topic = r.compact_str()
            for _ in range(r.array_len()):
                partition, size, lag, future = r.int32(), r.int64(), r.int64(), r.int8()
                r.tags()
                d.partitions.append(PartitionSize(topic, partition, size, lag, bool(future)))
            r.tags()
        if version >= 4:
            d.total_bytes, d.usable_bytes = r.int64(), r.int64()
        r.tags()
        dirs.append(d)
    r.tags()
    return error, dirs


def describe_log_dirs(address: str, timeout: float = 5.0) -> BrokerLogDirs:
    """The log dirs of the broker at `address` (host:port); LogDirsError when it gives no answer."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    try:
        versions = decode_api_versions(exchange(host, int(port), encode_api_versions(1), timeout), 1)
        low, high = versions.get(API_KEY, (0, -1))
        version = min(high, MAX_VERSION)
        if version < max(low, MIN_VERSION):
            return BrokerLogDirs(address, supported=False)
        error, dirs = decode_response(exchange(host, int(port), encode_request(2, version), timeout), 2, version)
    except (OSError, ValueError) as exc:
        raise LogDirsError(f"DescribeLogDirs on {address}: {exc or type(exc).__name__}") from None
    if error:
        raise LogDirsError(f"DescribeLogDirs on {address}: {ERRORS.get(error) or f'error {error}'}")
    for d in dirs:
        d.partitions.sort(key=lambda p: (p.topic, p.partition, p.is_future))
    return BrokerLogDirs(address, True, version, sorted(dirs, key=lambda d: d.path))
