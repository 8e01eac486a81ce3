"""Publish order events to Kafka, at least once: acks=all, and a re-send of what a transient error failed.

A partition whose leader is gone or frozen (LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER, requests
timing out) fails deliveries for a while; the publisher sends those orders again with a backoff
until they are acknowledged. Consumers de-duplicate by order id (the record key).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaError, Producer

# errors that mean "not now", not "never"
TRANSIENT = {
    KafkaError.LEADER_NOT_AVAILABLE,
    KafkaError.NOT_LEADER_FOR_PARTITION,
    KafkaError.NOT_ENOUGH_REPLICAS,
    KafkaError.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError._MSG_TIMED_OUT,
    KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN,
}


class PublishError(Exception):
    """Orders that could not be published (a permanent error, or transient ones that did not clear)."""


@dataclass
class PublishReport:
    delivered: set[str] = field(default_factory=set)
    attempts: int = 0
    resent: int = 0  # orders sent again after a transient error
    errors: Counter[str] = field(default_factory=Counter)


class OrderPublisher:
    def __init__(self, bootstrap: str, topic: str, delivery_timeout_ms: int = 10_000, max_attempts: int = 20) -> None:
        self.topic = topic
        self.max_attempts = max_attempts
        self.producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "acks": "all",
                "message.timeout.ms": delivery_timeout_ms,
                "linger.ms": 5,
            }
        )

    def publish(self, orders: list[dict[str, Any]], backoff_s: float = 0.5) -> PublishReport:
        """Publish every order (each has an "id"); return what happened, or raise PublishError."""
        report = PublishReport()
        pending = {str(o["id"]): o for o in orders}
        while pending:
            if report.attempts == self.max_attempts:
                raise PublishError(f"{len(pending)} orders not published after {report.attempts} attempts")
            report.attempts += 1
            failed: dict[str, KafkaError] = {}

            def on_delivery(err: KafkaError | None, msg: Any, failed: dict[str, KafkaError] = failed) -> None:
                key = msg.key().decode()
                if err is None:
                    report.delivered.add(key)
                else:
                    failed[key] = err

            for order_id, order in pending.items():
                self.producer.produce(self.topic, key=order_id, value=json.dumps(order), on_delivery=on_delivery)
                self.producer.poll(0)
            self.producer.flush()
            permanent = {k: e for k, e in failed.items() if e.code() not in TRANSIENT and not e.retriable()}
            if permanent:
                key, err = next(iter(permanent.items()))
                raise PublishError(f"order {key}: {err.name()} ({err.str()})")
            report.errors.update(e.name() for e in failed.values())
            pending = {k: pending[k] for k in failed}
            if pending:
                report.resent += len(pending)
                time.sleep(backoff_s)
        return report
