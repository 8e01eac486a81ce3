"""The one cluster lifecycle: `Cluster(spec)` renders nothing itself but runs what `render` wrote.

up (compose up, then really wait until healthy) → status → per-node verbs (find a container, kill, stop,
start, pause, unpause) → down → leftovers. The CLI (`clusterctl up/down/status/logs`), the chaos compare
runs and `clusterctl.testing.KafkaCluster` all go through it: one image check, one way to find a container,
one removal.

    cluster = Cluster(spec)
    cluster.up(timeout=180)
    cluster.kill("kafka2")
    cluster.down(volumes=True)
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from docker.models.containers import Container

from clusterctl.errors import ClusterctlError, NotFoundError
from clusterctl.runtime import cmak, compose, disks, health, kraftformat, swarm, volumes
from clusterctl.runtime import docker as dk
from clusterctl.runtime import pull as pulling
from clusterctl.runtime.status import ClusterStatus, ServiceStatus, add_migration, cluster_status
from clusterctl.spec import profiles
from clusterctl.spec.model import ClusterSpec
from clusterctl.spec.monitoring import agent_jar

__all__ = ["Cluster", "ClusterStatus", "DownResult", "ServiceStatus", "UpResult"]

OnReport = Callable[[health.HealthReport, float], None]


@dataclass
class UpResult:
    project: str
    compose_file: str
    seconds_to_healthy: float
    zk_serving: int
    zk_nodes: int
    zk_leader: int | None
    brokers_registered: list[int] = field(default_factory=list)
    controller: int | None = None
    broker_reachable: bool | None = None
    mode: str = "zookeeper"
    quorum_voters: list[int] = field(default_factory=list)  # kraft: voters the quorum reports
    pulled: list[str] = field(default_factory=list)  # images pulled before the health clock started
    pull_seconds: float = 0.0
    manager_url: str | None = None  # kafka-manager's web UI (CMAK or the console) on the host
    manager: str | None = None  # CMAK: what registering the cluster did
    formatted: list[kraftformat.Formatted] = field(default_factory=list)  # kraft.quorum dynamic: new controllers
    features: dict[str, int] = field(default_factory=dict)  # feature levels the spec sets, as finalized now
    features_changed: list[str] = field(default_factory=list)  # "NAME OLD -> NEW" for each this `up` changed


@dataclass
class DownResult:
    project: str
    containers_removed: list[str]
    networks_removed: list[str]
    volumes_removed: list[str]
    volumes_kept: list[str]
    disks_released: list[str] = field(default_factory=list)  # storage.bounded_mb: unmounted, removed images


class Cluster:
    """One cluster of a spec, run by compose from the file `clusterctl render` wrote under `root`.

    `root` is the directory the spec's `compose/<name>/` lies in (default: the working directory, where the
    CLI renders it).
    """

    def __init__(self, spec: ClusterSpec, root: Path | None = None) -> None:
        self.spec = spec
        self.root = root
        if spec.security.enabled:  # its clients authenticate with the cluster's secrets
            from clusterctl.kafka.settings import secure_clients_of

            secure_clients_of(spec)

    @property
    def project(self) -> str:
        return self.spec.topology.project

    @property
    def compose_file(self) -> Path:
        return compose.compose_file(self.spec, self.root)

    def __repr__(self) -> str:
        return f"Cluster({self.spec.name!r}, compose_file={str(self.compose_file)!r})"

    # ------------------------------------------------------------------ checks

    def check_rendered(self) -> Path:
        """The rendered compose file, refusing when it is missing or no longer matches the spec."""
        from clusterctl.compose.render import render_compose

        path = compose.require_compose_file(self.spec, self.root)
        if path.read_text(encoding="utf-8") != render_compose(self.spec):
            raise ClusterctlError(
                f"{self.spec.topology.compose_file} is stale: the spec (or templates) changed since it was rendered",
                hint="run `clusterctl render`",
            )
        return path

    def check_images(self) -> None:
        """Offline profile: every image the compose file names must exist locally (nothing can be pulled)."""
        if self.spec.profile != "offline":
            return
        missing = dk.missing_images(sorted(set(compose.file_images(self.spec, self.root).values())))
        if missing:
            ours = [m for m in missing if profiles.ours(m)]
            hint = (
                f"run `{profiles.build_hint(ours)}`"
                if ours
                else "the offline profile never pulls: build or `docker load` it (`clusterctl images build` makes ours)"
            )
            what = f"image{'s' if len(missing) > 1 else ''} {', '.join(missing)}"
            raise NotFoundError(f"{what} not present locally", hint=hint)
        jar = agent_jar(self.spec.monitoring.exporter_version)
        if self.spec.monitoring.enabled and not jar.is_file():  # compose would bind-mount an empty directory
            raise NotFoundError(f"the JMX exporter agent {jar} is not there", hint="`clusterctl up` fetches it")

    def pull(self, policy: str = "missing", on_pull: pulling.OnPull | None = None) -> pulling.PullResult:
        """Pull the registry images `policy` asks for (none offline), in the compose file's order; then every
        image must be present. Nothing is started here; a failed pull is one line (exit 3 or 4)."""
        images = list(compose.file_images(self.spec, self.root).values())
        todo = pulling.plan(self.spec.profile, images, policy, present=lambda i: dk.image_labels(i) is not None)
        t0 = time.monotonic()
        pulling.pull(todo, on_pull)
        result = pulling.PullResult(policy, todo, [i for i in dict.fromkeys(images) if i not in todo])
        result.seconds = round(time.monotonic() - t0, 1)
        missing = dk.missing_images(list(dict.fromkeys(images)))
        if missing:
            ours = [m for m in missing if profiles.ours(m)]
            hint = f"run `{profiles.build_hint(ours)}`" if ours else "run `clusterctl up --pull missing`"
            what = f"image{'s' if len(missing) > 1 else ''} {', '.join(missing)}"
            raise NotFoundError(f"{what} not present locally (--pull {policy}); nothing was started", hint=hint)
        return result

    @property
    def manager_url(self) -> str | None:
        """Where kafka-manager (CMAK or the console) answers on the host, when the spec enables one."""
        if not self.spec.kafka_manager.enabled:
            return None
        return f"http://{self.spec.topology.host}:{self.spec.kafka_manager.port}"

    def register_manager(self, timeout: float = 120.0) -> str | None:
        """CMAK (ZooKeeper mode): add this cluster unless CMAK lists it already; what happened, one line.

        A CMAK that does not answer leaves the (healthy) cluster running and says so."""
        spec = self.spec
        if self.manager_url is None or spec.manager_kind != "cmak" or spec.kraft_mode:
            return None
        try:
            reg = cmak.register(
                self.manager_url, spec.name, spec.topology.internal_zk_connect,
                profiles.kafka_version_of(spec.broker_image), timeout=timeout,
            )  # fmt: skip
        except ClusterctlError as exc:
            return f"cluster {spec.name} not registered in CMAK: {exc.message}"
        if not reg.added:
            return f"cluster {spec.name} already in CMAK (left as it is)"
        return f"cluster {spec.name} added to CMAK (zkHosts {reg.zk_hosts}, kafkaVersion {reg.kafka_version})"

    # ------------------------------------------------------------------ up / wait / status

    def up(
        self,
        timeout: float = 180.0,
        *,
        keep_on_failure: bool = False,
        on_report: OnReport | None = None,
        started: float | None = None,
        pull: str = "missing",
        on_pull: pulling.OnPull | None = None,
        manager_timeout: float = 120.0,
    ) -> UpResult:
        """Pull (`pull`: never | missing | always), check the data volumes, `compose up -d`, then wait until
        really healthy; a failed first start is torn down again. CMAK gets the cluster registered.

        The `timeout` clock starts after the pull, unless `started` (a time.monotonic() reading) counts it
        from an earlier moment.
        """
        if self.spec.swarm:
            return self._up_swarm(timeout, keep_on_failure, on_report, started)
        self.check_rendered()
        self.check_images()
        new_volumes = volumes.check(self.spec, self.root)  # volumes of another profile/user: refused first
        pulled = self.pull(pull, on_pull)
        existed = bool(dk.project_containers(self.project))
        had_volumes = bool(dk.project_volumes(self.project))
        # bounded volumes: each image mounted before its Docker volume (a bind of the mount point) is used
        disks.attach(self.spec, [c.name for c in volumes.claims(self.spec, self.root)], self.root)
        volumes.create(self.spec, new_volumes, self.root)  # labelled with profile and image user; compose adopts
        started = time.monotonic() if started is None else started
        try:
            formatted = kraftformat.format_new_voters(self.spec, [c.name for c in new_volumes], self.root)
            compose.up(self.spec, pull="never", root=self.root)
            # the time `compose up` took counts: the timeout is from the start, not from the first health check
            report = self.wait_healthy(timeout, on_report=on_report, started=started)
        except (ClusterctlError, KeyboardInterrupt) as exc:
            if not keep_on_failure and not existed:
                try:
                    compose.down(self.spec, volumes=not had_volumes, root=self.root)
                    disks.release(self.spec, self.root, remove=not had_volumes)
                except ClusterctlError as down_exc:
                    if isinstance(exc, ClusterctlError):
                        exc.message += f"; teardown also failed: {down_exc.message}"
            elif isinstance(exc, ClusterctlError) and not keep_on_failure:
                exc.message += " (containers that were already running are left as they were)"
            raise
        result = self._up_result(report, time.monotonic() - started)
        self.finalize_features(result)
        self.grant_roles()
        result.pulled, result.pull_seconds = pulled.pulled, pulled.seconds
        result.formatted = formatted
        result.manager_url = self.manager_url
        result.manager = self.register_manager(manager_timeout)
        return result

    def _up_swarm(
        self, timeout: float, keep_on_failure: bool, on_report: OnReport | None, started: float | None
    ) -> UpResult:
        """deploy.target swarm: the swarm and its racks checked, images present on every known host, then
        `docker stack deploy` and the same health wait; a failed first deploy is removed again."""
        path = self.check_rendered()
        swarm.check_swarm(self.spec)
        images = sorted(set(compose.file_images(self.spec, self.root).values()))
        if missing := swarm.missing_images(self.spec, images):
            where = "; ".join(f"{ep}: {', '.join(names)}" for ep, names in missing.items())
            hint = "`docker save IMAGE | docker -H HOST load` on each host (no registry)"
            raise NotFoundError(f"images not present on the swarm hosts ({where}); nothing was deployed", hint=hint)
        existed = bool(swarm.leftovers(self.spec).get("services"))
        started = time.monotonic() if started is None else started
        try:
            swarm.deploy(self.spec, path)
            report = self.wait_healthy(timeout, on_report=on_report, started=started)
        except (ClusterctlError, KeyboardInterrupt) as exc:
            if not keep_on_failure and not existed:
                try:
                    swarm.remove(self.spec, volumes=True)
                except ClusterctlError as down_exc:
                    if isinstance(exc, ClusterctlError):
                        exc.message += f"; removing the stack also failed: {down_exc.message}"
            raise
        result = self._up_result(report, time.monotonic() - started)
        self.finalize_features(result)
        return result

    def grant_roles(self) -> None:
        """security.authorizer: the ACLs each user's role stands for (those that exist are kept as they are)."""
        sec = self.spec.security
        if sec.authorizer:
            from clusterctl.kafka import acls

            wanted = [a for u in sec.users for a in acls.role_acls(u.name, u.role)]
            acls.create_acls(self.spec.topology.bootstrap_servers, wanted)

    def finalize_features(self, result: UpResult) -> None:
        """Finalize the feature levels the spec sets (kraft.eligible_leader_replicas_version) on the running
        cluster, as `kafka-features.sh upgrade|downgrade` would; a refusal is one line, the cluster left up."""
        from clusterctl.kafka import features

        level = self.spec.kraft.eligible_leader_replicas_version if self.spec.kraft_mode else None
        if level is None:
            return
        t = self.spec.topology
        addresses = [(t.host, t.broker_host_port(b)) for b in t.broker_ids]
        try:
            before = features.set_feature_level(addresses, features.ELR_VERSION, level)
        except ClusterctlError as exc:
            exc.message += (
                f" (cluster {self.spec.name} is up; change kraft.eligible_leader_replicas_version, `up` again)"
            )
            raise
        result.features[features.ELR_VERSION] = level
        if (before or 0) != level:
            result.features_changed.append(f"{features.ELR_VERSION} {before or 0} -> {level}")

    def _up_result(self, report: health.HealthReport, seconds: float) -> UpResult:
        return UpResult(
            project=self.project,
            compose_file=str(self.spec.topology.compose_file),
            seconds_to_healthy=round(seconds, 1),
            zk_serving=report.zk_serving,
            zk_nodes=report.zk_nodes,
            zk_leader=report.zk_leaders[0] if len(report.zk_leaders) == 1 else None,
            brokers_registered=report.brokers_registered,
            controller=report.controller,
            broker_reachable=report.broker_reachable,
            mode=self.spec.kafka.mode,
            quorum_voters=report.quorum_voters,
        )

    def wait_healthy(
        self, timeout: float, on_report: OnReport | None = None, started: float | None = None
    ) -> health.HealthReport:
        """Until the ZooKeeper quorum has a leader, every broker is registered and there is a controller."""
        return health.wait_healthy(self.spec, timeout, on_report=on_report, started=started)[0]

    def health(self) -> health.HealthReport:
        """One look at what `up` waits for (never raises for an unhealthy cluster)."""
        return health.check(self.spec)

    def status(self, spec_path: Path | None = None) -> ClusterStatus:
        """Containers, ZooKeeper Mode per node, quorum, broker registrations, controller, manager URL, and with
        `spec_path` a KRaft migration recorded beside it."""
        from clusterctl.runtime import fault_records

        result = cluster_status(self.spec)
        result.summary += [f"fault left applied: {r.line()} (`clusterctl chaos heal` undoes it)"
                           for r in fault_records.still_applied(self.spec)]  # fmt: skip
        if self.manager_url is not None:
            result.manager, result.manager_url = self.spec.manager_kind, self.manager_url
        return result if spec_path is None else add_migration(result, spec_path)

    # ------------------------------------------------------------------ containers

    def services(self) -> list[str]:
        """Every compose service the spec defines, in a stable order."""
        return [service for service, _, _ in dk.cluster_services(self.spec)]

    def container_name(self, service: str) -> str:
        if service not in self.services():
            raise NotFoundError(f"no service {service!r} in cluster {self.spec.name}; services: {self._known()}")
        return self.spec.topology.container_name(service)

    def _known(self) -> str:
        return ", ".join(self.services())

    def find(self, service: str) -> Container | None:
        """The service's container, or None when it does not exist."""
        return dk.find_container(self.container_name(service))

    def container(self, service: str) -> Container:
        """The service's container; NotFoundError when it does not exist."""
        if self.spec.swarm:
            raise ClusterctlError(
                f"per-container verbs on {service} are not built for deploy.target swarm yet (its task runs on "
                "another host's engine)"
            )
        return dk.get_container(self.container_name(service))

    def kill(self, service: str) -> None:
        """SIGKILL the service's container (no graceful shutdown); it stays down until `start`."""
        dk.kill(self.container(service))

    def stop(self, service: str, grace_s: int = 10) -> None:
        """SIGTERM, then SIGKILL after `grace_s`."""
        dk.stop(self.container(service), grace_s)

    def start(self, service: str) -> None:
        dk.start(self.container(service))

    def pause(self, service: str) -> None:
        dk.pause(self.container(service))

    def unpause(self, service: str) -> None:
        dk.unpause(self.container(service))

    def logs(self, service: str | None = None, *args: str) -> int:
        """`docker compose logs` attached to this terminal; the exit code."""
        if service is not None:
            self.container_name(service)  # a NotFoundError naming the services
        if self.spec.swarm:
            if service is None:
                raise ClusterctlError("on a swarm, `logs` needs a SERVICE (docker service logs)")
            return swarm.passthrough(self.spec, "service", "logs", *args, f"{self.project}_{service}")
        return compose.passthrough(self.spec, "logs", *args, *([service] if service else []), root=self.root)

    # ------------------------------------------------------------------ down / leftovers

    def down(self, volumes: bool = False, *, kill_first: bool = False) -> DownResult:
        """Remove the project's containers and network (and volumes); harmless when nothing runs.

        `kill_first` SIGKILLs every container before removing it: a throwaway cluster needs no controlled
        shutdown, and brokers' grace periods would dominate. Raises when something is left behind then.
        """
        if self.spec.swarm:
            gone = swarm.remove(self.spec, volumes=volumes)
            return DownResult(gone.stack, gone.services_removed, gone.networks_removed, gone.volumes_removed,
                              gone.volumes_kept)  # fmt: skip
        before_c = sorted(c.name for c in dk.project_containers(self.project))
        before_n = dk.project_networks(self.project)
        before_v = dk.project_volumes(self.project)
        if kill_first:
            self._kill_all()
        if before_c or before_n or (volumes and before_v):
            try:
                compose.down(self.spec, volumes=volumes, root=self.root)
            except ClusterctlError:
                if not kill_first:
                    raise
            if kill_first and self._engine_leftovers():  # the file may be gone: remove by project label then
                compose.down(self.spec, volumes=volumes, by_label=True)
        released = disks.release(self.spec, self.root, remove=volumes)  # after the containers let go of them
        if volumes:
            # volumes of services the file no longer has (ZooKeeper's after a migration to KRaft) are the project's too
            dk.remove_project_volumes(self.project)
        after_v = dk.project_volumes(self.project)
        result = DownResult(
            project=self.project,
            containers_removed=before_c,
            networks_removed=sorted(set(before_n) - set(dk.project_networks(self.project))),
            volumes_removed=sorted(set(before_v) - set(after_v)),
            volumes_kept=sorted(after_v),
            disks_released=released,
        )
        if kill_first and (left := self.leftovers()):
            raise ClusterctlError(f"cluster {self.spec.name} not fully removed: {left}")
        return result

    def _kill_all(self) -> None:
        for c in dk.project_containers(self.project):
            with contextlib.suppress(Exception):  # gone or stopping meanwhile: removal below deals with it
                if c.status == "paused":
                    dk.unpause(c)
                if c.status in ("running", "paused"):
                    dk.kill(c)

    def leftovers(self) -> dict[str, list[str]]:
        """What of this cluster still exists in the engine, and its bounded disks' images, mounts and loop devices
        on the host (empty after `down(volumes=True)`)."""
        found = {**self._engine_leftovers(), "disks": disks.leftovers(self.spec, self.root)}
        return {k: v for k, v in found.items() if v}

    def _engine_leftovers(self) -> dict[str, list[str]]:
        if self.spec.swarm:
            return swarm.leftovers(self.spec)
        found = {
            "containers": sorted(c.name for c in dk.project_containers(self.project)),
            "networks": dk.project_networks(self.project),
            "volumes": dk.project_volumes(self.project),
        }
        return {k: v for k, v in found.items() if v}
