"""The rolling upgrade of a KRaft cluster to another Kafka version: what is refused, the order of the roll, and the
state file beside the spec.

Kafka's order ("Upgrading KRaft-based clusters"): restart each controller, then each broker, one at a time on the
new version, each back and every partition's ISR full before the next; the cluster runs the new software on the
old metadata.version, so it can still go back; finalizing (`kafka-features upgrade --release-version`) raises
the feature levels and closes that way. Kafka 4.x upgrades only from 3.3 or newer, in KRaft mode (4.x has no
ZooKeeper mode). Running the roll is clusterctl.runtime.upgrade's; everything here is data and decisions.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterctl.errors import ClusterctlError
from clusterctl.runowner import Owner
from clusterctl.runstate import read_state, write_state
from clusterctl.spec.capabilities import FIRST_VERSION_WITHOUT_ZOOKEEPER, KRAFT_PRODUCTION_FROM, MIGRATION_LINE
from clusterctl.spec.kafkadist import EXACT_VERSION, offline_image, version_key
from clusterctl.spec.model import ClusterSpec

STATE_SUFFIX = ".upgrade.json"
LOCK_SUFFIX = ".upgrade.lock"
STATE_VERSION = 1


class UpgradeRefused(ClusterctlError):
    """The upgrade cannot start or go on as asked; nothing was changed."""

    exit_code = 2


@dataclass
class NodeRecord:
    service: str
    started: float
    finished: float | None = None
    restarted: bool = False  # False: it already ran the target image (a resumed run)


@dataclass
class UpgradeState:
    """What the state file beside the spec records."""

    cluster: str
    from_version: str
    to_version: str
    from_metadata_level: int | None  # metadata.version finalized when the roll began
    done: list[str] = field(default_factory=list)  # services rolled, in order
    current: str | None = None  # a service being rolled (interrupted, or running)
    finalized: str | None = None  # the release version finalized (`--yes`), None before
    history: list[NodeRecord] = field(default_factory=list)

    def started(self, service: str) -> None:
        self.current = service
        self.history.append(NodeRecord(service, time.time()))

    def completed(self, service: str, restarted: bool) -> None:
        if service not in self.done:
            self.done.append(service)
        self.current = None
        record = next((r for r in reversed(self.history) if r.service == service), None)
        if record is None:
            record = NodeRecord(service, time.time())
            self.history.append(record)
        record.finished = time.time()
        record.restarted = restarted


def state_path(spec_path: Path) -> Path:
    """clusterctl.yaml → clusterctl.yaml.upgrade.json."""
    return spec_path.with_name(spec_path.name + STATE_SUFFIX)


def lock_path(spec_path: Path) -> Path:
    """The lock a run holds beside the spec (clusterctl.runowner): clusterctl.yaml → clusterctl.yaml.upgrade.lock."""
    return spec_path.with_name(spec_path.name + LOCK_SUFFIX)


def load_state(path: Path) -> UpgradeState | None:
    """The recorded upgrade, or None; an unreadable file is refused, never replaced."""

    def build(data: dict[str, Any]) -> UpgradeState:
        history = [NodeRecord(**r) for r in data.pop("history")]
        return UpgradeState(**data, history=history)

    return read_state(path, STATE_VERSION, build, UpgradeRefused, "upgrade")


def save_state(path: Path, state: UpgradeState) -> None:
    """Write the state file atomically (a crash leaves the old or the new one, never half)."""
    write_state(path, STATE_VERSION, state)


def release(version: str) -> str:
    """'4.4.0' → '4.4', the --release-version Kafka's feature tool takes."""
    return ".".join(version.split(".")[:2])


def check_target(spec: ClusterSpec, to: str) -> None:
    """The refusals that need no cluster: the version's form, the engine, the profile and the mode."""
    if not re.match(EXACT_VERSION, to):
        raise UpgradeRefused(f"--to takes an exact Kafka release such as 4.4.0, got {to!r}")
    if spec.kafka.engine != "kafka":
        raise UpgradeRefused(f"cluster {spec.name} runs {spec.kafka.engine}, not Apache Kafka: nothing to upgrade")
    if spec.profile != "offline" or spec.images.kafka:
        raise UpgradeRefused(
            f"cluster {spec.name} runs {spec.broker_image} from a registry; `upgrade` rolls the offline profile's "
            "clusterctl/kafka images, whose presence it checks before any work (a registry image's tag is the "
            "spec's kafka.version or images.kafka)"
        )
    if spec.swarm:
        raise UpgradeRefused(
            f"cluster {spec.name} runs on a swarm (deploy.target swarm): `upgrade` rolls compose clusters, node by "
            "node with `docker compose`; a stack is rolled by its services' update_config"
        )
    if not spec.kraft_mode:
        first = ".".join(map(str, FIRST_VERSION_WITHOUT_ZOOKEEPER))
        raise UpgradeRefused(
            f"cluster {spec.name} runs ZooKeeper mode: `upgrade` rolls KRaft clusters (Kafka {first}+ has no "
            f"ZooKeeper mode); migrate first with `clusterctl migrate kraft` on {MIGRATION_LINE}, then upgrade"
        )


def check_built(to: str, built: list[str]) -> None:
    if to not in built:
        raise UpgradeRefused(
            f"{offline_image(to)} is not built here: `clusterctl images build kafka --kafka-version {to}`"
        )


def check_upgrade(
    spec: ClusterSpec,
    running: str,
    to: str,
    built: list[str],
    *,
    finalized: str | None = None,
    metadata_level: int | None = None,
    from_metadata_level: int | None = None,
) -> None:
    """Refuse, in one line, an upgrade that cannot go as asked, before any work.

    `running`: the version the cluster runs (mid-roll: the recorded start); `built`: the clusterctl/kafka
    versions built here; `finalized`/`metadata_level`: what the state recorded as finalized and the level the
    cluster reports now, and `from_metadata_level` the level when the roll began.
    """
    check_target(spec, to)
    check_built(to, built)
    new, old = version_key(to), version_key(running)
    # Kafka 4.0's upgrade notes: from 3.3.x through 3.9.x in KRaft mode (3.3: KRaft production-ready)
    if new[:2] >= FIRST_VERSION_WITHOUT_ZOOKEEPER and old[:2] < KRAFT_PRODUCTION_FROM:
        raise UpgradeRefused(
            f"Kafka {to} upgrades from KRaft {'.'.join(map(str, KRAFT_PRODUCTION_FROM))} or newer, not from "
            f"{running}: upgrade to {MIGRATION_LINE}.x first (`clusterctl upgrade --to {MIGRATION_LINE}.x`)"
        )
    if new < old:
        raised = metadata_level is not None and from_metadata_level is not None and metadata_level > from_metadata_level
        if finalized is not None or raised:
            level = finalized or f"level {metadata_level}"
            raise UpgradeRefused(
                f"metadata.version is finalized at {level}: Kafka {to} cannot read the metadata log any more, "
                "so there is no downgrade after finalize"
            )


def roll_order(spec: ClusterSpec, active_controller: int | None) -> list[str]:
    """Controllers first (the active one last, so the quorum elects once), then brokers one at a time; in
    combined mode the brokers are the voters, the active one last."""
    topo = spec.topology

    def last(ids: list[int]) -> list[int]:
        return sorted(ids, key=lambda i: (i == active_controller, i))

    if spec.kraft.combined:
        return [topo.broker_service(b) for b in last(list(topo.broker_ids))]
    return [topo.controller_service(c) for c in last(list(topo.controller_ids))] + [
        topo.broker_service(b) for b in topo.broker_ids
    ]


@dataclass
class UpgradeStatus:
    cluster: str
    state_file: str
    started: bool
    from_version: str | None
    to_version: str | None
    done: list[str]
    current: str | None
    pending: list[str]
    finalized: str | None
    metadata_level: int | None  # what the cluster reports now (None: not asked or no answer)
    running: Owner | None = None  # the `upgrade` holding the lock now; `current` with none was interrupted


def status_of(state: UpgradeState | None, order: list[str], path: Path, cluster: str) -> UpgradeStatus:
    if state is None:
        return UpgradeStatus(cluster, str(path), False, None, None, [], None, [], None, None)
    pending = [s for s in order if s not in state.done]
    return UpgradeStatus(cluster, str(path), True, state.from_version, state.to_version, list(state.done),
                         state.current, pending, state.finalized, None)  # fmt: skip
