"""CLI for the 'quorum' noun (KRaft): `quorum` / `quorum describe` (the describe-quorum view) and, on a dynamic
quorum (kraft.quorum: dynamic, KIP-853), `quorum add-controller` and `quorum remove-controller`.

Thin: parse, call the domain layer (kafka.kraft.quorum, runtime.voters), render through output.
"""

from typing import TYPE_CHECKING, Annotated

import typer

from clusterctl.cli.common import JsonOpt, get_spec, timeout_option
from clusterctl.errors import UsageError
from clusterctl.output import Column, emit

if TYPE_CHECKING:
    from clusterctl.runtime.voters import VoterChange

QUORUM_COLUMNS = [
    Column("Node", "node_id", justify="right"),
    Column("Role", "role"),
    Column("Service", "service"),
    Column("Log end offset", "log_end_offset", justify="right"),
    Column("Lag", "lag", justify="right"),
    Column("Last fetch ms ago", "last_fetch_ago_ms", justify="right"),
]
DIRECTORY_COLUMN = Column("Directory id", "directory_id")

quorum_app = typer.Typer(
    name="quorum",
    help="KRaft: the controller quorum (describe-quorum); on a dynamic quorum, add and remove controllers.",
    invoke_without_command=True,
)
TimeoutOpt = Annotated[float, timeout_option("seconds to wait for an answer")]
NodeArg = Annotated[int, typer.Argument(help="the controller's node id (101.. : controllerN is 100+N)")]


def quorum_columns(dynamic: bool) -> list[Column]:
    """The members table: with each replica's directory id on a dynamic quorum."""
    return [*QUORUM_COLUMNS, DIRECTORY_COLUMN] if dynamic else QUORUM_COLUMNS


def cmd_quorum(timeout: TimeoutOpt = 3.0, as_json: JsonOpt = False) -> None:
    """KRaft: the controller quorum (describe-quorum): leader, epoch, voters and observers with their lag (and their
    directory ids on a dynamic quorum)."""
    from clusterctl.kafka.kraft import quorum as kraft

    spec = get_spec()
    v = kraft.quorum_view(spec, timeout)
    if as_json:
        emit(v, as_json=True)
        return
    emit(
        v,
        as_json=False,
        title=f"controller quorum of {v.cluster} ({spec.kraft.quorum})",
        kv=[
            Column("Leader", lambda r: f"{r.leader_id} ({r.leader_service})" if r.leader_id is not None else "none"),
            Column("Leader epoch", "leader_epoch"),
            Column("High watermark", "high_watermark"),
            Column("Answered by", "answered_by"),
        ],
    )
    emit(v.members, as_json=False, columns=quorum_columns(spec.kraft.quorum == "dynamic"))


@quorum_app.callback()
def quorum_callback(ctx: typer.Context, timeout: TimeoutOpt = 3.0, as_json: JsonOpt = False) -> None:
    """KRaft: the controller quorum (describe-quorum); on a dynamic quorum, add and remove controllers."""
    if ctx.invoked_subcommand is None:
        cmd_quorum(timeout, as_json)


quorum_app.command("describe")(cmd_quorum)


def _emit_change(change: "VoterChange", as_json: bool) -> None:
    emit(
        change,
        as_json=as_json,
        title=f"{change.action} {change.node_id}",
        kv=[
            Column("Controller", lambda c: f"{c.node_id} ({c.service})"),
            Column("Directory id", "directory_id"),
            Column("Took", lambda c: f"{c.seconds:.1f}s (Kafka's tool {c.tool_seconds:.1f}s)"),
            Column("Voters now", lambda c: ", ".join(c.voters)),
            Column("Leader", "leader_id"),
        ],
    )


@quorum_app.command("add-controller")
def cmd_quorum_add_controller(
    node_id: NodeArg,
    timeout: Annotated[float, timeout_option("seconds to wait for it to catch up with the leader first")] = 120.0,
    as_json: JsonOpt = False,
) -> None:
    """Dynamic quorum: make a running controller a voter (Kafka's add-controller, run in its container with its own
    configuration) once it has caught up with the leader. A controller back under its node id with a fresh disk
    is added after its dead entry is removed (Kafka keeps one voter per node id)."""
    from clusterctl.runtime import voters

    _emit_change(voters.add_controller(get_spec(), node_id, timeout), as_json)


@quorum_app.command("remove-controller")
def cmd_quorum_remove_controller(
    node_id: NodeArg,
    directory_id: Annotated[
        str, typer.Option("--directory-id", help="the voter's directory id, as `clusterctl quorum` shows it")
    ],
    as_json: JsonOpt = False,
) -> None:
    """Dynamic quorum: remove the voter (node id, directory id), e.g. a controller whose disk is gone."""
    from clusterctl.runtime import voters
    from clusterctl.spec import validate

    validate.directory_id(directory_id)
    if node_id < 1:
        raise UsageError(f"node id must be at least 1, got {node_id}")
    _emit_change(voters.remove_controller(get_spec(), node_id, directory_id), as_json)


def register(app: typer.Typer) -> None:
    """Attach this noun's commands to the root app."""
    app.add_typer(quorum_app, name="quorum")
