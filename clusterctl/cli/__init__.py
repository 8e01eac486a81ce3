"""The Typer application: one module per noun, each exposing `register(app)`."""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import traceback
from collections.abc import Iterable
from typing import Any

import typer
import typer.main

from clusterctl.cli import fastparams
from clusterctl.cli.common import root_callback, signals_interrupt, stopped_by
from clusterctl.errors import ClusterctlError, OutputError
from clusterctl.output import error_json, error_line, guarded_streams, lost_output_line, to_jsonable

fastparams.install()  # plain option values without pydantic (typer's adapters cost ~0.15 s per run)

NOUN_MODULES = (
    "images",
    "versions",
    "cluster",
    "quorum",
    "topic",
    "group",
    "zk",
    "perf",
    "chaos",
    "leader",
    "reassign",
    "scenario",
    "spark",
    "ui",
    "migrate",
    "upgrade",
    "swarm",
    "acl",
    "user",
    "metrics",
)
# The module that registers each top-level command: main() imports and builds only the one a command line
# names, so `clusterctl topic list` pays neither for the other modules nor for typer building their commands.
# A command missing here still works: main() then builds every module, as for --help and completion.
COMMAND_MODULE = {
    **dict.fromkeys(("init", "render", "up", "down", "status", "logs", "cluster"), "cluster"),
    "quorum": "quorum",
    "images": "images",
    "versions": "versions",
    **dict.fromkeys(("topic", "produce", "consume"), "topic"),
    "chaos": "chaos",
    "leader": "leader",
    "reassign": "reassign",
    "group": "group",
    "zk": "zk",
    "perf": "perf",
    "scenario": "scenario",
    "spark": "spark",
    "ui": "ui",
    "migrate": "migrate",
    "upgrade": "upgrade",
    "swarm": "swarm",
    "acl": "acl",
    "user": "user",
    "client-config": "user",
    "metrics": "metrics",
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


EX_SOFTWARE = 70  # sysexits.h: an internal error (a bug), as opposed to the user's input or the cluster
INTERRUPTED = 130  # 128 + SIGINT, what shells report for Ctrl-C (143 for SIGTERM, 129 for SIGHUP)


def _flag(args: list[str], flag: str) -> bool:
    """Whether `flag` is among the options (before a `--` end-of-options marker)."""
    return flag in (args[: args.index("--")] if "--" in args else args)


def run(args: list[str] | None = None, *, final: bool = False) -> int:
    """Run the CLI and return its exit status, whichever way the command ends.

    Every exit path goes through here: a command's success (0), a ClusterctlError (its exit code, one
    line), a usage error (2, one line), typer.Exit(n) (n), Ctrl-C, SIGTERM or SIGHUP (128 + the signal,
    "interrupted by SIG...", after the same cleanup), a failed write to stdout (74, one line saying what was
    done), and anything unexpected (70, one line pointing at --debug for the traceback). With `--json`,
    failures also print `{"error": ..., "exit_code": ...}` on stdout so stdout is valid JSON either way.
    A command that succeeded but lost output on stderr (full, closed) exits 74 too.
    `final`: this process ends with the command (the console script): a stop signal after it is ignored.
    """
    args = sys.argv[1:] if args is None else list(args)
    with guarded_streams() as lost:
        code = _run(args, final)
    return OutputError.exit_code if code == 0 and lost.streams else code


def _run(args: list[str], final: bool) -> int:
    import typer._click.exceptions as click_exc

    as_json = _flag(args, "--json")
    debug = _flag(args, "--debug") or os.environ.get("CLUSTERCTL_DEBUG", "") not in ("", "0")

    def fail(message: str, code: int, result: object = None) -> int:
        try:
            error_line(message)
            if as_json:
                error_json(message, code, to_jsonable(result))
        except (BrokenPipeError, ValueError, OutputError):  # stdout/stderr closed, full or gone
            pass
        return code

    try:
        with signals_interrupt(final):  # inside the try: a signal at any moment is an interrupt handled below
            command = typer.main.get_command(app_for(args))
            command._main_shell_completion({}, "clusterctl", None)  # _CLUSTERCTL_COMPLETE=...: answer and exit
            with command.make_context("clusterctl", args) as ctx:
                command.invoke(ctx)
        return 0
    except OutputError as exc:
        return fail(lost_output_line(exc), exc.exit_code)
    except ClusterctlError as exc:
        return fail(str(exc), exc.exit_code, exc.result)
    except KeyboardInterrupt as exc:
        sig = stopped_by()
        return fail(f"interrupted by {sig.name}", 128 + sig, getattr(exc, "result", None))
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
    except BrokenPipeError:  # a pipe's reader left under a write that bypassed the guarded streams
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - keep interpreter shutdown's flush quiet
        lost = OutputError("stdout could not be written (its reader left: a broken pipe)")
        return fail(lost_output_line(lost), lost.exit_code)
    except Exception as exc:
        if debug:
            traceback.print_exc()
        detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        hint = "" if debug else "; run `clusterctl --debug ...` for the traceback"
        return fail(f"unexpected error ({detail}); this is a clusterctl bug{hint}", EX_SOFTWARE)


def _hold_closed_descriptors() -> None:
    """Put /dev/null on a standard descriptor the caller closed (`>&-`), so no file or socket opened later
    takes its number (and receives what a child process writes there); the stream itself stays closed."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)


def _quiet_failed_streams() -> None:
    """A stream whose write failed keeps its buffer: point its descriptor at /dev/null so the interpreter's
    last flush does not fail again (a second message and exit 120)."""
    for stream, fd in ((sys.stdout, 1), (sys.stderr, 2)):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            with contextlib.suppress(OSError):
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, fd)
                os.close(null)


def _is_the_process() -> bool:
    """Whether this process is the `clusterctl` command (its console script or `python -m clusterctl`), not a
    program calling main() in-process (a test runner keeps its signals)."""
    entry = sys.modules.get("__main__")
    spec = getattr(entry, "__spec__", None)
    script = os.path.basename(getattr(entry, "__file__", None) or "")
    return getattr(spec, "name", None) == "clusterctl.__main__" or script == "clusterctl"


def main() -> None:
    """Console-script entry point: exit with `run()`'s status."""
    _hold_closed_descriptors()
    final = _is_the_process()
    code = run(final=final)
    _quiet_failed_streams()
    from clusterctl.cli.common import teardown_skipped

    # only the command's own process ends without teardown: a program that called main() in-process (a test
    # runner's worker, after an in-process `perf produce` set the flag) gets SystemExit like any other exit
    if final and teardown_skipped():
        for stream in (sys.stdout, sys.stderr):  # None: the caller closed it (`>&-`)
            with contextlib.suppress(OSError, ValueError, AttributeError):
                stream.flush()
        os._exit(code)
    sys.exit(code)
