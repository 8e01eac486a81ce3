"""Boot a registry profile's cluster on real Kafka from exactly the config files its images would write.

The profile's compose file is rendered by the real CLI, `docker compose config` resolves it (the KRaft cluster
id from .env), clusterctl.compose.contracts derives every node's server.properties / zoo.cfg from that
environment, and a proof compose file (next to the rendered one, which stays as rendered) runs each node on
the offline images with its derived file mounted:

- brokers and controllers: clusterctl/kafka:<version>, `kafka-server-start.sh /proof/server.properties`
  (KRaft: `kafka-storage.sh format` with CLUSTER_ID first, as cp-kafka's `ensure` does; apache/kafka: as its
  jvm/launch does, `format --cluster-id=<the derived id>`, an "already formatted" answer tolerated, JMX_PORT
  exported for both);
- ZooKeeper: clusterctl/zookeeper:3.8.0 with the derived zoo.cfg mounted as /conf/zoo.cfg (the entrypoint
  writes myid from ZOO_MY_ID, as the official image does).

Substituted because it cannot apply here (SUBSTITUTIONS): the image (no pull), so the Kafka version (the
session's, from Maven Central; apache: its tag's, clusterctl/kafka:4.4.0 for apache/kafka:4.4.0; wurstmeister's
script edits the key lines of its own Kafka 2.8.1 config/server.properties, as
contracts.KAFKA_281_SERVER_PROPERTIES has them), the user (root instead of the
images' appuser/kafka user) and the start command (the images' launch scripts end in the same
`kafka-server-start.sh <file>`; JMX_PORT and KAFKA_HEAP_OPTS reach it as they do).
"""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml
from _runtime_helpers import run_group

from clusterctl.compose.contracts import NodeConfig, derive
from clusterctl.compose.kafkarules import check_cluster
from clusterctl.testing import cleanup, ownership

SUBSTITUTIONS = (
    "image: clusterctl/kafka:<version> and clusterctl/zookeeper:3.8.0 instead of the registry images",
    "Kafka version: the session's, from Maven Central (wurstmeister: the script edits its Kafka 2.8.1 "
    "server.properties' key lines; apache: the profile tag's version, from Maven Central)",
    "user: root in the container instead of the images' own user",
    "start: kafka-server-start.sh on the derived file (+ kafka-storage.sh format in KRaft), as the images end",
)
PROPS_IN_CONTAINER = "/proof/server.properties"


def _apache_launch(node: NodeConfig, jmx_port: int | None) -> list[str]:
    """apache/kafka's jvm/launch lines 32-68 on the derived file: JMX_PORT exported, the storage formatted with
    the derived CLUSTER_ID (an "already formatted" answer is fine: a restart), then the server."""
    jmx = f"export JMX_PORT={jmx_port}; " if jmx_port is not None and node.role == "broker" else ""
    fmt = f"kafka-storage.sh format --cluster-id={node.cluster_id} -c {PROPS_IN_CONTAINER}"
    return ["bash", "-c", f'{jmx}result=$$({fmt} 2>&1) || echo "$$result" | grep -i "already formatted" || '
            f'{{ echo "$$result"; exit 1; }}; exec kafka-server-start.sh {PROPS_IN_CONTAINER}']  # fmt: skip


def _kafka_command(node: NodeConfig, jmx_port: int | None) -> list[str]:
    if node.contract == "apache-kafka":
        return _apache_launch(node, jmx_port)
    start = f"exec kafka-server-start.sh {PROPS_IN_CONTAINER}"
    if jmx_port is not None and node.role == "broker":
        start = f"JMX_PORT={jmx_port} {start}"
    if "process.roles" in node.properties:
        start = f'kafka-storage.sh format --ignore-formatted -t "$$CLUSTER_ID" -c {PROPS_IN_CONTAINER} && {start}'
    return ["bash", "-c", start]


def proof_compose(
    resolved: dict[str, Any], nodes: list[NodeConfig], out: Path, kafka_image: str, jmx: int | None
) -> Path:
    """The resolved compose model with every node on the offline images and its derived file mounted."""
    services = resolved["services"]
    services.pop("kafka-manager", None)
    for node in nodes:
        svc = services[node.service]
        host_file = out / f"{node.service}.{'zoo.cfg' if node.role == 'zookeeper' else 'properties'}"
        host_file.write_text(node.text)
        volumes = [v for v in svc.get("volumes", []) if v.get("type") == "volume"]
        if node.role == "zookeeper":
            svc["image"] = "clusterctl/zookeeper:3.8.0"
            target = "/conf/zoo.cfg"
        else:
            svc["image"] = kafka_image
            svc["command"] = _kafka_command(node, jmx)
            svc["user"] = "root"
            target = PROPS_IN_CONTAINER
        svc["volumes"] = [*volumes, {"type": "bind", "source": str(host_file), "target": target, "read_only": True}]
        svc["pull_policy"] = "never"
    path = out / "proof-compose.json"
    path.write_text(json.dumps(resolved))
    return path


def boot(compose_file: Path, kafka_image: str, jmx: int | None) -> tuple[Path, list[NodeConfig], float]:
    """Derive, check, write the proof compose file and bring it up; (proof file, nodes, seconds to healthy)."""
    resolved = json.loads(
        subprocess.run(
            ["docker", "compose", "-f", str(compose_file), "config", "--format", "json"],
            capture_output=True, text=True, check=True, timeout=60,
        ).stdout
    )  # fmt: skip
    nodes = derive(yaml.safe_dump(resolved))  # wurstmeister: the key lines of its own Kafka 2.8.1 server.properties
    assert check_cluster(nodes) == [], check_cluster(nodes)
    out = compose_file.parent / "proof"
    out.mkdir(exist_ok=True)
    proof = proof_compose(resolved, nodes, out, kafka_image, jmx)
    start = time.monotonic()
    try:  # a start that fails or is interrupted (SIGTERM to pytest) leaves nothing: its volumes would be reused
        up = run_group(["docker", "compose", "-f", str(proof), "up", "-d", "--wait", "--wait-timeout", "240"],
                       timeout=300)  # fmt: skip
        if up.returncode != 0:
            logs = subprocess.run(["docker", "compose", "-f", str(proof), "logs", "--tail", "30"],
                                  capture_output=True, text=True, timeout=60)  # fmt: skip
            raise AssertionError(f"proof cluster not healthy: {up.stderr[-2000:]}\n{logs.stdout[-6000:]}")
    except BaseException:
        down(proof)
        raise
    return proof, nodes, round(time.monotonic() - start, 1)


def down(proof: Path) -> None:
    """`docker compose down --volumes`, then anything of the project still there (by its label)."""
    with cleanup.signals_held():
        subprocess.run(["docker", "compose", "-f", str(proof), "down", "--volumes", "--timeout", "30"],
                       capture_output=True, text=True, timeout=300)  # fmt: skip
        ownership.remove_project(json.loads(proof.read_text())["name"])
