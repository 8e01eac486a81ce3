"""pytest plugin (entry point `pytest11: clusterctl`): a real Kafka cluster, topics and no-loss drills as fixtures.

Fixtures
  kafka_cluster  session  a running `KafkaCluster` (faults: kill_broker, pause_broker, partition, heal, ...)
  kafka_topic    function a fresh topic (unique name), deleted after the test
  kafka_drill    function acks=all ledger load on kafka_topic during the test; verified when the test body ends

Configuration, strongest first: --clusterctl-spec / --clusterctl-engine, @pytest.mark.clusterctl(...) on the
tests that use the cluster, ini options clusterctl_spec / clusterctl_brokers / clusterctl_zookeepers /
clusterctl_engine / clusterctl_timeout. @pytest.mark.clusterctl_engine("kafka") skips a test unless the
session's cluster runs Apache Kafka. No Docker engine or a missing image: the fixtures skip, saying why.

Importing this module is cheap on purpose (pytest imports it in every session): clusterctl's domain
layer, Docker and Kafka clients load only when a fixture is used.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from clusterctl.testing.drill import Drill
    from clusterctl.testing.kafka_cluster import KafkaCluster

CONFIG_MARK = "clusterctl"
ENGINE_MARK = "clusterctl_engine"
TOPIC_MARK = "clusterctl_topic"
_INFO = pytest.StashKey[dict[str, Any]]()
_CLUSTER_KEYS = ("spec", "brokers", "zookeepers", "engine")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("clusterctl", "clusterctl Kafka cluster fixtures")
    group.addoption("--clusterctl-spec", default=None, help="clusterctl.yaml for the kafka_cluster fixture")
    group.addoption(
        "--clusterctl-engine", default=None, choices=("auto", "kafka", "tansu"), help="broker engine (default auto)"
    )
    parser.addini("clusterctl_spec", "clusterctl.yaml for the kafka_cluster fixture (relative to rootdir)")
    parser.addini("clusterctl_brokers", "number of brokers (Apache Kafka engine; tansu always has 1)")
    parser.addini("clusterctl_zookeepers", "number of ZooKeeper nodes (odd)")
    parser.addini("clusterctl_engine", "auto or kafka (Apache Kafka), or tansu (one broker, a quick mode)")
    parser.addini("clusterctl_timeout", "seconds to wait for a healthy cluster (default 300)")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{CONFIG_MARK}(spec=None, brokers=None, zookeepers=None, engine=None): the session's kafka_cluster "
        "(every test using it must agree)",
    )
    config.addinivalue_line(
        "markers", f"{ENGINE_MARK}(engine): skip unless the session's kafka_cluster runs this engine (kafka|tansu)"
    )
    config.addinivalue_line(
        "markers", f"{TOPIC_MARK}(partitions=3, replication_factor=None): how kafka_topic creates its topic"
    )


def _cluster_settings(request: pytest.FixtureRequest) -> dict[str, Any]:
    """ini options, overridden by the markers of the tests using the cluster, overridden by the command line."""
    cfg = request.config
    out: dict[str, Any] = {}
    for key in _CLUSTER_KEYS:
        value = cfg.getini(f"clusterctl_{key}")
        if value:
            out[key] = str(value)
    if "spec" in out:
        out["spec"] = str(cfg.rootpath / out["spec"])
    marked: dict[str, tuple[Any, str]] = {}
    for item in request.session.items:
        if "kafka_cluster" not in getattr(item, "fixturenames", ()):
            continue
        for mark in item.iter_markers(CONFIG_MARK):
            for key, value in mark.kwargs.items():
                if key not in _CLUSTER_KEYS:
                    raise pytest.UsageError(f"@pytest.mark.{CONFIG_MARK}: unknown option {key!r} on {item.nodeid}")
                if key in marked and marked[key][0] != value:
                    raise pytest.UsageError(
                        f"@pytest.mark.{CONFIG_MARK}: {key}={marked[key][0]!r} on {marked[key][1]} but {value!r} on "
                        f"{item.nodeid}; one session has one kafka_cluster"
                    )
                marked[key] = (value, item.nodeid)
    out.update({k: v for k, (v, _) in marked.items()})
    if cfg.getoption("clusterctl_spec"):
        out["spec"] = cfg.getoption("clusterctl_spec")
    if cfg.getoption("clusterctl_engine"):
        out["engine"] = cfg.getoption("clusterctl_engine")
    for key in ("brokers", "zookeepers"):
        if key in out:
            out[key] = int(out[key])
    return out


@pytest.fixture(scope="session")
def kafka_cluster(request: pytest.FixtureRequest) -> Iterator[KafkaCluster]:
    """A running ZooKeeper + Kafka cluster for the session (Apache Kafka; tansu only when configured)."""
    from clusterctl.errors import ClusterctlError
    from clusterctl.testing.kafka_cluster import ClusterUnavailable, KafkaCluster

    settings = _cluster_settings(request)
    timeout = float(request.config.getini("clusterctl_timeout") or 300)
    try:
        cluster = KafkaCluster(
            settings.get("spec"),
            brokers=settings.get("brokers"),
            zookeepers=settings.get("zookeepers"),
            engine=settings.get("engine"),
            timeout=timeout,
        )
        cluster.start()
    except ClusterUnavailable as exc:
        pytest.skip(f"clusterctl kafka_cluster: {exc}")
    except ClusterctlError as exc:
        pytest.fail(f"clusterctl kafka_cluster: {exc}", pytrace=False)
    spec = cluster.spec
    assert spec is not None
    info = request.config.stash.setdefault(_INFO, {})
    info.update(
        name=spec.name,
        engine=spec.kafka.engine,
        reason=cluster.engine_reason,
        brokers=len(spec.topology.broker_ids),
        zookeepers=len(spec.topology.zk_ids),
        subnet=spec.network.subnet,
        bootstrap=spec.topology.bootstrap_servers,
        healthy_s=cluster.seconds_to_healthy,
    )
    try:
        yield cluster
    finally:
        try:
            cluster.stop()
        finally:
            info["removed_s"] = cluster.seconds_to_stop
            info["leftovers"] = cluster.leftovers()


def _ours(item: pytest.Item, name: str) -> Any:
    """The plugin's fixture value `name` of this test, or None (not used, or overridden by a project fixture)."""
    value = getattr(item, "funcargs", {}).get(name)
    if value is None:
        return None
    from clusterctl.testing.drill import Drill
    from clusterctl.testing.kafka_cluster import KafkaCluster

    return value if isinstance(value, KafkaCluster | Drill) else None


def _slug(name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9._-]+", "-", name)[:60].strip("-.") or "test"


@pytest.fixture
def kafka_topic(kafka_cluster: KafkaCluster, request: pytest.FixtureRequest) -> Iterator[str]:
    """A new topic with a unique name (the spec's RF; 3 partitions unless @pytest.mark.clusterctl_topic says)."""
    _require_engine(request.node, kafka_cluster)  # before creating anything for a test that will not run
    mark = request.node.get_closest_marker(TOPIC_MARK)
    kwargs = dict(mark.kwargs) if mark else {}
    name = f"{_slug(request.node.name)}-{uuid.uuid4().hex[:8]}"
    kafka_cluster.create_topic(name, **kwargs)
    try:
        yield name
    finally:
        if kafka_cluster.running:
            kafka_cluster.delete_topic(name)


@pytest.fixture
def kafka_drill(kafka_cluster: KafkaCluster, kafka_topic: str) -> Iterator[Drill]:
    """acks=all load on kafka_topic during the test; when the test body passes: heal, consume, verify no loss."""
    from clusterctl.testing.drill import Drill

    drill = Drill(kafka_cluster, kafka_topic).start()
    try:
        yield drill
    finally:
        if drill.running:  # the test failed or was interrupted before verification
            drill.abort()


def _require_engine(item: pytest.Item, cluster: KafkaCluster | None) -> None:
    """Skip the test when @pytest.mark.clusterctl_engine names another engine than the session's cluster runs."""
    mark = item.get_closest_marker(ENGINE_MARK)
    if mark is None or cluster is None:
        return
    wanted = mark.args[0] if mark.args else mark.kwargs.get("engine", "kafka")
    if cluster.engine != wanted:
        got = f"{cluster.engine} ({cluster.engine_reason})"
        pytest.skip(f"needs engine {wanted}; this session's kafka_cluster runs {got}")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    yield
    if item.get_closest_marker(ENGINE_MARK) is not None:
        _require_engine(item, _ours(item, "kafka_cluster"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    result = yield
    drill = _ours(item, "kafka_drill")
    if drill is not None and drill.running:
        from clusterctl.errors import ClusterctlError

        try:
            drill.finish()
        except ClusterctlError as exc:
            pytest.fail(str(exc), pytrace=False)
    return result


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    cluster = _ours(item, "kafka_cluster")
    if cluster is not None and cluster.running and cluster.faulted:
        cluster.heal(wait=True)  # the next test gets a whole cluster, whatever this one broke
    return (yield)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    info = config.stash.get(_INFO, None)
    if not info:
        return
    tr = terminalreporter
    tr.write_sep("-", "clusterctl kafka_cluster")
    plural = "s" if info["zookeepers"] > 1 else ""
    tr.write_line(
        f"cluster {info['name']}: engine {info['engine']} ({info['reason']}), {info['brokers']} broker(s), "
        f"{info['zookeepers']} ZooKeeper node{plural}, subnet {info['subnet']}, bootstrap {info['bootstrap']}"
    )
    removed = info.get("removed_s")
    left = info.get("leftovers")
    tr.write_line(
        f"healthy {info['healthy_s']} s after the fixture was requested; "
        + (f"removed in {removed} s" if removed is not None else "not removed")
        + (f"; LEFT BEHIND: {left}" if left else "")
    )
