"""A page per broker (/brokers/<id>): the partitions it holds (leader or follower, in the ISR or not), live; its
configs with their source (the same call as /brokers/<id>/configs); and its log dirs with each partition's size
(DescribeLogDirs asked of that broker on its own address when the page opens, or the line saying why there are none).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from clusterctl.console import bounds
from clusterctl.console.data import BrokerRow, Hub
from clusterctl.console.messages import SOURCES
from clusterctl.errors import ClusterctlError, NotFoundError
from clusterctl.kafka import admin, logdirs
from clusterctl.kafka import configs as kconfigs

CONFIGS_TIMEOUT_S = 5.0  # the configs part of a broker page (the partitions show without it)
LOG_DIRS_TIMEOUT_S = 5.0  # its log-dir part, the same way
NOT_SUPPORTED = "log-dir sizes: not supported by this broker (its ApiVersions answer lists no DescribeLogDirs)"


@dataclass
class Replica:
    """One partition replica the broker holds, as the broker page lists it."""

    topic: str
    partition: int
    leader: int  # -1: no leader
    role: str  # leader | follower
    in_isr: bool
    replicas: list[int]
    isr: list[int]


def replicas_on(topics: list[admin.TopicDescription], broker: int) -> list[Replica]:
    """Every partition with a replica on `broker` (internal topics included), by topic and partition."""
    out = []
    for t in topics:
        for p in t.partitions:
            if broker in p.replicas or p.leader == broker:
                role = "leader" if p.leader == broker else "follower"
                out.append(Replica(t.name, p.partition, p.leader, role, broker in p.isr, list(p.replicas),
                                   list(p.isr)))  # fmt: skip
    return sorted(out, key=lambda r: (r.topic, r.partition))


def log_dirs_ctx(hub: Hub, broker: int) -> dict[str, Any]:
    """The broker's log dirs (DescribeLogDirs on its own address), or `note`: the one line saying why none."""
    md = hub.metadata.get()
    found = next((b for b in md.cluster.brokers if b.id == broker), None)
    if found is None:
        return {"dirs": None, "note": f"log-dir sizes: broker {broker} is not in the metadata (down or fenced)"}
    try:
        got = logdirs.describe_log_dirs(found.address, timeout=LOG_DIRS_TIMEOUT_S - 1)
    except ClusterctlError as exc:
        return {"dirs": None, "note": f"error: {exc}"}
    if not got.supported:
        return {"dirs": None, "note": NOT_SUPPORTED}
    return {"dirs": got, "note": None}


def broker_ctx(hub: Hub, raw: str) -> dict[str, Any]:
    """The live part of a broker page: its row of the brokers table and the replicas it holds."""
    if not raw.isdigit() or len(raw) > 9:
        raise NotFoundError(f"no broker {raw[:40]!r}: a broker id is a whole number")
    broker = int(raw)
    md = hub.metadata.get()
    row: BrokerRow | None = next((b for b in hub.broker_rows() if b.id == broker), None)
    if row is None:
        raise NotFoundError(f"no broker {broker} in the metadata of {hub.target.bootstrap} nor in any replica list")
    replicas = replicas_on(md.topics, broker)
    return {"b": row, "replicas": replicas, "led": sum(r.role == "leader" for r in replicas),
            "outside_isr": sum(not r.in_isr for r in replicas), "at": md.at}  # fmt: skip


class BrokerPages:
    """Route handler for /brokers/{id}; its live region is the console's `broker/<id>` fragment."""

    def __init__(self, pages: Any, target: Any) -> None:
        self.pages = pages  # app.Pages: live_page() and the console
        self.target = target

    async def broker(self, request: Request) -> Response:
        raw = request.path_params["id"]
        if not raw.isdigit() or len(raw) > 9:
            return self.pages.console.page(request, "message.html", 404, title="Broker", error="error: no such broker")
        configs, error = [], None
        try:
            ask = kconfigs.describe_broker_configs
            configs = await bounds.off_loop(ask, self.target.bootstrap, int(raw), timeout=CONFIGS_TIMEOUT_S)
        except ClusterctlError as exc:
            error = f"error: {exc}"
        try:
            dirs = await bounds.off_loop(log_dirs_ctx, self.pages.console.hub, int(raw), timeout=LOG_DIRS_TIMEOUT_S)
        except ClusterctlError as exc:
            dirs = {"dirs": None, "note": f"error: {exc}"}
        return await self.pages.live_page(request, "broker.html", f"broker/{raw}", title=f"Broker {raw}",
                                          broker=int(raw), rows=configs, sources=SOURCES, error=error,
                                          log_dirs=dirs)  # fmt: skip
