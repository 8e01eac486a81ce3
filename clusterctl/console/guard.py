"""The console's front door: which Host/Origin a request may name, which credentials it may carry.

A console on loopback has no token, so a web page the user visits must not be able to reach it: DNS rebinding
(a hostile name re-pointed at 127.0.0.1) is refused by the Host check, a cross-site form post by the Origin/Referer
check and the CSRF token, and an `Authorization` header is accepted only when it carries the token itself.
"""

from __future__ import annotations

import ipaddress
import re
import secrets
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import parse_qs, urlencode, urlsplit

from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from clusterctl.console.bounds import MAX_BODY_BYTES, MAX_TARGET_CHARS
from clusterctl.errors import UsageError

TOKEN_COOKIE = "clusterctl_console_token"
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
WILDCARDS = ("0.0.0.0", "::", "")
SAFE_METHODS = ("GET", "HEAD", "OPTIONS")
MAX_HOST_CHARS = 255
_DIGITS = re.compile(r"[0-9]{1,12}")


def _split_authority(authority: str, default_port: int) -> tuple[str, int] | None:
    """('name', port) of `name[:port]` / `[v6][:port]` (lower-cased), or None when it is not one."""
    if not authority or len(authority) > MAX_HOST_CHARS or any(c in authority for c in "/?#@ \\\t"):
        return None
    try:
        parts = urlsplit(f"//{authority}")
        port = parts.port
    except ValueError:
        return None
    name = (parts.hostname or "").rstrip(".")
    return (name, port if port is not None else default_port) if name else None


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class Served:
    """The names and ports a browser may use for this console (what Host and Origin must say).

    Always the loopback names; the served address when it is a specific one; on a wildcard bind (0.0.0.0)
    also any IP literal and this machine's host name (an IP literal cannot be re-pointed by DNS); and every
    `--public-name` (a reverse proxy's or tunnel's name).
    """

    names: frozenset[str]
    ports: frozenset[int]
    any_ip: bool = False

    def allows(self, authority: str, default_port: int = 80) -> bool:
        split = _split_authority(authority, default_port)
        if split is None:
            return False
        name, port = split
        return port in self.ports and (name in self.names or (self.any_ip and _is_ip(name)))

    def allows_origin(self, origin: str, referer: bool = False) -> bool:
        """An Origin (scheme://host[:port], nothing more) or a Referer URL naming this console."""
        try:
            parts = urlsplit(origin)
        except ValueError:
            return False
        if parts.scheme not in ("http", "https") or (not referer and (parts.path or parts.query or parts.fragment)):
            return False
        return self.allows(parts.netloc, 443 if parts.scheme == "https" else 80)


def served(host: str, port: int, public_port: int | None = None, public_names: Iterable[str] = ()) -> Served:
    """What a console listening on `host:port` (published as `public_port`, or behind `public_names`) answers to."""
    names = set(LOOPBACK_NAMES)
    ports = {port} | ({public_port} if public_port else set())
    wildcard = host in WILDCARDS
    if wildcard:
        names.add(socket.gethostname().lower())
    else:
        names.add(host.strip("[]").lower())
    for public in public_names:
        split = _split_authority(public, 0)
        if split is None:
            raise UsageError(f"--public-name expects a host name or host:port, got {public!r}")
        names.add(split[0])
        if split[1]:
            ports.add(split[1])
    return Served(frozenset(names), frozenset(ports), any_ip=wildcard)


def _plain(status: int, text: str) -> PlainTextResponse:
    return PlainTextResponse(text, status_code=status, headers={"Cache-Control": "no-store"})


class Guard:
    """Host on every request, Origin/Referer on every state-changing one, and no foreign `Authorization`."""

    def __init__(self, app: ASGIApp, allowed: Served, token: str | None) -> None:
        self.app = app
        self.allowed = allowed
        self.token = token

    def refusal(self, scope: Scope) -> PlainTextResponse | None:
        headers: dict[bytes, list[str]] = {}
        for key, value in scope.get("headers", []):
            headers.setdefault(key.lower(), []).append(value.decode("latin-1"))
        target = len(scope.get("raw_path") or scope["path"]) + len(scope.get("query_string", b""))
        if target > MAX_TARGET_CHARS:
            return _plain(414, f"414: request address too long (the console takes up to {MAX_TARGET_CHARS} chars)")
        hosts = headers.get(b"host", [])
        if len(hosts) != 1 or not self.allowed.allows(hosts[0]):
            return _plain(421, "421: this console does not answer to that Host (see `clusterctl ui --help`)")
        for auth in headers.get(b"authorization", []):
            scheme, _, given = auth.partition(" ")
            ok = self.token is not None and scheme.lower() == "bearer"
            if not (ok and secrets.compare_digest(given.strip().encode(), self.token.encode())):  # type: ignore[union-attr]
                return _plain(401, "401: wrong Authorization (only `Bearer <the console's token>` is accepted)")
        if headers.get(b"transfer-encoding"):
            return _plain(411, "411: a request body needs a Content-Length")
        lengths = headers.get(b"content-length", [])
        if len(lengths) > 1 or (lengths and not (_DIGITS.fullmatch(lengths[0]) and int(lengths[0]) <= MAX_BODY_BYTES)):
            return _plain(413, f"413: request body too large (the console takes up to {MAX_BODY_BYTES} bytes)")
        if scope["method"] not in SAFE_METHODS:
            for key in (b"origin", b"referer"):
                if any(not self.allowed.allows_origin(v, key == b"referer") for v in headers.get(key, [])):
                    return _plain(403, f"403: cross-site request refused ({key.decode()} is not this console)")
        return None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            refused = self.refusal(scope)
            if refused is not None:
                await refused(scope, receive, send)
                return
        elif scope["type"] == "websocket":  # the console serves none
            return
        await self.app(scope, receive, send)


class TokenGate:
    """Every request but /healthz carries the token: ?token= (then kept in a cookie), a cookie, or a Bearer header.

    A wrong Bearer header never reaches this far (Guard answers 401 first).
    """

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] == "/healthz":
            await self.app(scope, receive, send)
            return
        request = Request(scope)
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        given = (query.get("token") or [""])[0]
        if given and secrets.compare_digest(given.encode(), self.token.encode()):
            # drop it from the address bar and keep it in a cookie (HttpOnly, same-site only)
            rest = {k: v for k, v in query.items() if k != "token"}
            url = scope["path"] + (f"?{urlencode(rest, doseq=True)}" if rest else "")
            redirect = RedirectResponse(url, status_code=303, headers={"Referrer-Policy": "no-referrer"})
            redirect.set_cookie(TOKEN_COOKIE, self.token, httponly=True, samesite="strict")
            await redirect(scope, receive, send)
            return
        auth = request.headers.get("authorization", "")
        candidates = [request.cookies.get(TOKEN_COOKIE, ""), auth.partition(" ")[2].strip() if auth else ""]
        if any(c and secrets.compare_digest(c.encode(), self.token.encode()) for c in candidates):
            await self.app(scope, receive, send)
            return
        await _plain(401, "401: this console needs its token (open the address `clusterctl ui --print-url` prints)")(
            scope, receive, send
        )
