"""Serve the console with uvicorn: bind first (a taken port is one line), refuse exposure without a token."""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import socket
from dataclasses import dataclass

from clusterctl.console.data import ConsoleTarget
from clusterctl.console.guard import Served, served
from clusterctl.errors import ClusterctlError, UsageError

TOKEN_ENV = "CLUSTERCTL_CONSOLE_TOKEN"
LOG_ENV = "CLUSTERCTL_CONSOLE_LOG"  # uvicorn's log level; info or debug adds the request log (token redacted)
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
    """Where the console listens, where users reach it (a published port, proxy names) and its token."""

    host: str
    port: int
    token: str | None
    exposed_on: str | None = None  # the address users reach it on when not `host` (a container's published bind)
    public_port: int | None = None  # the port users reach it on when not `port` (a container's published port)
    public_names: tuple[str, ...] = ()  # names a reverse proxy or tunnel reaches it by

    @property
    def address(self) -> str:
        """The console's address, without its token (what may be printed to a log)."""
        host = self.exposed_on or self.host
        host = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.public_port or self.port}/"

    @property
    def url(self) -> str:
        """The address with its token (`--print-url`: the token is for the user who asked, on stdout)."""
        return self.address + (f"?token={self.token}" if self.token else "")

    def served(self) -> Served:
        return served(self.exposed_on or self.host, self.port, self.public_port, self.public_names)


_TOKEN_PARAM = re.compile(r"([?&]token=)[^&#\s\"]*", re.IGNORECASE)


class RedactToken(logging.Filter):
    """The request log never shows a `token=` query value (the address `--print-url` gives is a credential)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(_TOKEN_PARAM.sub(r"\1REDACTED", a) if isinstance(a, str) else a for a in record.args)
        record.msg = _TOKEN_PARAM.sub(r"\1REDACTED", str(record.msg))
        return True


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

    allowed = listen.served()
    sock = bind(listen.host, listen.port)
    level = os.environ.get(LOG_ENV, "warning").lower()
    config = uvicorn.Config(
        build_app(target, allowed, listen.token),
        log_level=level,
        access_log=level in ("info", "debug", "trace"),
        lifespan="off",
        timeout_graceful_shutdown=1,
    )
    logging.getLogger("uvicorn.access").addFilter(RedactToken())  # after Config: it sets up uvicorn's loggers
    uvicorn.Server(config).run(sockets=[sock])
