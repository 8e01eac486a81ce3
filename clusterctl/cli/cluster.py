"""CLI for the 'cluster' noun (thin: parse, call the domain layer, render through output)."""

from __future__ import annotations

import typer

from clusterctl.cli import lifecycle
from clusterctl.cli.common import BootstrapOpt, JsonOpt, bootstrap_servers

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


def register(app: typer.Typer) -> None:
    """Attach this noun's commands to the root app."""
    lifecycle.register(app)  # up, down, status, logs, images (cli/lifecycle.py)
    app.add_typer(cluster_app, name="cluster")
