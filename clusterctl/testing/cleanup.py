"""Cleanup policy of a throwaway cluster: it is removed also when the run is interrupted.

SIGTERM (a CI timeout) becomes KeyboardInterrupt, so `finally` blocks and fixtures tear down; while the
cluster is being removed, SIGINT/SIGTERM are held off so a second Ctrl-C cannot abort the removal it asked for.
The removal itself is runtime's `Cluster.down`.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType
from typing import Any


class SigtermAsInterrupt:
    """Turns SIGTERM into KeyboardInterrupt while installed (main thread only, and only over the default)."""

    def __init__(self) -> None:
        self._previous: Any = None

    def install(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            self._previous = signal.signal(signal.SIGTERM, _raise_interrupt)

    def restore(self) -> None:
        if self._previous is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._previous)
            self._previous = None


@contextlib.contextmanager
def signals_held() -> Iterator[None]:
    """Ignore SIGINT/SIGTERM while removing: a second Ctrl-C (or a TERM to the process group, which reaches
    `docker compose down` too) must not abort the cleanup it asked for. SIGKILL still works."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")
