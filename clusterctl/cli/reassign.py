"""CLI for the 'reassign' command: move partition replicas (kafka-reassign-partitions.sh)."""

import json
from pathlib import Path
from typing import Annotated

import typer

from clusterctl.cli.common import BootstrapOpt, JsonOpt, ZkOpt, bootstrap_servers, timeout_option, zk_connect
from clusterctl.spec import validate


def cmd_reassign(
    topic: Annotated[str, typer.Argument(help="topic to move")],
    plan: Annotated[Path | None, typer.Option("--plan", help="kafka-reassign-partitions.sh JSON plan")] = None,
    generate: Annotated[bool, typer.Option("--generate", help="propose a plan over --brokers")] = False,
    brokers: Annotated[str | None, typer.Option("--brokers", help="target broker ids, e.g. 1,2,3")] = None,
    execute: Annotated[bool, typer.Option("--execute", help="start the moves and wait until done")] = False,
    verify: Annotated[
        bool, typer.Option("--verify", help="wait for running moves, then remove replication throttles")
    ] = False,
    throttle: Annotated[
        int | None,
        typer.Option("--throttle", help="replication throttle in B/s (1 to 2^63-1) while moving; removed when done"),
    ] = None,
    timeout: Annotated[float, timeout_option("seconds to wait for completion")] = 600,
    bootstrap_server: BootstrapOpt = None,
    zookeeper: ZkOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Move partition replicas (kafka-reassign-partitions.sh): --generate a plan, or --plan FILE [--execute]."""
    from rich.progress import Progress

    from clusterctl.errors import UsageError
    from clusterctl.kafka import reassign as ra
    from clusterctl.output import emit, info

    bootstrap = bootstrap_servers(bootstrap_server)
    if verify:
        if plan is not None or generate or execute:
            raise UsageError("--verify takes no plan: it waits for running moves and removes throttles")
        seconds = ra.verify(bootstrap, zk_connect(zookeeper), topic, timeout)
        if as_json:
            emit({"topic": topic, "seconds": seconds, "throttle_removed": True}, as_json=True)
        else:
            info(f"no moves running; replication throttles removed ({seconds}s)")
        return
    if (plan is None) == (not generate):
        raise UsageError("give exactly one of --plan FILE or --generate --brokers 1,2,3")
    if throttle is not None and not execute:
        raise UsageError("--throttle applies to --execute")
    if throttle is not None:
        validate.at_most(throttle, "--throttle", validate.INT64_MAX)
    if generate:
        if not brokers:
            raise UsageError("--generate needs --brokers 1,2,3")
        try:
            ids = [int(b) for b in brokers.split(",") if b.strip()]
        except ValueError:
            raise UsageError(f"--brokers expects ids like 1,2,3, got {brokers!r}") from None
        moves = ra.generate(bootstrap, topic, ids)
    else:
        assert plan is not None
        moves = ra.read_plan(plan)
    if not execute:
        ra.validate(bootstrap, topic, moves)
        doc = ra.plan_doc(moves)
        if as_json:
            emit(doc, as_json=True)
        else:
            info("proposed plan (save it and pass --plan FILE --execute, or add --execute):")
            typer.echo(json.dumps(doc))
        return
    with Progress(transient=True) as progress:
        task = progress.add_task(f"moving {len(moves)} partitions of {topic}", total=len(moves))
        result = ra.execute(
            bootstrap, zk_connect(zookeeper), topic, moves, throttle=throttle, timeout=timeout,
            on_progress=lambda done, total: progress.update(task, completed=done, total=total),
        )  # fmt: skip
    if as_json:
        emit(result, as_json=True)
    else:
        extra = f" (throttled at {throttle} B/s; throttle removed)" if throttle is not None else ""
        info(f"reassignment of {result.moved} partitions of {topic} finished in {result.seconds}s{extra}")


def register(app: typer.Typer) -> None:
    """Attach `reassign` to the root app."""
    app.command("reassign")(cmd_reassign)
