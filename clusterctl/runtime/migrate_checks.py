"""The waits of a ZooKeeper → KRaft migration: a node back after its restart, and each phase's done-check.

Phase 2's done-check reads the active controller's log for the line Kafka's migration guide names ("When the
migration is complete, an INFO level log can be observed on the active controller"), and corroborates it
with ZooKeeper's /migration znode, whose kraft_metadata_offset the controller sets once the metadata is copied.
"""

from __future__ import annotations

from dataclasses import dataclass

from clusterctl.errors import ClusterctlError
from clusterctl.kafka.brokers import metadata_brokers
from clusterctl.kafka.kraft import quorum as kraft
from clusterctl.runtime import docker as dk
from clusterctl.spec.model import ClusterSpec
from clusterctl.wait import wait_until
from clusterctl.zookeeper import client as zk

MIGRATED_LINE = "Completed migration of metadata from ZooKeeper to KRaft"  # KRaftMigrationDriver, Kafka 3.7
LOG_TAIL = 5000


def _retry(exc: BaseException) -> bool:
    return isinstance(exc, ClusterctlError)


def cluster_id(spec: ClusterSpec) -> str:
    """The ZooKeeper-mode cluster's id (/cluster/id), which the controllers must be formatted with."""
    with zk.zk_client(spec.topology.zk_connect, timeout=5.0) as client:
        data = zk.get(client, "/cluster/id").data
    value = data.get("id") if isinstance(data, dict) else None
    if not isinstance(value, str) or not value:
        raise ClusterctlError(f"ZooKeeper's /cluster/id has no cluster id ({data!r})")
    return value


def wait_broker_back(spec: ClusterSpec, broker_id: int, timeout: float, in_zookeeper: bool) -> None:
    """The restarted broker answers metadata on its own host listener and lists itself (and, in ZooKeeper
    mode, is registered in /brokers/ids)."""
    own = f"{spec.topology.host}:{spec.topology.broker_host_port(broker_id)}"

    def look() -> str:
        ids, err = metadata_brokers(own)
        if ids is None or broker_id not in ids:
            return f"broker {broker_id} not in its own metadata ({err or ids})"
        if in_zookeeper:
            with zk.zk_client(spec.topology.zk_connect, timeout=3.0) as client:
                if broker_id not in zk.registered_brokers(client):
                    return f"broker {broker_id} not in /brokers/ids"
        return ""

    wait_until(look, timeout=timeout, what=f"broker {broker_id} back", interval=1.0, done=lambda s: not s,
               seen=lambda s: s, retry_on=_retry)  # fmt: skip


def wait_quorum(target: ClusterSpec, timeout: float, node_id: int | None = None) -> str:
    """The controller quorum has a leader and every voter (and `node_id` has fetched); what it reported."""

    def look() -> tuple[str, str]:
        info = kraft.describe(target)
        voters = {r.node_id: r for r in info.voters}
        absent = [c for c in target.topology.controller_ids if c not in voters]
        if info.leader_id < 0 or absent:
            return "", f"leader {info.leader_id}, voters missing {absent}"
        if node_id is not None and voters[node_id].log_end_offset < 0:
            return "", f"voter {node_id} has not fetched yet"
        return f"quorum leader {info.leader_id}, epoch {info.leader_epoch}, voters {sorted(voters)}", ""

    found = wait_until(look, timeout=timeout, what="a controller quorum with every voter", interval=1.0,
                       done=lambda r: bool(r[0]), seen=lambda r: r[1], retry_on=_retry)  # fmt: skip
    return found[0]


@dataclass
class MigrationSignal:
    controller: str  # the container whose log says the metadata was migrated
    log_line: str
    znode: dict[str, object]  # /migration as the controller wrote it


def migrated_signal(spec: ClusterSpec, target: ClusterSpec) -> MigrationSignal | None:
    """The migration log line on a controller and /migration with a KRaft metadata offset, or None (not yet)."""
    line, where = "", ""
    for node_id in target.topology.controller_ids:
        name = target.topology.controller_container(node_id)
        text = dk.get_container(name).logs(tail=LOG_TAIL).decode("utf-8", "replace")
        hits = [ln for ln in text.splitlines() if MIGRATED_LINE in ln]
        if hits:
            line, where = hits[-1].strip(), name
    if not line:
        return None
    with zk.zk_client(spec.topology.zk_connect, timeout=3.0) as client:
        znode = zk.get(client, "/migration").data  # NotFoundError: not written yet, retried
    if not isinstance(znode, dict) or int(znode.get("kraft_metadata_offset", -1)) <= 0:
        return None
    return MigrationSignal(where, line, znode)


def wait_migrated(spec: ClusterSpec, target: ClusterSpec, timeout: float) -> MigrationSignal:
    found = wait_until(lambda: migrated_signal(spec, target), timeout=timeout,
                       what="the controller to report the metadata migrated", interval=2.0,
                       done=lambda s: s is not None, seen=lambda s: "no migration log line on any controller yet",
                       retry_on=_retry)  # fmt: skip
    assert found is not None
    return found


def wait_kraft_healthy(target: ClusterSpec, timeout: float) -> None:
    wait_until(lambda: kraft.check(target).missing, timeout=timeout, what="a healthy KRaft cluster", interval=1.0,
               done=lambda m: not m, seen=lambda m: f"still missing: {', '.join(m)}", retry_on=_retry)  # fmt: skip
