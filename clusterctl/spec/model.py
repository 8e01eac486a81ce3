"""The cluster spec (clusterctl.yaml): one validated source of truth for everything else.

Every address, port, container name and count that a command needs is derived here; nothing
else re-derives them by hand.
"""

from __future__ import annotations

import ipaddress
from pathlib import Path

import yaml
from pydantic import ValidationError, field_validator, model_validator

from clusterctl.env import DEFAULT_SPEC_PATH
from clusterctl.errors import SpecError
from clusterctl.spec import validate, yamlfile
from clusterctl.spec.deploy import DeploySpec, check_deploy
from clusterctl.spec.kafkadist import OFFLINE_KAFKA_REPO
from clusterctl.spec.monitoring import MonitoringSpec, check_monitoring
from clusterctl.spec.profiles import (
    CONSOLE_IMAGE,
    PROFILES,
    ImageProfile,
    ManagerKind,
    apache_image,
    check_apache_version,
)
from clusterctl.spec.quorum import check_quorum
from clusterctl.spec.sections import (
    LAB_ZK_SESSION_TIMEOUT_MS,
    MIN_HOST_PORT,
    NAME_RE,
    SPARK_WORKER_PORT,
    SPARK_WORKER_UI_PORT,
    ImagesSpec,
    KafkaManagerSpec,
    KafkaSpec,
    KRaftSpec,
    NetworkSpec,
    Profile,
    PublishSpec,
    SparkSpec,
    StorageSpec,
    ZooKeeperSpec,
    _Model,
)
from clusterctl.spec.security import SecuritySpec, check_security
from clusterctl.spec.topology import Topology


class ClusterSpec(_Model):
    name: str = "kafka-lab"
    profile: Profile = "default"
    network: NetworkSpec = NetworkSpec()
    zookeeper: ZooKeeperSpec = ZooKeeperSpec()
    kafka: KafkaSpec = KafkaSpec()
    kraft: KRaftSpec = KRaftSpec()
    kafka_manager: KafkaManagerSpec = KafkaManagerSpec()
    images: ImagesSpec = ImagesSpec()
    publish: PublishSpec = PublishSpec()
    spark: SparkSpec = SparkSpec()
    storage: StorageSpec = StorageSpec()
    deploy: DeploySpec = DeploySpec()
    security: SecuritySpec = SecuritySpec()
    monitoring: MonitoringSpec = MonitoringSpec()

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME_RE.match(v):
            raise ValueError(
                f"name {v!r} must be 1-40 chars of lowercase letters, digits, '-' or '_', starting alphanumeric"
            )
        return v

    @model_validator(mode="after")
    def _cross_checks(self) -> ClusterSpec:
        self._check_elr()
        self._check_mode()
        d = self.kafka.defaults
        n = self.kafka.brokers
        if d.replication_factor > n:
            raise ValueError(f"kafka.defaults.replication_factor={d.replication_factor} exceeds kafka.brokers={n}")
        if d.min_insync_replicas > d.replication_factor:
            raise ValueError(
                f"kafka.defaults.min_insync_replicas={d.min_insync_replicas} exceeds "
                f"replication_factor={d.replication_factor}: every acks=all write would fail"
            )
        if d.replication_factor > 1 and d.min_insync_replicas >= d.replication_factor:
            raise ValueError(
                f"kafka.defaults.min_insync_replicas={d.min_insync_replicas} equals "
                f"replication_factor={d.replication_factor}: losing one broker stops acks=all writes; "
                f"use at most {d.replication_factor - 1}"
            )
        if self.kafka.engine == "tansu" and (n != 1 or d.replication_factor != 1):
            raise ValueError("kafka.engine=tansu has no replication: set kafka.brokers=1 and replication_factor=1")
        cmak = self.kafka_manager.enabled and self.manager_kind == "cmak"
        if self.kafka.engine != "kafka" and cmak:
            raise ValueError(
                "kafka_manager.kind=cmak needs kafka.engine=kafka (CMAK reads broker registrations in ZooKeeper); "
                "use kind console"
            )
        if cmak and self.image_profile.kafka_manager is None and not self.images.kafka_manager:
            raise ValueError(
                f"profile {self.profile} has no kafka-manager (CMAK) image: "
                "use kafka_manager.kind=console, set kafka_manager.enabled=false or images.kafka_manager"
            )
        irf = self.internal_topics_rf
        if irf > n:
            raise ValueError(f"kafka.defaults.internal_topics_replication_factor={irf} exceeds kafka.brokers={n}")
        if self.internal_topics_min_isr > irf:
            raise ValueError(
                f"kafka.defaults.internal_topics_min_isr={self.internal_topics_min_isr} exceeds the internal topics' "
                f"replication factor {irf}"
            )
        tick = self.zookeeper.tick_time_ms
        if not 2 * tick <= d.zookeeper_session_timeout_ms <= 20 * tick:
            raise ValueError(
                f"kafka.defaults.zookeeper_session_timeout_ms={d.zookeeper_session_timeout_ms} is outside what "
                f"ZooKeeper grants with tick_time_ms={tick} ({2 * tick}-{20 * tick}): it would be clamped"
            )
        if d.min_insync_replicas > irf:
            raise ValueError(
                f"kafka.defaults.min_insync_replicas={d.min_insync_replicas} exceeds the internal topics' replication "
                f"factor {irf}: offset commits to __consumer_offsets would fail"
            )
        self._check_ips()
        self._check_ports()
        check_deploy(self)
        check_security(self)
        check_monitoring(self)
        return self

    def _check_mode(self) -> None:
        from clusterctl.spec.capabilities import (
            KRAFT_PRODUCTION_FROM,
            kraft_ready,
            no_zookeeper_mode,
            zookeeper_capable,
        )
        from clusterctl.spec.profiles import kafka_version_of

        k = self.kafka
        if k.version is not None and (
            self.profile not in ("offline", "apache") or k.engine != "kafka" or self.images.kafka
        ):
            raise ValueError(
                "kafka.version picks the image's tag (clusterctl/kafka:<version> offline, apache/kafka:<version> with "
                "profile apache): it needs one of those profiles, engine kafka and no images.kafka"
            )
        if k.version is not None and self.profile == "apache":
            check_apache_version(k.version)
        if k.mode == "zookeeper":
            if self.image_profile.broker_flavor == "apache":
                raise ValueError(
                    no_zookeeper_mode(
                        f"profile apache runs Apache's {self._declared_kafka_image()} in KRaft mode",
                        "set kafka.mode: kraft (`clusterctl init --profile apache` does)",
                    )
                )
            if self.kraft != KRaftSpec():
                raise ValueError("kraft settings need kafka.mode: kraft (this spec runs ZooKeeper mode)")
            image = self._declared_kafka_image() if k.engine == "kafka" else None
            version = kafka_version_of(image) if image else None
            if version is not None and not zookeeper_capable(version):
                raise ValueError(
                    no_zookeeper_mode(
                        f"image {image} is Kafka {version[0]}.{version[1]}",
                        "set kafka.mode: kraft or use a Kafka 3.x image",
                    )
                )
            return
        if k.engine != "kafka":
            raise ValueError(f"kafka.mode=kraft needs kafka.engine=kafka (engine {k.engine} has no controller quorum)")
        if self.zookeeper != ZooKeeperSpec():
            raise ValueError("kafka.mode=kraft has no ZooKeeper: remove the zookeeper settings")
        if self.kafka.defaults.zookeeper_session_timeout_ms != LAB_ZK_SESSION_TIMEOUT_MS:
            raise ValueError(
                "kafka.defaults.zookeeper_session_timeout_ms is a ZooKeeper-mode setting; in kraft mode "
                "kraft.broker_session_timeout_ms decides when a silent broker is fenced"
            )
        if self.kafka_manager.enabled and self.manager_kind == "cmak":
            raise ValueError(
                "kafka_manager.kind=cmak reads ZooKeeper, which kraft mode has none of: "
                "use kind console (the default in kraft mode) or enabled: false"
            )
        if self.image_profile.broker_flavor == "wurstmeister":
            raise ValueError(
                f"profile {self.profile}'s broker image has no KRaft support: use profile default, offline or apache"
            )
        image = self._declared_kafka_image()
        version = kafka_version_of(image) if image else None
        if version is not None and not kraft_ready(version):
            raise ValueError(
                f"image {image} is Kafka {version[0]}.{version[1]}; KRaft needs Kafka "
                f"{KRAFT_PRODUCTION_FROM[0]}.{KRAFT_PRODUCTION_FROM[1]}+"
            )
        kr = self.kraft
        if kr.combined and kr.controllers > k.brokers:
            raise ValueError(
                f"kraft.combined with kraft.controllers={kr.controllers} needs at least that many brokers "
                f"(kafka.brokers={k.brokers})"
            )
        if kr.combined and kr.ips is not None:
            raise ValueError("kraft.ips is for dedicated controllers; combined controllers are brokers (kafka.ips)")
        if kr.ips is not None and len(kr.ips) != kr.controllers:
            raise ValueError(f"kraft.ips has {len(kr.ips)} entries for {kr.controllers} controllers")
        if kr.broker_heartbeat_interval_ms >= kr.broker_session_timeout_ms:
            raise ValueError(
                f"kraft.broker_heartbeat_interval_ms={kr.broker_heartbeat_interval_ms} must be below "
                f"broker_session_timeout_ms={kr.broker_session_timeout_ms}"
            )
        check_quorum(self, image)

    def _check_elr(self) -> None:
        """kraft.eligible_leader_replicas_version: KRaft on a Kafka with KIP-966 (4.0+), when the image says which."""
        from clusterctl.spec.capabilities import NO, supports
        from clusterctl.spec.profiles import kafka_version_of

        if self.kraft.eligible_leader_replicas_version is None:
            return
        what = "kraft.eligible_leader_replicas_version (ELR, KIP-966)"
        if self.kafka.mode != "kraft":
            raise ValueError(f"{what} needs kafka.mode: kraft on Kafka 4.0+; this spec runs ZooKeeper mode")
        image = self._declared_kafka_image()
        version = kafka_version_of(image) if image else None
        if version is not None and supports(version, "elr") == NO:
            raise ValueError(
                f"{what} needs Kafka 4.0+; image {image} is Kafka {version[0]}.{version[1]}: remove the setting "
                "or use a 4.x image"
            )

    def _declared_kafka_image(self) -> str | None:
        """The Kafka image as the spec or a published profile names it; the offline tag comes from the
        distribution at use (kafkadist checks its version there), so validation does not resolve it."""
        if self.images.kafka:
            return self.images.kafka
        if self.profile == "offline":
            from clusterctl.spec import kafkadist

            return kafkadist.offline_image(self.kafka.version) if self.kafka.version else None
        if self.profile == "apache" and self.kafka.version:
            return apache_image(self.kafka.version)
        return self.image_profile.kafka

    def _check_ips(self) -> None:
        net = self.network.network
        gw = self.network.gateway_ip
        try:
            gw_ip = ipaddress.IPv4Address(gw)
        except ValueError:
            raise ValueError(f"network.gateway {gw!r} is not an IPv4 address") from None
        if gw_ip not in net:
            raise ValueError(f"network.gateway {gw} is outside network.subnet {net}")
        if gw_ip in (net.network_address, net.broadcast_address):
            raise ValueError(f"network.gateway {gw} is the network or broadcast address of {net}")
        if self.zookeeper.ips is not None and len(self.zookeeper.ips) != self.zookeeper.nodes:
            raise ValueError(f"zookeeper.ips has {len(self.zookeeper.ips)} entries for {self.zookeeper.nodes} nodes")
        if self.kafka.ips is not None and len(self.kafka.ips) != self.kafka.brokers:
            raise ValueError(f"kafka.ips has {len(self.kafka.ips)} entries for {self.kafka.brokers} brokers")
        sp = self.spark
        if sp.enabled and sp.worker_ips is not None and len(sp.worker_ips) != sp.workers:
            raise ValueError(f"spark.worker_ips has {len(sp.worker_ips)} entries for {sp.workers} workers")
        seen: dict[str, str] = {gw: "network.gateway"}
        for who, ip in self.topology.static_ips().items():
            try:
                addr = ipaddress.IPv4Address(ip)
            except ValueError:
                raise ValueError(f"{who} ip {ip!r} is not an IPv4 address") from None
            if addr not in net or addr in (net.network_address, net.broadcast_address):
                size = "/26" if who.startswith(("spark", "kraft")) else "/27"
                default = f" (default layout needs a {size} or larger, or set explicit ips)" if addr not in net else ""
                raise ValueError(f"{who} ip {ip} is not a usable host address in network.subnet {net}{default}")
            if ip in seen:
                raise ValueError(f"{who} ip {ip} is already used by {seen[ip]}")
            seen[ip] = who

    def _check_ports(self) -> None:
        seen: dict[int, str] = {}
        for who, port in self.topology.host_ports().items():
            if not MIN_HOST_PORT <= port <= 65535:
                raise ValueError(f"{who} host port {port} is outside {MIN_HOST_PORT}-65535")
            if port in seen:
                raise ValueError(f"{who} host port {port} clashes with {seen[port]}")
            seen[port] = who
        k = self.kafka
        internal = {"kafka.internal_port": k.internal_port}
        if k.jmx_port is not None:
            internal["kafka.jmx_port"] = k.jmx_port
        if self.kraft_mode:
            internal["kraft.controller_port"] = self.kraft.controller_port
        for who, port in internal.items():
            if not MIN_HOST_PORT <= port <= 65535:
                raise ValueError(f"{who} {port} is outside {MIN_HOST_PORT}-65535")
        # inside a broker container the host listener port, internal port and JMX port must differ
        topo = self.topology
        broker_ports = {f"kafka broker {i} host listener": topo.broker_host_port(i) for i in topo.broker_ids}
        for who, port in internal.items():
            for bwho, bport in broker_ports.items():
                if port == bport:
                    raise ValueError(f"{who} {port} clashes with {bwho}")
        if k.jmx_port is not None and k.jmx_port == k.internal_port:
            raise ValueError(f"kafka.jmx_port {k.jmx_port} clashes with kafka.internal_port")
        if self.kraft_mode and self.kraft.controller_port in (k.internal_port, k.jmx_port):
            raise ValueError(
                f"kraft.controller_port {self.kraft.controller_port} clashes with kafka.internal_port or jmx_port"
            )
        if self.spark.enabled:
            # the workers relay 127.0.0.1:<broker host port> to the brokers: those ports must be free in them
            for i in topo.broker_ids:
                if topo.broker_host_port(i) in (SPARK_WORKER_PORT, SPARK_WORKER_UI_PORT):
                    raise ValueError(
                        f"kafka broker {i} host port {topo.broker_host_port(i)} clashes with a spark worker port "
                        f"({SPARK_WORKER_PORT}, {SPARK_WORKER_UI_PORT}): workers relay it to the broker"
                    )

    # ---- derived facts (the only place addresses and names come from) ----

    @property
    def image_profile(self) -> ImageProfile:
        return PROFILES[self.profile]

    @property
    def zookeeper_image(self) -> str:
        return self.images.zookeeper or self.image_profile.zookeeper

    @property
    def broker_image(self) -> str:
        """The image of every broker: Kafka, or tansu for engine=tansu."""
        if self.images.kafka:
            return self.images.kafka
        if self.kafka.engine == "tansu":
            return self.image_profile.tansu
        if self.image_profile.kafka == OFFLINE_KAFKA_REPO:  # tagged with the built Kafka's version
            from clusterctl.spec import kafkadist

            if self.kafka.version:
                return kafkadist.offline_image(self.kafka.version)
            return kafkadist.resolve_offline_image(kraft=self.kraft_mode)
        if self.profile == "apache" and self.kafka.version:
            return apache_image(self.kafka.version)
        return self.image_profile.kafka

    @property
    def manager_kind(self) -> ManagerKind:
        """What runs as the kafka-manager service: CMAK or clusterctl's console.

        KRaft mode defaults to the console in every profile: CMAK reads ZooKeeper, the console's Kafka pages
        need none.
        """
        return self.kafka_manager.kind or ("console" if self.kraft_mode else self.image_profile.manager_kind)

    @property
    def kafka_manager_image(self) -> str | None:
        if self.manager_kind == "console":
            return self.images.kafka_manager or CONSOLE_IMAGE
        return self.images.kafka_manager or self.image_profile.kafka_manager

    @property
    def kraft_mode(self) -> bool:
        return self.kafka.mode == "kraft"

    @property
    def internal_topics_rf(self) -> int:
        """RF for __consumer_offsets / __transaction_state: 3 where possible, never above the broker count."""
        return self.kafka.defaults.internal_topics_replication_factor or min(3, self.kafka.brokers)

    @property
    def internal_topics_min_isr(self) -> int:
        return self.kafka.defaults.internal_topics_min_isr or max(1, self.internal_topics_rf - 1)

    @property
    def kafka_heap_opts(self) -> str:
        heap = self.kafka.defaults.heap
        return f"-Xms{heap} -Xmx{heap}"

    @property
    def spark_image(self) -> str:
        return self.images.spark or self.image_profile.spark

    @property
    def swarm(self) -> bool:
        return self.deploy.target == "swarm"

    @property
    def topology(self) -> Topology:
        """Names, addresses, ports and listeners derived from this spec."""
        return Topology(self)


def _format_validation_error(exc: ValidationError) -> str:
    err = exc.errors()[0]
    loc = ".".join(str(p) for p in err.get("loc", ()) if p != "__root__")
    msg = str(err.get("msg", "invalid value"))
    msg = msg.removeprefix("Value error, ")
    if err.get("type") == "extra_forbidden":
        return f"unknown field {loc!r} in spec"
    if loc and not msg.startswith(loc.split(".")[0]):
        return f"{loc}: {msg}"
    return msg


def parse_spec(data: object, source: str = "spec") -> ClusterSpec:
    """Validate a parsed YAML document; any problem becomes one SpecError line."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise SpecError(f"{source}: the spec must be a YAML mapping, got {type(data).__name__}")
    try:
        return ClusterSpec.model_validate(data)
    except ValidationError as exc:
        raise SpecError(_one_line(f"{source}: {_format_validation_error(exc)}")) from None
    except (TypeError, ValueError, ArithmeticError) as exc:  # defensive: odd YAML types inside validators
        raise SpecError(_one_line(f"{source}: {exc}")) from None


def _one_line(message: str) -> str:
    return " ".join(message.split())


def load_spec(path: Path | str = DEFAULT_SPEC_PATH) -> ClusterSpec:
    path = validate.input_file(Path(path), "spec file", hint="run `clusterctl init` to write one")
    try:
        data = yamlfile.load_file(path)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise SpecError(f"{path}: not valid YAML{where}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"{path}: cannot read ({exc})") from None
    if data is None:  # an empty file is a mistake, not "all defaults" (`clusterctl init` writes a full spec)
        raise SpecError(f"{path}: the spec file is empty", hint="run `clusterctl init` to write one")
    return parse_spec(data, source=str(path))
