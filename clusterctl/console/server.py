"""Serve the console with uvicorn: bind first (a taken port is one line), refuse exposure without a token."""

from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass

from clusterctl.console.data import ConsoleTarget
from clusterctl.errors import ClusterctlError, UsageError

TOKEN_ENV = "CLUSTERCTL_CONSOLE_TOKEN"
MIN_TOKEN_CHARS = 32


def is_loopback(address: str) -> bool:
    """127.0.0.0/8, ::1 and 'localhost' are loopback; anything else (0.0.0.0 included) is exposed."""
    if address == "localhost":
        return True
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


def check_token(exposed_on: str, token: str | None) -> str | None:
    """The token to require: None on loopback; on any other address one must exist (and be long enough)."""
    if is_loopback(exposed_on):
        return None
    if not token:
        raise UsageError(
            f"the console on {exposed_on} would be reachable from other hosts: it needs a token",
            hint=f"run `clusterctl render` (it keeps one in compose/<name>/.env) or set {TOKEN_ENV}",
        )
    if len(token) < MIN_TOKEN_CHARS:
        raise UsageError(f"{TOKEN_ENV} is too short ({len(token)} chars; at least {MIN_TOKEN_CHARS})")
    return token


@dataclass
class Listen:
    host: str
    port: int
    token: str | None

    @property
    def url(self) -> str:
        host = "127.0.0.1" if self.host in ("0.0.0.0", "") else self.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.port}/" + (f"?token={self.token}" if self.token else "")


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, or one line saying why not."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise ClusterctlError(f"cannot listen on {host}:{port}: {(exc.strerror or str(exc)).lower()}") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def serve(target: ConsoleTarget, listen: Listen) -> None:
    """Run until interrupted."""
    import uvicorn

    from clusterctl.console.app import build_app

    sock = bind(listen.host, listen.port)
    config = uvicorn.Config(
        build_app(target, listen.token),
        log_level=os.environ.get("CLUSTERCTL_CONSOLE_LOG", "warning"),
        access_log=False,
        lifespan="off",
        timeout_graceful_shutdown=1,
    )
    uvicorn.Server(config).run(sockets=[sock])
