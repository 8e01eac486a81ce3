"""Watch a cluster while a fault runs and turn what happened into a timeline and failover times.

Sources (each on its own thread, all optional):
- Kafka metadata polled every `interval` (default 200 ms): per partition leader / replicas / ISR,
  the controller id and the live broker list. Every poll is bounded (1 s), asks one broker on its own
  address, never a broker the drill paused, and moves on to the next broker when one does not answer.
  When no broker answers, the time without an answer is recorded as a gap (the report shades it rather
  than stretching the last answer over it), and the first answer after it re-records every partition.
- ZooKeeper watches (kazoo): /controller, /brokers/ids and each observed partition's state znode,
  plus the session state of the watching client.
- ZK Mode per node from `srvr` (four-letter word) every `zk_interval`, and the quorum it implies.
- KRaft mode instead of the two ZooKeeper sources: DescribeQuorum every `quorum_interval` (the active
  controller, its epoch, whether the quorum has a leader), and the fenced brokers (spec brokers that metadata
  does not list: KRaft brokers report only unfenced ones). Metadata's controller id is not recorded there:
  a KRaft broker reports a random live broker in that field.
- The drill producer's per-interval acks and errors (attached at the end).

Only changes are stored (plus one sample at start and end), so a long drill stays small. Failover times
are computed from the timeline in analysis.py.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterctl.spec.model import ClusterSpec

HEAL_ACTIONS = {
    "unpause",
    "reconnect",
    "start",
    "start-broker",
    "start-zk",
    "start-controller",
    "restart-broker",
    "heal",
}
PAUSE_ACTIONS = {"pause", "pause-broker", "pause-follower"}
POLL_TIMEOUT_S = 1.0  # one metadata request; a paused or cut-off broker never answers
BROKER_BACKOFF_S = 2.0  # a broker that did not answer is asked again after this long


@dataclass
class Event:
    """Something that changed, with where we saw it."""

    t: float  # epoch seconds
    source: str  # metadata | zk-watch | zk-mode | fault | step | load
    kind: str  # leader | isr | controller | brokers | mode | quorum | session | fault | heal | error ...
    subject: str  # "drill-0", "zk2", "broker 3", ...
    detail: str
    value: Any = None


@dataclass
class PartitionSample:
    t: float
    topic: str
    partition: int
    leader: int  # -1: no leader
    replicas: list[int]
    isr: list[int]
    source: str = "metadata"


@dataclass
class ZkModeSample:
    t: float
    zk_id: int
    mode: str


@dataclass
class ControllerSample:
    """KRaft: the quorum leader (-1: none, or no answer) and its epoch."""

    t: float
    leader: int
    epoch: int


@dataclass
class FencedSample:
    """KRaft: spec brokers missing from metadata (fenced or not registered)."""

    t: float
    brokers: list[int]


@dataclass
class Marker:
    """A fault or heal on the timeline (what the drill did)."""

    t: float
    action: str
    target: str
    heal: bool = False
    note: str | None = None


def target_ids(m: Marker) -> tuple[int | None, int | None]:
    """(broker id, ZooKeeper id) a marker's target names, each None when it names none."""
    words = m.target.replace("-", " ").split()
    if len(words) == 2 and words[1].isdigit():
        return (int(words[1]), None) if words[0] == "broker" else (None, int(words[1]))
    if m.target.startswith("kafka") and m.target[5:].isdigit():
        return int(m.target[5:]), None
    if m.target.startswith("zk") and m.target[2:].isdigit():
        return None, int(m.target[2:])
    return None, None


@dataclass
class Gap:
    """A time during which a source gave no answer (what it said before is not known to hold)."""

    t0: float
    t1: float
    source: str
    reason: str


@dataclass
class Timeline:
    started: float
    ended: float
    topics: list[str]
    events: list[Event] = field(default_factory=list)
    partitions: list[PartitionSample] = field(default_factory=list)
    zk_modes: list[ZkModeSample] = field(default_factory=list)
    markers: list[Marker] = field(default_factory=list)
    load: list[Any] = field(default_factory=list)  # LoadInterval rows
    gaps: list[Gap] = field(default_factory=list)
    controllers: list[ControllerSample] = field(default_factory=list)  # kraft mode
    fenced: list[FencedSample] = field(default_factory=list)  # kraft mode
    mode: str = "zookeeper"


class Observer:
    """Start with `start()`, mark faults with `mark()`, stop with `stop()` → Timeline."""

    def __init__(
        self,
        spec: ClusterSpec | None,
        bootstrap: str | None,
        topics: list[str] | None = None,
        interval: float = 0.2,
        zk_interval: float = 0.25,
        zk_connect: str | None = None,
        watch_zk: bool = True,
        poll_metadata: bool = True,
        quorum_interval: float = 0.5,
        live_path: Path | None = None,
    ) -> None:
        self.spec = spec
        self.live_path = live_path  # events are appended here as JSON lines as they happen (the console tails it)
        self.bootstrap = bootstrap
        self.topics = list(topics or [])
        self.interval = interval
        self.zk_interval = zk_interval
        self.quorum_interval = quorum_interval
        self.kraft = spec is not None and spec.kraft_mode
        self.zk_connect = zk_connect or (spec.topology.zk_connect if spec and not self.kraft else None)
        self.watch_zk = watch_zk and bool(self.zk_connect)
        self.poll_metadata = poll_metadata and bootstrap is not None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._zk: Any = None
        self.timeline = Timeline(time.time(), 0.0, self.topics, mode="kraft" if self.kraft else "zookeeper")
        self._last_quorum_leader: tuple[int, int] | None = None
        self._last_fenced: tuple[int, ...] | None = None
        self._last_part: dict[tuple[str, int], tuple[int, tuple[int, ...], tuple[int, ...]]] = {}
        self._last_zk_part: dict[tuple[str, int], tuple[int, tuple[int, ...]]] = {}
        self._last_mode: dict[int, str] = {}
        self._last_quorum: bool | None = None
        self._last_controller: int | None = None
        self._last_brokers: tuple[int, ...] | None = None
        self._last_zk_brokers: tuple[int, ...] | None = None
        self._last_zk_controller: Any = "unset"
        self._metadata_ok: bool | None = None
        self._gap_start: tuple[float, str] | None = None
        self._paused: set[int] = set()
        self._broker_id = _id_mapper(spec)

    # ------------------------------------------------------------ recording

    def event(self, source: str, kind: str, subject: str, detail: str, value: Any = None) -> None:
        with self._lock:
            self._append(Event(time.time(), source, kind, subject, detail, value))

    def _append(self, e: Event) -> None:
        """Record an event (caller holds the lock) and, with `live_path`, append it there at once."""
        self.timeline.events.append(e)
        if self.live_path is not None:
            with contextlib.suppress(OSError, TypeError, ValueError), self.live_path.open("a", encoding="utf-8") as fh:
                fh.write(json.dumps(dataclasses.asdict(e), default=str) + "\n")

    def mark(
        self, action: str, target: str, heal: bool | None = None, note: str | None = None, t: float | None = None
    ) -> Marker:
        """Record a fault or heal the drill performed (at `t`, default now)."""
        m = Marker(t or time.time(), action, target, action in HEAL_ACTIONS if heal is None else heal, note)
        broker = target_ids(m)[0]
        if broker is not None and action in PAUSE_ACTIONS:
            self._paused.add(broker)
        elif broker is not None and action == "unpause":
            self._paused.discard(broker)
        elif action == "heal" or (m.heal and broker is None):
            self._paused.clear()
        with self._lock:
            self.timeline.markers.append(m)
            kind = "heal" if m.heal else "fault"
            self._append(Event(m.t, "fault", kind, target, f"{action} {target}", note))
        return m

    def add_topic(self, topic: str) -> None:
        with self._lock:
            if topic not in self.topics:
                self.topics.append(topic)
        if self._zk is not None:
            self._watch_topic_states(topic)

    # ------------------------------------------------------------ lifecycle

    def start(self) -> Observer:
        if self.poll_metadata:
            self._spawn(self._metadata_loop, "observe-metadata")
        if self.spec is not None and self.kraft:
            self._spawn(self._quorum_loop, "observe-quorum")
        elif self.spec is not None:
            self._spawn(self._zk_mode_loop, "observe-zk-mode")
        if self.watch_zk:
            self._start_zk_watches()
        return self

    def _spawn(self, fn: Any, name: str) -> None:
        t = threading.Thread(target=fn, name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def stop(self, load_intervals: list[Any] | None = None) -> Timeline:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=10)
        if self.spec is not None:
            # a scenario may end the instant its own check passes, before the loop's next sample: take it now
            with contextlib.suppress(Exception):
                self._quorum_sample() if self.kraft else self._zk_mode_sample()
        if self._zk is not None:
            with contextlib.suppress(Exception):
                self._zk.stop()
                self._zk.close()
        with self._lock:
            self.timeline.ended = time.time()
            if self._gap_start is not None:
                self.timeline.gaps.append(Gap(self._gap_start[0], self.timeline.ended, "metadata", self._gap_start[1]))
                self._gap_start = None
            if load_intervals is not None:
                self.timeline.load = list(load_intervals)
            # a closing sample per partition so step plots reach the end
            for (topic, p), (leader, replicas, isr) in self._last_part.items():
                self.timeline.partitions.append(
                    PartitionSample(self.timeline.ended, topic, p, leader, list(replicas), list(isr))
                )
            for zk_id, mode in self._last_mode.items():
                self.timeline.zk_modes.append(ZkModeSample(self.timeline.ended, zk_id, mode))
            if self._last_quorum_leader is not None:
                leader, epoch = self._last_quorum_leader
                self.timeline.controllers.append(ControllerSample(self.timeline.ended, leader, epoch))
            if self._last_fenced is not None:
                self.timeline.fenced.append(FencedSample(self.timeline.ended, list(self._last_fenced)))
        return self.timeline

    def __enter__(self) -> Observer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if not self._stop.is_set():
            self.stop()

    # ------------------------------------------------------------ Kafka metadata

    def _addresses(self) -> dict[int, str]:
        """Each broker's own address (the spec's brokers), or the bootstrap list as one 'broker'."""
        assert self.bootstrap is not None
        spec = self.spec
        if spec is not None and self.bootstrap == spec.topology.bootstrap_servers:
            return {b: f"{spec.topology.host}:{spec.topology.broker_host_port(b)}" for b in spec.topology.broker_ids}
        return {-1: self.bootstrap}

    def _metadata_loop(self) -> None:
        from confluent_kafka.admin import AdminClient

        from clusterctl.kafka.connection import admin_config

        addresses = self._addresses()
        clients: dict[int, Any] = {}
        backoff: dict[int, float] = {}  # broker -> monotonic time before which it is not asked
        preferred: int | None = None
        while not self._stop.is_set():
            t0 = time.monotonic()
            order = sorted(addresses, key=lambda b: (b != preferred, b))
            ready = [b for b in order if backoff.get(b, 0.0) <= t0]
            # paused brokers are asked only when no other is left (a lone broker's pause is seen this way)
            candidates = [b for b in ready if b not in self._paused] or ready
            md, why = None, "every broker paused or silent"
            for b in candidates[:2]:  # at most two bounded requests per poll
                if b not in clients:
                    clients[b] = AdminClient(
                        admin_config(addresses[b], socket_timeout_ms=int(POLL_TIMEOUT_S * 1000))
                    )  # fmt: skip
                try:
                    md = clients[b].list_topics(timeout=POLL_TIMEOUT_S)
                    preferred = b
                    break
                except Exception as exc:  # KafkaException: this broker did not answer in time
                    why = f"metadata request failed: {exc}"
                    clients.pop(b, None)  # its requests may be queued on a silent broker: start afresh
                    backoff[b] = time.monotonic() + BROKER_BACKOFF_S
            if md is None:
                self._open_gap(why)
            else:
                self._close_gap()
                self._record_metadata(md)
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - t0)))

    def _open_gap(self, why: str) -> None:
        if self._gap_start is None:
            self._gap_start = (time.time(), why)
            self.event("metadata", "error", "metadata", why)
        self._metadata_ok = False

    def _close_gap(self) -> None:
        if self._gap_start is not None:
            t0, why = self._gap_start
            self._gap_start = None
            now = time.time()
            with self._lock:
                self.timeline.gaps.append(Gap(t0, now, "metadata", why))
            self.event("metadata", "recovered", "metadata", f"metadata answers again after {now - t0:.1f}s")
            self._last_part.clear()  # record every partition afresh: the gap hid whatever changed
        self._metadata_ok = True

    def _record_metadata(self, md: Any) -> None:
        now = time.time()
        bid = self._broker_id
        brokers = tuple(sorted({bid(b) for b in md.brokers}))
        if brokers != self._last_brokers:
            gone = sorted(set(self._last_brokers or ()) - set(brokers))
            back = sorted(set(brokers) - set(self._last_brokers or ()))
            detail = f"live brokers {','.join(map(str, brokers)) or '-'}"
            if self._last_brokers is not None:
                detail += f" (lost {gone})" if gone else f" (joined {back})"
            self.event("metadata", "brokers", "cluster", detail, list(brokers))
            self._last_brokers = brokers
        if self.kraft and self.spec is not None:
            fenced = tuple(b for b in self.spec.topology.broker_ids if b not in brokers)
            if fenced != self._last_fenced:
                with self._lock:
                    self.timeline.fenced.append(FencedSample(now, list(fenced)))
                detail = f"fenced brokers {_ids(fenced)}" if fenced else "no broker fenced"
                self.event("metadata", "fenced", "cluster", detail, list(fenced))
                self._last_fenced = fenced
        controller = bid(md.controller_id)
        if not self.kraft and controller != self._last_controller:
            self.event("metadata", "controller", "cluster", f"controller {controller}", controller)
            self._last_controller = controller
        with self._lock:
            topics = list(self.topics)
        for name in topics:
            t = md.topics.get(name)
            if t is None or (t.error is not None and not t.partitions):
                continue
            for pid, p in sorted(t.partitions.items()):
                key = (name, pid)
                state = (bid(p.leader), tuple(map(bid, p.replicas)), tuple(sorted(map(bid, p.isrs))))
                prev = self._last_part.get(key)
                if state == prev:
                    continue
                self._last_part[key] = state
                with self._lock:
                    self.timeline.partitions.append(
                        PartitionSample(now, name, pid, state[0], list(state[1]), list(state[2]))
                    )
                subject = f"{name}-{pid}"
                if prev is None:
                    self.event("metadata", "partition", subject, _describe(state), _state_dict(state))
                    continue
                if prev[0] != state[0]:
                    self.event("metadata", "leader", subject, f"leader {prev[0]} -> {state[0]}", state[0])
                if prev[2] != state[2]:
                    self.event("metadata", "isr", subject, f"isr {_ids(prev[2])} -> {_ids(state[2])}", list(state[2]))

    # ------------------------------------------------------------ KRaft controller quorum

    def _quorum_loop(self) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            self._quorum_sample()
            self._stop.wait(max(0.0, self.quorum_interval - (time.monotonic() - t0)))

    def _quorum_sample(self) -> None:
        from clusterctl.errors import ClusterctlError
        from clusterctl.kafka.kraft import quorum as kraft

        assert self.spec is not None
        try:
            info = kraft.describe(self.spec, timeout=max(0.5, min(1.5, self.quorum_interval * 3)))
            state = (info.leader_id, info.leader_epoch)
            why = ""
        except ClusterctlError as exc:
            prev_epoch = self._last_quorum_leader[1] if self._last_quorum_leader else -1
            state, why = (-1, prev_epoch), exc.message
        if state == self._last_quorum_leader:
            return
        prev = self._last_quorum_leader
        self._last_quorum_leader = state
        now = time.time()
        with self._lock:
            self.timeline.controllers.append(ControllerSample(now, state[0], state[1]))
        if prev is None or prev[0] != state[0]:
            who = f"node {state[0]} (epoch {state[1]})" if state[0] >= 0 else "none"
            self.event(
                "quorum", "controller", "quorum", f"active controller {who}", state[0] if state[0] >= 0 else None
            )
        has_leader = state[0] >= 0
        if prev is None or (prev[0] >= 0) != has_leader:
            detail = (
                "controller quorum has a leader" if has_leader else f"controller quorum has no leader ({why[:120]})"
            )
            self.event("quorum", "quorum", "controller quorum", detail, has_leader)

    # ------------------------------------------------------------ ZooKeeper Mode per node

    def _zk_mode_loop(self) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            self._zk_mode_sample()
            self._stop.wait(max(0.0, self.zk_interval - (time.monotonic() - t0)))

    def _zk_mode_sample(self) -> None:
        from clusterctl.zookeeper import client as zk

        assert self.spec is not None
        statuses = zk.node_statuses(self.spec, timeout=min(1.0, self.zk_interval * 4))
        now = time.time()
        for s in statuses:
            if self._last_mode.get(s.id) != s.mode:
                prev = self._last_mode.get(s.id)
                self._last_mode[s.id] = s.mode
                with self._lock:
                    self.timeline.zk_modes.append(ZkModeSample(now, s.id, s.mode))
                detail = f"mode {prev or '?'} -> {s.mode}" + (f" ({s.error})" if s.error else "")
                self.event("zk-mode", "mode", f"zk{s.id}", detail, s.mode)
        q = zk.summarize(statuses)
        if q.has_quorum != self._last_quorum:
            self._last_quorum = q.has_quorum
            self.event("zk-mode", "quorum", "ensemble", q.summary, q.has_quorum)

    # ------------------------------------------------------------ ZooKeeper watches

    def _start_zk_watches(self) -> None:
        from kazoo.client import KazooClient

        from clusterctl.zookeeper.client import _KAZOO_LOG

        client = KazooClient(hosts=self.zk_connect, timeout=10.0, logger=_KAZOO_LOG, connection_retry={"max_tries": -1})
        client.add_listener(lambda state: self.event("zk-watch", "session", "observer", f"session {state}", state))
        self._zk = client
        # watches are registered once the session exists; start_async so a lost quorum does not block us
        client.start_async()
        self._spawn(self._register_watches, "observe-zk-watch")

    def _register_watches(self) -> None:
        client = self._zk
        while not self._stop.is_set() and not client.connected:
            self._stop.wait(0.2)
        if self._stop.is_set():
            return

        def on_controller(data: bytes | None, stat: Any) -> None:
            value = _decode(data)
            cid = value.get("brokerid") if isinstance(value, dict) else None
            if cid != self._last_zk_controller:
                self._last_zk_controller = cid
                self.event(
                    "zk-watch", "controller", "/controller", f"controller {cid if cid is not None else '-'}", cid
                )

        def on_brokers(children: list[str]) -> None:
            ids = tuple(sorted(int(c) for c in children if c.isdigit()))
            if ids != self._last_zk_brokers:
                gone = sorted(set(self._last_zk_brokers or ()) - set(ids))
                detail = f"registered {_ids(ids)}" + (f" (lost {gone})" if gone and self._last_zk_brokers else "")
                self._last_zk_brokers = ids
                self.event("zk-watch", "brokers", "/brokers/ids", detail, list(ids))

        with contextlib.suppress(Exception):
            client.DataWatch("/controller", on_controller)
            self._watch_when_created("/brokers/ids", on_brokers)
        with self._lock:
            topics = list(self.topics)
        for topic in topics:
            self._watch_topic_states(topic)

    def _watch_when_created(self, path: str, fn: Any) -> None:
        """ChildrenWatch needs the node; wait for it with an exists-watch (a ZK-only ensemble has none)."""
        client = self._zk

        def on_exists(data: bytes | None, stat: Any) -> bool | None:
            if stat is not None:
                client.ChildrenWatch(path, fn, allow_session_lost=True)
                return False  # stop this DataWatch
            return None

        client.DataWatch(path, on_exists)

    def _watch_topic_states(self, topic: str) -> None:
        client = self._zk
        base = f"/brokers/topics/{topic}/partitions"

        def watch_partition(pid: int) -> None:
            path = f"{base}/{pid}/state"

            def on_state(data: bytes | None, stat: Any) -> None:
                value = _decode(data)
                if not isinstance(value, dict):
                    return
                state = (int(value.get("leader", -1)), tuple(sorted(value.get("isr", []))))
                key = (topic, pid)
                prev = self._last_zk_part.get(key)
                if state == prev:
                    return
                self._last_zk_part[key] = state
                self.event(
                    "zk-watch",
                    "partition-state",
                    f"{topic}-{pid}",
                    f"leader {state[0]} isr {_ids(state[1])} (epoch {value.get('leader_epoch')})",
                    {"leader": state[0], "isr": list(state[1])},
                )

            client.DataWatch(path, on_state)

        watched: set[int] = set()

        def on_partitions(children: list[str]) -> None:
            for c in children:
                if c.isdigit() and int(c) not in watched:
                    watched.add(int(c))
                    watch_partition(int(c))

        with contextlib.suppress(Exception):
            self._watch_when_created(base, on_partitions)


def _id_mapper(spec: ClusterSpec | None) -> Callable[[int], int]:
    """Metadata broker id → the spec's broker id (they differ only on tansu), so samples match fault targets."""
    if spec is None:
        return int
    from clusterctl.chaos.faults import spec_broker

    return lambda i: int(i) if i < 0 else spec_broker(spec, int(i))


def _decode(data: bytes | None) -> Any:
    if not data:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return data.decode("utf-8", "replace")


def _ids(ids: Any) -> str:
    return ",".join(str(i) for i in ids) or "-"


def _describe(state: tuple[int, tuple[int, ...], tuple[int, ...]]) -> str:
    return f"leader {state[0]} replicas {_ids(state[1])} isr {_ids(state[2])}"


def _state_dict(state: tuple[int, tuple[int, ...], tuple[int, ...]]) -> dict[str, Any]:
    return {"leader": state[0], "replicas": list(state[1]), "isr": list(state[2])}
