"""CLI: up, down, status, logs and the `images` sub-app (attached by cli/cluster.py)."""

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from clusterctl.cli.common import JsonOpt, get_spec, seconds_option
from clusterctl.env import KAFKA_DIST_ENV
from clusterctl.errors import ClusterctlError, NotFoundError, UsageError
from clusterctl.output import Column, emit, format_time, info

if TYPE_CHECKING:
    from rich.progress import Progress

    from clusterctl.runtime.health import HealthReport

images_app = typer.Typer(help="Build and list the offline images (no registry needed).", no_args_is_help=True)


def _progress() -> "Progress":
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    from clusterctl.output import err_console

    return Progress(
        SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=err_console, transient=True
    )


def up(
    timeout: Annotated[
        float, typer.Option("--timeout", help="seconds to wait for a healthy cluster", callback=seconds_option())
    ] = 180.0,
    keep_on_failure: Annotated[
        bool, typer.Option("--keep-on-failure", help="leave containers running when the cluster does not get healthy")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Start the rendered cluster and wait until it is really healthy (quorum + leader, brokers, controller)."""
    if timeout <= 0:
        raise UsageError("--timeout must be positive")
    from clusterctl.runtime import cluster

    spec = get_spec()
    with _progress() as progress:
        task = progress.add_task(f"starting {spec.topology.project}", total=None)

        def show(report: "HealthReport", elapsed: float) -> None:
            waiting = ", ".join(report.missing[:4]) + (" ..." if len(report.missing) > 4 else "")
            progress.update(task, description=f"waiting for: {waiting}" if waiting else "healthy")

        result = cluster.up(spec, timeout, keep_on_failure, on_report=show)
    if as_json:
        emit(result, as_json=True)
        return
    fields = [Column("Cluster", "project"), Column("Healthy after", lambda r: f"{r.seconds_to_healthy:.1f}s")]
    if spec.kraft_mode:
        fields += [
            Column("Controller quorum", lambda r: f"voters {r.quorum_voters}, leader {r.controller}"),
            Column("Brokers unfenced", "brokers_registered"),
        ]
        emit(result, as_json=False, kv=fields, title="cluster up (KRaft)")
        return
    fields.append(Column("ZooKeeper", lambda r: f"{r.zk_serving}/{r.zk_nodes} serving, leader zk{r.zk_leader}"))
    if spec.kafka.engine == "kafka":
        fields += [Column("Brokers registered", "brokers_registered"), Column("Controller", "controller")]
    else:
        fields.append(Column("Broker (tansu)", lambda r: f"answers on {spec.topology.bootstrap_servers}"))
    emit(result, as_json=False, kv=fields, title="cluster up")


def down(
    volumes: Annotated[bool, typer.Option("--volumes", "-v", help="also remove the named volumes (all data)")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Stop and remove the cluster's containers and network (and volumes with --volumes)."""
    from clusterctl.runtime import cluster

    spec = get_spec()
    with _progress() as progress:
        progress.add_task(f"stopping {spec.topology.project}", total=None)
        result = cluster.down(spec, volumes)
    if as_json:
        emit(result, as_json=True)
        return
    if not (result.containers_removed or result.networks_removed or result.volumes_removed):
        info(f"nothing to remove for {spec.topology.project}")
    emit(
        result,
        as_json=False,
        title="cluster down",
        kv=[
            Column("Containers removed", lambda r: len(r.containers_removed)),
            Column("Networks removed", "networks_removed"),
            Column("Volumes removed", "volumes_removed"),
            Column("Volumes kept", "volumes_kept"),
        ],
    )


def status(as_json: JsonOpt = False) -> None:
    """Containers, ZooKeeper Mode per node, quorum, registered brokers and the controller."""
    from rich.text import Text

    from clusterctl.runtime import cluster

    spec = get_spec()
    result = cluster.status(spec)
    if as_json:
        emit(result, as_json=True)
        return
    emit(
        result.services,
        as_json=False,
        title=f"cluster {spec.name}",
        columns=[
            Column("Service", "service"),
            Column("Role", "role"),
            Column("State", "state"),
            Column("Health", "health"),
            Column("IP", "ip"),
            Column("Host port", "host_port"),
            *([] if spec.kraft_mode else [Column("ZK mode", "zk_mode")]),
        ],
    )
    if result.controllers:
        emit(result.controllers, as_json=False, title="controller quorum", columns=QUORUM_COLUMNS)
    if result.brokers:
        cols = [Column("Broker", "broker", justify="right"), Column("Registered", "registered"),
                Column("Fenced", "fenced"), Column("State", "state")]  # fmt: skip
        emit(result.brokers, as_json=False, title="brokers", columns=cols)
    for line in result.summary:
        style = "bold red" if line.startswith(("quorum lost", "split brain")) else ""
        emit(Text(line, style=style), as_json=False)


QUORUM_COLUMNS = [
    Column("Node", "node_id", justify="right"),
    Column("Role", "role"),
    Column("Service", "service"),
    Column("Log end offset", "log_end_offset", justify="right"),
    Column("Lag", "lag", justify="right"),
    Column("Last fetch ms ago", "last_fetch_ago_ms", justify="right"),
]


def quorum(
    timeout: Annotated[float, typer.Option("--timeout", help="seconds to wait for an answer")] = 3.0,
    as_json: JsonOpt = False,
) -> None:
    """KRaft: the controller quorum (describe-quorum): leader, epoch, voters and observers with their lag."""
    from clusterctl.kafka.kraft import quorum as kraft

    if timeout <= 0:
        raise UsageError("--timeout must be positive")
    v = kraft.quorum_view(get_spec(), timeout)
    if as_json:
        emit(v, as_json=True)
        return
    emit(
        v,
        as_json=False,
        title=f"controller quorum of {v.cluster}",
        kv=[
            Column("Leader", lambda r: f"{r.leader_id} ({r.leader_service})" if r.leader_id is not None else "none"),
            Column("Leader epoch", "leader_epoch"),
            Column("High watermark", "high_watermark"),
            Column("Answered by", "answered_by"),
        ],
    )
    emit(v.members, as_json=False, columns=QUORUM_COLUMNS)


def logs(
    service: Annotated[str | None, typer.Argument(help="service (zk1, kafka2, ...); default: all")] = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="keep streaming new lines")] = False,
    tail: Annotated[int | None, typer.Option("--tail", "-n", help="only the last N lines per service")] = None,
    timestamps: Annotated[bool, typer.Option("--timestamps", "-t", help="prefix lines with timestamps")] = False,
) -> None:
    """Container logs of one service or all (docker compose logs)."""
    from clusterctl.runtime import cluster, compose

    spec = get_spec()
    known = [s for s, _, _ in cluster.dk.cluster_services(spec)]
    if service is not None and service not in known:
        raise NotFoundError(f"no service {service!r} in cluster {spec.name}; services: {', '.join(known)}")
    if tail is not None and tail < 0:
        raise UsageError("--tail must be >= 0")
    args = ["logs", "--no-color"]
    if follow:
        args.append("--follow")
    if tail is not None:
        args += ["--tail", str(tail)]
    if timestamps:
        args.append("--timestamps")
    if service:
        args.append(service)
    rc = compose.passthrough(spec, *args)
    if rc != 0:
        raise ClusterctlError(f"docker compose logs exited with status {rc}", exit_code=rc)


@images_app.command("build")
def images_build(
    targets: Annotated[
        list[str] | None,
        typer.Argument(
            help="base, zookeeper, kafka, tansu, spark (default: zookeeper tansu, + kafka with --kafka-dist)"
        ),
    ] = None,
    kafka_dist: Annotated[
        Path | None,
        typer.Option(
            "--kafka-dist",
            help="Apache Kafka 3.x binary distribution (kafka_2.13-3.x.y.tgz); the image is tagged with its version",
            envvar=KAFKA_DIST_ENV,
            show_default=False,
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="rebuild even when inputs are unchanged (the base only if named)")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Build the offline images locally: Debian base via debootstrap, then ZooKeeper, Kafka, tansu, Spark (no pull)."""
    from clusterctl.images import build as images

    with _progress() as progress:
        task = progress.add_task("checking inputs", total=None)
        results = images.build_images(
            targets or [], kafka_dist, force, progress=lambda msg: progress.update(task, description=msg)
        )
    emit(
        results,
        as_json=as_json,
        title="images build",
        columns=[
            Column("Target", "target"),
            Column("Image", "image"),
            Column("Action", "action"),
            Column("Seconds", "seconds"),
            Column("Inputs hash", "inputs_hash"),
        ],
    )


@images_app.command("list")
def images_list(as_json: JsonOpt = False) -> None:
    """The offline images and whether each is built."""
    from clusterctl.images import build as images

    emit(
        images.list_images(),
        as_json=as_json,
        title="offline images",
        columns=[
            Column("Target", "target"),
            Column("Image", "image"),
            Column("Present", "present"),
            Column("Size MB", "size_mb"),
            Column("Created", "created", fmt=format_time),
            Column("Inputs hash", "inputs_hash"),
        ],
    )


def register(app: typer.Typer) -> None:
    """Attach up/down/status/logs and `images` to the root app."""
    app.command("up")(up)
    app.command("down")(down)
    app.command("status")(status)
    app.command("logs")(logs)
    app.command("quorum")(quorum)
    app.add_typer(images_app, name="images")
