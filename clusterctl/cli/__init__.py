"""The Typer application: one module per noun, each exposing `register(app)`."""

from __future__ import annotations

import sys

import typer

from clusterctl.cli import chaos, cluster, group, perf, scenario, spark, topic, ui, zk
from clusterctl.cli.common import root_callback
from clusterctl.errors import ClusterctlError
from clusterctl.output import error_line

app = typer.Typer(
    name="clusterctl",
    help="Stand up, inspect, load and break a ZooKeeper + Kafka cluster on Docker.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)
app.callback()(root_callback)

for _module in (cluster, topic, group, zk, perf, chaos, scenario, spark, ui):
    _module.register(app)


def main() -> None:
    """Console-script entry point: domain errors become one line on stderr and a non-zero exit."""
    try:
        app(standalone_mode=False)
    except ClusterctlError as exc:
        error_line(str(exc))
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        error_line("interrupted")
        sys.exit(130)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except typer.Abort:
        error_line("aborted")
        sys.exit(1)
    except Exception as exc:
        # click's usage errors (typer vendors click, so match by shape rather than class)
        code = getattr(exc, "exit_code", None)
        if hasattr(exc, "show") and isinstance(code, int):
            exc.show()
            sys.exit(code)
        raise
