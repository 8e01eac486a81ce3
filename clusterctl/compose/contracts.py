"""Profile contracts: the exact config file each image's entrypoint writes from our rendered environment.

No registry image can be pulled here, so what a registry profile's containers run is derived from the images'
public entrypoint sources, applied to the environment in our rendered compose file:

- cp-kafka 7.9 (`/etc/confluent/docker/configure` + `kafka.properties.template`, confluentinc/kafka-images):
  every KAFKA_X_Y becomes x.y, lower-cased, `_` -> `.`, `__` -> `_`, `___` -> `-`, except the names its
  template excludes. That list lacks a comma after 'KAFKA_HEAP_OPTS', so Python joins it with the next entry:
  KAFKA_HEAP_OPTS and KAFKA_LOG4J_OPTS are written (heap.opts=..., an unknown key Kafka only warns about).
  KAFKA_LISTENERS defaults to the advertised listeners on 0.0.0.0, KAFKA_LOG_DIRS to /var/lib/kafka/data;
  KAFKA_PORT / KAFKA_HOST / KAFKA_ADVERTISED_PORT / KAFKA_ADVERTISED_HOST make it exit.
- clusterctl/kafka (templates/images/kafka/entrypoint.sh): the same mapping, excluding what the scripts consume.
- wurstmeister/kafka 2.13-2.8.1 (`start-kafka.sh`, wurstmeister/kafka-docker since 2021-10): the distribution's
  config/server.properties, then every KAFKA_* variable not in its exclusion list copied verbatim
  (KAFKA_FOO_BAR -> foo.bar: the part after the first `_`, lower-cased, every `_` -> `.`, no escapes),
  replacing a `key=` or `#key=` line (the key is a regular expression there) or appending one. KAFKA_PORT
  defaults to 9092 and is written too (`port`, ignored by Kafka when listeners are set).
- apache/kafka 4.x (Apache's official image, docker/ and core/.../kafka/docker/KafkaDockerWrapper.scala in
  apache/kafka, read at 1eb7644 (2024-10); apache_properties cites the lines): every KAFKA_* variable not in
  its exclusion list becomes a key (cp's escapes in reverse order of application: `_` -> `.`, then `...` -> `-`,
  `..` -> `_`); any such variable replaces the packaged default server.properties entirely; a file mounted at
  /mnt/shared/config/server.properties comes first and the variables are appended; CLUSTER_ID formats the
  storage (a fixed default when unset); SSL secrets are read from /etc/kafka/secrets.
- zookeeper:3.8 (the official image's docker-entrypoint.sh): zoo.cfg from ZOO_* (the image's ENV defaults
  first), one `server.N=...` line per ZOO_SERVERS word; myid from ZOO_MY_ID.

clusterctl.compose.kafkarules checks the derived configs against Kafka's own start-up rules.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from clusterctl.spec import yamlfile

Contract = Literal["cp-kafka", "clusterctl-kafka", "wurstmeister", "apache-kafka", "zookeeper"]

# cp-kafka 7.9's template list, as Python reads it (the missing comma joins two names)
CP_KAFKA_EXCLUDED = frozenset(
    {
        "KAFKA_VERSION",
        "KAFKA_HEAP_OPTS" "KAFKA_LOG4J_OPTS",  # noqa: ISC001 - upstream's missing comma, kept on purpose
        "KAFKA_OPTS",
        "KAFKA_JMX_OPTS",
        "KAFKA_JVM_PERFORMANCE_OPTS",
        "KAFKA_GC_LOG_OPTS",
        "KAFKA_LOG4J_ROOT_LOGLEVEL",
        "KAFKA_LOG4J_LOGGERS",
        "KAFKA_TOOLS_LOG4J_LOGLEVEL",
        "KAFKA_ZOOKEEPER_CLIENT_CNXN_SOCKET",  # written as zookeeper.clientCnxnSocket instead
    }
)
CP_KAFKA_REFUSED = ("KAFKA_ADVERTISED_PORT", "KAFKA_ADVERTISED_HOST", "KAFKA_HOST", "KAFKA_PORT")
# templates/images/kafka/entrypoint.sh: consumed by Kafka's scripts or by the entrypoint itself
CLUSTERCTL_KAFKA_EXCLUDED = frozenset(
    "KAFKA_" + n
    for n in "VERSION HOME HEAP_OPTS OPTS LOG4J_OPTS JMX_OPTS JMX_PORT JMX_HOSTNAME JVM_PERFORMANCE_OPTS "
    "GC_LOG_OPTS LOG4J_ROOT_LOGLEVEL LOG4J_LOGGERS TOOLS_LOG4J_LOGLEVEL DEBUG CLUSTER_ID".split()
)
# start-kafka.sh's EXCLUSIONS (exact names; KAFKA_CREATE_TOPICS and KAFKA_HEAP_OPTS are also unset before)
WURSTMEISTER_EXCLUDED = frozenset(
    "KAFKA_" + n
    for n in "VERSION HOME DEBUG GC_LOG_OPTS HEAP_OPTS JMX_OPTS JVM_PERFORMANCE_OPTS LOG OPTS CREATE_TOPICS".split()
)
# apache/kafka: KafkaDockerWrapper.scala, Constants.ExcludeServerPropsEnv (KAFKA_JMX_PORT is not in it: written
# as jmx.port, an unknown key Kafka only warns about)
APACHE_KAFKA_EXCLUDED = frozenset(
    "KAFKA_" + n
    for n in "VERSION HEAP_OPTS LOG4J_OPTS OPTS JMX_OPTS JVM_PERFORMANCE_OPTS GC_LOG_OPTS LOG4J_ROOT_LOGLEVEL "
    "LOG4J_LOGGERS TOOLS_LOG4J_LOGLEVEL JMX_HOSTNAME".split()
)
# configureDefaults: the CLUSTER_ID every node formats with when the environment names none
APACHE_DEFAULT_CLUSTER_ID = "5L6g3nShT-eMCtK--X86sw"
APACHE_SECRETS_DIR = "/etc/kafka/secrets"
APACHE_MOUNTED_CONFIG = "/mnt/shared/config/server.properties"
# the key lines of the packaged default (jvm/Dockerfile copies config/kraft/server.properties to
# /etc/kafka/docker/server.properties): used only when neither a KAFKA_* variable nor a mounted file configures
APACHE_PACKAGED_SERVER_PROPERTIES = """process.roles=broker,controller
node.id=1
controller.quorum.voters=1@localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
log.retention.hours=168
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
"""
# the key lines of Kafka 2.8.1's config/server.properties, which start-kafka.sh edits (prose comments left out)
KAFKA_281_SERVER_PROPERTIES = """broker.id=0
#listeners=PLAINTEXT://:9092
#advertised.listeners=PLAINTEXT://your.host.name:9092
#listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.receive.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kafka-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
#log.flush.interval.messages=10000
#log.flush.interval.ms=1000
log.retention.hours=168
#log.retention.bytes=1073741824
log.segment.bytes=1073741824
log.retention.check.interval.ms=300000
zookeeper.connect=localhost:2181
zookeeper.connection.timeout.ms=18000
group.initial.rebalance.delay.ms=0
"""
# the official zookeeper:3.8 image's ENV defaults
ZOOKEEPER_IMAGE_ENV = {
    "ZOO_CONF_DIR": "/conf",
    "ZOO_DATA_DIR": "/data",
    "ZOO_DATA_LOG_DIR": "/datalog",
    "ZOO_TICK_TIME": "2000",
    "ZOO_INIT_LIMIT": "5",
    "ZOO_SYNC_LIMIT": "2",
    "ZOO_AUTOPURGE_PURGEINTERVAL": "0",
    "ZOO_AUTOPURGE_SNAPRETAINCOUNT": "3",
    "ZOO_MAX_CLIENT_CNXNS": "60",
    "ZOO_STANDALONE_ENABLED": "true",
    "ZOO_ADMINSERVER_ENABLED": "true",
}


class EntrypointRefusal(ValueError):
    """The image's entrypoint would exit before starting the server."""


@dataclass
class NodeConfig:
    """One container's config file as its image writes it: server.properties, or zoo.cfg plus myid."""

    service: str
    role: str  # zookeeper | controller | broker
    contract: Contract
    text: str
    myid: str | None = None
    cluster_id: str | None = None  # apache/kafka: the id its launch formats the storage with
    properties: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.properties = parse_properties(self.text)


def parse_properties(text: str) -> dict[str, str]:
    """key=value lines as java.util.Properties reads them here (no comments, last one wins)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("#", "!")) and "=" in line:
            key, _, value = line.partition("=")
            out[key.strip()] = value.strip()
    return out


def cp_key(name: str) -> str:
    """Confluent's env_to_props: KAFKA_X_Y -> x.y, `__` -> `_`, `___` -> `-`."""
    dotted = name.removeprefix("KAFKA_").lower().replace("_", ".")
    return dotted.replace("...", "-").replace("..", "_")


def cp_kafka_properties(env: Mapping[str, str], excluded: frozenset[str] = CP_KAFKA_EXCLUDED) -> str:
    """kafka.properties as cp-kafka's configure (or clusterctl/kafka's entrypoint, with its exclusions) writes it."""
    env = dict(env)
    kraft = bool(env.get("KAFKA_PROCESS_ROLES"))
    refused = [n for n in CP_KAFKA_REFUSED if env.get(n)]
    if refused:
        raise EntrypointRefusal(f"{refused[0]} is deprecated: the entrypoint exits")
    required = ["CLUSTER_ID"] if kraft else ["KAFKA_ZOOKEEPER_CONNECT", "KAFKA_ADVERTISED_LISTENERS"]
    controller_only = env.get("KAFKA_PROCESS_ROLES") == "controller"
    if kraft and not controller_only:
        required.append("KAFKA_ADVERTISED_LISTENERS")
    if controller_only and env.get("KAFKA_ADVERTISED_LISTENERS"):
        raise EntrypointRefusal("KAFKA_ADVERTISED_LISTENERS is not supported on a KRaft controller")
    missing = [n for n in required if not env.get(n)]
    if missing:
        raise EntrypointRefusal(f"{missing[0]} is required")
    if not env.get("KAFKA_LISTENERS") and not controller_only:
        env["KAFKA_LISTENERS"] = re.sub(r"://[^:,]*:", "://0.0.0.0:", env["KAFKA_ADVERTISED_LISTENERS"])
    env.setdefault("KAFKA_LOG_DIRS", "/var/lib/kafka/data")
    lines = [f"{cp_key(n)}={v}" for n, v in sorted(env.items()) if n.startswith("KAFKA_") and n not in excluded]
    if excluded is CP_KAFKA_EXCLUDED and "KAFKA_ZOOKEEPER_CLIENT_CNXN_SOCKET" in env:
        lines.append(f"zookeeper.clientCnxnSocket={env['KAFKA_ZOOKEEPER_CLIENT_CNXN_SOCKET']}")
    return "\n".join(lines) + "\n"


def apache_key(name: str) -> str:
    """KafkaDockerWrapper.getServerConfigsFromEnv: every "KAFKA_" removed (not just the prefix), lower-cased,
    `_` -> `.`, then `...` -> `-`, `..` -> `_`."""
    return name.replace("KAFKA_", "").lower().replace("_", ".").replace("...", "-").replace("..", "_")


def apache_env_name(key: str) -> str:
    """The variable apache/kafka turns into `key`: `.` -> `_`, `_` -> `__`, `-` -> `___`.

    ValueError for a key no variable yields: adjacent separators (`x.__y` reads back as `x-_y`) or an inner
    `kafka.` segment (removed with every "KAFKA_").
    """
    name = "KAFKA_" + key.upper().replace("_", "__").replace("-", "___").replace(".", "_")
    if apache_key(name) != key:
        raise ValueError(f"no KAFKA_ variable sets {key}: {name} reads back as {apache_key(name)}")
    return name


def _apache_ssl(env: dict[str, str], secrets: Mapping[str, str]) -> None:
    """configure lines 67-100: an SSL:// advertised listener needs the keystore and its credential files in
    /etc/kafka/secrets (`secrets`: file name -> content); their locations and passwords become KAFKA_SSL_*."""

    def ensure(name: str) -> str:
        if not env.get(name):
            raise EntrypointRefusal(f"{name} environment variable not set")
        return env[name]

    def read(name: str) -> str:
        file = ensure(name)
        if file not in secrets:
            raise EntrypointRefusal(f"{APACHE_SECRETS_DIR}/{file} file does not exist")
        return secrets[file]

    keystore = ensure("KAFKA_SSL_KEYSTORE_FILENAME")
    if keystore not in secrets:
        raise EntrypointRefusal(f"{APACHE_SECRETS_DIR}/{keystore} file does not exist")
    env["KAFKA_SSL_KEYSTORE_LOCATION"] = f"{APACHE_SECRETS_DIR}/{keystore}"
    env["KAFKA_SSL_KEY_PASSWORD"] = read("KAFKA_SSL_KEY_CREDENTIALS")
    env["KAFKA_SSL_KEYSTORE_PASSWORD"] = read("KAFKA_SSL_KEYSTORE_CREDENTIALS")
    if any(w in env.get("KAFKA_SSL_CLIENT_AUTH", "") for w in ("required", "requested")):
        truststore = ensure("KAFKA_SSL_TRUSTSTORE_FILENAME")
        if truststore not in secrets:
            raise EntrypointRefusal(f"{APACHE_SECRETS_DIR}/{truststore} file does not exist")
        env["KAFKA_SSL_TRUSTSTORE_LOCATION"] = f"{APACHE_SECRETS_DIR}/{truststore}"
        env["KAFKA_SSL_TRUSTSTORE_PASSWORD"] = read("KAFKA_SSL_TRUSTSTORE_CREDENTIALS")


def apache_kafka(
    env: Mapping[str, str],
    mounted: str | None = None,
    secrets: Mapping[str, str] | None = None,
    packaged: str = APACHE_PACKAGED_SERVER_PROPERTIES,
) -> tuple[str, str]:
    """(server.properties, cluster id) as apache/kafka's run -> configureDefaults -> configure -> launch leave them.

    `mounted`: a server.properties mounted at /mnt/shared/config; `secrets`: /etc/kafka/secrets' files.
    """
    env = dict(env)
    if not env.get("CLUSTER_ID"):  # configureDefaults lines 17-28 (an empty value counts as unset)
        env["CLUSTER_ID"] = APACHE_DEFAULT_CLUSTER_ID
    roles = env.get("KAFKA_PROCESS_ROLES", "")
    if roles == "controller":  # configure lines 38-54
        if env.get("KAFKA_ADVERTISED_LISTENERS"):
            raise EntrypointRefusal("KAFKA_ADVERTISED_LISTENERS is not supported on a KRaft controller.")
        env.pop("KAFKA_ADVERTISED_LISTENERS", None)
    advertised = env.get("KAFKA_ADVERTISED_LISTENERS", "")
    if not env.get("KAFKA_LISTENERS") and roles != "controller" and advertised:  # configure lines 56-63
        env["KAFKA_LISTENERS"] = re.sub(r"://[^:]*:", "://0.0.0.0:", advertised)
    if "SSL://" in advertised:
        _apache_ssl(env, secrets or {})
    if re.search(r"SASL_.*://", advertised) and not env.get("KAFKA_OPTS"):  # configure lines 102-113
        raise EntrypointRefusal("KAFKA_OPTS environment variable not set")
    # jvm/launch lines 17-46 export KAFKA_JMX_OPTS, KAFKA_JMX_HOSTNAME and KAFKA_JVM_PERFORMANCE_OPTS before the
    # wrapper runs: all excluded. KAFKA_JMX_PORT is exported as JMX_PORT and also written (jmx.port).
    # KafkaDockerWrapper.prepareServerConfigs: env lines after a newline, appended to the mounted file, else the
    # file holds them alone; an empty result gets the packaged default
    props: dict[str, str] = {}
    for name, value in env.items():
        if name.startswith("KAFKA_") and name not in APACHE_KAFKA_EXCLUDED:
            key = apache_key(name)
            if props.get(key, value) != value:  # sys.env's order decides: not derivable
                raise EntrypointRefusal(f"two variables set {key} to different values; the JVM's env order decides")
            props[key] = value
    added = "\n" + "\n".join(f"{k}={v}" for k, v in sorted(props.items())) if props else ""
    text = (mounted or "") + added
    if not text.strip():
        text = packaged
    return text, env["CLUSTER_ID"]


def wurstmeister_properties(env: Mapping[str, str], hostname: str, base: str = KAFKA_281_SERVER_PROPERTIES) -> str:
    """server.properties as wurstmeister's start-kafka.sh leaves it: `base` edited by every copied KAFKA_* var."""
    env = dict(env)
    if not env.get("KAFKA_ZOOKEEPER_CONNECT"):
        raise EntrypointRefusal("missing mandatory config: KAFKA_ZOOKEEPER_CONNECT")
    env.setdefault("KAFKA_PORT", "9092")
    env.setdefault("KAFKA_BROKER_ID", "-1")
    env.setdefault("KAFKA_LOG_DIRS", f"/kafka/kafka-logs-{hostname}")
    if not env.get("KAFKA_LISTENERS") and not env.get("KAFKA_ADVERTISED_HOST_NAME"):
        raise EntrypointRefusal("no listener or advertised hostname configuration provided")
    lines = base.rstrip("\n").split("\n") + [""]  # it appends an empty line first
    for name, value in env.items():
        if not name.startswith("KAFKA_") or name in WURSTMEISTER_EXCLUDED:
            continue
        key = name.split("_", 1)[1].lower().replace("_", ".")
        pattern = re.compile(f"^#?{key}=")  # grep -E / sed -r treat the key as a pattern
        hits = [i for i, line in enumerate(lines) if pattern.search(line)]
        if hits and "@" in value:
            raise EntrypointRefusal(f"{name}'s value contains '@', which breaks start-kafka.sh's sed")
        for i in hits:
            lines[i] = f"{key}={value}"
        if not hits:
            lines.append(f"{key}={value}")
    return "\n".join(lines) + "\n"


def zookeeper_cfg(env: Mapping[str, str]) -> tuple[str, str]:
    """(zoo.cfg, myid) as the official zookeeper image's docker-entrypoint.sh writes them."""
    e = {**ZOOKEEPER_IMAGE_ENV, **env}
    lines = [
        f"dataDir={e['ZOO_DATA_DIR']}",
        f"dataLogDir={e['ZOO_DATA_LOG_DIR']}",
        f"tickTime={e['ZOO_TICK_TIME']}",
        f"initLimit={e['ZOO_INIT_LIMIT']}",
        f"syncLimit={e['ZOO_SYNC_LIMIT']}",
        f"autopurge.snapRetainCount={e['ZOO_AUTOPURGE_SNAPRETAINCOUNT']}",
        f"autopurge.purgeInterval={e['ZOO_AUTOPURGE_PURGEINTERVAL']}",
        f"maxClientCnxns={e['ZOO_MAX_CLIENT_CNXNS']}",
        f"standaloneEnabled={e['ZOO_STANDALONE_ENABLED']}",
        f"admin.enableServer={e['ZOO_ADMINSERVER_ENABLED']}",
    ]
    lines += (e.get("ZOO_SERVERS") or "server.1=localhost:2888:3888;2181").split()
    if e.get("ZOO_4LW_COMMANDS_WHITELIST"):
        lines.append(f"4lw.commands.whitelist={e['ZOO_4LW_COMMANDS_WHITELIST']}")
    lines += (e.get("ZOO_CFG_EXTRA") or "").split()
    return "\n".join(lines) + "\n", e.get("ZOO_MY_ID") or "1"


def contract_of(image: str) -> Contract:
    """Which entrypoint a broker/controller image runs."""
    if image.startswith("wurstmeister/kafka"):
        return "wurstmeister"
    if image.startswith("clusterctl/kafka:"):
        return "clusterctl-kafka"
    if image.startswith("apache/kafka"):  # apache/kafka and apache/kafka-native share the scripts
        return "apache-kafka"
    return "cp-kafka"


def derive(compose_text: str, server_properties: str = KAFKA_281_SERVER_PROPERTIES) -> list[NodeConfig]:
    """Every ZooKeeper node's and Kafka node's config, derived from a rendered compose file.

    `server_properties` is the distribution's config/server.properties the wurstmeister script edits.
    """
    services: dict[str, Any] = yamlfile.load_text(compose_text, "compose file")["services"]
    out: list[NodeConfig] = []
    for name, svc in services.items():
        role = svc.get("labels", {}).get("io.clusterctl.role")
        env = {k: str(v) for k, v in (svc.get("environment") or {}).items()}
        if role == "zookeeper":
            cfg, myid = zookeeper_cfg(env)
            out.append(NodeConfig(name, role, "zookeeper", cfg, myid))
        elif role in ("broker", "controller") and "LISTENER_URL" not in env:  # tansu has no server.properties
            contract = contract_of(svc["image"])
            if contract == "wurstmeister":
                text = wurstmeister_properties(env, svc.get("hostname", name), server_properties)
            elif contract == "clusterctl-kafka":
                text = cp_kafka_properties(env, CLUSTERCTL_KAFKA_EXCLUDED)
            elif contract == "apache-kafka":
                text, cluster_id = apache_kafka(env)
                out.append(NodeConfig(name, role, contract, text, cluster_id=cluster_id))
                continue
            else:
                text = cp_kafka_properties(env)
            out.append(NodeConfig(name, role, contract, text))
    return out
