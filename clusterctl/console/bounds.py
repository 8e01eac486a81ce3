"""How much one console request may ask for, and how its blocking work leaves the event loop.

Every page is bounded whatever the URL or the cluster holds: a ZooKeeper path's length and depth, children
listed per page, a record's shown size; Kafka admin calls and ZooKeeper reads run in a bounded thread pool
with a timeout, so one slow request never holds up another.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar
from urllib.parse import unquote_to_bytes

import anyio
from anyio import to_thread

from clusterctl.errors import TimeoutError_, UsageError

T = TypeVar("T")

MAX_TARGET_CHARS = 8192  # a request's path and query string together (414 past it)
MAX_BODY_BYTES = 64 * 1024  # a form post (413 past it; a body must say its Content-Length)
MAX_ZK_PATH_CHARS = 1024
MAX_ZK_DEPTH = 64
CHILDREN_PER_PAGE = 500
MAX_RECORD_CHARS = 64 * 1024  # of a znode's data as shown (the rest is cut, with a note)
DEFAULT_RECORDS = 50  # records a messages page shows unless asked (at most kafka.browse.MAX_LIMIT)
MAX_SEARCH_CHARS = 200
MAX_TAILS = 8  # live tails open at once (each holds a consumer)
READ_TIMEOUT_S = 15.0  # one messages page's read (within BLOCKING_TIMEOUT_S)
BLOCKING_TIMEOUT_S = 20.0  # one page's Kafka/ZooKeeper calls
ACTION_TIMEOUT_S = 60.0  # one action (create/delete topic, partitions, election)
BLOCKING_THREADS = 16

_limiter: anyio.CapacityLimiter | None = None


async def off_loop(fn: Callable[..., T], *args: Any, timeout: float = BLOCKING_TIMEOUT_S, note: str = "") -> T:
    """fn(*args) in the console's worker threads; TimeoutError_ after `timeout` s (the thread is left to finish)."""
    global _limiter
    if _limiter is None:
        _limiter = anyio.CapacityLimiter(BLOCKING_THREADS)
    with anyio.move_on_after(timeout) as scope:
        return await to_thread.run_sync(fn, *args, abandon_on_cancel=True, limiter=_limiter)
    assert scope.cancelled_caught
    raise TimeoutError_(f"no answer from the cluster within {timeout:g}s{note}")


def zk_path(raw: str) -> str:
    """A ZooKeeper path from a URL, within the console's bounds (UsageError past them)."""
    path = raw or "/"
    if len(path) > MAX_ZK_PATH_CHARS:
        raise UsageError(f"ZooKeeper path too long ({len(path)} chars; the console shows up to {MAX_ZK_PATH_CHARS})")
    depth = len([p for p in path.split("/") if p])
    if depth > MAX_ZK_DEPTH:
        raise UsageError(f"ZooKeeper path too deep ({depth} levels; the console shows up to {MAX_ZK_DEPTH})")
    return path


def page_start(raw: str | None) -> int:
    """The `from` query parameter: the first child listed (a whole number, 0 when absent)."""
    if not raw:
        return 0
    if not raw.isdigit() or len(raw) > 9:
        raise UsageError(f"from must be a whole number, got {raw[:40]!r}")
    return int(raw)


@dataclass
class Shown:
    """A record as the page shows it: at most MAX_RECORD_CHARS, and how much was left out."""

    text: str
    total: int

    @property
    def cut(self) -> int:
        return self.total - len(self.text)


def shown(text: str, limit: int = MAX_RECORD_CHARS) -> Shown:
    return Shown(text[:limit], len(text))


FORM_TYPE = "application/x-www-form-urlencoded"  # what every form of the console posts


def form_fields(body: bytes, content_type: str) -> list[tuple[str, str]]:
    """A form post's fields, each name and value decoded as strict UTF-8: bytes that are not UTF-8 are refused
    (as the CLI refuses them on its input), never stored as U+FFFD; a form of another type is refused."""
    kind = content_type.split(";")[0].strip().lower()
    if kind != FORM_TYPE:
        raise UsageError(f"a form post must be {FORM_TYPE}, not {kind or 'untyped'}")
    fields: list[tuple[str, str]] = []
    for pair in body.split(b"&"):  # by hand: parse_qsl decodes each field with errors="replace" (U+FFFD)
        if not pair:
            continue
        raw_name, _, raw_value = (unquote_to_bytes(part.replace(b"+", b" ")) for part in pair.partition(b"="))
        try:
            name = raw_name.decode("utf-8")
        except UnicodeDecodeError:
            raise UsageError("a form field's name is not UTF-8; nothing was done") from None
        try:
            value = raw_value.decode("utf-8")
        except UnicodeDecodeError as exc:
            bad = raw_value[exc.start]
            raise UsageError(
                f"form field {name!r} is not UTF-8 (byte {exc.start + 1} is {bad:#04x}); nothing was done"
            ) from None
        fields.append((name, value))
    return fields
