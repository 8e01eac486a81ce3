"""kafka.retry.retrying on wait_until: which errors are asked again, how long it waits between, what it raises."""

from __future__ import annotations

import itertools

import pytest

from clusterctl import wait
from clusterctl.errors import ClusterctlError, UnreachableError
from clusterctl.kafka.retry import CREATE_RETRIABLE, retrying


@pytest.fixture
def pauses(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    slept: list[float] = []
    monkeypatch.setattr(wait.time, "sleep", slept.append)
    return slept


def test_retriable_codes_are_asked_again_with_doubling_backoff(pauses: list[float]) -> None:
    calls = itertools.count()

    def flaky() -> None:  # a None answer is an answer: it is not asked again
        if next(calls) < 5:
            raise ClusterctlError("NOT_CONTROLLER: the controller moved")

    assert retrying("create topic t", flaky) is None
    assert pauses == [0.25, 0.5, 1.0, 2.0, 2.0]


def test_other_errors_are_raised_at_once(pauses: list[float]) -> None:
    def unreachable() -> None:
        raise UnreachableError("broker 1 not reachable")

    with pytest.raises(UnreachableError):
        retrying("x", unreachable)

    def leader_moving() -> None:
        raise ClusterctlError("NOT_LEADER_OR_FOLLOWER: moving")

    with pytest.raises(ClusterctlError, match="NOT_LEADER_OR_FOLLOWER"):
        retrying("x", leader_moving, retriable=CREATE_RETRIABLE)
    assert pauses == []


def test_the_last_error_is_raised_as_is_when_the_budget_runs_out() -> None:
    errors = iter(ClusterctlError(f"LEADER_NOT_AVAILABLE: attempt {n}") for n in itertools.count())

    def never() -> None:
        raise next(errors)

    with pytest.raises(ClusterctlError, match=r"^LEADER_NOT_AVAILABLE: attempt 1$"):
        retrying("x", never, budget_s=0.3, first_backoff_s=0.2)
