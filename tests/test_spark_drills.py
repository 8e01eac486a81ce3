"""The Spark drills on a real cluster: ZooKeeper + one Apache Kafka broker + a Spark standalone master and 2 workers
x 1 core, the job on Spark's own Kafka connector (the default; executors load it from the image's Spark jars).

Test-only spec: a free subnet and free host ports (ZooKeeper, the broker, Spark master,
its UI). The drill runs through the real `clusterctl scenario run`:

- `spark-kill-worker`: key_counts on the standalone cluster (`master: cluster`), a worker container SIGKILLed
  mid-stream. The master's own /json/ (sampled beside the run) shows the job's executor lost (the job's cores
  2 → 1) and given back after heal; the driver's progress events show batches with input finishing between the
  kill and the heal (the job went on with the other worker); the counts are exact.

(`spark-restart-driver` runs a local-mode driver, not on this cluster: tests/test_spark_drill_kafka.py runs it on
real Kafka, with this file's former checks that the restarted driver resumed from its checkpoint.)

The test prints its numbers (records, missing, double-counted, time to the first batch after the fault,
load average) in one line for docs/spark.md.
"""

from __future__ import annotations

import itertools
import json
import os
import shutil
import statistics
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from _runtime_helpers import cli, release, render, write_spec
from conftest import kafka_dist

from clusterctl.images import build as images
from clusterctl.runtime import allocate
from clusterctl.spark.progress import parse_ts

pytestmark = [pytest.mark.docker, pytest.mark.spark, pytest.mark.real_kafka]

# free host ports (runtime/allocate.py; no Docker needed to pick them), a free subnet when the cluster is made
SUBNET = None
_BASE = allocate.free_port_block(4)
ZK_PORT, BROKER_PORT, MASTER_PORT, UI_PORT = _BASE, _BASE + 1, _BASE + 2, _BASE + 3
APP = "clusterctl-key_counts"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    images.build_images(["zookeeper", "kafka", "spark"], kafka_dist=kafka_dist())
    work = tmp_path_factory.mktemp("spark-drills")
    spec_path = write_spec(
        work,
        f"ctlsdrill-{uuid.uuid4().hex[:6]}",
        SUBNET,
        zk_port=ZK_PORT,
        broker_port=BROKER_PORT,
        zk_nodes=1,
        engine="kafka",
        brokers=1,
    )
    shared = work / "shared"
    data = yaml.safe_load(spec_path.read_text())
    data["spark"] = {
        "enabled": True,
        "workers": 2,
        "worker_cores": 1,
        "worker_memory": "1g",
        "master_port": MASTER_PORT,
        "ui_port": UI_PORT,
        "shared_dir": str(shared),
    }
    spec_path.write_text(yaml.safe_dump(data, sort_keys=False))
    render(spec_path)
    try:
        res = cli(spec_path, "up", "--timeout", "180")
        assert res.returncode == 0, res.stderr
        yield spec_path
    finally:
        release(spec_path)
        shutil.rmtree(shared, ignore_errors=True)


@dataclass
class MasterSamples:
    """The master's /json/ every 0.5 s: (time, alive workers, cores the job holds) while a drill runs."""

    rows: list[tuple[float, int, int | None]] = field(default_factory=list)
    stop: threading.Event = field(default_factory=threading.Event)

    def poll(self) -> None:
        while not self.stop.wait(0.5):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{UI_PORT}/json/", timeout=3) as resp:
                    state = json.load(resp)
            except (OSError, ValueError):
                continue
            apps = [a for a in state.get("activeapps", []) if a.get("name") == APP]
            self.rows.append((time.time(), int(state["aliveworkers"]), int(apps[0]["cores"]) if apps else None))

    def changes(self, t0: float) -> str:
        """Each change of (alive workers, the job's cores), at seconds from t0."""
        out, last = [], None
        for t, alive, cores in self.rows:
            if (alive, cores) != last:
                out.append(f"{t - t0:+.1f}s {alive} alive, job {cores} cores")
                last = (alive, cores)
        return "; ".join(out)

    def cores(self, start: float, end: float) -> set[int | None]:
        return {c for t, _alive, c in self.rows if start <= t <= end}


def batches(log: Path) -> list[dict[str, Any]]:
    """The driver's batch progress events (`spark run --json`: a line each on stderr, beside the indented result
    on stdout), each with its start and end time added."""
    out = []
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith('{"event":"batch"'):
            event = json.loads(line)
            event["t0"] = parse_ts(event["started"])
            event["ended"] = parse_ts(event["started"]) + event["duration_ms"] / 1000
            out.append(event)
    return out


def run_drill(spec_path: Path, scenario: str, report_dir: Path) -> tuple[dict[str, Any], MasterSamples]:
    samples = MasterSamples()
    sampler = threading.Thread(target=samples.poll, daemon=True)
    sampler.start()
    try:
        res = cli(spec_path, "scenario", "run", scenario, "--report-dir", str(report_dir), "--json", timeout=600)
    finally:
        samples.stop.set()
        sampler.join(10)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    data = json.loads(res.stdout)
    assert data["ok"] is True and all(s["ok"] for s in data["steps"]), data["steps"]
    return data, samples


def step(data: dict[str, Any], kind: str, contains: str = "") -> dict[str, Any]:
    return next(s for s in data["steps"] if s["kind"] == kind and contains in s["description"])


def exact(data: dict[str, Any]) -> dict[str, Any]:
    """The Spark verdict and the ledger's: exact counts, nothing acknowledged lost."""
    spark, verify = data["spark"], data["verify"]
    assert spark["ok"] is True and spark["behind"] == 0, spark
    assert (spark["missing_count"], spark["extra_count"], spark["mismatched_count"]) == (0, 0, 0), spark
    assert spark["input_records"] == verify["consumed"] > 0 and verify["lost_count"] == 0, (spark, verify)
    return dict(spark)


def report(name: str, spark: dict[str, Any], extra: str) -> None:
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"\n{name}: {spark['input_records']} records, {spark['expected_keys']} keys, missing "
        f"{spark['missing_count']}, double-counted {spark['mismatched_count']}, re-written {spark['rewritten']}, "
        f"{extra}, load average {load}"
    )


def test_spark_kill_worker_loses_an_executor_and_the_counts_stay_exact(cluster: Path, tmp_path: Path) -> None:
    data, samples = run_drill(cluster, "spark-kill-worker", tmp_path)
    spark = exact(data)
    kill = step(data, "fault", "kill-spark-worker")["started"]
    heal = step(data, "heal")["started"]
    assert "start-spark-worker" not in str(data["steps"])  # healed by the heal step, not by a fault step
    assert "start spark-worker 1" in step(data, "heal")["detail"], step(data, "heal")

    # the job held an executor in each worker, lost one with the worker, and got one back after heal
    print(f"\nthe master, from the kill: {samples.changes(kill)}")
    assert samples.cores(kill - 10, kill) == {2}, samples.rows
    assert 1 in samples.cores(kill, time.time()), samples.rows
    lost_at = min(t for t, _a, c in samples.rows if t >= kill and c == 1)
    stopped = step(data, "spark_job", "action=stop")["started"]
    assert 2 in samples.cores(heal, stopped), samples.rows  # an executor in the restarted worker again

    # batches with input ran from start to end between the kill and the heal: the job went on with the other worker
    done = batches(tmp_path / "spark" / "key_counts" / "driver-1.log")
    during = [b for b in done if kill <= b["t0"] and b["ended"] < heal and b["input_rows"] > 0]
    assert during, [(b["batch_id"], b["t0"] - kill, b["ended"] - kill) for b in done]
    # the stall: the longest wait for a batch to end after the kill (the batch that lost its tasks), beside the
    # usual wait before it
    ends = [b["ended"] for b in done]
    waits = [(b - a, b) for a, b in itertools.pairwise(ends)]
    stall = max(w for w, end in waits if kill < end <= heal)
    before = [w for w, end in waits if end <= kill]  # none when the first batch (executor start) ran into the kill
    usual = f"{statistics.median(before):.1f}s" if before else "n/a"
    report(
        "spark-kill-worker",
        spark,
        f"longest wait for a batch after the kill {stall:.1f}s (median before it {usual}), executor lost at "
        f"the master +{lost_at - kill:.1f}s, {len(during)} batches with input between kill and heal",
    )
