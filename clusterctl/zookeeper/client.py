"""ZooKeeper inspection: four-letter words for Mode and health, kazoo for znodes.

Stable API (imported by the runtime, the chaos observer and the CLI):
`four_letter`, `node_statuses`, `quorum`, `zk_client`, `ls`, `get`, `tree`,
`registered_brokers`, `controller_id`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from clusterctl.errors import NotFoundError, UnreachableError, UsageError
from clusterctl.spec.model import ClusterSpec

_KAZOO_LOG = logging.getLogger("clusterctl.zookeeper.client.kazoo")
_KAZOO_LOG.addHandler(logging.NullHandler())
_KAZOO_LOG.propagate = False  # kazoo's reconnect chatter must not reach the terminal

NOT_SERVING = "not serving"
DOWN = "down"
_NOT_SERVING_TEXT = "not currently serving requests"
_WHITELIST_TEXT = "is not executed because it is not in the whitelist"


def four_letter(host: str, port: int, cmd: str, timeout: float = 2.0) -> str:
    """Send a four-letter word (ruok, srvr, mntr, ...) and return the reply text.

    Raises UnreachableError when nothing answers (refused, timed out, or the connection closed
    without a reply, which is what a published port with no ZooKeeper behind it looks like).
    """
    if len(cmd) != 4 or not cmd.isalpha():
        raise UsageError(f"four-letter word expected, got {cmd!r}")
    chunks: list[bytes] = []
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            sock.sendall(cmd.encode("ascii"))
            with contextlib.suppress(ConnectionResetError):
                while True:
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    chunks.append(chunk)
    except OSError as exc:  # includes socket timeouts
        reason = "timed out" if isinstance(exc, TimeoutError) else (exc.strerror or type(exc).__name__).lower()
        raise UnreachableError(f"ZooKeeper {host}:{port} did not answer {cmd!r}: {reason}") from None
    reply = b"".join(chunks).decode("utf-8", errors="replace")
    if not reply:
        raise UnreachableError(f"ZooKeeper {host}:{port} did not answer {cmd!r}: closed without a reply")
    if _WHITELIST_TEXT in reply:
        raise UnreachableError(f"ZooKeeper {host}:{port}: {cmd!r} is not in 4lw.commands.whitelist")
    return reply


def parse_srvr(text: str) -> dict[str, str]:
    """`Key: value` lines of a srvr/stat reply into a dict (keys lower-cased)."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key and not key.startswith(" "):
            out[key.strip().lower()] = value.strip()
    return out


def parse_mntr(text: str) -> dict[str, str]:
    """Tab-separated `zk_key value` lines of a mntr reply."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("\t")
        if sep:
            out[key.strip()] = value.strip()
    return out


@dataclass
class ZkNodeStatus:
    """One ensemble member as seen from the host through its published client port."""

    id: int
    container: str
    address: str
    mode: str  # leader | follower | observer | standalone | not serving | down
    ok: bool  # answers ruok=imok and serves requests
    latency_ms: float | None = None  # round trip of the srvr request
    zxid: str | None = None
    connections: int | None = None
    znodes: int | None = None
    version: str | None = None
    error: str | None = None

    @property
    def serving(self) -> bool:
        return self.mode not in (NOT_SERVING, DOWN)


def _reason(exc: UnreachableError) -> str:
    """The short cause at the end of a four_letter error ("connection refused", "timed out", ...)."""
    return exc.message.rsplit(": ", 1)[-1]


def probe_node(zk_id: int, container: str, host: str, port: int, timeout: float = 2.0) -> ZkNodeStatus:
    """ruok + srvr against one node; never raises, failures land in `mode`/`error`."""
    address = f"{host}:{port}"
    try:
        ruok = four_letter(host, port, "ruok", timeout)
    except UnreachableError as exc:
        return ZkNodeStatus(zk_id, container, address, DOWN, False, error=_reason(exc))
    started = time.perf_counter()
    try:
        srvr = four_letter(host, port, "srvr", timeout)
    except UnreachableError as exc:
        return ZkNodeStatus(zk_id, container, address, DOWN, False, error=_reason(exc))
    latency = (time.perf_counter() - started) * 1000
    if _NOT_SERVING_TEXT in srvr:
        return ZkNodeStatus(zk_id, container, address, NOT_SERVING, False, round(latency, 2), error="no quorum")
    fields = parse_srvr(srvr)
    mode = fields.get("mode", "unknown")
    ok = ruok.strip() == "imok"
    nodes = fields.get("node count")
    conns = fields.get("connections")
    return ZkNodeStatus(
        id=zk_id,
        container=container,
        address=address,
        mode=mode,
        ok=ok,
        latency_ms=round(latency, 2),
        zxid=fields.get("zxid"),
        connections=int(conns) if conns and conns.isdigit() else None,
        znodes=int(nodes) if nodes and nodes.isdigit() else None,
        version=fields.get("zookeeper version", "").split(",")[0].split("-")[0] or None,
        error=None if ok else f"ruok answered {ruok.strip()!r}",
    )


def node_statuses(spec: ClusterSpec, timeout: float = 2.0) -> list[ZkNodeStatus]:
    """Probe every ensemble member of the spec in parallel (host-side published ports)."""

    def one(zk_id: int) -> ZkNodeStatus:
        host, port = spec.topology.zk_host_address(zk_id)
        return probe_node(zk_id, spec.topology.zk_container(zk_id), host, port, timeout)

    with ThreadPoolExecutor(max_workers=max(1, len(spec.topology.zk_ids))) as pool:
        return list(pool.map(one, spec.topology.zk_ids))


@dataclass
class QuorumSummary:
    """Whether the ensemble can serve writes, and who leads it."""

    nodes: int
    serving: int
    needed: int
    leaders: list[int] = field(default_factory=list)
    has_quorum: bool = False
    summary: str = ""

    @property
    def healthy(self) -> bool:
        """Quorum holds, exactly one leader (or one standalone node), every node serving."""
        return self.has_quorum and len(self.leaders) == 1 and self.serving == self.nodes


def summarize(statuses: list[ZkNodeStatus]) -> QuorumSummary:
    """Quorum summary from already-probed node statuses."""
    n = len(statuses)
    needed = n // 2 + 1
    serving = [s for s in statuses if s.serving]
    leaders = [s.id for s in statuses if s.mode in ("leader", "standalone")]
    has_quorum = len(serving) >= needed and len(leaders) == 1
    if has_quorum:
        who = f"zk{leaders[0]}" if n > 1 else "standalone"
        text = f"quorum ok: {len(serving)}/{n} nodes serving, leader {who}"
        if len(serving) < n:
            text += f", {n - len(serving)} down (tolerates {len(serving) - needed} more)"
    elif len(leaders) > 1:
        text = f"split brain: {len(leaders)} leaders ({', '.join(f'zk{i}' for i in leaders)})"
    else:
        text = f"quorum lost: {len(serving)}/{n} nodes serving (needs {needed}); writes and reads fail"
    return QuorumSummary(n, len(serving), needed, leaders, has_quorum, text)


def quorum(spec: ClusterSpec, timeout: float = 2.0) -> QuorumSummary:
    """Probe the ensemble and summarise its quorum."""
    return summarize(node_statuses(spec, timeout))


@contextlib.contextmanager
def zk_client(connect: str, timeout: float = 5.0, read_only: bool = False) -> Iterator[KazooClient]:
    """A started kazoo client; UnreachableError if no session can be made within `timeout`."""
    client = KazooClient(
        hosts=connect, timeout=timeout, read_only=read_only, connection_retry={"max_tries": 1}, logger=_KAZOO_LOG
    )
    try:
        client.start(timeout=timeout)
    except (KazooTimeoutError, KazooException, OSError) as exc:
        with contextlib.suppress(Exception):
            client.stop()
            client.close()
        raise UnreachableError(
            f"no ZooKeeper session with {connect} within {timeout:.0f}s ({type(exc).__name__})",
            hint="check `clusterctl zk status`; a lost quorum refuses sessions",
        ) from None
    try:
        yield client
    finally:
        with contextlib.suppress(Exception):
            client.stop()
            client.close()


def _check_path(path: str) -> str:
    if not path.startswith("/"):
        raise UsageError(f"znode path must be absolute, got {path!r}")
    if path != "/" and path.endswith("/"):
        path = path.rstrip("/")
    return path


def decode(data: bytes | None) -> Any:
    """znode bytes → JSON value where it is JSON, else text (None for empty)."""
    if not data:
        return None
    text = data.decode("utf-8", errors="replace")
    try:
        return json.loads(text)
    except ValueError:
        return text


@dataclass
class Znode:
    path: str
    data: Any
    version: int
    children: int
    ephemeral_owner: str | None
    mtime: float  # epoch seconds


def ls(client: KazooClient, path: str) -> list[str]:
    """Sorted children of `path`."""
    path = _check_path(path)
    try:
        return sorted(client.get_children(path))
    except NoNodeError:
        raise NotFoundError(f"znode {path} does not exist") from None


def get(client: KazooClient, path: str) -> Znode:
    """Data (JSON-decoded where possible) and stat of one znode."""
    path = _check_path(path)
    try:
        data, stat = client.get(path)
    except NoNodeError:
        raise NotFoundError(f"znode {path} does not exist") from None
    owner = hex(stat.ephemeralOwner) if stat.ephemeralOwner else None
    return Znode(path, decode(data), stat.version, stat.numChildren, owner, stat.mtime / 1000)


@dataclass
class TreeEntry:
    path: str
    depth: int
    data: Any


def tree(client: KazooClient, path: str = "/", max_depth: int = 10, with_data: bool = True) -> list[TreeEntry]:
    """Depth-first walk below `path` (inclusive), children sorted; nodes vanishing mid-walk are skipped."""
    root = _check_path(path)
    if not client.exists(root):
        raise NotFoundError(f"znode {root} does not exist")
    out: list[TreeEntry] = []

    def walk(p: str, depth: int) -> None:
        try:
            data = decode(client.get(p)[0]) if with_data else None
            children = sorted(client.get_children(p))
        except NoNodeError:
            return
        out.append(TreeEntry(p, depth, data))
        if depth >= max_depth:
            return
        for child in children:
            walk(f"{p.rstrip('/')}/{child}", depth + 1)

    walk(root, 0)
    return out


def registered_brokers(client: KazooClient) -> list[int]:
    """Broker ids registered under /brokers/ids (empty when none or no Kafka yet)."""
    try:
        return sorted(int(c) for c in client.get_children("/brokers/ids") if c.isdigit())
    except NoNodeError:
        return []


def controller_id(client: KazooClient) -> int | None:
    """The active controller's broker id from /controller, or None."""
    try:
        data, _ = client.get("/controller")
    except NoNodeError:
        return None
    value = decode(data)
    if isinstance(value, dict) and "brokerid" in value:
        return int(value["brokerid"])
    return None
