"""The pipeline's own timeline in a drill: each Spark driver's micro-batches, and how long each fault stalled them.

Every start of a drill's Spark job logs its progress events (`spark run --json`, one JSON object per micro-batch)
to `spark/<job>/driver-<n>.log` under the run's directory. Read back, they give per batch its input rows/s,
processed rows/s, duration and lag (records between its end offsets and the topic's log-end offsets), and its
completion time: Spark's trigger timestamp plus the batch's duration.

The **pipeline stall** of a fault (docs/spark.md): the longest wait, from the fault on, for the next micro-batch that
read input rows to complete, among those completed before the next fault (or the run's end). The first wait counts
from the fault itself; a wait that no batch ended (the load had stopped) is not a stall. It is Kafka's write gap
(analysis.write_gap) computed over batch completions instead of acknowledged writes, and the two are reported side
by side. `normal_s`, the median time between batch completions before the fault, says what a wait is without one;
a fault `stalled` the pipeline when its longest wait exceeds STALL_FACTOR times that.
"""

from __future__ import annotations

import bisect
import contextlib
import itertools
import json
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterctl.chaos.analysis import write_gap
from clusterctl.chaos.timeline import Marker

STALL_FACTOR = 3.0  # a wait this many times the usual one between batches is a stall
DRIVER_LOG = re.compile(r"^driver-(\d+)\.log$")


@dataclass
class PipelineBatch:
    """One completed micro-batch of one driver (a start of the job)."""

    job: str
    driver: int  # 1 for the first start, 2 after a restart, ...
    batch_id: int
    t: float  # when it completed (epoch s)
    duration_ms: int
    input_rows: int
    input_rows_per_s: float | None
    processed_rows_per_s: float | None
    lag: int | None  # Spark's: records between the batch's end offsets and the latest offsets it planned with
    #: end to end, from the drill's ledger: records acknowledged by the batch's completion that no earlier batch had
    #: read, and how long the oldest of them had waited for it (end_to_end)
    behind: int | None = None
    behind_s: float | None = None


@dataclass
class DriverRun:
    """One start of a job, as its batches show it: a killed driver's last batch, then the next one's first."""

    job: str
    driver: int
    batches: int
    first_batch: int | None
    last_batch: int | None
    first_t: float | None
    last_t: float | None
    input_rows: int


@dataclass
class PipelineStall:
    """What one fault did to one job: its longest wait for a batch, next to Kafka's longest wait for an ack."""

    action: str
    target: str
    t: float
    job: str
    stall_s: float | None  # None: no batch completed before the fault, or none after it
    stall_from: float | None  # when that longest wait began (epoch s): the fault, or a batch's completion
    normal_s: float | None  # median time between batch completions before the fault
    stalled: bool  # stall_s > STALL_FACTOR * normal_s
    batches_after: int  # batches that read input between the fault and the next fault (or the end)
    lag_before: int | None  # the lag of the last batch before the fault (records; end to end where the ledger is)
    lag_peak: int | None  # the highest lag of any batch after it (also one that read nothing)
    behind_peak_s: float | None  # the longest end-to-end latency of a batch after it (ack to results)
    write_gap_s: float | None  # Kafka's: the longest wait for an acknowledged write, over the fault's partitions


@dataclass
class PipelineTimeline:
    batches: list[PipelineBatch] = field(default_factory=list)
    drivers: list[DriverRun] = field(default_factory=list)
    stalls: list[PipelineStall] = field(default_factory=list)


def read_driver_log(path: Path, job: str, driver: int) -> list[PipelineBatch]:
    """The batch events of one driver's log (other lines, such as Spark's own logging, are skipped)."""
    from clusterctl.spark.progress import parse_ts

    out: list[PipelineBatch] = []
    for line in path.read_text(errors="replace").splitlines():
        if not line.startswith('{"event":"batch"'):
            continue
        with contextlib.suppress(ValueError, KeyError, TypeError):
            e = json.loads(line)
            out.append(
                PipelineBatch(
                    job,
                    driver,
                    int(e["batch_id"]),
                    round(parse_ts(e["started"]) + int(e["duration_ms"]) / 1000, 3),
                    int(e["duration_ms"]),
                    int(e["input_rows"]),
                    e.get("input_rows_per_s"),
                    e.get("processed_rows_per_s"),
                    e.get("lag"),
                )
            )
    return out


def read_job_logs(job_dir: Path, job: str) -> list[PipelineBatch]:
    """Every driver's batches of one job (spark/<job>/driver-<n>.log), in completion order."""
    batches: list[PipelineBatch] = []
    for p in job_dir.glob("driver-*.log") if job_dir.is_dir() else []:
        m = DRIVER_LOG.match(p.name)
        if m:
            batches += read_driver_log(p, job, int(m.group(1)))
    return sorted(batches, key=lambda b: (b.t, b.driver, b.batch_id))


def end_to_end(batches: Sequence[PipelineBatch], acked: Sequence[float]) -> None:
    """Set each batch's `behind` and `behind_s` from the sorted ack times of the drill's writes to the job's input.

    behind: records acknowledged by the batch's completion that no earlier batch had read (what its results had
    waited for); behind_s: how long the oldest of them had waited, from its ack to this batch's results: the batch's
    end-to-end latency. Rows read before batch N count each earlier batch id once (a replay reads the same offsets
    again). A batch reads every partition up to its high watermark, so the records it had not read before are the
    last acknowledged: the oldest of them is the (rows + 1)-th acknowledged."""
    rows: dict[tuple[str, int], int] = {}
    for b in sorted(batches, key=lambda b: b.t):
        before = sum(n for (job, bid), n in rows.items() if job == b.job and bid < b.batch_id)
        rows[(b.job, b.batch_id)] = b.input_rows
        acked_by = bisect.bisect_right(acked, b.t)
        b.behind = max(0, acked_by - before)
        b.behind_s = round(b.t - acked[before], 3) if acked_by > before else 0.0


def drivers_of(batches: Sequence[PipelineBatch]) -> list[DriverRun]:
    out = []
    for job, driver in sorted({(b.job, b.driver) for b in batches}):
        bs = [b for b in batches if (b.job, b.driver) == (job, driver)]
        out.append(
            DriverRun(
                job, driver, len(bs), bs[0].batch_id, bs[-1].batch_id, bs[0].t, bs[-1].t, sum(b.input_rows for b in bs)
            )
        )
    return out


def stall_of(
    batches: Sequence[PipelineBatch], fault_t: float, until: float
) -> tuple[float | None, float | None, float | None]:
    """(the longest wait for a batch that read input, from `fault_t` on; when that wait began; the median wait
    between such batches before the fault)."""
    times = sorted(b.t for b in batches if b.input_rows > 0)
    before = [t for t in times if t <= fault_t]
    normal = statistics.median(b - a for a, b in itertools.pairwise(before)) if len(before) > 1 else None
    stall = write_gap(times, fault_t, until)
    began = None
    if stall is not None:
        points = [fault_t, *(t for t in times if fault_t < t <= until)]
        began = max(itertools.pairwise(points), key=lambda ab: ab[1] - ab[0])[0]
    return stall, began, None if normal is None else round(normal, 3)


def stalls_of(
    batches: Sequence[PipelineBatch], markers: Sequence[Marker], ended: float, write_gaps: dict[float, float | None]
) -> list[PipelineStall]:
    """Each fault's stall of each job; `write_gaps`: Kafka's longest write gap per fault time."""
    faults = sorted((m for m in markers if not m.heal), key=lambda m: m.t)
    out = []
    for k, m in enumerate(faults):
        until = faults[k + 1].t if k + 1 < len(faults) else ended
        for job in sorted({b.job for b in batches}):
            bs = [b for b in batches if b.job == job]
            stall, began, normal = stall_of(bs, m.t, until)
            after = [b for b in bs if m.t < b.t <= until and b.input_rows > 0]
            lags_before = [_lag(b) for b in bs if b.t <= m.t]
            lags_after = [lag for b in bs if m.t < b.t <= until and (lag := _lag(b)) is not None]
            behind_after = [b.behind_s for b in bs if m.t < b.t <= until and b.behind_s is not None]
            out.append(
                PipelineStall(
                    m.action,
                    m.target,
                    m.t,
                    job,
                    stall,
                    None if began is None else round(began, 3),
                    normal,
                    stall is not None and normal is not None and stall > STALL_FACTOR * normal,
                    len(after),
                    lags_before[-1] if lags_before else None,
                    max(lags_after) if lags_after else None,
                    max(behind_after) if behind_after else None,
                    write_gaps.get(m.t),
                )
            )
    return out


def _lag(b: PipelineBatch) -> int | None:
    return b.behind if b.behind is not None else b.lag


def pipeline_timeline(
    work_dir: Path,
    jobs: Sequence[str],
    tl: Any,
    faults: Sequence[Any],
    acks: Mapping[tuple[str, int], Sequence[float]] | None = None,
    inputs: Mapping[str, str] | None = None,
) -> PipelineTimeline:
    """The drill's pipeline timeline from its jobs' driver logs, with a stall per fault (analysis.FaultMetrics).

    `acks`: the drill ledger's ack times per (topic, partition); `inputs`: each job's input topic. Together they give
    each batch's end-to-end lag (end_to_end)."""
    batches = sorted((b for job in jobs for b in read_job_logs(work_dir / "spark" / job, job)), key=lambda b: b.t)
    for job, topic in (inputs or {}).items():
        acked = sorted(t for (top, _p), times in (acks or {}).items() if top == topic for t in times)
        if acked:
            end_to_end([b for b in batches if b.job == job], acked)
    gaps = {f.t: max((p.write_gap_s for p in f.partitions if p.write_gap_s is not None), default=None) for f in faults}
    return PipelineTimeline(batches, drivers_of(batches), stalls_of(batches, tl.markers, tl.ended, gaps))
