"""Spec → compose/<name>/docker-compose.yml (+ .env with the CMAK secret or console token), written atomically.

All values are derived here from the validated spec; templates/docker-compose.yml.j2 only loops and
places them. A render is checked in a private staging directory, then each file is written beside
its target and renamed into place, so a failed render leaves nothing half-written, and nothing that
clusterctl did not write is ever deleted.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import secrets
import shutil
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jinja2
import yaml

from clusterctl.errors import ClusterctlError
from clusterctl.spec import (
    SPARK_MASTER_PORT,
    SPARK_UI_PORT,
    SPARK_WORKER_PORT,
    SPARK_WORKER_UI_PORT,
    ClusterSpec,
)

TEMPLATES_DIR = Path(__file__).resolve().parent / "templates"  # a link to the repository's templates/
COMPOSE_TEMPLATE = "docker-compose.yml.j2"
COMPOSE_FILE = "docker-compose.yml"
ENV_FILE = ".env"
SECRET_VAR = "CMAK_APPLICATION_SECRET"
CONSOLE_TOKEN_VAR = "CLUSTERCTL_CONSOLE_TOKEN"  # the console's access token (kafka_manager.kind console)
CONSOLE_PORT = 9000  # inside the console container
CLUSTER_ID_VAR = "KAFKA_CLUSTER_ID"  # kraft mode: the id every node formats its storage with
ZK_4LW = "srvr,mntr,ruok,stat,conf,cons,isro,envi,wchs"
ZK_CLIENT_PORT = 2181
CMAK_PORT = 9000

_SECRET_RE = re.compile(rf"^{SECRET_VAR}=([0-9a-f]{{32,}})\s*$", re.MULTILINE)
_TOKEN_RE = re.compile(rf"^{CONSOLE_TOKEN_VAR}=([0-9a-f]{{32,}})\s*$", re.MULTILINE)
_CLUSTER_ID_RE = re.compile(rf"^{CLUSTER_ID_VAR}=([A-Za-z0-9_-]{{22}})\s*$", re.MULTILINE)


class RenderError(ClusterctlError):
    """The rendered output could not be produced or was rejected; nothing was written."""


@dataclass
class RenderedService:
    service: str
    container: str
    role: str  # zookeeper | controller | broker | manager | spark-master | spark-worker
    image: str
    ip: str
    host_ports: list[str]


@dataclass
class RenderResult:
    cluster: str
    profile: str
    engine: str
    compose_file: str
    files: list[str]
    network: str
    subnet: str
    gateway: str
    services: list[RenderedService] = field(default_factory=list)
    secret: str = "none"  # created | kept | none
    validated_by_compose: bool = False
    mode: str = "zookeeper"
    cluster_id: str = "none"  # kraft mode: created | kept


def _q(value: Any) -> str:
    """A YAML-safe scalar or flow list (JSON is valid YAML). Spec values cannot contain `$` (validated)."""
    return json.dumps(value)


def _labels(spec: ClusterSpec, role: str, ident: int) -> dict[str, str]:
    return {"io.clusterctl.cluster": spec.name, "io.clusterctl.role": role, "io.clusterctl.id": str(ident)}


def _zk_env(spec: ClusterSpec, zk_id: int) -> dict[str, str]:
    z = spec.zookeeper
    return {
        "ZOO_MY_ID": str(zk_id),
        "ZOO_SERVERS": spec.zk_servers(),
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
        "KAFKA_CONTROLLER_QUORUM_VOTERS": spec.controller_quorum_voters,
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
        roles = "broker,controller" if broker_id in spec.controller_ids else "broker"
        env = _kraft_env(spec, broker_id, roles)
    else:
        env = {"KAFKA_BROKER_ID": str(broker_id), "KAFKA_ZOOKEEPER_CONNECT": spec.internal_zk_connect}
    env |= {
        "KAFKA_LISTENERS": spec.broker_listeners(broker_id),
        "KAFKA_ADVERTISED_LISTENERS": spec.broker_advertised_listeners(broker_id),
    }
    if profile.broker_flavor == "wurstmeister":
        # start-kafka.sh adds the INTERNAL listener itself (INTERNAL://kafkaN:<internal_port>, listened on and
        # advertised); declaring it in KAFKA_LISTENERS too would make it append a second, broken one.
        host_port = spec.broker_host_port(broker_id)
        env["KAFKA_LISTENERS"] = f"EXTERNAL://0.0.0.0:{host_port}"
        env["KAFKA_ADVERTISED_LISTENERS"] = f"EXTERNAL://{spec.host}:{host_port}"
        env["KAFKA_PROTOCOL_NAME"] = "INTERNAL"
        env["KAFKA_HOST_NAME"] = spec.broker_service(broker_id)
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
        env["KAFKA_JMX_HOSTNAME"] = spec.broker_service(broker_id)
    return env


def _tansu_env(spec: ClusterSpec, broker_id: int) -> dict[str, str]:
    port = spec.broker_host_port(broker_id)
    return {
        "CLUSTER_ID": spec.name,
        "LISTENER_URL": f"tcp://0.0.0.0:{port}",
        "ADVERTISED_LISTENER_URL": f"tcp://{spec.host}:{port}",
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
    master_svc = spec.spark_master_service
    master_url = f"spark://{master_svc}:{SPARK_MASTER_PORT}"
    master = {
        "service": master_svc,
        "container": spec.container_name(master_svc),
        "image": spec.spark_image,
        "ip": spec.spark_master_ip,
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
    shared = spec.spark_shared_dir
    relays = " ".join(f"{listen}={target}" for listen, target in spec.spark_kafka_relays())
    workers = []
    for i in spec.spark_worker_ids:
        svc = spec.spark_worker_service(i)
        workers.append(
            {
                "service": svc,
                "container": spec.container_name(svc),
                "image": spec.spark_image,
                "ip": spec.spark_worker_ip(i),
                "command": [
                    SPARK_CLASS,
                    "org.apache.spark.deploy.worker.Worker",
                    # executors advertise this address: the driver on the host reaches an IP, not a name
                    "--host",
                    spec.spark_worker_ip(i),
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
                "healthcheck": _tcp_check(spec.spark_worker_ip(i), SPARK_WORKER_PORT),
                "labels": _labels(spec, "spark-worker", i),
            }
        )
    return {"master": master, "workers": workers}


def _console_context(spec: ClusterSpec, zk_services: list[str]) -> dict[str, Any]:
    """kafka-manager as clusterctl's console: the same pages as `clusterctl ui`, on the cluster network."""
    tansu = spec.kafka.engine == "tansu"
    # tansu advertises only the host address: reach it like the spark workers do, through a loopback relay
    relays = " ".join(f"{listen}={target}" for listen, target in spec.spark_kafka_relays()) if tansu else ""
    bootstrap = spec.bootstrap_servers if relays else spec.internal_bootstrap_servers
    command = ["python3", "-m", "clusterctl.console", "--host", "0.0.0.0", "--port", str(CONSOLE_PORT),
               "--bootstrap-server", bootstrap, "--zookeeper", spec.internal_zk_connect, "--cluster", spec.name,
               "--exposed-on", spec.publish.bind_address]  # fmt: skip
    env = {CONSOLE_TOKEN_VAR: f"${{{CONSOLE_TOKEN_VAR}:?missing: run clusterctl render to create .env}}"}
    if relays:
        env["KAFKA_LOOPBACK_RELAY"] = relays
    health = f"import urllib.request as u; u.urlopen('http://127.0.0.1:{CONSOLE_PORT}/healthz', timeout=3)"
    return {
        "service": spec.manager_service,
        "container": spec.container_name(spec.manager_service),
        "image": spec.kafka_manager_image,
        "ip": spec.manager_ip,
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
    for i in spec.zk_ids:
        svc = spec.zk_service(i)
        vols: list[tuple[str, str]] = [(f"{svc}-data", profile.zk_data_dir), (f"{svc}-datalog", profile.zk_datalog_dir)]
        volumes += [v for v, _ in vols]
        zookeepers.append(
            {
                "service": svc,
                "container": spec.zk_container(i),
                "image": spec.zookeeper_image,
                "ip": spec.zk_ip(i),
                "env": _zk_env(spec, i),
                "port": f"{bind}:{spec.zk_host_port(i)}:{ZK_CLIENT_PORT}",
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
    zk_services = [spec.zk_service(i) for i in spec.zk_ids]
    controllers: list[dict[str, Any]] = []
    for node_id in spec.dedicated_controller_ids:
        svc = spec.controller_service(node_id)
        vols = [(f"{svc}-data", profile.kafka_volume_mount)]
        volumes += [v for v, _ in vols]
        controllers.append(
            {
                "service": svc,
                "container": spec.controller_container(node_id),
                "image": spec.broker_image,
                "ip": spec.controller_ip(node_id),
                "env": _controller_env(spec, node_id),
                "volumes": vols,
                "healthcheck": _tcp_check("127.0.0.1", spec.kraft.controller_port),
                "labels": _labels(spec, "controller", node_id),
            }
        )
    brokers = []
    tansu = spec.kafka.engine == "tansu"
    for i in spec.broker_ids:
        svc = spec.broker_service(i)
        port = spec.broker_host_port(i)
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
                "container": spec.broker_container(i),
                "image": spec.broker_image,
                "ip": spec.broker_ip(i),
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
            "service": spec.manager_service,
            "container": spec.container_name(spec.manager_service),
            "image": spec.kafka_manager_image,
            "ip": spec.manager_ip,
            "depends_on": zk_services,
            "env": {
                "ZK_HOSTS": spec.internal_zk_connect,
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
        "project": spec.project,
        "profile": spec.profile,
        "engine": spec.kafka.engine,
        "mode": spec.kafka.mode,
        "zookeepers": zookeepers,
        "controllers": controllers,
        "brokers": brokers,
        "manager": manager,
        "spark": _spark_context(spec),
        "network": {"name": spec.network_name, "subnet": spec.network.subnet, "gateway": spec.network.gateway_ip},
        "volumes": volumes,
    }


def _environment(templates_dir: Path) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["q"] = _q
    return env


def render_compose(spec: ClusterSpec, templates_dir: Path = TEMPLATES_DIR) -> str:
    """The compose file text (deterministic for a given spec)."""
    try:
        text = _environment(templates_dir).get_template(COMPOSE_TEMPLATE).render(**build_context(spec))
        yaml.safe_load(text)
    except jinja2.TemplateError as exc:
        raise RenderError(f"template {COMPOSE_TEMPLATE}: {' '.join(str(exc).split())}") from None
    except yaml.YAMLError as exc:
        raise RenderError(f"rendered {COMPOSE_FILE} is not valid YAML ({' '.join(str(exc).split())[:200]})") from None
    return text


def existing_console_token(out_dir: Path) -> str | None:
    """The console token persisted by an earlier render, if any."""
    return _env_value(out_dir, _TOKEN_RE)


def _env_value(out_dir: Path, pattern: re.Pattern[str]) -> str | None:
    with contextlib.suppress(OSError, UnicodeDecodeError):
        m = pattern.search((out_dir / ENV_FILE).read_text(encoding="utf-8"))
        if m:
            return m.group(1)
    return None


def existing_secret(out_dir: Path) -> str | None:
    """The CMAK secret persisted by an earlier render, if any."""
    return _env_value(out_dir, _SECRET_RE)


def existing_cluster_id(out_dir: Path) -> str | None:
    """The KRaft cluster id persisted by an earlier render, if any."""
    return _env_value(out_dir, _CLUSTER_ID_RE)


def new_cluster_id() -> str:
    """A Kafka cluster id: 16 random bytes, base64url without padding (Kafka's Uuid; never starting with '-')."""
    while True:
        text = base64.urlsafe_b64encode(secrets.token_bytes(16)).decode("ascii").rstrip("=")
        if not text.startswith("-"):
            return text


def _write(path: Path, text: str, mode: int = 0o644) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.chmod(path, mode)  # umask must not widen or narrow what we asked for


def compose_config_check(compose_file: Path) -> bool:
    """`docker compose -f FILE config -q` (engine-less validation); False when compose v2 is absent."""
    if not shutil.which("docker"):
        return False
    try:
        proc = subprocess.run(
            ["docker", "compose", "-f", str(compose_file.resolve()), "config", "-q"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=compose_file.parent,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    if proc.returncode != 0:
        out = (proc.stderr or proc.stdout).strip()
        if "is not a docker command" in out or "unknown command" in out:
            return False
        last = out.splitlines()[-1] if out else "(no output)"
        raise RenderError(f"docker compose rejected the rendered file: {last[:300]}")
    return True


MANIFEST_FILE = ".clusterctl-render.json"
RENDER_HEADER = "# Rendered by `clusterctl render`"


def rendered_files(out_dir: Path) -> list[str] | None:
    """The files an earlier render wrote into `out_dir`; None when clusterctl did not render it.

    A manifest names them; a directory rendered before manifests existed is recognised by its
    compose file's header.
    """
    try:
        data = json.loads((out_dir / MANIFEST_FILE).read_text(encoding="utf-8"))
        return [f for f in data.get("files", []) if isinstance(f, str) and f and "/" not in f and f not in (".", "..")]
    except FileNotFoundError:
        pass
    except (OSError, ValueError, AttributeError):
        return []  # our manifest, unreadable: ours, but delete nothing on its word
    try:
        with (out_dir / COMPOSE_FILE).open(encoding="utf-8") as fh:
            if fh.readline().startswith(RENDER_HEADER):
                return [COMPOSE_FILE, ENV_FILE]
    except (OSError, UnicodeDecodeError):
        pass
    return None


def _atomic_write(path: Path, text: str, mode: int) -> None:
    """Write beside `path`, then rename over it: readers see the old file or the new one, never half."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def render(
    spec: ClusterSpec,
    out_dir: Path | None = None,
    templates_dir: Path = TEMPLATES_DIR,
    validate: bool = True,
    protect: Path | None = None,
) -> RenderResult:
    """Render into `out_dir` (default compose/<name>), each file written atomically.

    The output is checked (`docker compose config`) in a private staging directory first. Nothing is
    deleted that clusterctl did not write: a non-empty directory that an earlier render did not
    produce is refused, other files in a rendered directory are left alone, and `protect` (the spec
    file) is never written over.
    """
    out_dir = Path(out_dir) if out_dir is not None else spec.compose_dir
    if out_dir.exists() and not out_dir.is_dir():
        raise RenderError(f"{out_dir} exists and is not a directory")
    text = render_compose(spec, templates_dir)

    previous: list[str] = []
    try:
        non_empty = out_dir.is_dir() and any(out_dir.iterdir())
    except OSError as exc:
        raise RenderError(f"cannot read {out_dir}: {exc.strerror or exc}") from None
    if non_empty:
        owned = rendered_files(out_dir)
        if owned is None:
            raise RenderError(
                f"{out_dir} is not empty and was not written by clusterctl render; refusing to write into it",
                hint="choose a new or empty directory with --output-dir",
            )
        previous = owned

    # one secret per kind: CMAK's application secret, or the console's access token
    console = spec.kafka_manager.enabled and spec.manager_kind == "console"
    secret_var = CONSOLE_TOKEN_VAR if console else SECRET_VAR
    secret = existing_console_token(out_dir) if console else existing_secret(out_dir)
    secret_state = "kept" if secret else "none"
    if spec.kafka_manager.enabled and secret is None:
        secret, secret_state = secrets.token_hex(32), "created"
    what = "console access token" if console else "CMAK application secret"
    # kept across renders: a node whose storage was formatted with another id refuses to start
    cluster_id = existing_cluster_id(out_dir)
    cluster_id_state = "kept" if cluster_id else "none"
    if spec.kraft_mode and cluster_id is None:
        cluster_id, cluster_id_state = new_cluster_id(), "created"
    files: dict[str, tuple[str, int]] = {COMPOSE_FILE: (text, 0o644)}
    env_lines = []
    if secret is not None:
        env_lines.append(f"# {what}, generated once for cluster {spec.name}\n{secret_var}={secret}\n")
    if cluster_id is not None:
        env_lines.append(f"# KRaft cluster id, generated once for cluster {spec.name}\n{CLUSTER_ID_VAR}={cluster_id}\n")
    if env_lines:
        files[ENV_FILE] = ("".join(env_lines), 0o600)
    if protect is not None:
        for name in [*files, MANIFEST_FILE]:
            target = out_dir / name
            if target.exists() and target.resolve() == protect.resolve():
                raise RenderError(f"rendering into {out_dir} would overwrite the spec file {protect}")

    staging = Path(tempfile.mkdtemp(prefix="clusterctl-render-"))
    try:
        for name, (content, mode) in files.items():
            _write(staging / name, content, mode)
        validated = compose_config_check(staging / COMPOSE_FILE) if validate else False
    finally:
        shutil.rmtree(staging, ignore_errors=True)

    created = [p for p in [out_dir, *out_dir.parents] if not p.exists()]  # innermost first
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        for name, (content, mode) in files.items():
            _atomic_write(out_dir / name, content, mode)
        for stale in sorted(set(previous) - set(files)):  # written by an earlier render, not produced now
            with contextlib.suppress(FileNotFoundError, IsADirectoryError):
                (out_dir / stale).unlink()
        manifest = {"cluster": spec.name, "files": sorted(files)}
        _atomic_write(out_dir / MANIFEST_FILE, json.dumps(manifest, indent=2) + "\n", 0o644)
    except OSError as exc:
        for p in created:
            with contextlib.suppress(OSError):
                p.rmdir()
        raise RenderError(f"cannot write to {out_dir}: {exc.strerror or exc}") from None
    return RenderResult(
        cluster=spec.name,
        profile=spec.profile,
        engine=spec.kafka.engine,
        compose_file=str(out_dir / COMPOSE_FILE),
        files=[str(out_dir / f) for f in files],
        network=spec.network_name,
        subnet=spec.network.subnet,
        gateway=spec.network.gateway_ip,
        services=summarize(spec),
        secret=secret_state,
        validated_by_compose=validated,
        mode=spec.kafka.mode,
        cluster_id=cluster_id_state,
    )


def summarize(spec: ClusterSpec) -> list[RenderedService]:
    """Service, role, image, IP and published host ports of every rendered service."""
    host = spec.publish.bind_address
    out = [
        RenderedService(
            spec.zk_service(i),
            spec.zk_container(i),
            "zookeeper",
            spec.zookeeper_image,
            spec.zk_ip(i),
            [f"{host}:{spec.zk_host_port(i)}"],
        )
        for i in spec.zk_ids
    ]
    out += [
        RenderedService(
            spec.controller_service(i),
            spec.controller_container(i),
            "controller",
            spec.broker_image,
            spec.controller_ip(i),
            [],
        )
        for i in spec.dedicated_controller_ids
    ]
    out += [
        RenderedService(
            spec.broker_service(i),
            spec.broker_container(i),
            "broker",
            spec.broker_image,
            spec.broker_ip(i),
            [f"{host}:{spec.broker_host_port(i)}"],
        )
        for i in spec.broker_ids
    ]
    if spec.kafka_manager.enabled:
        out.append(
            RenderedService(
                spec.manager_service,
                spec.container_name(spec.manager_service),
                "manager",
                str(spec.kafka_manager_image),
                spec.manager_ip,
                [f"{host}:{spec.kafka_manager.port}"],
            )
        )
    if spec.spark.enabled:
        out.append(
            RenderedService(
                spec.spark_master_service,
                spec.container_name(spec.spark_master_service),
                "spark-master",
                spec.spark_image,
                spec.spark_master_ip,
                [f"{host}:{spec.spark.master_port}", f"{host}:{spec.spark.ui_port}"],
            )
        )
        out += [
            RenderedService(
                spec.spark_worker_service(i),
                spec.container_name(spec.spark_worker_service(i)),
                "spark-worker",
                spec.spark_image,
                spec.spark_worker_ip(i),
                [],
            )
            for i in spec.spark_worker_ids
        ]
    return out
