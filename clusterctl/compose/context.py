"""What the compose template places: every service's image, address, environment, volumes and checks.

All values are derived here from the validated spec; templates/docker-compose.yml.j2 only loops and
places them (clusterctl.compose.render turns the result into files).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from clusterctl.compose.environment import (
    controller_env,
    kafka_env,
    monitoring_binds,
    monitoring_env,
    tansu_env,
    zk_env,
)
from clusterctl.errors import SpecError
from clusterctl.spec.model import ClusterSpec
from clusterctl.spec.sections import SPARK_MASTER_PORT, SPARK_UI_PORT, SPARK_WORKER_PORT, SPARK_WORKER_UI_PORT

SECRET_VAR = "CMAK_APPLICATION_SECRET"
CONSOLE_TOKEN_VAR = "CLUSTERCTL_CONSOLE_TOKEN"  # the console's access token (kafka_manager.kind console)
CONSOLE_PORT = 9000  # inside the console container
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
    rack: str | None = None  # deploy.target swarm: the rack the service is pinned to


def _labels(spec: ClusterSpec, role: str, ident: int) -> dict[str, str]:
    return {"io.clusterctl.cluster": spec.name, "io.clusterctl.role": role, "io.clusterctl.id": str(ident)}


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
    # kraft mode has no ZooKeeper: the console's ZooKeeper page says so, its Kafka pages need none
    zookeeper = ["--zookeeper", spec.topology.internal_zk_connect] if zk_services else []
    if spec.kraft_mode:  # its quorum page asks the brokers (they forward DescribeQuorum) and the controllers
        voters = [f"{spec.topology.controller_ip(c)}:{spec.kraft.controller_port}" for c in spec.topology.controller_ids]
        nodes = ",".join(f"{n}={svc}" for n, svc in sorted(spec.topology.node_services.items()))
        zookeeper = ["--kraft-quorum", ",".join([*bootstrap.split(","), *voters]), "--kraft-nodes", nodes]
    command = ["python3", "-m", "clusterctl.console", "--host", "0.0.0.0", "--port", str(CONSOLE_PORT),
               "--bootstrap-server", bootstrap, *zookeeper,
               "--cluster", spec.name, "--exposed-on", spec.publish.bind_address,
               "--public-port", str(spec.kafka_manager.port),
               *(a for n in spec.kafka_manager.public_names for a in ("--public-name", n))]  # fmt: skip
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


def _zookeepers(spec: ClusterSpec) -> list[dict[str, Any]]:
    profile = spec.image_profile
    out = []
    for i in spec.topology.zk_ids:
        svc = spec.topology.zk_service(i)
        out.append(
            {
                "service": svc,
                "container": spec.topology.zk_container(i),
                "image": spec.zookeeper_image,
                "ip": spec.topology.zk_ip(i),
                "env": zk_env(spec, i),
                "port": f"{spec.publish.bind_address}:{spec.topology.zk_host_port(i)}:{ZK_CLIENT_PORT}",
                "volumes": [(f"{svc}-data", profile.zk_data_dir), (f"{svc}-datalog", profile.zk_datalog_dir)],
                # imok alone is answered outside a quorum too; Mode appears only when the node serves
                "healthcheck": [
                    "CMD-SHELL",
                    f"echo ruok | nc -w 2 127.0.0.1 {ZK_CLIENT_PORT} | grep -q imok && "
                    f"echo srvr | nc -w 2 127.0.0.1 {ZK_CLIENT_PORT} | grep -q '^Mode: '",
                ],
                "labels": _labels(spec, "zookeeper", i),
            }
        )
    return out


def _secure_start(spec: ClusterSpec, service: str) -> dict[str, Any]:
    """A Kafka node's entrypoint and read-only binds: the monitoring agent's (monitoring.enabled) and, secured, its
    start script and its own secrets directory (compose/secrets.py)."""
    binds = monitoring_binds(spec) if spec.kafka.engine == "kafka" else []
    if not spec.security.enabled:
        return {"entrypoint": None, "binds": binds}
    from clusterctl.compose.secrets import NODE_MOUNT, SECRETS_DIR, START_MOUNT, START_SCRIPT

    return {
        "entrypoint": ["bash", START_MOUNT, "kafka-server"],  # compose drops the image's CMD with its ENTRYPOINT
        "binds": [*binds, (f"./{SECRETS_DIR}/{START_SCRIPT}", START_MOUNT), (f"./{SECRETS_DIR}/{service}", NODE_MOUNT)],
    }


def controllers_context(spec: ClusterSpec) -> list[dict[str, Any]]:
    """The dedicated controllers of a kraft spec (also what a migration phase adds to a ZooKeeper one)."""
    if spec.kraft_mode and spec.kraft.quorum == "dynamic":  # the offline tag is resolved only now
        from clusterctl.spec.profiles import kafka_version_of
        from clusterctl.spec.quorum import version_refusal

        refusal = version_refusal(kafka_version_of(spec.broker_image), f"image {spec.broker_image}")
        if refusal:
            raise SpecError(refusal)
    out = []
    for node_id in spec.topology.dedicated_controller_ids:
        svc = spec.topology.controller_service(node_id)
        out.append(
            {
                "service": svc,
                "container": spec.topology.controller_container(node_id),
                "image": spec.broker_image,
                "ip": spec.topology.controller_ip(node_id),
                "env": controller_env(spec, node_id) | monitoring_env(spec, svc),
                "volumes": [(f"{svc}-data", spec.image_profile.kafka_volume_mount)],
                "healthcheck": _tcp_check("127.0.0.1", spec.kraft.controller_port),
                "labels": _labels(spec, "controller", node_id),
                **_secure_start(spec, svc),
            }
        )
    return out


def _brokers(spec: ClusterSpec, depends_on: list[str]) -> list[dict[str, Any]]:
    """Kafka brokers (after ZooKeeper and dedicated controllers), or tansu brokers (no volume, no dependencies)."""
    profile = spec.image_profile
    out = []
    for i in spec.topology.broker_ids:
        svc = spec.topology.broker_service(i)
        port = spec.topology.broker_host_port(i)
        command: list[str] | None = None
        if spec.kafka.engine == "tansu":
            env = tansu_env(spec, i)
            vols: list[tuple[str, str]] = []
            check = _tcp_check("127.0.0.1", port) if profile.tansu_healthcheck else None
            depends: list[str] = []
        else:
            env = kafka_env(spec, i) | monitoring_env(spec, svc)
            vols = [(f"{svc}-data", profile.kafka_volume_mount)]
            check = _tcp_check(svc, spec.kafka.internal_port)
            depends = depends_on
            if spec.kafka.jmx_port is not None and profile.broker_flavor == "wurstmeister":
                command = ["bash", "-c", f"JMX_PORT={spec.kafka.jmx_port} exec {profile.broker_start_command}"]
        out.append(
            {
                "service": svc,
                "container": spec.topology.broker_container(i),
                "image": spec.broker_image,
                "ip": spec.topology.broker_ip(i),
                "command": command,
                "stop_grace_period": f"{spec.kafka.stop_grace_seconds}s",
                "depends_on": depends,
                "env": env,
                "port": f"{spec.publish.bind_address}:{port}:{port}",
                "volumes": vols,
                "healthcheck": check,
                "labels": _labels(spec, "broker", i),
                **_secure_start(spec, svc),
            }
        )
    return out


def _manager(spec: ClusterSpec, zk_services: list[str]) -> dict[str, Any] | None:
    """The clusterctl console or CMAK, when the spec enables a manager."""
    if not spec.kafka_manager.enabled:
        return None
    if spec.manager_kind == "console":
        return _console_context(spec, zk_services)
    return {
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
        "port": f"{spec.publish.bind_address}:{spec.kafka_manager.port}:{CMAK_PORT}",
        "labels": _labels(spec, "manager", 1),
        "healthcheck": None,
    }


def build_context(spec: ClusterSpec) -> dict[str, Any]:
    """Everything the compose template places, derived from the spec."""
    zookeepers = _zookeepers(spec)
    zk_services = [spec.topology.zk_service(i) for i in spec.topology.zk_ids]
    controllers = controllers_context(spec)
    brokers = _brokers(spec, zk_services + [str(c["service"]) for c in controllers])
    return {
        "cluster": spec.name,
        "project": spec.topology.project,
        "profile": spec.profile,
        "engine": spec.kafka.engine,
        "mode": spec.kafka.mode,
        "zookeepers": zookeepers,
        "controllers": controllers,
        "brokers": brokers,
        "manager": _manager(spec, zk_services),
        "spark": _spark_context(spec),
        "network": {
            "name": spec.topology.network_name,
            "subnet": spec.network.subnet,
            "gateway": spec.network.gateway_ip,
        },
        "volumes": [volume for svc in zookeepers + controllers + brokers for volume, _ in svc["volumes"]],
    }


def summarize(spec: ClusterSpec) -> list[RenderedService]:
    """Service, role, image, IP and published host ports of every rendered service."""
    if spec.swarm:
        return _summarize_stack(spec)
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


def _summarize_stack(spec: ClusterSpec) -> list[RenderedService]:
    """deploy.target swarm: no static IPs (the overlay assigns them); ports are published on the rack's host."""
    topo = spec.topology
    out = [
        RenderedService(topo.zk_service(i), topo.zk_service(i), "zookeeper", spec.zookeeper_image, "",
                        [f"{topo.zk_host(i)}:{topo.zk_host_port(i)}"], topo.zk_rack(i))
        for i in topo.zk_ids
    ]  # fmt: skip
    out += [
        RenderedService(topo.controller_service(n), topo.controller_service(n), "controller", spec.broker_image, "",
                        [], topo.controller_rack(n))
        for n in topo.dedicated_controller_ids
    ]  # fmt: skip
    out += [
        RenderedService(topo.broker_service(i), topo.broker_service(i), "broker", spec.broker_image, "",
                        [f"{topo.broker_host(i)}:{topo.broker_host_port(i)}"], topo.broker_rack(i))
        for i in topo.broker_ids
    ]  # fmt: skip
    return out
