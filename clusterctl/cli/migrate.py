"""CLI for the 'migrate' noun: ZooKeeper → KRaft in resumable phases, and its rollback before finalize."""

from typing import TYPE_CHECKING, Annotated

import typer

from clusterctl.cli.common import JsonOpt, state, timeout_option

if TYPE_CHECKING:
    from clusterctl.kafka.kraft.migration import MigrationStatus
    from clusterctl.output import Column

migrate_app = typer.Typer(
    name="migrate", help="Move a running ZooKeeper-mode cluster to KRaft, phase by phase.", no_args_is_help=True
)

TimeoutOpt = Annotated[float, timeout_option("seconds each wait may take")]


def _phase_columns(*more: "Column") -> list["Column"]:
    from clusterctl.output import Column

    return [Column("Phase", "number", justify="right"), Column("Name", "name"), *more]


def _show_status(s: "MigrationStatus", as_json: bool) -> None:
    from clusterctl.output import Column, emit, info

    emit(
        s, as_json=as_json, rows=s.phases, title=f"migration of {s.cluster} to KRaft ({s.state_file})",
        columns=_phase_columns(Column("State", "state"), Column("Kafka's guide", "section")),
    )  # fmt: skip
    if as_json:
        return
    if s.running is not None:
        info(f"`{s.running.command}` is running ({s.running.where}): another `migrate` is refused until it ends")
    elif s.next_phase:
        info(f"next: phase {s.next_phase}" + ("; `clusterctl migrate rollback` reverts" if s.can_roll_back else ""))


@migrate_app.command("kraft")
def cmd_migrate_kraft(
    to: Annotated[str | None, typer.Option("--to", help="stop after this phase (number or name); default: all")] = None,
    phase: Annotated[
        str | None, typer.Option("--phase", help="run only this phase: the next one, or the last one done again")
    ] = None,
    status: Annotated[bool, typer.Option("--status", help="say where the migration stands; change nothing")] = False,
    yes: Annotated[
        bool, typer.Option("--yes", help="allow phase 4 (finalize): after it there is no way back to ZooKeeper")
    ] = False,
    controllers: Annotated[int, typer.Option("--controllers", help="controller quorum size: 1, 3 or 5")] = 3,
    combined: Annotated[
        bool, typer.Option("--combined", help="brokers as controllers: refused, Kafka migrates to dedicated ones only")
    ] = False,
    timeout: TimeoutOpt = 300.0,
    as_json: JsonOpt = False,
) -> None:
    """Phases: 1 controllers, 2 migration-mode, 3 kraft-brokers, 4 finalize (--yes), 5 remove-zookeeper.

    Each phase is recorded in <spec>.migration.json; a stopped run resumes where it stopped. A run holds
    <spec>.migration.lock: a second one is refused, and --status tells a running phase from an interrupted one.
    """
    from clusterctl.errors import UsageError
    from clusterctl.output import Column, emit, info
    from clusterctl.runtime import migrate

    if status:
        if to or phase or yes:
            raise UsageError("--status changes nothing: give it without --to, --phase or --yes")
        _show_status(migrate.migration_status(state.spec_path), as_json)
        return
    if to is not None and phase is not None:
        raise UsageError("give --to or --phase, not both")
    result = migrate.migrate(
        state.spec_path, to=to, only=phase, yes=yes, controllers=controllers, combined=combined, timeout=timeout,
        progress=None if as_json else info,
    )  # fmt: skip
    emit(
        result, as_json=as_json, rows=result.ran, title=f"migration of {result.cluster}: phases run",
        columns=_phase_columns(Column("Seconds", "seconds", justify="right"), Column("Restarted", "restarted"),
                               Column("Seen", "detail")),
        empty="nothing to do: the migration is already there",
    )  # fmt: skip
    if not as_json:
        _show_status(result.status, False)


@migrate_app.command("rollback")
def cmd_migrate_rollback(timeout: TimeoutOpt = 300.0, as_json: JsonOpt = False) -> None:
    """Back to ZooKeeper mode, following Kafka's revert directions for the phase reached (not after finalize)."""
    from clusterctl.output import Column, emit, info
    from clusterctl.runtime import migrate

    result = migrate.rollback(state.spec_path, timeout=timeout, progress=None if as_json else info)
    emit(
        result,
        as_json=as_json,
        kv=[Column("Cluster", "cluster"), Column("Reverted from phase", "reverted_from"),
            Column("Steps", "steps"), Column("Seconds", "seconds"), Column("State file", "state_file")],
    )  # fmt: skip


def register(app: typer.Typer) -> None:
    """Attach `migrate` to the root app."""
    app.add_typer(migrate_app)
