"""Runs a drill scenario (scenario.py's models) against the spec's cluster with an observer attached.

`Runner.run()` always returns a ScenarioResult: the steps run in order until one fails, then the load is
stopped and every fault healed (also on failure). A scenario that expects loss (a negative control)
passes only when the verifier finds acknowledged writes lost, and the result names the settings that
allowed it. conditions.py evaluates `wait_for`/`assert`; report.py writes the JSON and HTML; stats.py repeats a
scenario and summarizes the runs.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from clusterctl import signals
from clusterctl.chaos.conditions import Conditions
from clusterctl.chaos.group_run import GroupSteps
from clusterctl.chaos.migrate_run import MigrateSteps
from clusterctl.chaos.node_run import NodeSteps
from clusterctl.chaos.quorum_run import QuorumSteps
from clusterctl.chaos.results import ScenarioResult, StepFailed, StepResult, verdict_of
from clusterctl.chaos.scenario import (
    Condition,
    CreateTopic,
    Elect,
    Empty,
    Heal,
    Scenario,
    StartLoad,
    Step,
    WaitFor,
)
from clusterctl.chaos.spark_steps import SparkJob, VerifySpark
from clusterctl.chaos.verify_run import VerifySteps
from clusterctl.errors import ClusterctlError, FaultNotAppliedError, UsageError, VerificationError
from clusterctl.spec.model import ClusterSpec

# a timed fault still applying when the run ends may retry a busy container's freeze for a while (each of its pauses up
# to runtime.docker.FREEZE_TIMEOUT_S) before it sees the stop and heals itself
BACKGROUND_JOIN_S = 60.0


class Runner(GroupSteps, NodeSteps, QuorumSteps, MigrateSteps, VerifySteps):
    """Runs one scenario against the spec's cluster with an observer attached."""

    def __init__(
        self,
        spec: ClusterSpec,
        scenario: Scenario,
        bootstrap: str | None = None,
        work_dir: Path | None = None,
        progress: Callable[[str], None] | None = None,
        file: str | None = None,
        spec_path: Path | None = None,
    ) -> None:
        self.spec = spec
        self.spec_path = spec_path  # the migrate step runs `clusterctl migrate` on it
        self.sc = scenario
        self.file = file
        self.bootstrap = bootstrap or spec.topology.bootstrap_servers
        self.run_id = uuid.uuid4().hex[:6]
        self.topic = scenario.topic.name or f"drill-{scenario.name}-{self.run_id}"
        self.work_dir = work_dir or Path("reports") / f"{scenario.name}-{self.run_id}"
        self.progress = progress or (lambda _m: None)
        self.load: Any = None
        self.created_partitions: int | None = None
        self.observer: Any = None
        self.background: list[tuple[threading.Thread, threading.Event]] = []
        self.detached: list[Any] = []
        self.verify_result: Any = None
        self.spark_jobs: Any = None  # pipeline.SparkJobs, once a spark_job step ran
        self.spark_verify: Any = None
        self.load_summary: Any = None
        self.paused: set[int] = set()  # brokers this run paused: metadata requests avoid them
        self.freeze_retries = 0
        self.snapshots: dict[str, Any] = {}
        self.features_before: dict[str, int | None] = {}  # feature levels the run changed, restored after it
        self.cond = Conditions(spec, self.bootstrap, self.topic, self._live_bootstrap)
        self.probe, self.metadata_writes, self.quorum_changes, self.leader_wiped = None, None, [], False
        self.stopped: set[int] = self.cond.stopped  # brokers on a host a kill_node step stopped

    # -- checks before anything is touched
    def preflight(self) -> None:
        from clusterctl.chaos.scenario_checks import check_against_spec

        self._check_deploy()
        mode = self.spec.kafka.mode
        if self.sc.mode not in ("any", mode):
            raise UsageError(
                f"scenario {self.sc.name} is for kafka.mode={self.sc.mode}; cluster {self.spec.name} runs {mode}"
            )
        check_against_spec(self.sc, self.spec)
        if self.sc.requires == "zookeeper" and self.spec.kraft_mode:
            raise UsageError(
                f"scenario {self.sc.name} drills ZooKeeper; cluster {self.spec.name} runs KRaft (no ZooKeeper)"
            )
        if self.sc.requires == "kafka" and self.spec.kafka.engine != "kafka":
            raise UsageError(
                f"scenario {self.sc.name} needs replication (real Apache Kafka); cluster {self.spec.name} runs "
                f"kafka.engine={self.spec.kafka.engine}",
                hint="run the scenarios with requires: zookeeper or any here, or a spec with engine kafka",
            )
        if self.sc.requires != "zookeeper" and self.sc.topic.replication_factor > len(self.spec.topology.broker_ids):
            raise UsageError(
                f"scenario {self.sc.name} wants RF {self.sc.topic.replication_factor} but the spec has "
                f"{len(self.spec.topology.broker_ids)} brokers"
            )
        for i, line in enumerate(self._migration_preflight(self.sc.parsed_steps()), 1):
            self.progress(f"migrate step {i} will run: {line}")
        for line in self._upgrade_preflight(self.sc.parsed_steps()):
            self.progress(f"upgrade {line}")
        self._group_preflight(self.sc.parsed_steps())
        fills = [s for s in self.sc.parsed_steps() if getattr(s.args, "action", None) == "fill-disk"]
        if fills and self.spec.storage.bounded_mb is None:
            raise UsageError(
                f"scenario {self.sc.name} fills a log dir; cluster {self.spec.name} keeps its data on the host's disk",
                hint="set storage.bounded_mb in the spec, then `clusterctl down` and `clusterctl up`",
            )
        if self.spec.swarm:
            self._swarm_preflight()
            return
        from clusterctl.chaos.pipeline import job_connectors, standalone_containers
        from clusterctl.runtime.docker import find_container

        job_connectors(self.spec, self.sc.parsed_steps())
        missing = [
            n
            for n in [self.spec.topology.zk_container(i) for i in self.spec.topology.zk_ids]
            + [self.spec.topology.controller_container(i) for i in self.spec.topology.dedicated_controller_ids]
            + [self.spec.topology.broker_container(i) for i in self.spec.topology.broker_ids]
            + standalone_containers(self.spec, self.sc.parsed_steps())
            if find_container(n) is None
        ]
        if missing:
            raise ClusterctlError(
                f"cluster {self.spec.name} is not up ({', '.join(missing)} missing)", hint="clusterctl up"
            )
        self._refuse_left_faults()
        self._require_named_topics()

    def _require_named_topics(self) -> None:
        """A topic a step names (not one the run creates) must exist now, not be found missing mid-drill."""
        from clusterctl.chaos.scenario_checks import named_topics
        from clusterctl.kafka.admin import list_topics

        named = named_topics(self.sc)
        if not named:
            return
        have = {t.name for t in list_topics(self.bootstrap, include_internal=True)}
        missing = [(i, t) for i, t in named if t not in have]
        if missing:
            i, t = missing[0]
            raise UsageError(f"scenario {self.sc.name}: step {i} names topic {t!r}, which does not exist")

    def _refuse_left_faults(self) -> None:
        """A pause or cut a killed run left applied (runtime.fault_records) would falsify this drill: refused."""
        from clusterctl.runtime.fault_records import still_applied

        left = still_applied(self.spec)
        if left:
            raise ClusterctlError(
                f"fault left applied: {left[0].line()}" + (f" (and {len(left) - 1} more)" if len(left) > 1 else ""),
                hint="`clusterctl chaos heal` undoes it",
            )

    def run(self) -> ScenarioResult:
        from clusterctl.chaos.analysis import analyze, phase_metrics
        from clusterctl.chaos.observer import Observer

        self.preflight()
        steps = self.sc.parsed_steps()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        poll_md = self.sc.requires == "kafka" or any(s.kind in ("create_topic", "start_load") for s in steps)
        self.observer = Observer(self.spec, self.bootstrap if poll_md else None, [self.topic],
                                 live_path=self.work_dir / "events.jsonl", watch_elr=poll_md).start()  # fmt: skip
        from clusterctl.chaos.scenario_checks import fault_refs

        self.cond.fault_refs = fault_refs(steps)
        started = time.time()
        results: list[StepResult] = []
        error: str | None = None
        interrupted = not_applied = False
        i = 0
        try:
            self._set_features()
            for i, step in enumerate(steps, 1):
                desc = step.describe()
                self.cond.step = i
                self.progress(f"step {i}/{len(steps)}: {desc}")
                self.observer.event("step", "step", f"step {i}", desc)
                t0 = time.time()
                try:
                    detail = self._run_step(step) or ""
                except ClusterctlError as exc:
                    results.append(StepResult(i, step.kind, desc, False, t0, round(time.time() - t0, 3), str(exc)))
                    not_applied = isinstance(exc, FaultNotAppliedError)
                    error = f"step {i} ({desc}) {'fault not applied' if not_applied else 'failed'}: {exc}"
                    break
                except KeyboardInterrupt:  # cleanup below still runs; the report says where it stopped
                    results.append(StepResult(i, step.kind, desc, False, t0, round(time.time() - t0, 3), "interrupted"))
                    error, interrupted = f"interrupted during step {i} ({desc})", True
                    break
                results.append(StepResult(i, step.kind, desc, True, t0, round(time.time() - t0, 3), detail))
        except KeyboardInterrupt:  # between two steps: the same as during one
            error, interrupted = (f"interrupted after step {i}" if i else "interrupted before step 1"), True
        finally:
            # a second stop signal must not cut the healing short: held until the run's result exists, then noted
            with signals.held(catch_late=True) as late:
                cleanup = self._cleanup()
                timeline = self.observer.stop(self.load_summary.intervals if self.load_summary else None)
        if late and not interrupted and error is None:
            error, interrupted = "interrupted while cleaning up after the last step", True
        if cleanup and (error is None or interrupted or not_applied):
            error = cleanup if error is None else f"{error}; {cleanup}"
        ok = error is None and (self.verify_result is None or self._verdict_ok(self.verify_result))
        ok = ok and (self.spark_verify is None or bool(self.spark_verify.ok))
        if error is None and not ok:
            error = f"verification failed: {self.verify_result.summary()}"
        acks = self._ack_times()
        faults = analyze(timeline, acks)
        elected, safety = self._election_rules(timeline, faults)
        return ScenarioResult(
            scenario=self.sc.name,
            file=self.file,
            cluster=self.spec.name,
            topic=self.topic if any(s.kind == "create_topic" for s in steps) else None,
            ok=ok,
            started=started,
            ended=time.time(),
            steps=results,
            faults=faults,
            phases=phase_metrics(timeline, acks),
            snapshots=list(self.snapshots.values()),
            verify=self.verify_result,
            load=self.load_summary,
            error=error,
            ledger=self.load.ledger_path if self.load else None,
            expect=self.sc.expect,
            loss_settings=self.sc.loss_settings(),
            bounds=failover_bounds(self.spec) | self._feature_bounds(),
            elections=elected,
            safety=safety,
            timeline=timeline,
            interrupted=interrupted,
            fault_not_applied=not_applied,
            freeze_retries=self.freeze_retries,
            verdict=verdict_of(ok, interrupted, not_applied),
            spark=self.spark_verify,
            pipeline=self._pipeline(timeline, faults, acks),
            group=self._group_report(timeline, faults),
            metadata_writes=self.metadata_writes,
            quorum_changes=self.quorum_changes,
        )

    def _pipeline(self, timeline: Any, faults: list[Any], acks: Any) -> Any:
        """The Spark jobs' own timeline (their drivers' progress events, the ledger's acks), when the drill ran any."""
        from clusterctl.chaos.pipeline_timeline import pipeline_timeline

        if self.spark_jobs is None:
            return None
        inputs = {job: run.input_topic for job, run in self.spark_jobs.jobs.items()}
        return pipeline_timeline(self.work_dir, sorted(inputs), timeline, faults, acks, inputs)

    def _ack_times(self) -> dict[tuple[str, int], list[float]] | None:
        from clusterctl.chaos.ledger import read_ledger

        if self.load is None:
            return None
        try:
            return read_ledger(self.load.ledger_path).ack_times()
        except ClusterctlError:  # an unreadable ledger fails the verify step; the gaps are just not known
            return None

    def _cleanup(self) -> str | None:
        """Always: stop timed faults (they heal themselves), stop the load, heal everything."""
        from clusterctl.chaos import recovery

        problems = []
        if self.spark_jobs is not None:
            self.spark_jobs.close()
        for thread, stop in self.background:
            stop.set()
            thread.join(timeout=BACKGROUND_JOIN_S)
        if self.load is not None and self.load_summary is None:
            try:
                self.load_summary = self.load.stop()
            except ClusterctlError as exc:
                problems.append(str(exc))
        problems += [p for p in [self._close_group()] if p]
        self._stop_probe()
        try:
            healed = recovery.heal_all(self.spec, self.detached)
            for r in healed:
                self.observer.mark(r.action, r.target, heal=True, note=r.note, t=r.started)
                self.progress(f"healed: {r.action} {r.target}")
            self.paused.clear()
            self.stopped.clear()
            if healed:
                recovery.wait_healed(self.spec, timeout=180.0, on_progress=self.progress)
        except ClusterctlError as exc:
            problems.append(f"heal failed: {exc}")
        self.detached = []
        problems.append(self._restore_features() or "")
        return "; ".join(p for p in problems if p) or None

    # -- steps
    def _run_step(self, step: Step) -> str | None:
        a = step.args
        if step.kind == "sleep":
            time.sleep(a)
            return None
        handler = getattr(self, f"_step_{step.kind}")
        return handler(a)

    def _step_create_topic(self, a: CreateTopic) -> str:
        from clusterctl.kafka.admin import create_topic

        t = self.sc.topic
        # returns once every broker serves the topic with a leader for every partition
        create_topic(self.bootstrap, self.topic, t.partitions, t.replication_factor, t.configs(), if_not_exists=True,
                     replica_assignment=t.replica_assignment)  # fmt: skip
        # the load is told the partition count: a broker that (re)joined a moment ago may not list the new topic yet
        self.created_partitions = t.partitions
        self.observer.add_topic(self.topic)
        self.cond.wait(self.cond.all_led, 60, f"leaders for every partition of {self.topic}")
        configs = " ".join(f"{k}={v}" for k, v in t.configs().items())
        return f"{self.topic}: {t.partitions} partitions, RF {t.replication_factor}" + (
            f", {configs}" if configs else ""
        )

    def _step_start_load(self, a: StartLoad) -> str:
        from clusterctl.chaos.load import DrillLoad

        if self.load is not None:
            raise UsageError("start_load: the load is already running")
        self.load = DrillLoad(
            self.bootstrap,
            self.topic,
            self.work_dir / "ledger.jsonl",
            rate=a.rate,
            value_size=a.value_size,
            partitions=self.created_partitions,
            acks=a.acks,
            idempotence=a.idempotent,
            linger_ms=a.linger_ms,
        )
        observer = self.observer
        if observer is not None:  # acked/s on the console's live dashboard, as the load goes
            topic = self.topic
            self.load.on_interval = lambda iv: observer.live(
                "load", "interval", topic, f"{iv.acked} acked", {"t": iv.t, "acked": iv.acked, "errors": iv.errors}
            )
        self.load.start()
        idem = "idempotent" if a.idempotent else "not idempotent"
        return f"{a.rate:g} records/s, acks={a.acks}, {idem}, ledger {self.work_dir / 'ledger.jsonl'}"

    def _step_stop_load(self, _a: Empty) -> str:
        if self.load is None:
            raise UsageError("stop_load: no load is running")
        self.load_summary = self.load.stop()
        s = self.load_summary
        fatal = f"; producer stopped: {s.fatal[:200]}" if s.fatal else ""
        return f"sent {s.sent}, acked {s.acked}, failed {s.failed} {s.errors or ''}".strip() + fatal

    def _step_heal(self, a: Heal) -> str:
        from clusterctl.chaos import recovery

        for thread, stop in self.background:
            stop.set()
            thread.join(timeout=BACKGROUND_JOIN_S)
        self.background = []
        res = recovery.heal_all(self.spec, self.detached)
        self.detached = []
        self.paused.clear()
        self.stopped.clear()
        for r in res:
            self.observer.mark(r.action, r.target, heal=True, note=r.note, t=r.started)
        # a freed disk says what was freed and restarted: the recovery steps the report shows
        done = ", ".join(f"{r.action} {r.target}" + (f" ({r.note})" if r.action == "free-disk" else "") for r in res)
        done = done or "nothing to heal"
        if not a.wait:
            return done
        w = recovery.wait_healed(self.spec, a.timeout, on_progress=self.progress)
        return f"{done}; brokers {','.join(map(str, w.brokers))} registered and in metadata after {w.seconds:.1f}s"

    def _step_elect(self, e: Elect) -> str:
        from clusterctl.kafka.elections import elect_leaders

        parts = None if e.all else [(e.topic or self.topic, p.partition) for p in self.cond.partitions()]
        if e.partition is not None:
            parts = [(e.topic or self.topic, e.partition)]
        t = time.time()
        res = elect_leaders(self.bootstrap, e.type, parts)
        self.observer.mark(f"elect-{e.type}", e.topic or self.topic, heal=True, t=t)
        bad = [r for r in res if not r.ok]
        if bad:
            raise StepFailed(f"{e.type} election failed for {bad[0].topic}-{bad[0].partition}: {bad[0].error}")
        return f"{e.type} election on {len(res)} partitions"

    def _step_spark_job(self, a: SparkJob) -> str:
        from clusterctl.chaos.pipeline import SparkJobs
        from clusterctl.kafka.admin import create_topic
        from clusterctl.spark.runner import choose_connector

        if self.spark_jobs is None:
            spark = self.spec.spark.enabled
            shared = Path(self.spec.topology.spark_shared_dir) if spark else None
            self.spark_jobs = SparkJobs(self.bootstrap, self.work_dir, self.spec_path if spark else None, shared)
            self.cond.spark_committed = self._spark_committed
        if a.action == "kill" and self.observer is not None:  # a fault: the pipeline's stall is measured from it
            self.observer.mark("kill-driver", f"spark {a.job}", heal=False)
        if a.action != "start":
            return str(self.spark_jobs.stop(a.job, kill=a.action == "kill", timeout=a.timeout))
        if a.job in self.spark_jobs.jobs and self.observer is not None:
            self.observer.mark("restart-driver", f"spark {a.job}", heal=True)
        output = a.output or f"{self.topic}-{a.job.replace('_', '-')}"
        t = self.sc.topic
        create_topic(self.bootstrap, output, t.partitions, t.replication_factor, t.configs(), if_not_exists=True)
        started = self.spark_jobs.start(
            a.job,
            self.topic,
            output,
            options=a.options,
            trigger=a.trigger,
            master=a.master,
            conf=a.conf,
            connector=choose_connector(a.connector, self.spec.kafka.engine),
        )
        return str(started)

    def _spark_committed(self, job: str) -> int | None:
        """The last committed micro-batch of a running job (a driver that died fails the wait at once)."""
        from clusterctl.spark.checkpoint import last_committed

        run = self.spark_jobs.jobs.get(job)
        if run is None:
            raise UsageError(f"spark_committed: no spark_job step started {job} before it")
        if run.process is None or run.process.poll() is not None:
            raise StepFailed(f"spark job {job} is not running ({self.spark_jobs.failure(job) or 'stopped'})")
        last = last_committed(run.checkpoint)
        return None if last is None else int(last[0])

    def _step_verify_spark(self, v: VerifySpark) -> str:
        if self.spark_jobs is None:
            raise UsageError("verify_spark: no spark_job step ran in this scenario")
        self.spark_verify = self.spark_jobs.verify(v.job, v.timeout)
        if not self.spark_verify.ok:
            raise VerificationError(f"Spark results not exact: {self.spark_verify.summary()}")
        return str(self.spark_verify.summary())

    def _step_wait_for(self, w: WaitFor) -> str:
        waited = self.cond.wait(lambda: self.cond.check(w), w.timeout, f"{w.name}")
        return waited

    def _step_assert(self, c: Condition) -> str:
        got = self.cond.check(c)
        if not got:
            raise StepFailed(f"assertion {c.name} does not hold: {self.cond.last_seen}")
        return got


def failover_bounds(spec: ClusterSpec) -> dict[str, str]:
    """The broker settings that bound failover times on this cluster, with their values."""
    from clusterctl.chaos.bounds import settings_of

    return {k: str(v) for k, v in settings_of(spec).items()}
