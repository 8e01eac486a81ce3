"""CLI for the 'images' noun: build and list the offline images (thin: parse, call images/, render)."""

import os
from pathlib import Path
from typing import Annotated

import typer

from clusterctl.cli.common import JsonOpt
from clusterctl.env import KAFKA_DIST_ENV
from clusterctl.output import Column, emit, format_time

images_app = typer.Typer(help="Build and list the offline images (no registry needed).", no_args_is_help=True)

BUILD_COLUMNS = [
    Column("Target", "target"),
    Column("Image", "image"),
    Column("Action", "action"),
    Column("Seconds", "seconds"),
    Column("Inputs hash", "inputs_hash"),
]
LIST_COLUMNS = [
    Column("Target", "target"),
    Column("Image", "image"),
    Column("Present", "present"),
    Column("Size MB", "size_mb"),
    Column("Created", "created", fmt=format_time),
    Column("Inputs hash", "inputs_hash"),
]


@images_app.command("build")
def cmd_images_build(
    targets: Annotated[
        list[str] | None,
        typer.Argument(help="base, zookeeper, kafka, tansu, spark, console (default: zookeeper kafka tansu console)"),
    ] = None,
    kafka_version: Annotated[
        str | None,
        typer.Option(
            "--kafka-version",
            help="the Kafka image's Apache Kafka from Maven Central: an exact version (3.9.2), a line (3.9.x) or a "
            "major (4.x) for its newest release; default 3.9.x. The image is tagged with the version in its jars",
            show_default=False,
        ),
    ] = None,
    kafka_dist: Annotated[
        Path | None,
        typer.Option(
            "--kafka-dist",
            help="an Apache Kafka binary distribution (kafka_2.13-X.Y.Z.tgz or its directory) instead of Maven; "
            "the image is tagged with its version (default: ${KAFKA_DIST_ENV} unless --kafka-version is given)",
            show_default=False,
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option("--force", help="rebuild even when inputs are unchanged (the base only if named)")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Build the offline images locally: Debian base via debootstrap, then ZooKeeper, Kafka (from Maven Central),
    tansu, the console, Spark (no pull)."""
    from clusterctl.cli.spinner import spinner
    from clusterctl.images import build as images

    if kafka_dist is None and kafka_version is None and os.environ.get(KAFKA_DIST_ENV):
        kafka_dist = Path(os.environ[KAFKA_DIST_ENV])  # an explicit --kafka-version wins over the environment
    with spinner() as progress:
        task = progress.add_task("checking inputs", total=None)
        results = images.build_images(
            targets or [],
            kafka_dist,
            force,
            progress=lambda msg: progress.update(task, description=msg),
            kafka_version=kafka_version,
        )
    emit(results, as_json=as_json, title="images build", columns=BUILD_COLUMNS)


@images_app.command("list")
def cmd_images_list(as_json: JsonOpt = False) -> None:
    """The offline images and whether each is built."""
    from clusterctl.images import build as images

    emit(images.list_images(), as_json=as_json, title="offline images", columns=LIST_COLUMNS)


def register(app: typer.Typer) -> None:
    """Attach `images` to the root app."""
    app.add_typer(images_app, name="images")
