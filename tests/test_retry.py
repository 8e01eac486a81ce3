"""kafka.retry.retrying on wait_until: which errors are asked again, how long it waits between, what it raises."""

from __future__ import annotations

import itertools
from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from clusterctl import wait
from clusterctl.errors import ClusterctlError, UnreachableError
from clusterctl.kafka import connection
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


class _PartialThenAnswer:
    """librdkafka's `_PARTIAL` (a broker connection changed under the request) cannot be caused on demand."""

    def __init__(self, partials: int) -> None:
        self.partials = partials
        self.asked = 0

    def list_topics(self, timeout: float) -> str:
        self.asked += 1
        if self.asked <= self.partials:
            raise KafkaException(KafkaError(KafkaError._PARTIAL, "Failed to get metadata: Local: Partial response"))
        return "metadata"


def test_a_partial_metadata_answer_is_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(connection.time, "sleep", lambda _s: None)
    client = _PartialThenAnswer(partials=2)
    assert connection.fetch_metadata("b:9092", timeout=5.0, client=client) == "metadata"  # type: ignore[arg-type]
    assert client.asked == 3


def test_a_partial_answer_is_raised_once_the_timeout_is_spent() -> None:
    client = _PartialThenAnswer(partials=10**6)
    with pytest.raises(ClusterctlError, match="_PARTIAL") as exc:
        connection.fetch_metadata("b:9092", timeout=0.5, client=client)  # type: ignore[arg-type]
    assert exc.value.kafka_code == "_PARTIAL"
    assert 2 <= client.asked <= 4


@pytest.mark.parametrize("code", ["_TIMED_OUT", "_DESTROY_BROKER"])
def test_a_create_whose_answer_was_lost_is_asked_again_and_the_topic_found_is_its_own(
    monkeypatch: pytest.MonkeyPatch, pauses: list[float], code: str
) -> None:
    from clusterctl.kafka import admin

    asked: list[bool] = []

    def once(_b: str, _n: str, _p: int, _rf: int, _c: object, if_not_exists: bool, _a: object) -> admin.TopicChange:
        asked.append(if_not_exists)
        if len(asked) == 1:  # sent; the broker's answer never came (timed out, or librdkafka dropped its handle)
            exc = ClusterctlError(f"{code}: no answer")
            exc.kafka_code = code
            raise exc
        return admin.TopicChange("t", "create", False, note="already exists")  # what the first request created

    monkeypatch.setattr(admin, "_create_topic_once", once)
    change = admin.create_topic("b:9092", "t", 3, 3, wait_served_s=0)
    assert asked == [False, True]  # the retry accepts the existing topic: the lost request made it
    assert (change.changed, change.partitions, change.replication_factor) == (True, 3, 3)
    assert change.note is not None and "answer to the create request was lost" in change.note
    assert pauses == [0.25]


def test_a_topic_that_existed_before_is_not_reported_created(
    monkeypatch: pytest.MonkeyPatch, pauses: list[float]
) -> None:
    from clusterctl.kafka import admin

    def exists(*_args: object) -> admin.TopicChange:
        raise ClusterctlError("topic 't' already exists")

    monkeypatch.setattr(admin, "_create_topic_once", exists)
    with pytest.raises(ClusterctlError, match="already exists"):
        admin.create_topic("b:9092", "t", 3, 3, wait_served_s=0)
    assert pauses == []


def test_partitions_whose_answer_was_lost_are_not_asked_for_twice(
    monkeypatch: pytest.MonkeyPatch, pauses: list[float]
) -> None:
    from clusterctl.kafka import admin

    counts = iter([3, 6])  # before the request; after it, looked up when its answer was lost
    asked: list[int] = []

    class Client:
        def create_partitions(self, new: list[Any], request_timeout: float) -> dict[str, Any]:
            asked.append(new[0].new_total_count)
            answer: Future[None] = Future()
            answer.set_exception(KafkaException(KafkaError(KafkaError._DESTROY_BROKER, "Broker handle destroyed")))
            return {"t": answer}

    monkeypatch.setattr(admin, "describe_topic", lambda _b, _n: admin.TopicDescription("t", next(counts), 3, False, []))
    monkeypatch.setattr(admin, "controller_admin", lambda _b: Client())
    change = admin.create_partitions("b:9092", "t", 6, wait_served_s=0)
    assert change.changed and asked == [6] and pauses == [0.25]
