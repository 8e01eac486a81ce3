"""Exact results through a driver restart: the batch-id sink, the changelog reader and the drill's Spark verifier.

The Spark tests run a drill's spark_job and verify_spark steps (local-mode drivers as `clusterctl spark run`
processes) against tansu on loopback. A restart replays a batch deterministically: the driver is killed once
its last batch is committed, and that commit is removed from the checkpoint, as if the driver had died after
its sink wrote the batch and before Spark logged the commit. Spark then runs that batch again from the same
offsets and the same state.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer

from clusterctl.kafka.admin import create_topic
from clusterctl.kafka.connection import producer_config
from clusterctl.spark.changelog import ChangeRecord, batch_of, compact

pytest.importorskip("pyspark", reason="needs the spark extra (pip install 'clusterctl[spark]')")

from clusterctl.chaos.pipeline import compare
from clusterctl.chaos.pipeline_timeline import pipeline_timeline
from clusterctl.chaos.results import StepFailed
from clusterctl.chaos.runner import Runner
from clusterctl.chaos.scenario import Step, load_scenario, parse_scenario
from clusterctl.chaos.timeline import Marker, Timeline
from clusterctl.errors import SpecError, UsageError, VerificationError
from clusterctl.spark.checkpoint import last_committed
from clusterctl.spark.runner import jobs_dir, load_job
from clusterctl.spec.model import parse_spec
from clusterctl.spec.validate import MAX_JOB_OPTIONS, MAX_SECONDS, TOPIC_MAX_LENGTH

TEST_JOBS = Path(__file__).parent / "spark_test_jobs"
KEYS = 6


# ---------------------------------------------------------------- no Spark, no broker


def test_compact_keeps_the_highest_batch_per_key_and_counts_rewrites():
    records = [
        ChangeRecord(0, 0, "a", "1", 0),
        ChangeRecord(0, 1, "a", "3", 1),
        ChangeRecord(0, 2, "a", "3", 1),  # batch 1 replayed
        ChangeRecord(0, 3, "a", "1", 0),  # a late writer of batch 0: older than what is there
        ChangeRecord(1, 0, "b", "2", 1),
        ChangeRecord(1, 1, None, "5", None),
    ]
    view = compact(records)
    assert view.values == {"a": "3", "b": "2", "": "5"}
    # the late (a, 0) is both a re-write of batch 0 and older than the newest value of a
    assert (view.records, view.rewritten, view.stale, view.unbatched, view.last_batch) == (6, 2, 1, 1, 1)
    # the last record per key (no batch-id check) takes the late writer's old total
    assert compact(records, by_batch=False).values["a"] == "1"


def test_batch_header_and_compare():
    assert batch_of([("other", b"1"), ("clusterctl.batch", b"17")]) == 17
    assert batch_of([("clusterctl.batch", b"x")]) is None and batch_of(None) is None
    missing, extra, mismatched = compare({"a": "1", "b": "2", "c": "3"}, {"a": "1", "b": "4", "d": "1"})
    assert (missing, extra) == (["c"], ["d"])
    assert [(m.key, m.expected, m.got) for m in mismatched] == [("b", "2", "4")]


def test_jobs_compute_their_expected_results():
    records = [("k1", "a b  a"), ("k2", "B a"), (None, "")]
    assert load_job("key_counts").expected(records, {}) == {"k1": "1", "k2": "1", "": "1"}
    assert load_job("word_count").expected(records, {"lowercase": "false"}) == {"a": "3", "b": "1", "B": "1"}
    assert load_job("word_count").expected(records, {"lowercase": "true"}) == {"a": "3", "b": "2"}


def test_last_committed_reads_the_commit_and_offset_logs(tmp_path: Path):
    assert last_committed(tmp_path) is None
    (tmp_path / "offsets").mkdir()
    (tmp_path / "commits").mkdir()
    for batch, end in ((0, 5), (1, 9), (2, 12)):
        (tmp_path / "offsets" / str(batch)).write_text(f'v1\n{{"batchWatermarkMs":0}}\n{{"t": {{"0": {end}}}}}\n')
    for batch in (0, 1):
        (tmp_path / "commits" / str(batch)).write_text('v1\n{"nextBatchWatermarkMs":0}\n')
    assert last_committed(tmp_path) == (1, {"t": {"0": 9}})


def test_the_standalone_cluster_is_required_by_a_cluster_master_and_a_spark_worker_fault(tmp_path: Path):
    from clusterctl.chaos.faults import spark_worker_target
    from clusterctl.chaos.pipeline import SparkJobs, standalone_containers
    from clusterctl.errors import NotFoundError

    base = {"name": "lab", "profile": "offline", "kafka_manager": {"enabled": False}}
    doc = """
name: x
requires: any
topic: {name: t}
steps:
  - spark_job: {job: key_counts, master: cluster}
  - fault: {action: kill-spark-worker, spark_worker: 2}
"""
    steps = parse_scenario(doc, "<s>").parsed_steps()
    plain = parse_spec(base)
    with pytest.raises(UsageError, match=r"^step spark_job job=key_counts master=cluster needs the spec's Spark "
                       r"standalone cluster; cluster lab has none \(spark.enabled is false\) \(hint: set"):  # fmt: skip
        standalone_containers(plain, steps)
    with pytest.raises(UsageError, match=r"^step fault action=kill-spark-worker spark_worker=2 needs"):
        standalone_containers(plain, steps[1:])
    assert standalone_containers(plain, parse_scenario("name: x\nsteps:\n  - sleep: 1\n").parsed_steps()) == []
    with pytest.raises(UsageError, match="cluster lab has no Spark standalone cluster"):
        spark_worker_target(plain, 1)

    shared = tmp_path / "shared"
    spark = parse_spec({**base, "spark": {"enabled": True, "workers": 2, "shared_dir": str(shared)}})
    assert standalone_containers(spark, steps) == ["lab-spark-master", "lab-spark-worker1", "lab-spark-worker2"]
    assert spark_worker_target(spark, 2) == ("spark-worker 2", "lab-spark-worker2")
    with pytest.raises(NotFoundError, match="unknown Spark worker 3; the spec has workers 1,2"):
        spark_worker_target(spark, 3)
    one = parse_spec({**base, "spark": {"enabled": True, "workers": 1}})
    with pytest.raises(NotFoundError, match=r"unknown Spark worker 2; the spec has workers 1$"):
        standalone_containers(one, steps)

    # a cluster job's checkpoint is in shared_dir (executors write its state there), a local job's in the run's
    work = tmp_path / "run-1"
    jobs = SparkJobs("127.0.0.1:1", work, tmp_path / "clusterctl.yaml", shared)
    cp = jobs._checkpoint("key_counts", "cluster")
    assert cp.is_relative_to(shared) and cp.parts[-2:] == ("key_counts", "checkpoint")
    assert cp.parts[len(shared.parts)].startswith("drill-run-1-")
    assert jobs._checkpoint("key_counts", "local[2]") == work / "spark" / "key_counts" / "checkpoint"
    with pytest.raises(UsageError, match="spark_job key_counts: master cluster needs the spec's Spark standalone"):
        SparkJobs("127.0.0.1:1", work)._checkpoint("key_counts", "cluster")


# ---------------------------------------------------------------- Spark drivers on tansu


@pytest.fixture
def jobs_with_test_jobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """spark_jobs/ plus the test-only jobs, for the drivers this test starts."""
    root = tmp_path / "jobs"
    root.mkdir()
    for path in [*jobs_dir().glob("*.py"), *TEST_JOBS.glob("*.py")]:
        (root / path.name).symlink_to(path)
    monkeypatch.setenv("CLUSTERCTL_SPARK_JOBS", str(root))
    yield root


def produce(bootstrap: str, topic: str, start: int, count: int) -> None:
    p = Producer(producer_config(bootstrap))
    for i in range(start, start + count):
        p.produce(topic, key=f"k{i % KEYS}".encode(), value=f"v{i}".encode())
    assert p.flush(30) == 0


def drill(bootstrap: str, name: str, job: str, work: Path) -> tuple[Runner, list[Step]]:
    """A drill runner on tansu (clusterctl's connector): start, kill, start again (resume), verify_spark, stop `job`."""
    topic = f"{name}-in"
    create_topic(bootstrap, topic, 2, 1)
    doc = f"""
name: spark-exact
requires: any
topic: {{name: {topic}, partitions: 2, replication_factor: 1, min_insync_replicas: 1}}
steps:
  - spark_job: {{job: {job}, trigger: 0.5, connector: clusterctl, options: {{maxOffsetsPerTrigger: "40"}}}}
  - spark_job: {{job: {job}, action: kill}}
  - spark_job: {{job: {job}, connector: clusterctl}}
  - verify_spark: {{job: {job}, timeout: 240}}
  - spark_job: {{job: {job}, action: stop}}
"""
    spec = parse_spec({"name": "lab", "profile": "offline", "kafka_manager": {"enabled": False}})
    sc = parse_scenario(doc, "<test>")
    return Runner(spec, sc, bootstrap=bootstrap, work_dir=work), sc.parsed_steps()


def wait_committed(batches: int) -> Step:
    # the job started first: a wait on a job nothing starts is refused when the scenario is parsed
    doc = (f"name: x\ntopic: {{name: t}}\nsteps:\n  - spark_job: {{job: key_counts}}\n"
           f"  - wait_for: {{spark_committed: {{job: key_counts, batches: {batches}}}, timeout: 240}}\n")  # fmt: skip
    return parse_scenario(doc, "<s>").parsed_steps()[1]


def run_with_replayed_batch(runner: Runner, steps: list[Step], job: str) -> int:
    """Run `job` over 60 records, kill its driver, drop its last commit, restart it and add 40 more records.

    Returns the id of the batch that runs twice; the verify_spark and stop steps are left to the caller.
    """
    start, kill, resume = steps[:3]
    produce(runner.bootstrap, runner.topic, 0, 60)
    assert f"{job} started (local[2]" in str(runner._run_step(start))
    jobs = runner.spark_jobs
    jobs.wait_caught_up(job, 240)
    assert "driver killed (SIGKILL" in str(runner._run_step(kill))
    cp = jobs.jobs[job].checkpoint
    last = last_committed(cp)
    assert last is not None and last[0] >= 1
    # died after the sink wrote batch N, before its commit (the commit and its checksum file, if written yet)
    for name in (str(last[0]), f".{last[0]}.crc"):
        (cp / "commits" / name).unlink(missing_ok=True)
    produce(runner.bootstrap, runner.topic, 60, 40)
    assert f"{job} resumed from its checkpoint" in str(runner._run_step(resume))
    return last[0]


@pytest.mark.spark
@pytest.mark.tansu
def test_a_sink_without_the_batch_id_check_double_counts_the_replay_and_the_verifier_says_so(
    bootstrap: str, unique_name: str, tmp_path: Path, jobs_with_test_jobs: Path
):
    runner, steps = drill(bootstrap, unique_name, "increment_counts", tmp_path)
    try:
        run_with_replayed_batch(runner, steps, "increment_counts")
        with pytest.raises(VerificationError, match=r"^Spark results not exact: increment_counts: NOT exact, "):
            runner._run_step(steps[3])
    finally:
        runner.spark_jobs.close()
    result = runner.spark_verify
    assert not result.ok
    assert (result.missing_count, result.extra_count, result.behind) == (0, 0, 0)
    # every key of the replayed batch got its count added twice
    assert result.mismatched_count > 0
    assert all(m.got is not None and int(m.got) > int(m.expected) for m in result.mismatched)
    assert f"{result.mismatched_count} mismatched" in result.summary()


def test_the_restart_drill_scenario_parses():
    sc = load_scenario("spark-restart-driver")
    kinds = [(s.kind, getattr(s.args, "action", None)) for s in sc.parsed_steps() if "spark" in s.kind]
    assert kinds == [("spark_job", "start"), ("spark_job", "kill"), ("spark_job", "start"), ("verify_spark", None),
                     ("spark_job", "stop")]  # fmt: skip
    with pytest.raises(SpecError, match=r"step 1 \(spark_job\): job: String should match pattern"):
        parse_scenario("name: x\nsteps:\n  - spark_job: {job: ../evil}\n", "<s>")
    with pytest.raises(SpecError, match=r"step 1 \(spark_job\): master: String should match pattern"):
        parse_scenario("name: x\nsteps:\n  - spark_job: {job: key_counts, master: 'spark://x:7077'}\n", "<s>")


def test_the_report_shows_the_spark_verdict(tmp_path: Path):
    import json

    from clusterctl.chaos.pipeline import KeyMismatch, SparkVerifyResult
    from clusterctl.chaos.report import write_reports
    from clusterctl.chaos.results import ScenarioResult, StepResult
    from clusterctl.chaos.timeline import Timeline

    bad = SparkVerifyResult(
        "key_counts", "in", "out", 100, 6, 30, 6, 4, 0, 0, 1, mismatched=[KeyMismatch("k1", "17", "21")]
    )
    assert bad.summary() == (
        "key_counts: NOT exact, 6 keys from 100 input records (batches 0..4): 0 missing, 0 extra, 1 mismatched "
        "(k1: expected 17, got 21)"
    )
    tl = Timeline(1000.0, 1010.0, ["in"])
    step = StepResult(1, "verify_spark", "verify_spark job=key_counts", False, 1000.0, 1.0, "Spark results not exact")
    result = ScenarioResult("spark-exact", None, "lab", "in", False, 1000.0, 1010.0, [step], timeline=tl, spark=bad)
    json_path, html_path = write_reports(result, tmp_path)
    assert json.loads(json_path.read_text())["spark"]["mismatched"] == [{"key": "k1", "expected": "17", "got": "21"}]
    html = html_path.read_text()
    assert "Verification (Spark results)" in html and "NOT EXACT" in html and "k1: expected 17, got 21" in html


@pytest.mark.tansu
def test_a_driver_that_stopped_by_itself_fails_the_stop_step(bootstrap: str, unique_name: str, tmp_path: Path):
    from clusterctl.chaos.pipeline import SparkJobs
    from clusterctl.chaos.results import StepFailed

    jobs = SparkJobs(bootstrap, tmp_path)
    jobs.start("key_counts", f"{unique_name}-gone", f"{unique_name}-out")  # refused before Spark starts
    process = jobs.jobs["key_counts"].process
    assert process is not None and process.wait(timeout=120) == 3
    with pytest.raises(
        StepFailed, match=rf"^spark job key_counts had stopped by itself: unknown topic '{unique_name}-gone'"
    ):
        jobs.stop("key_counts")
    with pytest.raises(UsageError, match="spark job other was not started in this drill"):
        jobs.verify("other")


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"timeout": MAX_SECONDS}, None),
        ({"timeout": MAX_SECONDS + 1}, "timeout: Input should be less than or equal to 86400"),
        ({"trigger": 0}, None),
        ({"trigger": -1}, "trigger: Input should be greater than or equal to 0"),
        ({"options": {f"o{i}": "v" for i in range(MAX_JOB_OPTIONS)}}, None),
        ({"options": {f"o{i}": "v" for i in range(MAX_JOB_OPTIONS + 1)}}, "options: Dictionary should have at most 32"),
        ({"output": "t" * TOPIC_MAX_LENGTH}, None),
        ({"output": "t" * (TOPIC_MAX_LENGTH + 1)}, "output: String should match pattern"),
        ({"master": "local[*]"}, None),
        ({"master": "cluster"}, None),
        ({"conf": {f"spark.c{i}": "v" for i in range(MAX_JOB_OPTIONS)}}, None),
        ({"conf": {f"spark.c{i}": "v" for i in range(MAX_JOB_OPTIONS + 1)}}, "conf: Dictionary should have at most 32"),
        ({"master": "spark://10.0.0.1:7077"}, "master: String should match pattern"),
        ({"action": "pause"}, "action: Input should be 'start', 'stop' or 'kill'"),
    ],
)
def test_spark_job_step_bounds(fields: dict[str, object], error: str | None):
    import json

    # a named topic: the job reads a topic that exists (not one a create_topic step must make first)
    doc = f"name: x\ntopic: {{name: t}}\nsteps:\n  - spark_job: {json.dumps({'job': 'key_counts', **fields})}\n"
    if error is None:
        assert parse_scenario(doc, "<s>").parsed_steps()[0].kind == "spark_job"
    else:
        with pytest.raises(SpecError, match=rf"^<s>: step 1 \(spark_job\): {re.escape(error)}"):
            parse_scenario(doc, "<s>")


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"batches": 1}, None),
        ({"batches": 1_000_000_000}, None),
        ({"batches": 0}, "spark_committed.batches: Input should be greater than or equal to 1"),
        ({"batches": 1_000_000_001}, "spark_committed.batches: Input should be less than or equal to 1000000000"),
        ({"batches": 2, "job": "../x"}, "spark_committed.job: String should match pattern"),
    ],
)
def test_spark_committed_condition_bounds(fields: dict[str, object], error: str | None):
    import json

    doc = (f"name: x\ntopic: {{name: t}}\nsteps:\n  - spark_job: {{job: key_counts}}\n"
           f"  - wait_for: {{spark_committed: {json.dumps({'job': 'key_counts', **fields})}}}\n")  # fmt: skip
    if error is None:
        assert parse_scenario(doc, "<s>").parsed_steps()[1].args.name == "spark_committed"
    else:
        with pytest.raises(SpecError, match=rf"^<s>: step 2 \(wait_for\): {re.escape(error)}"):
            parse_scenario(doc, "<s>")


@pytest.mark.spark
@pytest.mark.tansu
def test_a_restarted_driver_resumes_exactly_after_a_kill_mid_batch_and_rewrites_a_replayed_batch(
    bootstrap: str, unique_name: str, tmp_path: Path
):
    """One job, two restarts, three drivers (each start of a driver is a JVM; the claims share them).

    1. No staging: records keep arriving from the first committed batch until the driver is SIGKILLed, as soon as
       batch 2 has committed, wherever it is in the next one; the restarted driver reads on from its checkpoint.
    2. A replayed batch, deterministically: that driver, caught up and idle, is killed and its last commit removed
       from the checkpoint (as if it died after its sink wrote the batch, before Spark logged the commit); with 40
       more records, the third driver runs that batch again and re-writes its keys under the same batch id.
    Both restarts end exact."""
    import threading
    import time

    from clusterctl.wait import wait_until

    runner, steps = drill(bootstrap, unique_name, "key_counts", tmp_path)
    start, kill, resume, verify, stop = steps
    enough = threading.Event()
    produced = [0]

    def trickle() -> None:  # 10 records every 0.3 s until told to stop
        while not enough.is_set():
            produce(bootstrap, runner.topic, produced[0], 10)
            produced[0] += 10
            time.sleep(0.3)

    def committed() -> int:
        last = last_committed(cp)
        return -1 if last is None else last[0]

    producing = threading.Thread(target=trickle)
    try:
        produce(bootstrap, runner.topic, 0, 10)
        produced[0] = 10
        assert "key_counts started (local[2]" in str(runner._run_step(start))
        cp = runner.spark_jobs.jobs["key_counts"].checkpoint
        # the scenarios' wait for a started driver: batch 0 committed
        assert "batch 0 committed" in str(runner._run_step(wait_committed(1)))
        producing.start()
        wait_until(committed, timeout=240, what="batch 2 to commit", done=lambda n: n >= 2)
        killed_at = time.time()
        runner._run_step(kill)
        with pytest.raises(StepFailed, match=r"^spark job key_counts is not running"):  # no waiting for a dead one
            runner._run_step(wait_committed(1))
        enough.set()
        producing.join()
        assert "key_counts resumed from its checkpoint" in str(runner._run_step(resume))
        runner._run_step(verify)  # waits until driver 2 has caught up with the input
        first = runner.spark_verify
        assert first.ok, first.summary()
        assert (first.input_records, first.expected_keys, first.behind) == (produced[0], KEYS, 0)
        # the pipeline's timeline from the drivers' own logs (drivers 1 and 2 so far)
        tl = Timeline(
            killed_at - 60, time.time(), [runner.topic], markers=[Marker(killed_at, "kill-driver", "spark k")]
        )
        pipeline = pipeline_timeline(tmp_path, ["key_counts"], tl, [])

        # 2: driver 2 is caught up and idle; it dies after its sink wrote its last batch, before that commit
        assert "driver killed (SIGKILL" in str(runner._run_step(kill))
        last = last_committed(cp)
        assert last is not None and last[0] >= 1
        replayed = last[0]
        for name in (str(replayed), f".{replayed}.crc"):  # the commit and its checksum file, if written yet
            (cp / "commits" / name).unlink(missing_ok=True)
        produce(bootstrap, runner.topic, produced[0], 40)
        assert "key_counts resumed from its checkpoint" in str(runner._run_step(resume))
        detail = runner._run_step(verify)
        assert "stopped (exit" in str(runner._run_step(stop))
    finally:
        enough.set()
        runner.spark_jobs.close()

    # 1: driver 1 until the kill, driver 2 after it, and the stall is the wait from the kill to driver 2's first
    # batch that read rows (its JVM start, the replay)
    d1, d2 = pipeline.drivers
    # the kill follows batch 2's commit at once: its event may not be logged yet (the driver polls every 0.25 s)
    assert (d1.driver, d2.driver) == (1, 2) and d1.batches >= 1 and d2.batches >= 1
    assert d1.last_t is not None and d2.first_t is not None and d1.last_t < killed_at < d2.first_t
    first_read = min(b.t for b in pipeline.batches if b.driver == 2 and b.input_rows)
    (stall,) = pipeline.stalls
    assert stall.stall_s == pytest.approx(first_read - killed_at, abs=0.002) and stall.stalled, stall

    # 2: exact over all 3 drivers' input; the replayed batch wrote its keys again (same batch id, more re-written
    # records than after the first restart), and a batch after it ran on the new records
    result = runner.spark_verify
    assert result.ok and detail == result.summary()
    assert (result.input_records, result.expected_keys, result.behind) == (produced[0] + 40, KEYS, 0)
    assert runner.spark_jobs.jobs["key_counts"].output_topic == f"{unique_name}-in-key-counts"
    assert result.rewritten > first.rewritten and result.last_batch is not None and result.last_batch > replayed
    assert str(detail).startswith(f"key_counts: exact, {KEYS} keys from {produced[0] + 40} input records")
