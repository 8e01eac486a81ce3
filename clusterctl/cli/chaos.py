"""CLI for the 'chaos' noun (faults on the real containers), plus `leader` and `reassign`."""

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from clusterctl.cli.common import BootstrapOpt, JsonOpt, ZkOpt, bootstrap_servers, get_spec, seconds_option, zk_connect

chaos_app = typer.Typer(
    name="chaos", help="Break the cluster on purpose (Docker SDK on its containers).", no_args_is_help=True
)
leader_app = typer.Typer(name="leader", help="Partition leadership: elections and imbalance.", no_args_is_help=True)

BrokerArg = Annotated[int, typer.Argument(help="broker id (1..N of the spec)")]
ZkArg = Annotated[int, typer.Argument(help="ZooKeeper node id (1..N of the spec)")]
ForOpt = Annotated[
    float, typer.Option("--for", help="seconds until the fault heals itself", callback=seconds_option(allow_zero=True))
]


def _emit_faults(results: list[Any], as_json: bool) -> None:
    from clusterctl.output import Column, emit

    cols = [
        Column("Action", "action"),
        Column("Target", "target"),
        Column("Container", "container"),
        Column("Before", "before"),
        Column("After", "after"),
        Column("Took s", "took_s", justify="right", fmt=lambda v: f"{v:.2f}"),
        Column("Note", "note"),
    ]
    emit(results, as_json=as_json, columns=cols)


@chaos_app.command("kill-broker")
def kill_broker(broker: BrokerArg, as_json: JsonOpt = False) -> None:
    """SIGKILL a broker's container (like kill -9: no controlled shutdown)."""
    from clusterctl.chaos import faults

    _emit_faults([faults.kill_broker(get_spec(), broker)], as_json)


@chaos_app.command("stop-broker")
def stop_broker(broker: BrokerArg, as_json: JsonOpt = False) -> None:
    """Graceful stop: SIGTERM, then up to kafka.stop_grace_seconds for the controlled shutdown."""
    from clusterctl.chaos import faults

    _emit_faults([faults.stop_broker(get_spec(), broker)], as_json)


@chaos_app.command("start-broker")
def start_broker(broker: BrokerArg, as_json: JsonOpt = False) -> None:
    """Start a stopped or killed broker container."""
    from clusterctl.chaos import faults

    _emit_faults([faults.start_broker(get_spec(), broker)], as_json)


@chaos_app.command("restart-broker")
def restart_broker(broker: BrokerArg, as_json: JsonOpt = False) -> None:
    """Graceful stop then start of one broker."""
    from clusterctl.chaos import faults

    _emit_faults([faults.restart_broker(get_spec(), broker)], as_json)


@chaos_app.command("pause-broker")
def pause_broker(broker: BrokerArg, seconds: ForOpt = 10.0, as_json: JsonOpt = False) -> None:
    """SIGSTOP a broker (docker pause) for --for seconds, then unpause (also on Ctrl-C)."""
    from clusterctl.chaos import faults
    from clusterctl.output import info

    spec = get_spec()
    faults.broker_target(spec, broker)
    if seconds > 0:
        info(f"pausing broker {broker} for {seconds:g}s (Ctrl-C unpauses early)")
    _emit_faults(faults.pause_broker(spec, broker, seconds), as_json)


@chaos_app.command("kill-leader")
def kill_leader(
    topic: Annotated[str, typer.Argument(help="topic")],
    partition: Annotated[int, typer.Argument(help="partition")],
    bootstrap_server: BootstrapOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """SIGKILL the broker currently leading TOPIC-PARTITION (found through metadata)."""
    from clusterctl.chaos import faults

    spec = get_spec()
    _emit_faults([faults.kill_leader(spec, bootstrap_servers(bootstrap_server), topic, partition)], as_json)


@chaos_app.command("partition-node")
def partition_node(
    node: Annotated[str, typer.Argument(help="service (kafka2, zk1) or container name")],
    seconds: ForOpt = 10.0,
    as_json: JsonOpt = False,
) -> None:
    """Disconnect a node from the cluster network for --for seconds; reconnect with the same IP (also on Ctrl-C)."""
    from clusterctl.chaos import faults
    from clusterctl.output import info

    spec = get_spec()
    faults.node_target(spec, node)
    if seconds > 0:
        info(f"disconnecting {node} for {seconds:g}s (Ctrl-C reconnects early)")
    _emit_faults(faults.partition_node(spec, node, seconds), as_json)


@chaos_app.command("kill-zk")
def kill_zk(zk: ZkArg, as_json: JsonOpt = False) -> None:
    """SIGKILL a ZooKeeper node's container."""
    from clusterctl.chaos import faults

    _emit_faults([faults.kill_zk(get_spec(), zk)], as_json)


@chaos_app.command("stop-zk")
def stop_zk(zk: ZkArg, as_json: JsonOpt = False) -> None:
    """Stop a ZooKeeper node (SIGTERM, 10 s grace)."""
    from clusterctl.chaos import faults

    _emit_faults([faults.stop_zk(get_spec(), zk)], as_json)


@chaos_app.command("start-zk")
def start_zk(zk: ZkArg, as_json: JsonOpt = False) -> None:
    """Start a stopped or killed ZooKeeper node."""
    from clusterctl.chaos import faults

    _emit_faults([faults.start_zk(get_spec(), zk)], as_json)


@chaos_app.command("kill-controller")
def kill_controller(as_json: JsonOpt = False) -> None:
    """SIGKILL the active controller: the KRaft quorum leader, or the controller broker in ZooKeeper mode."""
    from clusterctl.chaos import faults

    _emit_faults([faults.kill_controller(get_spec())], as_json)


@chaos_app.command("kill-controller-quorum")
def kill_controller_quorum(as_json: JsonOpt = False) -> None:
    """KRaft: SIGKILL a majority of the controller voters (the leader first); no leader can be elected."""
    from clusterctl.chaos import faults

    _emit_faults(faults.kill_controller_quorum(get_spec()), as_json)


@chaos_app.command("start-controller")
def start_controller(
    node_id: Annotated[int, typer.Argument(help="voter node id (101.. dedicated, broker id when combined)")],
    as_json: JsonOpt = False,
) -> None:
    """KRaft: start a stopped or killed controller voter."""
    from clusterctl.chaos import faults

    _emit_faults([faults.start_controller(get_spec(), node_id)], as_json)


@chaos_app.command("heal")
def heal(
    wait: Annotated[
        bool, typer.Option("--wait/--no-wait", help="wait until brokers are registered and ZK nodes serve")
    ] = True,
    timeout: Annotated[float, typer.Option("--timeout", help="seconds to wait for that")] = 120.0,
    as_json: JsonOpt = False,
) -> None:
    """Undo every fault: unpause, reconnect, start stopped containers; then wait until the cluster serves again."""
    from clusterctl.chaos import recovery
    from clusterctl.errors import UsageError
    from clusterctl.output import err_console, info

    if timeout <= 0:
        raise UsageError("--timeout must be positive")
    spec = get_spec()
    results = recovery.heal_all(spec)
    waited = None
    if wait:
        with err_console.status("waiting for the healed cluster") as status:
            waited = recovery.wait_healed(spec, timeout, on_progress=lambda m: status.update(m))
    if as_json:
        from clusterctl.output import emit

        emit({"healed": results, "wait": waited}, as_json=True)
        return
    _emit_faults(results, False)
    if waited is not None:
        brokers = ",".join(map(str, waited.brokers)) or "-"
        zks = ",".join(map(str, waited.zk_serving)) or "-"
        info(f"brokers {brokers} registered and in every broker's metadata, ZK {zks} serving ({waited.seconds:.1f}s)")


@chaos_app.command("rolling-restart")
def rolling_restart(
    timeout: Annotated[
        float,
        typer.Option("--timeout", help="seconds to wait for a full ISR after each broker", callback=seconds_option()),
    ] = 300,
    bootstrap_server: BootstrapOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Restart brokers one at a time, waiting for a full ISR on every partition before the next."""
    from clusterctl.chaos import recovery
    from clusterctl.output import Column, emit, info

    spec = get_spec()

    def step(s: recovery.RollingStep) -> None:
        info(f"broker {s.broker} restarted; every partition back in sync after {s.isr_full_after_s:.1f}s")

    steps = recovery.rolling_restart(spec, bootstrap_servers(bootstrap_server), timeout, on_step=step)
    cols = [
        Column("Broker", "broker", justify="right"),
        Column("Restart s", lambda s: s.restart.took_s, justify="right"),
        Column("ISR full after s", "isr_full_after_s", justify="right"),
    ]
    emit(steps, as_json=as_json, columns=cols)


# ---------------------------------------------------------------- leader


@leader_app.command("elect")
def elect(
    preferred: Annotated[bool, typer.Option("--preferred", help="preferred-replica election (default)")] = False,
    unclean: Annotated[
        bool, typer.Option("--unclean", help="unclean election: an out-of-sync replica may lead (can lose data)")
    ] = False,
    topic: Annotated[str | None, typer.Option("--topic", help="one topic")] = None,
    partition: Annotated[int | None, typer.Option("--partition", help="one partition (needs --topic)")] = None,
    all_: Annotated[bool, typer.Option("--all", help="every partition of every topic")] = False,
    bootstrap_server: BootstrapOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Leader election like kafka-leader-election.sh (kafka-preferred-replica-election.sh in seed 004)."""
    from clusterctl.errors import UsageError
    from clusterctl.kafka.admin import describe_topic, elect_leaders
    from clusterctl.output import Column, emit

    if preferred and unclean:
        raise UsageError("give --preferred or --unclean, not both")
    if partition is not None and topic is None:
        raise UsageError("--partition needs --topic")
    if partition is not None:
        from clusterctl.spec import validate

        validate.partition(partition)
    if not all_ and topic is None:
        raise UsageError("give --topic T [--partition P] or --all")
    if all_ and topic is not None:
        raise UsageError("--all and --topic are mutually exclusive")
    bootstrap = bootstrap_servers(bootstrap_server)
    parts: list[tuple[str, int]] | None = None
    if topic is not None:
        if partition is not None:
            parts = [(topic, partition)]
        else:
            parts = [(topic, p.partition) for p in describe_topic(bootstrap, topic).partitions]
    res = elect_leaders(bootstrap, "unclean" if unclean else "preferred", parts)
    cols = [Column("Topic", "topic"), Column("Partition", "partition", justify="right"), Column("Ok", "ok"),
            Column("Error", "error")]  # fmt: skip
    failed = [r for r in res if not r.ok]
    if failed and as_json:  # one JSON document: the error object carries the results
        from clusterctl.errors import ClusterctlError

        err = ClusterctlError(
            f"{len(failed)} of {len(res)} elections failed ({failed[0].topic}-{failed[0].partition}: {failed[0].error})"
        )
        err.result = res
        raise err
    emit(res, as_json=as_json, columns=cols, empty="no partitions needed an election")
    if failed:
        from clusterctl.errors import ClusterctlError

        raise ClusterctlError(
            f"{len(failed)} of {len(res)} elections failed ({failed[0].topic}-{failed[0].partition}: {failed[0].error})"
        )


def leader_imbalance(bootstrap: str) -> dict[str, Any]:
    """Partitions whose leader is not their preferred (first) replica, and leader counts per broker."""
    from clusterctl.kafka.admin import describe_topics

    topics = describe_topics(bootstrap)
    counts: dict[int, int] = {}
    preferred_counts: dict[int, int] = {}
    off: list[dict[str, Any]] = []
    total = 0
    for t in topics:
        for p in t.partitions:
            total += 1
            if p.leader >= 0:
                counts[p.leader] = counts.get(p.leader, 0) + 1
            if p.replicas:
                preferred_counts[p.replicas[0]] = preferred_counts.get(p.replicas[0], 0) + 1
                if p.leader != p.replicas[0]:
                    off.append(
                        {"topic": p.topic, "partition": p.partition, "leader": p.leader,
                         "preferred": p.replicas[0], "replicas": p.replicas, "isr": p.isr}
                    )  # fmt: skip
    brokers = sorted(set(counts) | set(preferred_counts))
    return {
        "partitions": total,
        "not_preferred": off,
        "brokers": [
            {"broker": b, "leaders": counts.get(b, 0), "preferred_leaders": preferred_counts.get(b, 0)} for b in brokers
        ],
    }


@leader_app.command("imbalance")
def imbalance(bootstrap_server: BootstrapOpt = None, as_json: JsonOpt = False) -> None:
    """Partitions not led by their preferred replica, and leaders per broker."""
    from clusterctl.output import Column, emit, info

    data = leader_imbalance(bootstrap_servers(bootstrap_server))
    if as_json:
        emit(data, as_json=True)
        return
    emit(
        data["brokers"],
        as_json=False,
        title="leaders per broker",
        columns=[Column("Broker", "broker", justify="right"), Column("Leaders", "leaders", justify="right"),
                 Column("Preferred leaders", "preferred_leaders", justify="right")],
    )  # fmt: skip
    emit(
        data["not_preferred"],
        as_json=False,
        title=f"{len(data['not_preferred'])} of {data['partitions']} partitions not led by their preferred replica",
        columns=[Column("Topic", "topic"), Column("Partition", "partition", justify="right"),
                 Column("Leader", "leader", justify="right"), Column("Preferred", "preferred", justify="right"),
                 Column("Replicas", "replicas"), Column("Isr", "isr")],
        empty="every partition is led by its preferred replica",
    )  # fmt: skip
    if data["not_preferred"]:
        info("run `clusterctl leader elect --preferred --all` to move leadership back")


# ---------------------------------------------------------------- reassign


def reassign(
    topic: Annotated[str, typer.Argument(help="topic to move")],
    plan: Annotated[Path | None, typer.Option("--plan", help="kafka-reassign-partitions.sh JSON plan")] = None,
    generate: Annotated[bool, typer.Option("--generate", help="propose a plan over --brokers")] = False,
    brokers: Annotated[str | None, typer.Option("--brokers", help="target broker ids, e.g. 1,2,3")] = None,
    execute: Annotated[bool, typer.Option("--execute", help="start the moves and wait until done")] = False,
    verify: Annotated[
        bool, typer.Option("--verify", help="wait for running moves, then remove replication throttles")
    ] = False,
    throttle: Annotated[
        int | None, typer.Option("--throttle", help="replication throttle in B/s while moving; removed when done")
    ] = None,
    timeout: Annotated[
        float, typer.Option("--timeout", help="seconds to wait for completion", callback=seconds_option())
    ] = 600,
    bootstrap_server: BootstrapOpt = None,
    zookeeper: ZkOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Move partition replicas (kafka-reassign-partitions.sh): --generate a plan, or --plan FILE [--execute]."""
    from rich.progress import Progress

    from clusterctl.errors import UsageError
    from clusterctl.kafka import reassign as ra
    from clusterctl.output import emit, info

    bootstrap = bootstrap_servers(bootstrap_server)
    if verify:
        if plan is not None or generate or execute:
            raise UsageError("--verify takes no plan: it waits for running moves and removes throttles")
        seconds = ra.verify(bootstrap, zk_connect(zookeeper), topic, timeout)
        if as_json:
            emit({"topic": topic, "seconds": seconds, "throttle_removed": True}, as_json=True)
        else:
            info(f"no moves running; replication throttles removed ({seconds}s)")
        return
    if (plan is None) == (not generate):
        raise UsageError("give exactly one of --plan FILE or --generate --brokers 1,2,3")
    if throttle is not None and not execute:
        raise UsageError("--throttle applies to --execute")
    if generate:
        if not brokers:
            raise UsageError("--generate needs --brokers 1,2,3")
        try:
            ids = [int(b) for b in brokers.split(",") if b.strip()]
        except ValueError:
            raise UsageError(f"--brokers expects ids like 1,2,3, got {brokers!r}") from None
        moves = ra.generate(bootstrap, topic, ids)
    else:
        assert plan is not None
        moves = ra.read_plan(plan)
    if not execute:
        ra.validate(bootstrap, topic, moves)
        doc = ra.plan_doc(moves)
        if as_json:
            emit(doc, as_json=True)
        else:
            info("proposed plan (save it and pass --plan FILE --execute, or add --execute):")
            typer.echo(json.dumps(doc))
        return
    with Progress(transient=True) as progress:
        task = progress.add_task(f"moving {len(moves)} partitions of {topic}", total=len(moves))
        result = ra.execute(
            bootstrap, zk_connect(zookeeper), topic, moves, throttle=throttle, timeout=timeout,
            on_progress=lambda done, total: progress.update(task, completed=done, total=total),
        )  # fmt: skip
    if as_json:
        emit(result, as_json=True)
    else:
        extra = f" (throttled at {throttle} B/s; throttle removed)" if throttle is not None else ""
        info(f"reassignment of {result.moved} partitions of {topic} finished in {result.seconds}s{extra}")


def register(app: typer.Typer) -> None:
    """Attach `chaos`, `leader` and `reassign` to the root app."""
    app.add_typer(chaos_app)
    app.add_typer(leader_app)
    app.command("reassign")(reassign)
