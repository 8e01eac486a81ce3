"""A running streaming query, watched: its micro-batches as progress events, and why it stopped."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from clusterctl.errors import TimeoutError_
from clusterctl.signals import STOP_SIGNALS
from clusterctl.wait import wait_until

GRACEFUL_STOP_S = 60.0
#: Ctrl-C, SIGTERM (CI runners, `timeout`), a closed terminal: each lets the running micro-batch finish


def parse_ts(value: str) -> float:
    return dt.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


@dataclass
class BatchProgress:
    """One finished micro-batch, from Spark's StreamingQueryProgress."""

    batch_id: int
    input_rows: int
    started: str
    duration_ms: int
    #: rows/s arriving (since the previous batch) and processed (this batch's rows over its duration)
    input_rows_per_s: float | None = None
    processed_rows_per_s: float | None = None
    #: records between the batch's end offsets and the input topics' log-end offsets when it ended
    lag: int | None = None

    @classmethod
    def of(cls, p: Any) -> BatchProgress:
        """From a StreamingQueryProgress (or its dict)."""

        def rate(key: str) -> float | None:
            v = p[key]
            return round(float(v), 1) if v is not None and v == v else None  # NaN when there was no input

        return cls(
            int(p["batchId"]),
            int(p["numInputRows"]),
            str(p["timestamp"]),
            int(p["durationMs"]["triggerExecution"]),
            rate("inputRowsPerSecond"),
            rate("processedRowsPerSecond"),
            lag_of(p["sources"]),
        )

    def line(self) -> str:
        rates = f"{self.processed_rows_per_s or 0:,.0f} rows/s processed"
        if self.input_rows_per_s is not None:
            rates += f", {self.input_rows_per_s:,.0f} rows/s in"
        lag = "lag ?" if self.lag is None else f"lag {self.lag:,}"
        return f"batch {self.batch_id}: {self.input_rows:,} rows in {self.duration_ms:,} ms ({rates}), {lag}"


def _offsets(value: Any) -> dict[str, dict[str, int]] | None:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return None
    return value if isinstance(value, dict) else None


def lag_of(sources: Any) -> int | None:
    """Sum over every source partition of latest minus end offset; None when a source reports no latest."""
    total = 0
    for src in sources or []:
        end, latest = _offsets(src["endOffset"]), _offsets(src["latestOffset"])
        if end is None or latest is None:
            return None
        for topic, parts in latest.items():
            for part, hi in parts.items():
                total += max(0, int(hi) - int(end.get(topic, {}).get(part, 0)))
    return total


class QueryWatch:
    """A running streaming query, watched until it ends, idles, times out or is interrupted."""

    def __init__(self, query: Any, on_progress: Callable[[BatchProgress], None] | None) -> None:
        self.query = query
        self.on_progress = on_progress
        self.seen: dict[int, BatchProgress] = {}
        self.last_input = time.monotonic()
        self.last_data_end: float | None = None
        self.interrupts = 0
        #: the first stop signal received while watching
        self.signal: signal.Signals | None = None

    def _interrupt(self, signum: int, _frame: object) -> None:
        self.signal = self.signal or signal.Signals(signum)
        self.interrupts += 1

    def _collect(self) -> None:
        """Take the batches the query finished since the last look."""
        for p in self.query.recentProgress:
            bid = int(p["batchId"])
            if bid in self.seen:
                continue
            bp = BatchProgress.of(p)
            self.seen[bid] = bp
            if bp.input_rows:
                self.last_input = time.monotonic()
                self.last_data_end = parse_ts(bp.started) + bp.duration_ms / 1000
            if self.on_progress:
                self.on_progress(bp)

    def _finish_batch(self) -> None:
        """Let a running micro-batch finish (stopping mid-batch makes Spark spill stack traces); a second
        Ctrl-C stops at once."""
        with contextlib.suppress(TimeoutError_):
            wait_until(
                lambda: not self.query.status.get("isTriggerActive") or self.interrupts >= 2,
                timeout=GRACEFUL_STOP_S,
                interval=0.2,
                what="the running micro-batch to finish",
            )

    def run(self, start: float, until_idle_s: float | None, timeout_s: float | None, available_now: bool) -> str:
        """Why the query stopped: caught up, terminated, idle, timeout or interrupted."""
        # PySpark's own SIGINT handler calls into the JVM from inside a py4j call, and an exception raised by a
        # handler in the middle of one breaks py4j's connection (the next call: "Answer from Java side is empty");
        # a flag stops the query cleanly. A signal the parent set to be ignored stays ignored.
        previous: dict[signal.Signals, Any] = {}
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                if signal.getsignal(sig) is not signal.SIG_IGN:
                    previous[sig] = signal.signal(sig, self._interrupt)
        try:
            while True:
                if self.interrupts:
                    self._finish_batch()
                    return "interrupted"
                active = self.query.isActive
                self._collect()
                if not active:
                    return "caught up" if available_now else "terminated"
                now = time.monotonic()
                busy = bool(self.query.status.get("isTriggerActive"))
                # idle counts only once a batch has run: a slow first plan is not idleness
                if until_idle_s is not None and self.seen and now - self.last_input >= until_idle_s and not busy:
                    return "idle"
                if timeout_s is not None and now - start >= timeout_s:
                    return "timeout"
                self.query.awaitTermination(0.25)
        except KeyboardInterrupt:
            return "interrupted"
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    def redeliver(self) -> NoReturn:
        """After the query stopped: the signal that stopped it, to the handler that was there before the watch (the
        CLI's: an interrupt by that signal, 128 + it); a KeyboardInterrupt when that handler returns."""
        if self.signal is not None:
            signal.raise_signal(self.signal)
        raise KeyboardInterrupt
