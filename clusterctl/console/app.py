"""The console's web app (Starlette + Jinja2): thin routes over console.data and the Kafka domain layer.

Pages render from the shared Hub; `/live/<view>` streams the same fragment as server-sent events whenever it
changes, so pages update without reload. Actions are POSTs behind a confirmation step and CSRF protection
(asgi-csrf); with a token (any non-loopback bind) every request but /healthz needs it. console.guard stands in
front of it all (Host, Origin/Referer, Authorization, sizes); console.bounds keeps each page's work bounded and
off the event loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import html
import secrets
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from asgi_csrf import asgi_csrf
from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import (
    FileResponse,
    HTMLResponse,
    PlainTextResponse,
    RedirectResponse,
    Response,
    StreamingResponse,
)
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from clusterctl.console import actions, bounds, brokers, dashboard, present, quorum
from clusterctl.console.data import REPORT_JSON, ConsoleTarget, Hub
from clusterctl.console.guard import Guard, Served, TokenGate
from clusterctl.console.messages import MessagePages
from clusterctl.errors import ClusterctlError, UsageError

HERE = Path(__file__).resolve().parent
LIVE_INTERVAL_S = 0.25  # how often a live stream re-renders its fragment (sources are cached, see data.py)
KEEPALIVE_S = 15.0
PAGES = [("cluster", "Cluster"), ("brokers", "Brokers"), ("topics", "Topics"), ("groups", "Consumer groups"),
         ("zk", "ZooKeeper"), ("drills", "Drills")]  # fmt: skip


@dataclass
class Fragment:
    """A live region: its template and the function computing its context (blocking: runs in a thread)."""

    template: str
    context: Callable[[], dict[str, Any]]


def _error(exc: ClusterctlError) -> str:
    """Exactly the line the CLI prints for this error (`error: ...`)."""
    return f"error: {exc}"


class Console:
    def __init__(self, target: ConsoleTarget) -> None:
        self.target = target
        self.hub = Hub(target)
        self.env = Environment(
            loader=FileSystemLoader(str(HERE / "templates")), autoescape=select_autoescape(default=True)
        )
        self.env.filters["clock"] = _clock
        self.env.filters["when"] = present.when
        self.env.filters["iso"] = present.iso
        self.env.filters["size"] = present.size
        self.env.globals["config_hint"] = present.config_hint
        self.env.globals["ms_ago"] = lambda ms: f"{present.duration(ms)} ago"
        self.quorum_views = quorum.source(target)
        # KRaft mode has no ZooKeeper: its controller quorum takes the ZooKeeper page's place
        self.pages = [("quorum", "Quorum") if k == "zk" and target.kraft else (k, v) for k, v in PAGES]

    # ---- fragments: one per live region

    def fragment(self, view: str) -> Fragment:
        kind, _, arg = view.partition("/")
        hub = self.hub
        makers: dict[str, Fragment] = {
            "cluster": Fragment("_cluster.html", self._cluster_ctx),
            "brokers": Fragment("_brokers.html", lambda: {"brokers": hub.broker_rows()}),
            "broker": Fragment("_broker.html", lambda: brokers.broker_ctx(hub, arg)),
            "topics": Fragment("_topics.html", lambda: {"topics": hub.topic_rows()}),
            "topic": Fragment("_topic.html", lambda: self._topic_ctx(arg)),
            "groups": Fragment("_groups.html", lambda: {"groups": hub.groups()}),
            "group": Fragment("_group.html", lambda: {"group": hub.group(arg)}),
            "drills": Fragment("_drills.html", lambda: {"runs": hub.drills(), "reports_dir": self.target.reports_dir}),
            "drill": Fragment("_drill.html", lambda: self._drill_ctx(arg)),
            "quorum": Fragment("_quorum.html", lambda: quorum.quorum_ctx(self.target, self.quorum_views)),
        }
        if kind not in makers or (kind in ("topic", "group", "drill", "broker") and not arg):
            raise UsageError(f"no live view {view!r}")
        return makers[kind]

    def render_fragment(self, view: str) -> str:
        frag = self.fragment(view)
        try:
            ctx = frag.context()
        except ClusterctlError as exc:
            return f'<p class="error">{html.escape(_error(exc))}</p>'
        except Exception as exc:  # never let one bad poll end a live stream
            return f'<p class="error">{html.escape(f"error: {type(exc).__name__}: {exc}")}</p>'
        return self.env.get_template(frag.template).render(target=self.target, **ctx)

    def _cluster_ctx(self) -> dict[str, Any]:
        hub = self.hub
        md = hub.metadata.get()
        zv = zk_error = None
        kraft = quorum.quorum_ctx(self.target, self.quorum_views) if self.target.kraft else None
        if self.target.zk_connect:
            try:
                zv = hub.zk.peek()
            except ClusterctlError as exc:
                zk_error = _error(exc)
        try:
            version = hub.version.peek()
        except ClusterctlError:
            version = None
        parts = [p for t in md.topics for p in t.partitions]
        migration, migration_error = None, None
        if self.target.spec_path is not None:
            # only `clusterctl ui` beside a spec has one; the console image has neither the spec nor this module
            from clusterctl.kafka.kraft import migration as kraft_migration

            try:
                migration = kraft_migration.summary_beside(self.target.spec_path)
            except ClusterctlError as exc:
                migration_error = _error(exc)
        return {
            "md": md,
            "migration": migration,
            "migration_error": migration_error,
            "zk": zv,
            "zk_error": zk_error,
            "kraft": kraft,
            "version": version,
            "partitions": len(parts),
            "under_replicated": sum(p.under_replicated for p in parts),
            "offline": sum(p.offline for p in parts),
        }

    def _topic_ctx(self, name: str) -> dict[str, Any]:
        t = self.hub.topic(name)
        try:
            ends: dict[int, int] | None = self.hub.log_end_offsets(name)
            ends_error = None
        except ClusterctlError as exc:
            ends, ends_error = None, _error(exc)
        configs: dict[str, str] = {}
        with contextlib.suppress(ClusterctlError):
            configs = self.hub.configs.peek().get(name, {})
        try:
            elr, elr_error = self.hub.elr(name), None
        except ClusterctlError as exc:
            elr, elr_error = None, _error(exc)
        return {"t": t, "ends": ends, "ends_error": ends_error, "configs": configs, "elr": elr, "elr_error": elr_error}

    def _drill_ctx(self, name: str) -> dict[str, Any]:
        events = self.hub.drill_events(name)
        running = not (self.hub.drill_dir(name) / REPORT_JSON).is_file()
        table = [e for e in events if e.get("source") != "load"]  # the load's intervals are drawn, not listed
        return {"name": name, "events": list(reversed(table[-300:])), "count": len(table),
                "dash": dashboard.build(events, running)}  # fmt: skip

    # ---- pages

    def page(self, request: Request, template: str, status: int = 200, **ctx: Any) -> HTMLResponse:
        ctx.setdefault("live", None)
        if ctx["live"] is not None and "fragment" not in ctx:
            ctx["fragment"] = self.render_fragment(ctx["live"])
        body = self.env.get_template(template).render(
            request=request,
            target=self.target,
            pages=self.pages,
            csrftoken=request.scope["csrftoken"](),
            done=request.query_params.get("done"),
            **ctx,
        )
        return HTMLResponse(body, status_code=status)


class Pages:
    """The route handlers: each one a few lines over the Console (rendering) and the domain layer."""

    def __init__(self, console: Console, target: ConsoleTarget) -> None:
        self.console = console
        self.target = target

    async def live_page(self, request: Request, template: str, view: str, **ctx: Any) -> Response:
        try:
            fragment = await bounds.off_loop(self.console.render_fragment, view)
        except ClusterctlError as exc:
            fragment = f'<p class="error">{html.escape(_error(exc))}</p>'
        return self.console.page(request, template, live=view, fragment=fragment, **ctx)

    async def index(self, request: Request) -> Response:
        return RedirectResponse("/cluster", status_code=303)

    async def cluster(self, request: Request) -> Response:
        return await self.live_page(request, "cluster.html", "cluster", title="Cluster")

    async def brokers(self, request: Request) -> Response:
        return await self.live_page(request, "brokers.html", "brokers", title="Brokers")

    async def topics(self, request: Request) -> Response:
        return await self.live_page(request, "topics.html", "topics", title="Topics")

    async def topic(self, request: Request) -> Response:
        name = request.path_params["name"]
        return await self.live_page(request, "topic.html", f"topic/{name}", title=f"Topic {name}", name=name)

    async def groups_page(self, request: Request) -> Response:
        return await self.live_page(request, "groups.html", "groups", title="Consumer groups")

    async def group(self, request: Request) -> Response:
        name = request.path_params["name"]
        return await self.live_page(request, "group.html", f"group/{name}", title=f"Group {name}", name=name)

    async def zk_page(self, request: Request) -> Response:
        ctx: dict[str, Any] = {"path": "/", "node": None, "children": [], "error": None}
        if self.target.kraft:
            return self.console.page(request, "message.html", title="ZooKeeper", note=quorum.KRAFT_NOTE)
        try:
            ctx["path"] = bounds.zk_path(request.query_params.get("path", "/"))
            start = bounds.page_start(request.query_params.get("from"))
        except UsageError as exc:
            ctx["error"] = _error(exc)
            return self.console.page(request, "zk.html", 400, title="ZooKeeper", **ctx)
        try:
            ctx |= await bounds.off_loop(self._znode_ctx, ctx["path"], start)
        except ClusterctlError as exc:
            ctx["error"] = _error(exc)
        return self.console.page(request, "zk.html", title="ZooKeeper", **ctx)

    def _znode_ctx(self, path: str, start: int) -> dict[str, Any]:
        """One znode as the page shows it (blocking: a ZooKeeper session; bounded: one page of children)."""
        node, children = self.console.hub.znode(path)
        end = start + bounds.CHILDREN_PER_PAGE
        return {"node": node, "children": children[start:end], "start": start, "total": len(children),
                "next": end if end < len(children) else None, "data": bounds.shown(_pretty(node.data))}  # fmt: skip

    async def quorum_page(self, request: Request) -> Response:
        return await self.live_page(request, "quorum.html", "quorum", title="Controller quorum")

    async def drills(self, request: Request) -> Response:
        return await self.live_page(request, "drills.html", "drills", title="Drills")

    async def drill(self, request: Request) -> Response:
        name = request.path_params["name"]
        try:
            self.console.hub.drill_dir(name)
        except ClusterctlError as exc:
            return self.console.page(request, "message.html", 404, title="Drill", error=_error(exc))
        return await self.live_page(request, "drill.html", f"drill/{name}", title=f"Drill {name}", name=name)

    async def drill_report(self, request: Request) -> Response:
        try:
            path = self.console.hub.drill_dir(request.path_params["name"]) / "report.html"
        except ClusterctlError as exc:
            return PlainTextResponse(_error(exc), status_code=404)
        if not path.is_file():
            return PlainTextResponse("error: no report.html (yet)", status_code=404)
        return FileResponse(path, media_type="text/html")

    async def live(self, request: Request) -> Response:
        view = request.path_params["view"]
        try:
            self.console.fragment(view)
        except ClusterctlError as exc:
            return PlainTextResponse(_error(exc), status_code=404)
        return StreamingResponse(
            _stream(request, self.console, view),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-store", "X-Accel-Buffering": "no"},
        )

    async def action(self, request: Request) -> Response:
        name = request.path_params["action"]
        if name not in actions.ACTIONS:
            return PlainTextResponse("error: unknown action", status_code=404)
        if self.target.read_only:
            return PlainTextResponse("error: this console is read-only (--read-only)", status_code=403)
        try:
            raw = bounds.form_fields(await request.body(), request.headers.get("content-type", ""))
        except UsageError as exc:
            return self.console.page(request, "confirm.html", 400, title="Error", action=name, form={}, summary=None,
                                     back=actions.back(name, {}), error=_error(exc))  # fmt: skip
        form = {k: v if k in actions.VERBATIM else v.strip() for k, v in raw if k != "csrftoken"}
        confirmed = form.pop("confirmed", "") == "yes" or name in actions.UNCONFIRMED
        back = actions.back(name, form)
        try:
            summary = actions.describe(name, form)
            if not confirmed:
                plan = None
                if name in actions.PREVIEWED:
                    plan = await bounds.off_loop(actions.preview, self.target.bootstrap, name, form)
                return self.console.page(request, "confirm.html", title="Confirm", action=name, form=form,
                                         summary=summary, back=back, plan=plan)  # fmt: skip
            done = await bounds.off_loop(actions.run, self.target.bootstrap, name, form,
                                         timeout=bounds.ACTION_TIMEOUT_S,
                                         note="; the action may still complete (reload to see)")  # fmt: skip
        except ClusterctlError as exc:
            return self.console.page(request, "confirm.html", 400, title="Error", action=name, form=form, summary=None,
                                back=back, error=_error(exc))  # fmt: skip
        after = {"delete-topic": "/topics", "delete-group": "/groups"}.get(name, back)
        return RedirectResponse(f"{after}?{urlencode({'done': done})}", status_code=303)

    async def healthz(self, request: Request) -> Response:
        return PlainTextResponse("ok")


def build_app(target: ConsoleTarget, allowed: Served, token: str | None = None) -> ASGIApp:
    """The ASGI app answering only to `allowed` names; `token` (when given) is needed by every request but /healthz."""
    console = Console(target)
    pages, mp = Pages(console, target), MessagePages(console, target)
    bp = brokers.BrokerPages(pages, target)
    routes = [
        Route("/", pages.index),
        Route("/healthz", pages.healthz),
        Route("/cluster", pages.cluster),
        Route("/brokers", pages.brokers),
        Route("/topics", pages.topics),
        Route("/topics/{name}", pages.topic),
        Route("/topics/{name}/messages", mp.messages),
        Route("/topics/{name}/tail", mp.tail),
        Route("/topics/{name}/configs", mp.topic_configs),
        Route("/brokers/{id}", bp.broker),
        Route("/brokers/{id}/configs", mp.broker_configs),
        Route("/groups", pages.groups_page),
        Route("/groups/{name}", pages.group),
        Route("/zk", pages.zk_page),
        Route("/quorum", pages.quorum_page),
        Route("/drills", pages.drills),
        Route("/drills/{name}", pages.drill),
        Route("/drills/{name}/report.html", pages.drill_report),
        Route("/live/{view:path}", pages.live),
        Route("/actions/{action}", pages.action, methods=["POST"]),
        Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
    ]
    app: ASGIApp = Starlette(routes=routes)
    app = asgi_csrf(
        app,
        signing_secret=secrets.token_hex(32),
        always_protect={f"/actions/{a}" for a in actions.ACTIONS},
        cookie_samesite="Strict",
    )
    if token:
        app = TokenGate(app, token)
    return Guard(app, allowed, token)


async def _stream(request: Request, console: Console, view: str) -> AsyncIterator[str]:
    """Server-sent events: the fragment now, then again whenever it changes; comments keep the line open."""
    last = None
    idle = 0.0
    yield "retry: 1000\n\n"
    while not await request.is_disconnected():
        try:
            body = await bounds.off_loop(console.render_fragment, view)
        except ClusterctlError as exc:  # the cluster is slow: say so, and try again next tick
            body = f'<p class="error">{html.escape(_error(exc))}</p>'
        if body != last:
            last, idle = body, 0.0
            yield "".join(f"data: {line}\n" for line in body.splitlines() or [""]) + "\n"
        elif idle >= KEEPALIVE_S:
            idle = 0.0
            yield ": keepalive\n\n"
        await asyncio.sleep(LIVE_INTERVAL_S)
        idle += LIVE_INTERVAL_S


def _clock(t: Any) -> str:
    """Epoch seconds as local HH:MM:SS.mmm."""
    import datetime as dt

    try:
        return dt.datetime.fromtimestamp(float(t)).strftime("%H:%M:%S.%f")[:-3]
    except (TypeError, ValueError, OverflowError):
        return str(t)


def _pretty(value: Any) -> str:
    import json

    if isinstance(value, dict | list):
        return json.dumps(value, indent=2, sort_keys=True)
    return "" if value is None else str(value)
