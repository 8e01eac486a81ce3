"""What the compose template places: every service's image, address, environment, volumes and checks.

All values are derived here from the validated spec; templates/docker-compose.yml.j2 only loops and
places them (clusterctl.compose.render turns the result into files).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clusterctl.spec.model import ClusterSpec
from clusterctl.spec.sections import SPARK_MASTER_PORT, SPARK_UI_PORT, SPARK_WORKER_PORT, SPARK_WORKER_UI_PORT

SECRET_VAR = "CMAK_APPLICATION_SECRET"
CONSOLE_TOKEN_VAR = "CLUSTERCTL_CONSOLE_TOKEN"  # the console's access token (kafka_manager.kind console)
CONSOLE_PORT = 9000  # inside the console container
CLUSTER_ID_VAR = "KAFKA_CLUSTER_ID"  # kraft mode: the id every node formats its storage with
ZK_4LW = "srvr,mntr,ruok,stat,conf,cons,isro,envi,wchs"
ZK_CLIENT_PORT = 2181
CMAK_PORT = 9000


@dataclass
class RenderedService:
    service: str
    container: str
    role: str  # zookeeper | controller | broker | manager | spark-master | spark-worker
    image: str
    ip: str
    host_ports: list[str]


def _labels(spec: ClusterSpec, role: str, ident: int) -> dict[str, str]:
    return {"io.clusterctl.cluster": spec.name, "io.clusterctl.role": role, "io.clusterctl.id": str(ident)}


def _zk_env(spec: ClusterSpec, zk_id: int) -> dict[str, str]:
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


def _cluster_id_ref() -> str:
    return f"${{{CLUSTER_ID_VAR}:?missing: run clusterctl render to create .env}}"


def _kraft_env(spec: ClusterSpec, node_id: int, roles: str) -> dict[str, str]:
    """What every KRaft node shares (cp-kafka's contract: KAFKA_PROCESS_ROLES selects KRaft, CLUSTER_ID formats)."""
    kr = spec.kraft
    return {
        "KAFKA_NODE_ID": str(node_id),
        "KAFKA_PROCESS_ROLES": roles,
        "KAFKA_CONTROLLER_QUORUM_VOTERS": spec.topology.controller_quorum_voters,
        "KAFKA_CONTROLLER_LISTENER_NAMES": "CONTROLLER",
        "CLUSTER_ID": _cluster_id_ref(),
        "KAFKA_BROKER_SESSION_TIMEOUT_MS": str(kr.broker_session_timeout_ms),
        "KAFKA_BROKER_HEARTBEAT_INTERVAL_MS": str(kr.broker_heartbeat_interval_ms),
    }


def _controller_env(spec: ClusterSpec, node_id: int) -> dict[str, str]:
    """A dedicated controller: the CONTROLLER listener on the cluster network only, nothing advertised."""
    env = _kraft_env(spec, node_id, "controller")
    env |= {
        "KAFKA_LISTENERS": f"CONTROLLER://0.0.0.0:{spec.kraft.controller_port}",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "CONTROLLER:PLAINTEXT",
        "KAFKA_LOG_DIRS": spec.image_profile.kafka_data_dir,
        "KAFKA_HEAP_OPTS": spec.kafka_heap_opts,
    }
    return env


def _kafka_env(spec: ClusterSpec, broker_id: int) -> dict[str, str]:
    d = spec.kafka.defaults
    profile = spec.image_profile
    if spec.kraft_mode:
        roles = "broker,controller" if broker_id in spec.topology.controller_ids else "broker"
        env = _kraft_env(spec, broker_id, roles)
    else:
        env = {"KAFKA_BROKER_ID": str(broker_id), "KAFKA_ZOOKEEPER_CONNECT": spec.topology.internal_zk_connect}
    env |= {
        "KAFKA_LISTENERS": spec.topology.broker_listeners(broker_id),
        "KAFKA_ADVERTISED_LISTENERS": spec.topology.broker_advertised_listeners(broker_id),
    }
    if profile.broker_flavor == "wurstmeister":
        # start-kafka.sh adds the INTERNAL listener itself (INTERNAL://kafkaN:<internal_port>, listened on and
        # advertised); declaring it in KAFKA_LISTENERS too would make it append a second, broken one.
        host_port = spec.topology.broker_host_port(broker_id)
        env["KAFKA_LISTENERS"] = f"EXTERNAL://0.0.0.0:{host_port}"
        env["KAFKA_ADVERTISED_LISTENERS"] = f"EXTERNAL://{spec.topology.host}:{host_port}"
        env["KAFKA_PROTOCOL_NAME"] = "INTERNAL"
        env["KAFKA_HOST_NAME"] = spec.topology.broker_service(broker_id)
        env["KAFKA_PORT"] = str(spec.kafka.internal_port)
    protocols = "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT" + (",CONTROLLER:PLAINTEXT" if spec.kraft_mode else "")
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
    if spec.kraft_mode:
        del env["KAFKA_ZOOKEEPER_SESSION_TIMEOUT_MS"]
    if spec.kafka.jmx_port is not None and profile.broker_flavor == "cp":
        env["KAFKA_JMX_PORT"] = str(spec.kafka.jmx_port)
        env["KAFKA_JMX_HOSTNAME"] = spec.topology.broker_service(broker_id)
    return env


def _tansu_env(spec: ClusterSpec, broker_id: int) -> dict[str, str]:
    port = spec.topology.broker_host_port(broker_id)
    return {
        "CLUSTER_ID": spec.name,
        "LISTENER_URL": f"tcp://0.0.0.0:{port}",
        "ADVERTISED_LISTENER_URL": f"tcp://{spec.topology.host}:{port}",
        "STORAGE_ENGINE": "memory://tansu/",
    }


def _tcp_check(host: str, port: int) -> list[str]:
    return ["CMD", "bash", "-c", f"exec 3<>/dev/tcp/{host}/{port}"]


SPARK_CLASS = "/opt/spark/bin/spark-class"  # the published apache/spark images and clusterctl/spark alike


def _spark_context(spec: ClusterSpec) -> dict[str, Any] | None:
    """spark-master and spark-worker1..N (spark.enabled), or None."""
    if not spec.spark.enabled:
        return None
    bind = spec.publish.bind_address
    master_svc = spec.topology.spark_master_service
    master_url = f"spark://{master_svc}:{SPARK_MASTER_PORT}"
    master = {
        "service": master_svc,
        "container": spec.topology.container_name(master_svc),
        "image": spec.spark_image,
        "ip": spec.topology.spark_master_ip,
        "command": [
            SPARK_CLASS,
            "org.apache.spark.deploy.master.Master",
            "--host",
            master_svc,
            "--port",
            str(SPARK_MASTER_PORT),
            "--webui-port",
            str(SPARK_UI_PORT),
        ],
        "env": {"SPARK_NO_DAEMONIZE": "true"},
        "ports": [
            f"{bind}:{spec.spark.master_port}:{SPARK_MASTER_PORT}",
            f"{bind}:{spec.spark.ui_port}:{SPARK_UI_PORT}",
        ],
        "volumes": [],
        "depends_on": [],
        "healthcheck": _tcp_check(master_svc, SPARK_MASTER_PORT),
        "labels": _labels(spec, "spark-master", 1),
    }
    shared = spec.topology.spark_shared_dir
    relays = " ".join(f"{listen}={target}" for listen, target in spec.topology.spark_kafka_relays())
    workers = []
    for i in spec.topology.spark_worker_ids:
        svc = spec.topology.spark_worker_service(i)
        workers.append(
            {
                "service": svc,
                "container": spec.topology.container_name(svc),
                "image": spec.spark_image,
                "ip": spec.topology.spark_worker_ip(i),
                "command": [
                    SPARK_CLASS,
                    "org.apache.spark.deploy.worker.Worker",
                    # executors advertise this address: the driver on the host reaches an IP, not a name
                    "--host",
                    spec.topology.spark_worker_ip(i),
                    "--port",
                    str(SPARK_WORKER_PORT),
                    "--webui-port",
                    str(SPARK_WORKER_UI_PORT),
                    "--cores",
                    str(spec.spark.worker_cores),
                    "--memory",
                    spec.spark.worker_memory,
                    master_url,
                ],
                "env": {
                    "SPARK_NO_DAEMONIZE": "true",
                    # clusterctl/spark's entrypoint: brokers' advertised host addresses, relayed over the network
                    "KAFKA_LOOPBACK_RELAY": relays,
                    # checkpoints: the same path on the host (driver) and in every worker (executors)
                    "CLUSTERCTL_SHARED_DIR": shared,
                },
                "ports": [],
                "volumes": [(shared, shared)],
                "depends_on": [master_svc],
                "healthcheck": _tcp_check(spec.topology.spark_worker_ip(i), SPARK_WORKER_PORT),
                "labels": _labels(spec, "spark-worker", i),
            }
        )
    return {"master": master, "workers": workers}


def _console_context(spec: ClusterSpec, zk_services: list[str]) -> dict[str, Any]:
    """kafka-manager as clusterctl's console: the same pages as `clusterctl ui`, on the cluster network."""
    tansu = spec.kafka.engine == "tansu"
    # tansu advertises only the host address: reach it like the spark workers do, through a loopback relay
    relays = " ".join(f"{listen}={target}" for listen, target in spec.topology.spark_kafka_relays()) if tansu else ""
    bootstrap = spec.topology.bootstrap_servers if relays else spec.topology.internal_bootstrap_servers
    command = ["python3", "-m", "clusterctl.console", "--host", "0.0.0.0", "--port", str(CONSOLE_PORT),
               "--bootstrap-server", bootstrap, "--zookeeper", spec.topology.internal_zk_connect, "--cluster", spec.name,
               "--exposed-on", spec.publish.bind_address]  # fmt: skip
    env = {CONSOLE_TOKEN_VAR: f"${{{CONSOLE_TOKEN_VAR}:?missing: run clusterctl render to create .env}}"}
    if relays:
        env["KAFKA_LOOPBACK_RELAY"] = relays
    health = f"import urllib.request as u; u.urlopen('http://127.0.0.1:{CONSOLE_PORT}/healthz', timeout=3)"
    return {
        "service": spec.topology.manager_service,
        "container": spec.topology.container_name(spec.topology.manager_service),
        "image": spec.kafka_manager_image,
        "ip": spec.topology.manager_ip,
        "depends_on": zk_services,
        "env": env,
        "command": command,
        "port": f"{spec.publish.bind_address}:{spec.kafka_manager.port}:{CONSOLE_PORT}",
        "labels": _labels(spec, "manager", 1),
        "healthcheck": ["CMD", "python3", "-c", health],
    }


def build_context(spec: ClusterSpec) -> dict[str, Any]:
    """Everything the compose template places, derived from the spec."""
    profile = spec.image_profile
    bind = spec.publish.bind_address
    volumes: list[str] = []
    zookeepers = []
    for i in spec.topology.zk_ids:
        svc = spec.topology.zk_service(i)
        vols: list[tuple[str, str]] = [(f"{svc}-data", profile.zk_data_dir), (f"{svc}-datalog", profile.zk_datalog_dir)]
        volumes += [v for v, _ in vols]
        zookeepers.append(
            {
                "service": svc,
                "container": spec.topology.zk_container(i),
                "image": spec.zookeeper_image,
                "ip": spec.topology.zk_ip(i),
                "env": _zk_env(spec, i),
                "port": f"{bind}:{spec.topology.zk_host_port(i)}:{ZK_CLIENT_PORT}",
                "volumes": vols,
                # imok alone is answered outside a quorum too; Mode appears only when the node serves
                "healthcheck": [
                    "CMD-SHELL",
                    f"echo ruok | nc -w 2 127.0.0.1 {ZK_CLIENT_PORT} | grep -q imok && "
                    f"echo srvr | nc -w 2 127.0.0.1 {ZK_CLIENT_PORT} | grep -q '^Mode: '",
                ],
                "labels": _labels(spec, "zookeeper", i),
            }
        )
    zk_services = [spec.topology.zk_service(i) for i in spec.topology.zk_ids]
    controllers: list[dict[str, Any]] = []
    for node_id in spec.topology.dedicated_controller_ids:
        svc = spec.topology.controller_service(node_id)
        vols = [(f"{svc}-data", profile.kafka_volume_mount)]
        volumes += [v for v, _ in vols]
        controllers.append(
            {
                "service": svc,
                "container": spec.topology.controller_container(node_id),
                "image": spec.broker_image,
                "ip": spec.topology.controller_ip(node_id),
                "env": _controller_env(spec, node_id),
                "volumes": vols,
                "healthcheck": _tcp_check("127.0.0.1", spec.kraft.controller_port),
                "labels": _labels(spec, "controller", node_id),
            }
        )
    brokers = []
    tansu = spec.kafka.engine == "tansu"
    for i in spec.topology.broker_ids:
        svc = spec.topology.broker_service(i)
        port = spec.topology.broker_host_port(i)
        command: list[str] | None = None
        if tansu:
            env = _tansu_env(spec, i)
            vols = []
            check = _tcp_check("127.0.0.1", port) if profile.tansu_healthcheck else None
            depends: list[str] = []
        else:
            env = _kafka_env(spec, i)
            vols = [(f"{svc}-data", profile.kafka_volume_mount)]
            check = _tcp_check(svc, spec.kafka.internal_port)  # the wurstmeister flavour binds INTERNAL to kafkaN
            depends = zk_services + [str(c["service"]) for c in controllers]
            if spec.kafka.jmx_port is not None and profile.broker_flavor == "wurstmeister":
                command = ["bash", "-c", f"JMX_PORT={spec.kafka.jmx_port} exec {profile.broker_start_command}"]
        volumes += [v for v, _ in vols]
        brokers.append(
            {
                "service": svc,
                "container": spec.topology.broker_container(i),
                "image": spec.broker_image,
                "ip": spec.topology.broker_ip(i),
                "command": command,
                "stop_grace_period": f"{spec.kafka.stop_grace_seconds}s",
                "depends_on": depends,
                "env": env,
                "port": f"{bind}:{port}:{port}",
                "volumes": vols,
                "healthcheck": check,
                "labels": _labels(spec, "broker", i),
            }
        )
    manager = None
    if spec.kafka_manager.enabled and spec.manager_kind == "console":
        manager = _console_context(spec, zk_services)
    elif spec.kafka_manager.enabled:
        manager = {
            "service": spec.topology.manager_service,
            "container": spec.topology.container_name(spec.topology.manager_service),
            "image": spec.kafka_manager_image,
            "ip": spec.topology.manager_ip,
            "depends_on": zk_services,
            "env": {
                "ZK_HOSTS": spec.topology.internal_zk_connect,
                "APPLICATION_SECRET": f"${{{SECRET_VAR}:?missing: run clusterctl render to create .env}}",
            },
            # CMAK's play server leaves RUNNING_PID behind and then refuses to start after a restart
            "command": ["-Dpidfile.path=/dev/null", "-Djava.net.preferIPv4Stack=true"],
            "port": f"{bind}:{spec.kafka_manager.port}:{CMAK_PORT}",
            "labels": _labels(spec, "manager", 1),
            "healthcheck": None,
        }
    return {
        "cluster": spec.name,
        "project": spec.topology.project,
        "profile": spec.profile,
        "engine": spec.kafka.engine,
        "mode": spec.kafka.mode,
        "zookeepers": zookeepers,
        "controllers": controllers,
        "brokers": brokers,
        "manager": manager,
        "spark": _spark_context(spec),
        "network": {"name": spec.topology.network_name, "subnet": spec.network.subnet, "gateway": spec.network.gateway_ip},
        "volumes": volumes,
    }


def summarize(spec: ClusterSpec) -> list[RenderedService]:
    """Service, role, image, IP and published host ports of every rendered service."""
    host = spec.publish.bind_address
    out = [
        RenderedService(
            spec.topology.zk_service(i),
            spec.topology.zk_container(i),
            "zookeeper",
            spec.zookeeper_image,
            spec.topology.zk_ip(i),
            [f"{host}:{spec.topology.zk_host_port(i)}"],
        )
        for i in spec.topology.zk_ids
    ]
    out += [
        RenderedService(
            spec.topology.controller_service(i),
            spec.topology.controller_container(i),
            "controller",
            spec.broker_image,
            spec.topology.controller_ip(i),
            [],
        )
        for i in spec.topology.dedicated_controller_ids
    ]
    out += [
        RenderedService(
            spec.topology.broker_service(i),
            spec.topology.broker_container(i),
            "broker",
            spec.broker_image,
            spec.topology.broker_ip(i),
            [f"{host}:{spec.topology.broker_host_port(i)}"],
        )
        for i in spec.topology.broker_ids
    ]
    if spec.kafka_manager.enabled:
        out.append(
            RenderedService(
                spec.topology.manager_service,
                spec.topology.container_name(spec.topology.manager_service),
                "manager",
                str(spec.kafka_manager_image),
                spec.topology.manager_ip,
                [f"{host}:{spec.kafka_manager.port}"],
            )
        )
    if spec.spark.enabled:
        out.append(
            RenderedService(
                spec.topology.spark_master_service,
                spec.topology.container_name(spec.topology.spark_master_service),
                "spark-master",
                spec.spark_image,
                spec.topology.spark_master_ip,
                [f"{host}:{spec.spark.master_port}", f"{host}:{spec.spark.ui_port}"],
            )
        )
        out += [
            RenderedService(
                spec.topology.spark_worker_service(i),
                spec.topology.container_name(spec.topology.spark_worker_service(i)),
                "spark-worker",
                spec.spark_image,
                spec.topology.spark_worker_ip(i),
                [],
            )
            for i in spec.topology.spark_worker_ids
        ]
    return out
