"""The signals that stop a command (Ctrl-C, what CI runners and `timeout` send, a closed terminal), and holding them
while a step that must not be cut in two runs."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def held(catch_late: bool = False) -> Iterator[list[bool]]:
    """Hold the stop signals until the block is done; one that came meanwhile is delivered right after (its handler
    runs). With `catch_late`, the KeyboardInterrupt that handler raises is caught and noted in the yielded list.
    Python runs handlers in the main thread only: elsewhere nothing is held."""
    late: list[bool] = []
    if threading.current_thread() is not threading.main_thread():
        yield late
        return
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield late
    finally:
        try:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        except KeyboardInterrupt:
            if not catch_late:
                raise
            late.append(True)
