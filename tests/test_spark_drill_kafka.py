"""The Spark drills on real Kafka (the session's Kafka, PySpark and a JVM): `scenario run spark-kill-leader`
and `scenario run spark-restart-driver` on the session's 3 ZooKeeper + 3 broker cluster (the real_kafka fixture,
healed after each), a local-mode key_counts driver beside the acks=all load. Each must lose no acknowledged write,
give exact Spark results (none missing, none counted twice) and report the pipeline's stall next to Kafka's write
gap. The restarted driver resumes from its checkpoint (the batch it died in or the next, not batch 0).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from _runtime_helpers import cli
from conftest import RealKafka

pytest.importorskip("pyspark", reason="needs the spark extra (pip install 'clusterctl[spark]')")
pytestmark = [pytest.mark.real_kafka, pytest.mark.docker, pytest.mark.spark]


def run_spark_drill(spec_path: Path, scenario: str, report_dir: Path) -> dict[str, Any]:
    """`scenario run NAME --json`: a PASS with nothing acknowledged lost and the job's results exact."""
    res = cli(spec_path, "scenario", "run", scenario, "--report-dir", str(report_dir), "--json", timeout=900)
    assert res.returncode == 0, f"{scenario}: {res.stdout[-3000:]} / {res.stderr[-3000:]}"
    data: dict[str, Any] = json.loads(res.stdout)
    v, spark = data["verify"], data["spark"]
    assert data["verdict"] == "PASS" and all(s["ok"] for s in data["steps"]), data["error"]
    assert v["lost_count"] == 0 and v["acked"] > 5000 and data["load"]["failed"] == 0, v
    assert spark["ok"] and (spark["missing_count"], spark["extra_count"], spark["mismatched_count"]) == (0, 0, 0)
    # Spark counted exactly what the input topic holds: every acknowledged write, none twice
    assert spark["input_records"] == v["consumed"] and spark["behind"] == 0, (spark, v)
    page = (report_dir / "report.html").read_text()
    assert "Pipeline (Spark micro-batches)" in page and "Spark rows/s" in page
    return data


def _exact(data: dict[str, Any]) -> str:
    s = data["spark"]
    return f"{s['missing_count']} missing, {s['mismatched_count']} mismatched of {s['expected_keys']} keys"


def _line(data: dict[str, Any], stall: dict[str, Any]) -> str:
    return (f"acked {data['verify']['acked']}, lost 0, Spark {_exact(data)}, stall {stall['stall_s']} s "
            f"(normal {stall['normal_s']} s), Kafka write gap {stall['write_gap_s']} s, end-to-end peak "
            f"{stall['behind_peak_s']} s ({stall['lag_peak']} records)")  # fmt: skip


def _stall(data: dict[str, Any], action: str) -> dict[str, Any]:
    (stall,) = [s for s in data["pipeline"]["stalls"] if s["action"] == action]
    return stall


def test_spark_kill_leader_keeps_the_counts_exact(real_kafka: RealKafka, tmp_path: Path) -> None:
    data = run_spark_drill(real_kafka.spec_path, "spark-kill-leader", tmp_path)
    stall = _stall(data, "kill-leader")
    (fault,) = [f for f in data["faults"] if f["action"] == "kill-leader"]
    gaps = [p["write_gap_s"] for p in fault["partitions"] if p["write_gap_s"] is not None]
    # the pipeline had batches before the fault and went on after it; Kafka's own write gap stands beside its stall
    assert stall["stall_s"] is not None and stall["normal_s"] is not None and stall["batches_after"] > 5, stall
    assert gaps and stall["write_gap_s"] == max(gaps)
    assert stall["behind_peak_s"] is not None and stall["lag_peak"] is not None, stall  # end to end, from the ledger
    assert [d["driver"] for d in data["pipeline"]["drivers"]] == [1]
    print(f"\nspark-kill-leader: {_line(data, stall)}")


def test_spark_restart_driver_resumes_from_its_checkpoint_with_exact_counts(
    real_kafka: RealKafka, tmp_path: Path
) -> None:
    data = run_spark_drill(real_kafka.spec_path, "spark-restart-driver", tmp_path)
    stall = _stall(data, "kill-driver")
    d1, d2 = data["pipeline"]["drivers"]
    # the restarted driver went on from its checkpoint: the batch it died in (or the next), not batch 0
    restart = [s for s in data["steps"] if s["kind"] == "spark_job"][2]
    assert "resumed from its checkpoint" in restart["detail"], restart
    # (the drivers' batches come from their own logs, driver-1.log and driver-2.log)
    assert d1["batches"] and d2["batches"] and d1["last_batch"] + 1 <= d2["first_batch"] <= d1["last_batch"] + 2, (
        d1, d2)  # fmt: skip
    # no batch between the kill and the restarted driver's first: that wait is the stall, and it is one
    assert d1["last_t"] < stall["t"] < d2["first_t"] and stall["stalled"], stall
    assert stall["stall_s"] >= d2["first_t"] - stall["t"] - 0.01, (stall, d2)
    # end to end, the first batch of the new driver delivers records acknowledged before the kill
    assert stall["behind_peak_s"] > stall["stall_s"] - 1 and stall["lag_peak"] > stall["lag_before"], stall
    markers = json.loads((tmp_path / "report.json").read_text())["timeline"]["markers"]
    assert [(m["action"], m["target"], m["heal"]) for m in markers] == [
        ("kill-driver", "spark key_counts", False), ("restart-driver", "spark key_counts", True),
    ]  # fmt: skip
    print(f"\nspark-restart-driver: {_line(data, stall)}")
