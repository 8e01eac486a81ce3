"""CLI for `ui`: the web console on this host (thin: resolve the cluster and token, then serve)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from clusterctl.cli.common import BootstrapOpt, ZkOpt

DEFAULT_PORT = 9000


def cmd_ui(
    port: Annotated[
        int | None, typer.Option("--port", "-p", help=f"port to serve on (default {DEFAULT_PORT})", show_default=False)
    ] = None,
    host: Annotated[
        str | None,
        typer.Option(
            "--host", help="address to bind (default 127.0.0.1; any other needs the token)", show_default=False
        ),
    ] = None,
    read_only: Annotated[bool, typer.Option("--read-only", help="no actions: pages only")] = False,
    print_url: Annotated[
        bool,
        typer.Option(
            "--print-url",
            help="print the console's address (with its token when one is needed) and exit: the cluster's "
            "kafka-manager console when the spec runs one and no --host/--port is given",
        ),
    ] = False,
    reports_dir: Annotated[
        Path, typer.Option("--reports-dir", help="where the Drills page finds scenario reports")
    ] = Path("reports"),
    public_name: Annotated[
        list[str] | None,
        typer.Option(
            "--public-name",
            metavar="HOST[:PORT]",
            help="a name browsers reach the console by besides its address (a reverse proxy or tunnel; "
            "repeatable): requests naming any other Host get 421",
        ),
    ] = None,
    kraft_quorum: Annotated[
        str | None,
        typer.Option(
            "--kraft-quorum",
            metavar="HOST:PORT[,...]",
            help="KRaft mode with -b: addresses answering DescribeQuorum (the spec's when it runs kraft mode)",
        ),
    ] = None,
    bootstrap_server: BootstrapOpt = None,
    zookeeper: ZkOpt = None,
) -> None:
    """A web console for the cluster: brokers, topics, groups and lag, znodes and drills, live; CMAK's actions."""
    from clusterctl.console.server import Listen, check_token, is_loopback, serve
    from clusterctl.errors import UsageError
    from clusterctl.output import info

    if port is not None and not 1 <= port <= 65535:
        raise UsageError(f"--port must be 1-65535, got {port}")
    if zookeeper is not None:
        from clusterctl.spec import validate

        validate.zk_connect(zookeeper)
    spec = _spec(required=bootstrap_server is None)
    token, token_from = _token(spec)

    if print_url:
        service = spec is not None and spec.kafka_manager.enabled and spec.manager_kind == "console"
        if service and host is None and port is None and bootstrap_server is None:
            assert spec is not None
            bind = spec.publish.bind_address
            need = None if is_loopback(bind) else check_token(bind, token)
            typer.echo(Listen(spec.topology.host, spec.kafka_manager.port, need).url)
        else:
            bind = host or "127.0.0.1"
            typer.echo(Listen(bind, port or DEFAULT_PORT, check_token(bind, token)).url)
        return

    target = _target(spec, bootstrap_server, zookeeper, kraft_quorum, reports_dir, read_only)
    bind = host or "127.0.0.1"
    listen = Listen(bind, port or DEFAULT_PORT, check_token(bind, token), public_names=tuple(public_name or ()))
    listen.served()  # a malformed --public-name is one line before anything listens
    # the address only: the token stays out of terminals' scrollback and CI logs (--print-url gives it on stdout)
    info(f"console for {target.cluster} at {listen.address}{' (read-only)' if read_only else ''}; Ctrl-C stops it")
    if listen.token:
        info(f"it needs its token ({token_from}): open the address `clusterctl ui --print-url` prints with the "
             "same --host/--port")  # fmt: skip
    serve(target, listen)


def _target(spec: Any, bootstrap: str | None, zookeeper: str | None, kraft_quorum: str | None, reports_dir: Path,
            read_only: bool) -> Any:  # fmt: skip
    """The cluster the console shows: -b's, else the spec's (in kraft mode with its quorum, without ZooKeeper)."""
    from clusterctl.console.data import ConsoleTarget
    from clusterctl.console.quorum import addresses

    quorum = addresses(kraft_quorum) if kraft_quorum else ()
    if bootstrap is not None:
        return ConsoleTarget(bootstrap, zookeeper, bootstrap, reports_dir, read_only, quorum)
    assert spec is not None
    if spec.kraft_mode and not quorum:
        from clusterctl.kafka.kraft.quorum import quorum_addresses

        quorum = tuple(f"{h}:{p}" for h, p in quorum_addresses(spec))
    from clusterctl.cli.common import state

    zk = None if spec.kraft_mode else (zookeeper if zookeeper is not None else spec.topology.zk_connect)
    nodes = tuple(sorted(spec.topology.node_services.items()))
    return ConsoleTarget(spec.topology.bootstrap_servers, zk, spec.name, reports_dir, read_only, quorum,
                         state.spec_path, nodes)  # fmt: skip


def _spec(required: bool) -> Any:
    """The spec (None when -b names the cluster and there is no valid spec)."""
    from clusterctl.cli.common import get_spec
    from clusterctl.errors import SpecError

    if required:
        return get_spec()
    try:
        return get_spec()
    except SpecError:
        return None


def _token(spec: Any) -> tuple[str | None, str]:
    """The console token and where it came from ($CLUSTERCTL_CONSOLE_TOKEN, else the rendered .env)."""
    import os

    from clusterctl.compose.render import ENV_FILE, existing_console_token
    from clusterctl.console.server import TOKEN_ENV

    token = os.environ.get(TOKEN_ENV)
    if token or spec is None:
        return token, f"${TOKEN_ENV}"
    return existing_console_token(spec.topology.compose_dir), f"{TOKEN_ENV} in {spec.topology.compose_dir / ENV_FILE}"


def register(app: typer.Typer) -> None:
    """Attach `ui` to the root app."""
    app.command("ui")(cmd_ui)
