"""When a new topic counts as served: every broker's own metadata answer has it, with a leader per partition."""

from __future__ import annotations

from clusterctl.kafka.admin import not_serving
from clusterctl.kafka.brokers import BrokerView


def view(broker: int, brokers: set[int], leaders: dict[int, int] | None) -> BrokerView:
    return BrokerView(broker, brokers, 1, leaders)


def test_every_broker_serving_every_partition_with_a_leader_is_done() -> None:
    views: dict[int, BrokerView | str] = {b: view(b, {1, 2, 3}, {0: 1, 1: 2}) for b in (1, 2, 3)}
    assert not_serving(views, 2) == []


def test_a_broker_without_the_topic_a_partition_or_a_leader_or_an_answer_is_behind() -> None:
    views: dict[int, BrokerView | str] = {
        1: view(1, {1, 2, 3}, None),
        2: view(2, {1, 2, 3}, {0: 1}),
        3: view(3, {1, 2, 3}, {0: 1, 1: -1}),
        4: "_TIMED_OUT",
    }
    assert not_serving(views, 2) == ["broker 1", "broker 2", "broker 3", "broker 4: _TIMED_OUT"]


def test_a_broker_another_lists_but_nobody_asked_is_behind() -> None:
    # the first metadata answer came from broker 1, which did not list broker 3 (back a moment ago) yet
    views: dict[int, BrokerView | str] = {1: view(1, {1, 2}, {0: 1}), 2: view(2, {1, 2, 3}, {0: 1})}
    assert not_serving(views, 1) == ["broker 3 (not asked yet)"]
