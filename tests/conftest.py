"""Shared fixtures. Real brokers only: tansu on loopback, ZooKeeper in Docker, Kafka when supplied."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from clusterctl.spec import ClusterSpec
from clusterctl.testing.tansu import TansuBroker, start_tansu

REPO = Path(__file__).resolve().parent.parent
# no Ryuk reaper container: it would need a pull, and tests clean up after themselves
os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
# A run started in the background of a non-interactive shell (`cmd &`) inherits SIGINT ignored, and an ignored
# signal stays ignored in every child: the Ctrl-C tests' CLI processes would never see their SIGINT. A handled
# signal is reset to the default on exec, so handling it here gives every child the normal Ctrl-C.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
KAFKA_DIST_ENV = "CLUSTERCTL_KAFKA_DIST"
NO_REAL_KAFKA = (
    f"needs real Apache Kafka: set {KAFKA_DIST_ENV} to a Kafka 3.x distribution "
    "(tarball or directory; no registry carries a Kafka image, so CI has none)"
)


def kafka_dist() -> Path | None:
    value = os.environ.get(KAFKA_DIST_ENV)
    return Path(value) if value else None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # `make test` runs two xdist workers with --dist loadgroup: a file's tests stay on one worker (its fixtures
    # and fixed subnets/ports start once), and every real_kafka test shares the one session cluster's worker
    for item in items:
        group = "real_kafka" if "real_kafka" in item.keywords else item.nodeid.split("::")[0]
        item.add_marker(pytest.mark.xdist_group(group))
    if kafka_dist() is not None:
        return
    skip = pytest.mark.skip(reason=NO_REAL_KAFKA)
    for item in items:
        if "real_kafka" in item.keywords:
            item.add_marker(skip)


@dataclass
class RealKafka:
    """The session's real Apache Kafka cluster: 3 ZooKeeper nodes + 3 brokers from the offline images."""

    spec_path: Path
    spec: ClusterSpec
    bootstrap: str
    project: str


# test-only addresses of the shared real-Kafka cluster (other docker tests use other subnets and ports)
REAL_KAFKA_SUBNET = "10.89.0.0/24"
REAL_KAFKA_ZK_PORT = 25181
REAL_KAFKA_BROKER_PORT = 29892


@pytest.fixture(scope="session")
def real_kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealKafka]:
    """One cluster for every real_kafka test, from CLUSTERCTL_KAFKA_DIST alone.

    Builds clusterctl/kafka:<dist version> (skipped when built), renders a 3 ZK + 3 broker offline spec, brings it
    up with the real CLI, and at the end takes it down with --volumes and checks nothing is left behind.
    """
    import uuid

    from _runtime_helpers import cli, leftovers, render, write_spec

    from clusterctl import images
    from clusterctl.spec import load_spec

    dist = kafka_dist()
    assert dist is not None  # real_kafka tests are skipped without it
    images.build_images(["zookeeper", "kafka"], kafka_dist=dist)
    work = tmp_path_factory.mktemp("real-kafka")
    project = f"ctlkafka-{uuid.uuid4().hex[:6]}"
    spec_path = write_spec(work, project, REAL_KAFKA_SUBNET, zk_port=REAL_KAFKA_ZK_PORT,
                           broker_port=REAL_KAFKA_BROKER_PORT, engine="kafka", brokers=3)  # fmt: skip
    render(spec_path)
    spec = load_spec(spec_path)
    try:
        res = cli(spec_path, "up", "--timeout", "300")
        assert res.returncode == 0, res.stderr
        yield RealKafka(spec_path, spec, spec.bootstrap_servers, project)
    finally:
        res = cli(spec_path, "down", "--volumes")
        assert res.returncode == 0, res.stderr
        assert leftovers(project) == {"containers": [], "networks": [], "volumes": []}


@pytest.fixture
def real_kafka(real_kafka_cluster: RealKafka) -> Iterator[RealKafka]:
    """The shared real-Kafka cluster, left healed and healthy after the test (no test depends on another's order)."""
    from clusterctl.chaos import faults
    from clusterctl.health import wait_healthy

    spec = real_kafka_cluster.spec
    yield real_kafka_cluster
    faults.heal_all(spec)
    faults.wait_healed(spec, timeout=180)
    wait_healthy(spec, timeout=60)
    faults.wait_full_isr(spec.bootstrap_servers, timeout=180)


@pytest.fixture
def built_kafka_3_7(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rendered files do not depend on which Kafka image this machine has built: pretend 3.7.0."""
    from clusterctl import kafkadist

    monkeypatch.delenv(kafkadist.KAFKA_DIST_ENV, raising=False)
    monkeypatch.setattr(kafkadist, "built_versions", lambda: ["3.7.0"])


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
