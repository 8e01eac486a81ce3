"""`KafkaCluster`: a throwaway ZooKeeper + Kafka cluster for tests, with faults and the no-loss drill.

A façade: the spec model validates, render.py writes the compose file, testcontainers' DockerCompose
starts it, health.wait_healthy decides when it is up (the same wait as `clusterctl up`), chaos/faults.py
breaks and heals it, chaos/load.py runs and verifies drills. Each cluster gets a unique name, a free
RFC1918 subnet and free host ports (runtime/allocate.py), so parallel sessions do not clash.

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
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, Literal

import yaml

from clusterctl.errors import ClusterctlError, NotFoundError, UnreachableError, UsageError
from clusterctl.runtime import docker as dk
from clusterctl.spec import profiles
from clusterctl.spec.model import ClusterSpec, parse_spec

Engine = Literal["auto", "kafka", "tansu"]
NAME_PREFIX = "ctltest"
SPEC_FILE = "clusterctl.yaml"  # written beside compose/<name>/, as `clusterctl render` lays them out
CLASH_RETRIES = 3
# static addresses a spec may pin; on a freshly allocated subnet they come from the spec's default layout
STATIC_IP_KEYS = ("zookeeper.ips", "kafka.ips", "kraft.ips", "kafka_manager.ip", "spark.master_ip", "spark.worker_ips")


class ClusterUnavailable(ClusterctlError):
    """No Docker engine, no compose v2 plugin or a missing image: the cluster cannot run here at all."""

    exit_code = 4


def _set(data: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, leaf = dotted.split(".")
    node = data
    for p in parents:
        node = node.setdefault(p, {})
    node[leaf] = value


def _get(data: dict[str, Any], dotted: str) -> Any:
    node: Any = data
    for p in dotted.split("."):
        if not isinstance(node, dict) or p not in node:
            return None
        node = node[p]
    return node


class KafkaCluster:
    """A cluster from a spec file, a spec dict or shortcuts; `start()`/`stop()` or use it as a context manager.

    `engine="auto"` runs Apache Kafka when its image exists locally, else tansu (one broker, no
    replication). A spec's own name, subnet and host ports are replaced by free ones unless
    `isolate=False`.
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
        self._data = self._load(spec)
        for key, value in (("kafka.brokers", brokers), ("zookeeper.nodes", zookeepers), ("profile", profile)):
            if value is not None:
                _set(self._data, key, value)
        if engine not in (None, "auto", "kafka", "tansu"):
            raise UsageError(f"engine must be auto, kafka or tansu, got {engine!r}")
        self._engine_wanted: Engine = engine or _get(self._data, "kafka.engine") or "auto"
        self.isolate = isolate
        self.timeout = timeout
        self.spec: ClusterSpec | None = None
        self.seconds_to_healthy: float | None = None
        self.seconds_to_stop: float | None = None
        self.engine_reason = ""
        self._compose: Any = None
        self._work: Path | None = None
        self._detached: list[Any] = []
        self._leaders: dict[tuple[str, int], int] = {}
        self._prev_sigterm: Any = None
        self.faulted = False  # a fault was applied since the last heal

    # ------------------------------------------------------------------ spec

    @staticmethod
    def _load(spec: str | Path | dict[str, Any] | ClusterSpec | None) -> dict[str, Any]:
        if spec is None:
            return {}
        if isinstance(spec, ClusterSpec):
            return spec.model_dump(mode="json", exclude_unset=True)
        if isinstance(spec, dict):
            return copy.deepcopy(spec)
        path = Path(spec)
        try:
            data = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            raise ClusterctlError(f"spec file {path}: cannot read ({exc})") from None
        except yaml.YAMLError:
            raise ClusterctlError(f"spec file {path}: not valid YAML") from None
        parse_spec(data, str(path))  # the user's file must be valid as written
        return dict(data or {})

    def _choose(self, data: dict[str, Any]) -> None:
        """Profile and engine where the caller left them open; both depend on which images exist here."""
        from clusterctl.spec.profiles import PROFILES

        if "profile" not in data:
            offline = PROFILES["offline"]
            data["profile"] = "offline" if not dk.missing_images([offline.zookeeper]) else "default"
        engine = self._engine_wanted
        if engine == "auto":
            probe = copy.deepcopy(data)
            self._size(probe, "kafka")
            kafka_image = parse_spec(probe, "cluster spec").broker_image  # the spec resolves the image's tag
            have_kafka = data["profile"] != "offline" or not dk.missing_images([kafka_image])
            engine = "kafka" if have_kafka else "tansu"
            self.engine_reason = (
                f"kafka image {kafka_image} present" if have_kafka else f"no kafka image {kafka_image} here"
            )
        else:
            self.engine_reason = "asked for"
        self._size(data, engine)

    @staticmethod
    def _size(data: dict[str, Any], engine: str) -> None:
        """Engine, broker count and replication settings that fit together."""
        _set(data, "kafka.engine", engine)
        if engine == "tansu":  # one broker, nothing to replicate
            _set(data, "kafka.brokers", 1)
            for key in ("replication_factor", "min_insync_replicas"):
                _set(data, f"kafka.defaults.{key}", 1)
        else:
            n = int(_get(data, "kafka.brokers") or 3)
            rf = _get(data, "kafka.defaults.replication_factor") or min(3, n)
            _set(data, "kafka.defaults.replication_factor", rf)
            if _get(data, "kafka.defaults.min_insync_replicas") is None:
                _set(data, "kafka.defaults.min_insync_replicas", max(1, rf - 1))
        if _get(data, "kafka_manager.enabled") is None:
            _set(data, "kafka_manager.enabled", False)

    def _isolated(self, data: dict[str, Any]) -> tuple[ClusterSpec, dict[str, Any]]:
        """The spec with a unique name, a free subnet and free host ports (model and the data it came from)."""
        from clusterctl.runtime import allocate

        data = copy.deepcopy(data)
        if self.isolate:
            data["name"] = f"{NAME_PREFIX}-{uuid.uuid4().hex[:10]}"
            data["network"] = {"subnet": allocate.free_subnet()}
            for key in STATIC_IP_KEYS:
                if _get(data, key) is not None:
                    _set(data, key, None)
            draft = parse_spec(data, "cluster spec")
            bind = draft.publish.bind_address
            zk_n, b_n = len(draft.topology.zk_ids), len(draft.topology.broker_ids)
            extra = ["kafka_manager.port"] if draft.kafka_manager.enabled else []
            if draft.spark.enabled:
                extra += ["spark.master_port", "spark.ui_port"]
            base = allocate.free_port_block(zk_n + b_n + len(extra), bind)
            if zk_n:  # none in kraft mode, where zookeeper settings are refused
                _set(data, "zookeeper.client_port", base)
            _set(data, "kafka.host_port", base + zk_n)
            for i, key in enumerate(extra):
                _set(data, key, base + zk_n + b_n + i)
        return parse_spec(data, "cluster spec"), data

    # ------------------------------------------------------------------ lifecycle

    @staticmethod
    def _check_engine() -> None:
        from clusterctl.runtime import compose
        from clusterctl.runtime.docker import client

        try:
            client()
            cmd = compose.compose_command()
        except UnreachableError as exc:
            raise ClusterUnavailable(str(exc)) from None
        if cmd[0] != "docker":
            raise ClusterUnavailable("testcontainers' compose support needs the `docker compose` v2 plugin")

    @staticmethod
    def _check_images(spec: ClusterSpec) -> None:
        from clusterctl.compose.context import summarize

        if spec.profile != "offline":
            return  # compose pulls what is missing
        missing = dk.missing_images(sorted({s.image for s in summarize(spec)}))
        if missing:
            ours = [m for m in missing if m in profiles.TARGETS.values()]
            raise ClusterUnavailable(
                f"image {', '.join(missing)} not present locally (profile offline never pulls)",
                hint=f"run `{profiles.build_hint(ours)}`" if ours else "build it or `docker load` it",
            )

    def start(self) -> KafkaCluster:
        """Render, `docker compose up` (testcontainers), wait until healthy; on any failure remove everything."""
        if self._compose is not None:
            return self
        from testcontainers.compose import DockerCompose

        from clusterctl.chaos import recovery
        from clusterctl.compose.render import render
        from clusterctl.runtime import allocate, health

        os_env_ryuk()
        started = time.monotonic()
        self._check_engine()
        data = copy.deepcopy(self._data)
        self._choose(data)
        self._install_sigterm()
        atexit.register(self.stop)
        try:
            for attempt in range(1, CLASH_RETRIES + 1):
                self.spec, spec_data = self._isolated(data)
                spec = self.spec
                if attempt == 1:
                    self._check_images(spec)
                self._work = Path(tempfile.mkdtemp(prefix=f"{spec.name}-"))
                out = self._work / "compose" / spec.name
                render(spec, out_dir=out)
                (self._work / SPEC_FILE).write_text(yaml.safe_dump(spec_data, sort_keys=False), encoding="utf-8")
                self._compose = DockerCompose(context=str(out), compose_file_name="docker-compose.yml", wait=False)
                try:
                    self._compose.start()
                    break
                except subprocess.CalledProcessError as exc:
                    err = (exc.stderr or b"").decode(errors="replace").strip()
                    self._down()
                    if allocate.is_clash(err) and attempt < CLASH_RETRIES:
                        continue
                    last = err.splitlines()[-1] if err else f"exit code {exc.returncode}"
                    raise ClusterctlError(f"docker compose up failed for cluster {spec.name}: {last[:300]}") from None
            health.wait_healthy(spec, self.timeout)
            # registered in ZooKeeper is not yet in every broker's metadata: a topic created now could see 1 broker
            recovery.wait_healed(spec, self.timeout)
        except BaseException:
            self.stop()
            raise
        self.seconds_to_healthy = round(time.monotonic() - started, 1)
        return self

    def stop(self) -> None:
        """Remove the cluster's containers, network and volumes (harmless when already stopped)."""
        atexit.unregister(self.stop)
        self._restore_sigterm()
        self._down()

    def _down(self) -> None:
        compose, self._compose = self._compose, None
        spec, work, self._work = self.spec, self._work, None
        try:
            if compose is not None and spec is not None:
                with _signals_held():
                    self._remove(compose, spec)
        finally:
            if work is not None:
                shutil.rmtree(work, ignore_errors=True)

    def _remove(self, compose: Any, spec: ClusterSpec) -> None:
        from clusterctl.runtime import cluster as rt
        from clusterctl.runtime import docker as dk

        t0 = time.monotonic()
        # a throwaway cluster needs no controlled shutdown: SIGKILL first, or brokers' grace periods dominate
        for c in dk.project_containers(spec.topology.project):
            with contextlib.suppress(Exception):
                if c.status == "paused":
                    c.unpause()
                if c.status in ("running", "paused"):
                    c.kill()
        with contextlib.suppress(subprocess.CalledProcessError):  # checked below; removed by project label then
            compose.stop(down=True)  # docker compose down --volumes
        if self.leftovers():
            rt.down(spec, volumes=True)
        self.seconds_to_stop = round(time.monotonic() - t0, 1)
        left = self.leftovers()
        if left:
            raise ClusterctlError(f"cluster {spec.name} not fully removed: {left}")

    def leftovers(self) -> dict[str, list[str]]:
        """What of this cluster still exists in the engine (empty after `stop`)."""
        from clusterctl.runtime import docker as dk

        if self.spec is None:
            return {}
        p = self.spec.topology.project
        found = {
            "containers": sorted(c.name for c in dk.project_containers(p)),
            "networks": dk.project_networks(p),
            "volumes": dk.project_volumes(p),
        }
        return {k: v for k, v in found.items() if v}

    def _install_sigterm(self) -> None:
        """SIGTERM (a CI timeout) becomes KeyboardInterrupt, so `finally` blocks and fixtures tear down."""
        if threading.current_thread() is not threading.main_thread():
            return
        if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
            self._prev_sigterm = signal.signal(signal.SIGTERM, _raise_interrupt)

    def _restore_sigterm(self) -> None:
        if self._prev_sigterm is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, self._prev_sigterm)
            self._prev_sigterm = None

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    # ------------------------------------------------------------------ facts

    @property
    def _spec(self) -> ClusterSpec:
        if self.spec is None or self._compose is None:
            raise ClusterctlError("the cluster is not running: call start() or use it in a `with` block")
        return self.spec

    @property
    def running(self) -> bool:
        """Started and not stopped yet."""
        return self._compose is not None

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

    def describe(self, topic: str) -> Any:
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
        from clusterctl.chaos.recovery import wait_full_isr
        from clusterctl.kafka.admin import create_topic

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

    def _fault(self, result: Any) -> Any:
        self.faulted = True
        return result

    def kill_broker(self, broker_id: int) -> Any:
        """SIGKILL a broker (no controlled shutdown); it stays down until start_broker or heal."""
        from clusterctl.chaos import faults

        return self._fault(faults.kill_broker(self._spec, broker_id))

    def stop_broker(self, broker_id: int) -> Any:
        """SIGTERM a broker and wait for its controlled shutdown."""
        from clusterctl.chaos import faults

        return self._fault(faults.stop_broker(self._spec, broker_id))

    def start_broker(self, broker_id: int) -> Any:
        from clusterctl.chaos import faults

        return faults.start_broker(self._spec, broker_id)

    def pause_broker(self, broker_id: int, seconds: float | None = None) -> Any:
        """Freeze a broker (docker pause): for `seconds` then unpause (blocking), or until heal() when None."""
        from clusterctl.chaos import faults

        if seconds is None:
            return self._fault(faults.pause(*faults.broker_target(self._spec, broker_id)))
        return faults.pause_broker(self._spec, broker_id, seconds)

    def partition(self, node: str | int, seconds: float | None = None) -> Any:
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

    def kill_zk(self, zk_id: int) -> Any:
        from clusterctl.chaos import faults

        return self._fault(faults.kill_zk(self._spec, zk_id))

    def start_zk(self, zk_id: int) -> Any:
        from clusterctl.chaos import faults

        return faults.start_zk(self._spec, zk_id)

    def heal(self, wait: bool = True, timeout: float | None = None) -> list[Any]:
        """Reconnect, unpause and start every node; with `wait`, until healthy and (Kafka) every ISR is full."""
        from clusterctl.chaos import recovery
        from clusterctl.runtime import health

        spec = self._spec
        results = recovery.heal_all(spec, self._detached)
        self._detached = []
        if wait:  # as `clusterctl chaos heal` waits, then the `up` health check and (Kafka) full ISR
            limit = timeout or self.timeout
            recovery.wait_healed(spec, limit)
            health.wait_healthy(spec, limit)
            if spec.kafka.engine == "kafka":
                recovery.wait_full_isr(self.bootstrap_servers, limit)
        self.faulted = False
        return results

    # ------------------------------------------------------------------ waits

    def wait_isr_full(self, topic: str, timeout: float = 120.0) -> float:
        """Wait until every partition of `topic` has all its replicas in sync; seconds waited."""
        from clusterctl.chaos.recovery import wait_full_isr

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

    def wait_healthy(self, timeout: float | None = None) -> Any:
        """The `clusterctl up` wait: ZooKeeper quorum, every broker registered, a controller."""
        from clusterctl.runtime import health

        return health.wait_healthy(self._spec, timeout or self.timeout)[0]

    # ------------------------------------------------------------------ drills

    @contextlib.contextmanager
    def drill(self, topic: str | None = None, rate: float = 200.0, heal: bool = True) -> Iterator[Any]:
        """acks=all ledger load on `topic` (default: a new topic) around the block, then `scenario verify`."""
        from clusterctl.testing.drill import Drill

        d = Drill(self, topic or self.create_topic(), rate=rate, heal=heal).start()
        try:
            yield d
        except BaseException:
            d.abort()
            raise
        d.finish()


@contextlib.contextmanager
def _signals_held() -> Iterator[None]:
    """Ignore SIGINT/SIGTERM while removing: a second Ctrl-C (or a TERM to the process group, which reaches
    `docker compose down` too) must not abort the cleanup it asked for. SIGKILL still works."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)


def _raise_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def os_env_ryuk() -> None:
    """No Ryuk reaper: it needs an image pull, and the cluster removes itself (also on interrupt)."""
    import os

    os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")
