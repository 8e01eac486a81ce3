"""Commands in a container's network namespace, run from the host (`nsenter -t PID -n`): nothing is added to the
images. Which network-fault path the kernel allows (netem, or the userspace one) is found out here, once."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

from clusterctl.chaos.targets import _container, _require, node_target
from clusterctl.errors import ClusterctlError
from clusterctl.spec.model import ClusterSpec


@dataclass
class NetNode:
    """A running node as network faults see it: its namespace (through its init's pid), interface and address."""

    target: str  # the service name, e.g. kafka2
    container: str
    pid: int
    iface: str  # the interface on the cluster network inside the container
    ip: str


def run(pid: int, argv: list[str], check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run `argv` in the network namespace of `pid`; with `check`, a failure is one line naming the command."""
    proc = subprocess.run(["nsenter", "-t", str(pid), "-n", *argv], capture_output=True, text=True, timeout=20)
    if check and proc.returncode != 0:
        why = (proc.stderr or proc.stdout).strip().splitlines()
        raise ClusterctlError(f"`{' '.join(argv)}` failed in pid {pid}'s network namespace: {why[0] if why else ''}")
    return proc


def container_ip(spec: ClusterSpec, name: str) -> str:
    """A node's address on the cluster network (a `--to` peer need not be running)."""
    target, cname = node_target(spec, name)
    nets = _container(cname).attrs.get("NetworkSettings", {}).get("Networks") or {}
    entry = nets.get(spec.topology.network_name) or {}
    ip = entry.get("IPAddress") or (entry.get("IPAMConfig") or {}).get("IPv4Address")
    if not ip:
        raise ClusterctlError(f"{target} ({cname}) has no address on {spec.topology.network_name} (partitioned?)")
    return str(ip)


def net_node(spec: ClusterSpec, name: str, states: tuple[str, ...] = ("running",)) -> NetNode:
    """The running node `name` (service or container name); one line when it is unknown or not running."""
    target, cname = node_target(spec, name)
    c = _container(cname)
    _require(c, target, *states)
    pid = int(c.attrs.get("State", {}).get("Pid") or 0)
    ip = container_ip(spec, name)
    for line in run(pid, ["ip", "-o", "-4", "addr", "show"]).stdout.splitlines():
        words = line.split()
        if len(words) >= 4 and words[3].split("/")[0] == ip:
            return NetNode(target, cname, pid, words[1].split("@")[0], ip)
    raise ClusterctlError(f"{target} ({cname}) has no interface with {ip} in its network namespace")


_PATH: dict[str, str] = {}


def fault_path(pid: int) -> str:
    """'netem' when the kernel has the netem qdisc, else 'userspace' (tried once per process on the node's lo)."""
    if "path" not in _PATH:
        probe = run(pid, ["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"], check=False)
        if probe.returncode == 0:
            run(pid, ["tc", "qdisc", "del", "dev", "lo", "root"], check=False)
        _PATH["path"] = "netem" if probe.returncode == 0 else "userspace"
    return _PATH["path"]
