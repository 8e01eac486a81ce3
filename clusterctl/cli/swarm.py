"""CLI for the 'swarm' noun (deploy.target swarm): the swarm's nodes as the spec's racks, and their labels."""

from typing import Annotated

import typer

from clusterctl.cli.common import JsonOpt, get_spec

swarm_app = typer.Typer(
    name="swarm", help="The swarm's nodes as the spec's racks (deploy.target swarm).", no_args_is_help=True
)


@swarm_app.command("nodes")
def cmd_swarm_nodes(as_json: JsonOpt = False) -> None:
    """Each swarm node: address, state, availability, role, its clusterctl.rack label, the spec's rack that label
    names, and the services of this stack whose task runs on it."""
    from clusterctl.output import Column, emit
    from clusterctl.runtime import swarm_tasks

    rows = swarm_tasks.node_rows(get_spec())
    cols = [
        Column("Hostname", "hostname"),
        Column("Id", lambda r: r.id[:12]),
        Column("Address", "address"),
        Column("State", "state"),
        Column("Availability", "availability"),
        Column("Role", "role"),
        Column("Label", "label"),
        Column("Rack", "rack"),
        Column("Tasks", "tasks"),
    ]
    emit(rows, as_json=as_json, columns=cols, title="swarm nodes")


@swarm_app.command("label")
def cmd_swarm_label(
    node: Annotated[str, typer.Argument(help="a swarm node: its id (or a unique prefix), hostname or address")],
    rack: Annotated[str | None, typer.Argument(help="a rack of the spec's deploy.racks")] = None,
    remove: Annotated[bool, typer.Option("--remove", help="remove the node's clusterctl.rack label")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Set NODE's clusterctl.rack label to RACK (or remove it). Refused, nothing changed: a rack not in the spec,
    a rack another node has, a node running this stack's tasks."""
    from clusterctl.errors import UsageError
    from clusterctl.output import Column, emit
    from clusterctl.runtime import swarm_tasks

    if (rack is None) != remove:
        raise UsageError("give a RACK or --remove (not both, not neither)")
    change = swarm_tasks.set_rack(get_spec(), node, rack)
    cols = [
        Column("Node", "node"),
        Column("Id", lambda c: c.id[:12]),
        Column("Before", "before"),
        Column("After", "after"),
        Column("Changed", "changed"),
    ]
    emit(change, as_json=as_json, kv=cols, title="clusterctl.rack label")


def register(app: typer.Typer) -> None:
    """Attach `swarm` to the root app."""
    app.add_typer(swarm_app)
