"""A fork server for generated CLI cases whose failure may be a crash (SIGSEGV, SIGKILL) or a hang.

In-process (`cli.run`) a crash would take the test run down, and a fresh interpreter per case costs ~1 s. This
server imports clusterctl once (no librdkafka handle, no thread), then forks one child per case: the child runs
`cli.run(argv)` with its stdout/stderr on pipes and an alarm, the parent reports the child's wait status (a
negative code: the signal that ended it) as one JSON line per case.

    python tests/_forkcli.py            # reads {"argv": [...], "alarm": s} lines, writes {"code", "err", ...}
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import sys
import time


def _preload() -> None:
    import clusterctl.cli.perf
    import clusterctl.cli.spark
    import clusterctl.cli.topic
    import clusterctl.kafka.clientprops
    import clusterctl.kafka.perf
    import clusterctl.kafka.perf_consume
    import clusterctl.kafka.perf_e2e  # noqa: F401

    with open(os.devnull, "w") as sink:  # typer builds its app and help once, here
        saved = sys.stdout, sys.stderr
        sys.stdout = sys.stderr = sink
        try:
            from clusterctl import cli

            cli.run(["perf", "--help"])
        finally:
            sys.stdout, sys.stderr = saved


def _drain(fds: list[int]) -> list[bytes]:
    """Everything the pipes carry until both close, read as it comes (a child never blocks on a full pipe)."""
    data = {fd: b"" for fd in fds}
    open_fds = list(fds)
    while open_fds:
        ready, _, _ = select.select(open_fds, [], [])
        for fd in ready:
            chunk = os.read(fd, 65536)
            if chunk:
                data[fd] = (data[fd] + chunk)[-65536:]
            else:
                os.close(fd)
                open_fds.remove(fd)
    return [data[fd] for fd in fds]


def run_case(argv: list[str], alarm: int) -> dict[str, object]:
    from clusterctl import cli

    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: the command, its exit status, nothing else (no atexit, no flush of the parent's)
        os.close(out_r)
        os.close(err_r)
        os.dup2(out_w, 1)
        os.dup2(err_w, 2)
        sys.stdout = os.fdopen(1, "w", closefd=False)
        sys.stderr = os.fdopen(2, "w", closefd=False)
        signal.alarm(alarm)  # a hang ends as SIGALRM: the parent sees -14
        code = cli.run(argv, final=True)
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        os._exit(code)
    os.close(out_w)
    os.close(err_w)
    out, err = _drain([out_r, err_r])
    _, status = os.waitpid(pid, 0)
    return {
        "code": os.waitstatus_to_exitcode(status),
        "out": out.decode("utf-8", "replace")[-4000:],
        "err": err.decode("utf-8", "replace")[-4000:],
        "seconds": round(time.monotonic() - started, 3),
    }


def main() -> None:
    _preload()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        case = json.loads(line)
        print(json.dumps(run_case(case["argv"], int(case.get("alarm", 30)))), flush=True)


if __name__ == "__main__":
    main()
