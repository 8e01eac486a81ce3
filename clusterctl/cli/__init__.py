"""The Typer application: one module per noun, each exposing `register(app)`."""

import importlib
import os
import sys
from collections.abc import Iterable
from typing import Any

import typer

from clusterctl.cli import fastparams
from clusterctl.cli.common import root_callback
from clusterctl.errors import ClusterctlError
from clusterctl.output import error_line

fastparams.install()  # plain option values without pydantic (typer's adapters cost ~0.15 s per run)

NOUN_MODULES = ("cluster", "topic", "group", "zk", "perf", "chaos", "scenario", "spark")
# The module that registers each top-level command: main() imports and builds only the one a command line
# names, so `clusterctl topic list` pays neither for the other modules nor for typer building their commands.
# A command missing here still works: main() then builds every module, as for --help and completion.
COMMAND_MODULE = {
    **dict.fromkeys(("init", "render", "up", "down", "status", "logs", "images", "cluster"), "cluster"),
    **dict.fromkeys(("topic", "produce", "consume"), "topic"),
    **dict.fromkeys(("chaos", "leader", "reassign"), "chaos"),
    "group": "group",
    "zk": "zk",
    "perf": "perf",
    "scenario": "scenario",
    "spark": "spark",
}
ROOT_OPTIONS_WITH_VALUE = ("-s", "--spec")


def build_app(modules: Iterable[str] = NOUN_MODULES) -> typer.Typer:
    """The root application with the commands of `modules` (default: all)."""
    built = typer.Typer(
        name="clusterctl",
        help="Stand up, inspect, load and break a ZooKeeper + Kafka cluster on Docker.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,  # plain click help: rich help costs ~0.2 s of imports (markdown-it, pygments)
    )
    built.callback()(root_callback)
    for name in modules:
        importlib.import_module(f"clusterctl.cli.{name}").register(built)
    return built


def app_for(argv: list[str]) -> typer.Typer:
    """The application for one command line: only the module of the command it names, else all modules."""
    if not any(k.endswith("_COMPLETE") for k in os.environ):
        words = iter(argv)
        for word in words:
            if word in ROOT_OPTIONS_WITH_VALUE:
                next(words, None)
            elif not word.startswith("-"):
                if word in COMMAND_MODULE:
                    return build_app([COMMAND_MODULE[word]])
                break
    return build_app()


def __getattr__(name: str) -> Any:
    """`clusterctl.cli.app`: the whole application, built on first use."""
    if name == "app":
        globals()["app"] = whole = build_app()
        return whole
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """Console-script entry point: domain errors become one line on stderr and a non-zero exit."""
    try:
        app_for(sys.argv[1:])(standalone_mode=False)
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
