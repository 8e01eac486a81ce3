"""A streaming job refuses a checkpoint that is not its own, or a missing one on --resume (exit 8, nothing written)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

from clusterctl.errors import CheckpointError
from clusterctl.kafka.admin import create_topic
from clusterctl.kafka.connection import log_end_offsets, producer_config

pytest.importorskip("pyspark", reason="needs the spark extra (pip install 'clusterctl[spark]')")
pytest.importorskip("pyarrow", reason="needs the spark extra (pip install 'clusterctl[spark]')")

from clusterctl.spark import checkpoint as checkpoints
from clusterctl.spark.runner import run_job

pytestmark = [pytest.mark.spark, pytest.mark.tansu]


@pytest.fixture
def topics(bootstrap: str, unique_name: str) -> Iterator[tuple[str, str]]:
    """An input topic with 50 lines and an empty output topic."""
    src, out = f"{unique_name}-in", f"{unique_name}-out"
    for t in (src, out):
        create_topic(bootstrap, t, 1, 1)
    p = Producer(producer_config(bootstrap))
    for i in range(50):
        p.produce(src, value=f"a b w{i % 5}".encode())
    assert p.flush(30) == 0
    yield src, out


def spark_run(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [
        sys.executable,
        "-m",
        "clusterctl",
        "spark",
        "run",
        "word_count",
        "-b",
        bootstrap,
        "--available-now",
        "--connector",
        "clusterctl",
    ]
    cmd += args
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, check=False)


def assert_refused(proc: subprocess.CompletedProcess[str], bootstrap: str, out: str, words: str) -> None:
    assert proc.returncode == 8, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and words in lines[0], proc.stderr
    assert log_end_offsets(bootstrap, [(out, 0)]) == {(out, 0): 0}  # nothing written


def test_another_jobs_checkpoint_is_refused_before_spark(bootstrap: str, topics: tuple[str, str], tmp_path: Path):
    src, out = topics
    cp = tmp_path / "cp"
    checkpoints.record(cp, checkpoints.CheckpointOwner("windowed_counts", (src,), (out,), "python"))
    proc = spark_run(bootstrap, "--checkpoint", str(cp), "-o", f"input={src}", "-o", f"output={out}")
    assert_refused(proc, bootstrap, out, f"belongs to job windowed_counts reading {src} writing {out}")
    assert sorted(p.name for p in cp.iterdir()) == [checkpoints.MARKER]  # Spark never started


def test_a_checkpoint_of_other_topics_is_refused(bootstrap: str, topics: tuple[str, str], tmp_path: Path):
    src, out = topics
    cp = tmp_path / "cp"
    (cp / "offsets").mkdir(parents=True)
    # Spark's offset log entry: version, batch metadata, then each source's offset (here another topic's)
    (cp / "offsets" / "0").write_text('v1\n{"batchWatermarkMs":0,"batchTimestampMs":1}\n{"other": {"0": 7}}\n')
    proc = spark_run(bootstrap, "--checkpoint", str(cp), "-o", f"input={src}", "-o", f"output={out}")
    assert_refused(proc, bootstrap, out, f"holds offsets of other, not of this run's input {src}")


def test_resume_needs_the_checkpoint(bootstrap: str, topics: tuple[str, str], tmp_path: Path):
    src, out = topics
    cp = tmp_path / "gone"
    proc = spark_run(bootstrap, "--checkpoint", str(cp), "--resume", "-o", f"input={src}", "-o", f"output={out}")
    assert_refused(proc, bootstrap, out, f"no checkpoint to resume at {cp}")
    assert not cp.exists()
    proc = spark_run(bootstrap, "--resume", "-o", f"input={src}", "-o", f"output={out}")
    assert proc.returncode == 2 and "--resume needs --checkpoint" in proc.stderr


def test_own_checkpoint_resumes_and_a_changed_output_is_refused(
    bootstrap: str, topics: tuple[str, str], tmp_path: Path
):
    from clusterctl.spark.session import get_session

    spark: Any = get_session("local[2]", app_name="clusterctl-tests", shuffle_partitions=2)
    src, out = topics
    cp = tmp_path / "cp"
    opts = {"input": src, "output": out}
    first = run_job(
        "word_count", bootstrap, spark=spark, connector="clusterctl", checkpoint=cp, available_now=True, options=opts
    )
    assert first.input_rows == 50
    assert json.loads((cp / checkpoints.MARKER).read_text()) == {
        "job": "word_count",
        "inputs": [src],
        "outputs": [out],
        "connector": "clusterctl",
    }
    written = log_end_offsets(bootstrap, [(out, 0)])
    again = run_job(
        "word_count",
        bootstrap,
        spark=spark,
        connector="clusterctl",
        checkpoint=cp,
        available_now=True,
        options=opts,
        resume=True,
    )
    assert (again.input_rows, again.stopped) == (0, "caught up")
    with pytest.raises(CheckpointError, match=f"belongs to job word_count reading {src} writing {out}"):
        run_job(
            "word_count",
            bootstrap,
            spark=spark,
            connector="clusterctl",
            checkpoint=cp,
            resume=True,
            options={**opts, "output": src},
        )
    assert log_end_offsets(bootstrap, [(out, 0)]) == written


def test_run_reports_each_batch_with_rates_and_lag(bootstrap: str, topics: tuple[str, str]):
    """--json: one event per micro-batch on stderr (rows, rates, lag), the result on stdout."""
    src, out = topics
    proc = spark_run(bootstrap, "--json", "-o", f"input={src}", "-o", f"output={out}", "-o", "maxOffsetsPerTrigger=20")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    events = [json.loads(ln) for ln in proc.stderr.splitlines() if ln.startswith("{")]
    batches = [e for e in events if e["event"] == "batch" and e["input_rows"]]
    assert [e["input_rows"] for e in batches] == [20, 20, 10]
    # each batch leaves the rest of the topic's 50 records behind it
    assert [e["lag"] for e in batches] == [30, 10, 0]
    assert all(e["processed_rows_per_s"] > 0 for e in batches)
    assert (result["input_rows"], result["batches"], result["lag"]) == (50, len(events), 0)
