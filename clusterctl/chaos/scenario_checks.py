"""What a scenario's steps refer to, checked before anything starts (issue 51's "check before work").

`check_references` (on the file alone; `scenario validate` and the start of `scenario run`): the scenario's topic is
created before a step uses it, the load runs before it is stopped or verified, a Spark job exists in spark_jobs/ and
is started before it is stopped, waited for or verified, and a condition about "the fault" (leader_changed,
controller_changed) has one: by default the latest fault before it of the kind it is about (for controller_changed:
one on the controller, else any), or the step its `fault: N` names, which must be an earlier fault.

`check_against_spec` (at the start of `scenario run`, against the cluster's spec, and by `scenario validate` when a
spec is at hand and the scenario is for its mode): every broker, ZooKeeper node, controller, Spark worker and node a
step names exists, and every condition and fault fits the cluster's mode.
Each problem is one line naming the step; nothing has started.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # scenario.py imports this module (it calls check_references while it parses)
    from clusterctl.chaos.scenario import Fault, Scenario, Step

KRAFT_CONDITIONS = ("controller_quorum", "controller_changed", "broker_fenced", "controller_caught_up", "elr")
CONDITION_STEPS = ("wait_for", "assert")

# fault actions that undo rather than break: never "the fault" a condition compares with
RESTORING = ("start-broker", "start-zk", "start-controller", "start-spark-worker", "unpause-brokers")
CONTROLLER_ACTIONS = ("kill-controller", "kill-controller-quorum", "wipe-controller")
ZK_CONDITIONS = ("zk_quorum", "zk_mode")
ROLES = ("leader", "follower", "zk-leader", "controller")
NO_TOPIC_CONDITIONS = ("spark_committed", "zk_mode", "broker_registered", "broker_fenced", "group_consuming")


def _uses_topic(step: Step) -> bool:
    """Whether the step acts on the scenario's own topic (it names no other)."""
    a = step.args
    if step.kind in ("start_load", "start_group"):
        return True
    if step.kind == "spark_job":
        return bool(a.action == "start")
    if step.kind in ("consume",):
        return a.topic is None
    if step.kind == "elect":
        return not a.all and a.topic is None
    if step.kind == "fault":
        replica = a.node in ("leader", "follower") and a.action != "wipe-controller"  # its follower is a voter
        return a.topic is None and (a.action in ("kill-leader", "pause-followers") or replica)
    if step.kind == "kill_node":
        return a.topic is None and a.rack in ("leader", "follower")
    if step.kind in CONDITION_STEPS:
        ref = getattr(a, a.name)
        return a.name not in NO_TOPIC_CONDITIONS and getattr(ref, "topic", "") is None
    return False


def _is_fault(step: Step) -> bool:
    return step.kind == "kill_node" or (step.kind == "fault" and step.args.action not in RESTORING)


def _on_controller(step: Step) -> bool:
    return step.kind == "fault" and (step.args.action in CONTROLLER_ACTIONS or step.args.node == "controller")


def fault_refs(steps: list[Step]) -> dict[int, int]:
    """Step number of each leader_changed / controller_changed condition → the step number of the fault it compares
    with (what `check_references` accepted)."""
    out: dict[int, int] = {}
    faults: list[int] = []  # every fault step so far (the latest one's snapshot is the default, as before)
    on_controller: list[int] = []
    for i, step in enumerate(steps, 1):
        if (step.kind == "fault" and step.args.action != "unpause-brokers") or step.kind == "kill_node":
            faults.append(i)
            if _on_controller(step):
                on_controller.append(i)
        if step.kind in CONDITION_STEPS and step.args.name in ("leader_changed", "controller_changed"):
            ref = getattr(step.args, step.args.name)
            if ref.fault is not None:
                out[i] = ref.fault
            elif step.args.name == "controller_changed" and on_controller:
                out[i] = on_controller[-1]
            elif faults:
                out[i] = faults[-1]
    return out


def check_references(sc: Scenario) -> None:
    """Every reference of every step, in order (ValueError, one line naming the step)."""
    steps = sc.parsed_steps()
    topic_ready = sc.topic.name is not None  # a named topic may exist already; otherwise create_topic makes it
    load_running: int | None = None
    load_ran = False
    spark_running: dict[str, int] = {}
    spark_started: set[str] = set()
    known_jobs: set[str] | None = None
    refs = fault_refs(steps)
    for i, step in enumerate(steps, 1):
        where = f"step {i} ({step.kind})"
        a = step.args
        if step.kind == "create_topic":
            topic_ready = True
        if _uses_topic(step) and not topic_ready:
            raise ValueError(
                f"{where}: uses the scenario's topic, but no create_topic step comes before it "
                "(or set topic.name to a topic that exists)"
            )
        if step.kind == "start_load":
            if load_running is not None:
                raise ValueError(f"{where}: the load started at step {load_running} is still running")
            load_running, load_ran = i, True
        elif step.kind == "stop_load":
            if load_running is None:
                raise ValueError(f"{where}: no load is running (a start_load step comes first)")
            load_running = None
        elif step.kind == "verify" and not load_ran:
            raise ValueError(f"{where}: no load ran before it (start_load and stop_load come first)")
        elif step.kind == "spark_job":
            if known_jobs is None:
                from clusterctl.spark.runner import job_names

                known_jobs = set(job_names())
            if a.job not in known_jobs:
                raise ValueError(
                    f"{where}: unknown Spark job {a.job!r}; spark_jobs/ has {', '.join(sorted(known_jobs)) or 'none'}"
                )
            if a.action == "start":
                if a.job in spark_running:
                    raise ValueError(f"{where}: {a.job} is still running (started at step {spark_running[a.job]})")
                spark_running[a.job] = i
                spark_started.add(a.job)
            elif spark_running.pop(a.job, None) is None:
                raise ValueError(f"{where}: {a.job} is not running here (a spark_job step starts it first)")
        elif step.kind == "verify_spark" and a.job not in spark_started:
            raise ValueError(f"{where}: no spark_job step starts {a.job} before it")
        if step.kind in CONDITION_STEPS:
            _check_condition(where, i, a, steps, refs, spark_running, sc.mode)
        if step.kind == "fault":
            _check_fault_mode(where, a, sc.mode)


def _check_condition(
    where: str, i: int, c: Any, steps: list[Step], refs: dict[int, int], spark: dict[str, int], mode: str
) -> None:
    name = c.name
    _check_condition_mode(where, name, mode)
    if name == "spark_committed" and c.spark_committed is not None and c.spark_committed.job not in spark:
        raise ValueError(f"{where}: spark_committed: {c.spark_committed.job} is not running here (start it first)")
    if name not in ("leader_changed", "controller_changed"):
        return
    given = getattr(c, name).fault
    if given is not None:
        if given >= i:
            raise ValueError(f"{where}: {name} fault: {given} names a step that is not before it")
        target = steps[given - 1]
        if not _is_fault(target):
            raise ValueError(f"{where}: {name} fault: {given} names step {given} ({target.describe()}), not a fault")
    elif i not in refs:
        raise ValueError(f"{where}: {name} needs a fault step before it (it compares with the state at the fault)")


def _check_condition_mode(where: str, name: str, mode: str) -> None:
    if name in KRAFT_CONDITIONS and name != "controller_changed" and mode == "zookeeper":  # that one: both modes
        raise ValueError(f"{where}: {name} is a KRaft condition; this is for mode: zookeeper")
    if name in ZK_CONDITIONS and mode == "kraft":
        raise ValueError(f"{where}: {name} is a ZooKeeper condition; this is for mode: kraft (no ZooKeeper)")


def _check_fault_mode(where: str, f: Fault, mode: str) -> None:
    if mode == "kraft" and f.action.endswith("-zk"):
        raise ValueError(f"{where}: {f.action} breaks ZooKeeper; this is for mode: kraft (no ZooKeeper)")
    if mode == "zookeeper" and f.action in ("kill-controller-quorum", "start-controller", "wipe-controller"):
        raise ValueError(f"{where}: {f.action} is for a KRaft quorum; this is for mode: zookeeper")


def check_against_spec(sc: Scenario, spec: Any) -> None:
    """Every id and node a step names exists in the spec, and every condition fits its mode (UsageError)."""
    from clusterctl.chaos import targets
    from clusterctl.errors import ClusterctlError, UsageError

    mode = spec.kafka.mode
    _check_quorum_kind(sc, spec)
    for replicas in sc.topic.replica_assignment or []:
        for broker in replicas:
            try:
                targets.broker_target(spec, broker)
            except ClusterctlError as exc:
                raise UsageError(f"scenario {sc.name}: topic.replica_assignment: {exc.message}") from None
    for i, step in enumerate(sc.parsed_steps(), 1):
        where = f"step {i} ({step.describe()})"
        a = step.args
        try:
            if step.kind in CONDITION_STEPS:
                _check_condition_mode(where, a.name, mode)
                for ref in (a.broker_fenced, a.broker_registered):
                    if ref is not None:
                        targets.broker_target(spec, ref.id)
                if a.zk_mode is not None:
                    targets.zk_target(spec, a.zk_mode.id)
                if a.controller_caught_up is not None and a.controller_caught_up.controller is not None:
                    targets.controller_target(spec, a.controller_caught_up.controller)
            if step.kind == "quorum" and a.controller is not None:
                targets.controller_target(spec, a.controller)
            if step.kind != "fault":
                continue
            _check_fault_mode(where, a, mode)
            if a.action.endswith("-broker") and a.action != "unpause-brokers":
                targets.broker_target(spec, a.broker or 0)
            if a.action.endswith("-zk"):
                targets.zk_target(spec, a.zk or 0)
            if a.action in ("start-controller", "wipe-controller") and a.controller is not None:
                targets.controller_target(spec, a.controller)
            if a.action.endswith("-spark-worker"):
                targets.spark_worker_target(spec, a.spark_worker or 0)
            for node in [a.node, *a.to] if a.node is not None else a.to:
                if node not in ROLES:
                    targets.node_target(spec, node)
        except ValueError as exc:
            raise UsageError(f"scenario {sc.name}: {exc}") from None
        except ClusterctlError as exc:
            raise UsageError(f"scenario {sc.name}: {where}: {exc.message}") from None


def _check_quorum_kind(sc: Scenario, spec: Any) -> None:
    """A drill that changes the quorum's voters needs a dynamic quorum: refused in one line before any work."""
    from clusterctl.chaos.quorum_steps import uses_dynamic_quorum
    from clusterctl.errors import UsageError

    if (
        spec.kraft_mode
        and spec.kraft.quorum != "dynamic"
        and uses_dynamic_quorum([(s.kind, s.args) for s in sc.parsed_steps()])
    ):
        raise UsageError(
            f"scenario {sc.name} replaces a controller voter, which needs a dynamic quorum (kraft.quorum: dynamic, "
            f"KIP-853); cluster {spec.name} runs a static one (controller.quorum.voters, fixed at format time)"
        )


def named_topics(sc: Scenario) -> list[tuple[int, str]]:
    """(step, topic) for every topic a step names that the run does not create itself (the scenario's own topic,
    a Spark job's output): those must exist before the run starts."""
    steps = sc.parsed_steps()
    made = {sc.topic.name} if sc.topic.name else set()
    made |= {a.args.output for a in steps if a.kind == "spark_job" and a.args.output}
    out = []
    for i, step in enumerate(steps, 1):
        a = step.args
        refs = [getattr(a, a.name)] if step.kind in CONDITION_STEPS else [a]
        for ref in refs:
            topic = getattr(ref, "topic", None)
            if isinstance(topic, str) and topic not in made and step.kind != "spark_job":
                out.append((i, topic))
    return out
