"""The environment each container's entrypoint reads: ZooKeeper, KRaft controllers, Kafka brokers, tansu.

Every value is derived from the validated spec and its topology; clusterctl.compose.context places these
dictionaries into the services it builds.
"""

from __future__ import annotations

from clusterctl.spec.model import ClusterSpec
from clusterctl.spec.monitoring import AGENT_MOUNT, RULES_FILE, RULES_MOUNT, agent_jar, jmx_opts

CLUSTER_ID_VAR = "KAFKA_CLUSTER_ID"  # kraft mode: the id every node formats its storage with
ZK_4LW = "srvr,mntr,ruok,stat,conf,cons,isro,envi,wchs"
ZK_CONNECTION_TIMEOUT_MS = 60_000


def zk_env(spec: ClusterSpec, zk_id: int) -> dict[str, str]:
    z = spec.zookeeper
    return {
        "ZOO_MY_ID": str(zk_id),
        "ZOO_SERVERS": spec.topology.zk_servers(),
        "ZOO_TICK_TIME": str(z.tick_time_ms),
        "ZOO_INIT_LIMIT": str(z.init_limit),
        "ZOO_SYNC_LIMIT": str(z.sync_limit),
        "ZOO_4LW_COMMANDS_WHITELIST": ZK_4LW,
        "ZOO_ADMINSERVER_ENABLED": "false",
        "ZOO_STANDALONE_ENABLED": "true" if z.nodes == 1 else "false",
        "ZOO_AUTOPURGE_PURGEINTERVAL": "1",
        "ZOO_AUTOPURGE_SNAPRETAINCOUNT": "3",
    }


def cluster_id_ref() -> str:
    return f"${{{CLUSTER_ID_VAR}:?missing: run clusterctl render to create .env}}"


def kraft_env(spec: ClusterSpec, node_id: int, roles: str) -> dict[str, str]:
    """What every KRaft node shares (cp-kafka's and apache/kafka's contract: KAFKA_PROCESS_ROLES selects KRaft,
    CLUSTER_ID formats)."""
    kr = spec.kraft
    return {
        "KAFKA_NODE_ID": str(node_id),
        "KAFKA_PROCESS_ROLES": roles,
        **quorum_env(spec),
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
        "CLUSTER_ID": cluster_id_ref(),
        "KAFKA_BROKER_SESSION_TIMEOUT_MS": str(kr.broker_session_timeout_ms),
        "KAFKA_BROKER_HEARTBEAT_INTERVAL_MS": str(kr.broker_heartbeat_interval_ms),
        "KAFKA_CONTROLLER_QUORUM_ELECTION_TIMEOUT_MS": str(kr.quorum_election_timeout_ms),
    }


def quorum_env(spec: ClusterSpec) -> dict[str, str]:
    """How a node finds the quorum: the fixed voters (static), or where to ask for them (dynamic, KIP-853)."""
    if spec.kraft.quorum == "dynamic":
        return {"KAFKA_CONTROLLER_QUORUM_BOOTSTRAP_SERVERS": spec.topology.controller_quorum_bootstrap_servers}
    return {"KAFKA_CONTROLLER_QUORUM_VOTERS": spec.topology.controller_quorum_voters}


def controller_env(spec: ClusterSpec, node_id: int) -> dict[str, str]:
    """A dedicated controller: the CONTROLLER listener on the cluster network only, nothing advertised."""
    env = kraft_env(spec, node_id, "controller")
    env |= {
        "KAFKA_LISTENERS": f"CONTROLLER://0.0.0.0:{spec.kraft.controller_port}",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "CONTROLLER:SSL" if spec.security.enabled else "CONTROLLER:PLAINTEXT",
        "KAFKA_LOG_DIRS": spec.image_profile.kafka_data_dir,
        "KAFKA_HEAP_OPTS": spec.kafka_heap_opts,
    }
    return env | jvm_env(spec) | security_env(spec, broker=False)


def security_env(spec: ClusterSpec, broker: bool) -> dict[str, str]:
    """A secured node's settings that hold no secret (its passwords come from its secret.env at start, see
    templates/secure/kafka-secure-start.sh). The controller listener is TLS with client certificates: the nodes'
    certificates are their identities there (User:CN=<service>)."""
    sec = spec.security
    if not sec.enabled:
        return {}
    from clusterctl.compose.secrets import NODE_SECRETS, OPERATOR, node_identities, node_principal  # cryptography
    from clusterctl.spec.security import INTER_BROKER_USER

    env = {
        "KAFKA_SSL_KEYSTORE_TYPE": "PKCS12",
        "KAFKA_SSL_KEYSTORE_LOCATION": f"{NODE_SECRETS}/keystore.p12",
        "KAFKA_SSL_TRUSTSTORE_TYPE": "PEM",
        "KAFKA_SSL_TRUSTSTORE_LOCATION": f"{NODE_SECRETS}/truststore.pem",
        "KAFKA_SSL_CLIENT_AUTH": "required" if sec.mtls else "none",
    }
    if spec.kraft_mode:
        env["KAFKA_LISTENER_NAME_CONTROLLER_SSL_CLIENT_AUTH"] = "required"
    if broker and sec.sasl:
        env["KAFKA_SASL_ENABLED_MECHANISMS"] = sec.sasl_mechanism
        env["KAFKA_SASL_MECHANISM_INTER_BROKER_PROTOCOL"] = sec.sasl_mechanism
    if sec.authorizer:
        supers = [f"User:{INTER_BROKER_USER}", *(f"User:{u.name}" for u in sec.users if u.role == "admin")]
        supers += [node_principal(n.service) for n in node_identities(spec)] + [node_principal(OPERATOR)]
        env["KAFKA_AUTHORIZER_CLASS_NAME"] = (
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer" if spec.kraft_mode
            else "kafka.security.authorizer.AclAuthorizer"
        )  # fmt: skip
        env["KAFKA_SUPER_USERS"] = ";".join(supers)
    return env


def jvm_env(spec: ClusterSpec) -> dict[str, str]:
    """The lab's JVM flags, and log4j to stdout only (no second copy in server.log), where the image reads them."""
    if spec.image_profile.broker_flavor == "wurstmeister":  # it would write unknown names into server.properties
        return {}
    env = {"KAFKA_LOG4J_ROOT_LOGLEVEL": "INFO"}
    if spec.kafka.defaults.jvm_opts:
        env["KAFKA_JVM_PERFORMANCE_OPTS"] = spec.kafka.defaults.jvm_opts
    return env


def kafka_env(spec: ClusterSpec, broker_id: int) -> dict[str, str]:
    d = spec.kafka.defaults
    profile = spec.image_profile
    if spec.kraft_mode:
        roles = "broker,controller" if broker_id in spec.topology.controller_ids else "broker"
        env = kraft_env(spec, broker_id, roles)
    else:
        env = {
            "KAFKA_BROKER_ID": str(broker_id),
            "KAFKA_ZOOKEEPER_CONNECT": spec.topology.internal_zk_connect,
            # brokers start with ZooKeeper, not after it: wait for its quorum rather than exit after the session timeout
            "KAFKA_ZOOKEEPER_CONNECTION_TIMEOUT_MS": str(ZK_CONNECTION_TIMEOUT_MS),
        }
    env |= {
        "KAFKA_LISTENERS": spec.topology.broker_listeners(broker_id),
        "KAFKA_ADVERTISED_LISTENERS": spec.topology.broker_advertised_listeners(broker_id),
    }
    proto = spec.security.protocol
    controller = "SSL" if spec.security.enabled else "PLAINTEXT"
    protocols = f"INTERNAL:{proto},EXTERNAL:{proto}" + (f",CONTROLLER:{controller}" if spec.kraft_mode else "")
    env |= {
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": protocols,
        "KAFKA_INTER_BROKER_LISTENER_NAME": "INTERNAL",
        "KAFKA_LOG_DIRS": profile.kafka_data_dir,
        "KAFKA_DEFAULT_REPLICATION_FACTOR": str(d.replication_factor),
        "KAFKA_MIN_INSYNC_REPLICAS": str(d.min_insync_replicas),
        "KAFKA_NUM_PARTITIONS": str(d.partitions),
        "KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR": str(spec.internal_topics_rf),
        "KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR": str(spec.internal_topics_rf),
        "KAFKA_TRANSACTION_STATE_LOG_MIN_ISR": str(spec.internal_topics_min_isr),
        "KAFKA_LOG_RETENTION_HOURS": str(d.retention_hours),
        "KAFKA_LOG_RETENTION_BYTES": str(d.retention_bytes),
        "KAFKA_LOG_SEGMENT_BYTES": str(d.segment_bytes),
        "KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS": str(d.group_initial_rebalance_delay_ms),
        "KAFKA_AUTO_CREATE_TOPICS_ENABLE": str(d.auto_create_topics).lower(),
        "KAFKA_UNCLEAN_LEADER_ELECTION_ENABLE": str(d.unclean_leader_election).lower(),
        "KAFKA_ZOOKEEPER_SESSION_TIMEOUT_MS": str(d.zookeeper_session_timeout_ms),
        "KAFKA_REPLICA_LAG_TIME_MAX_MS": str(d.replica_lag_time_max_ms),
        "KAFKA_CONTROLLED_SHUTDOWN_ENABLE": "true",
        "KAFKA_HEAP_OPTS": spec.kafka_heap_opts,
    }
    env |= jvm_env(spec) | security_env(spec, broker=True)
    if spec.kraft_mode:
        del env["KAFKA_ZOOKEEPER_SESSION_TIMEOUT_MS"]
    rack = spec.topology.broker_rack(broker_id)
    if rack is not None:
        env["KAFKA_BROKER_RACK"] = rack
    if spec.kafka.jmx_port is not None and profile.broker_flavor != "wurstmeister":  # cp and apache: launch reads it
        env["KAFKA_JMX_PORT"] = str(spec.kafka.jmx_port)
        env["KAFKA_JMX_HOSTNAME"] = spec.topology.broker_service(broker_id)
    return env


def tansu_env(spec: ClusterSpec, broker_id: int) -> dict[str, str]:
    port = spec.topology.broker_host_port(broker_id)
    return {
        "CLUSTER_ID": spec.name,
        "LISTENER_URL": f"tcp://0.0.0.0:{port}",
        "ADVERTISED_LISTENER_URL": f"tcp://{spec.topology.broker_host(broker_id)}:{port}",
        "STORAGE_ENGINE": "memory://tansu/",
    }


def monitoring_env(spec: ClusterSpec, service: str) -> dict[str, str]:
    """monitoring.enabled: JMX for the server process (KAFKA_JMX_PORT) with the exporter agent in its options."""
    if not spec.monitoring.enabled:
        return {}
    return {"KAFKA_JMX_PORT": str(spec.kafka.jmx_port), "KAFKA_JMX_OPTS": jmx_opts(spec, service)}


def monitoring_binds(spec: ClusterSpec) -> list[tuple[str, str]]:
    """monitoring.enabled: the agent jar and the rule file, read-only (host path or ./file beside the compose file)."""
    if not spec.monitoring.enabled:
        return []
    jar = agent_jar(spec.monitoring.exporter_version)
    return [(str(jar), AGENT_MOUNT), (f"./{RULES_FILE}", RULES_MOUNT)]
