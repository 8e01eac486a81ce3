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
    bootstrap_server: BootstrapOpt = None,
    zookeeper: ZkOpt = None,
) -> None:
    """A web console for the cluster: brokers, topics, groups and lag, znodes and drills, live; CMAK's actions."""
    from clusterctl.console.data import ConsoleTarget
    from clusterctl.console.server import Listen, check_token, is_loopback, serve
    from clusterctl.errors import UsageError
    from clusterctl.output import info

    if port is not None and not 1 <= port <= 65535:
        raise UsageError(f"--port must be 1-65535, got {port}")
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

    if bootstrap_server is not None:
        target = ConsoleTarget(bootstrap_server, zookeeper, bootstrap_server, reports_dir, read_only)
    else:
        assert spec is not None
        from clusterctl.cli.common import state

        target = ConsoleTarget(
            spec.topology.bootstrap_servers, zookeeper or spec.topology.zk_connect, spec.name, reports_dir, read_only,
            state.spec_path,
        )  # fmt: skip
    bind = host or "127.0.0.1"
    listen = Listen(bind, port or DEFAULT_PORT, check_token(bind, token), public_names=tuple(public_name or ()))
    listen.served()  # a malformed --public-name is one line before anything listens
    # the address only: the token stays out of terminals' scrollback and CI logs (--print-url gives it on stdout)
    info(f"console for {target.cluster} at {listen.address}{' (read-only)' if read_only else ''}; Ctrl-C stops it")
    if listen.token:
        info(f"it needs its token ({token_from}): open the address `clusterctl ui --print-url` prints with the "
             "same --host/--port")  # fmt: skip
    serve(target, listen)


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
