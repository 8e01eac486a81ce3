"""CLI for consumer groups: list, describe (lag), reset offsets, delete."""

from typing import TYPE_CHECKING, Annotated

import typer

from clusterctl.cli.common import BootstrapOpt, JsonOpt, bootstrap_servers, group_option
from clusterctl.errors import UsageError
from clusterctl.output import Column, emit, info, print_json
from clusterctl.spec import validate

if TYPE_CHECKING:
    from clusterctl.kafka import groups

group_app = typer.Typer(name="group", help="Consumer groups: members, offsets, lag, resets.", no_args_is_help=True)

GROUP_LIST_COLUMNS = [Column("Group", "group"), Column("State", "state"), Column("Simple", "simple")]
GROUP_FIELDS = [
    Column("Group", "group"),
    Column("State", "state"),
    Column("Coordinator", "coordinator"),
    Column("Assignor", "assignor"),
    Column("Members", lambda g: len(g.members)),
    Column("Total lag", "total_lag"),
    Column(
        "No committed offset", "uncommitted_partitions", fmt=lambda n: f"{n} partition(s): lag unknown" if n else "-"
    ),
    Column("Protocol", "protocol"),
    Column("Dead member noticed after", "session_timeout"),
]
MEMBER_COLUMNS = [
    Column("Member", "member_id"),
    Column("Client-Id", "client_id"),
    Column("Host", "host"),
    Column("Assignment", "assignment"),
]
LAG_COLUMNS = [
    Column("Topic", "topic"),
    Column("Partition", "partition", justify="right"),
    Column("Current-Offset", "committed", justify="right"),
    Column("Log-End-Offset", "log_end", justify="right"),
    Column("Lag", "lag", justify="right"),
    Column("Client-Id", "client_id"),
    Column("Host", "host"),
]
RESET_COLUMNS = [
    Column("Topic", "topic"),
    Column("Partition", "partition", justify="right"),
    Column("Current", "current", justify="right"),
    Column("New", "new", justify="right"),
]


@group_app.command("list")
def cmd_group_list(bootstrap_server: BootstrapOpt = None, as_json: JsonOpt = False) -> None:
    """List consumer groups and their state."""
    from clusterctl.kafka import groups

    emit(
        groups.list_groups(bootstrap_servers(bootstrap_server)),
        as_json=as_json,
        columns=GROUP_LIST_COLUMNS,
        empty="no consumer groups",
    )


def render_group(desc: "groups.GroupDescription", as_json: bool) -> None:
    if as_json:
        print_json(desc)
        return
    emit(desc, as_json=False, kv=GROUP_FIELDS)
    if desc.members:
        emit(desc.members, as_json=False, columns=MEMBER_COLUMNS, title="members")
    emit(desc.offsets, as_json=False, columns=LAG_COLUMNS, title="offsets", empty="no committed offsets")


@group_app.command("describe")
def cmd_group_describe(
    group: Annotated[str, typer.Argument(help="consumer group id (1 to 255 characters)", callback=group_option)],
    bootstrap_server: BootstrapOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """State, members, and per partition: committed offset, log-end offset and lag."""
    from clusterctl.kafka import groups

    render_group(groups.describe_group(bootstrap_servers(bootstrap_server), group), as_json)


@group_app.command("reset")
def cmd_group_reset(
    group: Annotated[str, typer.Argument(help="consumer group id (1 to 255 characters)", callback=group_option)],
    topic: Annotated[str, typer.Option("--topic", "-t", help="topic whose offsets to reset (every partition)")],
    to_earliest: Annotated[bool, typer.Option("--to-earliest", help="reset to the earliest offset")] = False,
    to_latest: Annotated[bool, typer.Option("--to-latest", help="reset to the log-end offset")] = False,
    to_offset: Annotated[
        int | None, typer.Option("--to-offset", help="reset to this offset (0 to 2^63-1, clamped to the log)")
    ] = None,
    execute: Annotated[bool, typer.Option("--execute", help="apply the change (default: dry run)")] = False,
    bootstrap_server: BootstrapOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Show (or with --execute, commit) new offsets; refused while the group has active members."""
    from clusterctl.kafka import groups

    chosen = [x for x in (to_earliest, to_latest, to_offset is not None) if x]
    if len(chosen) != 1:
        raise UsageError("give exactly one of --to-earliest, --to-latest, --to-offset N")
    if to_offset is not None:
        validate.offset(to_offset, "--to-offset")
    to: groups.ResetTarget = "earliest" if to_earliest else "latest" if to_latest else int(to_offset or 0)
    plan = groups.reset_offsets(bootstrap_servers(bootstrap_server), group, topic, to, execute=execute)
    title = f"{'reset' if plan.executed else 'dry run (use --execute to apply)'}: group {group} to {plan.to}"
    if as_json:
        print_json(plan)
        return
    emit(plan.partitions, as_json=False, columns=RESET_COLUMNS, title=title)
    if not plan.executed:
        info("dry run: nothing changed; add --execute to commit these offsets")


@group_app.command("delete")
def cmd_group_delete(
    group: Annotated[str, typer.Argument(help="consumer group id (1 to 255 characters)", callback=group_option)],
    bootstrap_server: BootstrapOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Delete an inactive consumer group and its committed offsets."""
    from clusterctl.kafka import groups

    deleted = groups.delete_group(bootstrap_servers(bootstrap_server), group)
    emit(
        {"group": deleted, "deleted": True},
        as_json=as_json,
        kv=[Column("Group", "group"), Column("Deleted", "deleted")],
    )


def register(app: typer.Typer) -> None:
    """Attach `group` to the root app."""
    app.add_typer(group_app, name="group")
