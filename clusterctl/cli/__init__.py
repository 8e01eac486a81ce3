"""The Typer application: one module per noun, each exposing `register(app)`."""

from __future__ import annotations

import contextlib
import os
import sys
import traceback

import typer
import typer.main

from clusterctl.cli import chaos, cluster, group, perf, scenario, spark, topic, ui, zk
from clusterctl.cli.common import root_callback
from clusterctl.errors import ClusterctlError
from clusterctl.output import error_json, error_line, to_jsonable

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


EX_SOFTWARE = 70  # sysexits.h: an internal error (a bug), as opposed to the user's input or the cluster
INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C


def _flag(args: list[str], flag: str) -> bool:
    """Whether `flag` is among the options (before a `--` end-of-options marker)."""
    return flag in (args[: args.index("--")] if "--" in args else args)


def run(args: list[str] | None = None) -> int:
    """Run the CLI and return its exit status, whichever way the command ends.

    Every exit path goes through here: a command's success (0), a ClusterctlError (its exit code, one
    line), a usage error (2, one line), typer.Exit(n) (n), Ctrl-C (130, "interrupted"), and anything
    unexpected (70, one line pointing at --debug for the traceback). With `--json`, failures also print
    `{"error": ..., "exit_code": ...}` on stdout so stdout is valid JSON either way.
    """
    import typer._click.exceptions as click_exc

    args = sys.argv[1:] if args is None else list(args)
    as_json = _flag(args, "--json")
    debug = _flag(args, "--debug") or os.environ.get("CLUSTERCTL_DEBUG", "") not in ("", "0")

    def fail(message: str, code: int, result: object = None) -> int:
        try:
            error_line(message)
            if as_json:
                error_json(message, code, to_jsonable(result))
        except (BrokenPipeError, ValueError):  # stdout/stderr already closed by the reader
            pass
        return code

    command = typer.main.get_command(app)
    try:
        command._main_shell_completion({}, "clusterctl", None)  # _CLUSTERCTL_COMPLETE=...: answer and exit
        with command.make_context("clusterctl", args) as ctx:
            command.invoke(ctx)
        return 0
    except ClusterctlError as exc:
        return fail(str(exc), exc.exit_code, exc.result)
    except KeyboardInterrupt as exc:
        return fail("interrupted", INTERRUPTED, getattr(exc, "result", None))
    except typer.Exit as exc:
        return exc.exit_code
    except typer.Abort:
        return fail("aborted", 1)
    except click_exc.NoArgsIsHelpError as exc:
        exc.show()  # the help text, then the one error line every failure ends with
        where = getattr(getattr(exc, "ctx", None), "command_path", "clusterctl")
        return fail(f"missing command (see `{where} --help`)", exc.exit_code)
    except click_exc.ClickException as exc:
        where = getattr(getattr(exc, "ctx", None), "command_path", "clusterctl")
        return fail(f"{exc.format_message()} (see `{where} --help`)", exc.exit_code)
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except BrokenPipeError:  # `clusterctl ... | head`: the reader left; not an error worth a line
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keep interpreter shutdown's flush quiet
        return 1
    except Exception as exc:
        if debug:
            traceback.print_exc()
        detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        hint = "" if debug else "; run `clusterctl --debug ...` for the traceback"
        return fail(f"unexpected error ({detail}); this is a clusterctl bug{hint}", EX_SOFTWARE)


def main() -> None:
    """Console-script entry point: exit with `run()`'s status."""
    sys.exit(run())
