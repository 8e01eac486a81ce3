"""CLI for the 'cluster' noun (thin: parse, call the domain layer, render through output)."""

from pathlib import Path
from typing import Annotated

import typer

from clusterctl.cli import lifecycle
from clusterctl.cli.common import BootstrapOpt, JsonOpt, bootstrap_servers, get_spec, state

# `cluster describe` (data plane): cluster id, controller and brokers as the cluster itself reports them
cluster_app = typer.Typer(name="cluster", help="What the running cluster reports about itself.", no_args_is_help=True)


@cluster_app.command("describe")
def describe(bootstrap_server: BootstrapOpt = None, as_json: JsonOpt = False) -> None:
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


cluster_app.command("quorum")(lifecycle.quorum)


def init(
    name: Annotated[str, typer.Argument(help="cluster name (compose project, container prefix)")] = "kafka-lab",
    profile: Annotated[
        str, typer.Option("--profile", help="image profile: default | wurstmeister | offline")
    ] = "default",
    engine: Annotated[
        str | None,
        typer.Option(
            "--engine",
            help="broker engine: kafka | tansu (offline default: kafka if its image is built, else tansu)",
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
    result = init_spec(path, name, profile, engine, brokers, zk_nodes, subnet, force)
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
            Column("ZooKeeper nodes", lambda r: r.spec["zookeeper"]["nodes"]),
            Column("Brokers", lambda r: r.spec["kafka"]["brokers"]),
            Column("Subnet", lambda r: r.spec["network"]["subnet"]),
            Column("kafka-manager", lambda r: r.spec["kafka_manager"]["enabled"]),
        ],
    )


def render(
    output_dir: Annotated[
        str | None,
        typer.Option(
            "--output-dir",
            help="directory to write into: new, empty or rendered before (default compose/<name>; `up` reads it)",
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Render compose/<name>/docker-compose.yml from the spec (atomically; checked by `docker compose config`)."""
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
    checked = "checked by docker compose config" if result.validated_by_compose else "compose v2 not found: unchecked"
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
            Column("IP", "ip"),
            Column("Host ports", "host_ports"),
        ],
    )


def register(app: typer.Typer) -> None:
    """Attach this noun's commands to the root app."""
    app.command("init")(init)
    app.command("render")(render)
    lifecycle.register(app)  # up, down, status, logs, images (cli/lifecycle.py)
    app.add_typer(cluster_app, name="cluster")
