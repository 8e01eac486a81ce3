"""The one poll loop: its results, its retries and how every timeout reads."""

from __future__ import annotations

import itertools

import pytest

from clusterctl.errors import ClusterctlError, TimeoutError_, UnreachableError
from clusterctl.wait import wait_until


def test_returns_the_first_answer_that_is_done() -> None:
    answers = iter([0, 0, 3, 4])
    assert wait_until(lambda: next(answers), timeout=5, what="a count", interval=0.001) == 3


def test_done_and_seen_shape_the_wait_and_its_timeout_line() -> None:
    with pytest.raises(TimeoutError_) as exc:
        wait_until(
            lambda: ["zk1 down"],
            timeout=0.05,
            what="a healthy cluster",
            interval=0.01,
            done=lambda missing: not missing,
            seen=lambda missing: f"still missing: {', '.join(missing)}",
            hint="see status",
        )
    assert exc.value.exit_code == 5
    assert exc.value.message == "timed out after 0s waiting for a healthy cluster; still missing: zk1 down"
    assert exc.value.hint == "see status"


def test_retried_errors_count_as_not_yet_and_name_the_last_one() -> None:
    calls = itertools.count()

    def flaky() -> int:
        if next(calls) < 2:
            raise UnreachableError("broker 1 not reachable")
        return 7

    assert wait_until(flaky, timeout=5, what="x", interval=0.001, retry_on=lambda e: True) == 7

    def unreachable() -> int:
        raise UnreachableError("broker 1 not reachable")

    with pytest.raises(TimeoutError_, match=r"waiting for a leader; broker 1 not reachable$"):
        wait_until(
            unreachable,
            timeout=0.02,
            what="a leader",
            interval=0.005,
            retry_on=lambda e: isinstance(e, UnreachableError),
        )


def test_other_errors_propagate_at_once_and_reraise_keeps_the_last_one() -> None:
    calls = itertools.count()

    def boom() -> int:
        next(calls)
        raise ValueError("bug")

    with pytest.raises(ValueError):
        wait_until(boom, timeout=5, what="x", retry_on=lambda e: isinstance(e, ClusterctlError))
    assert next(calls) == 1

    def not_controller() -> int:
        raise ClusterctlError("NOT_CONTROLLER: moved")

    with pytest.raises(ClusterctlError, match="NOT_CONTROLLER"):
        wait_until(
            not_controller, timeout=0.05, what="x", interval=0.01, max_interval=0.02, retry_on=lambda e: True,
            reraise=True,
        )  # fmt: skip


def test_on_poll_sees_every_answer_and_one_call_is_always_made() -> None:
    seen: list[tuple[int, float]] = []
    with pytest.raises(TimeoutError_):
        wait_until(lambda: 0, timeout=0, what="x", on_poll=lambda r, t: seen.append((r, t)))
    assert len(seen) == 1 and seen[0][0] == 0
