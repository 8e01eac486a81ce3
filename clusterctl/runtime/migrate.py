"""Run a ZooKeeper → KRaft migration on a running cluster, phase by phase, and its rollback before finalize.

Each phase re-renders the compose file (clusterctl.compose.migration), restarts what it changes one node at a
time through compose (`up --no-deps SERVICE` recreates a container only when its configuration differs, so a
repeated phase restarts nothing that is already right), then runs its done-check (runtime.migrate_checks).
The state file beside the spec (kafka.kraft.migration) records each phase as started and as done; a run holds the
lock beside it (clusterctl.runowner) from before it reads the state until it ends, so a second run is refused.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from clusterctl.compose import migration as phases
from clusterctl.compose.render import PhaseRender, render
from clusterctl.errors import ClusterctlError, NotFoundError, TimeoutError_
from clusterctl.kafka.admin import behind_line, partitions_behind, wait_full_isr
from clusterctl.kafka.kraft import migration as plan
from clusterctl.runowner import holder, own
from clusterctl.runtime import compose, volumes
from clusterctl.runtime import docker as dk
from clusterctl.runtime import migrate_checks as checks
from clusterctl.spec.model import ClusterSpec, load_spec
from clusterctl.zookeeper import client as zk

# Seen on Kafka 3.9.2 under load (the CI machine, 2 of about 12 runs; never in 10 runs alone): after the roll in which
# the controller went over to KRaft, partitions led by some brokers did not take the last restarted broker back into
# their ISR for 300 s (an ISR change lost at the hand-over is the likely cause; not proven). A restart of their leader
# moves leadership, and the new leader takes the replica back. A healthy roll is in sync within seconds.
STUCK_ISR_S = 60.0
Progress = Callable[[str], None]
PhaseHook = Callable[[phases.Phase, bool], None]  # (phase, done): False as it starts, True once its done-check passed


@dataclass
class PhaseRun:
    number: int
    name: str
    seconds: float
    restarted: list[str] = field(default_factory=list)
    detail: str = ""


@dataclass
class MigrateResult:
    cluster: str
    state_file: str
    ran: list[PhaseRun]
    status: plan.MigrationStatus


@dataclass
class RollbackResult:
    cluster: str
    state_file: str
    reverted_from: int  # the furthest phase begun, whose revert directions were followed
    steps: list[str]
    seconds: float


@dataclass
class _Run:
    """One migration run: the ZooKeeper-mode spec, its kraft target, the state and where things live."""

    spec: ClusterSpec
    target: ClusterSpec
    state: plan.MigrationState
    spec_path: Path
    root: Path | None
    timeout: float
    progress: Progress

    @property
    def version(self) -> tuple[int, int]:
        major, minor = self.state.kafka_version.split(".")
        return int(major), int(minor)

    def render_phase(self, number: int) -> None:
        context = phases.phase_context(self.spec, self.target, number, self.version)
        services = phases.phase_services(self.spec, self.target)
        assert self.state.cluster_id is not None
        out = self.spec.topology.compose_dir if self.root is None else self.root / self.spec.topology.compose_dir
        render(self.spec, out, protect=self.spec_path, phase=PhaseRender(context, services, self.state.cluster_id))

    def up(self, *services: str) -> list[str]:
        """Start or recreate `services` where their configuration changed; the ones compose (re)created."""
        before = {s: self._container_id(s) for s in services}
        volumes.create(self.spec, volumes.check(self.spec, self.root))  # the controllers' volumes, labelled as `up`'s
        compose.run(self.spec, "up", "-d", "--no-deps", "--pull", "never", *services, root=self.root)
        return [s for s in services if self._container_id(s) != before[s]]

    def _container_id(self, service: str) -> str | None:
        container = dk.find_container(self.spec.topology.container_name(service))
        return None if container is None else str(container.id)

    def roll_brokers(self, in_zookeeper: bool) -> list[str]:
        bootstrap = self.spec.topology.bootstrap_servers
        done: list[str] = []
        for b in self.spec.topology.broker_ids:
            self.wait_in_sync(bootstrap, in_zookeeper)
            service = self.spec.topology.broker_service(b)
            self.progress(f"restarting {service} (if its configuration changed)")
            done += self.up(service)
            checks.wait_broker_back(self.spec, b, self.timeout, in_zookeeper)
        self.wait_in_sync(bootstrap, in_zookeeper)
        return done

    def wait_in_sync(self, bootstrap: str, in_zookeeper: bool) -> None:
        """Every partition fully in sync; leaders whose partitions stay behind for STUCK_ISR_S are restarted once."""
        if self.timeout <= STUCK_ISR_S:
            wait_full_isr(bootstrap, self.timeout, poll=1.0)
            return
        try:
            wait_full_isr(bootstrap, STUCK_ISR_S, poll=1.0)
            return
        except TimeoutError_:
            try:
                behind = partitions_behind(bootstrap)
            except ClusterctlError:  # no answer now: the wait below says what stays behind
                behind = []
        for leader in sorted({p.leader for p in behind if p.leader in self.spec.topology.broker_ids}):
            lines = [behind_line(p) for p in behind if p.leader == leader]
            service = self.spec.topology.broker_service(leader)
            self.progress(f"{len(lines)} partitions led by broker {leader} still behind after {STUCK_ISR_S:.0f}s "
                          f"(e.g. {lines[0]}): restarting {service}, their leader")  # fmt: skip
            dk.restart(dk.get_container(self.spec.topology.container_name(service)))
            checks.wait_broker_back(self.spec, leader, self.timeout, in_zookeeper)
        wait_full_isr(bootstrap, self.timeout, poll=1.0)


def _phase_controllers(run: _Run) -> tuple[list[str], str]:
    run.render_phase(1)
    services = [run.target.topology.controller_service(c) for c in run.target.topology.controller_ids]
    run.progress(f"starting {', '.join(services)} (migration enabled, cluster id {run.state.cluster_id})")
    started = run.up(*services)
    return started, checks.wait_quorum(run.target, run.timeout)


def _phase_migration_mode(run: _Run) -> tuple[list[str], str]:
    run.render_phase(2)
    restarted = run.roll_brokers(in_zookeeper=True)
    run.progress("waiting for the controller to report the metadata migrated")
    signal = checks.wait_migrated(run.spec, run.target, run.timeout)
    offset = signal.znode.get("kraft_metadata_offset")
    return restarted, f"{signal.controller}: {signal.log_line} | /migration kraft_metadata_offset={offset}"


def _phase_kraft_brokers(run: _Run) -> tuple[list[str], str]:
    run.render_phase(3)
    restarted = run.roll_brokers(in_zookeeper=False)
    checks.wait_kraft_healthy(run.target, run.timeout)
    return restarted, "every broker registered with the quorum and unfenced"


def _phase_finalize(run: _Run) -> tuple[list[str], str]:
    run.render_phase(4)
    restarted: list[str] = []
    detail = ""
    for c in run.target.topology.controller_ids:
        service = run.target.topology.controller_service(c)
        run.progress(f"restarting {service} without migration")
        restarted += run.up(service)
        detail = checks.wait_quorum(run.target, run.timeout, node_id=c)
    checks.wait_kraft_healthy(run.target, run.timeout)
    return restarted, detail


def kept_spec_path(spec_path: Path) -> Path:
    return spec_path.with_name(f"{spec_path.stem}.zookeeper{spec_path.suffix or '.yaml'}")


def write_kraft_spec(spec_path: Path, target: ClusterSpec) -> Path:
    """Keep the ZooKeeper-mode spec beside it (once: a repeated phase 5 keeps the first copy) and write the kraft
    spec in its place; the kept copy's path."""
    kept = kept_spec_path(spec_path)
    if not kept.exists():
        kept.write_bytes(spec_path.read_bytes())
    data = target.model_dump(mode="json", exclude_unset=True)
    text = f"# rewritten by `clusterctl migrate kraft`; the ZooKeeper-mode spec is kept in {kept.name}\n"
    tmp = spec_path.with_name(f".{spec_path.name}.tmp")
    tmp.write_text(text + yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    tmp.replace(spec_path)
    return kept


def _phase_remove_zookeeper(run: _Run) -> tuple[list[str], str]:
    run.state.kept_spec = str(kept_spec_path(run.spec_path))
    plan.save_state(plan.state_path(run.spec_path), run.state)  # recorded first: a resumed run finds it
    kept = write_kraft_spec(run.spec_path, run.target)
    out = run.target.topology.compose_dir if run.root is None else run.root / run.target.topology.compose_dir
    render(run.target, out, protect=run.spec_path)
    removed = [run.spec.topology.zk_service(i) for i in run.spec.topology.zk_ids]
    run.progress(f"removing {', '.join(removed)}")
    compose.run(run.target, "up", "-d", "--no-recreate", "--remove-orphans", "--pull", "never", root=run.root)
    checks.wait_kraft_healthy(run.target, run.timeout)
    return [], f"removed {', '.join(removed)}; spec rewritten as kraft, ZooKeeper spec kept in {kept}"


PHASE_ACTIONS = {
    1: _phase_controllers,
    2: _phase_migration_mode,
    3: _phase_kraft_brokers,
    4: _phase_finalize,
    5: _phase_remove_zookeeper,
}


def _start(spec: ClusterSpec, controllers: int, combined: bool) -> plan.MigrationState:
    """A new migration's state, after its refusals; the cluster id is read when phase 1 is about to run."""
    version = plan.check_migratable(spec, spec.broker_image, combined)
    phases.kraft_target(spec, phases.kraft_settings(controllers))  # e.g. a subnet too small for the controllers
    return plan.MigrationState(spec.name, phases.ibp(version), controllers)


def _open(spec_path: Path, controllers: int, combined: bool) -> tuple[ClusterSpec, plan.MigrationState]:
    spec = load_spec(spec_path)  # read again under the lock: a run that just ended may have rewritten it (phase 5)
    state = plan.load_state(plan.state_path(spec_path))
    if state is not None and state.rolled_back:
        state = None  # a rolled-back migration starts again from the beginning
    if state is not None and spec.kraft_mode and state.kept_spec:
        spec = load_spec(Path(state.kept_spec))  # phase 5 rewrote the spec already
    if state is None:
        state = _start(spec, controllers, combined)
    elif state.cluster != spec.name:
        raise plan.MigrationRefused(f"{plan.state_path(spec_path)} records cluster {state.cluster}, not {spec.name}")
    return spec, state


def migrate(
    spec_path: Path,
    to: str | None = None,
    only: str | None = None,
    yes: bool = False,
    controllers: int = 3,
    combined: bool = False,
    timeout: float = 300.0,
    root: Path | None = None,
    progress: Progress | None = None,
    on_phase: PhaseHook | None = None,
) -> MigrateResult:
    """Run the phases up to `to` (or the single phase `only`) and record each one; resumes where it stopped.

    `on_phase` is told as each phase starts and ends (a drill puts them on its timeline). Refused (one line) while
    another `migrate kraft` or `migrate rollback` runs on the spec.
    """
    for ref in (to, only):
        if ref is not None:
            phases.phase(ref)  # an unknown phase is refused before anything is read
    load_spec(spec_path)  # a missing or invalid spec is said as such, before a lock file is made beside it
    with own(plan.lock_path(spec_path), plan.RUN_COMMAND):
        return _migrate(spec_path, to, only, yes, controllers, combined, timeout, root, progress, on_phase)


def _migrate(
    spec_path: Path,
    to: str | None,
    only: str | None,
    yes: bool,
    controllers: int,
    combined: bool,
    timeout: float,
    root: Path | None,
    progress: Progress | None,
    on_phase: PhaseHook | None,
) -> MigrateResult:
    spec, state = _open(spec_path, controllers, combined)
    todo = [plan.check_single(state, only)] if only is not None else plan.plan(state, to, yes)
    if only is not None and todo[0].number == phases.FINALIZE and not yes:
        plan.plan(state, only, yes)  # the same --yes refusal as a run up to it
    target = phases.kraft_target(spec, phases.kraft_settings(state.controllers))
    if todo and state.cluster_id is None:
        state.cluster_id = checks.cluster_id(spec)  # ZooKeeper's: the controllers are formatted with it
    run = _Run(spec, target, state, spec_path, root, timeout, progress or (lambda _m: None))
    path = plan.state_path(spec_path)
    ran: list[PhaseRun] = []
    for p in todo:
        run.progress(f"phase {p.number} {p.name}: {p.action}")
        started = time.monotonic()
        state.started(p)
        plan.save_state(path, state)
        if on_phase is not None:
            on_phase(p, False)
        restarted, detail = PHASE_ACTIONS[p.number](run)
        state.completed(p, detail)
        plan.save_state(path, state)
        if on_phase is not None:
            on_phase(p, True)
        ran.append(PhaseRun(p.number, p.name, round(time.monotonic() - started, 1), restarted, detail))
    return MigrateResult(spec.name, str(path), ran, plan.status(state, spec.name, path))


def migration_status(spec_path: Path) -> plan.MigrationStatus:
    """Where the migration stands, and the `migrate` run holding its lock now, if any."""
    spec = load_spec(spec_path)
    path = plan.state_path(spec_path)
    return plan.status(plan.load_state(path), spec.name, path, holder(plan.lock_path(spec_path)))


def _remove_controllers(run: _Run) -> None:
    for c in run.target.topology.controller_ids:
        container = dk.find_container(run.target.topology.controller_container(c))
        if container is not None:
            run.progress(f"removing {container.name}")
            container.remove(force=True)
        volume = f"{run.target.topology.project}_{run.target.topology.controller_service(c)}-data"
        with contextlib.suppress(Exception):  # a volume never created, or already gone
            dk.client().volumes.get(volume).remove()


def _clear_znodes(spec: ClusterSpec) -> None:
    with zk.zk_client(spec.topology.zk_connect, timeout=5.0) as client:
        for path in ("/controller", "/migration"):
            with contextlib.suppress(Exception):
                client.delete(path)


def rollback(
    spec_path: Path, timeout: float = 300.0, root: Path | None = None, progress: Progress | None = None
) -> RollbackResult:
    """Follow the migration guide's revert directions for the furthest phase begun; refused after finalize, and
    while another `migrate kraft` or `migrate rollback` runs on the spec."""
    load_spec(spec_path)  # a missing or invalid spec is said as such, before a lock file is made beside it
    with own(plan.lock_path(spec_path), "migrate rollback"):
        return _rollback(spec_path, timeout, root, progress)


def _rollback(spec_path: Path, timeout: float, root: Path | None, progress: Progress | None) -> RollbackResult:
    spec = load_spec(spec_path)
    path = plan.state_path(spec_path)
    state = plan.load_state(path)
    if state is None or state.rolled_back:
        raise NotFoundError(f"no migration of {spec.name} to roll back ({path} records none)")
    level = plan.rollback_level(state)
    target = phases.kraft_target(spec, phases.kraft_settings(state.controllers))
    run = _Run(spec, target, state, spec_path, root, timeout, progress or (lambda _m: None))
    started = time.monotonic()
    if level >= 3:
        run.progress("brokers back to ZooKeeper mode (migration still enabled)")
        run.render_phase(2)
        run.roll_brokers(in_zookeeper=True)
    if level >= 1:
        out = spec.topology.compose_dir if root is None else root / spec.topology.compose_dir
        render(spec, out, protect=spec_path)
        _remove_controllers(run)
    if level >= 2:
        _clear_znodes(spec)
        run.progress("brokers restarted without migration")
        run.roll_brokers(in_zookeeper=True)
    state.rolled_back = True
    plan.save_state(path, state)
    return RollbackResult(
        spec.name, str(path), level, list(plan.ROLLBACK_STEPS[level]), round(time.monotonic() - started, 1)
    )
