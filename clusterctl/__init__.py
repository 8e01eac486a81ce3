"""clusterctl: stand up, inspect, load and break a ZooKeeper + Kafka cluster on Docker."""

import contextlib
import os
import signal
import sys
from pathlib import Path

__version__ = "0.1.0"

# the spec and compose templates and the image build contexts (package data: a link to the repository's templates/)
TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"


def _is_the_cli() -> bool:
    """Whether this process is the `clusterctl` command being started (its console script or `python -m
    clusterctl`), not a program importing the package (a test runner keeps its signals)."""
    argv = list(getattr(sys, "orig_argv", []))[1:]
    i = 0
    while i < len(argv):  # the interpreter's own options come first, then -m MODULE, -c or a script
        if argv[i] == "-m":
            return argv[i + 1 : i + 2] in (["clusterctl"], ["clusterctl.__main__"])
        if not argv[i].startswith("-") or argv[i] == "-c":
            break
        i += 2 if argv[i] in ("-X", "-W", "--check-hash-based-pycs") else 1
    return os.path.basename(sys.argv[0] if sys.argv else "") == "clusterctl"


def _stopped_while_starting(signum: int, _frame: object) -> None:
    """A stop signal before the command's own handlers are in place (Python is still importing it): nothing has
    been done, so there is nothing to undo; the one line (and with --json the error object), then 128 + N. Until
    now SIGINT here was a KeyboardInterrupt traceback and SIGTERM/SIGHUP a death without a word."""
    name = signal.Signals(signum).name
    line = f"interrupted by {name}"
    code = 128 + signum
    writes = [(2, f"error: {line}\n")]
    if "--json" in sys.argv[1:]:
        writes.insert(0, (1, f'{{"error": "{line}", "exit_code": {code}}}\n'))
    for fd, text in writes:
        with contextlib.suppress(OSError):  # closed or full: the status still says it
            os.write(fd, text.encode())
    os._exit(code)


if _is_the_cli():  # the stop handlers of clusterctl.cli.common take over once the command line is being run
    for _sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(_sig) is not signal.SIG_IGN:  # nohup and a background job's SIGINT stay ignored
            signal.signal(_sig, _stopped_while_starting)
