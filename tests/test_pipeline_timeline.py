"""The pipeline's own timeline in a drill report, from recorded driver logs: batches, drivers, and the stall per fault.

The logs are written the way `spark run --json` writes them (output.event_json of a BatchProgress, between lines of
Spark's own logging); a stall planted in them is found where it is, and none is found where batches kept coming.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from clusterctl.chaos import stats
from clusterctl.chaos.analysis import FaultMetrics, PartitionFailover, write_gap
from clusterctl.chaos.pipeline import SparkVerifyResult
from clusterctl.chaos.pipeline_timeline import PipelineTimeline, pipeline_timeline, read_job_logs, stall_of
from clusterctl.chaos.report import write_reports
from clusterctl.chaos.results import ScenarioResult, StepResult
from clusterctl.chaos.timeline import Marker, Timeline
from clusterctl.output import event_json
from clusterctl.spark.progress import BatchProgress

T0 = 1_700_000_000.0
JOB = "key_counts"


def _iso(t: float) -> str:
    return dt.datetime.fromtimestamp(t, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def record(
    capsys: pytest.CaptureFixture[str], path: Path, batches: list[tuple[float, int, int, int]], first_id: int = 0
) -> None:
    """A driver log: per batch (completed at T0 + s, duration ms, input rows, lag), its event as the CLI writes it."""
    capsys.readouterr()
    lines = ["26/11/26 07:40:01 WARN NativeCodeLoader: Unable to load native-hadoop library"]
    for k, (done, ms, rows, lag) in enumerate(batches):
        started = T0 + done - ms / 1000
        p = BatchProgress(first_id + k, rows, _iso(started), ms, 200.0, round(rows / (ms / 1000), 1), lag)
        event_json({"event": "batch", "job": JOB, **vars(p)})
        lines.append(capsys.readouterr().err.rstrip("\n"))
        lines.append("26/11/26 07:40:02 INFO MicroBatchExecution: Streaming query made progress")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")


def _steady(t0: float, t1: float, rows: int = 200, lag: int = 40) -> list[tuple[float, int, int, int]]:
    """A batch completing every second from t0 to t1 (seconds since T0)."""
    return [(t0 + i, 300, rows, lag) for i in range(int(t1 - t0) + 1)]


def _fault(t: float, gap: float | None) -> FaultMetrics:
    parts = [PartitionFailover("t", p, 1, p == 0, None, None, None, None, None, gap if p == 0 else 0.3)
             for p in range(3)]  # fmt: skip
    return FaultMetrics("kill-leader", "broker 1", t, 1, None, None, None, None, None, None, None, parts)


def test_a_killed_driver_stalls_the_pipeline_until_the_next_one_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Driver 1 completes a batch every second up to 30 s, is killed at 30.5 s; driver 2's first batch (replaying
    batch 20, with the backlog) completes at 52 s: a 21.5 s stall, from the kill."""
    record(capsys, tmp_path / "spark" / JOB / "driver-1.log", _steady(10, 30))
    record(capsys, tmp_path / "spark" / JOB / "driver-2.log", [(52.0, 4000, 4300, 0), *_steady(53, 70)], first_id=20)
    kill = Marker(T0 + 30.5, "kill-driver", f"spark {JOB}")
    tl = Timeline(T0, T0 + 90, ["t"], markers=[kill, Marker(T0 + 35, "restart-driver", f"spark {JOB}", heal=True)])
    p = pipeline_timeline(tmp_path, [JOB], tl, [])
    assert [(d.driver, d.batches, d.first_batch, d.last_batch) for d in p.drivers] == [(1, 21, 0, 20), (2, 19, 20, 38)]
    assert p.drivers[0].last_t == pytest.approx(T0 + 30) and p.drivers[1].first_t == pytest.approx(T0 + 52)
    assert len(p.batches) == 40 and p.batches[21].input_rows == 4300  # the lines of Spark's own logging skipped
    (s,) = p.stalls
    assert (s.action, s.job, s.stall_s, s.stall_from, s.normal_s, s.stalled) == (
        "kill-driver", JOB, 21.5, T0 + 30.5, 1.0, True,
    )  # fmt: skip
    assert (s.batches_after, s.lag_before, s.lag_peak, s.write_gap_s) == (19, 40, 40, None)


def test_end_to_end_lag_from_the_ledger(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The load acknowledges 200 records/s from 9 s on; each batch reads the second before it. Before the kill every
    batch's oldest record waited 1 s; driver 2's first batch (21, at 52 s) delivers the 4,400 records acknowledged
    since batch 20's, the oldest of them acknowledged at 30 s: 22 s end to end. Spark's own lag says 0 throughout."""
    record(capsys, tmp_path / "spark" / JOB / "driver-1.log", _steady(10, 30, lag=0))
    record(capsys, tmp_path / "spark" / JOB / "driver-2.log", [(52.0, 4000, 4400, 0), *_steady(53, 70, lag=0)],
           first_id=21)  # fmt: skip
    acks = {("t", p): [T0 + 9 + i / 200 for i in range(p, 12_200, 3)] for p in range(3)}
    acks[("other", 0)] = [T0 + 9 + i / 100 for i in range(5000)]  # another topic's writes do not count
    tl = Timeline(T0, T0 + 90, ["t"], markers=[Marker(T0 + 30.5, "kill-driver", f"spark {JOB}")])
    p = pipeline_timeline(tmp_path, [JOB], tl, [], acks, {JOB: "t"})
    by_id = {b.batch_id: b for b in p.batches}
    assert [(by_id[i].behind, by_id[i].behind_s) for i in (0, 20, 21, 22, 38)] == [
        (201, 1.0), (201, 1.0), (4401, 22.0), (201, 1.0), (201, 1.0),
    ]  # fmt: skip
    (s,) = p.stalls
    assert (s.stall_s, s.lag_before, s.lag_peak, s.behind_peak_s) == (21.5, 201, 4401, 22.0)  # from the kill on
    # without the ledger the lag is Spark's own
    (s,) = pipeline_timeline(tmp_path, [JOB], tl, []).stalls
    assert (s.lag_before, s.lag_peak, s.behind_peak_s) == (0, 0, None)


def test_no_stall_where_batches_keep_coming(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A leader killed at 30.5 s while batches complete every second: the longest wait is the usual second, not a
    stall; the minute after the load stopped (no batch) is no wait at all. Kafka's write gap stands beside it."""
    record(capsys, tmp_path / "spark" / JOB / "driver-1.log", _steady(10, 70))
    tl = Timeline(T0, T0 + 130, ["t"], markers=[Marker(T0 + 30.5, "kill-leader", "broker 1")])
    p = pipeline_timeline(tmp_path, [JOB], tl, [_fault(T0 + 30.5, 7.4)])
    (s,) = p.stalls
    assert (s.stall_s, s.normal_s, s.stalled, s.batches_after, s.write_gap_s) == (1.0, 1.0, False, 40, 7.4)


def test_batches_that_read_nothing_are_no_progress(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Batches keep completing but read no rows from 32 to 40 s (the source saw no new offsets): the stall runs from
    the last batch that read rows (31 s) to the next one (41 s). A second fault bounds the first one's window."""
    empty = [(float(t), 50, 0, 600) for t in range(32, 41)]
    record(capsys, tmp_path / "spark" / JOB / "driver-1.log", [*_steady(10, 31), *empty, *_steady(41, 80)])
    markers = [Marker(T0 + 30.5, "kill-leader", "broker 1"), Marker(T0 + 60.2, "kill-leader", "broker 2")]
    p = pipeline_timeline(tmp_path, [JOB], Timeline(T0, T0 + 100, ["t"], markers=markers), [])
    first, second = p.stalls
    assert (first.stall_s, first.stall_from, first.stalled, first.lag_peak) == (10.0, T0 + 31, True, 600)
    assert (second.stall_s, second.stalled, second.batches_after) == (1.0, False, 20)
    # the same definition as Kafka's write gap, over the completions of batches that read rows
    times = [b.t for b in p.batches if b.input_rows]
    assert stall_of(p.batches, T0 + 30.5, T0 + 60.2)[0] == write_gap(times, T0 + 30.5, T0 + 60.2)


def test_no_batch_before_the_fault_gives_no_stall(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    record(capsys, tmp_path / "spark" / JOB / "driver-1.log", _steady(40, 50))
    tl = Timeline(T0, T0 + 60, ["t"], markers=[Marker(T0 + 20, "kill-leader", "broker 1")])
    (s,) = pipeline_timeline(tmp_path, [JOB], tl, []).stalls
    assert (s.stall_s, s.normal_s, s.stalled) == (None, None, False)
    assert read_job_logs(tmp_path / "spark" / "other_job", "other_job") == []


def test_the_report_and_the_run_row_show_the_pipeline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    record(capsys, tmp_path / "spark" / JOB / "driver-1.log", _steady(10, 30))
    record(capsys, tmp_path / "spark" / JOB / "driver-2.log", [(52.0, 4000, 4300, 0), *_steady(53, 70)], first_id=20)
    kill = Marker(T0 + 30.5, "kill-driver", f"spark {JOB}")
    tl = Timeline(T0, T0 + 90, ["t"], markers=[kill])
    faults = [_fault(T0 + 30.5, 0.4)]
    p = pipeline_timeline(tmp_path, [JOB], tl, faults)
    exact = SparkVerifyResult(JOB, "t", "t-key-counts", 12000, 3, 90, 3, 38, 0, 0, 0, ok=True)
    step = StepResult(1, "verify_spark", "verify_spark job=key_counts", True, T0, 1.0, exact.summary())
    result = ScenarioResult("spark-restart-driver", None, "lab", "t", True, T0, T0 + 90, [step], faults=faults,
                            timeline=tl, spark=exact, pipeline=p)  # fmt: skip
    json_path, html_path = write_reports(result, tmp_path / "report")
    data = json.loads(json_path.read_text())
    assert data["pipeline"]["stalls"][0]["stall_s"] == 21.5 and len(data["pipeline"]["batches"]) == 40
    html = html_path.read_text()
    assert "Pipeline (Spark micro-batches)" in html and "stall 21.5s" in html  # the table and the shaded plot span
    assert "<td>kill-driver spark key_counts</td><td>30.5</td><td>key_counts</td><td>21.5</td><td>1.0</td>" in html
    assert "key_counts driver 2 processed" in html and "no driver" in html
    row = stats.run_stats(1, result)
    assert (row.stall_s, row.write_gap_s, row.spark_exact, row.spark_missing, row.spark_mismatched) == (
        21.5, 0.4, True, 0, 0,
    )  # fmt: skip


def test_a_run_without_spark_has_no_pipeline_section(tmp_path: Path) -> None:
    tl = Timeline(T0, T0 + 10, ["t"])
    result = ScenarioResult("kill-leader", None, "lab", "t", True, T0, T0 + 10, [], timeline=tl)
    html = write_reports(result, tmp_path)[1].read_text()
    assert "Pipeline (Spark" not in html and "Spark rows/s" not in html
    assert stats.run_stats(1, result).stall_s is None and PipelineTimeline().stalls == []
