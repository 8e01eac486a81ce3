"""The metadata-write probe of a drill: is the controller quorum writable, and for how long was it not?

A background thread creates and deletes one small topic (1 partition, replication factor 1) in turn, every
`interval` seconds, through the brokers (they forward CreateTopics / DeleteTopics to the active controller, which
answers once the quorum has committed the record). Each write is kept with its latency in metadata-writes.jsonl;
the summary's longest gap is the longest time without a committed write: between two successful writes, or from the
probe's start or to its stop. A failed write and the write that ends a long gap go on the observer's timeline.
"""

from __future__ import annotations

import itertools
import json
import os
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import NewTopic

from clusterctl.kafka.connection import admin, kafka_error

REQUEST_TIMEOUT_S = 30.0  # Kafka's request.timeout.ms: a write the broker still forwards is waited for
GONE = ("TOPIC_ALREADY_EXISTS", "UNKNOWN_TOPIC_OR_PART")  # an answer lost before: the topic is as the write wanted


@dataclass
class MetadataWrite:
    t: float  # epoch seconds, when the request was sent
    op: str  # create | delete
    ok: bool
    latency_ms: float
    error: str | None = None


@dataclass
class MetadataWrites:
    """What the probe saw."""

    topic: str
    interval_s: float
    writes: int
    failed: int
    longest_gap_s: float | None  # the longest time without a committed write
    gap_from: float | None  # epoch seconds: its start and end
    gap_to: float | None
    median_ms: float | None
    max_ms: float | None
    path: str
    load_average: float | None = None  # the machine's 1-minute load average as the probe stopped
    bound: str | None = None  # the setting that bounds the gap (the runner names it, bounds.py)


class MetadataProbe:
    """Creates and deletes `topic` in turn every `interval` seconds until stopped."""

    def __init__(self, bootstrap: str, topic: str, path: Path, interval: float, on_event: Callable[..., Any]) -> None:
        self.bootstrap, self.topic, self.path, self.interval = bootstrap, topic, path, interval
        self.on_event = on_event  # observer.event(source, kind, subject, detail, value)
        self.writes: list[MetadataWrite] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="metadata-probe", daemon=True)
        self.started = self.stopped = 0.0
        self._client: Any = None

    def start(self) -> MetadataProbe:
        self._client = admin(self.bootstrap)  # one client: a write's latency is its request's, not a connect's
        self.started = time.time()
        self._thread.start()
        return self

    def stop(self) -> MetadataWrites:
        self._stop.set()
        self._thread.join(timeout=REQUEST_TIMEOUT_S + 10)
        self.stopped = time.time()
        if self.writes and self.writes[-1].op == "create" and self.writes[-1].ok:
            self._write("delete", time.time())  # leave no probe topic behind
        return summarize(self.topic, self.interval, self.writes, self.started, self.stopped, str(self.path))

    def _run(self) -> None:
        op = "create"
        while not self._stop.is_set():
            t = time.time()
            w = self._write(op, t)
            if w.ok or (w.error or "").startswith(GONE):
                op = "delete" if op == "create" else "create"
            self._stop.wait(max(0.0, self.interval - (time.time() - t)))

    def _write(self, op: str, t: float) -> MetadataWrite:
        client = self._client
        t0 = time.monotonic()
        try:
            if op == "create":
                fut = client.create_topics([NewTopic(self.topic, 1, 1)], request_timeout=REQUEST_TIMEOUT_S,
                                           operation_timeout=REQUEST_TIMEOUT_S)[self.topic]  # fmt: skip
            else:
                fut = client.delete_topics([self.topic], request_timeout=REQUEST_TIMEOUT_S,
                                           operation_timeout=REQUEST_TIMEOUT_S)[self.topic]  # fmt: skip
            fut.result(timeout=REQUEST_TIMEOUT_S + 5)
            error = None
        except KafkaException as exc:
            err = kafka_error(exc, self.bootstrap)
            code = str(getattr(err, "kafka_code", "") or "ERROR")
            error = f"{code}: {err.message.removeprefix(code + ': ')}"
        except Exception as exc:  # a future that timed out on our side: the write's outcome is unknown
            error = f"{type(exc).__name__}: {exc}"
        w = MetadataWrite(t, op, error is None, round((time.monotonic() - t0) * 1000, 1), error)
        self._note(w)
        self.writes.append(w)
        with self.path.open("a", encoding="utf-8") as out:
            out.write(json.dumps(asdict(w)) + "\n")
        return w

    def _note(self, w: MetadataWrite) -> None:
        if not w.ok:
            self.on_event(
                "metadata", "write-failed", self.topic, f"{w.op} failed after {w.latency_ms:.0f} ms: {w.error}"
            )
            return
        last_ok = next((p for p in reversed(self.writes) if p.ok), None)
        since = last_ok.t + last_ok.latency_ms / 1000 if last_ok else self.started
        gap = w.t + w.latency_ms / 1000 - since
        if gap > max(2.0, 3 * self.interval):
            self.on_event(
                "metadata", "write-gap", self.topic, f"a metadata write committed again after {gap:.1f}s", gap
            )


def summarize(
    topic: str, interval: float, writes: list[MetadataWrite], started: float, stopped: float, path: str
) -> MetadataWrites:
    """The probe's summary; the gaps run between committed writes' ends, from `started` and up to `stopped`."""
    ends = [w.t + w.latency_ms / 1000 for w in writes if w.ok]
    points = [started, *sorted(ends), max(stopped, *ends) if ends else stopped]
    gaps = [(b - a, a, b) for a, b in itertools.pairwise(points)]
    longest = max(gaps, default=None)
    latencies = [w.latency_ms for w in writes if w.ok]
    return MetadataWrites(
        topic=topic,
        interval_s=interval,
        writes=len(writes),
        failed=sum(not w.ok for w in writes),
        longest_gap_s=round(longest[0], 3) if longest else None,
        gap_from=longest[1] if longest else None,
        gap_to=longest[2] if longest else None,
        median_ms=round(statistics.median(latencies), 1) if latencies else None,
        max_ms=max(latencies) if latencies else None,
        path=path,
        load_average=round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else None,
    )
