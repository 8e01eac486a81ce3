"""Shared fixtures. Real brokers only: Apache Kafka from Maven Central in Docker, ZooKeeper, tansu on loopback."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from clusterctl.spec.model import ClusterSpec
from clusterctl.testing import cleanup
from clusterctl.testing.tansu import TansuBroker, start_tansu

if TYPE_CHECKING:
    from clusterctl.testing import KafkaCluster

REPO = Path(__file__).resolve().parent.parent
# no Ryuk reaper container: it would need a pull, and tests clean up after themselves
os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
# A run started in the background of a non-interactive shell (`cmd &`) inherits SIGINT ignored, and an ignored
# signal stays ignored in every child: the Ctrl-C tests' CLI processes would never see their SIGINT. A handled
# signal is reset to the default on exec, so handling it here gives every child the normal Ctrl-C.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)
KAFKA_DIST_ENV = "CLUSTERCTL_KAFKA_DIST"


def kafka_dist() -> Path:
    """The Kafka every real_kafka test runs: $CLUSTERCTL_KAFKA_DIST (set for the whole session by pytest_configure)."""
    return Path(os.environ[KAFKA_DIST_ENV])


# The SIGHUP tests need children whose SIGHUP is not ignored: under `nohup` the ignored disposition is
# inherited, and clusterctl rightly keeps an ignored signal ignored.
if signal.getsignal(signal.SIGHUP) is signal.SIG_IGN:
    signal.signal(signal.SIGHUP, signal.SIG_DFL)


def pytest_configure(config: pytest.Config) -> None:
    """Own the run (clusterctl.testing.ownership) and pin the session's Kafka.

    The process that begins the run first removes what earlier runs whose pytest is gone left behind (found by
    their claim files and the compose project label); SIGTERM, to pytest or to an xdist worker, becomes
    KeyboardInterrupt, so tests' `finally` blocks and fixture teardown run as on Ctrl-C.
    """
    _own_run(config)
    _pin_kafka()


# pytest-xdist (`make test`: -n 2 --dist loadfile) hands out whole files. Upstream orders them by their number of
# tests, which puts the one-test, several-minute files (a swarm drill, a migration) last, where one worker runs them
# while the other has nothing left. Here the longest work goes first (seconds of a CI run on this machine; only the
# order matters), and the namespace-host files are one unit: their harness holds a machine-wide lock for its whole
# life, so two of them on two workers would only wait for each other.
NSHOST_FILES = ("test_nshosts", "test_swarm_cluster", "test_swarm_kafka", "test_swarm_ops")
SCHEDULE_GROUPS = {f"tests/{m}.py": "namespace hosts" for m in NSHOST_FILES}
SCHEDULE_SECONDS = {
    "namespace hosts": 820,
    "tests/test_migration_drill_kafka.py": 345,
    "tests/test_chaos_kafka.py": 340,
    "tests/test_spark_exact.py": 270,
    "tests/test_kraft_cluster.py": 260,
    "tests/test_chaos_zk.py": 240,
    "tests/test_spark_drill_kafka.py": 235,
    "tests/test_profile_contracts.py": 210,
    "tests/test_upgrade_kafka.py": 200,
    "tests/test_spark_checkpoint.py": 185,
    "tests/test_scenario_compare.py": 180,
    "tests/test_group_drills_kafka.py": 170,
    "tests/test_elr_kafka.py": 170,
    "tests/test_spark.py": 150,
    "tests/test_spark_classarchive.py": 150,
    "tests/test_migration_kafka.py": 150,
    "tests/test_dynamic_quorum_kafka.py": 120,
    "tests/test_chaos_disk.py": 110,
    "tests/test_fuzz_cli.py": 100,
    "tests/test_security_kafka.py": 100,  # measured 93 s at load 10, 147 s at load 30
    "tests/test_testing_plugin.py": 75,
    "tests/test_transcripts.py": 65,
    "tests/test_console_messages_ui.py": 60,
}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """Longest files first, namespace-host files as one unit (above); only for --dist loadfile."""
    if config.getoption("dist", None) != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class LongestFirst(LoadFileScheduling):
        ordered = False

        def _split_scope(self, nodeid: str) -> str:
            scope = super()._split_scope(nodeid)
            return SCHEDULE_GROUPS.get(scope, scope)

        def _assign_work_unit(self, node: Any) -> None:
            # the work queue, not the collections: a worker is sent indexes into its own collection's order
            if not self.ordered:
                self.ordered = True
                units = sorted(self.workqueue.items(), key=lambda unit: -SCHEDULE_SECONDS.get(unit[0], 0))  # stable
                self.workqueue.clear()
                self.workqueue.update(units)
            super()._assign_work_unit(node)

    return LongestFirst(config, log)


def pytest_unconfigure(config: pytest.Config) -> None:
    """The owner removes whatever the run still owns (normally nothing: every test cleans up after itself)."""
    from clusterctl.errors import ClusterctlError
    from clusterctl.testing import ownership

    try:
        with cleanup.signals_held():
            found = ownership.sweep_own()
    except ClusterctlError as exc:  # no Docker engine: nothing of ours can be in it
        found = [f"not checked: {exc.message}"]
    if not hasattr(config, "workerinput"):  # the workers are gone: Spark drivers' scratch left by a killed one
        from clusterctl.spark.session import sweep_scratch

        found += sweep_scratch()
    if found:
        print(f"\nclusterctl test run: removed at its end what tests left: {', '.join(found)}", file=sys.stderr)


_SIGTERM = cleanup.SigtermAsInterrupt()


def _own_run(config: pytest.Config) -> None:
    from clusterctl.errors import ClusterctlError
    from clusterctl.testing import ownership

    _SIGTERM.install()
    if hasattr(config, "workerinput"):
        ownership.current()  # the run the controller began ($CLUSTERCTL_TEST_RUN)
        return
    try:
        swept = ownership.sweep()
    except ClusterctlError as exc:
        swept = {"(not checked)": [exc.message]}
    for run_id, found in swept.items():
        if found:
            print(f"clusterctl test run: removed leftovers of {run_id}: {', '.join(found)}", file=sys.stderr)
    ownership.current()


def _pin_kafka() -> None:
    """Pin the session's Kafka: $CLUSTERCTL_KAFKA_DIST when given, else Kafka 3.9.x assembled from Maven Central.

    Exported to the environment, so every process of the run (xdist workers, CLI subprocesses, compose renders)
    resolves the offline image to the same clusterctl/kafka:<version>, whatever else is built on the machine.
    """
    if os.environ.get(KAFKA_DIST_ENV):
        return
    from clusterctl.images import kafka_maven

    os.environ[KAFKA_DIST_ENV] = str(kafka_maven.assemble(kafka_maven.DEFAULT_KAFKA_VERSION).path)


@dataclass
class RealKafka:
    """The session's real Apache Kafka cluster: 3 ZooKeeper nodes + 3 brokers from the offline images.

    `cluster` is the plugin's KafkaCluster (faults, waits, drills); `spec_path` its spec file for tests that run
    the CLI (`clusterctl -s spec_path ...` from spec_path's directory, where its compose files are).
    """

    cluster: KafkaCluster
    spec_path: Path
    spec: ClusterSpec
    bootstrap: str
    project: str


# the spec of the shared real-Kafka cluster; KafkaCluster gives it a unique name, a free subnet and free host ports
REAL_KAFKA_SPEC = {
    "profile": "offline",
    "zookeeper": {"nodes": 3, "tick_time_ms": 500},
    "kafka": {
        "engine": "kafka",
        "brokers": 3,
        "jmx_port": 9999,
        "defaults": {"replication_factor": 3, "min_insync_replicas": 2, "heap": "384m"},
    },
    "kafka_manager": {"enabled": False},
}


@pytest.fixture(scope="session")
def real_kafka_cluster() -> Iterator[RealKafka]:
    """One cluster for every real_kafka test, on the session's Kafka (kafka_dist()).

    Builds clusterctl/kafka:<version> (skipped when built), starts a 3 ZK + 3 broker cluster with the
    plugin's KafkaCluster, and at the end removes it and checks nothing is left behind. (`clusterctl up`/`down`
    on real Kafka are tested on their own, in test_kafka_cluster.py and test_kraft_cluster.py.)
    """
    from _runtime_helpers import leftovers

    from clusterctl.images import build as images
    from clusterctl.testing import KafkaCluster

    images.build_images(["zookeeper", "kafka"], kafka_dist=kafka_dist())
    cluster = KafkaCluster(REAL_KAFKA_SPEC, engine="kafka", timeout=300).start()
    spec = cluster.spec
    assert spec is not None
    try:
        yield RealKafka(cluster, cluster.spec_file, spec, cluster.bootstrap_servers, spec.topology.project)
    finally:
        cluster.stop()
        assert leftovers(spec.topology.project) == {"containers": [], "networks": [], "volumes": []}


@pytest.fixture
def real_kafka(real_kafka_cluster: RealKafka) -> Iterator[RealKafka]:
    """The shared real-Kafka cluster, left healed and healthy after the test (no test depends on another's order).

    Heals whatever the test broke, through the CLI too: every broker and ZK node running and on the network,
    registered and in every broker's metadata, the `up` health check, every partition's ISR full.
    """
    yield real_kafka_cluster
    real_kafka_cluster.cluster.heal(wait=True, timeout=180)


@pytest.fixture
def built_kafka_3_7(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rendered files do not depend on which Kafka image this machine has built: pretend 3.7.0."""
    from clusterctl.spec import kafkadist

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


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless Chromium for the console tests, one per test module."""
    from _console import chromium

    with chromium() as b:
        yield b


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh 1280x900 browser context and page (15 s timeouts), closed after the test."""
    ctx = browser.new_context(viewport={"width": 1280, "height": 900})
    p = ctx.new_page()
    p.set_default_timeout(15_000)
    try:
        yield p
    finally:
        ctx.close()
