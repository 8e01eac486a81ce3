"""Retrying the errors a replicated cluster answers while it moves things around.

A controller moved, a new topic's metadata has not reached every broker yet, a leader is being elected:
such requests are asked again, within a budget. An unreachable or silent cluster is not retried here: that
stays one fast line.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from typing import Any, TypeVar

from confluent_kafka.admin import AdminClient

from clusterctl.errors import ClusterctlError
from clusterctl.kafka.connection import admin_config, fetch_metadata
from clusterctl.wait import wait_until

T = TypeVar("T")
_log = logging.getLogger(__name__)
# retried within RETRY_BUDGET_S
RETRIABLE = {
    "NOT_CONTROLLER",
    "LEADER_NOT_AVAILABLE",
    "NOT_LEADER_OR_FOLLOWER",
    "NOT_LEADER_FOR_PARTITION",
    "COORDINATOR_NOT_AVAILABLE",
    "NOT_COORDINATOR",
    "COORDINATOR_LOAD_IN_PROGRESS",
    "BROKER_NOT_AVAILABLE",
    "REPLICA_NOT_AVAILABLE",
    "NOT_ENOUGH_REPLICAS",
    "FENCED_LEADER_EPOCH",  # a request built on metadata from before a leader change
    "UNKNOWN_LEADER_EPOCH",
    "OFFSET_NOT_AVAILABLE",  # a new leader not yet sure of its high watermark
    # librdkafka (2.10+) drops the handle of a broker that left the metadata (a fenced KRaft broker, one just
    # restarted) and fails what was in flight to it
    "_DESTROY_BROKER",
}
RETRY_BUDGET_S = 30.0
# a create that timed out may have happened: only errors that say "not done, ask again" are retried
CREATE_RETRIABLE = {"NOT_CONTROLLER", "LEADER_NOT_AVAILABLE", "BROKER_NOT_AVAILABLE"}
# the request was sent and its answer lost: it may have happened, so the next attempt checks for that first
AMBIGUOUS = {"_TIMED_OUT", "REQUEST_TIMED_OUT", "_DESTROY_BROKER"}
DELETE_RETRIABLE = CREATE_RETRIABLE | {"UNKNOWN", "REQUEST_TIMED_OUT", "_DESTROY_BROKER"}
ELECT_RETRIABLE = RETRIABLE | {"_TIMED_OUT", "REQUEST_TIMED_OUT"}  # an election asked twice elects once


def retrying(
    what: str,
    fn: Callable[[], T],
    budget_s: float = RETRY_BUDGET_S,
    retriable: Collection[str] = RETRIABLE,
    first_backoff_s: float = 0.25,
) -> T:
    """Call `fn`, retrying Kafka's retriable errors (NOT_CONTROLLER, LEADER_NOT_AVAILABLE, ...) for at most
    `budget_s`, with exponential backoff (`first_backoff_s` doubling up to 2 s, on wait_until); the last error is
    raised as it is when the budget runs out. Any other error is raised at once."""

    def retry(exc: BaseException) -> bool:
        code = _error_code(exc) if isinstance(exc, ClusterctlError) else None
        if code not in retriable:
            return False
        _log.debug("%s: %s, retrying within %.0fs", what, code, budget_s)
        return True

    return wait_until(
        fn,
        timeout=budget_s,
        what=what,
        interval=first_backoff_s,
        max_interval=2.0,
        done=lambda _: True,
        retry_on=retry,
        reraise=True,
    )


def _error_code(exc: ClusterctlError) -> str | None:
    """The Kafka error name a ClusterctlError carries (kafka_error keeps it), if any."""
    code = getattr(exc, "kafka_code", None)
    if code:
        return str(code)
    text = str(exc)
    return next((c for c in RETRIABLE if text.startswith(c + ":") or f" {c}:" in text), None)


def controller_admin(bootstrap: str, **overrides: Any) -> AdminClient:
    """A new AdminClient that has just read the cluster's metadata, for one request to the controller.

    librdkafka keeps the controller id of its last metadata answer (refreshed every 5 minutes): a client
    that saw the controller before a failover keeps sending to the old one, which answers NOT_CONTROLLER
    to every retry. So each attempt of a controller request gets its own client.
    """
    client = AdminClient(admin_config(bootstrap, **overrides))
    fetch_metadata(bootstrap, client=client)
    return client
