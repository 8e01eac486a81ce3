"""The message browser and config pages: a topic's records (a bounded window, newest first, and a live tail over
server-sent events), and topic and broker configs with their source. Reads go through clusterctl.kafka.browse and
the same config calls as `clusterctl topic configs`; changes are console actions (console.actions).
"""

from __future__ import annotations

import html
import threading
import weakref
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse

from clusterctl.console import bounds, present
from clusterctl.console.data import ConsoleTarget
from clusterctl.errors import ClusterctlError, UsageError
from clusterctl.kafka import admin, browse
from clusterctl.kafka import configs as kconfigs

TAIL_WAIT_S = 0.5  # one poll of a tail (a record reaches the page within about this)
SOURCES = {  # Kafka's ConfigSource names, as the page says them
    "DYNAMIC_TOPIC_CONFIG": "dynamic (topic)",
    "DYNAMIC_BROKER_CONFIG": "dynamic (broker)",
    "DYNAMIC_DEFAULT_BROKER_CONFIG": "dynamic (cluster default)",
    "DYNAMIC_BROKER_LOGGER_CONFIG": "dynamic (logger)",
    "STATIC_BROKER_CONFIG": "static (server.properties)",
    "DEFAULT_CONFIG": "default",
    "UNKNOWN_CONFIG": "unknown",
}


class Renders(Protocol):
    """What these pages need of the console (app.Console): a page, and a template environment for rows."""

    env: Any

    def page(self, request: Request, template: str, status: int = 200, **ctx: Any) -> Response: ...


@dataclass
class RecordView:
    partition: int
    offset: int
    timestamp_ms: int | None
    key: present.Shown
    value: present.Shown
    headers: list[tuple[str, present.Shown]] = field(default_factory=list)


def view(r: browse.Record) -> RecordView:
    heads = [(name, present.shown(v)) for name, v in r.headers]
    return RecordView(r.partition, r.offset, r.timestamp_ms, present.shown(r.key, r.key_size),
                      present.shown(r.value, r.value_size), heads)  # fmt: skip


@dataclass
class Query:
    """The messages page's filter, from its URL (each field within the console's bounds)."""

    partition: int | None = None
    offset_from: int | None = None
    offset_to: int | None = None
    time_from: str = ""
    time_to: str = ""
    q: str = ""
    limit: int = bounds.DEFAULT_RECORDS

    def window_args(self) -> dict[str, Any]:
        return {"partition": self.partition, "offset_from": self.offset_from, "offset_to": self.offset_to,
                "ts_from": present.epoch_ms(self.time_from, "from time"),
                "ts_to": present.epoch_ms(self.time_to, "to time"), "search": self.q, "limit": self.limit}  # fmt: skip


def _number(params: Any, key: str, maximum: int, minimum: int = 0) -> int | None:
    raw = (params.get(key) or "").strip()
    if not raw:
        return None
    if not raw.isdigit() or len(raw) > 19 or not minimum <= int(raw) <= maximum:
        raise UsageError(f"{key} must be a whole number from {minimum} to {maximum}, got {raw[:40]!r}")
    return int(raw)


def query(params: Any) -> Query:
    q = (params.get("q") or "")[: bounds.MAX_SEARCH_CHARS + 1]
    if len(q) > bounds.MAX_SEARCH_CHARS:
        raise UsageError(f"the search is longer than {bounds.MAX_SEARCH_CHARS} characters")
    out = Query(
        partition=_number(params, "partition", 2**31 - 1),
        offset_from=_number(params, "from_offset", 2**63 - 1),
        offset_to=_number(params, "to_offset", 2**63 - 1),
        time_from=(params.get("from_time") or "").strip()[:40],
        time_to=(params.get("to_time") or "").strip()[:40],
        q=q,
        limit=_number(params, "limit", browse.MAX_LIMIT, 1) or bounds.DEFAULT_RECORDS,
    )
    out.window_args()  # the times parse
    return out


async def _refused(line: str) -> AsyncIterator[str]:
    yield f"event: refused\ndata: {line}\n\n"  # shown as text (textContent)


class _Slot:
    """One of the MAX_TAILS live tails, held from the request's check until its stream ends (released once)."""

    def __init__(self, pages: MessagePages) -> None:
        self.pages: MessagePages | None = pages
        pages.tails += 1

    def release(self, unserved: browse.Tail | None = None) -> None:
        """Give the slot back; `unserved`: the tail of a stream that never ran, closed here (off the loop)."""
        if self.pages is not None:
            self.pages.tails -= 1
            self.pages = None
            if unserved is not None:
                threading.Thread(target=unserved.close, name="tail-close", daemon=True).start()


class MessagePages:
    """Route handlers: /topics/{name}/messages, its tail stream, /topics/{name}/configs, /brokers/{id}/configs."""

    def __init__(self, console: Renders, target: ConsoleTarget) -> None:
        self.console = console
        self.target = target
        self.tails = 0

    async def messages(self, request: Request) -> Response:
        name = request.path_params["name"]
        ctx: dict[str, Any] = {"title": f"Messages · {name}", "name": name, "query": Query(), "window": None,
                               "rows": [], "error": None}  # fmt: skip
        try:
            ctx["query"] = query(request.query_params)
            window = await bounds.off_loop(self._window, name, ctx["query"])
        except ClusterctlError as exc:
            ctx["error"] = f"error: {exc}"
            return self.console.page(request, "messages.html", 400 if isinstance(exc, UsageError) else 200, **ctx)
        ctx["window"], ctx["rows"] = window, [view(r) for r in window.records]
        return self.console.page(request, "messages.html", **ctx)

    def _window(self, name: str, q: Query) -> browse.Window:
        return browse.read_window(self.target.bootstrap, name, **q.window_args(), timeout=bounds.READ_TIMEOUT_S)

    async def tail(self, request: Request) -> Response:
        name = request.path_params["name"]
        try:
            partition = _number(request.query_params, "partition", 2**31 - 1)
        except UsageError as exc:
            return PlainTextResponse(f"error: {exc}", status_code=400)
        if self.tails >= bounds.MAX_TAILS:  # said as an event: a browser's EventSource reads no error body
            return StreamingResponse(_refused(f"error: {bounds.MAX_TAILS} live tails are open already (the most "
                                              "this console serves at once): close one and try again"),
                                     media_type="text/event-stream", headers={"Cache-Control": "no-store"})  # fmt: skip
        # The slot is taken now, before any await: requests arriving together cannot all pass the check above
        # (they did while each waited for its consumer: 10 and 12 tails opened). It is given back when the
        # stream ends, or when a stream that never started is collected.
        slot = _Slot(self)
        try:
            tail = await bounds.off_loop(browse.Tail, self.target.bootstrap, name, partition)
        except BaseException as exc:
            slot.release()
            if isinstance(exc, ClusterctlError):
                return PlainTextResponse(f"error: {exc}", status_code=404)
            raise
        stream = self._stream(request, tail, slot)
        weakref.finalize(stream, slot.release, tail)
        return StreamingResponse(stream, media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"})  # fmt: skip

    async def _stream(self, request: Request, tail: browse.Tail, slot: _Slot) -> AsyncIterator[str]:
        """`data:` the new records' table rows; a comment when nothing came, so a closed page is noticed."""
        row = self.console.env.get_template("_record.html")
        try:
            yield "retry: 1000\n\n: tail open\n\n"
            while not await request.is_disconnected():
                try:
                    records = await bounds.off_loop(tail.poll, TAIL_WAIT_S)
                except ClusterctlError as exc:
                    yield f"event: failed\ndata: {html.escape(f'error: {exc}')}\n\n"
                    await anyio.sleep(1.0)
                    continue
                if not records:
                    yield ": idle\n\n"
                    continue
                body = "".join(row.render(r=view(r)) for r in reversed(records))
                yield "".join(f"data: {line}\n" for line in body.splitlines()) + "\n"
        finally:
            slot.release()
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(tail.close)

    async def topic_configs(self, request: Request) -> Response:
        name = request.path_params["name"]
        return await self._configs(request, f"Configs · topic {name}", admin.describe_configs, name, True, topic=name)

    async def broker_configs(self, request: Request) -> Response:
        raw = request.path_params["id"]
        if not raw.isdigit() or len(raw) > 9:
            return self.console.page(request, "message.html", 404, title="Broker", error="error: no such broker")
        return await self._configs(request, f"Configs · broker {raw}", kconfigs.describe_broker_configs, int(raw),
                                   broker=int(raw))  # fmt: skip

    async def _configs(self, request: Request, title: str, fn: Any, *args: Any, **ctx: Any) -> Response:
        try:
            rows = await bounds.off_loop(fn, self.target.bootstrap, *args)
        except ClusterctlError as exc:
            return self.console.page(request, "configs.html", title=title, rows=[], error=f"error: {exc}", **ctx)
        return self.console.page(request, "configs.html", title=title, rows=rows, sources=SOURCES, error=None, **ctx)
