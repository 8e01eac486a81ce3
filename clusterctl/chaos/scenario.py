"""Drill scenarios: the YAML step files and their pydantic models (runner.py runs them).

A scenario file:

    name: kill-leader
    description: SIGKILL the leader of partition 0 under load; leadership moves, nothing acked is lost
    requires: kafka            # kafka: needs replication (real Apache Kafka); zookeeper: ZK side only;
                               # any: any Kafka-protocol broker, one without replication (tansu) too
    expect: no-loss            # or loss: a negative control, passing only when the verifier finds lost writes
    topic: {partitions: 3, replication_factor: 3, min_insync_replicas: 2, unclean_leader_election: false}
    steps:
      - create_topic: {}
      - start_load: {rate: 500}          # acks: all | 1 | 0, idempotence (default: acks=all's)
      - sleep: 3
      - fault: {action: kill-leader, partition: 0}
      - wait_for: {leader_changed: {partition: 0}, timeout: 60}
      - heal: {}                         # waits until healed brokers are registered (wait: false, timeout)
      - wait_for: {isr_full: {}, timeout: 120}
      - stop_load: {}
      - verify: {}                       # max_duplicated: 0, max_write_gap: S (longest wait for an ack)

Migration drills (migration_steps.py) add consume {group, max_messages}, snapshot {name, same_as} and
migrate {to: kraft | zookeeper, until_phase}; upgrade {to: VERSION | newest, finalize} rolls a KRaft cluster.
Swarm drills (`deploy: swarm`, node_steps.py) add kill_node {rack: NAME | leader | follower, partition} and the
condition leaders_live {topic}. Dynamic-quorum drills (quorum_steps.py) add quorum {action: provision-controller |
add-controller | remove-controller}, metadata_probe {action: start | stop} and the condition controller_caught_up.
`spark_job: {job: key_counts}` (again: resume; `action: stop | kill`) and `verify_spark: {job: key_counts}`
run a Spark job beside the load and check its results exactly (pipeline.py, docs/spark.md).
`start_group: {members: 3, protocol: consumer}` runs a consumer group beside the load, with the faults kill-member
and kill-coordinator, the condition group_consuming and `verify_group` (group_steps.py, docs/consumer-groups.md).
KIP-966 drills (elr_steps.py) add `features: {eligible.leader.replicas.version: 0 | 1}` (finalized for the run)
and the condition elr {topic, partition, equals, last_known_elr}; `topic.replica_assignment` pins the replicas.

Each step is a one-key mapping. Conditions (for `wait_for` and `assert`): isr_size {topic, partition,
equals}, isr_full {topic}, leader {topic, partition, equals | not_equals}, preferred_leaders {topic},
leader_changed {topic, partition, fault}, zk_quorum: lost | ok | healthy (all serving),
zk_mode {id, mode}, broker_registered {id, registered}; `leader: {equals: -1}` holds while there is none. `topic`
defaults to the scenario's topic (a fresh name per run unless `topic.name` is set). leader_changed and
controller_changed compare with the state at a fault: the step `fault: N` names, by default the latest fault of
their kind before them (scenario_checks.py checks every step's references before anything starts).

The runner (runner.py) observes the whole run (observer.py), always stops the load and heals every
fault at the end (also on failure or Ctrl-C), and returns a ScenarioResult; report.py writes JSON and HTML.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from clusterctl.chaos.elr_steps import ElrIs, check_assignment, check_features
from clusterctl.chaos.group_steps import GroupConsuming, StartGroup, VerifyGroup, check_group_steps
from clusterctl.chaos.migration_steps import Consume, Migrate, Snapshot, Upgrade, check_steps
from clusterctl.chaos.node_steps import KillNode, check_node_steps
from clusterctl.chaos.quorum_steps import ControllerRef, MetadataProbe, QuorumChange, check_quorum_steps
from clusterctl.chaos.scenario_checks import KRAFT_CONDITIONS as KRAFT_CONDITIONS  # conditions.py asks here
from clusterctl.chaos.scenario_checks import check_references
from clusterctl.chaos.spark_steps import SparkCommitted, SparkJob, VerifySpark
from clusterctl.errors import SpecError, SpecNotFoundError
from clusterctl.kafka.settings import DRILL_LINGER_MS
from clusterctl.spec import validate, yamlfile

SCENARIO_DIR = Path(__file__).resolve().parent.parent.parent / "scenarios"

FaultAction = Literal[
    "kill-broker",
    "stop-broker",
    "start-broker",
    "restart-broker",
    "pause-broker",
    "kill-leader",
    "pause-followers",
    "unpause-brokers",
    "partition-node",
    "kill-zk",
    "stop-zk",
    "start-zk",
    "rolling-restart",
    "kill-controller",
    "kill-controller-quorum",
    "start-controller",
    "wipe-controller",
    "delay",
    "loss",
    "rate",
    "duplicate",
    "corrupt",
    "fill-disk",
    "kill-spark-worker",
    "start-spark-worker",
    "kill-member",
    "kill-coordinator",
]
NET_ACTIONS = ("delay", "loss", "rate", "duplicate", "corrupt")


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class TopicSpec(_M):
    name: str | None = Field(default=None, description="default: drill-<scenario>-<run id>")
    partitions: int = Field(default=3, ge=1, le=validate.MAX_PARTITIONS)
    replication_factor: int = Field(default=3, ge=1, le=validate.MAX_REPLICATION_FACTOR)
    min_insync_replicas: int = Field(default=2, ge=1)
    unclean_leader_election: bool = Field(default=False, description="unclean.leader.election.enable (can lose data)")
    replica_assignment: list[list[int]] | None = Field(
        default=None,
        max_length=validate.MAX_PARTITIONS,
        description="partition i on these broker ids, the first its preferred leader (default: Kafka's)",
    )

    @model_validator(mode="after")
    def _assignment(self) -> TopicSpec:
        if self.replica_assignment is not None:
            check_assignment(self.replica_assignment, self.partitions, self.replication_factor)
        return self

    def configs(self) -> dict[str, str]:
        """The topic configs the drill creates it with."""
        out: dict[str, str] = {}
        if self.replication_factor > 1:
            out["min.insync.replicas"] = str(self.min_insync_replicas)
        if self.unclean_leader_election:
            out["unclean.leader.election.enable"] = "true"
        return out


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


class BrokerFenced(_M):
    id: int
    fenced: bool = True


FAULT_REF = Field(
    default=None,
    ge=1,
    description="the step number of the fault it compares with (default: the latest fault of its kind before it)",
)


class LeaderChanged(PartitionRef):
    fault: int | None = FAULT_REF


class ControllerChanged(_M):
    fault: int | None = FAULT_REF


class Condition(_M):
    """Exactly one condition."""

    isr_size: IsrSize | None = None
    isr_full: TopicRef | None = None
    preferred_leaders: TopicRef | None = None
    leaders_live: TopicRef | None = None  # every partition led, none by a broker on a host the run stopped
    leader: LeaderIs | None = None
    leader_changed: LeaderChanged | None = None  # the leader differs from the one at the fault (`fault: N`)
    zk_quorum: Literal["lost", "ok", "healthy"] | None = None
    zk_mode: ZkModeIs | None = None
    broker_registered: BrokerRegistered | None = None
    controller_quorum: Literal["lost", "ok", "healthy"] | None = None  # kraft: leader? every voter caught up?
    controller_changed: ControllerChanged | None = None  # the active controller differs from the one at the fault
    controller_caught_up: ControllerRef | None = None  # kraft.quorum dynamic: fetching, at the high watermark
    broker_fenced: BrokerFenced | None = None  # kraft: absent from metadata
    spark_committed: SparkCommitted | None = None  # a drill's Spark job has committed N micro-batches
    group_consuming: GroupConsuming | None = None  # every partition: a record written after the latest fault read
    elr: ElrIs | None = None  # kraft, KIP-966: a partition's eligible leader replicas (DescribeTopicPartitions)

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
    timeout: float = Field(default=60.0, gt=0, le=validate.MAX_SECONDS)


class CreateTopic(_M):
    if_not_exists: bool = False


Acks = Literal["all", "1", "0"]


class StartLoad(_M):
    rate: float = Field(
        default=500.0, ge=0, le=validate.MAX_THROUGHPUT, description="records/s (0 = as fast as possible)"
    )
    # the load's key is p<partition> (at most 5 bytes): key + value stay within the real record bound
    value_size: int = Field(default=64, ge=8, le=validate.MAX_RECORD_BYTES - 5)
    acks: Acks = Field(default="all", description="all: every ISR member has it; 1: the leader alone; 0: none")
    idempotence: bool | None = Field(default=None, description="enable.idempotence (default: on with acks=all)")
    linger_ms: int = Field(
        default=DRILL_LINGER_MS,
        ge=0,
        le=1000,
        description="linger.ms: how long the producer batches records (less: more requests and CPU)",
    )

    @field_validator("acks", mode="before")
    @classmethod
    def _acks_text(cls, v: Any) -> Any:
        return str(v) if isinstance(v, int) and not isinstance(v, bool) else ("all" if v == -1 else v)

    @model_validator(mode="after")
    def _idempotence_needs_acks_all(self) -> StartLoad:
        if self.idempotence and self.acks != "all":
            raise ValueError(f"idempotence needs acks: all (got acks: {self.acks})")
        return self

    @property
    def idempotent(self) -> bool:
        return self.acks == "all" if self.idempotence is None else self.idempotence


class Empty(_M):
    pass


class Fault(_M):
    action: FaultAction
    broker: int | None = None
    zk: int | None = None
    controller: int | None = Field(
        default=None, description="start-controller, wipe-controller: voter node id (wipe: default the active one)"
    )
    spark_worker: int | None = Field(default=None, description="kill/start-spark-worker: spark-workerN of the spec")
    member: int | None = Field(default=None, description="kill-member: member N of the drill's group")
    node: str | None = Field(
        default=None,
        description="a service (kafka2, zk1), leader / follower (not the controller when another is) of "
        "topic-partition, zk-leader, or controller (active)",
    )
    topic: str | None = None
    partition: int = 0
    for_: float | None = Field(
        default=None, alias="for", gt=0, le=validate.MAX_SECONDS, description="pause/partition/network: heal after S s"
    )
    ms: float | None = Field(default=None, description="delay: added ms per packet")
    jitter: float = Field(default=0.0, description="delay: ± ms, uniformly")
    percent: float | None = Field(default=None, description="loss/duplicate/corrupt: share of packets, %")
    kbit: float | None = Field(default=None, description="rate: kbit/s")
    to: list[str] = Field(default_factory=list, description="network faults: only towards these nodes")
    timeout: float = Field(
        default=300.0, gt=0, le=validate.MAX_SECONDS, description="rolling-restart: per-broker ISR wait"
    )

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True, strict=True)

    @model_validator(mode="after")
    def _targets(self) -> Fault:
        a = self.action
        if a.endswith("-broker") and self.broker is None:
            raise ValueError(f"{a} needs broker: <id>")
        if a.endswith("-zk") and self.zk is None:
            raise ValueError(f"{a} needs zk: <id>")
        if a == "kill-member" and self.member is None:
            raise ValueError("kill-member needs member: <N of the drill group's members>")
        if a.endswith("-spark-worker") and self.spark_worker is None:
            raise ValueError(f"{a} needs spark_worker: <N of spark-workerN>")
        if a == "start-controller" and self.controller is None:
            raise ValueError("start-controller needs controller: <voter node id>")
        if a == "wipe-controller" and self.node not in (None, "controller", "follower"):
            raise ValueError(
                "wipe-controller takes controller: <voter node id>, or node: controller (the active one) | follower"
            )
        if a == "partition-node" and self.node is None:
            raise ValueError("partition-node needs node: <service, e.g. kafka2 or zk1>")
        if a == "fill-disk" and self.node is None:
            raise ValueError("fill-disk needs node: <service, or leader / follower of topic-partition>")
        if a in NET_ACTIONS:
            if self.node is None:
                raise ValueError(f"{a} needs node: <service, or leader / follower of topic-partition>")
            from clusterctl.chaos.degrade import NetFault, check
            from clusterctl.errors import UsageError

            try:
                check(NetFault(a, self.net_value() or 0.0, self.jitter))
            except UsageError as exc:
                raise ValueError(exc.message) from None
        return self

    def net_value(self) -> float | None:
        """The setting of a network fault: ms (delay), kbit (rate) or percent."""
        return {"delay": self.ms, "rate": self.kbit}.get(self.action, self.percent)


class Heal(_M):
    wait: bool = Field(default=True, description="wait until healed brokers are registered and ZK nodes serve")
    timeout: float = Field(default=120.0, gt=0, le=validate.MAX_SECONDS)


class Elect(_M):
    type: Literal["preferred", "unclean"] = "preferred"
    topic: str | None = None
    partition: int | None = None
    all: bool = False


class Verify(_M):
    timeout: float = Field(default=120.0, gt=0, le=validate.MAX_SECONDS)
    max_duplicated: int | None = Field(
        default=None, ge=0, description="fail when more acknowledged records were read back twice (0: idempotence)"
    )
    max_write_gap: float | None = Field(
        default=None, gt=0, le=validate.MAX_SECONDS, description="fail when a partition waited longer for an ack (s)"
    )


STEP_MODELS: dict[str, type[BaseModel] | None] = {
    "create_topic": CreateTopic,
    "start_load": StartLoad,
    "stop_load": Empty,
    "fault": Fault,
    "heal": Heal,
    "wait_for": WaitFor,
    "assert": Condition,
    "elect": Elect,
    "verify": Verify,
    "consume": Consume,
    "snapshot": Snapshot,
    "migrate": Migrate,
    "upgrade": Upgrade,
    "spark_job": SparkJob,
    "verify_spark": VerifySpark,
    "kill_node": KillNode,
    "start_group": StartGroup,
    "verify_group": VerifyGroup,
    "quorum": QuorumChange,
    "metadata_probe": MetadataProbe,
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
            shown = {k: v for k, v in fields.items() if not (v is None or v is False or v == {})}  # 0 is shown
            return f"{self.kind} " + " ".join(f"{k}={v}" for k, v in shown.items())
        return self.kind


class Scenario(_M):
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9-]{0,60}$")
    description: str = ""
    requires: Literal["kafka", "zookeeper", "any"] = "kafka"
    mode: Literal["any", "zookeeper", "kraft"] = Field(default="any", description="kafka.mode the drill is for")
    deploy: Literal["any", "swarm"] = Field(default="any", description="swarm: the drill stops hosts (kill_node)")
    expect: Literal["no-loss", "loss"] = Field(
        default="no-loss", description="loss: a negative control that passes only when acknowledged writes are lost"
    )
    topic: TopicSpec = TopicSpec()
    features: dict[str, int] = Field(
        default_factory=dict, description="feature levels finalized for the run (mode kraft), restored after it"
    )
    steps: list[dict[str, Any]] = Field(min_length=1)

    @model_validator(mode="after")
    def _features(self) -> Scenario:
        check_features(self.features, self.mode)
        return self

    def parsed_steps(self) -> list[Step]:
        return [_parse_step(i, raw) for i, raw in enumerate(self.steps, 1)]

    def loss_settings(self) -> list[str]:
        """The settings of this scenario that allow an acknowledged write to be lost (empty: none do)."""
        out = []
        loads = [s.args for s in self.parsed_steps() if s.kind == "start_load"]
        for acks in sorted({a.acks for a in loads if a.acks != "all"}):
            out.append(f"acks={acks} (acknowledged by the leader before any follower had it)")
        if self.topic.unclean_leader_election:
            out.append("unclean.leader.election.enable=true (an out-of-sync replica may become leader)")
        if (
            self.topic.replication_factor > 1
            and self.topic.min_insync_replicas == 1
            and any(a.acks == "all" for a in loads)
        ):
            out.append("min.insync.replicas=1 (acks=all is satisfied by the leader alone once the ISR shrinks)")
        return out


def _parse_step(index: int, raw: Any) -> Step:
    if not isinstance(raw, dict) or len(raw) != 1:
        raise ValueError(f"step {index} must be a one-key mapping like `sleep: 3` (one of {', '.join(STEP_MODELS)})")
    kind, value = next(iter(raw.items()))
    if kind not in STEP_MODELS:
        raise ValueError(f"step {index}: unknown step {kind!r} (one of {', '.join(STEP_MODELS)})")
    model = STEP_MODELS[kind]
    if model is None:
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise ValueError(f"step {index} (sleep): expected seconds, got a {type(value).__name__}")
        if not value >= 0:  # nan included
            raise ValueError(f"step {index} (sleep): expected seconds >= 0, got {value}")
        if value > validate.MAX_SECONDS:
            raise ValueError(f"step {index} (sleep): at most {validate.MAX_SECONDS:g} seconds (a day), got {value}")
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
        data = yamlfile.load_text(text, source)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        raise SpecError(f"{source}:{where} is not valid YAML ({getattr(exc, 'problem', exc)})") from None
    if not isinstance(data, dict):
        raise SpecError(f"{source}: a scenario is a mapping with name, steps, ...")
    try:
        sc = Scenario.model_validate(data)
        check_steps([(s.kind, s.args) for s in sc.parsed_steps()], sc.mode, sc.requires)
        check_node_steps([(s.kind, s.args) for s in sc.parsed_steps()], sc.deploy)
        check_group_steps([(s.kind, s.args) for s in sc.parsed_steps()])
        check_quorum_steps([(s.kind, s.args) for s in sc.parsed_steps()], sc.mode)
        check_references(sc)
    except ValidationError as exc:
        raise SpecError(f"{source}: {_first_error(exc)}") from None
    except ValueError as exc:
        raise SpecError(f"{source}: {exc}") from None
    return sc


def load_scenario(path: str | Path) -> Scenario:
    """A scenario by file path, or by name from the shipped scenarios/ directory."""
    p = Path(path)
    if not p.exists() and not p.is_symlink() and not p.suffix:
        p = SCENARIO_DIR / f"{path}.yaml"
        if not p.is_file():
            raise SpecNotFoundError(f"scenario {path} not found", hint="clusterctl scenario list")
    validate.input_file(p, "scenario", hint="clusterctl scenario list")
    try:
        text = yamlfile.read_text(p)
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"{p}: cannot read ({exc})") from None
    return parse_scenario(text, str(p))


@dataclass
class ScenarioInfo:
    name: str
    requires: str
    expect: str
    steps: int
    file: str
    description: str
    mode: str = "any"


def list_scenarios(directory: Path = SCENARIO_DIR) -> list[ScenarioInfo]:
    out = []
    for p in sorted(directory.glob("*.yaml")):
        sc = load_scenario(p)
        out.append(ScenarioInfo(sc.name, sc.requires, sc.expect, len(sc.steps), str(p), sc.description, sc.mode))
    return out
