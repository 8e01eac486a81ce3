"""The ZooKeeper → KRaft migration plan: which phases run, what is refused, and the state file beside the spec.

The phases themselves (and what each renders) are clusterctl.compose.migration's; running them is
clusterctl.runtime.migrate's. Everything here is plain data and decisions, so it runs without Docker.
A phase is recorded as started before its first change and as done after its done-check: an interrupted
phase is run again from the start (every phase is idempotent: it re-renders and restarts only what differs).
A run holds the lock file beside the state file (clusterctl.runowner): a phase begun while a live process holds it
is running, one begun while nobody does was interrupted.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterctl.compose.migration import FINALIZE, PHASES, Phase, phase
from clusterctl.errors import ClusterctlError
from clusterctl.runowner import Owner, holder
from clusterctl.runstate import read_state, write_state
from clusterctl.spec.capabilities import MIGRATE_KRAFT_FROM
from clusterctl.spec.model import ClusterSpec
from clusterctl.spec.profiles import kafka_version_of

MIN_VERSION = (
    MIGRATE_KRAFT_FROM  # the first release whose migration the Kafka project and vendors advise for production
)
STATE_SUFFIX = ".migration.json"
LOCK_SUFFIX = ".migration.lock"
RUN_COMMAND = "migrate kraft"  # the holder's command whose current phase is the one running
STATE_VERSION = 1


class MigrationRefused(ClusterctlError):
    """The migration cannot start or go on as asked; nothing was changed."""

    exit_code = 2


@dataclass
class PhaseRecord:
    phase: str
    started: float
    finished: float | None = None
    detail: str = ""  # what the done-check saw (e.g. the controller's migration log line)


@dataclass
class MigrationState:
    """What the state file beside the spec records."""

    cluster: str
    kafka_version: str  # major.minor: the brokers' inter.broker.protocol.version during the migration
    controllers: int
    cluster_id: str | None = None  # ZooKeeper's /cluster/id, which the controllers are formatted with
    done: list[str] = field(default_factory=list)  # phase names, in order
    current: str | None = None  # a phase started and not yet done (interrupted, or running)
    history: list[PhaseRecord] = field(default_factory=list)
    kept_spec: str | None = None  # the ZooKeeper-mode spec, kept when phase 5 rewrites the spec
    rolled_back: bool = False

    @property
    def last_done(self) -> int:
        return phase(self.done[-1]).number if self.done else 0

    @property
    def finished(self) -> bool:
        return self.last_done == len(PHASES)

    def started(self, p: Phase) -> None:
        self.current = p.name
        self.history.append(PhaseRecord(p.name, time.time()))

    def completed(self, p: Phase, detail: str = "") -> None:
        if p.name not in self.done:
            self.done.append(p.name)
        self.current = None
        record = next((r for r in reversed(self.history) if r.phase == p.name), None)
        if record is None or record.finished is not None:
            record = PhaseRecord(p.name, time.time())
            self.history.append(record)
        record.finished = time.time()
        record.detail = detail


@dataclass
class PhaseStatus:
    number: int
    name: str
    section: str
    state: str  # done | running (pid N, since HH:MM:SSZ) | interrupted | rolled back | pending
    settings: list[str]


@dataclass
class MigrationStatus:
    cluster: str
    state_file: str
    started: bool
    kafka_version: str | None
    cluster_id: str | None
    phases: list[PhaseStatus]
    next_phase: str | None
    can_roll_back: bool
    kept_spec: str | None = None
    running: Owner | None = None  # the `migrate kraft` or `migrate rollback` holding the lock now


def state_path(spec_path: Path) -> Path:
    """The state file beside the spec: clusterctl.yaml → clusterctl.yaml.migration.json."""
    return spec_path.with_name(spec_path.name + STATE_SUFFIX)


def lock_path(spec_path: Path) -> Path:
    """The lock a run holds beside the spec: clusterctl.yaml → clusterctl.yaml.migration.lock."""
    return spec_path.with_name(spec_path.name + LOCK_SUFFIX)


def running_state(owner: Owner) -> str:
    return f"running ({owner.where})"


def load_state(path: Path) -> MigrationState | None:
    """The recorded migration, or None when none was started; an unreadable file is refused, never replaced."""

    def build(data: dict[str, Any]) -> MigrationState:
        history = [PhaseRecord(**r) for r in data.pop("history")]
        state = MigrationState(**data, history=history)
        for name in state.done + ([state.current] if state.current else []):
            phase(name)
        return state

    return read_state(path, STATE_VERSION, build, MigrationRefused, "migration")


def save_state(path: Path, state: MigrationState) -> None:
    """Write the state file atomically (a crash leaves the old or the new one, never half)."""
    write_state(path, STATE_VERSION, state)


def check_migratable(spec: ClusterSpec, image: str, combined: bool = False) -> tuple[int, int]:
    """Refuse a spec the migration cannot start from (one line each); the brokers' Kafka (major, minor)."""
    if spec.kraft_mode:
        raise MigrationRefused(f"cluster {spec.name} already runs in KRaft mode: there is nothing to migrate")
    if spec.kafka.engine != "kafka":
        raise MigrationRefused(f"cluster {spec.name} runs {spec.kafka.engine}, not Kafka: there is nothing to migrate")
    if spec.swarm:
        raise MigrationRefused(
            f"cluster {spec.name} runs on a swarm (deploy.target swarm): the migration adds controllers and rolls "
            "brokers with `docker compose`, on compose clusters only"
        )
    if spec.image_profile.broker_flavor != "cp":
        raise MigrationRefused(
            f"profile {spec.profile}'s broker image has no KRaft support: use profile default or offline"
        )
    if combined:
        raise MigrationRefused(
            "combined mode (brokers that are also controllers) cannot migrate from ZooKeeper: "
            "Kafka's migration needs dedicated controllers"
        )
    version = kafka_version_of(image)
    if version is None:
        raise MigrationRefused(
            f"cannot tell the Kafka version of image {image}: pin images.kafka to a tagged 3.7+ image"
        )
    if version < MIN_VERSION:
        raise MigrationRefused(
            f"image {image} is Kafka {version[0]}.{version[1]}; migrating to KRaft needs Kafka "
            f"{MIN_VERSION[0]}.{MIN_VERSION[1]} or later: upgrade the brokers first"
        )
    return version


def plan(state: MigrationState, to: str | int | None = None, yes: bool = False) -> list[Phase]:
    """The phases to run, in order, to reach `to` (default: the end); [] when it is already reached."""
    if state.rolled_back:
        raise MigrationRefused(
            f"the migration of {state.cluster} was rolled back: remove its state file to start again"
        )
    target = phase(to).number if to is not None else len(PHASES)
    first = state.last_done + 1
    todo = [p for p in PHASES if first <= p.number <= target]
    if any(p.number == FINALIZE for p in todo) and not yes:
        raise MigrationRefused(
            "phase 4 (finalize) is the point of no return: afterwards the cluster cannot go back to ZooKeeper; "
            "pass --yes to run it"
        )
    return todo


def check_single(state: MigrationState, ref: str | int) -> Phase:
    """One phase by itself (`--phase`): only the next one, or the last one done again (idempotent)."""
    p = phase(ref)
    if p.number > state.last_done + 1:
        missing = PHASES[state.last_done]
        raise MigrationRefused(
            f"phase {p.number} ({p.name}) is out of order: phase {missing.number} ({missing.name}) is not done yet"
        )
    if p.number < state.last_done:
        raise MigrationRefused(
            f"phase {p.number} ({p.name}) is out of order: the migration is past it (done up to {state.last_done})"
        )
    return p


def rollback_level(state: MigrationState) -> int:
    """The migration guide's revert row: the furthest phase begun (an interrupted one is backed out too)."""
    level = max(state.last_done, phase(state.current).number if state.current else 0)
    if level >= FINALIZE:
        raise MigrationRefused(
            f"the migration of {state.cluster} reached phase {level} (finalize): it can no longer go back to ZooKeeper"
        )
    return level


ROLLBACK_STEPS: dict[int, tuple[str, ...]] = {
    0: (),
    1: ("remove the controllers",),
    2: ("remove the controllers", "delete /controller and /migration", "roll the brokers without migration"),
    3: (
        "roll the brokers back to ZooKeeper mode (migration still enabled)",
        "remove the controllers",
        "delete /controller and /migration",
        "roll the brokers without migration",
    ),
}


def status(state: MigrationState | None, cluster: str, path: Path, running: Owner | None = None) -> MigrationStatus:
    """Where the migration stands, phase by phase; `running`: the lock's holder, if a live process holds it."""
    done = set(state.done) if state and not state.rolled_back else set()
    reverted = set(state.done) | {state.current or ""} if state and state.rolled_back else set()
    current = state.current if state else None
    begun = running_state(running) if running is not None and running.command == RUN_COMMAND else "interrupted"
    phases = [
        PhaseStatus(
            p.number,
            p.name,
            p.section,
            "done"
            if p.name in done
            else "rolled back"
            if p.name in reverted
            else (begun if p.name == current else "pending"),
            list(p.settings),
        )
        for p in PHASES
    ]
    next_phase = None
    if state is None or (not state.finished and not state.rolled_back):
        next_phase = PHASES[state.last_done if state else 0].name
    can_roll_back = False
    if state is not None and not state.rolled_back:
        try:
            can_roll_back = rollback_level(state) > 0
        except MigrationRefused:
            can_roll_back = False
    return MigrationStatus(
        cluster=cluster,
        state_file=str(path),
        started=state is not None,
        kafka_version=state.kafka_version if state else None,
        cluster_id=state.cluster_id if state else None,
        phases=phases,
        next_phase=next_phase,
        can_roll_back=can_roll_back,
        kept_spec=state.kept_spec if state else None,
        running=running,
    )


@dataclass
class MigrationSummary:
    """Where a migration stands in one line, and what `migrate kraft` would do next (`status`, the console)."""

    state_file: str
    phase: int  # the phase begun and not done, else the furthest one done or rolled back (0: none)
    phase_name: str | None
    state: str  # as `migrate kraft --status` says: running (...) | interrupted | done | rolled back, or not started
    interrupted: bool  # `phase` was begun and is not done, and no live process holds the lock
    finished: bool
    next: str  # what `migrate kraft` would do
    line: str
    running: Owner | None = None  # the `migrate kraft` or `migrate rollback` holding the lock now


def _next_action(state: MigrationState) -> str:
    if state.rolled_back:  # runtime.migrate starts a rolled-back migration afresh
        return f"`migrate kraft` starts the migration of {state.cluster} again from phase 1"
    try:
        todo = plan(state, yes=True)
    except MigrationRefused as exc:
        return exc.message
    if not todo:
        return "nothing: the migration is finished"
    span = f"phase {todo[0].number}" if len(todo) == 1 else f"phases {todo[0].number}-{todo[-1].number}"
    again = " (again from its start)" if todo[0].name == state.current else ""
    yes = f"; phase {FINALIZE} needs --yes" if any(p.number == FINALIZE for p in todo) else ""
    return f"`migrate kraft` runs {span}{again}{yes}"


def summarize(state: MigrationState, path: Path, running: Owner | None = None) -> MigrationSummary:
    """The summary of `status(...)`'s phase rows: the last one not pending, and the plan's next step."""
    rows = status(state, state.cluster, path, running).phases
    reached = [p for p in rows if p.state != "pending"]
    last = reached[-1] if reached else None
    what = "not started" if last is None else last.state
    interrupted = last is not None and last.state == "interrupted" and running is None
    where = "" if last is None else f"phase {last.number} {last.name} "
    shown, next_action = what, _next_action(state)
    if running is not None:
        next_action = f"none while `{running.command}` runs ({running.where})"
        if not what.startswith("running"):  # a rollback, or a run before its first phase
            shown = f"{what}; `{running.command}` running"
    return MigrationSummary(
        str(path), last.number if last else 0, last.name if last else None, what, interrupted, state.finished,
        next_action, f"migration to KRaft: {where}{shown}; next: {next_action}", running,
    )  # fmt: skip


def summary_beside(spec_path: Path) -> MigrationSummary | None:
    """The summary of the state file beside the spec and of the run holding its lock; None when no migration was
    ever started there."""
    path = state_path(spec_path)
    state = load_state(path)
    return None if state is None else summarize(state, path, holder(lock_path(spec_path)))
