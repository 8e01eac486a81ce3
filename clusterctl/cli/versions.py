"""CLI for `versions`: the Kafka versions built or servable here and what each supports (thin: images/versions)."""

from typing import Annotated

import typer

from clusterctl.cli.common import JsonOpt


def cmd_versions(
    known: Annotated[
        bool,
        typer.Option(
            "--all",
            help="also every Kafka release line the capability table knows (KRaft-ready 3.3 up to the newest 4.x)",
        ),
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Kafka versions of the offline images (built here, assembled, served lines) and what each supports:
    ZooKeeper mode, KRaft, ZooKeeper→KRaft migration, dynamic quorum, ELR, the consumer group protocol, Java."""
    from clusterctl.images.versions import list_versions
    from clusterctl.output import Column, emit

    columns = [
        Column("Version", "version"),
        Column("Built", "built"),
        Column("ZooKeeper mode", "zookeeper_mode"),
        Column("KRaft", "kraft"),
        Column("ZK→KRaft migration", "zk_migration"),
        Column("Dynamic quorum (KIP-853)", "dynamic_quorum"),
        Column("ELR (KIP-966)", "elr"),
        Column("Group protocol (KIP-848)", "group_protocol"),
        Column("Java", "java"),
        Column("Served as", "served_as"),
        Column("Build", "build"),
    ]
    emit(list_versions(known=known), as_json=as_json, columns=columns, title="Kafka versions")


def register(app: typer.Typer) -> None:
    """Attach `versions` to the root app."""
    app.command("versions")(cmd_versions)
