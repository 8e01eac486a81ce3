"""`monitoring`: each Kafka node's metrics over HTTP, from the Prometheus JMX exporter java agent.

The agent (io.prometheus.jmx:jmx_prometheus_javaagent, from Maven Central) and the rule file we own
(templates/monitoring/jmx-exporter.yaml) are bind-mounted read-only into every broker and dedicated controller;
the agent listens on `exporter_port` on the cluster network only: nothing is published on the host. It is loaded
through KAFKA_JMX_OPTS, which the image's launcher passes to the JVM only with JMX_PORT, and the entrypoint sets
JMX_PORT for the server process alone: a CLI tool run with `docker exec` never starts a second agent on the same
port (the JMX_PORT pitfall).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field

from clusterctl.spec.sections import MIN_HOST_PORT, _Model

if TYPE_CHECKING:
    from clusterctl.spec.model import ClusterSpec

# the newest io.prometheus.jmx:jmx_prometheus_javaagent that Maven Central serves here (checked 2026-11-29)
JMX_EXPORTER_VERSION = "1.0.1"
RULES_FILE = "jmx-exporter.yaml"  # written by render beside the compose file
AGENT_MOUNT = "/opt/clusterctl/jmx_prometheus_javaagent.jar"
RULES_MOUNT = "/etc/clusterctl/jmx-exporter.yaml"


class MonitoringSpec(_Model):
    """Each Kafka node's JMX exporter agent (off by default)."""

    enabled: bool = Field(default=False, description="run the JMX exporter agent in every broker and controller")
    exporter_port: int = Field(
        default=7071, ge=MIN_HOST_PORT, le=65535, description="the agent's HTTP port in each node (never published)"
    )
    exporter_version: str = Field(
        default=JMX_EXPORTER_VERSION,
        pattern=r"^\d{1,3}\.\d{1,3}\.\d{1,3}$",
        description="io.prometheus.jmx:jmx_prometheus_javaagent version (resolved with Maven on `up`)",
    )


@dataclass(frozen=True)
class ExporterTarget:
    """One node's exporter: the node as Kafka names it, and where the host reaches it (the container's IP)."""

    node_id: int
    role: str  # broker | controller | broker,controller
    service: str
    url: str


def agent_dir() -> Path:
    """Where `up` lays the agent jar (beside the assembled Kafka installations)."""
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "clusterctl" / "jmx-exporter"


def agent_jar(version: str) -> Path:
    return agent_dir() / f"jmx_prometheus_javaagent-{version}.jar"


def check_monitoring(spec: ClusterSpec) -> None:
    """Cross-section checks of `monitoring` (ValueError, one line)."""
    m = spec.monitoring
    if not m.enabled:
        return
    if spec.kafka.engine != "kafka" or spec.profile != "offline" or spec.images.kafka:
        raise ValueError(
            "monitoring.enabled needs profile offline, engine kafka and no images.kafka (the agent is loaded by "
            "clusterctl/kafka's launcher)"
        )
    if spec.kafka.jmx_port is None:
        raise ValueError("monitoring.enabled needs kafka.jmx_port: the agent is loaded with the broker's JMX options")
    if spec.swarm:
        raise ValueError("monitoring.enabled is not supported with deploy.target swarm yet")
    taken = {"kafka.internal_port": spec.kafka.internal_port, "kafka.jmx_port": spec.kafka.jmx_port}
    if spec.kraft_mode:
        taken["kraft.controller_port"] = spec.kraft.controller_port
    taken |= {f"kafka broker {i} host listener": spec.topology.broker_host_port(i) for i in spec.topology.broker_ids}
    for who, port in taken.items():
        if port == m.exporter_port:
            raise ValueError(f"monitoring.exporter_port {m.exporter_port} clashes with {who}")


def exporter_targets(spec: ClusterSpec) -> list[ExporterTarget]:
    """Every Kafka node's exporter, brokers first (by id), then dedicated controllers."""
    topo, port = spec.topology, spec.monitoring.exporter_port
    out = []
    for b in topo.broker_ids:
        role = "broker,controller" if spec.kraft_mode and b in topo.controller_ids else "broker"
        out.append(ExporterTarget(b, role, topo.broker_service(b), f"http://{topo.broker_ip(b)}:{port}/metrics"))
    for c in topo.dedicated_controller_ids:
        ip = topo.controller_ip(c)
        out.append(ExporterTarget(c, "controller", topo.controller_service(c), f"http://{ip}:{port}/metrics"))
    return out


def jmx_opts(spec: ClusterSpec, hostname: str) -> str:
    """KAFKA_JMX_OPTS: the image's own JMX options (the entrypoint's default) and the agent."""
    jmx = spec.kafka.jmx_port
    return (
        "-Dcom.sun.management.jmxremote=true -Dcom.sun.management.jmxremote.authenticate=false "
        f"-Dcom.sun.management.jmxremote.ssl=false -Djava.rmi.server.hostname={hostname} "
        f"-Dcom.sun.management.jmxremote.rmi.port={jmx} "
        f"-javaagent:{AGENT_MOUNT}=0.0.0.0:{spec.monitoring.exporter_port}:{RULES_MOUNT}"
    )
