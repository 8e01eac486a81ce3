"""KRaft mode: the view over the DescribeQuorum answer — the controller quorum and broker fencing, as `up`,
`status`, `quorum`, the chaos checks and the observer see them. The wire protocol itself lives in
clusterctl.kafka.kraft.describe_quorum; nothing else in clusterctl speaks it or re-derives this view.

The quorum is asked of the brokers' host listeners (they forward it
to the active controller) and of the controllers' own listeners on the cluster network (the leader answers).
A broker is *unfenced* when metadata lists it: KRaft brokers return only unfenced brokers in a Metadata
response. It is *registered* when the quorum knows it (an observer fetching the metadata log, or a voter in
combined mode); a registered broker missing from metadata is fenced.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from clusterctl.errors import ClusterctlError, UsageError
from clusterctl.kafka.kraft.describe_quorum import API_VERSION, DYNAMIC_VERSION, QuorumInfo, describe_quorum
from clusterctl.spec.model import ClusterSpec


@dataclass
class QuorumMember:
    """One row of the describe-quorum view."""

    node_id: int
    role: str  # leader | follower | observer
    service: str | None  # controllerN / kafkaN of the spec, None when unknown to it
    log_end_offset: int
    lag: int | None  # high watermark - log end offset (None when the offset is unknown)
    last_fetch_ago_ms: int | None = None
    directory_id: str | None = None  # kraft.quorum dynamic: the replica's metadata directory id (KIP-853)


@dataclass
class QuorumView:
    cluster: str
    leader_id: int | None
    leader_epoch: int
    high_watermark: int
    members: list[QuorumMember] = field(default_factory=list)
    voters_expected: list[int] = field(default_factory=list)
    answered_by: str = ""

    @property
    def leader_service(self) -> str | None:
        return next((m.service for m in self.members if m.role == "leader"), None)


@dataclass
class BrokerFencing:
    """A spec broker: registered with the quorum, and fenced (absent from metadata) or not."""

    broker: int
    registered: bool | None  # None: the quorum could not be asked
    fenced: bool | None  # None: metadata could not be read
    state: str  # unfenced | fenced | not registered | unknown


def require_kraft(spec: ClusterSpec, what: str) -> None:
    if not spec.kraft_mode:
        raise UsageError(
            f"cluster {spec.name} runs ZooKeeper mode: {what} is a KRaft controller-quorum view",
            hint="`clusterctl zk status` shows the ZooKeeper ensemble; `status` the controller broker",
        )


def quorum_addresses(spec: ClusterSpec) -> list[tuple[str, int]]:
    """Brokers' host listeners first, then every voter's controller listener (cluster network)."""
    out = [(spec.topology.host, spec.topology.broker_host_port(b)) for b in spec.topology.broker_ids]
    out += [(spec.topology.controller_ip(c), spec.kraft.controller_port) for c in spec.topology.controller_ids]
    return out


def describe(spec: ClusterSpec, timeout: float = 2.0) -> QuorumInfo:
    """DescribeQuorum for the spec's cluster (with directory ids in a dynamic quorum); QuorumError (exit 4) when
    nothing answers."""
    version = DYNAMIC_VERSION if spec.kraft.quorum == "dynamic" else API_VERSION
    return describe_quorum(quorum_addresses(spec), timeout, version)


def view(spec: ClusterSpec, info: QuorumInfo, now_ms: int | None = None) -> QuorumView:
    """Members with roles (leader / follower / observer) and their lag behind the high watermark."""
    return view_of(spec.name, info, spec.topology.node_services.get, spec.topology.controller_ids, now_ms)


def view_of(
    cluster: str,
    info: QuorumInfo,
    service: Callable[[int], str | None] = lambda _n: None,
    voters_expected: list[int] | None = None,
    now_ms: int | None = None,
) -> QuorumView:
    """`view` without a spec (the console service has only addresses): services named by `service`."""
    now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
    members = []
    for role_of, replicas in (("voter", info.voters), ("observer", info.observers)):
        for r in replicas:
            role = "observer" if role_of == "observer" else ("leader" if r.node_id == info.leader_id else "follower")
            lag = None if r.log_end_offset < 0 else max(0, info.high_watermark - r.log_end_offset)
            ago = now_ms - r.last_fetch_ms if r.last_fetch_ms >= 0 and role != "leader" else None
            members.append(
                QuorumMember(r.node_id, role, service(r.node_id), r.log_end_offset, lag, ago, r.directory_id)
            )
    members.sort(key=lambda m: ({"leader": 0, "follower": 1, "observer": 2}[m.role], m.node_id))
    return QuorumView(
        cluster=cluster,
        leader_id=info.leader_id if info.leader_id >= 0 else None,
        leader_epoch=info.leader_epoch,
        high_watermark=info.high_watermark,
        members=members,
        voters_expected=list(voters_expected or []),
        answered_by=info.answered_by,
    )


def describe_at(addresses: list[tuple[str, int]], timeout: float = 2.0) -> QuorumInfo:
    """DescribeQuorum asked of these addresses (brokers forward it; the active controller answers it)."""
    return describe_quorum(addresses, timeout)


def quorum_view(spec: ClusterSpec, timeout: float = 2.0) -> QuorumView:
    require_kraft(spec, "quorum")
    return view(spec, describe(spec, timeout))


def fencing(spec: ClusterSpec, info: QuorumInfo | None, live: list[int] | None) -> list[BrokerFencing]:
    """Per spec broker: registered (known to the quorum) and fenced (not in metadata)."""
    known = {r.node_id for r in info.voters + info.observers} if info is not None else None
    out = []
    for b in spec.topology.broker_ids:
        registered = None if known is None else b in known
        fenced = None if live is None else b not in live
        if fenced is False:
            state = "unfenced"
        elif registered is False:
            state = "not registered"
        elif fenced:
            state = "fenced"
        else:
            state = "unknown"
        out.append(BrokerFencing(b, registered, fenced, state))
    return out


@dataclass
class KRaftHealth:
    """What `up` waits for in kraft mode."""

    quorum: QuorumInfo | None
    live_brokers: list[int] | None
    missing: list[str]


def check(spec: ClusterSpec, timeout: float = 2.0) -> KRaftHealth:
    """Quorum with a leader and every voter present, every broker registered and unfenced, a metadata round trip."""
    missing: list[str] = []
    info: QuorumInfo | None = None
    try:
        info = describe(spec, timeout)
    except ClusterctlError as exc:
        missing.append(f"controller quorum ({exc.message})")
    if info is not None:
        if info.leader_id < 0:
            missing.append("controller quorum leader")
        voters = {r.node_id for r in info.voters}
        absent = [c for c in spec.topology.controller_ids if c not in voters]
        if absent:
            missing.append(f"voters {','.join(map(str, absent))} in the quorum")
    from clusterctl.kafka.brokers import metadata_brokers

    live, err = metadata_brokers(spec.topology.bootstrap_servers, timeout)
    if live is None:
        missing.append(f"metadata round trip on {spec.topology.bootstrap_servers} ({err})")
    else:
        for f in fencing(spec, info, live):
            if f.state != "unfenced":
                missing.append(f"broker {f.broker} {f.state}")
    return KRaftHealth(info, live, missing)
