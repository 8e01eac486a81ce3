"""Shared fixtures. Real brokers only: tansu on loopback, ZooKeeper in Docker, Kafka when supplied."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterctl.testing.tansu import TansuBroker, start_tansu

REPO = Path(__file__).resolve().parent.parent
# no Ryuk reaper container: it would need a pull, and tests clean up after themselves
os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
KAFKA_DIST_ENV = "CLUSTERCTL_KAFKA_DIST"
NO_REAL_KAFKA = (
    f"needs real Apache Kafka: set {KAFKA_DIST_ENV} to a Kafka 3.x distribution tarball "
    "(none can be obtained in this workplace: no registry carries a Kafka image or distribution)"
)


def kafka_dist() -> Path | None:
    value = os.environ.get(KAFKA_DIST_ENV)
    return Path(value) if value else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if kafka_dist() is not None:
        return
    skip = pytest.mark.skip(reason=NO_REAL_KAFKA)
    for item in items:
        if "real_kafka" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def tansu_broker() -> Iterator[TansuBroker]:
    """One tansu broker for the whole session (topics are namespaced per test)."""
    broker = start_tansu()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def bootstrap(tansu_broker: TansuBroker) -> str:
    return tansu_broker.bootstrap


@pytest.fixture
def unique_name(request: pytest.FixtureRequest) -> str:
    """A topic/group name unique to this test."""
    import re
    import uuid

    base = re.sub(r"[^a-zA-Z0-9]+", "-", request.node.name)[:40].strip("-")
    return f"{base}-{uuid.uuid4().hex[:6]}"
