"""What the console shows, gathered from the domain layer once for all viewers.

Every source is a short-lived cache with a single flight: however many browsers watch, the cluster is
asked at most once per TTL (metadata every 0.4 s, so a leader or ISR change reaches a page within ~1 s).
Failures are cached too, as their one-line message, so an unreachable cluster is not hammered.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

from clusterctl.errors import ClusterctlError, NotFoundError, UsageError
from clusterctl.kafka import admin, topicpartitions
from clusterctl.kafka import configs as kconfigs
from clusterctl.kafka import groups as kgroups
from clusterctl.kafka.connection import log_end_offsets
from clusterctl.zookeeper import client as zk

T = TypeVar("T")

METADATA_TTL_S = 0.4
ZK_TTL_S = 2.0
SLOW_TTL_S = 2.0  # log-end offsets, groups, lag
CONFIGS_TTL_S = 5.0
VERSION_TTL_S = 60.0
EVENTS_FILE = "events.jsonl"  # a running scenario's live timeline (chaos observer)
REPORT_JSON = "report.json"


@dataclass
class BrokerLoad:
    """What one broker carries: partitions it leads, replicas it holds, and led partitions short of ISR."""

    broker: int
    leaders: int
    replicas: int
    under_replicated: int  # as Kafka's UnderReplicatedPartitions metric: led partitions whose ISR is short


def broker_loads(topics: list[admin.TopicDescription], broker_ids: list[int]) -> list[BrokerLoad]:
    """Leaders, replicas and under-replicated partitions per broker (brokers named by replicas included)."""
    loads = {b: BrokerLoad(b, 0, 0, 0) for b in broker_ids}
    for t in topics:
        for p in t.partitions:
            for r in p.replicas:
                loads.setdefault(r, BrokerLoad(r, 0, 0, 0)).replicas += 1
            if p.leader >= 0:
                led = loads.setdefault(p.leader, BrokerLoad(p.leader, 0, 0, 0))
                led.leaders += 1
                led.under_replicated += int(p.under_replicated)
    return sorted(loads.values(), key=lambda b: b.broker)


@dataclass
class ConsoleTarget:
    """The cluster a console talks to and how it may act on it."""

    bootstrap: str
    zk_connect: str | None = None
    cluster: str = ""
    reports_dir: Path | None = None
    read_only: bool = False
    quorum: tuple[str, ...] = ()  # KRaft mode: host:port addresses that answer DescribeQuorum
    spec_path: Path | None = None  # `clusterctl ui` from a spec: its KRaft migration state lies beside it
    nodes: tuple[tuple[int, str], ...] = ()  # KRaft mode: (node.id, service) from the spec's topology

    @property
    def kraft(self) -> bool:
        return bool(self.quorum)

    @property
    def zk_nodes(self) -> list[tuple[int, str, int]]:
        """(id, host, port) of every ensemble member in the connect string (ids in order, from 1)."""
        if not self.zk_connect:
            return []
        hosts = self.zk_connect.split("/", 1)[0]
        out = []
        for i, hp in enumerate(h.strip() for h in hosts.split(",") if h.strip()):
            host, _, port = hp.rpartition(":")
            out.append((i + 1, host or hp, int(port) if port.isdigit() else 2181))
        return out


_REFRESHERS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="console-refresh")


class Cached(Generic[T]):
    """One value computed at most once per `ttl` seconds, whoever asks; the last error is kept as well.

    `get()` waits for a fresh value; `peek()` answers at once with the last one and refreshes a stale one in
    the background, so a slow source (log-end offsets while a leader is down) never holds up a live page.
    """

    def __init__(self, fn: Callable[[], T], ttl: float) -> None:
        self.fn = fn
        self.ttl = ttl
        self._lock = threading.Lock()  # single flight
        self._at = -1e9
        self._value: T | None = None
        self._error: ClusterctlError | None = None
        self._refreshing = False

    def _stale(self) -> bool:
        return time.monotonic() - self._at >= self.ttl

    def _compute(self) -> None:
        try:
            self._value, self._error = self.fn(), None
        except ClusterctlError as exc:
            self._error = exc
        except Exception as exc:  # an unexpected client error: shown on the page, not fatal to the stream
            self._error = ClusterctlError(f"{type(exc).__name__}: {exc}")
        self._at = time.monotonic()

    def _result(self) -> T:
        if self._error is not None:
            raise self._error
        return self._value  # type: ignore[return-value]

    def get(self) -> T:
        with self._lock:
            if self._stale():
                self._compute()
            return self._result()

    def peek(self) -> T:
        if self._at < 0:  # nothing yet: the first caller waits
            return self.get()
        if self._stale() and not self._refreshing:
            self._refreshing = True
            _REFRESHERS.submit(self._background)
        return self._result()

    def _background(self) -> None:
        try:
            with self._lock:
                if self._stale():
                    self._compute()
        finally:
            self._refreshing = False


@dataclass
class Metadata:
    cluster: admin.ClusterInfo
    topics: list[admin.TopicDescription]  # internal topics included
    at: float


@dataclass
class ZkView:
    nodes: list[zk.ZkNodeStatus]
    quorum: zk.QuorumSummary
    registered: list[int] | None = None  # None: no ZooKeeper session
    controller: int | None = None
    endpoints: dict[int, list[str]] = field(default_factory=dict)  # broker id -> registered endpoints
    error: str | None = None


@dataclass
class BrokerRow:
    id: int
    endpoints: list[str]
    in_metadata: bool
    registered: bool | None
    controller: bool
    leaders: int
    replicas: int
    under_replicated: int


@dataclass
class TopicRow:
    name: str
    partitions: int
    replication_factor: int
    under_replicated: int
    offline: int
    internal: bool
    configs: dict[str, str]


@dataclass
class GroupRow:
    group: str
    state: str
    members: int | None
    total_lag: int | None
    uncommitted: int | None
    error: str | None = None


@dataclass
class DrillRun:
    name: str
    scenario: str
    running: bool
    ok: bool | None
    started: float | None
    error: str | None
    has_html: bool


class Hub:
    """The console's view of one cluster, shared by every request and live stream."""

    def __init__(self, target: ConsoleTarget) -> None:
        self.target = target
        self._client: Any = None
        self._lock = threading.Lock()
        self.metadata = Cached(self._metadata, METADATA_TTL_S)
        self.zk = Cached(self._zk_view, ZK_TTL_S)
        self.configs = Cached(self._configs, CONFIGS_TTL_S)
        self.version = Cached(self._version, VERSION_TTL_S)
        self.group_rows = Cached(self._group_rows, SLOW_TTL_S)
        self._per_key: dict[tuple[str, str], Cached[Any]] = {}

    # ---- sources

    def admin_client(self) -> Any:
        with self._lock:
            if self._client is None:
                self._client = admin.admin(self.target.bootstrap)
            return self._client

    def _metadata(self) -> Metadata:
        info, topics = admin.metadata_snapshot(self.target.bootstrap, self.admin_client())
        return Metadata(info, topics, time.time())

    def _configs(self) -> dict[str, dict[str, str]]:
        topics = admin.describe_topics(self.target.bootstrap, include_internal=True, with_configs=True)
        return {t.name: t.configs for t in topics}

    def _version(self) -> str | None:
        info = self.metadata.peek().cluster
        for b in info.brokers:
            v = kconfigs.kafka_version(self.target.bootstrap, b.id, self.admin_client())
            if v:
                return v
        return None

    def _zk_view(self) -> ZkView:
        nodes = self.target.zk_nodes
        with ThreadPoolExecutor(max_workers=max(1, len(nodes))) as pool:
            statuses = list(pool.map(lambda n: zk.probe_node(n[0], f"zk{n[0]}", n[1], n[2], 1.5), nodes))
        view = ZkView(statuses, zk.summarize(statuses))
        if not view.quorum.has_quorum or not self.target.zk_connect:
            return view
        try:
            with zk.zk_client(self.target.zk_connect, timeout=3.0, read_only=True) as client:
                view.registered = zk.registered_brokers(client)
                view.controller = zk.controller_id(client)
                for b in view.registered:
                    with contextlib.suppress(ClusterctlError):
                        data = zk.get(client, f"/brokers/ids/{b}").data
                        if isinstance(data, dict):
                            view.endpoints[b] = [str(e) for e in data.get("endpoints", [])]
        except ClusterctlError as exc:
            view.error = str(exc)
        return view

    def _keyed(self, kind: str, key: str, fn: Callable[[], Any], ttl: float, wait: bool = True) -> Any:
        with self._lock:
            cached = self._per_key.get((kind, key))
            if cached is None:
                if len(self._per_key) > 256:  # names come from URLs: keep the map bounded
                    self._per_key.clear()
                cached = self._per_key[(kind, key)] = Cached(fn, ttl)
        return cached.get() if wait else cached.peek()

    # ---- views (plain data for templates)

    def topic_rows(self) -> list[TopicRow]:
        md = self.metadata.get()
        try:
            configs = self.configs.peek()
        except ClusterctlError:
            configs = {}
        return [
            TopicRow(
                t.name,
                t.partition_count,
                t.replication_factor,
                sum(p.under_replicated for p in t.partitions),
                sum(p.offline for p in t.partitions),
                t.internal,
                configs.get(t.name, {}),
            )
            for t in md.topics
        ]

    def topic(self, name: str) -> admin.TopicDescription:
        for t in self.metadata.get().topics:
            if t.name == name:
                return t
        raise NotFoundError(f"unknown topic {name!r} on {self.target.bootstrap}")

    def log_end_offsets(self, name: str) -> dict[int, int]:
        def fetch() -> dict[int, int]:
            t = self.topic(name)
            ends = log_end_offsets(self.target.bootstrap, [(name, p.partition) for p in t.partitions])
            return {p: end for (_t, p), end in ends.items()}

        return dict(self._keyed("leo", name, fetch, SLOW_TTL_S, wait=False))

    def elr(self, name: str) -> dict[int, topicpartitions.PartitionElr] | None:
        """Each partition's ELR and last known ELR (KIP-966) by index; None where the cluster has ELR off (3.x)."""

        def fetch() -> dict[int, topicpartitions.PartitionElr] | None:
            view = topicpartitions.elr_view(topicpartitions.parse_bootstrap(self.target.bootstrap), [name], 2.0)
            return None if view is None else {p: e for (_t, p), e in view.items()}

        return self._keyed("elr", name, fetch, METADATA_TTL_S * 5, wait=True)

    def broker_rows(self) -> list[BrokerRow]:
        md = self.metadata.get()
        try:
            zv: ZkView | None = self.zk.peek() if self.target.zk_connect else None
        except ClusterctlError:
            zv = None
        in_md = {b.id: b for b in md.cluster.brokers}
        registered = zv.registered if zv is not None else None
        ids = sorted(set(in_md) | set(registered or []))
        rows = []
        for load in broker_loads(md.topics, ids):
            b = load.broker
            eps = (zv.endpoints.get(b) if zv else None) or ([in_md[b].address] if b in in_md else [])
            rows.append(
                BrokerRow(
                    b,
                    eps,
                    b in in_md,
                    None if registered is None else b in registered,
                    b == md.cluster.controller_id and not self.target.kraft,  # KRaft: any live broker
                    load.leaders,
                    load.replicas,
                    load.under_replicated,
                )
            )
        return rows

    def groups(self) -> list[GroupRow]:
        return list(self.group_rows.get())

    def _group_rows(self) -> list[GroupRow]:
        rows = []
        for g in kgroups.list_groups(self.target.bootstrap):
            try:
                d = self.group(g.group)
                rows.append(GroupRow(g.group, d.state, len(d.members), d.total_lag, d.uncommitted_partitions))
            except ClusterctlError as exc:
                rows.append(GroupRow(g.group, g.state, None, None, None, str(exc)))
        return rows

    def group(self, name: str) -> kgroups.GroupDescription:
        desc: kgroups.GroupDescription = self._keyed(
            "group", name, lambda: kgroups.describe_group(self.target.bootstrap, name), SLOW_TTL_S
        )
        return desc

    # ---- ZooKeeper browser (on demand, one session per page)

    def znode(self, path: str) -> tuple[zk.Znode, list[str]]:
        if not self.target.zk_connect:
            raise UsageError("this console has no ZooKeeper connect string (--zookeeper)")
        with zk.zk_client(self.target.zk_connect, timeout=5.0, read_only=True) as client:
            return zk.get(client, path), zk.ls(client, path)

    # ---- drills: reports under a directory

    def drills(self) -> list[DrillRun]:
        root = self.target.reports_dir
        if root is None or not root.is_dir():
            return []
        runs = []
        for d in sorted((p for p in root.iterdir() if p.is_dir()), key=_mtime, reverse=True):
            report = d / REPORT_JSON
            if report.is_file():
                try:
                    doc = json.loads(report.read_text(encoding="utf-8"))
                except (OSError, ValueError):
                    continue
                runs.append(
                    DrillRun(
                        d.name,
                        str(doc.get("scenario", "?")),
                        False,
                        bool(doc.get("ok")),
                        doc.get("started"),
                        doc.get("error"),
                        (d / "report.html").is_file(),
                    )
                )
            elif (d / EVENTS_FILE).is_file():
                events = self.drill_events(d.name)
                started = events[0].get("t") if events else None
                runs.append(DrillRun(d.name, d.name.rsplit("-", 1)[0], True, None, started, None, False))
        return runs

    def drill_dir(self, name: str) -> Path:
        root = self.target.reports_dir
        if root is None or "/" in name or name.startswith(".") or not (root / name).is_dir():
            raise NotFoundError(f"no drill run {name!r} under the reports directory")
        return root / name

    def drill_events(self, name: str) -> list[dict[str, Any]]:
        """The run's observer events so far (a running scenario appends them as they happen)."""
        path = self.drill_dir(name) / EVENTS_FILE
        out = []
        with contextlib.suppress(OSError):
            for line in path.read_text(encoding="utf-8").splitlines():
                with contextlib.suppress(ValueError):
                    out.append(json.loads(line))
        if not out:
            report = self.drill_dir(name) / REPORT_JSON
            with contextlib.suppress(OSError, ValueError, AttributeError):
                out = list((json.loads(report.read_text(encoding="utf-8")).get("timeline") or {}).get("events", []))
        return out


def _mtime(p: Path) -> float:
    try:
        return p.stat().st_mtime
    except OSError:
        return 0.0
