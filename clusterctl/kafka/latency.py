"""Send-to-ack latencies of `perf produce`: collected per record, kept in an HDR histogram (µs, 3 significant
digits) in bulk with numpy, and read back as Kafka's perf tool prints them (progress windows, percentiles)."""

from __future__ import annotations

from array import array
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from hdrh.histogram import HdrHistogram

if TYPE_CHECKING:
    from confluent_kafka import KafkaError

MB = 1024 * 1024  # Kafka's perf tools print MiB and call it MB
HIST_MAX_US = 600_000_000  # 10 min: anything slower is clamped and still counted


@dataclass
class ProduceWindow:
    """One progress line: the records acked in the last window."""

    records: int
    records_per_sec: float
    mb_per_sec: float
    avg_latency_ms: float
    max_latency_ms: float

    def line(self) -> str:
        return (
            f"{self.records} records sent, {self.records_per_sec:.1f} records/sec ({self.mb_per_sec:.2f} MB/sec), "
            f"{self.avg_latency_ms:.1f} ms avg latency, {self.max_latency_ms:.1f} ms max latency."
        )


def record_bulk(hist: HdrHistogram, values: np.ndarray) -> None:
    """`hist.record_value(v)` for every v of a positive int64 array, in numpy.

    Recording a million values one Python call each takes longer than sending them; this computes the
    histogram's counts index for all values at once (HdrHistogram's own bucket arithmetic) and adds a
    bincount into its counters. Falls back to per-value recording when the counters are not 64-bit integers.
    """
    counts = np.ctypeslib.as_array(hist.counts)
    if counts.dtype.kind not in "iu" or counts.itemsize != 8:
        uniq, n = np.unique(values, return_counts=True)
        for v, c in zip(uniq.tolist(), n.tolist(), strict=True):
            hist.record_value(v, c)
        return
    unit, half_mag = hist.unit_magnitude, hist.sub_bucket_half_count_magnitude
    # bit length of (v | sub_bucket_mask): frexp's exponent is exact for integers below 2**53
    pow2ceiling = np.frexp((values | hist.sub_bucket_mask).astype(np.float64))[1].astype(np.int64)
    bucket = pow2ceiling - unit - (half_mag + 1)
    sub_bucket = values >> (bucket + unit)
    index = ((bucket + 1) << half_mag) + (sub_bucket - hist.sub_bucket_half_count)
    counts += np.bincount(index, minlength=hist.counts_len)[: hist.counts_len].astype(counts.dtype)
    hist.total_count += len(values)
    hist.min_value = min(hist.min_value, int(values.min()))
    hist.max_value = max(hist.max_value, int(values.max()))


def _ns_to_us(ns: np.ndarray) -> np.ndarray:
    return (ns + 500) // 1000  # rounded to the nearest µs, as the client engine's float seconds are


class LatencyRecorder:
    """Collects delivery reports: a float per acked record in a flat array, error names counted."""

    def __init__(self) -> None:
        self.pending = array("d")  # seconds, one per acked record (client engine)
        self.pending_ns: list[np.ndarray] = []  # int64 nanosecond arrays (native engine)
        self.hist = HdrHistogram(1, HIST_MAX_US, 3)
        self.delivered = 0
        self.failed = 0
        self.errors: dict[str, int] = {}
        self.max_us = 0
        self.sum_us = 0
        self.window_count = 0
        self.window_sum_us = 0
        self.window_max_us = 0

    def callback(self) -> Callable[[KafkaError | None, Any], None]:
        append = self.pending.append
        errors = self.errors

        def on_delivery(err: KafkaError | None, msg: Any) -> None:
            if err is None:
                append(msg.latency())
            else:
                name = err.name()
                errors[name] = errors.get(name, 0) + 1

        return on_delivery

    def add_ns(self, latencies_ns: np.ndarray) -> None:
        self.pending_ns.append(latencies_ns)

    def count_failures(self, name: str, n: int) -> None:
        if n > 0:
            self.errors[name] = self.errors.get(name, 0) + n

    def drain_some(self, max_values: int = 100_000) -> bool:
        """Drain the oldest native-engine arrays, about `max_values` latencies; False when none were pending.

        Called between delivery polls while the last batches are in flight, so the final drain has little
        left; a step stays short (a few ms) so the acknowledgements behind it are stamped nearly on time.
        """
        if not self.pending_ns:
            return False
        taken, n = 0, 0
        while taken < len(self.pending_ns) and n < max_values:
            n += len(self.pending_ns[taken])
            taken += 1
        head, self.pending_ns[:taken] = self.pending_ns[:taken], []
        self._record([_ns_to_us(a) for a in head])
        return True

    def drain(self) -> None:
        """Move pending latencies into the histogram and the window counters (bulk, with numpy)."""
        parts = [np.rint(np.frombuffer(self.pending, dtype=np.float64) * 1e6).astype(np.int64)]
        parts += [_ns_to_us(a) for a in self.pending_ns]
        del self.pending[:]
        self.pending_ns.clear()
        self._record(parts)

    def _record(self, parts: list[np.ndarray]) -> None:
        us = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
        n = len(us)
        if n:
            np.clip(us, 1, HIST_MAX_US, out=us)
            record_bulk(self.hist, us)
            total = int(us.sum())
            top = int(us.max())
            self.delivered += n
            self.sum_us += total
            self.max_us = max(self.max_us, top)
            self.window_count += n
            self.window_sum_us += total
            self.window_max_us = max(self.window_max_us, top)
        self.failed = sum(self.errors.values())

    def take_window(self, seconds: float, record_size: int) -> ProduceWindow:
        n = self.window_count
        rate = n / seconds if seconds > 0 else 0.0
        w = ProduceWindow(
            n,
            rate,
            rate * record_size / MB,
            self.window_sum_us / n / 1000 if n else 0.0,
            self.window_max_us / 1000,
        )
        self.window_count = self.window_sum_us = self.window_max_us = 0
        return w

    def percentiles_ms(self, *ps: float) -> list[float]:
        """HdrHistogram.get_value_at_percentile for each p, from one cumulative sum of the counts (numpy)."""
        hist = self.hist
        if hist.get_total_count() == 0:
            return [0.0 for _ in ps]
        cum = np.cumsum(np.ctypeslib.as_array(hist.counts)[: hist.counts_len])
        out = []
        for p in ps:
            index = int(np.searchsorted(cum, hist.get_target_count_at_percentile(p), side="left"))
            value = hist.get_value_from_index(index)
            value = hist.get_highest_equivalent_value(value) if p else hist.get_lowest_equivalent_value(value)
            # HDR reports the highest value equivalent to the bucket; never beyond the exact max seen
            out.append(min(value, self.max_us) / 1000)
        return out
