"""DescribeLogDirs over a plain socket (clusterctl.kafka.logdirs): the bytes sent, the answer decoded, and a broker
that does not speak it, against a loopback server answering the way a Kafka broker does (real Kafka: the broker
page test in tests/test_console_kafka.py; tansu: tests/test_console_live_ui.py)."""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator

import _fakebroker
import pytest

from clusterctl.kafka import logdirs
from clusterctl.kafka.protocol import encode_api_versions


def test_request_bytes() -> None:
    req = logdirs.encode_request(7, 4)
    assert struct.unpack(">i", req[:4])[0] == len(req) - 4
    body = req[4:]
    assert body[:8] == struct.pack(">hhi", 35, 4, 7)  # api key 35, version 4, correlation 7
    assert body[8:20] == b"\x00\x0aclusterctl" and body[20] == 0  # client id, no header tags
    assert body[21:] == b"\x00\x00"  # topics: null (every topic), no request tags
    assert encode_api_versions(1)[4:] == struct.pack(">hhi", 18, 0, 1) + b"\x00\x0aclusterctl"


def _str(s: str) -> bytes:
    return bytes([len(s) + 1]) + s.encode()


def response_bytes(cid: int, version: int, dirs: list[tuple[str, int, list[tuple[str, int, int]]]]) -> bytes:
    """A DescribeLogDirs answer as Kafka writes it: header v1, flexible body; dirs are (path, error, partitions)."""
    out = struct.pack(">i", cid) + b"\x00" + struct.pack(">i", 0)
    if version >= 3:
        out += struct.pack(">h", 0)
    out += bytes([len(dirs) + 1])
    for path, error, parts in dirs:
        out += struct.pack(">h", error) + _str(path)
        topics = sorted({t for t, _, _ in parts})
        out += bytes([len(topics) + 1])
        for t in topics:
            mine = [(p, size) for name, p, size in parts if name == t]
            out += _str(t) + bytes([len(mine) + 1])
            out += b"".join(struct.pack(">iqqb", p, size, 0, 0) + b"\x00" for p, size in mine)
            out += b"\x00"
        if version >= 4:
            out += struct.pack(">qq", 100 << 30, 60 << 30)
        out += b"\x00"
    return out + b"\x00"


DIRS = [("/var/lib/kafka/data", 0, [("orders", 1, 2048), ("orders", 0, 5 << 20), ("__consumer_offsets", 3, 0)]),
        ("/var/lib/kafka/broken", 57, [])]  # fmt: skip


def test_decode_v4_and_v2() -> None:
    error, dirs = logdirs.decode_response(response_bytes(3, 4, DIRS), 3, 4)
    assert error == 0 and [d.path for d in dirs] == ["/var/lib/kafka/data", "/var/lib/kafka/broken"]
    data, broken = dirs
    assert (data.size, data.total_bytes, data.usable_bytes, data.error) == ((5 << 20) + 2048, 100 << 30, 60 << 30, None)
    assert [(p.topic, p.partition, p.size) for p in data.partitions] == [
        ("__consumer_offsets", 3, 0), ("orders", 1, 2048), ("orders", 0, 5 << 20)]  # fmt: skip
    assert broken.error == "KAFKA_STORAGE_ERROR" and broken.partitions == []
    _, old = logdirs.decode_response(response_bytes(3, 2, DIRS), 3, 2)
    assert old[0].size == data.size and old[0].total_bytes == -1  # v2: no disk totals
    with pytest.raises(ValueError, match="correlation id"):
        logdirs.decode_response(response_bytes(3, 4, DIRS), 4, 4)
    with pytest.raises(ValueError, match="truncated"):
        logdirs.decode_response(response_bytes(3, 4, DIRS)[:-20], 3, 4)


def fake_broker(apis: dict[int, tuple[int, int]]) -> Iterator[str]:
    """A loopback broker: ApiVersions with `apis`, DescribeLogDirs with DIRS at the version asked."""
    for host, port in _fakebroker.fake_broker(apis, lambda cid, version: response_bytes(cid, version, DIRS), 4):
        yield f"{host}:{port}"


@pytest.fixture
def kafka_like() -> Iterator[str]:
    yield from fake_broker({18: (0, 3), 35: (0, 4)})


@pytest.fixture
def without_log_dirs() -> Iterator[str]:
    yield from fake_broker({18: (0, 3), 3: (0, 12)})  # tansu: no API 35


def test_describe_log_dirs_over_a_socket(kafka_like: str) -> None:
    got = logdirs.describe_log_dirs(kafka_like, timeout=2)
    assert got.supported and got.version == 4 and got.address == kafka_like
    assert [d.path for d in got.log_dirs] == ["/var/lib/kafka/broken", "/var/lib/kafka/data"]  # by path
    assert [(p.topic, p.partition) for p in got.log_dirs[1].partitions] == [
        ("__consumer_offsets", 3), ("orders", 0), ("orders", 1)]  # fmt: skip


def test_a_broker_without_the_api_is_not_supported_and_a_dead_one_an_error(without_log_dirs: str) -> None:
    got = logdirs.describe_log_dirs(without_log_dirs, timeout=2)
    assert (got.supported, got.log_dirs) == (False, [])
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    port = closed.getsockname()[1]
    closed.close()  # nothing listens: connection refused
    with pytest.raises(logdirs.LogDirsError, match=f"DescribeLogDirs on 127.0.0.1:{port}") as err:
        logdirs.describe_log_dirs(f"127.0.0.1:{port}", timeout=1)
    assert err.value.exit_code == 4
