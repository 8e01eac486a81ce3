"""KRaft mode: the controller quorum page (/quorum) in place of the ZooKeeper page, from the domain's QuorumView.

The quorum is asked (DescribeQuorum) of the addresses the console was given (--kraft-quorum), at most once per
QUORUM_TTL_S whoever watches; each node id is named by the service the spec's topology gives it (--kraft-nodes,
or the spec itself under `clusterctl ui`); rendering is a pure function of the QuorumView.
"""

from __future__ import annotations

from typing import Any

from clusterctl.console.data import Cached, ConsoleTarget
from clusterctl.errors import ClusterctlError, UsageError
from clusterctl.kafka.kraft import quorum as kraft

QUORUM_TTL_S = 1.0
KRAFT_NOTE = "this cluster runs in KRaft mode: it has no ZooKeeper (the controller quorum is on the Quorum page)"


def addresses(raw: str) -> tuple[str, ...]:
    """`host:port,host:port` as given to --kraft-quorum (UsageError for anything else)."""
    out = []
    for item in (a.strip() for a in raw.split(",")):
        host, _, port = item.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise UsageError(f"--kraft-quorum expects host:port[,host:port...], got {item[:80]!r}")
        out.append(item)
    return tuple(out)


def node_services(raw: str) -> tuple[tuple[int, str], ...]:
    """`id=service,id=service` as given to --kraft-nodes (UsageError for anything else)."""
    out = []
    for item in (a.strip() for a in raw.split(",") if a.strip()):
        node, _, service = item.partition("=")
        if not node.isdigit() or len(node) > 9 or not service or len(service) > 64:
            raise UsageError(f"--kraft-nodes expects id=service[,id=service...], got {item[:80]!r}")
        out.append((int(node), service))
    return tuple(out)


def _pairs(target: ConsoleTarget) -> list[tuple[str, int]]:
    return [(a.rpartition(":")[0].strip("[]"), int(a.rpartition(":")[2])) for a in target.quorum]


def source(target: ConsoleTarget) -> Cached[kraft.QuorumView]:
    """The quorum view of this console's cluster, asked at most once per QUORUM_TTL_S (the console holds one)."""
    name = target.cluster or target.bootstrap
    services = dict(target.nodes)
    ask = _pairs(target)
    return Cached(lambda: kraft.view_of(name, kraft.describe_at(ask, timeout=2.0), services.get), QUORUM_TTL_S)


def quorum_ctx(target: ConsoleTarget, views: Cached[kraft.QuorumView]) -> dict[str, Any]:
    """The quorum page's live region: the view, or the one line saying why there is none."""
    if not target.kraft:
        return {"q": None, "note": "this console was not given the controller quorum (--kraft-quorum): the "
                "cluster runs in ZooKeeper mode, or start the console with the quorum's addresses"}  # fmt: skip
    try:
        return {"q": views.get(), "note": None}
    except ClusterctlError as exc:
        return {"q": None, "note": f"error: {exc}"}
