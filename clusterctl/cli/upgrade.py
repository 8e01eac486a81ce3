"""CLI for `upgrade`: roll a running KRaft cluster to another Kafka version, node by node; finalize with --yes."""

from typing import TYPE_CHECKING, Annotated

import typer

from clusterctl.cli.common import JsonOpt, state, timeout_option

if TYPE_CHECKING:
    from clusterctl.kafka.upgrade_plan import UpgradeStatus


def _show_status(s: "UpgradeStatus", as_json: bool) -> None:
    from clusterctl.output import Column, emit, info

    if as_json:
        emit(s, as_json=True)
        return
    if not s.started:
        info(f"no upgrade of {s.cluster} recorded ({s.state_file}); metadata.version level {s.metadata_level}")
        return
    rows = [{"node": n, "state": "done"} for n in s.done]
    now = f"running ({s.running.where})" if s.running is not None else "interrupted"
    rows += [{"node": n, "state": now if n == s.current else "pending"} for n in s.pending]
    emit(rows, as_json=False, title=f"upgrade of {s.cluster}: {s.from_version} → {s.to_version} ({s.state_file})",
         columns=[Column("Node", "node"), Column("State", "state")])  # fmt: skip
    fin = f"finalized at {s.finalized}" if s.finalized else "not finalized (`upgrade --to ... --yes` finalizes)"
    info(f"metadata.version level {s.metadata_level}; {fin}")


def cmd_upgrade(
    to: Annotated[str | None, typer.Option("--to", help="the Kafka version to roll to, e.g. 4.4.0")] = None,
    yes: Annotated[
        bool,
        typer.Option("--yes", help="finalize the feature levels after the roll: after it there is no downgrade"),
    ] = False,
    until: Annotated[
        str | None, typer.Option("--until", help="stop after this node (e.g. kafka2): a partial roll, resumable")
    ] = None,
    status: Annotated[bool, typer.Option("--status", help="say where the upgrade stands; change nothing")] = False,
    timeout: Annotated[float, timeout_option("seconds each node's wait may take")] = 300.0,
    as_json: JsonOpt = False,
) -> None:
    """Roll controllers, then brokers, one at a time to clusterctl/kafka:VERSION, each waited on (back in the
    quorum / unfenced, every ISR full); resumes a stopped run. The state is kept in <spec>.upgrade.json."""
    from clusterctl.errors import UsageError
    from clusterctl.output import Column, emit, info
    from clusterctl.runtime import upgrade

    if status:
        if to is not None or yes or until is not None:
            raise UsageError("--status changes nothing: give it without --to, --until or --yes")
        _show_status(upgrade.status(state.spec_path), as_json)
        return
    if to is None:
        raise UsageError("missing --to VERSION (or --status)")
    result = upgrade.upgrade(
        state.spec_path, to, yes=yes, timeout=timeout, progress=None if as_json else info, until=until
    )
    emit(
        result, as_json=as_json, rows=result.ran, title=f"upgrade of {result.cluster}: {result.from_version} → {to}",
        columns=[Column("Node", "service"), Column("Seconds", "seconds", justify="right"),
                 Column("Restarted", "restarted"), Column("Seen", "detail")],
        empty="nothing to roll: every node runs the target already",
    )  # fmt: skip
    if not as_json:
        fin = f"finalized at {result.finalized}" if result.finalized else "not finalized: `--yes` finalizes"
        info(f"metadata.version level {result.metadata_level}; {fin}")


def register(app: typer.Typer) -> None:
    """Attach `upgrade` to the root app."""
    app.command("upgrade")(cmd_upgrade)
