"""What the benches against Kafka's Java tools share (bench/perf_vs_java.py, java_consume.py, java_e2e.py): the
tools run alternately, each run on a fresh topic, and each figure is the median over the runs."""

from __future__ import annotations

import contextlib
import os
import statistics
from collections.abc import Iterator, Sequence

from clusterctl.kafka import admin


def java_env() -> dict[str, str]:
    """This environment without JMX_PORT: a global JMX_PORT breaks every second JVM (the port is taken)."""
    return {k: v for k, v in os.environ.items() if k != "JMX_PORT"}


def rotated(tools: Sequence[str], runs: int, warm_up: bool = False) -> Iterator[tuple[int, str]]:
    """(run, tool) for every tool in each of `runs` rounds, the order rotated by one each round so that no tool
    always goes first; with `warm_up`, an untimed round -1 first."""
    for i in range(-1 if warm_up else 0, runs):
        k = i % len(tools)
        for tool in [*tools[k:], *tools[:k]]:
            yield i, tool


@contextlib.contextmanager
def fresh_topic(bootstrap: str, topic: str, partitions: int = 1, replication_factor: int = 1) -> Iterator[str]:
    """`topic`, created for one run and deleted after it."""
    admin.create_topic(bootstrap, topic, partitions, replication_factor)
    try:
        yield topic
    finally:
        admin.delete_topic(bootstrap, topic)


def medians(
    rates: list[float], p50s: list[float], p99s: list[float], p999s: list[float]
) -> tuple[float, float, float, float]:
    """The median rate (to 0.1 records/s) and the median p50, p99 and p99.9 over the runs."""
    return (round(statistics.median(rates), 1), statistics.median(p50s), statistics.median(p99s),
            statistics.median(p999s))  # fmt: skip


class PercentileRuns:
    """A row's rate and latency percentiles of each run (the dataclass's `rates`, `p50s`, `p99s`, `p999s`)."""

    rates: list[float]
    p50s: list[float]
    p99s: list[float]
    p999s: list[float]

    def add_run(self, rate: float, p50: float, p99: float, p999: float) -> None:
        for series, value in zip((self.rates, self.p50s, self.p99s, self.p999s), (rate, p50, p99, p999), strict=True):
            series.append(value)

    def medians(self) -> tuple[float, float, float, float]:
        return medians(self.rates, self.p50s, self.p99s, self.p999s)
