"""Each Kafka node's health from its JMX exporter (monitoring.enabled): one scrape of every node, or two for rates.

The host reaches each exporter at the node's container IP on the Docker bridge (nothing is published). A gauge
is read as it is; a counter's rate is its change between two scrapes over the time between them. A node that
does not answer is kept in the result with its error, so one paused broker never hides what the others report.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from clusterctl.errors import SpecError
from clusterctl.spec.model import ClusterSpec
from clusterctl.spec.monitoring import ExporterTarget, exporter_targets

SCRAPE_TIMEOUT_S = 2.0
MAX_BODY = 4 * 1024 * 1024  # our rule file keeps a scrape near 30 KB

# gauges: field -> exported name (templates/monitoring/jmx-exporter.yaml)
GAUGES = {
    "under_replicated": "kafka_server_replicamanager_underreplicatedpartitions",
    "under_min_isr": "kafka_server_replicamanager_underminisrpartitioncount",
    "leaders": "kafka_server_replicamanager_leadercount",
    "partitions": "kafka_server_replicamanager_partitioncount",
    "offline_partitions": "kafka_controller_kafkacontroller_offlinepartitionscount",
    "active_controller": "kafka_controller_kafkacontroller_activecontrollercount",
    "handler_idle": "kafka_server_kafkarequesthandlerpool_requesthandleravgidlepercent",
}
# counters whose rate (per second) is shown: field -> exported name (without _total; the parser drops it)
COUNTERS = {
    "isr_shrinks_per_s": "kafka_server_replicamanager_isrshrinks",
    "isr_expands_per_s": "kafka_server_replicamanager_isrexpands",
    "bytes_in_per_s": "kafka_server_brokertopicmetrics_bytesin",
    "bytes_out_per_s": "kafka_server_brokertopicmetrics_bytesout",
    "messages_in_per_s": "kafka_server_brokertopicmetrics_messagesin",
}
REQUESTS = "kafka_network_requestmetrics_requests"
PRODUCE_P99 = "kafka_network_requestmetrics_totaltimems"


@dataclass(frozen=True)
class Scrape:
    """One node's samples: (name, sorted label pairs) -> value; `error` when it did not answer."""

    target: ExporterTarget
    at: float
    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float] = field(default_factory=dict)
    error: str | None = None

    def value(self, name: str, **labels: str) -> float | None:
        want = tuple(sorted(labels.items()))
        return self.samples.get((name, want))

    def total(self, name: str, **labels: str) -> float | None:
        """The sum of every sample of `name` whose labels include `labels` (e.g. a request over its versions)."""
        hits = [
            v for (n, lbl), v in self.samples.items() if n == name and all((k, x) in lbl for k, x in labels.items())
        ]
        return sum(hits) if hits else None


@dataclass(frozen=True)
class NodeHealth:
    """One node as its exporter reports it; None where the node does not have the metric (or did not answer)."""

    node_id: int
    role: str
    service: str
    url: str
    error: str | None
    under_replicated: int | None = None
    under_min_isr: int | None = None
    leaders: int | None = None
    partitions: int | None = None
    offline_partitions: int | None = None
    active_controller: int | None = None
    handler_idle: float | None = None
    produce_p99_ms: float | None = None
    isr_shrinks_per_s: float | None = None
    isr_expands_per_s: float | None = None
    bytes_in_per_s: float | None = None
    bytes_out_per_s: float | None = None
    messages_in_per_s: float | None = None
    produce_requests_per_s: float | None = None
    fetch_requests_per_s: float | None = None


@dataclass(frozen=True)
class ClusterHealth:
    """Every node's health at `taken_at` (epoch seconds); rates over `interval_s`; one line per thing wrong."""

    cluster: str
    taken_at: float
    interval_s: float
    nodes: list[NodeHealth]
    problems: list[str]

    @property
    def unanswered(self) -> list[NodeHealth]:
        return [n for n in self.nodes if n.error is not None]


def targets(spec: ClusterSpec, broker: int | None = None) -> list[ExporterTarget]:
    """The exporters to read (one broker's with `broker`); SpecError when monitoring is off or no such node."""
    if not spec.monitoring.enabled:
        raise SpecError(f"monitoring is off for cluster {spec.name}: set monitoring.enabled: true, render and up")
    found = exporter_targets(spec)
    if broker is None:
        return found
    picked = [t for t in found if t.node_id == broker and "broker" in t.role]
    if not picked:
        raise SpecError(f"no broker {broker} in cluster {spec.name} (brokers {spec.topology.broker_ids})")
    return picked


def scrape(target: ExporterTarget, timeout: float = SCRAPE_TIMEOUT_S) -> Scrape:
    """One GET of the node's /metrics, parsed; a node that does not answer gives a Scrape with its error."""
    at = time.time()
    try:
        with urllib.request.urlopen(target.url, timeout=timeout) as resp:
            body = resp.read(MAX_BODY).decode("utf-8", "replace")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        reason = getattr(exc, "reason", exc)
        return Scrape(target, at, error=f"{target.service} exporter did not answer: {reason}")
    samples = {}
    for family in text_string_to_metric_families(body):
        for s in family.samples:
            samples[(s.name.removesuffix("_total"), tuple(sorted(s.labels.items())))] = float(s.value)
    return Scrape(target, at, samples)


def scrape_all(found: list[ExporterTarget], timeout: float = SCRAPE_TIMEOUT_S) -> list[Scrape]:
    with ThreadPoolExecutor(max_workers=max(1, len(found))) as pool:
        return list(pool.map(lambda t: scrape(t, timeout), found))


def _int(v: float | None) -> int | None:
    return None if v is None else int(v)


def _rate(now: Scrape, before: Scrape | None, value: float | None, then: float | None) -> float | None:
    if before is None or value is None or then is None or now.at <= before.at:
        return None
    return max(0.0, (value - then) / (now.at - before.at))  # a restarted node's counter starts again at 0


def node_health(now: Scrape, before: Scrape | None) -> NodeHealth:
    """One node's gauges from `now` and its counters' rates since `before` (None: no rates)."""
    t = now.target
    if now.error is not None:
        return NodeHealth(t.node_id, t.role, t.service, t.url, now.error)
    gauges = {f: now.value(name) for f, name in GAUGES.items()}
    rates = {
        f: _rate(now, before, now.value(name), before.value(name) if before and not before.error else None)
        for f, name in COUNTERS.items()
    }
    old = before if before is not None and before.error is None else None
    requests = {
        f"{kind}_requests_per_s": _rate(
            now, old, now.total(REQUESTS, request=req), old.total(REQUESTS, request=req) if old else None
        )
        for kind, req in (("produce", "Produce"), ("fetch", "Fetch"))
    }
    fields: dict[str, Any] = {f: _int(v) for f, v in gauges.items() if f != "handler_idle"}
    fields |= rates | requests
    fields["handler_idle"] = gauges["handler_idle"]
    fields["produce_p99_ms"] = now.value(PRODUCE_P99, quantile="0.99", request="Produce")
    return NodeHealth(t.node_id, t.role, t.service, t.url, None, **fields)


def problems(nodes: list[NodeHealth]) -> list[str]:
    """One line per node that is not well: "broker 2: 12 under-replicated partitions, ISR shrinks 3/s"."""
    out = []
    for n in nodes:
        what = f"{n.role.split(',')[0]} {n.node_id}"
        if n.error is not None:
            out.append(f"{what}: {n.error}")
            continue
        wrong = []
        if n.under_replicated:
            wrong.append(f"{n.under_replicated} under-replicated partitions")
        if n.under_min_isr:
            wrong.append(f"{n.under_min_isr} under min ISR")
        if n.offline_partitions:
            wrong.append(f"{n.offline_partitions} offline partitions")
        if n.isr_shrinks_per_s:
            wrong.append(f"ISR shrinks {n.isr_shrinks_per_s:.1f}/s")
        if wrong:
            out.append(f"{what}: " + ", ".join(wrong))
    return out


def health(
    spec: ClusterSpec, broker: int | None = None, interval: float = 1.0, before: list[Scrape] | None = None
) -> tuple[ClusterHealth, list[Scrape]]:
    """Every node's health: two scrapes `interval` seconds apart (or one, against `before`, for `--watch`).

    Returns the result and the scrapes it ended with (the next call's `before`)."""
    found = targets(spec, broker)
    if before is None:
        before = scrape_all(found)
        time.sleep(interval)
    now = scrape_all(found)
    old = {(s.target.service): s for s in before}
    nodes = [node_health(s, old.get(s.target.service)) for s in now]
    elapsed = min((s.at - old[s.target.service].at for s in now if s.target.service in old), default=0.0)
    return ClusterHealth(spec.name, now[0].at, round(elapsed, 3), nodes, problems(nodes)), now
