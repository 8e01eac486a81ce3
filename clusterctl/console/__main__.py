"""`python3 -m clusterctl.console`: the console as a service (the kafka-manager container runs this).

Plain argparse, so the image needs no Typer/rich; `clusterctl ui` is the command people type.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from clusterctl.console.data import ConsoleTarget
from clusterctl.console.quorum import addresses, node_services
from clusterctl.console.server import TOKEN_ENV, Listen, check_token, serve
from clusterctl.errors import ClusterctlError


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m clusterctl.console", description=__doc__)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=9000)
    p.add_argument("--bootstrap-server", required=True)
    p.add_argument("--zookeeper", default=None)
    p.add_argument("--cluster", default="")
    p.add_argument("--reports-dir", type=Path, default=None)
    p.add_argument("--read-only", action="store_true")
    p.add_argument(
        "--kraft-quorum",
        default="",
        metavar="HOST:PORT[,HOST:PORT...]",
        help="KRaft mode: addresses that answer DescribeQuorum (brokers or controllers); the Quorum page replaces "
        "the ZooKeeper one",
    )
    p.add_argument(
        "--kraft-nodes",
        default="",
        metavar="ID=SERVICE[,ID=SERVICE...]",
        help="KRaft mode: the service each node.id runs in (the spec's topology), shown on the Quorum page",
    )
    p.add_argument(
        "--exposed-on",
        default=None,
        help="the address users reach this on (a container's published bind address); decides whether a token "
        f"is required (${TOKEN_ENV}); default --host",
    )
    p.add_argument(
        "--public-port",
        type=int,
        default=None,
        help="the port users reach this on when not --port (a container's published port)",
    )
    p.add_argument(
        "--public-name",
        action="append",
        default=[],
        metavar="HOST[:PORT]",
        help="a name users reach this by besides its address (a reverse proxy's; repeatable)",
    )
    args = p.parse_args(argv)
    try:
        token = check_token(args.exposed_on or args.host, os.environ.get(TOKEN_ENV))
        quorum = addresses(args.kraft_quorum) if args.kraft_quorum else ()
        nodes = node_services(args.kraft_nodes)
        target = ConsoleTarget(args.bootstrap_server, args.zookeeper, args.cluster, args.reports_dir, args.read_only,
                               quorum, nodes=nodes)  # fmt: skip
        print(f"clusterctl console for {args.cluster or args.bootstrap_server} on {args.host}:{args.port}", flush=True)
        listen = Listen(args.host, args.port, token, args.exposed_on, args.public_port, tuple(args.public_name))
        serve(target, listen)
    except ClusterctlError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
