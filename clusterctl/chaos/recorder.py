"""The observer's shared state and its recording: events (optionally tailed live as JSON lines) and fault markers.

The samplers (samplers.py) and the ZooKeeper watcher (zkwatch.py) add to this state from their own threads;
observer.py puts them together.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clusterctl.chaos.timeline import HEAL_ACTIONS, PAUSE_ACTIONS, Event, Marker, PhaseBand, Timeline, target_ids
from clusterctl.spec.model import ClusterSpec


class Recorder:
    """What every source of the observer shares: the timeline, the last values seen, the stop flag."""

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
        watch_elr: bool = False,
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
        self.watch_elr = watch_elr and self.kraft  # KIP-966: DescribeTopicPartitions (elrwatch.py)
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
        self._after_gap = False  # the next metadata records every partition afresh
        self._paused: set[int] = set()
        self._broker_id = _id_mapper(spec)

    def event(
        self, source: str, kind: str, subject: str, detail: str, value: Any = None, t: float | None = None
    ) -> None:
        """Record an event seen now (or at `t`, when its source timed it: a group member's log)."""
        with self._lock:
            self._append(Event(time.time() if t is None else t, source, kind, subject, detail, value))

    def live(self, source: str, kind: str, subject: str, detail: str, value: Any = None) -> None:
        """An event for the live file only (the console's dashboard), not the timeline: the drill load's intervals."""
        if self.live_path is not None:
            with self._lock:
                self._write(Event(time.time(), source, kind, subject, detail, value))

    def _append(self, e: Event) -> None:
        """Record an event (caller holds the lock) and, with `live_path`, append it there at once."""
        self.timeline.events.append(e)
        if self.live_path is not None:
            self._write(e)

    def _write(self, e: Event) -> None:
        """Append one event to the live file (caller holds the lock)."""
        assert self.live_path is not None
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

    def phase(self, name: str, done: bool) -> None:
        """Mark a phase's start (`done` False) or its end (True) on the timeline: the report draws it as a band."""
        now = time.time()
        with self._lock:
            open_ = next((b for b in reversed(self.timeline.phases) if b.name == name and b.t1 is None), None)
            if not done:
                self.timeline.phases.append(PhaseBand(name, now))
            elif open_ is not None:
                open_.t1, open_.done = now, True
            self._append(Event(now, "migrate", "phase-end" if done else "phase-start", name, name))

    def _spawn(self, fn: Any, name: str) -> None:
        t = threading.Thread(target=fn, name=name, daemon=True)
        t.start()
        self._threads.append(t)


def _id_mapper(spec: ClusterSpec | None) -> Callable[[int], int]:
    """Metadata broker id → the spec's broker id (they differ only on tansu), so samples match fault targets."""
    if spec is None:
        return int
    from clusterctl.chaos.targets import spec_broker

    return lambda i: int(i) if i < 0 else spec_broker(spec, int(i))


def ids_text(ids: Any) -> str:
    return ",".join(str(i) for i in ids) or "-"
