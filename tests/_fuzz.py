"""What the fuzz modules share: a tally of generated cases and the line that reports it in CI's log."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

import pytest


class Tally:
    """Generated cases run by one module, and the seconds they took."""

    def __init__(self) -> None:
        self.n = 0
        self.seconds = 0.0

    def add(self, started: float) -> None:
        self.n += 1
        self.seconds += time.monotonic() - started

    @contextlib.contextmanager
    def case(self) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.add(started)


def report_fixture(tally: Tally, what: str) -> Callable[[pytest.FixtureRequest], Iterator[None]]:
    """A module-scoped autouse fixture printing "<what>: N generated ... in S s" at the module's end."""

    @pytest.fixture(scope="module", autouse=True)
    def report_count(request: pytest.FixtureRequest) -> Iterator[None]:
        yield
        reporter = request.config.pluginmanager.get_plugin("terminalreporter")
        capture = request.config.pluginmanager.get_plugin("capturemanager")
        line = what.format(n=tally.n, seconds=tally.seconds)
        if reporter is not None and capture is not None:
            with capture.global_and_fixture_disabled():  # shown in CI's log, passing or not
                reporter.write_line(f"\n{line}")

    return report_count
