"""Drill scenarios: YAML step files, validated with pydantic, run against the spec's cluster.

A scenario file:

    name: kill-leader
    description: SIGKILL the leader of partition 0 under load; leadership moves, nothing acked is lost
    requires: kafka            # kafka: needs replication (real Apache Kafka); zookeeper: ZK side only;
                               # any: any Kafka-protocol broker, one without replication (tansu) too
    topic: {partitions: 3, replication_factor: 3, min_insync_replicas: 2}
    steps:
      - create_topic: {}
      - start_load: {rate: 500}
      - sleep: 3
      - fault: {action: kill-leader, partition: 0}
      - wait_for: {leader_changed: {partition: 0}, timeout: 60}
      - heal: {}
      - wait_for: {isr_full: {}, timeout: 120}
      - stop_load: {}
      - verify: {}

Each step is a one-key mapping. Conditions (for `wait_for` and `assert`): isr_size {topic, partition,
equals}, isr_full {topic}, leader {topic, partition, equals | not_equals}, preferred_leaders {topic},
leader_changed {topic, partition}, zk_quorum: lost | ok | healthy (all serving),
zk_mode {id, mode}, broker_registered {id, registered}. `topic`
defaults to the scenario's topic (a fresh name per run unless `topic.name` is set).

The runner observes the whole run (observer.py), always stops the load and heals every fault at the
end (also on failure or Ctrl-C), and returns a ScenarioResult; report.py writes JSON and HTML.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from clusterctl.errors import ClusterctlError, SpecError, TimeoutError_, UsageError, VerificationError
from clusterctl.spec import ClusterSpec

SCENARIO_DIR = Path(__file__).resolve().parent.parent.parent / "scenarios"

FaultAction = Literal[
    "kill-broker",
    "stop-broker",
    "start-broker",
    "restart-broker",
    "pause-broker",
    "kill-leader",
    "partition-node",
    "kill-zk",
    "stop-zk",
    "start-zk",
    "rolling-restart",
]


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TopicSpec(_M):
    name: str | None = Field(default=None, description="default: drill-<scenario>-<run id>")
    partitions: int = Field(default=3, ge=1)
    replication_factor: int = Field(default=3, ge=1)
    min_insync_replicas: int = Field(default=2, ge=1)


class PartitionRef(_M):
    topic: str | None = None
    partition: int = Field(default=0, ge=0)


class IsrSize(PartitionRef):
    equals: int = Field(ge=0)


class LeaderIs(PartitionRef):
    equals: int | None = None
    not_equals: int | None = None


class TopicRef(_M):
    topic: str | None = None


class ZkModeIs(_M):
    id: int
    mode: str


class BrokerRegistered(_M):
    id: int
    registered: bool = True


class Condition(_M):
    """Exactly one condition."""

    isr_size: IsrSize | None = None
    isr_full: TopicRef | None = None
    preferred_leaders: TopicRef | None = None
    leader: LeaderIs | None = None
    leader_changed: PartitionRef | None = None
    zk_quorum: Literal["lost", "ok", "healthy"] | None = None
    zk_mode: ZkModeIs | None = None
    broker_registered: BrokerRegistered | None = None

    @model_validator(mode="after")
    def _one(self) -> Condition:
        given = [k for k in Condition.model_fields if getattr(self, k) is not None]
        if len(given) != 1:
            names = ", ".join(Condition.model_fields)
            raise ValueError(f"give exactly one condition of {names} (got {len(given)})")
        return self

    @property
    def name(self) -> str:
        return next(k for k in Condition.model_fields if getattr(self, k) is not None)


class WaitFor(Condition):
    timeout: float = Field(default=60.0, gt=0)


class CreateTopic(_M):
    if_not_exists: bool = False


class StartLoad(_M):
    rate: float = Field(default=500.0, ge=0, description="records/s (0 = as fast as possible)")
    value_size: int = Field(default=64, ge=8)


class Empty(_M):
    pass


class Fault(_M):
    action: FaultAction
    broker: int | None = None
    zk: int | None = None
    node: str | None = None
    topic: str | None = None
    partition: int = 0
    for_: float | None = Field(default=None, alias="for", gt=0, description="pause/partition: heal after S seconds")
    timeout: float = Field(default=300.0, gt=0, description="rolling-restart: per-broker ISR wait")

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="after")
    def _targets(self) -> Fault:
        a = self.action
        if a.endswith("-broker") and self.broker is None:
            raise ValueError(f"{a} needs broker: <id>")
        if a.endswith("-zk") and self.zk is None:
            raise ValueError(f"{a} needs zk: <id>")
        if a == "partition-node" and self.node is None:
            raise ValueError("partition-node needs node: <service, e.g. kafka2 or zk1>")
        return self


class Elect(_M):
    type: Literal["preferred", "unclean"] = "preferred"
    topic: str | None = None
    partition: int | None = None
    all: bool = False


class Verify(_M):
    timeout: float = Field(default=120.0, gt=0)


STEP_MODELS: dict[str, type[BaseModel] | None] = {
    "create_topic": CreateTopic,
    "start_load": StartLoad,
    "stop_load": Empty,
    "fault": Fault,
    "heal": Empty,
    "wait_for": WaitFor,
    "assert": Condition,
    "elect": Elect,
    "verify": Verify,
    "sleep": None,  # a number of seconds
}


@dataclass
class Step:
    kind: str
    args: Any  # the validated model, or seconds for sleep

    def describe(self) -> str:
        if self.kind == "sleep":
            return f"sleep {self.args}s"
        if isinstance(self.args, BaseModel):
            fields = self.args.model_dump(exclude_none=True, exclude_defaults=True, by_alias=True)
            if isinstance(self.args, Condition):
                cond = self.args.name
                timeout = getattr(self.args, "timeout", None)
                extra = f" within {timeout:.0f}s" if timeout else ""
                return f"{self.kind} {cond} {fields[cond]}{extra}"
            return f"{self.kind} " + " ".join(f"{k}={v}" for k, v in fields.items() if v not in (None, False, {}))
        return self.kind


class Scenario(_M):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,60}$")
    description: str = ""
    requires: Literal["kafka", "zookeeper", "any"] = "kafka"
    topic: TopicSpec = TopicSpec()
    steps: list[dict[str, Any]] = Field(min_length=1)

    def parsed_steps(self) -> list[Step]:
        return [_parse_step(i, raw) for i, raw in enumerate(self.steps, 1)]


def _parse_step(index: int, raw: Any) -> Step:
    if not isinstance(raw, dict) or len(raw) != 1:
        raise ValueError(f"step {index} must be a one-key mapping like `sleep: 3` (one of {', '.join(STEP_MODELS)})")
    kind, value = next(iter(raw.items()))
    if kind not in STEP_MODELS:
        raise ValueError(f"step {index}: unknown step {kind!r} (one of {', '.join(STEP_MODELS)})")
    model = STEP_MODELS[kind]
    if model is None:
        if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
            raise ValueError(f"step {index} (sleep): expected seconds >= 0, got {value!r}")
        return Step(kind, float(value))
    try:
        return Step(kind, model.model_validate(value or {}))
    except ValidationError as exc:
        raise ValueError(f"step {index} ({kind}): {_first_error(exc)}") from None


def _first_error(exc: ValidationError) -> str:
    e = exc.errors()[0]
    loc = ".".join(str(x) for x in e["loc"])
    msg = str(e["msg"]).removeprefix("Value error, ")
    return f"{loc}: {msg}" if loc else msg


def parse_scenario(text: str, source: str = "<scenario>") -> Scenario:
    """Validate a scenario document; any problem is one SpecError line naming the file."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise SpecError(f"{source}:{where} is not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if not isinstance(data, dict):
        raise SpecError(f"{source}: a scenario is a mapping with name, steps, ...")
    try:
        sc = Scenario.model_validate(data)
        sc.parsed_steps()
    except ValidationError as exc:
        raise SpecError(f"{source}: {_first_error(exc)}") from None
    except ValueError as exc:
        raise SpecError(f"{source}: {exc}") from None
    return sc


def load_scenario(path: str | Path) -> Scenario:
    """A scenario by file path, or by name from the shipped scenarios/ directory."""
    p = Path(path)
    if not p.is_file() and not p.suffix:
        p = SCENARIO_DIR / f"{path}.yaml"
    if not p.is_file():
        raise SpecError(f"scenario {path} not found", hint="clusterctl scenario list")
    return parse_scenario(p.read_text(encoding="utf-8"), str(p))


@dataclass
class ScenarioInfo:
    name: str
    requires: str
    steps: int
    file: str
    description: str


def list_scenarios(directory: Path = SCENARIO_DIR) -> list[ScenarioInfo]:
    out = []
    for p in sorted(directory.glob("*.yaml")):
        sc = load_scenario(p)
        out.append(ScenarioInfo(sc.name, sc.requires, len(sc.steps), str(p), sc.description))
    return out


# ---------------------------------------------------------------- running


@dataclass
class StepResult:
    index: int
    kind: str
    description: str
    ok: bool
    started: float
    took_s: float
    detail: str = ""


@dataclass
class ScenarioResult:
    scenario: str
    file: str | None
    cluster: str
    topic: str | None
    ok: bool
    started: float
    ended: float
    steps: list[StepResult]
    faults: list[Any] = field(default_factory=list)  # observer.FaultMetrics
    verify: Any = None  # ledger.VerifyResult
    load: Any = None  # load.LoadSummary
    error: str | None = None
    report_html: str | None = None
    report_json: str | None = None
    ledger: str | None = None
    timeline: Any = None  # observer.Timeline (written to the JSON report, not printed)


class StepFailed(ClusterctlError):
    exit_code = 6


class Runner:
    """Runs one scenario against the spec's cluster with an observer attached."""

    def __init__(
        self,
        spec: ClusterSpec,
        scenario: Scenario,
        bootstrap: str | None = None,
        work_dir: Path | None = None,
        progress: Callable[[str], None] | None = None,
        file: str | None = None,
    ) -> None:
        self.spec = spec
        self.sc = scenario
        self.file = file
        self.bootstrap = bootstrap or spec.bootstrap_servers
        self.run_id = uuid.uuid4().hex[:6]
        self.topic = scenario.topic.name or f"drill-{scenario.name}-{self.run_id}"
        self.work_dir = work_dir or Path("reports") / f"{scenario.name}-{self.run_id}"
        self.progress = progress or (lambda _m: None)
        self.load: Any = None
        self.observer: Any = None
        self.leaders_at_fault: dict[tuple[str, int], int] = {}
        self.background: list[tuple[threading.Thread, threading.Event]] = []
        self.detached: list[Any] = []
        self.verify_result: Any = None
        self.load_summary: Any = None

    # -- checks before anything is touched
    def preflight(self) -> None:
        if self.sc.requires == "kafka" and self.spec.kafka.engine != "kafka":
            raise UsageError(
                f"scenario {self.sc.name} needs replication (real Apache Kafka); cluster {self.spec.name} runs "
                f"kafka.engine={self.spec.kafka.engine}",
                hint="run the scenarios with requires: zookeeper or any here, or a spec with engine kafka",
            )
        if self.sc.requires != "zookeeper" and self.sc.topic.replication_factor > len(self.spec.broker_ids):
            raise UsageError(
                f"scenario {self.sc.name} wants RF {self.sc.topic.replication_factor} but the spec has "
                f"{len(self.spec.broker_ids)} brokers"
            )
        from clusterctl.runtime.docker import find_container

        missing = [
            n
            for n in [self.spec.zk_container(i) for i in self.spec.zk_ids]
            + [self.spec.broker_container(i) for i in self.spec.broker_ids]
            if find_container(n) is None
        ]
        if missing:
            raise ClusterctlError(
                f"cluster {self.spec.name} is not up ({', '.join(missing)} missing)", hint="clusterctl up"
            )

    def run(self) -> ScenarioResult:
        from clusterctl.chaos.observer import Observer, analyze

        self.preflight()
        steps = self.sc.parsed_steps()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        poll_md = self.sc.requires == "kafka" or any(s.kind in ("create_topic", "start_load") for s in steps)
        self.observer = Observer(
            self.spec, self.bootstrap if poll_md else None, [self.topic], live_path=self.work_dir / "events.jsonl"
        ).start()
        started = time.time()
        results: list[StepResult] = []
        error: str | None = None
        try:
            for i, step in enumerate(steps, 1):
                desc = step.describe()
                self.progress(f"step {i}/{len(steps)}: {desc}")
                self.observer.event("step", "step", f"step {i}", desc)
                t0 = time.time()
                try:
                    detail = self._run_step(step) or ""
                except ClusterctlError as exc:
                    results.append(StepResult(i, step.kind, desc, False, t0, round(time.time() - t0, 3), str(exc)))
                    error = f"step {i} ({desc}) failed: {exc}"
                    break
                results.append(StepResult(i, step.kind, desc, True, t0, round(time.time() - t0, 3), detail))
        finally:
            cleanup = self._cleanup()
            timeline = self.observer.stop(self.load_summary.intervals if self.load_summary else None)
        if cleanup and error is None:
            error = cleanup
        ok = error is None and (self.verify_result is None or self.verify_result.ok)
        if error is None and not ok:
            error = f"verification failed: {self.verify_result.summary()}"
        return ScenarioResult(
            scenario=self.sc.name,
            file=self.file,
            cluster=self.spec.name,
            topic=self.topic if any(s.kind == "create_topic" for s in steps) else None,
            ok=ok,
            started=started,
            ended=time.time(),
            steps=results,
            faults=analyze(timeline, self._ack_times()),
            verify=self.verify_result,
            load=self.load_summary,
            error=error,
            ledger=self.load.ledger_path if self.load else None,
            timeline=timeline,
        )

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
        from clusterctl.chaos import faults

        problems = []
        for thread, stop in self.background:
            stop.set()
            thread.join(timeout=30)
        if self.load is not None and self.load_summary is None:
            try:
                self.load_summary = self.load.stop()
            except ClusterctlError as exc:
                problems.append(str(exc))
        try:
            for r in faults.heal_all(self.spec, self.detached):
                self.observer.mark(r.action, r.target, heal=True, t=r.started)
                self.progress(f"healed: {r.action} {r.target}")
        except ClusterctlError as exc:
            problems.append(f"heal failed: {exc}")
        self.detached = []
        return "; ".join(problems) or None

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
        configs = {"min.insync.replicas": str(t.min_insync_replicas)} if t.replication_factor > 1 else {}
        create_topic(self.bootstrap, self.topic, t.partitions, t.replication_factor, configs, if_not_exists=True)
        self.observer.add_topic(self.topic)
        # wait until every partition has a leader before loading it
        self._wait(lambda: self._all_led(), 60, f"leaders for every partition of {self.topic}")
        return f"{self.topic}: {t.partitions} partitions, RF {t.replication_factor}, min.insync.replicas {t.min_insync_replicas}"  # noqa: E501

    def _all_led(self) -> str | None:
        parts = self._partitions()
        if parts and all(p.leader >= 0 for p in parts):
            return "ok"
        return None

    def _step_start_load(self, a: StartLoad) -> str:
        from clusterctl.chaos.load import DrillLoad

        if self.load is not None:
            raise UsageError("start_load: the load is already running")
        self.load = DrillLoad(
            self.bootstrap, self.topic, self.work_dir / "ledger.jsonl", rate=a.rate, value_size=a.value_size
        ).start()
        return f"{a.rate:g} records/s, acks=all, idempotent, ledger {self.work_dir / 'ledger.jsonl'}"

    def _step_stop_load(self, _a: Empty) -> str:
        if self.load is None:
            raise UsageError("stop_load: no load is running")
        self.load_summary = self.load.stop()
        s = self.load_summary
        return f"sent {s.sent}, acked {s.acked}, failed {s.failed} {s.errors or ''}".strip()

    def _snapshot_leaders(self) -> None:
        with_topic = self._partitions(quiet=True)
        self.leaders_at_fault = {(p.topic, p.partition): p.leader for p in with_topic}

    def _step_fault(self, f: Fault) -> str:
        from clusterctl.chaos import faults

        spec = self.spec
        self._snapshot_leaders()
        a = f.action
        if a in ("pause-broker", "partition-node") and f.for_ is not None:
            return self._timed_fault(f)
        if a == "pause-broker":
            r = faults.pause(*faults.broker_target(spec, f.broker or 0))
        elif a == "partition-node":
            r, d = faults.disconnect(spec, f.node or "")
            self.detached.append(d)
        elif a == "kill-leader":
            r = faults.kill_leader(spec, self.bootstrap, f.topic or self.topic, f.partition)
        elif a == "rolling-restart":
            steps = faults.rolling_restart(
                spec,
                self.bootstrap,
                f.timeout,
                on_step=lambda s: self.observer.mark(
                    s.restart.action, s.restart.target, heal=False, t=s.restart.started
                ),
            )
            return ", ".join(f"broker {s.broker} back in ISR after {s.isr_full_after_s:.1f}s" for s in steps)
        else:
            fn = getattr(faults, a.replace("-", "_"))
            r = fn(spec, f.broker if a.endswith("-broker") else f.zk)
        self.observer.mark(r.action, r.target, heal=a.startswith("start-"), note=r.note, t=r.started)
        return f"{r.action} {r.target} ({r.container}): {r.before} -> {r.after}" + (f"; {r.note}" if r.note else "")

    def _timed_fault(self, f: Fault) -> str:
        from clusterctl.chaos import faults

        stop = threading.Event()
        errors: list[str] = []
        seconds = float(f.for_ or 0)

        def body() -> None:
            try:
                if f.action == "pause-broker":
                    res = faults.pause_broker(self.spec, f.broker or 0, seconds, stop)
                else:
                    res = faults.partition_node(self.spec, f.node or "", seconds, stop)
                for r in res:
                    self.observer.mark(r.action, r.target, note=r.note, t=r.started)
            except ClusterctlError as exc:
                errors.append(str(exc))

        t = threading.Thread(target=body, name=f"fault-{f.action}", daemon=True)
        t.start()
        self.background.append((t, stop))
        time.sleep(0.5)
        if errors:
            raise ClusterctlError(errors[0])
        target = f"broker {f.broker}" if f.action == "pause-broker" else str(f.node)
        return f"{f.action} {target} for {seconds:g}s (heals itself)"

    def _step_heal(self, _a: Empty) -> str:
        from clusterctl.chaos import faults

        for thread, stop in self.background:
            stop.set()
            thread.join(timeout=30)
        self.background = []
        res = faults.heal_all(self.spec, self.detached)
        self.detached = []
        for r in res:
            self.observer.mark(r.action, r.target, heal=True, t=r.started)
        return ", ".join(f"{r.action} {r.target}" for r in res) or "nothing to heal"

    def _step_elect(self, e: Elect) -> str:
        from clusterctl.kafka.admin import elect_leaders

        parts = None if e.all else [(e.topic or self.topic, p.partition) for p in self._partitions()]
        if e.partition is not None:
            parts = [(e.topic or self.topic, e.partition)]
        t = time.time()
        res = elect_leaders(self.bootstrap, e.type, parts)
        self.observer.mark(f"elect-{e.type}", e.topic or self.topic, heal=True, t=t)
        bad = [r for r in res if not r.ok]
        if bad:
            raise StepFailed(f"{e.type} election failed for {bad[0].topic}-{bad[0].partition}: {bad[0].error}")
        return f"{e.type} election on {len(res)} partitions"

    def _step_verify(self, v: Verify) -> str:
        from clusterctl.chaos.load import verify_drill

        if self.load is None:
            raise UsageError("verify: no load ran in this scenario (add start_load/stop_load)")
        if self.load_summary is None:
            self.load_summary = self.load.stop()
        self.verify_result = verify_drill(self.bootstrap, self.load.ledger_path, v.timeout)
        if not self.verify_result.ok:
            raise VerificationError(f"drill verification failed: {self.verify_result.summary()}")
        return self.verify_result.summary()

    def _step_wait_for(self, w: WaitFor) -> str:
        waited = self._wait(lambda: self._check(w), w.timeout, f"{w.name}")
        return waited

    def _step_assert(self, c: Condition) -> str:
        got = self._check(c)
        if not got:
            raise StepFailed(f"assertion {c.name} does not hold: {self._last_seen}")
        return got

    # -- conditions
    _last_seen: str = ""

    def _wait(self, check: Callable[[], str | None], timeout: float, what: str) -> str:
        t0 = time.monotonic()
        while True:
            got = check()
            if got:
                return f"{got} after {time.monotonic() - t0:.2f}s"
            if time.monotonic() - t0 > timeout:
                raise TimeoutError_(f"waited {timeout:.0f}s for {what}; last seen: {self._last_seen or 'nothing'}")
            time.sleep(0.2)

    def _partitions(self, topic: str | None = None, quiet: bool = False) -> list[Any]:
        from clusterctl.kafka.admin import describe_topics

        try:
            desc = describe_topics(self.bootstrap, [topic or self.topic], timeout=3.0)
        except ClusterctlError as exc:
            if quiet:
                return []
            self._last_seen = str(exc)
            return []
        return [p for t in desc for p in t.partitions]

    def _partition(self, ref: PartitionRef) -> Any:
        for p in self._partitions(ref.topic):
            if p.partition == ref.partition:
                return p
        return None

    def _check(self, c: Condition) -> str | None:
        from clusterctl import zk

        name = c.name
        if name == "zk_quorum":
            q = zk.quorum(self.spec, timeout=1.0)
            self._last_seen = q.summary
            if c.zk_quorum == "healthy":
                return q.summary if q.healthy else None
            return q.summary if q.has_quorum == (c.zk_quorum == "ok") else None
        if name == "zk_mode":
            m = c.zk_mode
            assert m is not None
            st = {s.id: s.mode for s in zk.node_statuses(self.spec, timeout=1.0)}
            self._last_seen = f"zk{m.id} mode {st.get(m.id)}"
            return self._last_seen if st.get(m.id) == m.mode else None
        if name == "broker_registered":
            b = c.broker_registered
            assert b is not None
            try:
                with zk.zk_client(self.spec.zk_connect, timeout=3.0) as client:
                    ids = zk.registered_brokers(client)
            except ClusterctlError as exc:
                self._last_seen = str(exc)
                return None
            self._last_seen = f"registered brokers {ids}"
            return self._last_seen if (b.id in ids) == b.registered else None
        if name == "isr_full":
            parts = self._partitions((c.isr_full or TopicRef()).topic)
            bad = [p for p in parts if p.leader < 0 or set(p.isr) != set(p.replicas)]
            self._last_seen = f"{len(bad)} of {len(parts)} partitions not fully in sync" + (
                f" (e.g. {bad[0].partition}: isr {bad[0].isr} replicas {bad[0].replicas})" if bad else ""
            )
            return f"all {len(parts)} partitions in sync" if parts and not bad else None
        if name == "preferred_leaders":
            parts = self._partitions((c.preferred_leaders or TopicRef()).topic)
            off = [
                f"{p.partition}: leader {p.leader}, preferred {p.replicas[0]}"
                for p in parts
                if p.replicas and p.leader != p.replicas[0]
            ]
            self._last_seen = f"{len(off)} partitions not led by their preferred replica" + (
                f" ({off[0]})" if off else ""
            )
            return f"all {len(parts)} partitions led by their preferred replica" if parts and not off else None
        ref: PartitionRef = getattr(c, name)
        p = self._partition(ref)
        if p is None:
            self._last_seen = self._last_seen or f"no partition {ref.partition}"
            return None
        self._last_seen = f"{p.topic}-{p.partition} leader {p.leader} isr {p.isr}"
        if name == "isr_size":
            return self._last_seen if len(p.isr) == c.isr_size.equals else None  # type: ignore[union-attr]
        if name == "leader":
            lc = c.leader
            assert lc is not None
            ok = (lc.equals is None or p.leader == lc.equals) and (lc.not_equals is None or p.leader != lc.not_equals)
            return self._last_seen if ok and p.leader >= 0 else None
        if name == "leader_changed":
            before = self.leaders_at_fault.get((p.topic, p.partition))
            if before is None:
                raise UsageError("leader_changed needs a fault step before it")
            return f"{self._last_seen} (was {before})" if p.leader >= 0 and p.leader != before else None
        raise UsageError(f"unknown condition {name}")
