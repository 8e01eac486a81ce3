"""CLI for the 'cluster' noun: init, render, up, down, status, logs and `cluster describe|quorum` (`quorum` is
its own noun, cli/quorum.py).

Thin: parse, call the domain layer (spec/, compose/, runtime's `Cluster`), render through output.
"""

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from clusterctl.cli.common import BootstrapOpt, JsonOpt, bootstrap_servers, get_spec, state, timeout_option
from clusterctl.cli.quorum import cmd_quorum
from clusterctl.errors import ClusterctlError, UsageError
from clusterctl.output import Column, emit, info
from clusterctl.spec import validate

if TYPE_CHECKING:
    from clusterctl.runtime.cluster import Cluster, UpResult
    from clusterctl.runtime.health import HealthReport
    from clusterctl.runtime.status import ClusterStatus
    from clusterctl.spec.initfile import InitResult
    from clusterctl.spec.model import ClusterSpec

# `cluster describe` (data plane): cluster id, controller and brokers as the cluster itself reports them
cluster_app = typer.Typer(name="cluster", help="What the running cluster reports about itself.", no_args_is_help=True)


def _cluster() -> "Cluster":
    from clusterctl.runtime.cluster import Cluster

    return Cluster(get_spec())


@cluster_app.command("describe")
def cmd_cluster_describe(bootstrap_server: BootstrapOpt = None, as_json: JsonOpt = False) -> None:
    """Cluster id, controller and brokers (id, host:port, rack)."""
    from clusterctl.kafka.admin import cluster_info
    from clusterctl.output import Column, emit

    info = cluster_info(bootstrap_servers(bootstrap_server))
    if as_json:
        emit(info, as_json=True)
        return
    emit(info, as_json=False, kv=[Column("Cluster id", "cluster_id"), Column("Controller", "controller_id")])
    cols = [Column("Broker", "id", justify="right"), Column("Address", "address"), Column("Rack", "rack")]
    emit(info.brokers, as_json=False, columns=cols)


def cmd_init(
    name: Annotated[str, typer.Argument(help="cluster name (compose project, container prefix)")] = "kafka-lab",
    profile: Annotated[
        str | None,
        typer.Option(
            "--profile",
            help="image profile: default | wurstmeister | offline | apache (Apache's official apache/kafka 4.x "
            "image, KRaft only; --mode defaults to kraft) (default: $CLUSTERCTL_PROFILE, else default when "
            "a registry answers, else offline)",
            show_default=False,
        ),
    ] = None,
    engine: Annotated[
        str | None,
        typer.Option(
            "--engine",
            help="broker engine: kafka (default: Apache Kafka) | tansu (a one-broker Kafka-protocol imitation, "
            "no replication: a quick mode only)",
            show_default=False,
        ),
    ] = None,
    mode: Annotated[
        str | None,
        typer.Option(
            "--mode",
            help="zookeeper (a ZooKeeper ensemble) | kraft (a controller quorum) (default: zookeeper; kraft with "
            "profile apache)",
            show_default=False,
        ),
    ] = None,
    kafka_version: Annotated[
        str | None,
        typer.Option(
            "--kafka-version",
            help="the Kafka release to run, e.g. 3.9.2 or 4.4.0: offline profile clusterctl/kafka:<version> "
            "(default: the newest built that the mode runs), profile apache apache/kafka:<version> (3.7.0 on; "
            "default 4.4.0)",
            show_default=False,
        ),
    ] = None,
    brokers: Annotated[int | None, typer.Option("--brokers", help="broker count 1-9 (default 3)")] = None,
    zk_nodes: Annotated[int | None, typer.Option("--zk-nodes", help="ZooKeeper nodes, odd 1-9 (default 3)")] = None,
    subnet: Annotated[str | None, typer.Option("--subnet", help="RFC1918 subnet (default 10.77.0.0/24)")] = None,
    force: Annotated[bool, typer.Option("--force", help="overwrite an existing spec file")] = False,
    output: Annotated[
        str | None, typer.Option("--output", "-o", help="where to write (default: the --spec path)")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Write a commented, validated spec file (clusterctl.yaml)."""
    from clusterctl.errors import UsageError
    from clusterctl.output import Column, emit, info
    from clusterctl.spec.initfile import init_spec

    if engine is not None and engine not in ("kafka", "tansu"):
        raise UsageError(f"--engine must be kafka or tansu, got {engine!r}")
    if output is not None and not output.strip():
        raise UsageError("--output must not be empty")
    path = Path(output) if output is not None else state.spec_path
    reason = None
    if profile is None:
        profile, reason = _auto_profile()
    result = init_spec(
        path, name, profile, engine, brokers, zk_nodes, subnet, force, reason, mode=mode, kafka_version=kafka_version
    )
    for note in result.notes:
        info(note)
    if as_json:
        emit(result, as_json=True)
        return
    info(f"wrote {result.path}; next: clusterctl{'' if path == state.spec_path else f' -s {path}'} render")
    emit(
        result,
        as_json=False,
        kv=[
            Column("Spec", "path"),
            Column("Cluster", lambda r: r.spec["name"]),
            Column("Profile", "profile"),
            Column("Engine", "engine"),
            Column("Mode", lambda r: r.spec["kafka"]["mode"]),
            Column("Kafka version", _init_kafka_version),
            Column(
                "ZooKeeper nodes", lambda r: r.spec["zookeeper"]["nodes"] if r.spec["kafka"]["mode"] != "kraft" else "-"
            ),
            Column("Brokers", lambda r: r.spec["kafka"]["brokers"]),
            Column("Subnet", lambda r: r.spec["network"]["subnet"]),
            Column("kafka-manager", lambda r: r.spec["kafka_manager"]["enabled"]),
        ],
    )


def _init_kafka_version(r: "InitResult") -> str:
    """kafka.version, else what the profile runs: the newest built (offline) or the profile's own image."""
    from clusterctl.spec.profiles import PROFILES

    if r.engine != "kafka":
        return "-"
    if r.spec["kafka"]["version"]:
        return str(r.spec["kafka"]["version"])
    return "newest built" if r.profile == "offline" else f"the profile's image ({PROFILES[r.profile].kafka})"


def _auto_profile() -> tuple[str, str]:
    """$CLUSTERCTL_PROFILE, else a fast registry probe through the Docker engine decides (spec.initfile)."""
    import os

    from clusterctl.spec.initfile import PROFILE_ENV, choose_profile

    def probe(image: str) -> tuple[bool, str]:
        from clusterctl.runtime.pull import probe_registry

        answer = probe_registry(image)
        return answer.reachable, answer.reason

    choice = choose_profile(os.environ.get(PROFILE_ENV), probe)
    return choice.profile, choice.reason


def cmd_render(
    output_dir: Annotated[
        str | None,
        typer.Option(
            "--output-dir",
            help="directory to write into: new, empty or rendered before (default compose/<name>; `up` reads it)",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Render compose/<name>/docker-compose.yml (deploy.target swarm: docker-stack.yml) from the spec, atomically,
    checked by `docker compose config` (`docker stack config`)."""
    from clusterctl.compose import render as rendering
    from clusterctl.errors import UsageError
    from clusterctl.output import Column, emit, info

    if output_dir is not None and not output_dir.strip():
        raise UsageError("--output-dir must not be empty")
    out = Path(output_dir) if output_dir is not None else None
    result = rendering.render(get_spec(), out, protect=state.spec_path)
    if as_json:
        emit(result, as_json=True)
        return
    tool = "docker stack config" if result.target == "swarm" else "docker compose config"
    checked = f"checked by {tool}" if result.validated_by_compose else f"{tool} not found: unchecked"
    info(f"wrote {', '.join(result.files)} ({checked}; kafka-manager secret: {result.secret})")
    emit(
        result.services,
        as_json=False,
        title=f"{result.cluster}: profile {result.profile}, engine {result.engine}, network {result.network} "
        f"{result.subnet}",
        columns=[
            Column("Service", "service"),
            Column("Role", "role"),
            Column("Image", "image"),
            Column("Rack", "rack") if result.target == "swarm" else Column("IP", "ip"),
            Column("Host ports", "host_ports"),
        ],
    )


def cmd_up(
    timeout: Annotated[float, timeout_option("seconds to wait for a healthy cluster, counted after the pull")] = 180.0,
    keep_on_failure: Annotated[
        bool, typer.Option("--keep-on-failure", help="leave containers running when the cluster does not get healthy")
    ] = False,
    pull: Annotated[
        str,
        typer.Option("--pull", help="registry images: never | missing | always (the offline profile never pulls)"),
    ] = "missing",
    as_json: JsonOpt = False,
) -> None:
    """Pull missing images, start the rendered cluster and wait until it is really healthy."""
    if timeout <= 0:
        raise UsageError("--timeout must be positive")
    if pull not in ("never", "missing", "always"):
        raise UsageError(f"--pull must be never, missing or always, got {pull!r}")
    from clusterctl.cli.spinner import spinner

    cluster = _cluster()
    spec = cluster.spec
    _report_left_faults(spec)
    if spec.monitoring.enabled:
        from clusterctl.images.jmx_exporter import ensure_agent

        ensure_agent(spec.monitoring.exporter_version)
    with spinner() as progress:
        task = progress.add_task(f"starting {cluster.project}", total=None)

        def pulling(image: str, done: int, total: int | None) -> None:
            size = f"{done / 1e6:.0f}/{total / 1e6:.0f} MB" if total else f"{done / 1e6:.0f} MB"
            progress.update(task, description=f"pulling {image}: {size}", completed=done, total=total)

        def show(report: "HealthReport", elapsed: float) -> None:
            waiting = ", ".join(report.missing[:4]) + (" ..." if len(report.missing) > 4 else "")
            progress.update(task, description=f"waiting for: {waiting}" if waiting else "healthy", total=None)

        result = cluster.up(timeout, keep_on_failure=keep_on_failure, on_report=show, pull=pull, on_pull=pulling)
    if as_json:
        emit(result, as_json=True)
        return
    emit(
        result,
        as_json=False,
        kv=_up_fields(spec, result),
        title="cluster up (KRaft)" if spec.kraft_mode else "cluster up",
    )
    if result.manager:
        info(result.manager)
    for f in result.formatted:
        if f.flag == "--no-initial-controllers":
            info(f"{f.service} has a fresh disk: an observer until `clusterctl quorum add-controller {f.node_id}`")


def _report_left_faults(spec: "ClusterSpec") -> None:
    """One line per pause or cut a killed process left applied (runtime.fault_records)."""
    from clusterctl.runtime import fault_records

    for r in fault_records.still_applied(spec):
        info(f"fault left applied: {r.line()}; `clusterctl chaos heal` undoes it")


def _up_fields(spec: "ClusterSpec", result: "UpResult") -> list[Column]:
    fields = [Column("Cluster", "project"), Column("Healthy after", lambda r: f"{r.seconds_to_healthy:.1f}s")]
    if result.pulled:
        fields.append(Column("Pulled first", lambda r: f"{', '.join(r.pulled)} in {r.pull_seconds:.1f}s"))
    if spec.kraft_mode:
        fields += [
            Column("Controller quorum", lambda r: f"voters {r.quorum_voters}, leader {r.controller}"),
            Column("Brokers unfenced", "brokers_registered"),
        ]
        if result.formatted:  # kraft.quorum dynamic: controllers formatted before their first start
            fields.append(Column("Formatted", lambda r: ", ".join(f"{f.service} {f.flag}" for f in r.formatted)))
    else:
        fields.append(Column("ZooKeeper", lambda r: f"{r.zk_serving}/{r.zk_nodes} serving, leader zk{r.zk_leader}"))
        if spec.kafka.engine == "kafka":
            fields += [Column("Brokers registered", "brokers_registered"), Column("Controller", "controller")]
        else:
            fields.append(Column("Broker (tansu)", lambda r: f"answers on {spec.topology.bootstrap_servers}"))
    for name, level in result.features.items():
        changed = next((c for c in result.features_changed if c.startswith(f"{name} ")), None)
        fields.append(Column(name, _feature_cell(level, changed)))
    if result.manager_url:
        fields.append(Column(f"kafka-manager ({spec.manager_kind})", "manager_url"))
    return fields


def _feature_cell(level: int, changed: str | None) -> Callable[[Any], str]:
    was = changed.split(" ")[1] if changed else None  # "NAME OLD -> NEW"
    return lambda _r: f"{level} (was {was}: finalized by this up)" if changed else str(level)


def cmd_down(
    volumes: Annotated[bool, typer.Option("--volumes", "-v", help="also remove the named volumes (all data)")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Stop and remove the cluster's containers and network (and volumes with --volumes)."""
    from clusterctl.cli.spinner import spinner

    cluster = _cluster()
    with spinner() as progress:
        progress.add_task(f"stopping {cluster.project}", total=None)
        result = cluster.down(volumes)
    if as_json:
        emit(result, as_json=True)
        return
    if not (result.containers_removed or result.networks_removed or result.volumes_removed):
        info(f"nothing to remove for {cluster.project}")
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


def cmd_status(as_json: JsonOpt = False) -> None:
    """Containers, ZooKeeper Mode per node, quorum, registered brokers, the controller, and a KRaft migration's
    phase when one is recorded beside the spec."""
    cluster = _cluster()
    result = cluster.status(state.spec_path)
    if as_json:
        emit(result, as_json=True)
        return
    render_status(result, cluster.spec)


def render_status(result: "ClusterStatus", spec: "ClusterSpec") -> None:
    """`status`'s tables and summary lines."""
    from rich.text import Text

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
            *([Column("Node", "node"), Column("Rack", "rack")] if spec.swarm else []),
        ],
    )
    if result.controllers:
        from clusterctl.cli.quorum import quorum_columns

        columns = quorum_columns(spec.kraft.quorum == "dynamic")
        emit(result.controllers, as_json=False, title="controller quorum", columns=columns)
    if result.brokers:
        cols = [Column("Broker", "broker", justify="right"), Column("Registered", "registered"),
                Column("Fenced", "fenced"), Column("State", "state")]  # fmt: skip
        emit(result.brokers, as_json=False, title="brokers", columns=cols)
    for line in result.summary:
        style = "bold red" if line.startswith(("quorum lost", "split brain")) else ""
        emit(Text(line, style=style), as_json=False)
    if result.manager_url:
        emit(Text(f"kafka-manager ({result.manager}): {result.manager_url}"), as_json=False)
    if result.migration is not None:
        emit(Text(result.migration.line, style="" if result.migration.finished else "bold"), as_json=False)


def cmd_logs(
    service: Annotated[str | None, typer.Argument(help="service (zk1, kafka2, ...); default: all")] = None,
    follow: Annotated[bool, typer.Option("--follow", "-f", help="keep streaming new lines")] = False,
    tail: Annotated[
        int | None, typer.Option("--tail", "-n", help="only the last N lines per service (0 to 1000000)")
    ] = None,
    timestamps: Annotated[bool, typer.Option("--timestamps", "-t", help="prefix lines with timestamps")] = False,
) -> None:
    """Container logs of one service or all (docker compose logs)."""
    if tail is not None:
        validate.at_most(tail, "--tail", validate.MAX_LOG_LINES, minimum=0)
    cluster = _cluster()
    if service is not None:
        cluster.container_name(service)  # NotFoundError naming the services
    args = ["--no-color", *(["--follow"] if follow else []), *(["--tail", str(tail)] if tail is not None else [])]
    rc = cluster.logs(service, *args, *(["--timestamps"] if timestamps else []))
    if rc != 0:
        raise ClusterctlError(f"docker compose logs exited with status {rc}", exit_code=rc)


cluster_app.command("quorum")(cmd_quorum)


def register(app: typer.Typer) -> None:
    """Attach this noun's commands to the root app."""
    app.command("init")(cmd_init)
    app.command("render")(cmd_render)
    app.command("up")(cmd_up)
    app.command("down")(cmd_down)
    app.command("status")(cmd_status)
    app.command("logs")(cmd_logs)
    app.add_typer(cluster_app, name="cluster")
