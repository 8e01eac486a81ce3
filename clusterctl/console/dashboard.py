"""The live drill dashboard: report.html's panels (leader per partition, ISR size, ZooKeeper / controller state,
acked/s, write gaps) and the step list, computed from a run's events.jsonl as the scenario appends to it.

A pure function of the events: the page's live region carries the result as JSON, and console.js draws it as SVG.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from clusterctl.chaos.timeline import INTERVAL_S

MAX_POINTS = 2000  # per series: a long drill stays a bounded page


@dataclass
class Step:
    t: float  # seconds since the first event
    name: str  # "step 3"
    detail: str
    current: bool = False


@dataclass
class Dashboard:
    t0: float  # epoch seconds of the first event
    end: float  # seconds since t0 of the last event
    running: bool
    leaders: dict[str, list[tuple[float, int]]] = field(default_factory=dict)  # partition -> (t, leader; -1 none)
    isr: dict[str, list[tuple[float, int]]] = field(default_factory=dict)  # partition -> (t, ISR size)
    controller: list[tuple[float, int]] = field(default_factory=list)  # (t, controller id; -1 none)
    quorum: list[tuple[float, int]] = field(default_factory=list)  # (t, 1 quorum / leader, 0 none)
    acked: list[tuple[float, float]] = field(default_factory=list)  # (interval start, acked records/s)
    gaps: list[tuple[float, float]] = field(default_factory=list)  # write gaps: no record acked while loading
    markers: list[tuple[float, str, bool]] = field(default_factory=list)  # faults and heals (t, what, heal)
    steps: list[Step] = field(default_factory=list)

    def data(self) -> dict[str, Any]:
        """What the browser draws (JSON-able; every series at most MAX_POINTS points)."""
        cut = {k: v[-MAX_POINTS:] for k, v in self.leaders.items()}
        return {"end": self.end, "leaders": cut, "isr": {k: v[-MAX_POINTS:] for k, v in self.isr.items()},
                "controller": self.controller[-MAX_POINTS:], "quorum": self.quorum[-MAX_POINTS:],
                "acked": self.acked[-MAX_POINTS:], "gaps": self.gaps[-MAX_POINTS:],
                "markers": self.markers[-MAX_POINTS:], "interval": INTERVAL_S}  # fmt: skip


def _num(v: Any, default: int = -1) -> int:
    return int(v) if isinstance(v, int | float) and not isinstance(v, bool) else default


def build(events: list[dict[str, Any]], running: bool) -> Dashboard:
    """The dashboard of a run from its events (in the order written)."""
    t0 = min((float(e.get("t", 0)) for e in events), default=0.0)
    d = Dashboard(t0, 0.0, running)
    for e in events:
        t = round(float(e.get("t", t0)) - t0, 3)
        d.end = max(d.end, t)
        source, kind, subject, value = e.get("source"), e.get("kind"), str(e.get("subject", "")), e.get("value")
        if kind == "partition" and isinstance(value, dict):
            d.leaders.setdefault(subject, []).append((t, _num(value.get("leader"))))
            d.isr.setdefault(subject, []).append((t, len(value.get("isr") or [])))
        elif kind == "leader":
            d.leaders.setdefault(subject, []).append((t, _num(value)))
        elif kind == "isr" and isinstance(value, list):
            d.isr.setdefault(subject, []).append((t, len(value)))
        elif kind == "controller":
            d.controller.append((t, _num(value)))
        elif kind == "quorum":
            d.quorum.append((t, 1 if value else 0))
        elif source == "load" and isinstance(value, dict):
            d.acked.append((round(float(value.get("t", 0)) - t0, 3), _num(value.get("acked"), 0) / INTERVAL_S))
        elif source == "fault":
            d.markers.append((t, str(e.get("detail", "")), kind == "heal"))
        elif source == "step":
            d.steps.append(Step(t, subject, str(e.get("detail", ""))))
    d.end = max([d.end] + [t + INTERVAL_S for t, _ in d.acked])
    if running and d.steps:
        d.steps[-1].current = True
    d.gaps = write_gaps(d.acked)
    return d


def write_gaps(acked: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Runs of intervals with nothing acknowledged, once the load had acknowledged something (start, end)."""
    gaps: list[tuple[float, float]] = []
    started = False
    start: float | None = None
    for t, rate in sorted(acked):
        if rate > 0:
            if start is not None:
                gaps.append((start, t))
            started, start = True, None
        elif started and start is None:
            start = t
    if start is not None and acked:
        gaps.append((start, max(t for t, _ in acked) + INTERVAL_S))
    return gaps
