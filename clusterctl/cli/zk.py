"""CLI for the 'zk' noun: Mode per node (four-letter words) and znodes (kazoo)."""

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from clusterctl.cli.common import JsonOpt, ZkOpt, get_spec, require_zookeeper, timeout_option, zk_connect
from clusterctl.output import Column, emit, format_time
from clusterctl.spec import validate

if TYPE_CHECKING:
    from clusterctl.zookeeper import client as zk

zk_app = typer.Typer(
    help="Inspect ZooKeeper: Mode per node, znodes (brokers, controller, topics).", no_args_is_help=True
)

PathArg = Annotated[str, typer.Argument(help="znode path, e.g. /brokers/ids")]
TimeoutOpt = Annotated[float, timeout_option("seconds to wait for a ZooKeeper session")]


def _data_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value).strip().replace("\n", " | ")


def _explicit_nodes(connect: str, timeout: float) -> "list[zk.ZkNodeStatus]":
    from clusterctl.zookeeper import client as zk

    validate.zk_connect(connect)
    hosts = validate.host_ports(connect.split("/")[0], "--zookeeper")
    return [zk.probe_node(i, "-", host, port, timeout) for i, (host, port) in enumerate(hosts, start=1)]


@zk_app.command("status")
def cmd_zk_status(zookeeper: ZkOpt = None, as_json: JsonOpt = False, timeout: TimeoutOpt = 2.0) -> None:
    """Mode (leader/follower/standalone/not serving/down) of every node via srvr, and the quorum summary."""
    from rich.text import Text

    from clusterctl.zookeeper import client as zk

    if zookeeper is not None:  # "" is a bad address, not "use the spec"
        nodes = _explicit_nodes(zookeeper, timeout)
    else:
        spec = get_spec()
        require_zookeeper(spec)
        nodes = zk.node_statuses(spec, timeout)
    q = zk.summarize(nodes)
    if as_json:
        emit({"nodes": nodes, "quorum": q}, as_json=True)
        return
    emit(
        nodes,
        as_json=False,
        title="ZooKeeper ensemble",
        columns=[
            Column("Id", "id"),
            Column("Container", "container"),
            Column("Address", "address"),
            Column("Mode", "mode"),
            Column("OK", "ok"),
            Column("Latency ms", "latency_ms"),
            Column("Zxid", "zxid"),
            Column("Znodes", "znodes"),
            Column("Error", "error"),
        ],
    )
    style = "green" if q.has_quorum else "bold red"
    emit(Text(q.summary, style=style), as_json=False)


@zk_app.command("ls")
def cmd_zk_ls(
    path: PathArg = "/", zookeeper: ZkOpt = None, as_json: JsonOpt = False, timeout: TimeoutOpt = 5.0
) -> None:
    """Children of a znode."""

    from clusterctl.zookeeper import client as zk

    with zk.zk_client(zk_connect(zookeeper), timeout) as client:
        children = zk.ls(client, path)
    if as_json:
        emit({"path": path, "children": children}, as_json=True)
        return
    for child in children:
        emit(child, as_json=False)


@zk_app.command("get")
def cmd_zk_get(path: PathArg, zookeeper: ZkOpt = None, as_json: JsonOpt = False, timeout: TimeoutOpt = 5.0) -> None:
    """Data of a znode (JSON decoded where it is JSON) and its stat."""
    from clusterctl.zookeeper import client as zk

    with zk.zk_client(zk_connect(zookeeper), timeout) as client:
        node = zk.get(client, path)
    emit(
        node,
        as_json=as_json,
        title=node.path,
        kv=[
            Column("data", lambda n: json.dumps(n.data, indent=2) if isinstance(n.data, dict | list) else n.data),
            Column("version", "version"),
            Column("children", "children"),
            Column("ephemeral owner", "ephemeral_owner"),
            Column("mtime", "mtime", fmt=format_time),
        ],
    )


@zk_app.command("tree")
def cmd_zk_tree(
    path: Annotated[str, typer.Argument(help="root of the walk")] = "/",
    depth: Annotated[int, typer.Option("--depth", "-d", help="maximum depth below PATH (0 to 64)")] = 10,
    no_data: Annotated[bool, typer.Option("--no-data", help="names only")] = False,
    zookeeper: ZkOpt = None,
    as_json: JsonOpt = False,
    timeout: TimeoutOpt = 5.0,
) -> None:
    """The znode tree below PATH with each node's data (JSON decoded)."""

    from clusterctl.zookeeper import client as zk

    validate.at_most(depth, "--depth", validate.MAX_TREE_DEPTH, minimum=0)
    with zk.zk_client(zk_connect(zookeeper), timeout) as client:
        entries = zk.tree(client, path, depth, with_data=not no_data)
    if as_json:
        emit(entries, as_json=True)
        return
    for e in entries:
        name = e.path if e.depth == 0 else e.path.rsplit("/", 1)[-1]
        data = _data_text(e.data)
        line = "  " * e.depth + name + (f"  {data}" if data else "")
        emit(line, as_json=False)


def register(app: typer.Typer) -> None:
    """Attach this noun's commands to the root app."""
    app.add_typer(zk_app, name="zk")
