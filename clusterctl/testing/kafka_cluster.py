"""`KafkaCluster`: a throwaway ZooKeeper + Kafka cluster for tests, with faults and the no-loss drill.

A thin test-friendly face: testing/specdata.py makes the spec's open choices (engine, profile, a unique name,
a free RFC1918 subnet and free host ports, so parallel sessions do not clash), compose/ renders it into a
temporary directory, runtime's `Cluster` starts it, waits until healthy (the same wait as `clusterctl up`)
and removes it; chaos/faults.py breaks it and chaos/recovery.py heals it; chaos/load.py runs the drills.
What stays here is test policy: retry on an address clash, and remove the cluster also on exit or SIGTERM.

    with KafkaCluster(brokers=3, zookeepers=3, engine="kafka") as cluster:
        topic = cluster.create_topic(partitions=3)
        with cluster.drill(topic):
            cluster.kill_leader(topic, 0)
            cluster.wait_leader_changed(topic, 0)
"""

from __future__ import annotations

import atexit
import contextlib
import copy
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import yaml

from clusterctl.errors import ClusterctlError, NotFoundError, UnreachableError, UsageError
from clusterctl.runtime.cluster import Cluster
from clusterctl.spec.model import ClusterSpec
from clusterctl.testing import cleanup, ownership, specdata
from clusterctl.testing.drill import Drill
from clusterctl.testing.specdata import Engine

if TYPE_CHECKING:
    from clusterctl.chaos.faults import FaultResult
    from clusterctl.kafka.admin import TopicDescription
    from clusterctl.runtime.health import HealthReport

__all__ = ["ClusterUnavailable", "Engine", "KafkaCluster"]

R = TypeVar("R")
SPEC_FILE = "clusterctl.yaml"  # written beside compose/<name>/, as `clusterctl render` lays them out
CLASH_RETRIES = 3


class ClusterUnavailable(ClusterctlError):
    """No Docker engine, no compose v2 or a missing image: the cluster cannot run here at all."""

    exit_code = 4


class KafkaCluster:
    """A cluster from a spec file, a spec dict or shortcuts; `start()`/`stop()` or use it as a context manager.

    `engine="auto"` (the default) runs Apache Kafka; `engine="tansu"` a one-broker imitation, only when asked
    for. Missing offline images are built first (Kafka from its Maven Central artifacts), as testcontainers
    pulls a missing image. A spec's own name, subnet and host ports are replaced by free ones unless
    `isolate=False`. The `with_*` methods set the same options before `start()` and return the cluster:

        KafkaCluster().with_brokers(3).with_engine("kafka").start()
    """

    def __init__(
        self,
        spec: str | Path | dict[str, Any] | ClusterSpec | None = None,
        *,
        brokers: int | None = None,
        zookeepers: int | None = None,
        engine: Engine | None = None,
        profile: str | None = None,
        isolate: bool = True,
        timeout: float = 300.0,
    ) -> None:
        self._data = specdata.load(spec)
        self.isolate = isolate
        self.timeout = timeout
        self.spec: ClusterSpec | None = None
        self.seconds_to_healthy: float | None = None
        self.seconds_to_stop: float | None = None
        self.engine_reason = ""
        self.faulted = False  # a fault was applied since the last heal
        self._cluster: Cluster | None = None
        self._work: Path | None = None
        self._detached: list[Any] = []  # chaos.faults.Detached: nodes partitioned until heal()
        self._leaders: dict[tuple[str, int], int] = {}
        self._sigterm = cleanup.SigtermAsInterrupt()
        if brokers is not None:
            self.with_brokers(brokers)
        if zookeepers is not None:
            self.with_zookeepers(zookeepers)
        if engine is not None:
            self.with_engine(engine)
        if profile is not None:
            self.with_profile(profile)

    # ------------------------------------------------------------------ options (before start)

    def _option(self, dotted: str, value: Any) -> KafkaCluster:
        if self._cluster is not None:
            raise UsageError("the cluster is running: set its options before start()")
        specdata.set_key(self._data, dotted, value)
        return self

    def with_brokers(self, count: int) -> KafkaCluster:
        """Number of brokers (Apache Kafka engine; tansu always has one)."""
        return self._option("kafka.brokers", count)

    def with_zookeepers(self, count: int) -> KafkaCluster:
        """Number of ZooKeeper nodes (odd)."""
        return self._option("zookeeper.nodes", count)

    def with_profile(self, profile: str) -> KafkaCluster:
        """Image profile: default | wurstmeister | offline | apache."""
        return self._option("profile", profile)

    def with_engine(self, engine: Engine) -> KafkaCluster:
        """auto or kafka (Apache Kafka), or tansu (one broker, a quick mode)."""
        if engine not in ("auto", "kafka", "tansu"):
            raise UsageError(f"engine must be auto, kafka or tansu, got {engine!r}")
        return self._option("kafka.engine", engine)

    def with_timeout(self, seconds: float) -> KafkaCluster:
        """Seconds to wait for a healthy cluster (start, heal)."""
        self.timeout = seconds
        return self

    def with_isolation(self, isolate: bool = True) -> KafkaCluster:
        """Replace the spec's name, subnet and host ports by free ones (default on)."""
        self.isolate = isolate
        return self

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> KafkaCluster:
        """Render, start and wait until healthy (runtime's Cluster); on any failure remove everything."""
        if self._cluster is not None:
            return self
        from clusterctl.chaos import recovery

        started = time.monotonic()
        _check_engine()
        data = copy.deepcopy(self._data)
        self.engine_reason = specdata.choose(data, specdata.get_key(data, "kafka.engine") or "auto")
        self._sigterm.install()
        atexit.register(self.stop)
        try:
            cluster = self._launch(data)
            # registered in ZooKeeper is not yet in every broker's metadata: a topic created now could see 1 broker
            recovery.wait_healed(cluster.spec, self.timeout)
        except BaseException:
            self.stop()
            raise
        self.seconds_to_healthy = round(time.monotonic() - started, 1)
        return self

    def _launch(self, data: dict[str, Any]) -> Cluster:
        """Render into a fresh directory and `Cluster.up`; a clash with a parallel session retries on new addresses."""
        from clusterctl.compose.render import render
        from clusterctl.runtime import allocate

        for attempt in range(1, CLASH_RETRIES + 1):
            self.spec, spec_data = specdata.isolated(data, self.isolate)
            ownership.claim(self.spec.topology.project)  # inside a test run: its leftovers are found by the sweep
            self._work = work = Path(tempfile.mkdtemp(prefix=f"{self.spec.name}-"))
            render(self.spec, out_dir=work / self.spec.topology.compose_dir)
            (work / SPEC_FILE).write_text(yaml.safe_dump(spec_data, sort_keys=False), encoding="utf-8")
            self._cluster = cluster = Cluster(self.spec, root=work)
            try:
                cluster.check_images()
            except NotFoundError:
                _build_offline_images(self.spec)  # as testcontainers pulls a missing image, this builds ours
                try:
                    cluster.check_images()
                except NotFoundError as exc:
                    raise ClusterUnavailable(f"{exc.message} (profile offline never pulls)", hint=exc.hint) from None
            try:
                cluster.up(self.timeout, keep_on_failure=True)  # removal is stop()'s, fast
                return cluster
            except ClusterctlError as exc:
                if not (allocate.is_clash(exc.message) and attempt < CLASH_RETRIES):
                    raise
                self._down()
        raise AssertionError("unreachable")  # pragma: no cover

    def stop(self) -> None:
        """Remove the cluster's containers, network and volumes (harmless when already stopped)."""
        atexit.unregister(self.stop)
        self._sigterm.restore()
        self._down()

    def _down(self) -> None:
        cluster, self._cluster = self._cluster, None
        work, self._work = self._work, None
        try:
            if cluster is not None:
                t0 = time.monotonic()
                with cleanup.signals_held():
                    cluster.down(volumes=True, kill_first=True)
                self.seconds_to_stop = round(time.monotonic() - t0, 1)
        finally:
            if work is not None:
                shutil.rmtree(work, ignore_errors=True)

    def leftovers(self) -> dict[str, list[str]]:
        """What of this cluster still exists in the engine (empty after `stop`)."""
        return {} if self.spec is None else Cluster(self.spec).leftovers()

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # ------------------------------------------------------------------ facts

    @property
    def _spec(self) -> ClusterSpec:
        if self.spec is None or self._cluster is None:
            raise ClusterctlError("the cluster is not running: call start() or use it in a `with` block")
        return self.spec

    @property
    def running(self) -> bool:
        """Started and not stopped yet."""
        return self._cluster is not None

    @property
    def name(self) -> str:
        return self._spec.name

    @property
    def engine(self) -> str:
        return self._spec.kafka.engine

    @property
    def bootstrap_servers(self) -> str:
        return self._spec.topology.bootstrap_servers

    @property
    def zookeeper_connect(self) -> str:
        return self._spec.topology.zk_connect

    @property
    def broker_ids(self) -> list[int]:
        return self._spec.topology.broker_ids

    @property
    def zookeeper_ids(self) -> list[int]:
        return self._spec.topology.zk_ids

    @property
    def subnet(self) -> str:
        return self._spec.network.subnet

    @property
    def cluster(self) -> Cluster:
        """runtime's Cluster under this one (status, containers, per-node verbs)."""
        if self._cluster is None:
            raise ClusterctlError("the cluster is not running: call start() or use it in a `with` block")
        return self._cluster

    @property
    def spec_file(self) -> Path:
        """This cluster's spec as a file (removed by `stop`): `clusterctl -s FILE ...` run from FILE's directory
        drives this very cluster, its rendered compose files beside it as `clusterctl render` lays them out."""
        name = self.name  # raises unless running
        assert self._work is not None, name
        return self._work / SPEC_FILE

    def controller(self) -> int:
        """The spec's id of the broker that is the controller now."""
        from clusterctl.chaos.faults import spec_broker
        from clusterctl.kafka.admin import cluster_info

        return spec_broker(self._spec, cluster_info(self.bootstrap_servers).controller_id)

    def describe(self, topic: str) -> TopicDescription:
        """Leader, replicas and ISR of every partition (kafka.admin.TopicDescription)."""
        from clusterctl.kafka.admin import describe_topic

        return describe_topic(self.bootstrap_servers, topic)

    def leader(self, topic: str, partition: int = 0) -> int:
        """The spec's id of the broker leading `topic`-`partition` now."""
        from clusterctl.chaos import faults

        return faults.spec_broker(self._spec, faults.current_leader(self.bootstrap_servers, topic, partition))

    # ------------------------------------------------------------------ topics

    def create_topic(
        self,
        name: str | None = None,
        partitions: int = 3,
        replication_factor: int | None = None,
        min_insync_replicas: int | None = None,
        timeout: float = 60.0,
    ) -> str:
        """Create a topic (default: a unique name, the spec's RF and min.insync.replicas); wait for full ISR."""
        from clusterctl.kafka.admin import create_topic, wait_full_isr

        spec = self._spec
        name = name or f"topic-{uuid.uuid4().hex[:10]}"
        rf = replication_factor or spec.kafka.defaults.replication_factor
        min_isr = min_insync_replicas or min(spec.kafka.defaults.min_insync_replicas, rf)
        configs = {"min.insync.replicas": str(min_isr)} if spec.kafka.engine == "kafka" else {}
        create_topic(self.bootstrap_servers, name, partitions, rf, configs)
        wait_full_isr(self.bootstrap_servers, timeout, topics=[name])
        return name

    def delete_topic(self, name: str) -> None:
        from clusterctl.kafka.admin import delete_topic

        with contextlib.suppress(NotFoundError):
            delete_topic(self.bootstrap_servers, name)

    # ------------------------------------------------------------------ faults

    def _fault(self, result: R) -> R:
        self.faulted = True
        return result

    def kill_broker(self, broker_id: int) -> FaultResult:
        """SIGKILL a broker (no controlled shutdown); it stays down until start_broker or heal."""
        from clusterctl.chaos import faults

        return self._fault(faults.kill_broker(self._spec, broker_id))

    def stop_broker(self, broker_id: int) -> FaultResult:
        """SIGTERM a broker and wait for its controlled shutdown."""
        from clusterctl.chaos import faults

        return self._fault(faults.stop_broker(self._spec, broker_id))

    def start_broker(self, broker_id: int) -> FaultResult:
        from clusterctl.chaos import faults

        return faults.start_broker(self._spec, broker_id)

    def pause_broker(self, broker_id: int, seconds: float | None = None) -> FaultResult | list[FaultResult]:
        """Freeze a broker (docker pause): for `seconds` then unpause (blocking), or until heal() when None."""
        from clusterctl.chaos import faults

        if seconds is None:
            return self._fault(faults.pause(*faults.broker_target(self._spec, broker_id), self._spec))
        return faults.pause_broker(self._spec, broker_id, seconds)

    def partition(self, node: str | int, seconds: float | None = None) -> FaultResult | list[FaultResult]:
        """Take a node ('kafka2', 'zk1' or a broker id) off the cluster network: for `seconds`, or until heal()."""
        from clusterctl.chaos import faults

        spec = self._spec
        name = spec.topology.broker_service(node) if isinstance(node, int) else node
        if seconds is not None:
            return faults.partition_node(spec, name, seconds)
        res, detached = faults.disconnect(spec, name)
        self._detached.append(detached)
        return self._fault(res)

    def kill_leader(self, topic: str, partition: int = 0) -> int:
        """SIGKILL the broker leading `topic`-`partition`; return its id (wait_leader_changed compares with it)."""
        from clusterctl.chaos import faults

        spec = self._spec
        leader = faults.current_leader(self.bootstrap_servers, topic, partition)
        self._leaders[(topic, partition)] = leader
        self._fault(faults.kill_leader(spec, self.bootstrap_servers, topic, partition))
        return faults.spec_broker(spec, leader)

    def kill_zk(self, zk_id: int) -> FaultResult:
        from clusterctl.chaos import faults

        return self._fault(faults.kill_zk(self._spec, zk_id))

    def start_zk(self, zk_id: int) -> FaultResult:
        from clusterctl.chaos import faults

        return faults.start_zk(self._spec, zk_id)

    def heal(self, wait: bool = True, timeout: float | None = None) -> list[FaultResult]:
        """Reconnect, unpause and start every node; with `wait`, until healthy and (Kafka) every ISR is full."""
        from clusterctl.chaos import recovery
        from clusterctl.kafka.admin import wait_full_isr

        spec = self._spec
        results = recovery.heal_all(spec, self._detached)
        self._detached = []
        if wait:  # as `clusterctl chaos heal` waits, then the `up` health check and (Kafka) full ISR
            limit = timeout or self.timeout
            recovery.wait_healed(spec, limit)
            self.cluster.wait_healthy(limit)
            if spec.kafka.engine == "kafka":
                wait_full_isr(self.bootstrap_servers, limit)
        self.faulted = False
        return results

    # ------------------------------------------------------------------ waits

    def wait_isr_full(self, topic: str, timeout: float = 120.0) -> float:
        """Wait until every partition of `topic` has all its replicas in sync; seconds waited."""
        from clusterctl.kafka.admin import wait_full_isr

        return wait_full_isr(self.bootstrap_servers, timeout, topics=[topic])

    def wait_leader_changed(
        self, topic: str, partition: int = 0, old_leader: int | None = None, timeout: float = 60.0
    ) -> int:
        """Wait for a leader other than `old_leader` (default: the one kill_leader killed); return the new one."""
        from clusterctl.chaos import faults

        if old_leader is None:
            if (topic, partition) not in self._leaders:
                raise UsageError(f"no kill_leader({topic!r}, {partition}) yet: pass old_leader")
            before = self._leaders[(topic, partition)]
        else:
            before = old_leader
        new = faults.wait_leader_changed(self.bootstrap_servers, topic, partition, before, timeout)
        return faults.spec_broker(self._spec, new)

    def wait_healthy(self, timeout: float | None = None) -> HealthReport:
        """The `clusterctl up` wait: ZooKeeper quorum, every broker registered, a controller."""
        return self.cluster.wait_healthy(timeout or self.timeout)

    # ------------------------------------------------------------------ drills

    @contextlib.contextmanager
    def drill(self, topic: str | None = None, rate: float = 200.0, heal: bool = True) -> Iterator[Drill]:
        """acks=all ledger load on `topic` (default: a new topic) around the block, then `scenario verify`."""
        d = Drill(self, topic or self.create_topic(), rate=rate, heal=heal).start()
        try:
            yield d
        except BaseException:
            d.abort()
            raise
        d.finish()


def _build_offline_images(spec: ClusterSpec) -> None:
    """Build the offline images a spec runs (Kafka from Maven Central at the spec's version); a build that cannot
    run here (no root for the base, no Maven) is ClusterUnavailable with its reason."""
    from clusterctl.images import build as images
    from clusterctl.spec import kafkadist

    if spec.profile != "offline":
        return
    targets = ["zookeeper"] if spec.topology.zk_ids else []
    targets.append("tansu" if spec.kafka.engine == "tansu" else "kafka")
    if spec.kafka_manager.enabled and spec.manager_kind == "console":
        targets.append("console")
    # the spec's kafka.version, else $CLUSTERCTL_KAFKA_DIST, else the default line (what broker_image resolves to)
    dist = None if spec.kafka.version else kafkadist.env_dist()
    try:
        images.build_images(targets, kafka_dist=dist, kafka_version=spec.kafka.version)
    except ClusterctlError as exc:
        raise ClusterUnavailable(f"the offline images could not be built here: {exc}") from None


def _check_engine() -> None:
    """A Docker engine that answers and compose v2, else ClusterUnavailable (the plugin skips, saying why)."""
    from clusterctl.runtime import compose
    from clusterctl.runtime.docker import client

    try:
        client()
        compose.compose_command()
    except UnreachableError as exc:
        raise ClusterUnavailable(str(exc)) from None
