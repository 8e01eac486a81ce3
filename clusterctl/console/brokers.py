"""A page per broker (/brokers/<id>): the partitions it holds (leader or follower, in the ISR or not), live; its
configs with their source (the same call as /brokers/<id>/configs); and why its log-dir sizes are not shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import confluent_kafka
from starlette.requests import Request
from starlette.responses import Response

from clusterctl.console import bounds
from clusterctl.console.data import BrokerRow, Hub
from clusterctl.console.messages import SOURCES
from clusterctl.errors import ClusterctlError, NotFoundError
from clusterctl.kafka import admin
from clusterctl.kafka import configs as kconfigs

CONFIGS_TIMEOUT_S = 5.0  # the configs part of a broker page (the partitions show without it)


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


def log_dirs_note() -> str:
    """Why the page shows no log-dir sizes (what the installed client can and cannot ask)."""
    return (
        f"log-dir sizes are not shown: confluent-kafka {confluent_kafka.__version__} (librdkafka "
        f"{confluent_kafka.libversion()[0]}) has no DescribeLogDirs in its AdminClient; "
        "kafka-log-dirs.sh --describe --broker-list <id> shows them"
    )


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
        return await self.pages.live_page(request, "broker.html", f"broker/{raw}", title=f"Broker {raw}",
                                          broker=int(raw), rows=configs, sources=SOURCES, error=error,
                                          log_dirs=log_dirs_note())  # fmt: skip
