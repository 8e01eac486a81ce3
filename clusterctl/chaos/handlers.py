"""Start, find and stop the NFQUEUE handler processes (nfqhandler.py) of the userspace network-fault path.

A handler is found by its command line (`-m clusterctl.chaos.nfqhandler ... --container NAME`) in /proc, so a
`heal` in another process than the fault's finds it too.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from clusterctl.errors import ClusterctlError
from clusterctl.wait import wait_until

if TYPE_CHECKING:
    from clusterctl.chaos.netns import NetNode

MODULE = "clusterctl.chaos.nfqhandler"


_STARTED: dict[int, subprocess.Popen[str]] = {}


def start_handler(node: NetNode, queue: int, mark: str, args: list[str]) -> int:
    """Start a handler for `queue` in the node's namespace, in its own session (it outlives this command until
    `heal`); return its pid once it is bound."""
    cmd = ["nsenter", "-t", str(node.pid), "-n", sys.executable, "-m", MODULE, "--queue", str(queue),
           "--container", node.container, "--pid", str(node.pid), "--mark", mark, *args]  # fmt: skip
    proc = subprocess.Popen(
        cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        start_new_session=True,
    )  # fmt: skip
    assert proc.stdout is not None
    first = proc.stdout.readline().strip()  # `ready`, or why not (the handler then exits)
    proc.stdout.close()
    if first != "ready":
        proc.wait(timeout=10)
        raise ClusterctlError(f"the packet handler for {node.target} did not start: {first or 'no output'}")
    _STARTED[proc.pid] = proc
    return proc.pid


def handler_pids(container: str) -> list[int]:
    """Pids of the handlers serving `container` now."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            argv = (d / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if MODULE.encode() in argv and _after(argv, b"--container") == container.encode() and not _zombie(int(d.name)):
            out.append(int(d.name))
    return out


def _after(argv: list[bytes], flag: bytes) -> bytes | None:
    return argv[argv.index(flag) + 1] if flag in argv[:-1] else None


def _zombie(pid: int) -> bool:
    proc = _STARTED.get(pid)
    if proc is not None and proc.poll() is not None:
        return True
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[-1].split()[0] == "Z"


def stop_handler(pid: int, timeout: float = 10.0) -> bool:
    """SIGTERM one handler (SIGKILL if it lingers); whether it is gone."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    try:
        wait_until(lambda: _zombie(pid) or not Path(f"/proc/{pid}").exists(), timeout=timeout,
                   what=f"packet handler {pid} to exit", interval=0.05)  # fmt: skip
    except ClusterctlError:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    if (proc := _STARTED.pop(pid, None)) is not None:
        proc.wait(timeout=5)
    return True


def stop_handlers(container: str, timeout: float = 10.0) -> list[int]:
    """SIGTERM every handler of `container` (SIGKILL if it lingers) and wait until it is gone; their pids."""
    pids = handler_pids(container)
    for p in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(p, signal.SIGTERM)
    if not pids:
        return []

    def alive() -> list[int]:
        return [p for p in pids if not _zombie(p)]

    try:
        wait_until(alive, timeout=timeout, what=f"the packet handlers of {container} to exit",
                   interval=0.05, done=lambda a: not a, seen=lambda a: f"pids {a} still running")  # fmt: skip
    except ClusterctlError:
        for p in alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(p, signal.SIGKILL)
    for p in pids:
        if (proc := _STARTED.pop(p, None)) is not None:
            proc.wait(timeout=5)
    return pids
