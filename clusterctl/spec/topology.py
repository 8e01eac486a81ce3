"""Topology: every name, address, port and listener a cluster has, derived from its validated spec.

Nothing else derives them: render, runtime, the Kafka and ZooKeeper clients and the drills ask the topology.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from clusterctl.spec.sections import KRAFT_NODE_ID_BASE

if TYPE_CHECKING:
    from clusterctl.spec.model import ClusterSpec


class Topology:
    """Derived facts of one ClusterSpec (cheap: it holds the spec and computes on demand)."""

    def __init__(self, spec: ClusterSpec) -> None:
        self.spec = spec

    @property
    def project(self) -> str:
        """The compose project name."""
        return self.spec.name

    @property
    def network_name(self) -> str:
        return self.spec.network.name or f"{self.spec.name}-net"

    @property
    def zk_ids(self) -> list[int]:
        """ZooKeeper node ids; none in kraft mode."""
        return [] if self.spec.kraft_mode else list(range(1, self.spec.zookeeper.nodes + 1))

    @property
    def controller_ids(self) -> list[int]:
        """node.id of every quorum voter (kraft mode): 101.. when dedicated, brokers 1..N when combined."""
        if not self.spec.kraft_mode:
            return []
        n = self.spec.kraft.controllers
        return list(range(1, n + 1)) if self.spec.kraft.combined else [KRAFT_NODE_ID_BASE + i for i in range(1, n + 1)]

    @property
    def dedicated_controller_ids(self) -> list[int]:
        """Voters that run in their own controllerN container (kraft mode, not combined)."""
        return [] if self.spec.kraft.combined else self.controller_ids

    def controller_service(self, node_id: int) -> str:
        """The service a voter runs in: controllerN (dedicated) or kafkaN (combined)."""
        if node_id in self.broker_ids and self.spec.kraft.combined:
            return self.broker_service(node_id)
        return f"controller{node_id - KRAFT_NODE_ID_BASE}"

    def controller_container(self, node_id: int) -> str:
        return self.container_name(self.controller_service(node_id))

    def controller_ip(self, node_id: int) -> str:
        if node_id in self.broker_ids and self.spec.kraft.combined:
            return self.broker_ip(node_id)
        i = node_id - KRAFT_NODE_ID_BASE
        if self.spec.kraft.ips is not None:
            return self.spec.kraft.ips[i - 1]
        return str(self.spec.network.network.network_address + 50 + i)

    @property
    def node_services(self) -> dict[int, str]:
        """KRaft mode: node.id -> the service it runs in, for every voter and broker (empty in ZooKeeper mode)."""
        if not self.spec.kraft_mode:
            return {}
        out = {b: self.broker_service(b) for b in self.broker_ids}
        return out | {c: self.controller_service(c) for c in self.controller_ids}

    @property
    def controller_quorum_voters(self) -> str:
        """controller.quorum.voters: id@service:port of every voter."""
        port = self.spec.kraft.controller_port
        return ",".join(f"{i}@{self.controller_service(i)}:{port}" for i in self.controller_ids)

    @property
    def controller_quorum_bootstrap_servers(self) -> str:
        """controller.quorum.bootstrap.servers (kraft.quorum dynamic): service:port of every initial voter."""
        port = self.spec.kraft.controller_port
        return ",".join(f"{self.controller_service(i)}:{port}" for i in self.controller_ids)

    def controller_directory_id(self, node_id: int) -> str:
        """The directory id voter `node_id` is first formatted with (kraft.quorum dynamic; spec/quorum.py)."""
        from clusterctl.spec.quorum import directory_id

        return directory_id(self.spec.name, node_id)

    @property
    def initial_controllers(self) -> str:
        """`kafka-storage format --initial-controllers`: id@service:port:directory-id of every voter."""
        port = self.spec.kraft.controller_port
        return ",".join(
            f"{i}@{self.controller_service(i)}:{port}:{self.controller_directory_id(i)}" for i in self.controller_ids
        )

    @property
    def broker_ids(self) -> list[int]:
        return list(range(1, self.spec.kafka.brokers + 1))

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
        return list(range(1, self.spec.spark.workers + 1)) if self.spec.spark.enabled else []

    def container_name(self, service: str) -> str:
        return f"{self.spec.name}-{service}"

    def zk_container(self, zk_id: int) -> str:
        return self.container_name(self.zk_service(zk_id))

    def broker_container(self, broker_id: int) -> str:
        return self.container_name(self.broker_service(broker_id))

    def zk_ip(self, zk_id: int) -> str:
        if self.spec.zookeeper.ips is not None:
            return self.spec.zookeeper.ips[zk_id - 1]
        return str(self.spec.network.network.network_address + 10 + zk_id)

    def broker_ip(self, broker_id: int) -> str:
        if self.spec.kafka.ips is not None:
            return self.spec.kafka.ips[broker_id - 1]
        return str(self.spec.network.network.network_address + 20 + broker_id)

    @property
    def manager_ip(self) -> str:
        return self.spec.kafka_manager.ip or str(self.spec.network.network.network_address + 30)

    @property
    def spark_master_ip(self) -> str:
        return self.spec.spark.master_ip or str(self.spec.network.network.network_address + 40)

    def spark_worker_ip(self, worker_id: int) -> str:
        if self.spec.spark.worker_ips is not None:
            return self.spec.spark.worker_ips[worker_id - 1]
        return str(self.spec.network.network.network_address + 40 + worker_id)

    def static_ips(self) -> dict[str, str]:
        ips = {f"zookeeper node {i}": self.zk_ip(i) for i in self.zk_ids}
        ips.update({f"kafka broker {i}": self.broker_ip(i) for i in self.broker_ids})
        ips.update({f"kraft controller {i}": self.controller_ip(i) for i in self.dedicated_controller_ids})
        if self.spec.kafka_manager.enabled:
            ips["kafka_manager"] = self.manager_ip
        if self.spec.spark.enabled:
            ips["spark master"] = self.spark_master_ip
            ips.update({f"spark worker {i}": self.spark_worker_ip(i) for i in self.spark_worker_ids})
        return ips

    # ---- racks (deploy.target swarm): node i of a kind goes to rack (i-1) mod racks ----

    def _rack(self, index: int) -> str | None:
        racks = self.spec.deploy.racks
        return racks[(index - 1) % len(racks)].name if self.spec.swarm else None

    def zk_rack(self, zk_id: int) -> str | None:
        return self._rack(zk_id)

    def broker_rack(self, broker_id: int) -> str | None:
        """The broker's rack (its broker.rack); None on compose."""
        return self._rack(broker_id)

    def controller_rack(self, node_id: int) -> str | None:
        if node_id in self.broker_ids and self.spec.kraft.combined:
            return self.broker_rack(node_id)
        return self._rack(node_id - KRAFT_NODE_ID_BASE)

    def rack_address(self, rack: str | None) -> str:
        """Where a host-side client reaches the published ports of a rack's host (compose: `host`)."""
        for r in self.spec.deploy.racks:
            if r.name == rack:
                return r.address
        return self.host

    def broker_host(self, broker_id: int) -> str:
        return self.rack_address(self.broker_rack(broker_id))

    def broker_addresses(self) -> dict[int, str]:
        """Each broker's own host address (its rack's host and its published port), by broker id."""
        return {b: f"{self.broker_host(b)}:{self.broker_host_port(b)}" for b in self.broker_ids}

    def zk_host(self, zk_id: int) -> str:
        return self.rack_address(self.zk_rack(zk_id))

    def zk_host_port(self, zk_id: int) -> int:
        return self.spec.zookeeper.client_port + zk_id - 1

    def broker_host_port(self, broker_id: int) -> int:
        return self.spec.kafka.host_port + broker_id - 1

    def host_ports(self) -> dict[str, int]:
        ports = {f"zookeeper node {i}": self.zk_host_port(i) for i in self.zk_ids}
        ports.update({f"kafka broker {i}": self.broker_host_port(i) for i in self.broker_ids})
        if self.spec.kafka_manager.enabled:
            ports["kafka_manager"] = self.spec.kafka_manager.port
        if self.spec.spark.enabled:
            ports["spark.master_port"] = self.spec.spark.master_port
            ports["spark.ui_port"] = self.spec.spark.ui_port
        return ports

    @property
    def host(self) -> str:
        """Where clients on the host reach published ports."""
        b = self.spec.publish.bind_address
        return "127.0.0.1" if b == "0.0.0.0" else b

    @property
    def bootstrap_servers(self) -> str:
        """Host-side bootstrap list (the advertised host listener of every broker)."""
        return ",".join(f"{self.broker_host(i)}:{self.broker_host_port(i)}" for i in self.broker_ids)

    @property
    def internal_bootstrap_servers(self) -> str:
        """Bootstrap list for clients on the cluster network."""
        return ",".join(f"{self.broker_service(i)}:{self.spec.kafka.internal_port}" for i in self.broker_ids)

    @property
    def zk_connect(self) -> str:
        """Host-side ZooKeeper connect string."""
        return ",".join(f"{self.zk_host(i)}:{self.zk_host_port(i)}" for i in self.zk_ids)

    def zk_host_address(self, zk_id: int) -> tuple[str, int]:
        return self.zk_host(zk_id), self.zk_host_port(zk_id)

    @property
    def internal_zk_connect(self) -> str:
        return ",".join(f"{self.zk_service(i)}:2181" for i in self.zk_ids)

    def zk_servers(self) -> str:
        """ZOO_SERVERS for every node (official image format, ZooKeeper 3.5+ with the client port)."""
        return " ".join(f"server.{i}={self.zk_service(i)}:2888:3888;2181" for i in self.zk_ids)

    def broker_listeners(self, broker_id: int) -> str:
        """INTERNAL on the cluster network (inter-broker), EXTERNAL on the published host port.

        A combined broker-controller also listens on CONTROLLER (cluster network only, never advertised).
        """
        out = (
            f"INTERNAL://0.0.0.0:{self.spec.kafka.internal_port},EXTERNAL://0.0.0.0:{self.broker_host_port(broker_id)}"
        )
        if broker_id in self.controller_ids:
            out += f",CONTROLLER://0.0.0.0:{self.spec.kraft.controller_port}"
        return out

    def broker_advertised_listeners(self, broker_id: int) -> str:
        return (
            f"INTERNAL://{self.broker_service(broker_id)}:{self.spec.kafka.internal_port},"
            f"EXTERNAL://{self.broker_host(broker_id)}:{self.broker_host_port(broker_id)}"
        )

    @property
    def spark_master_url(self) -> str:
        """Where a driver on this host reaches the standalone master (its published port)."""
        return f"spark://{self.host}:{self.spec.spark.master_port}"

    @property
    def spark_shared_dir(self) -> str:
        return self.spec.spark.shared_dir or f"/tmp/clusterctl-spark/{self.spec.name}"

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
        return Path("compose") / self.spec.name

    @property
    def compose_file(self) -> Path:
        """The rendered file: docker-compose.yml, or docker-stack.yml for deploy.target swarm."""
        return self.compose_dir / ("docker-stack.yml" if self.spec.swarm else "docker-compose.yml")
