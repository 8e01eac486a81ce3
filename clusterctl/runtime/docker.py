"""Containers through the Docker SDK: their state, and the verbs (kill, stop, start, pause) every fault and the
Cluster use; the compose CLI (runtime/compose.py) creates and removes them."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

import docker
from docker.errors import APIError, DockerException, ImageNotFound, NotFound
from docker.models.containers import Container

from clusterctl.errors import NotFoundError, UnreachableError
from clusterctl.spec.model import ClusterSpec
from clusterctl.wait import wait_until

PROJECT_LABEL = "com.docker.compose.project"
SERVICE_LABEL = "com.docker.compose.service"


@lru_cache(maxsize=1)
def client() -> docker.DockerClient:
    """A Docker client for the local engine; UnreachableError with a hint when no engine answers."""
    try:
        c = docker.from_env(timeout=30)
        c.ping()
    except DockerException as exc:
        raise UnreachableError(
            f"Docker engine not reachable ({str(exc).splitlines()[0][:120]})",
            hint="start dockerd, e.g. `make setup` or scripts/setup.sh",
        ) from None
    return c


def image_labels(name: str) -> dict[str, str] | None:
    """Labels of a local image, or None when the image is absent."""
    try:
        img = client().images.get(name)
    except ImageNotFound:
        return None
    return dict(img.labels or {})


def missing_images(names: Iterable[str]) -> list[str]:
    """Those of `names` not present in the local engine."""
    return [n for n in names if image_labels(n) is None]


@dataclass
class ContainerState:
    """One compose service's container as the engine reports it."""

    service: str
    container: str
    role: str  # zookeeper | controller | broker | kafka-manager ...
    state: str  # running | exited | paused | missing ...
    health: str | None  # healthy | unhealthy | starting | None (no healthcheck)
    ip: str | None
    host_port: int | None
    image: str | None = None
    exit_code: int | None = None


def get_container(name: str) -> Container:
    try:
        return client().containers.get(name)
    except NotFound:
        raise NotFoundError(f"container {name} does not exist", hint="is the cluster up? `clusterctl status`") from None


def find_container(name: str) -> Container | None:
    with contextlib.suppress(NotFound):
        return client().containers.get(name)
    return None


# ---- the container verbs: the one way anything here kills, stops, starts or pauses a container ----

# runc (cgroup v1) gives up on a freeze after ~0.3 s when a task of the container sits in the kernel where the
# freezer cannot stop it (a broker blocked on disk writeback under load, say) and thaws the cgroup again, so
# another attempt is safe. Four attempts within ~1.2 s were seen to fail in a row on a loaded machine: retry for
# seconds instead, with backoff. cgroup v2 runc waits by itself and then reports a timeout; that is retried too.
FREEZE_TIMEOUT_S = 15.0
FREEZE_ERRORS = ("unable to freeze", "waiting for the cgroup to freeze")
FREEZE_COUNTS = {"pauses": 0, "retries": 0, "failed": 0}  # this process's totals, for tests and measurements


def kill(c: Container) -> None:
    """SIGKILL (like kill -9): no controlled shutdown."""
    c.kill(signal="SIGKILL")


def stop(c: Container, grace_s: int = 10) -> None:
    """SIGTERM, then SIGKILL after `grace_s` (a broker's controlled shutdown needs its grace)."""
    c.stop(timeout=grace_s)


def start(c: Container) -> None:
    c.start()


def restart(c: Container, grace_s: int = 10) -> None:
    c.restart(timeout=grace_s)


def pause(c: Container, within: float | None = None) -> int:
    """SIGSTOP every process of the container (the cgroup freezer); return how many freeze attempts failed first.

    A transient "unable to freeze" is asked again for up to `within` seconds (FREEZE_TIMEOUT_S); after that the
    engine's last APIError propagates and the container is as it was (runc thaws a failed freeze).
    """
    failed = 0

    def attempt() -> None:
        nonlocal failed
        try:
            c.pause()
        except APIError as exc:
            if is_freeze_failure(exc):
                failed += 1
            raise

    FREEZE_COUNTS["pauses"] += 1
    try:
        wait_until(
            attempt, timeout=FREEZE_TIMEOUT_S if within is None else within, what=f"{c.name} to freeze",
            interval=0.2, max_interval=2.0, done=lambda _r: True, retry_on=is_freeze_failure, reraise=True,
        )  # fmt: skip
    except APIError:
        FREEZE_COUNTS["failed"] += 1
        FREEZE_COUNTS["retries"] += max(0, failed - 1)
        raise
    FREEZE_COUNTS["retries"] += failed
    return failed


def is_freeze_failure(exc: BaseException) -> bool:
    """The engine could not freeze the container this time (a busy task), as opposed to any other refusal."""
    return isinstance(exc, APIError) and any(m in str(exc) for m in FREEZE_ERRORS)


def unpause(c: Container) -> None:
    c.unpause()


def _ip_on(container: Container, network: str) -> str | None:
    nets = container.attrs.get("NetworkSettings", {}).get("Networks") or {}
    entry = nets.get(network)
    if not entry:
        return None
    return entry.get("IPAddress") or (entry.get("IPAMConfig") or {}).get("IPv4Address") or None


def cluster_services(spec: ClusterSpec) -> list[tuple[str, str, int | None]]:
    """(service, role, host port) of every service the spec defines, in a stable order."""
    out: list[tuple[str, str, int | None]] = [
        (spec.topology.zk_service(i), "zookeeper", spec.topology.zk_host_port(i)) for i in spec.topology.zk_ids
    ]
    out += [(spec.topology.controller_service(i), "controller", None) for i in spec.topology.dedicated_controller_ids]
    out += [
        (spec.topology.broker_service(i), "broker", spec.topology.broker_host_port(i)) for i in spec.topology.broker_ids
    ]
    if spec.kafka_manager.enabled:
        out.append((spec.topology.manager_service, "kafka-manager", spec.kafka_manager.port))
    if spec.spark.enabled:
        out.append((spec.topology.spark_master_service, "spark-master", spec.spark.master_port))
        out += [(spec.topology.spark_worker_service(i), "spark-worker", None) for i in spec.topology.spark_worker_ids]
    return out


def container_states(spec: ClusterSpec) -> list[ContainerState]:
    """State of every container the spec defines (state 'missing' when it does not exist)."""
    out: list[ContainerState] = []
    for service, role, port in cluster_services(spec):
        name = spec.topology.container_name(service)
        c = find_container(name)
        if c is None:
            out.append(ContainerState(service, name, role, "missing", None, None, None))
            continue
        st = c.attrs.get("State", {})
        health = (st.get("Health") or {}).get("Status")
        running = st.get("Status") == "running"
        out.append(
            ContainerState(
                service=service,
                container=name,
                role=role,
                state=str(st.get("Status", "unknown")),
                health=health,
                ip=_ip_on(c, spec.topology.network_name),
                host_port=port if running else None,
                image=(c.attrs.get("Config") or {}).get("Image"),
                exit_code=None if running else st.get("ExitCode"),
            )
        )
    return out


def project_containers(project: str) -> list[Container]:
    """Every container (any state) labelled with the compose project.

    A container removed between the listing and its inspection (compose tearing the project down) is left out,
    not an error.
    """
    filters = {"label": f"{PROJECT_LABEL}={project}"}
    return list(client().containers.list(all=True, filters=filters, ignore_removed=True))


def project_networks(project: str) -> list[str]:
    return [n.name for n in client().networks.list(filters={"label": f"{PROJECT_LABEL}={project}"})]


def project_volumes(project: str) -> list[str]:
    return [v.name for v in client().volumes.list(filters={"label": f"{PROJECT_LABEL}={project}"})]


def remove_project_volumes(project: str) -> None:
    """Remove every volume labelled with the project (a volume still in use stays; the caller lists what is left)."""
    for v in client().volumes.list(filters={"label": f"{PROJECT_LABEL}={project}"}):
        with contextlib.suppress(APIError):
            v.remove()
