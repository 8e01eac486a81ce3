"""A loopback stand-in for one broker in wire-protocol tests: ApiVersions v0 with the given APIs, every other
request answered by the test's own function."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Callable, Iterator

from clusterctl.kafka.protocol import recv_exact


def api_versions(cid: int, apis: dict[int, tuple[int, int]]) -> bytes:
    """An ApiVersions v0 response body: no error, (api key, min, max) per API."""
    body = struct.pack(">ihi", cid, 0, len(apis))
    return body + b"".join(struct.pack(">hhh", k, lo, hi) for k, (lo, hi) in apis.items())


def fake_broker(
    apis: dict[int, tuple[int, int]], answer: Callable[[int, int], bytes], backlog: int = 8
) -> Iterator[tuple[str, int]]:
    """Listen on loopback until closed: ApiVersions from `apis`, any other request `answer(correlation id,
    version)` (the response body, correlation id first). Yields (host, port)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(backlog)

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                req = recv_exact(conn, struct.unpack(">i", recv_exact(conn, 4))[0])
                api, version, cid = struct.unpack(">hhi", req[:8])
                body = api_versions(cid, apis) if api == 18 else answer(cid, version)
                conn.sendall(struct.pack(">i", len(body)) + body)

    threading.Thread(target=serve, daemon=True).start()
    yield ("127.0.0.1", server.getsockname()[1])
    server.close()
