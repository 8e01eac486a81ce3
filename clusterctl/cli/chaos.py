"""CLI for the 'chaos' noun: faults on the real containers, heal, rolling restart."""

from typing import Annotated, Any

import typer

from clusterctl.cli.common import (
    BootstrapOpt,
    JsonOpt,
    bootstrap_servers,
    finite_option,
    get_spec,
    seconds_option,
    timeout_option,
)

chaos_app = typer.Typer(
    name="chaos", help="Break the cluster on purpose (Docker SDK on its containers).", no_args_is_help=True
)

BrokerArg = Annotated[int, typer.Argument(help="broker id (1..N of the spec)")]
ZkArg = Annotated[int, typer.Argument(help="ZooKeeper node id (1..N of the spec)")]
ForOpt = Annotated[
    float,
    typer.Option(
        "--for", help="seconds until the fault heals itself (at most a day)", callback=seconds_option(allow_zero=True)
    ),
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
def cmd_chaos_kill_broker(broker: BrokerArg, as_json: JsonOpt = False) -> None:
    """SIGKILL a broker's container (like kill -9: no controlled shutdown)."""
    from clusterctl.chaos import faults

    _emit_faults([faults.kill_broker(get_spec(), broker)], as_json)


@chaos_app.command("stop-broker")
def cmd_chaos_stop_broker(broker: BrokerArg, as_json: JsonOpt = False) -> None:
    """Graceful stop: SIGTERM, then up to kafka.stop_grace_seconds for the controlled shutdown."""
    from clusterctl.chaos import faults

    _emit_faults([faults.stop_broker(get_spec(), broker)], as_json)


@chaos_app.command("start-broker")
def cmd_chaos_start_broker(broker: BrokerArg, as_json: JsonOpt = False) -> None:
    """Start a stopped or killed broker container."""
    from clusterctl.chaos import faults

    _emit_faults([faults.start_broker(get_spec(), broker)], as_json)


@chaos_app.command("restart-broker")
def cmd_chaos_restart_broker(broker: BrokerArg, as_json: JsonOpt = False) -> None:
    """Graceful stop then start of one broker."""
    from clusterctl.chaos import faults

    _emit_faults([faults.restart_broker(get_spec(), broker)], as_json)


@chaos_app.command("pause-broker")
def cmd_chaos_pause_broker(broker: BrokerArg, seconds: ForOpt = 10.0, as_json: JsonOpt = False) -> None:
    """SIGSTOP a broker (docker pause) for --for seconds, then unpause (also on Ctrl-C)."""
    from clusterctl.chaos import faults
    from clusterctl.output import info

    spec = get_spec()
    faults.broker_target(spec, broker)
    if seconds > 0:
        info(f"pausing broker {broker} for {seconds:g}s (Ctrl-C unpauses early)")
    _emit_faults(faults.pause_broker(spec, broker, seconds), as_json)


@chaos_app.command("kill-leader")
def cmd_chaos_kill_leader(
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
def cmd_chaos_partition_node(
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


NodeArg = Annotated[str, typer.Argument(help="service (kafka2, zk1) or container name")]
ToOpt = Annotated[str | None, typer.Option("--to", help="only towards these nodes (kafka1,zk2); default all")]
NetForOpt = Annotated[
    float | None,
    typer.Option("--for", help="seconds until the fault heals itself (default: until `chaos heal`)",
                 callback=seconds_option()),
]  # fmt: skip
PercentOpt = Annotated[
    float, typer.Option("--percent", help="share of packets, 0 < P <= 100", callback=finite_option())
]


def _degrade(
    node: str, kind: str, value: float, jitter: float, to: str | None, seconds: float | None, as_json: bool
) -> None:
    from clusterctl.chaos import degrade
    from clusterctl.output import info

    spec = get_spec()
    fault = degrade.NetFault(kind, value, jitter, [t for t in (to or "").split(",") if t])
    degrade.check(fault)
    if seconds is not None:
        info(f"{fault.describe()} on {node} for {seconds:g}s (Ctrl-C heals early)")
    _emit_faults(degrade.degrade_for(spec, node, fault, seconds), as_json)


@chaos_app.command("delay")
def cmd_chaos_delay(
    node: NodeArg,
    ms: Annotated[
        float, typer.Option("--ms", help="added delay of each packet the node sends, ms", callback=finite_option())
    ],
    jitter: Annotated[
        float,
        typer.Option("--jitter", help="± this many ms, uniformly (reorders packets)", callback=finite_option()),
    ] = 0.0,
    to: ToOpt = None,
    seconds: NetForOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Delay what NODE sends (netem, or an NFQUEUE handler where the kernel has no netem)."""
    _degrade(node, "delay", ms, jitter, to, seconds, as_json)


@chaos_app.command("loss")
def cmd_chaos_loss(
    node: NodeArg, percent: PercentOpt, to: ToOpt = None, seconds: NetForOpt = None, as_json: JsonOpt = False
) -> None:
    """Drop a random share of what NODE sends (netem, or an iptables statistic rule)."""
    _degrade(node, "loss", percent, 0.0, to, seconds, as_json)


@chaos_app.command("rate")
def cmd_chaos_rate(
    node: NodeArg,
    kbit: Annotated[float, typer.Option("--kbit", help="bandwidth limit, kbit/s", callback=finite_option())],
    to: ToOpt = None,
    seconds: NetForOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Limit the bandwidth NODE sends with (netem, or a tbf/htb qdisc)."""
    _degrade(node, "rate", kbit, 0.0, to, seconds, as_json)


@chaos_app.command("duplicate")
def cmd_chaos_duplicate(
    node: NodeArg, percent: PercentOpt, to: ToOpt = None, seconds: NetForOpt = None, as_json: JsonOpt = False
) -> None:
    """Send a random share of NODE's packets twice (netem, or an NFQUEUE handler)."""
    _degrade(node, "duplicate", percent, 0.0, to, seconds, as_json)


@chaos_app.command("corrupt")
def cmd_chaos_corrupt(
    node: NodeArg, percent: PercentOpt, to: ToOpt = None, seconds: NetForOpt = None, as_json: JsonOpt = False
) -> None:
    """Corrupt a random share of NODE's packets (netem, or an NFQUEUE handler); receivers drop them."""
    _degrade(node, "corrupt", percent, 0.0, to, seconds, as_json)


ServiceArg = Annotated[str, typer.Argument(help="a ZooKeeper node, controller or broker: its service (zk1, kafka2)")]


@chaos_app.command("kill")
def cmd_chaos_kill(node: ServiceArg, as_json: JsonOpt = False) -> None:
    """SIGKILL a node's container (on a swarm: its task's, on the host it runs on; the swarm starts a new task
    after its restart delay)."""
    from clusterctl.chaos import faults

    spec = get_spec()
    _emit_faults([faults.kill("kill", *faults.service_target(spec, node), spec)], as_json)


@chaos_app.command("stop")
def cmd_chaos_stop(node: ServiceArg, as_json: JsonOpt = False) -> None:
    """Stop a node's container: SIGTERM, then its grace (kafka.stop_grace_seconds for a broker, 10 s otherwise)."""
    from clusterctl.chaos import faults

    spec = get_spec()
    target, name = faults.service_target(spec, node)
    grace = spec.kafka.stop_grace_seconds if target.startswith("broker") else 10
    _emit_faults([faults.stop("stop", target, name, grace_s=grace, spec=spec)], as_json)


@chaos_app.command("pause")
def cmd_chaos_pause(node: ServiceArg, seconds: ForOpt = 10.0, as_json: JsonOpt = False) -> None:
    """SIGSTOP a node's container (docker pause) for --for seconds, then unpause (also on Ctrl-C)."""
    from clusterctl.chaos import faults
    from clusterctl.output import info

    spec = get_spec()
    target, name = faults.service_target(spec, node)
    if seconds > 0:
        info(f"pausing {node} for {seconds:g}s (Ctrl-C unpauses early)")
    _emit_faults(faults.pause_for(spec, target, name, seconds), as_json)


@chaos_app.command("drain-node")
def cmd_chaos_drain_node(
    node: Annotated[str, typer.Argument(help="a swarm node: its id (or a unique prefix), hostname or address")],
    as_json: JsonOpt = False,
) -> None:
    """Swarm: drain a node; its tasks stop and stay pending (pinned to their rack) until `chaos heal`. Refused when
    another node has the same rack label (the tasks would start there without their volumes)."""
    from clusterctl.chaos import swarm_faults

    _emit_faults(swarm_faults.drain_node(get_spec(), node), as_json)


@chaos_app.command("kill-zk")
def cmd_chaos_kill_zk(zk: ZkArg, as_json: JsonOpt = False) -> None:
    """SIGKILL a ZooKeeper node's container."""
    from clusterctl.chaos import faults

    _emit_faults([faults.kill_zk(get_spec(), zk)], as_json)


@chaos_app.command("stop-zk")
def cmd_chaos_stop_zk(zk: ZkArg, as_json: JsonOpt = False) -> None:
    """Stop a ZooKeeper node (SIGTERM, 10 s grace)."""
    from clusterctl.chaos import faults

    _emit_faults([faults.stop_zk(get_spec(), zk)], as_json)


@chaos_app.command("start-zk")
def cmd_chaos_start_zk(zk: ZkArg, as_json: JsonOpt = False) -> None:
    """Start a stopped or killed ZooKeeper node."""
    from clusterctl.chaos import faults

    _emit_faults([faults.start_zk(get_spec(), zk)], as_json)


@chaos_app.command("kill-controller")
def cmd_chaos_kill_controller(as_json: JsonOpt = False) -> None:
    """SIGKILL the active controller: the KRaft quorum leader, or the controller broker in ZooKeeper mode."""
    from clusterctl.chaos import faults

    _emit_faults([faults.kill_controller(get_spec())], as_json)


@chaos_app.command("kill-controller-quorum")
def cmd_chaos_kill_controller_quorum(as_json: JsonOpt = False) -> None:
    """KRaft: SIGKILL a majority of the controller voters (the leader first); no leader can be elected."""
    from clusterctl.chaos import faults

    _emit_faults(faults.kill_controller_quorum(get_spec()), as_json)


@chaos_app.command("start-controller")
def cmd_chaos_start_controller(
    node_id: Annotated[int, typer.Argument(help="voter node id (101.. dedicated, broker id when combined)")],
    as_json: JsonOpt = False,
) -> None:
    """KRaft: start a stopped or killed controller voter."""
    from clusterctl.chaos import faults

    _emit_faults([faults.start_controller(get_spec(), node_id)], as_json)


@chaos_app.command("wipe-controller")
def cmd_chaos_wipe_controller(
    node_id: Annotated[int | None, typer.Argument(help="voter node id (101..); default: the active controller")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Dynamic quorum (kraft.quorum: dynamic): SIGKILL a controller and remove its data volume, as if its disk were
    gone. `chaos heal` starts a replacement on a fresh disk and makes it a voter in place of the dead entry."""
    from clusterctl.chaos import faults
    from clusterctl.chaos.controllers import wipe_controller

    spec = get_spec()
    _emit_faults([wipe_controller(spec, faults.active_controller(spec) if node_id is None else node_id)[0]], as_json)


@chaos_app.command("kill-spark-worker")
def cmd_chaos_kill_spark_worker(
    worker: Annotated[int, typer.Argument(help="Spark worker (N of spark-workerN; spark.enabled)")],
    as_json: JsonOpt = False,
) -> None:
    """SIGKILL a Spark standalone worker's container: its executors and their running tasks are lost."""
    from clusterctl.chaos import faults

    _emit_faults([faults.kill_spark_worker(get_spec(), worker)], as_json)


@chaos_app.command("start-spark-worker")
def cmd_chaos_start_spark_worker(
    worker: Annotated[int, typer.Argument(help="Spark worker (N of spark-workerN; spark.enabled)")],
    as_json: JsonOpt = False,
) -> None:
    """Start a killed Spark worker container; it registers with the master again (`chaos heal` does it too)."""
    from clusterctl.chaos import faults

    _emit_faults([faults.start_spark_worker(get_spec(), worker)], as_json)


@chaos_app.command("fill-disk")
def cmd_chaos_fill_disk(node: NodeArg, as_json: JsonOpt = False) -> None:
    """Fill NODE's data volumes to 100% (needs storage.bounded_mb): a broker's log dir goes offline and it halts;
    `chaos heal` frees the space and restarts it."""
    from clusterctl.chaos import disk

    _emit_faults([disk.fill_disk(get_spec(), node)], as_json)


RackArg = Annotated[str, typer.Argument(help="a rack of deploy.racks, or the hostname of its swarm node")]


@chaos_app.command("kill-node")
def cmd_chaos_kill_node(rack: RackArg, as_json: JsonOpt = False) -> None:
    """Swarm: stop the Docker daemon of a rack's host (its stop_command): every task there gone at once.
    `chaos start-node` or `chaos heal` starts it again."""
    from clusterctl.chaos import nodes

    _emit_faults([nodes.kill_node(get_spec(), rack)], as_json)


@chaos_app.command("start-node")
def cmd_chaos_start_node(
    rack: RackArg,
    timeout: Annotated[float, timeout_option("seconds until its node is ready and its tasks run")] = 180.0,
    as_json: JsonOpt = False,
) -> None:
    """Swarm: start a killed host's daemon again (its start_command); waits until its tasks run."""
    from clusterctl.chaos import nodes

    _emit_faults([nodes.start_node(get_spec(), rack, timeout)], as_json)


@chaos_app.command("heal")
def cmd_chaos_heal(
    wait: Annotated[
        bool,
        typer.Option(
            "--wait/--no-wait", help="wait until brokers are registered, ZK nodes serve and Spark workers are alive"
        ),
    ] = True,
    timeout: Annotated[float, timeout_option("seconds to wait for that")] = 120.0,
    as_json: JsonOpt = False,
) -> None:
    """Undo every fault: free filled disks, unpause, reconnect, remove network degradations, start stopped
    containers (a wiped controller of a dynamic quorum on a fresh disk, made a voter again); then wait."""
    from clusterctl.chaos import recovery
    from clusterctl.errors import UsageError
    from clusterctl.output import err_console, info

    if timeout <= 0:
        raise UsageError("--timeout must be positive")
    from clusterctl.runtime import fault_records

    spec = get_spec()
    left = fault_records.still_applied(spec)
    for r in left:
        info(f"fault left applied: {r.line()}; healing it")
    results = recovery.heal_all(spec)
    waited = None
    if wait:
        with err_console.status("waiting for the healed cluster") as status:
            waited = recovery.wait_healed(spec, timeout, on_progress=lambda m: status.update(m))
    if as_json:
        from clusterctl.output import emit

        emit({"healed": results, "wait": waited, "left_behind": left}, as_json=True)
        return
    _emit_faults(results, False)
    if waited is not None:
        brokers = ",".join(map(str, waited.brokers)) or "-"
        zks = ",".join(map(str, waited.zk_serving)) or "-"
        info(f"brokers {brokers} registered and in every broker's metadata, ZK {zks} serving ({waited.seconds:.1f}s)")


@chaos_app.command("rolling-restart")
def cmd_chaos_rolling_restart(
    timeout: Annotated[float, timeout_option("seconds to wait for a full ISR after each broker")] = 300,
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


def register(app: typer.Typer) -> None:
    """Attach `chaos` to the root app."""
    app.add_typer(chaos_app)
