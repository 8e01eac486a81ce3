"""The cluster spec (clusterctl.yaml): one validated source of truth for everything else.

Every address, port, container name and count that a command needs is derived here; nothing
else re-derives them by hand.
"""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import ClassVar, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from clusterctl.env import DEFAULT_SPEC_PATH
from clusterctl.errors import SpecError
from clusterctl.kafkadist import OFFLINE_KAFKA_REPO
from clusterctl.profiles import CONSOLE_IMAGE, PROFILES, ImageProfile, ManagerKind

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")
NETWORK_NAME_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$")
IMAGE_RE = r"^[a-z0-9][a-z0-9._/:@-]{0,254}$"

# Host ports below this need privileges and clash with system services.
MIN_HOST_PORT = 1024

Profile = Literal["default", "wurstmeister", "offline"]
BrokerEngine = Literal["kafka", "tansu"]
KafkaMode = Literal["zookeeper", "kraft"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NetworkSpec(_Model):
    """A user-defined bridge network with static IPs (RFC1918 only)."""

    name: str | None = Field(default=None, description="docker network name (default: <cluster>-net)")
    subnet: str = "10.77.0.0/24"
    gateway: str | None = Field(default=None, description="default: first host address of the subnet")

    @field_validator("name")
    @classmethod
    def _network_name(cls, v: str | None) -> str | None:
        if v is not None and not NETWORK_NAME_RE.match(v):
            raise ValueError(f"network.name {v!r} must be 1-63 chars of letters, digits, '_', '.' or '-'")
        return v

    @field_validator("subnet")
    @classmethod
    def _private_subnet(cls, v: str) -> str:
        try:
            net = ipaddress.ip_network(v, strict=True)
        except ValueError as exc:
            raise ValueError(f"network.subnet {v!r} is not a valid network ({exc})") from None
        if net.version != 4:
            raise ValueError(f"network.subnet {v!r} must be IPv4")
        if not any(net.subnet_of(p) for p in _RFC1918):
            raise ValueError(
                f"network.subnet {v} is not private address space; use a subnet inside "
                "10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16"
            )
        if net.num_addresses < 16:
            raise ValueError(f"network.subnet {v} is too small (need at least a /28)")
        return v

    @property
    def network(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(self.subnet)

    @property
    def gateway_ip(self) -> str:
        return self.gateway or str(self.network.network_address + 1)


_RFC1918 = [ipaddress.IPv4Network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")]


class ZooKeeperSpec(_Model):
    nodes: int = Field(default=3, ge=1, le=9, description="ensemble size; use an odd number")
    client_port: int = Field(default=2181, description="first host port; node i publishes client_port+i-1")
    ips: list[str] | None = Field(default=None, description="static IPs; default .11, .12, ...")
    tick_time_ms: int = Field(default=2000, ge=100, le=60_000)
    init_limit: int = Field(default=10, ge=1, description="ticks a follower may take to connect and sync")
    sync_limit: int = Field(default=5, ge=1, description="ticks a follower may lag behind the leader")

    @field_validator("nodes")
    @classmethod
    def _odd(cls, v: int) -> int:
        if v % 2 == 0:
            raise ValueError(f"zookeeper.nodes={v}: an even ensemble tolerates no more failures than {v - 1}")
        return v


LAB_ZK_SESSION_TIMEOUT_MS = 6000  # Kafka's default: 18000
LAB_REPLICA_LAG_TIME_MAX_MS = 10000  # Kafka's default: 30000


class BrokerDefaults(_Model):
    """Cluster-wide broker settings; internal topics are sized to the broker count."""

    replication_factor: int = Field(default=3, ge=1)
    min_insync_replicas: int = Field(default=2, ge=1)
    partitions: int = Field(default=3, ge=1)
    retention_hours: int = Field(default=168, ge=1)
    retention_bytes: int = Field(default=1_073_741_824, description="per partition; -1 = unlimited")
    segment_bytes: int = Field(default=268_435_456, ge=1_048_576)
    group_initial_rebalance_delay_ms: int = Field(default=0, ge=0)
    auto_create_topics: bool = False
    unclean_leader_election: bool = False
    heap: str = Field(default="512m", pattern=r"^[1-9]\d{0,5}[mMgG]$")
    # Failover timing (docs/failover-timing.md). Kafka's defaults are 18000 and 30000: a SIGKILLed broker stays
    # registered and in every ISR until its ZooKeeper session expires, so acks=all writes on every partition it
    # replicates wait that long. Lab defaults are sized from measurements on this kind of machine.
    zookeeper_session_timeout_ms: int = Field(
        default=LAB_ZK_SESSION_TIMEOUT_MS,
        ge=1000,
        le=600_000,
        description="zookeeper.session.timeout.ms: how long a dead broker stays registered (new leader, ISR shrink)",
    )
    replica_lag_time_max_ms: int = Field(
        default=LAB_REPLICA_LAG_TIME_MAX_MS,
        ge=1000,
        le=600_000,
        description="replica.lag.time.max.ms: how long a leader keeps a silent follower in the ISR",
    )
    internal_topics_replication_factor: int | None = Field(
        default=None, ge=1, description="__consumer_offsets/__transaction_state RF (default: min(3, brokers))"
    )
    internal_topics_min_isr: int | None = Field(
        default=None, ge=1, description="transaction.state.log.min.isr (default: internal RF - 1, at least 1)"
    )


class KafkaSpec(_Model):
    brokers: int = Field(default=3, ge=1, le=9)
    engine: BrokerEngine = Field(
        default="kafka",
        description="kafka (Apache Kafka, ZK mode) or tansu (Kafka-protocol only, no replication)",
    )
    mode: KafkaMode = Field(
        default="zookeeper", description="zookeeper (a ZK ensemble holds the metadata) or kraft (a controller quorum)"
    )
    host_port: int = Field(default=9092, description="first host port; broker i listens/advertises host_port+i-1")
    internal_port: int = Field(default=19092, description="listener on the cluster network")
    jmx_port: int | None = Field(default=9999, description="JMX port of the broker process only (None = off)")
    ips: list[str] | None = Field(default=None, description="static IPs; default .21, .22, ...")
    stop_grace_seconds: int = Field(
        default=90, ge=60, le=3600, description="time for a controlled shutdown before SIGKILL"
    )
    defaults: BrokerDefaults = BrokerDefaults()


class KRaftSpec(_Model):
    """kafka.mode=kraft: the controller quorum (no ZooKeeper)."""

    controllers: int = Field(default=3, ge=1, description="quorum voters: 1, 3 or 5")
    combined: bool = Field(
        default=False, description="false: dedicated controllerN containers; true: brokers 1..N are voters too"
    )
    controller_port: int = Field(default=19093, description="controller listener, on the cluster network only")
    ips: list[str] | None = Field(default=None, description="dedicated controllers' static IPs; default .51, .52, ...")
    broker_session_timeout_ms: int = Field(
        default=9000, ge=1000, le=600_000, description="a broker missing heartbeats this long is fenced"
    )
    broker_heartbeat_interval_ms: int = Field(default=2000, ge=100, le=60_000)

    @field_validator("controllers")
    @classmethod
    def _quorum_size(cls, v: int) -> int:
        if v % 2 == 0:
            raise ValueError(
                f"kraft.controllers={v}: an even quorum tolerates no more failures than {v - 1}; use 1, 3 or 5"
            )
        if v > 5:
            raise ValueError(
                f"kraft.controllers={v}: more than 5 voters only slows every metadata commit; use 1, 3 or 5"
            )
        return v


KRAFT_NODE_ID_BASE = 100  # dedicated controller i has node.id 100+i; brokers keep ids 1..9


class KafkaManagerSpec(_Model):
    enabled: bool = True
    kind: ManagerKind | None = Field(
        default=None,
        description="cmak (a published CMAK image) or console (clusterctl's own, `clusterctl images build console`); "
        "default: console in the offline profile, cmak elsewhere",
    )
    port: int = Field(default=9000, description="host port of the web UI")
    ip: str | None = Field(default=None, description="static IP; default .30")


SPARK_MASTER_PORT = 7077  # inside the spark-master container
SPARK_UI_PORT = 8080  # the master's web UI inside its container
SPARK_WORKER_PORT = 7078  # inside each spark-worker container
SPARK_WORKER_UI_PORT = 8081  # the worker's web UI inside its container (not published)


class SparkSpec(_Model):
    """An optional Spark standalone master and workers on the cluster network (off by default)."""

    enabled: bool = False
    workers: int = Field(default=1, ge=1, le=8, description="spark-worker1..N")
    worker_cores: int = Field(default=2, ge=1, le=64, description="cores each worker offers to executors")
    worker_memory: str = Field(
        default="2g", pattern=r"^[1-9]\d{0,5}[mMgG]$", description="memory each worker offers to executors"
    )
    master_port: int = Field(default=7077, description="host port of the master (spark://host:port)")
    ui_port: int = Field(default=8080, description="host port of the master's web UI")
    master_ip: str | None = Field(default=None, description="static IP; default .40")
    worker_ips: list[str] | None = Field(default=None, description="static IPs; default .41, .42, ...")
    shared_dir: str | None = Field(
        default=None,
        description="host directory mounted at the same path in every worker: checkpoints executors and "
        "the driver share (default /tmp/clusterctl-spark/<name>)",
    )

    @field_validator("shared_dir")
    @classmethod
    def _abs_dir(cls, v: str | None) -> str | None:
        if v is not None and (not v.startswith("/") or not re.match(r"^/[A-Za-z0-9._/-]*$", v) or v == "/"):
            raise ValueError(f"spark.shared_dir {v!r} must be an absolute path of letters, digits, '.', '_', '-', '/'")
        return v


class ImagesSpec(_Model):
    """Overrides of the profile's images (None = the profile's choice)."""

    zookeeper: str | None = Field(default=None, pattern=IMAGE_RE)
    kafka: str | None = Field(default=None, pattern=IMAGE_RE, description="the broker image (kafka or tansu engine)")
    kafka_manager: str | None = Field(default=None, pattern=IMAGE_RE)
    spark: str | None = Field(default=None, pattern=IMAGE_RE, description="spark master and worker image")


class PublishSpec(_Model):
    bind_address: str = Field(default="127.0.0.1", description="host address published ports bind to")

    @field_validator("bind_address")
    @classmethod
    def _ip(cls, v: str) -> str:
        try:
            ipaddress.IPv4Address(v)
        except ValueError:
            raise ValueError(f"publish.bind_address {v!r} is not an IPv4 address") from None
        return v


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

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME_RE.match(v):
            raise ValueError(
                f"name {v!r} must be 1-40 chars of lowercase letters, digits, '-' or '_', starting alphanumeric"
            )
        return v

    @model_validator(mode="before")
    @classmethod
    def _kraft_has_no_cmak(cls, data: object) -> object:
        """CMAK reads ZooKeeper: in kraft mode kafka_manager defaults to disabled."""
        if isinstance(data, dict):
            kafka = data.get("kafka")
            if isinstance(kafka, dict) and kafka.get("mode") == "kraft" and "kafka_manager" not in data:
                data = {**data, "kafka_manager": {"enabled": False}}
        return data

    @model_validator(mode="after")
    def _cross_checks(self) -> ClusterSpec:
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
        return self

    def _check_mode(self) -> None:
        from clusterctl.profiles import kafka_version_of

        k = self.kafka
        if k.mode == "zookeeper":
            if self.kraft != KRaftSpec():
                raise ValueError("kraft settings need kafka.mode: kraft (this spec runs ZooKeeper mode)")
            image = self._declared_kafka_image() if k.engine == "kafka" else None
            version = kafka_version_of(image) if image else None
            if version is not None and version[0] >= 4:
                raise ValueError(
                    f"image {image} is Kafka {version[0]}.{version[1]}, which has no ZooKeeper mode: "
                    "set kafka.mode: kraft or use a Kafka 3.x image"
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
        if self.kafka_manager.enabled:
            raise ValueError(
                "kafka_manager (CMAK) reads ZooKeeper, which kraft mode has none of: set it enabled: false"
            )
        if self.image_profile.broker_flavor != "cp":
            raise ValueError(
                f"profile {self.profile}'s broker image has no KRaft support: use profile default or offline"
            )
        image = self._declared_kafka_image()
        version = kafka_version_of(image) if image else None
        if version is not None and version < (3, 3):
            raise ValueError(f"image {image} is Kafka {version[0]}.{version[1]}; KRaft needs Kafka 3.3+")
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

    def _declared_kafka_image(self) -> str | None:
        """The Kafka image as the spec or a published profile names it; the offline tag comes from the
        distribution at use (kafkadist checks its version there), so validation does not resolve it."""
        if self.images.kafka:
            return self.images.kafka
        return None if self.profile == "offline" else self.image_profile.kafka

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
        for who, ip in self.static_ips().items():
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
        for who, port in self.host_ports().items():
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
        broker_ports = {f"kafka broker {i} host listener": self.broker_host_port(i) for i in self.broker_ids}
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
            for i in self.broker_ids:
                if self.broker_host_port(i) in (SPARK_WORKER_PORT, SPARK_WORKER_UI_PORT):
                    raise ValueError(
                        f"kafka broker {i} host port {self.broker_host_port(i)} clashes with a spark worker port "
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
        if self.image_profile.kafka == OFFLINE_KAFKA_REPO:  # tagged with the built distribution's version
            from clusterctl import kafkadist

            return kafkadist.resolve_offline_image()
        return self.image_profile.kafka

    @property
    def manager_kind(self) -> ManagerKind:
        """What runs as the kafka-manager service: CMAK or clusterctl's console."""
        return self.kafka_manager.kind or self.image_profile.manager_kind

    @property
    def kafka_manager_image(self) -> str | None:
        if self.manager_kind == "console":
            return self.images.kafka_manager or CONSOLE_IMAGE
        return self.images.kafka_manager or self.image_profile.kafka_manager

    @property
    def project(self) -> str:
        """The compose project name."""
        return self.name

    @property
    def network_name(self) -> str:
        return self.network.name or f"{self.name}-net"

    @property
    def kraft_mode(self) -> bool:
        return self.kafka.mode == "kraft"

    @property
    def zk_ids(self) -> list[int]:
        """ZooKeeper node ids; none in kraft mode."""
        return [] if self.kraft_mode else list(range(1, self.zookeeper.nodes + 1))

    @property
    def controller_ids(self) -> list[int]:
        """node.id of every quorum voter (kraft mode): 101.. when dedicated, brokers 1..N when combined."""
        if not self.kraft_mode:
            return []
        n = self.kraft.controllers
        return list(range(1, n + 1)) if self.kraft.combined else [KRAFT_NODE_ID_BASE + i for i in range(1, n + 1)]

    @property
    def dedicated_controller_ids(self) -> list[int]:
        """Voters that run in their own controllerN container (kraft mode, not combined)."""
        return [] if self.kraft.combined else self.controller_ids

    def controller_service(self, node_id: int) -> str:
        """The service a voter runs in: controllerN (dedicated) or kafkaN (combined)."""
        if node_id in self.broker_ids and self.kraft.combined:
            return self.broker_service(node_id)
        return f"controller{node_id - KRAFT_NODE_ID_BASE}"

    def controller_container(self, node_id: int) -> str:
        return self.container_name(self.controller_service(node_id))

    def controller_ip(self, node_id: int) -> str:
        if node_id in self.broker_ids and self.kraft.combined:
            return self.broker_ip(node_id)
        i = node_id - KRAFT_NODE_ID_BASE
        if self.kraft.ips is not None:
            return self.kraft.ips[i - 1]
        return str(self.network.network.network_address + 50 + i)

    @property
    def controller_quorum_voters(self) -> str:
        """controller.quorum.voters: id@service:port of every voter."""
        port = self.kraft.controller_port
        return ",".join(f"{i}@{self.controller_service(i)}:{port}" for i in self.controller_ids)

    @property
    def broker_ids(self) -> list[int]:
        return list(range(1, self.kafka.brokers + 1))

    def zk_service(self, zk_id: int) -> str:
        return f"zk{zk_id}"

    def broker_service(self, broker_id: int) -> str:
        return f"kafka{broker_id}"

    manager_service: ClassVar[str] = "kafka-manager"
    spark_master_service: ClassVar[str] = "spark-master"

    def spark_worker_service(self, worker_id: int) -> str:
        return f"spark-worker{worker_id}"

    @property
    def spark_worker_ids(self) -> list[int]:
        return list(range(1, self.spark.workers + 1)) if self.spark.enabled else []

    def container_name(self, service: str) -> str:
        return f"{self.name}-{service}"

    def zk_container(self, zk_id: int) -> str:
        return self.container_name(self.zk_service(zk_id))

    def broker_container(self, broker_id: int) -> str:
        return self.container_name(self.broker_service(broker_id))

    def zk_ip(self, zk_id: int) -> str:
        if self.zookeeper.ips is not None:
            return self.zookeeper.ips[zk_id - 1]
        return str(self.network.network.network_address + 10 + zk_id)

    def broker_ip(self, broker_id: int) -> str:
        if self.kafka.ips is not None:
            return self.kafka.ips[broker_id - 1]
        return str(self.network.network.network_address + 20 + broker_id)

    @property
    def manager_ip(self) -> str:
        return self.kafka_manager.ip or str(self.network.network.network_address + 30)

    @property
    def spark_master_ip(self) -> str:
        return self.spark.master_ip or str(self.network.network.network_address + 40)

    def spark_worker_ip(self, worker_id: int) -> str:
        if self.spark.worker_ips is not None:
            return self.spark.worker_ips[worker_id - 1]
        return str(self.network.network.network_address + 40 + worker_id)

    def static_ips(self) -> dict[str, str]:
        ips = {f"zookeeper node {i}": self.zk_ip(i) for i in self.zk_ids}
        ips.update({f"kafka broker {i}": self.broker_ip(i) for i in self.broker_ids})
        ips.update({f"kraft controller {i}": self.controller_ip(i) for i in self.dedicated_controller_ids})
        if self.kafka_manager.enabled:
            ips["kafka_manager"] = self.manager_ip
        if self.spark.enabled:
            ips["spark master"] = self.spark_master_ip
            ips.update({f"spark worker {i}": self.spark_worker_ip(i) for i in self.spark_worker_ids})
        return ips

    def zk_host_port(self, zk_id: int) -> int:
        return self.zookeeper.client_port + zk_id - 1

    def broker_host_port(self, broker_id: int) -> int:
        return self.kafka.host_port + broker_id - 1

    def host_ports(self) -> dict[str, int]:
        ports = {f"zookeeper node {i}": self.zk_host_port(i) for i in self.zk_ids}
        ports.update({f"kafka broker {i}": self.broker_host_port(i) for i in self.broker_ids})
        if self.kafka_manager.enabled:
            ports["kafka_manager"] = self.kafka_manager.port
        if self.spark.enabled:
            ports["spark.master_port"] = self.spark.master_port
            ports["spark.ui_port"] = self.spark.ui_port
        return ports

    @property
    def host(self) -> str:
        """Where clients on the host reach published ports."""
        b = self.publish.bind_address
        return "127.0.0.1" if b == "0.0.0.0" else b

    @property
    def bootstrap_servers(self) -> str:
        """Host-side bootstrap list (the advertised host listener of every broker)."""
        return ",".join(f"{self.host}:{self.broker_host_port(i)}" for i in self.broker_ids)

    @property
    def internal_bootstrap_servers(self) -> str:
        """Bootstrap list for clients on the cluster network."""
        return ",".join(f"{self.broker_service(i)}:{self.kafka.internal_port}" for i in self.broker_ids)

    @property
    def zk_connect(self) -> str:
        """Host-side ZooKeeper connect string."""
        return ",".join(f"{self.host}:{self.zk_host_port(i)}" for i in self.zk_ids)

    def zk_host_address(self, zk_id: int) -> tuple[str, int]:
        return self.host, self.zk_host_port(zk_id)

    @property
    def internal_zk_connect(self) -> str:
        return ",".join(f"{self.zk_service(i)}:2181" for i in self.zk_ids)

    @property
    def internal_topics_rf(self) -> int:
        """RF for __consumer_offsets / __transaction_state: 3 where possible, never above the broker count."""
        return self.kafka.defaults.internal_topics_replication_factor or min(3, self.kafka.brokers)

    @property
    def internal_topics_min_isr(self) -> int:
        return self.kafka.defaults.internal_topics_min_isr or max(1, self.internal_topics_rf - 1)

    def zk_servers(self) -> str:
        """ZOO_SERVERS for every node (official image format, ZooKeeper 3.5+ with the client port)."""
        return " ".join(f"server.{i}={self.zk_service(i)}:2888:3888;2181" for i in self.zk_ids)

    def broker_listeners(self, broker_id: int) -> str:
        """INTERNAL on the cluster network (inter-broker), EXTERNAL on the published host port.

        A combined broker-controller also listens on CONTROLLER (cluster network only, never advertised).
        """
        out = f"INTERNAL://0.0.0.0:{self.kafka.internal_port},EXTERNAL://0.0.0.0:{self.broker_host_port(broker_id)}"
        if broker_id in self.controller_ids:
            out += f",CONTROLLER://0.0.0.0:{self.kraft.controller_port}"
        return out

    def broker_advertised_listeners(self, broker_id: int) -> str:
        return (
            f"INTERNAL://{self.broker_service(broker_id)}:{self.kafka.internal_port},"
            f"EXTERNAL://{self.host}:{self.broker_host_port(broker_id)}"
        )

    @property
    def kafka_heap_opts(self) -> str:
        heap = self.kafka.defaults.heap
        return f"-Xms{heap} -Xmx{heap}"

    @property
    def spark_image(self) -> str:
        return self.images.spark or self.image_profile.spark

    @property
    def spark_master_url(self) -> str:
        """Where a driver on this host reaches the standalone master (its published port)."""
        return f"spark://{self.host}:{self.spark.master_port}"

    @property
    def spark_shared_dir(self) -> str:
        return self.spark.shared_dir or f"/tmp/clusterctl-spark/{self.name}"

    def spark_kafka_relays(self) -> list[tuple[str, str]]:
        """(listen, target) pairs each worker relays so executors reach the brokers' advertised addresses.

        Brokers advertise <publish host>:<host port> (tansu has no other listener). When that host is
        loopback, a worker forwards 127.0.0.1:<port> to kafkaN:<port> over the cluster network, so the
        bootstrap list a driver on this host uses works unchanged inside the workers.
        """
        if not self.host.startswith("127."):
            return []
        return [
            (f"{self.host}:{self.broker_host_port(i)}", f"{self.broker_service(i)}:{self.broker_host_port(i)}")
            for i in self.broker_ids
        ]

    @property
    def compose_dir(self) -> Path:
        return Path("compose") / self.name

    @property
    def compose_file(self) -> Path:
        return self.compose_dir / "docker-compose.yml"


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
    path = Path(path)
    if not path.is_file():
        raise SpecError(f"spec file {path} not found", hint="run `clusterctl init` to write one")
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise SpecError(f"{path}: not valid YAML{where}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"{path}: cannot read ({exc})") from None
    if data is None:  # an empty file is a mistake, not "all defaults" (`clusterctl init` writes a full spec)
        raise SpecError(f"{path}: the spec file is empty", hint="run `clusterctl init` to write one")
    return parse_spec(data, source=str(path))
