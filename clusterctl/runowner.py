"""Which process runs a long, resumable command on a spec now: an exclusive flock on a lock file beside the
command's state file, held for the whole run, with the holder's pid, host and start time written into it.

The kernel lets go of a flock when its holder dies, however it dies (SIGKILL included), so a held lock means a live
holder: a state file that records a step as begun while nobody holds the lock was interrupted. A pid file alone
could not tell a dead holder from its pid reused by another process.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from clusterctl.errors import ClusterctlError, TimeoutError_
from clusterctl.output import format_time
from clusterctl.signals import held
from clusterctl.wait import wait_until

# A reader (`holder`) holds a shared lock for an instant to probe: a taker that meets it tries again this long.
# The holder writes its record right after it takes the lock: a reader that finds it empty reads again this long.
SETTLE_S = 1.0
_MAX_RECORD = 4096


@dataclass(frozen=True)
class Owner:
    """The process holding the lock: what it runs, its pid and host, and when it took the lock (epoch seconds)."""

    command: str
    pid: int  # 0: the holder's record could not be read
    host: str
    started: float

    @property
    def since(self) -> str:
        """The start as an ISO-8601 time of day (UTC unless `--local-time`), e.g. 16:40:02Z."""
        return format_time(int(self.started)).partition("T")[2] or "-"

    @property
    def where(self) -> str:
        if not self.pid:
            return "pid unknown"
        elsewhere = "" if self.host == socket.gethostname() else f", on {self.host}"
        return f"pid {self.pid}, since {self.since}{elsewhere}"


_UNKNOWN = Owner("another run", 0, "", 0.0)  # a holder whose record cannot be read (or one that just let go)


class AlreadyRunning(ClusterctlError):
    """Another process holds the lock: refused before any work."""

    exit_code = 2

    def __init__(self, lock: Path, owner: Owner) -> None:
        self.lock = lock
        self.owner = owner
        super().__init__(
            f"{owner.command} is already running ({owner.where}; it holds {lock}): "
            "wait for it to end, or stop it, then run again"
        )


def _record(fd: int) -> Owner | None:
    try:
        data = json.loads(os.pread(fd, _MAX_RECORD, 0))
        return Owner(str(data["command"]), int(data["pid"]), str(data["host"]), float(data["started"]))
    except (OSError, ValueError, TypeError, KeyError):
        return None


def _same_file(fd: int, path: Path) -> bool:
    try:
        now = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino)


def _try_take(path: Path, owner: Owner) -> int | None:
    """A descriptor holding the lock with `owner` written into it, or None when another process holds it."""
    with held():  # an interrupt now would leave the lock held by this process with no one to let it go
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise ClusterctlError(f"cannot create the lock file {path}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        # a holder removes the file as it lets go: a lock on the file it removed locks nothing
        if not _same_file(fd, path):
            os.close(fd)
            return None
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(asdict(owner)).encode(), 0)
        return fd


def _let_go(fd: int, path: Path) -> None:
    with held():
        if _same_file(fd, path):
            with contextlib.suppress(OSError):
                path.unlink()
        os.close(fd)


@contextlib.contextmanager
def own(lock: Path, command: str) -> Iterator[Owner]:
    """Hold `lock` for the block, with this process's pid, host and start time in it; AlreadyRunning (one line,
    naming the holder's pid) when another process holds it. The lock file is removed as the block ends."""
    me = Owner(command, os.getpid(), socket.gethostname(), time.time())
    try:
        fd = wait_until(lambda: _try_take(lock, me), done=lambda fd: fd is not None, timeout=SETTLE_S,
                        interval=0.05, what=f"the lock {lock}")  # fmt: skip
    except TimeoutError_:
        raise AlreadyRunning(lock, holder(lock) or _UNKNOWN) from None
    assert fd is not None
    try:
        yield me
    finally:
        _let_go(fd, lock)


def holder(lock: Path) -> Owner | None:
    """The live process holding `lock`, or None when nobody holds it (never taken, released, or its holder died)."""
    try:
        fd = os.open(lock, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            pass
        else:
            return None
        try:
            return wait_until(lambda: _record(fd), timeout=SETTLE_S, interval=0.05, what=f"the record in {lock}")
        except TimeoutError_:
            return _UNKNOWN
    finally:
        os.close(fd)
