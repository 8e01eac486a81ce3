"""What a fault acts on: the spec's containers by role (broker, ZooKeeper node, controller, any node), their
state, and the result every fault action returns."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from docker.models.containers import Container

from clusterctl.errors import ClusterctlError, NotFoundError, UsageError
from clusterctl.spec.model import ClusterSpec


@dataclass
class FaultResult:
    """One fault (or heal) action and its effect on the container."""

    action: str
    target: str  # broker 2 | zk 1 | kafka1 ...
    container: str
    before: str
    after: str
    started: float  # epoch seconds
    took_s: float
    note: str | None = None
    retries: int = 0  # attempts the engine refused before the fault took (a busy container's freeze)


def _container(name: str) -> Container:
    from clusterctl.runtime.docker import get_container

    c = get_container(name)
    c.reload()
    return c


def locate(name: str, spec: ClusterSpec | None = None) -> Container:
    """The container a fault acts on: the spec's container `name`, or on a swarm (`spec` given) the container of
    that service's current task, on the host it runs on (`name` a service, its compose name or a task's)."""
    if spec is None or not spec.swarm:
        return _container(name)
    from clusterctl.runtime.swarm_tasks import task_container

    if name.startswith(f"{spec.name}_"):  # a task's container: <stack>_<service>.<slot>.<task id>
        name = name.removeprefix(f"{spec.name}_").split(".")[0]
    c = task_container(spec, node_target(spec, name)[0])
    c.reload()
    return c


def state_of(c: Container) -> str:
    """The container's status, fresh from the engine."""
    c.reload()
    return str(c.attrs.get("State", {}).get("Status", "unknown"))


def container_state(name: str) -> str:
    """running | paused | exited | ... of a container; 'missing' when there is none."""
    from clusterctl.runtime.docker import find_container

    c = find_container(name)
    return "missing" if c is None else state_of(c)


def broker_target(spec: ClusterSpec, broker_id: int) -> tuple[str, str]:
    if broker_id not in spec.topology.broker_ids:
        raise NotFoundError(f"unknown broker id {broker_id}; the spec has brokers {_ids(spec.topology.broker_ids)}")
    return f"broker {broker_id}", spec.topology.broker_container(broker_id)


def zk_target(spec: ClusterSpec, zk_id: int) -> tuple[str, str]:
    if spec.kraft_mode:
        raise UsageError(f"cluster {spec.name} runs in KRaft mode: there is no ZooKeeper node to break")
    if zk_id not in spec.topology.zk_ids:
        raise NotFoundError(f"unknown ZooKeeper id {zk_id}; the spec has nodes {_ids(spec.topology.zk_ids)}")
    return f"zk {zk_id}", spec.topology.zk_container(zk_id)


def spark_worker_target(spec: ClusterSpec, worker_id: int) -> tuple[str, str]:
    """A worker of the spec's Spark standalone cluster: its container is spark-workerN."""
    if not spec.spark.enabled:
        raise UsageError(f"cluster {spec.name} has no Spark standalone cluster (spark.enabled is false)")
    if worker_id not in spec.topology.spark_worker_ids:
        raise NotFoundError(
            f"unknown Spark worker {worker_id}; the spec has workers {_ids(spec.topology.spark_worker_ids)}"
        )
    return f"spark-worker {worker_id}", spec.topology.container_name(spec.topology.spark_worker_service(worker_id))


def node_target(spec: ClusterSpec, name: str) -> tuple[str, str]:
    """A service ('kafka2', 'zk1') or container name of the spec."""
    services = [spec.topology.zk_service(i) for i in spec.topology.zk_ids] + [
        spec.topology.broker_service(i) for i in spec.topology.broker_ids
    ]
    services += [spec.topology.controller_service(i) for i in spec.topology.dedicated_controller_ids]
    if spec.kafka_manager.enabled:
        services.append(spec.topology.manager_service)
    for s in services:
        if name in (s, spec.topology.container_name(s)):
            return s, spec.topology.container_name(s)
    raise NotFoundError(f"unknown node {name!r}; the spec has {', '.join(services)}")


def service_target(spec: ClusterSpec, node: str) -> tuple[str, str]:
    """A ZooKeeper node, controller or broker named by its service or container name: its fault target (`zk 1`,
    `controller 101`, `broker 2`, as the id-based verbs name it) and its container name."""
    service, name = node_target(spec, node)
    topo = spec.topology
    targets = {topo.zk_service(i): f"zk {i}" for i in topo.zk_ids}
    targets |= {topo.controller_service(i): f"controller {i}" for i in topo.dedicated_controller_ids}
    targets |= {topo.broker_service(i): f"broker {i}" for i in topo.broker_ids}
    if service not in targets:
        raise UsageError(f"{node} is not a ZooKeeper node, controller or broker")
    return targets[service], name


def _ids(ids: list[int]) -> str:
    return ",".join(str(i) for i in ids)


def _require(c: Container, target: str, *states: str) -> str:
    st = state_of(c)
    if st not in states:
        raise ClusterctlError(f"{target} ({c.name}) is {st}, expected {' or '.join(states)}")
    return st


def controller_target(spec: ClusterSpec, node_id: int) -> tuple[str, str]:
    """A KRaft voter: its container is controllerN, or kafkaN in combined mode."""
    if not spec.kraft_mode:
        raise UsageError(f"cluster {spec.name} runs ZooKeeper mode: its controller is a broker (use kill-controller)")
    if node_id not in spec.topology.controller_ids:
        raise NotFoundError(
            f"unknown controller node id {node_id}; the quorum's voters are {_ids(spec.topology.controller_ids)}"
        )
    return f"controller {node_id}", spec.topology.controller_container(node_id)


def spec_broker(spec: ClusterSpec, metadata_id: int) -> int:
    """The spec's broker id for a broker id seen in metadata.

    Apache Kafka brokers carry the spec's ids (broker.id). tansu always reports node id 111 and cannot be
    told otherwise, so on the tansu engine (one broker) every id maps to that broker.
    """
    if spec.kafka.engine == "tansu" and len(spec.topology.broker_ids) == 1:
        return spec.topology.broker_ids[0]
    return metadata_id


@contextlib.contextmanager
def _always(heal: Callable[[], FaultResult], out: list[FaultResult]) -> Iterator[None]:
    """Run `heal` on exit, whatever happened (Ctrl-C included)."""
    try:
        yield
    finally:
        out.append(heal())


def _sleep(seconds: float, stop_event: threading.Event | None) -> None:
    if stop_event is None:
        time.sleep(seconds)
    else:
        stop_event.wait(seconds)
