"""The spec file's sections (network, zookeeper, kafka, kraft, kafka_manager, spark, images, publish):
each one's fields, defaults and its own checks. Checks across sections live on ClusterSpec in `spec`.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from clusterctl.spec.kafkadist import EXACT_VERSION
from clusterctl.spec.profiles import ManagerKind
from clusterctl.spec.validate import MAX_PARTITIONS

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_-]{0,39}$")
NETWORK_NAME_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,62}$")
IMAGE_RE = r"^[a-z0-9][a-z0-9._/:@-]{0,254}$"

# Host ports below this need privileges and clash with system services.
MIN_HOST_PORT = 1024

Profile = Literal["default", "wurstmeister", "offline", "apache"]
BrokerEngine = Literal["kafka", "tansu"]
KafkaMode = Literal["zookeeper", "kraft"]
QuorumKind = Literal["static", "dynamic"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


def matching(v: str, pattern: re.Pattern[str], what: str, rule: str, max_len: int | None = None) -> str:
    """`v` when `pattern` matches it (and it is at most `max_len` long), else ValueError "<what> 'v' <rule>"."""
    if (max_len is not None and len(v) > max_len) or not pattern.match(v):
        raise ValueError(f"{what} {v[:80]!r} {rule}")
    return v


def is_ipv4(v: str) -> bool:
    try:
        ipaddress.IPv4Address(v)
    except ValueError:
        return False
    return True


def is_host_name(v: str, *, port: bool = False) -> bool:
    """A DNS name; with `port` also a bracketed IPv6 address, either with an optional :PORT (at most 65535)."""
    if not port:
        return len(v) <= 253 and ":" not in v and PUBLIC_NAME_RE.fullmatch(v) is not None
    tail = v.rpartition("]")[2]
    number = tail.rpartition(":")[2] if ":" in tail else "0"
    return len(v) <= 260 and PUBLIC_NAME_RE.fullmatch(v) is not None and int(number or 0) <= 65535


class NetworkSpec(_Model):
    """A user-defined bridge network with static IPs (RFC1918 only)."""

    name: str | None = Field(default=None, description="docker network name (default: <cluster>-net)")
    subnet: str = "10.77.0.0/24"
    gateway: str | None = Field(default=None, description="default: first host address of the subnet")

    @field_validator("name")
    @classmethod
    def _network_name(cls, v: str | None) -> str | None:
        rule = "must be 1-63 chars of letters, digits, '_', '.' or '-'"
        return None if v is None else matching(v, NETWORK_NAME_RE, "network.name", rule)

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
# Kafka's default is G1 with the C2 compiler: tuned for long-running brokers, slow to start on a small lab machine
LAB_JVM_OPTS = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1 -Djava.awt.headless=true"


class BrokerDefaults(_Model):
    """Cluster-wide broker settings; internal topics are sized to the broker count."""

    replication_factor: int = Field(default=3, ge=1)
    min_insync_replicas: int = Field(default=2, ge=1)
    partitions: int = Field(default=3, ge=1, le=MAX_PARTITIONS)
    retention_hours: int = Field(default=168, ge=1)
    retention_bytes: int = Field(default=1_073_741_824, description="per partition; -1 = unlimited")
    segment_bytes: int = Field(default=268_435_456, ge=1_048_576)
    group_initial_rebalance_delay_ms: int = Field(default=0, ge=0)
    auto_create_topics: bool = False
    unclean_leader_election: bool = False
    heap: str = Field(default="512m", pattern=r"^[1-9]\d{0,5}[mMgG]$")
    jvm_opts: str = Field(
        default=LAB_JVM_OPTS,
        description='KAFKA_JVM_PERFORMANCE_OPTS of every Kafka JVM; "" = Kafka\'s own (G1, full JIT)',
    )
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
    version: str | None = Field(
        default=None,
        pattern=EXACT_VERSION,
        description="Apache Kafka version of the broker image: offline clusterctl/kafka:<version> (`clusterctl images "
        "build kafka --kafka-version V`; null = the newest built that the mode runs, 4.x: kraft only), profile "
        "apache apache/kafka:<version> (3.7.0 on; null = the profile's)",
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
    quorum: QuorumKind = Field(
        default="static",
        description="static: controller.quorum.voters, a voter set fixed at format time; dynamic (KIP-853, Kafka "
        "3.9+): controller.quorum.bootstrap.servers, storage formatted with --initial-controllers, voters added "
        "and removed with `clusterctl quorum add-controller / remove-controller`",
    )
    ips: list[str] | None = Field(default=None, description="dedicated controllers' static IPs; default .51, .52, ...")
    broker_session_timeout_ms: int = Field(
        default=9000, ge=1000, le=600_000, description="a broker missing heartbeats this long is fenced"
    )
    broker_heartbeat_interval_ms: int = Field(
        default=500,
        ge=100,
        le=60_000,
        description="broker.heartbeat.interval.ms (Kafka's 2000): a starting broker the controller does not "
        "unfence at once asks again after this long",
    )
    quorum_election_timeout_ms: int = Field(
        default=500,
        ge=100,
        le=60_000,
        description="controller.quorum.election.timeout.ms (Kafka's 1000): a voter without a leader waits this "
        "long, randomised up to twice it, before it stands for election; the lab's quorum forms ~0.7 s sooner",
    )

    eligible_leader_replicas_version: int | None = Field(
        default=None,
        ge=0,
        le=1,
        description="eligible.leader.replicas.version (KIP-966, Kafka 4.0+): 1 keeps out-of-ISR replicas that are "
        "safe to elect (ELR), 0 turns it off; `up` finalizes it (kafka-features upgrade/downgrade); null = as "
        "formatted (on for new clusters from 4.1, off on 4.0)",
    )

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


_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
PUBLIC_NAME_RE = re.compile(rf"(?:{_LABEL}(?:\.{_LABEL})*\.?|\[[0-9A-Fa-f:.]{{2,45}}\])(?::[0-9]{{1,5}})?")


class KafkaManagerSpec(_Model):
    enabled: bool = True
    kind: ManagerKind | None = Field(
        default=None,
        description="cmak (a published CMAK image) or console (clusterctl's own, `clusterctl images build console`); "
        "default: console in the offline profile, cmak elsewhere",
    )
    port: int = Field(default=9000, description="host port of the web UI")
    ip: str | None = Field(default=None, description="static IP; default .30")
    public_names: list[str] = Field(
        default_factory=list,
        max_length=16,
        description="kind console: host names (or host:port) browsers reach it by besides publish.bind_address "
        "and localhost, e.g. this machine's DNS name or a reverse proxy's; any other Host is refused (421)",
    )

    @field_validator("public_names")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        for name in v:
            if not is_host_name(name, port=True):
                raise ValueError(f"kafka_manager.public_names: {name[:80]!r} is not a host name or host:port")
        return v


SPARK_MASTER_PORT = 7077  # inside the spark-master container
SPARK_UI_PORT = 8080  # the master's web UI inside its container
SPARK_WORKER_PORT = 7078  # inside each spark-worker container
SPARK_WORKER_UI_PORT = 8081  # the worker's web UI inside its container (not published)


_ABS_DIR_RE = re.compile(r"^/[A-Za-z0-9._/-]+$")  # not / itself


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
        rule = "must be an absolute path of letters, digits, '.', '_', '-', '/'"
        return None if v is None else matching(v, _ABS_DIR_RE, "spark.shared_dir", rule)


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
        if not is_ipv4(v):
            raise ValueError(f"publish.bind_address {v!r} is not an IPv4 address")
        return v


class StorageSpec(_Model):
    """Where the data volumes live: Docker volumes on the host's disk, or bounded loop-mounted ext4 images."""

    bounded_mb: int | None = Field(
        default=None,
        ge=64,
        le=65536,
        description="each data volume an ext4 image of this many MiB (needs root: losetup); null = plain volumes",
    )
