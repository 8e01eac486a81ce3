"""One HTTP request straight into an ASGI app, in-process (no server, no socket): for the console's guard tests."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit


@dataclass
class Reply:
    status: int
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: bytes = b""

    def header(self, name: str) -> list[str]:
        return [v for k, v in self.headers if k == name.lower()]

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")


def call(app: Any, method: str, target: str, headers: list[tuple[str, str]], body: bytes = b"") -> Reply:
    """`method target` with exactly these headers (Host included, or not: the caller decides)."""
    parts = urlsplit(target)
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": parts.path or "/",
        "raw_path": (parts.path or "/").encode("latin-1", "replace"),
        "query_string": parts.query.encode("latin-1", "replace"),
        "root_path": "",
        "headers": [(k.lower().encode("latin-1"), v.encode("latin-1", "replace")) for k, v in headers],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 9000),
    }
    reply = Reply(0)
    sent = False

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.sleep(3600)  # a streaming response polls for a disconnect: never comes
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            reply.status = message["status"]
            reply.headers = [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in message["headers"]]
        elif message["type"] == "http.response.body":
            reply.body += message.get("body", b"")

    asyncio.run(asyncio.wait_for(app(scope, receive, send), 30))
    return reply
