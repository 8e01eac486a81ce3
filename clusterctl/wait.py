"""The one poll loop: ask until a condition holds or the time is up, and say the same thing when it is up.

Every wait in clusterctl (a healthy cluster, a full ISR, a new leader, a port, a retried request) goes through
`wait_until`, so every timeout reads "timed out after Ns waiting for WHAT; LAST SEEN" with exit code 5.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from clusterctl.errors import ClusterctlError, TimeoutError_

T = TypeVar("T")


def wait_until(
    check: Callable[[], T],
    *,
    timeout: float,
    what: str,
    interval: float = 0.5,
    max_interval: float | None = None,
    done: Callable[[T], bool] = bool,
    seen: Callable[[T], str] | None = None,
    retry_on: Callable[[BaseException], bool] | None = None,
    reraise: bool = False,
    on_poll: Callable[[T, float], None] | None = None,
    started: float | None = None,
    hint: str | None = None,
) -> T:
    """Call `check` until `done(result)`; return that result.

    - `interval` is the pause between calls; with `max_interval` it doubles after each call up to that bound.
    - An exception for which `retry_on(exc)` is true counts as "not yet" (its text is what was seen); any other
      exception propagates at once. With `reraise`, the last such exception is raised as it is when time is up.
    - `seen(result)` describes the last answer for the timeout message; `on_poll(result, elapsed)` sees each one.
    - `started` (a time.monotonic() reading) counts the timeout from an earlier moment; at least one call is made.
    """
    started = time.monotonic() if started is None else started
    pause = interval
    while True:
        last_error: BaseException | None = None
        try:
            result = check()
        except Exception as exc:
            if retry_on is None or not retry_on(exc):
                raise
            last_error = exc
        elapsed = time.monotonic() - started
        if last_error is None:
            if on_poll is not None:
                on_poll(result, elapsed)
            if done(result):
                return result
        remaining = timeout - elapsed
        if remaining <= 0 or (max_interval is not None and pause > remaining):
            if last_error is not None and reraise:
                raise last_error
            raise _timed_out(what, elapsed, _describe(last_error, result if last_error is None else None, seen), hint)
        time.sleep(max(0.0, min(pause, remaining)))
        if max_interval is not None:
            pause = min(pause * 2, max_interval)


def _describe(error: BaseException | None, result: object, seen: Callable[[T], str] | None) -> str:
    if error is not None:
        return error.message if isinstance(error, ClusterctlError) else str(error) or type(error).__name__
    return seen(result) if seen is not None else ""  # type: ignore[arg-type]


def _timed_out(what: str, elapsed: float, last: str, hint: str | None) -> TimeoutError_:
    message = f"timed out after {elapsed:.0f}s waiting for {what}"
    if last:
        message += f"; {last}"
    return TimeoutError_(" ".join(message.split()), hint=hint)
