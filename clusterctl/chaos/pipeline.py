"""A drill's Spark pipeline: jobs from spark_jobs/ run beside the load, and the check that their results are exact.

Each job runs as its own `clusterctl spark run` process (its own Spark driver, local mode by default) with a
checkpoint under the drill's work directory, so a driver can be killed (SIGKILL to its process group: the
Python driver and its JVM) and started again from the checkpoint, exactly as a crashed driver would be.
With `master: cluster` the driver still runs here and its executors run in the spec's Spark standalone workers
(`spark run --master cluster`); the checkpoint then lives in spark.shared_dir, which the driver and every
worker see at the same path (executors write the state store, the driver the offset and commit logs).
Progress events (`--json`) and the job's one-line error go to a log per start.

`verify` compares the job's output, read back as a changelog (the newest batch's value per key), with what
the job's own `expected(records, options)` computes from the input topic read back directly: every key
missing from the output, every extra key and every key whose value differs is reported.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterctl.chaos.results import StepFailed
from clusterctl.errors import ClusterctlError, TimeoutError_, UsageError
from clusterctl.spark.standalone import CLUSTER_MASTER
from clusterctl.spec.model import ClusterSpec
from clusterctl.wait import wait_until

SAMPLE_LIMIT = 10  # how many keys of each kind a result names
STOP_GRACE_S = 60.0  # a stopped job finishes its running micro-batch first


@dataclass
class KeyMismatch:
    key: str
    expected: str
    got: str | None


@dataclass
class SparkVerifyResult:
    """A Spark job's output against its input: exact when no key is missing, extra or different."""

    job: str
    input_topic: str
    output_topic: str
    input_records: int
    expected_keys: int
    output_records: int
    output_keys: int
    last_batch: int | None
    missing_count: int
    extra_count: int
    mismatched_count: int
    missing: list[str] = field(default_factory=list)
    extra: list[str] = field(default_factory=list)
    mismatched: list[KeyMismatch] = field(default_factory=list)
    #: output records re-written by a replayed batch (same key, same batch id): a restart was survived
    rewritten: int = 0
    #: input records past the job's last committed batch when verified (0: it had read everything)
    behind: int | None = None
    ok: bool = False

    def summary(self) -> str:
        what = f"{self.expected_keys} keys from {self.input_records} input records"
        batches = "no batch" if self.last_batch is None else f"batches 0..{self.last_batch}"
        replay = f"; {self.rewritten} output records re-written by a replayed batch" if self.rewritten else ""
        if self.ok:
            return f"{self.job}: exact, {what} ({batches}), 0 missing, 0 extra, 0 mismatched{replay}"
        parts = [f"{self.missing_count} missing", f"{self.extra_count} extra", f"{self.mismatched_count} mismatched"]
        shown = [f"missing {', '.join(self.missing)}" if self.missing else ""]
        shown += [", ".join(f"{m.key}: expected {m.expected}, got {m.got}" for m in self.mismatched)]
        shown += [f"extra {', '.join(self.extra)}" if self.extra else ""]
        behind = f"; job behind by {self.behind} records" if self.behind else ""
        detail = "; ".join(s for s in shown if s)
        return f"{self.job}: NOT exact, {what} ({batches}): {', '.join(parts)} ({detail}){behind}{replay}"


def job_connectors(spec: ClusterSpec, steps: list[Any]) -> dict[int, str]:
    """Each spark_job start's connector by step index (the spec's engine picks the default), checked before
    anything runs: Spark's own connector on tansu is refused."""
    starts = [(i, s) for i, s in enumerate(steps) if s.kind == "spark_job" and s.args.action == "start"]
    if not starts:
        return {}
    from clusterctl.spark.runner import choose_connector

    out: dict[int, str] = {}
    for i, s in starts:
        try:
            out[i] = choose_connector(s.args.connector, spec.kafka.engine)
        except UsageError as exc:
            raise UsageError(f"step {s.describe()}: {exc}") from None
    return out


def standalone_containers(spec: ClusterSpec, steps: list[Any]) -> list[str]:
    """The Spark standalone containers a drill's steps use (a cluster master, a Spark worker fault); a spec without
    the standalone cluster is refused before anything runs."""
    uses = [
        s.describe()
        for s in steps
        if (s.kind == "spark_job" and s.args.master == CLUSTER_MASTER)
        or (s.kind == "fault" and s.args.action.endswith("-spark-worker"))
    ]
    if not uses:
        return []
    if not spec.spark.enabled:
        raise UsageError(
            f"step {uses[0]} needs the spec's Spark standalone cluster; cluster {spec.name} has none "
            "(spark.enabled is false)",
            hint="set spark.enabled: true in the spec, then `clusterctl render` and `clusterctl up`",
        )
    from clusterctl.chaos.targets import spark_worker_target

    for s in steps:  # an unknown worker fails here, not halfway through the drill
        if s.kind == "fault" and s.args.action.endswith("-spark-worker"):
            spark_worker_target(spec, s.args.spark_worker)
    services = [spec.topology.spark_master_service]
    services += [spec.topology.spark_worker_service(i) for i in spec.topology.spark_worker_ids]
    return [spec.topology.container_name(s) for s in services]


def compare(expected: dict[str, str], got: dict[str, str | None]) -> tuple[list[str], list[str], list[KeyMismatch]]:
    """Missing keys, extra keys, and keys whose value differs, each sorted by key."""
    missing = sorted(k for k in expected if k not in got)
    extra = sorted(k for k in got if k not in expected)
    mismatched = [KeyMismatch(k, expected[k], got[k]) for k in sorted(expected) if k in got and got[k] != expected[k]]
    return missing, extra, mismatched


@dataclass
class JobRun:
    """One job of the drill: its topics, checkpoint, options and the current driver process (if any)."""

    job: str
    input_topic: str
    output_topic: str
    checkpoint: Path
    options: dict[str, str]
    trigger: float
    master: str
    conf: dict[str, str] = field(default_factory=dict)
    connector: str = "kafka"
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0
    log: Path | None = None
    killed: bool = False  # the current driver was killed by a kill step (not a crash of its own)


class SparkJobs:
    """The Spark jobs of one drill, by job name.

    `spec_path` and `shared_dir` (the spec's spark.shared_dir) are needed only by jobs on the standalone cluster.
    """

    def __init__(
        self, bootstrap: str, work_dir: Path, spec_path: Path | None = None, shared_dir: Path | None = None
    ) -> None:
        self.bootstrap = bootstrap
        self.work_dir = work_dir
        self.spec_path = spec_path
        self.shared_dir = shared_dir
        self.jobs: dict[str, JobRun] = {}

    def _checkpoint(self, job: str, master: str) -> Path:
        """Local mode: in the drill's work directory; on the cluster: a directory of this drill in shared_dir."""
        if master != CLUSTER_MASTER:
            return self.work_dir / "spark" / job / "checkpoint"
        if self.spec_path is None or self.shared_dir is None:
            raise UsageError(
                f"spark_job {job}: master cluster needs the spec's Spark standalone cluster (spark.enabled)",
                hint="set spark.enabled: true in the spec, `clusterctl render` and `clusterctl up`; or a local master",
            )
        return self.shared_dir / f"drill-{self.work_dir.name}-{uuid.uuid4().hex[:6]}" / job / "checkpoint"

    def start(
        self,
        job: str,
        input_topic: str,
        output_topic: str,
        *,
        options: dict[str, str] | None = None,
        trigger: float = 1.0,
        master: str = "local[2]",
        conf: dict[str, str] | None = None,
        connector: str = "kafka",
    ) -> str:
        """Start `job`'s driver; a job started before resumes from its checkpoint (a driver restart)."""
        from clusterctl.spark.runner import load_job

        run = self.jobs.get(job)
        if run is not None and run.process is not None and run.process.poll() is None:
            raise UsageError(f"spark_job: {job} is already running (stop or kill it first)")
        if run is None:
            load_job(job)  # an unknown job fails here, before anything starts
            cp = self._checkpoint(job, master)
            run = JobRun(
                job, input_topic, output_topic, cp, dict(options or {}), trigger, master, dict(conf or {}), connector
            )
            self.jobs[job] = run
        resume = run.checkpoint.is_dir() and any(run.checkpoint.iterdir())
        run.starts += 1
        run.killed = False
        run.log = self.work_dir / "spark" / job / f"driver-{run.starts}.log"
        run.log.parent.mkdir(parents=True, exist_ok=True)
        cmd = [sys.executable, "-m", "clusterctl"]
        cmd += ["--spec", str(self.spec_path.resolve())] if self.spec_path and run.master == CLUSTER_MASTER else []
        cmd += ["spark", "run", job, "--json", "-b", self.bootstrap]
        cmd += ["--master", run.master, "--checkpoint", str(run.checkpoint), "--trigger", f"{run.trigger:g}"]
        cmd += ["--resume"] if resume else []
        cmd += ["--connector", run.connector]
        for k, v in {"input": run.input_topic, "output": run.output_topic, **run.options}.items():
            cmd += ["-o", f"{k}={v}"]
        for k, v in run.conf.items():
            cmd += ["--conf", f"{k}={v}"]
        with run.log.open("wb") as log:
            # its own process group: a kill takes the driver's JVM with it
            run.process = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, start_new_session=True
            )
        how = "resumed from its checkpoint" if resume else "started"
        where = f"{run.master}, {run.connector} connector, pid {run.process.pid}"
        return f"{job} {how} ({where}): {run.input_topic} -> {run.output_topic}"

    def _run(self, job: str) -> JobRun:
        run = self.jobs.get(job)
        if run is None:
            raise UsageError(f"spark job {job} was not started in this drill (add a spark_job step before)")
        return run

    def stop(self, job: str, *, kill: bool = False, timeout: float = STOP_GRACE_S) -> str:
        """Stop the driver: Ctrl-C (it finishes its running micro-batch), or with `kill` SIGKILL at once."""
        run = self._run(job)
        proc = run.process
        if proc is None or proc.poll() is not None:
            if run.killed or proc is None:
                return f"{job} was not running"
            raise StepFailed(f"spark job {job} had stopped by itself: {self.failure(job) or f'exit {proc.returncode}'}")
        if kill:
            run.killed = True
            _signal_group(proc, signal.SIGKILL)
            proc.wait(timeout=30)
            return f"{job}: driver killed (SIGKILL, pid {proc.pid})"
        proc.send_signal(signal.SIGINT)  # the driver only: PySpark's JVM ignores SIGINT and follows its driver
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGKILL)
            proc.wait(timeout=30)
            return f"{job}: did not stop within {timeout:g}s, killed"
        # a driver stopped while its JVM was still starting leaves the JVM behind: nothing of the group may stay
        _signal_group(proc, signal.SIGKILL)
        return f"{job}: stopped (exit {proc.returncode})"

    def close(self) -> None:
        """Stop every job still running (the drill's cleanup)."""
        for job, run in self.jobs.items():
            if run.process is not None and run.process.poll() is None:
                self.stop(job, timeout=15)

    def failure(self, job: str) -> str | None:
        """The error line of a driver that exited on its own, if any."""
        run = self._run(job)
        if run.log is None or not run.log.is_file():
            return None
        for line in reversed(run.log.read_text(errors="replace").splitlines()):
            if line.startswith("error: "):
                return line.removeprefix("error: ")
            if line.startswith('{"error"'):
                with contextlib.suppress(ValueError):
                    return str(json.loads(line)["error"])
        return None

    def behind(self, job: str) -> int:
        """Input records past the end offsets of the job's last committed batch."""
        from clusterctl.kafka.connection import check_topic, log_end_offsets
        from clusterctl.spark.checkpoint import last_committed

        run = self._run(job)
        parts = check_topic(self.bootstrap, run.input_topic)
        ends = log_end_offsets(self.bootstrap, [(run.input_topic, p) for p in range(parts)])
        last = last_committed(run.checkpoint)
        done = last[1].get(run.input_topic, {}) if last else {}
        return sum(max(0, end - done.get(str(p), 0)) for (_t, p), end in ends.items())

    def wait_caught_up(self, job: str, timeout: float) -> None:
        """Until the job's last committed batch ends at the input topic's end offsets (it must be running)."""
        run = self._run(job)

        def caught_up() -> int:
            if run.process is None or run.process.poll() is not None:
                why = self.failure(job) or f"exit {run.process.returncode if run.process else '-'}"
                raise ClusterctlError(f"spark job {job} is not running ({why})")
            return self.behind(job)

        wait_until(
            caught_up,
            timeout=timeout,
            what=f"spark job {job} to commit a batch ending at {run.input_topic}'s end offsets",
            interval=0.5,
            done=lambda n: n == 0,
            seen=lambda n: f"{n} input records past its last committed batch",
        )

    def verify(self, job: str, timeout: float = 180.0) -> SparkVerifyResult:
        """The job's output (newest batch per key) against its expected results over the whole input.

        A running job is first given `timeout` to catch up with the input; one that does not (or is stopped
        early) is still compared, and what it has not read shows as missing or different keys.
        """
        from clusterctl.spark.changelog import compact, read_topic
        from clusterctl.spark.runner import load_job

        run = self._run(job)
        if run.process is not None and run.process.poll() is None:
            with contextlib.suppress(TimeoutError_):
                self.wait_caught_up(job, timeout)
        module = load_job(job)
        if not hasattr(module, "expected"):
            raise UsageError(f"spark job {job} has no expected(records, options): its output cannot be verified")
        inputs = read_topic(self.bootstrap, run.input_topic, timeout)
        expected = module.expected([(r.key, r.value) for r in inputs], {**module.OPTIONS, **run.options})
        out = compact(read_topic(self.bootstrap, run.output_topic, timeout))
        missing, extra, mismatched = compare(expected, out.values)
        behind = self.behind(job)
        return SparkVerifyResult(
            job=job,
            input_topic=run.input_topic,
            output_topic=run.output_topic,
            input_records=len(inputs),
            expected_keys=len(expected),
            output_records=out.records,
            output_keys=len(out.values),
            last_batch=out.last_batch,
            missing_count=len(missing),
            extra_count=len(extra),
            mismatched_count=len(mismatched),
            missing=missing[:SAMPLE_LIMIT],
            extra=extra[:SAMPLE_LIMIT],
            mismatched=mismatched[:SAMPLE_LIMIT],
            rewritten=out.rewritten,
            behind=behind,
            ok=not (missing or extra or mismatched),
        )


def _signal_group(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    """Signal the process group this module started the driver in (its pid is the group id)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)
