"""What the swarm stack template places (deploy.target swarm): one service per ZooKeeper node, controller and
broker, each pinned to its rack, on an attachable overlay network.

Choices (docs/swarm.md explains them):
- ports are published in host mode on the node the task runs on, and each rack's address is what its
  brokers advertise to host-side clients; the ingress mesh would route a client through any node, so
  losing the node a client happens to name would cut it off from every broker;
- endpoint_mode dnsrr: a service name resolves to its task's address (no virtual IP; host mode needs none);
- no container healthcheck (the images' own are disabled): the swarm replaces unhealthy tasks, which would
  fight partition drills and kill a ZooKeeper node still waiting for its quorum;
  `up` waits for real health (quorum, registrations, controller) itself;
- restart on any exit after a delay, never elsewhere than the rack: a task comes back on its host (and
  its volume) when the host does; a broker never moves to a host without its data.
"""

from __future__ import annotations

from typing import Any

from clusterctl.compose.context import ZK_CLIENT_PORT, _labels
from clusterctl.compose.environment import controller_env, kafka_env, tansu_env, zk_env
from clusterctl.spec.deploy import RACK_LABEL
from clusterctl.spec.model import ClusterSpec

RESTART_DELAY_S = 10


def _service(
    spec: ClusterSpec,
    svc: str,
    rack: str | None,
    role: str,
    ident: int,
    **fields: Any,
) -> dict[str, Any]:
    labels = _labels(spec, role, ident) | {"io.clusterctl.rack": str(rack)}
    return {
        "service": svc,
        "hostname": svc,
        "rack": rack,
        "constraint": f"node.labels.{RACK_LABEL} == {rack}",
        "labels": labels,
        "command": None,
        "ports": [],
        "volumes": [],
        "stop_grace_period": "30s",
        **fields,
    }


def _zookeepers(spec: ClusterSpec) -> list[dict[str, Any]]:
    topo, profile = spec.topology, spec.image_profile
    out = []
    for i in topo.zk_ids:
        svc = topo.zk_service(i)
        out.append(
            _service(
                spec, svc, topo.zk_rack(i), "zookeeper", i,
                image=spec.zookeeper_image,
                env=zk_env(spec, i),
                ports=[(topo.zk_host_port(i), ZK_CLIENT_PORT)],
                volumes=[(f"{svc}-data", profile.zk_data_dir), (f"{svc}-datalog", profile.zk_datalog_dir)],
            )
        )  # fmt: skip
    return out


def _controllers(spec: ClusterSpec) -> list[dict[str, Any]]:
    topo = spec.topology
    return [
        _service(
            spec, topo.controller_service(n), topo.controller_rack(n), "controller", n,
            image=spec.broker_image,
            env=controller_env(spec, n),
            volumes=[(f"{topo.controller_service(n)}-data", spec.image_profile.kafka_volume_mount)],
        )
        for n in topo.dedicated_controller_ids
    ]  # fmt: skip


def _brokers(spec: ClusterSpec) -> list[dict[str, Any]]:
    topo, profile = spec.topology, spec.image_profile
    out = []
    for i in topo.broker_ids:
        svc, port = topo.broker_service(i), topo.broker_host_port(i)
        tansu = spec.kafka.engine == "tansu"
        command = None
        if not tansu and spec.kafka.jmx_port is not None and profile.broker_flavor == "wurstmeister":
            command = ["bash", "-c", f"JMX_PORT={spec.kafka.jmx_port} exec {profile.broker_start_command}"]
        out.append(
            _service(
                spec, svc, topo.broker_rack(i), "broker", i,
                image=spec.broker_image,
                env=tansu_env(spec, i) if tansu else kafka_env(spec, i),
                command=command,
                ports=[(port, port)],
                volumes=[] if tansu else [(f"{svc}-data", profile.kafka_volume_mount)],
                stop_grace_period=f"{spec.kafka.stop_grace_seconds}s",
            )
        )  # fmt: skip
    return out


def build_stack_context(spec: ClusterSpec) -> dict[str, Any]:
    """Everything the stack template places, derived from the spec."""
    services = _zookeepers(spec) + _controllers(spec) + _brokers(spec)
    return {
        "cluster": spec.name,
        "profile": spec.profile,
        "engine": spec.kafka.engine,
        "mode": spec.kafka.mode,
        "racks": [r.name for r in spec.deploy.racks],
        "services": services,
        "restart_delay": f"{RESTART_DELAY_S}s",
        "network": {
            "name": spec.topology.network_name,
            "subnet": spec.network.subnet,
            "encrypted": spec.deploy.encrypted,
        },
        "volumes": [volume for svc in services for volume, _ in svc["volumes"]],
    }
