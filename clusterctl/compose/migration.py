"""What each phase of a ZooKeeper → KRaft migration renders: the compose context of every node, per phase.

The phases and their settings follow the Kafka 3.7 documentation, "ZooKeeper to KRaft Migration"
(docs/ops.html#kraft_zk_migration); each phase's section is named beside its settings below. A phase's
compose file holds the ZooKeeper ensemble, the dedicated controllers and the brokers, each configured as
that phase wants it; the last phase is the target KRaft spec itself, rendered as any kraft spec is.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from clusterctl.compose.context import RenderedService, build_context, controllers_context, summarize
from clusterctl.compose.environment import controller_env, kafka_env
from clusterctl.errors import UsageError
from clusterctl.spec.model import ClusterSpec, parse_spec
from clusterctl.spec.sections import KRaftSpec

MIGRATION_ENABLE = "KAFKA_ZOOKEEPER_METADATA_MIGRATION_ENABLE"  # zookeeper.metadata.migration.enable
IBP = "KAFKA_INTER_BROKER_PROTOCOL_VERSION"  # inter.broker.protocol.version


@dataclass(frozen=True)
class Phase:
    number: int
    name: str
    section: str  # the section of Kafka's migration guide this phase carries out
    action: str
    restarts: str  # controllers | brokers | none: what a rolling restart goes over
    settings: tuple[str, ...]  # what the phase sets or removes, in Kafka's property names


PHASES: tuple[Phase, ...] = (
    Phase(
        1,
        "controllers",
        "Provisioning the KRaft controller quorum",
        "start the controller quorum, storage formatted with ZooKeeper's /cluster/id",
        "controllers",
        (
            "process.roles=controller",
            "node.id=101.. (apart from every broker.id)",
            "controller.quorum.voters",
            "controller.listener.names=CONTROLLER",
            "listeners=CONTROLLER://",
            "zookeeper.metadata.migration.enable=true",
            "zookeeper.connect",
            "inter.broker.listener.name=INTERNAL (+ INTERNAL:PLAINTEXT in the protocol map)",
        ),
    ),
    Phase(
        2,
        "migration-mode",
        "Enter Migration Mode on the Brokers",
        "rolling restart of the ZooKeeper-mode brokers with migration enabled; the controller copies the metadata",
        "brokers",
        (
            "inter.broker.protocol.version=<major.minor>",
            "zookeeper.metadata.migration.enable=true",
            "controller.quorum.voters",
            "controller.listener.names=CONTROLLER",
            "listener.security.protocol.map += CONTROLLER:PLAINTEXT",
        ),
    ),
    Phase(
        3,
        "kraft-brokers",
        "Migrating brokers to KRaft",
        "rolling restart of the brokers as KRaft brokers (same id)",
        "brokers",
        (
            "process.roles=broker",
            "node.id=<broker.id> (broker.id removed)",
            "zookeeper.connect removed",
            "zookeeper.metadata.migration.enable removed",
            "inter.broker.protocol.version removed",
        ),
    ),
    Phase(
        4,
        "finalize",
        "Finalizing the migration",
        "rolling restart of the controllers without migration: the point of no return",
        "controllers",
        (
            "zookeeper.metadata.migration.enable removed",
            "zookeeper.connect removed",
            "inter.broker.listener.name removed",
        ),
    ),
    Phase(
        5,
        "remove-zookeeper",
        "Finalizing the migration (deprovision ZooKeeper)",
        "ZooKeeper removed from the rendered cluster; the spec rewritten as a kraft spec, the old one kept",
        "none",
        ("kafka.mode: kraft",),
    ),
)
PHASE_NAMES = tuple(p.name for p in PHASES)
FINALIZE = 4  # from here on there is no way back to ZooKeeper mode


def phase(ref: str | int) -> Phase:
    """A phase by number or name; an unknown one is a one-line usage error."""
    for p in PHASES:
        if str(ref) in (str(p.number), p.name):
            return p
    raise UsageError(f"no migration phase {ref!r}: the phases are {', '.join(f'{p.number} {p.name}' for p in PHASES)}")


def kraft_settings(controllers: int) -> KRaftSpec:
    """The target's controller quorum: `controllers` dedicated voters (1, 3 or 5; one line otherwise)."""
    try:
        return KRaftSpec(controllers=controllers)
    except ValidationError as exc:
        raise UsageError(str(exc.errors()[0].get("msg", "invalid")).removeprefix("Value error, ")) from None


def kraft_target(spec: ClusterSpec, kraft: KRaftSpec | None = None) -> ClusterSpec:
    """The same cluster (name, network, ports, brokers) in kraft mode with dedicated controllers."""
    data: dict[str, Any] = spec.model_dump(mode="json", exclude_unset=True)
    data.pop("zookeeper", None)
    kafka = dict(data.get("kafka") or {})
    kafka["mode"] = "kraft"
    if _resolved_offline(spec):
        # pinned to the Kafka the ZooKeeper-mode brokers run: unpinned, KRaft mode resolves to the newest built
        # image (a 4.x one has no migration support: its controllers never took the cluster over)
        kafka["version"] = spec.broker_image.rpartition(":")[2]
    defaults = dict(kafka.get("defaults") or {})
    defaults.pop("zookeeper_session_timeout_ms", None)  # its twin in kraft mode is kraft.broker_session_timeout_ms
    kafka["defaults"] = defaults
    data["kafka"] = kafka
    manager = dict(data.get("kafka_manager") or {})
    if manager.get("kind") == "cmak":  # CMAK reads ZooKeeper; kraft mode runs the console in its place
        manager.pop("kind")
    data["kafka_manager"] = manager
    if kraft is not None:
        data["kraft"] = kraft.model_dump(mode="json", exclude_defaults=True)
    return parse_spec(data, source=f"{spec.name} as kraft")


def _resolved_offline(spec: ClusterSpec) -> bool:
    """The brokers run the offline Kafka image the spec leaves unpinned (the newest built one)."""
    from clusterctl.spec import kafkadist

    return (
        spec.profile == "offline"
        and spec.kafka.engine == "kafka"
        and not spec.images.kafka
        and spec.kafka.version is None
        and spec.broker_image != kafkadist.offline_image(kafkadist.UNBUILT_TAG)
    )


def ibp(version: tuple[int, int]) -> str:
    """inter.broker.protocol.version as the guide sets it: the brokers' own major.minor ("3.7")."""
    return f"{version[0]}.{version[1]}"


def controller_phase_env(spec: ClusterSpec, target: ClusterSpec, node_id: int, number: int) -> dict[str, str]:
    """A dedicated controller: migrating (phases 1-3, with ZooKeeper's connect string) or finalized (4-)."""
    env = controller_env(target, node_id)
    if number < FINALIZE:
        env[MIGRATION_ENABLE] = "true"
        env["KAFKA_ZOOKEEPER_CONNECT"] = spec.topology.internal_zk_connect
        # the migrating controller sends LeaderAndIsr/UpdateMetadata to the ZooKeeper-mode brokers on their
        # inter-broker listener, named by its own inter.broker.listener.name (default PLAINTEXT, which ours lack)
        env["KAFKA_INTER_BROKER_LISTENER_NAME"] = "INTERNAL"
        env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"] += ",INTERNAL:PLAINTEXT"
    return env


def broker_phase_env(
    spec: ClusterSpec, target: ClusterSpec, broker_id: int, number: int, version: tuple[int, int]
) -> dict[str, str]:
    """A broker: ZooKeeper mode (phase 1), ZooKeeper mode migrating (2), KRaft broker (3-)."""
    if number >= 3:
        return kafka_env(target, broker_id)
    env = kafka_env(spec, broker_id)
    if number == 2:
        env[IBP] = ibp(version)
        env[MIGRATION_ENABLE] = "true"
        env["KAFKA_CONTROLLER_QUORUM_VOTERS"] = target.topology.controller_quorum_voters
        env["KAFKA_CONTROLLER_LISTENER_NAMES"] = "CONTROLLER"
        env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"] += ",CONTROLLER:PLAINTEXT"
    return env


def phase_context(spec: ClusterSpec, target: ClusterSpec, number: int, version: tuple[int, int]) -> dict[str, Any]:
    """The compose template's context for phase `number` (1-4) of migrating `spec` to `target`."""
    if not 1 <= number < len(PHASES):
        raise ValueError(f"phase {number} renders the target spec itself")
    context = build_context(spec)
    controllers = controllers_context(target)
    for c in controllers:
        c["env"] = controller_phase_env(spec, target, int(c["labels"]["io.clusterctl.id"]), number)
    controller_services = [str(c["service"]) for c in controllers]
    for b in context["brokers"]:
        b["env"] = broker_phase_env(spec, target, int(b["labels"]["io.clusterctl.id"]), number, version)
        b["depends_on"] = b["depends_on"] + controller_services
    context["controllers"] = controllers
    context["volumes"] = [v for svc in context["zookeepers"] + controllers + context["brokers"] for v, _ in svc["volumes"]]
    return context


def phase_services(spec: ClusterSpec, target: ClusterSpec) -> list[RenderedService]:
    """Every service a migration phase's compose file holds: the spec's, with the target's controllers."""
    own = summarize(spec)
    controllers = [s for s in summarize(target) if s.role == "controller"]
    return [s for s in own if s.role == "zookeeper"] + controllers + [s for s in own if s.role != "zookeeper"]
