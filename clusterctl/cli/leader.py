"""CLI for the 'leader' noun: preferred/unclean elections and leadership imbalance."""

from typing import Annotated

import typer

from clusterctl.cli.common import BootstrapOpt, JsonOpt, bootstrap_servers

leader_app = typer.Typer(name="leader", help="Partition leadership: elections and imbalance.", no_args_is_help=True)


@leader_app.command("elect")
def cmd_leader_elect(
    preferred: Annotated[bool, typer.Option("--preferred", help="preferred-replica election (default)")] = False,
    unclean: Annotated[
        bool, typer.Option("--unclean", help="unclean election: an out-of-sync replica may lead (can lose data)")
    ] = False,
    topic: Annotated[str | None, typer.Option("--topic", help="one topic")] = None,
    partition: Annotated[int | None, typer.Option("--partition", help="one partition (needs --topic)")] = None,
    all_: Annotated[bool, typer.Option("--all", help="every partition of every topic")] = False,
    bootstrap_server: BootstrapOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Leader election like kafka-leader-election.sh (kafka-preferred-replica-election.sh in seed 004)."""
    from clusterctl.errors import UsageError
    from clusterctl.kafka.admin import describe_topic
    from clusterctl.kafka.elections import elect_leaders
    from clusterctl.output import Column, emit

    if preferred and unclean:
        raise UsageError("give --preferred or --unclean, not both")
    if partition is not None and topic is None:
        raise UsageError("--partition needs --topic")
    if partition is not None:
        from clusterctl.spec import validate

        validate.partition(partition)
    if not all_ and topic is None:
        raise UsageError("give --topic T [--partition P] or --all")
    if all_ and topic is not None:
        raise UsageError("--all and --topic are mutually exclusive")
    bootstrap = bootstrap_servers(bootstrap_server)
    parts: list[tuple[str, int]] | None = None
    if topic is not None:
        if partition is not None:
            parts = [(topic, partition)]
        else:
            parts = [(topic, p.partition) for p in describe_topic(bootstrap, topic).partitions]
    res = elect_leaders(bootstrap, "unclean" if unclean else "preferred", parts)
    cols = [Column("Topic", "topic"), Column("Partition", "partition", justify="right"), Column("Ok", "ok"),
            Column("Error", "error")]  # fmt: skip
    failed = [r for r in res if not r.ok]
    if failed and as_json:  # one JSON document: the error object carries the results
        from clusterctl.errors import ClusterctlError

        err = ClusterctlError(
            f"{len(failed)} of {len(res)} elections failed ({failed[0].topic}-{failed[0].partition}: {failed[0].error})"
        )
        err.result = res
        raise err
    emit(res, as_json=as_json, columns=cols, empty="no partitions needed an election")
    if failed:
        from clusterctl.errors import ClusterctlError

        raise ClusterctlError(
            f"{len(failed)} of {len(res)} elections failed ({failed[0].topic}-{failed[0].partition}: {failed[0].error})"
        )


@leader_app.command("imbalance")
def cmd_leader_imbalance(bootstrap_server: BootstrapOpt = None, as_json: JsonOpt = False) -> None:
    """Partitions not led by their preferred replica, and leaders per broker."""
    from clusterctl.kafka.leaders import leader_imbalance
    from clusterctl.output import Column, emit, info

    data = leader_imbalance(bootstrap_servers(bootstrap_server))
    if as_json:
        emit(data, as_json=True)
        return
    emit(
        data["brokers"],
        as_json=False,
        title="leaders per broker",
        columns=[Column("Broker", "broker", justify="right"), Column("Leaders", "leaders", justify="right"),
                 Column("Preferred leaders", "preferred_leaders", justify="right")],
    )  # fmt: skip
    emit(
        data["not_preferred"],
        as_json=False,
        title=f"{len(data['not_preferred'])} of {data['partitions']} partitions not led by their preferred replica",
        columns=[Column("Topic", "topic"), Column("Partition", "partition", justify="right"),
                 Column("Leader", "leader", justify="right"), Column("Preferred", "preferred", justify="right"),
                 Column("Replicas", "replicas"), Column("Isr", "isr")],
        empty="every partition is led by its preferred replica",
    )  # fmt: skip
    if data["not_preferred"]:
        info("run `clusterctl leader elect --preferred --all` to move leadership back")


def register(app: typer.Typer) -> None:
    """Attach `leader` to the root app."""
    app.add_typer(leader_app)
