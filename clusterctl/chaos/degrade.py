"""Grey network faults: delay (with jitter), loss, rate, duplicate and corrupt on a node's egress, to every peer or
only to chosen ones (`to`).

Two paths, chosen once by what the kernel has (netns.fault_path):
- netem: one `tc ... netem` qdisc (behind a 4-band prio with u32 filters when `to` names peers);
- userspace: loss as an iptables `statistic` DROP, rate as tbf (htb + u32 with `to`), delay/duplicate/corrupt as
  an iptables NFQUEUE rule served by a handler process (nfqhandler.py) started from the host in the node's netns.
Every rule lives in the node's own namespace (an iptables chain CLUSTERCTL, the interface's root qdisc), so
`heal_network` finds and removes all of it, and the handler, without any state kept elsewhere. A fault that cannot be
applied, or a timed one that ends, takes back only what it added: the node's other faults stay.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from clusterctl.chaos import netns
from clusterctl.chaos.handlers import handler_pids, start_handler, stop_handlers
from clusterctl.chaos.targets import FaultResult, _always, _sleep, node_target
from clusterctl.errors import ClusterctlError, UsageError
from clusterctl.spec.model import ClusterSpec

CHAIN = "CLUSTERCTL"
QUEUE = 1826
MARK = "0x1dc"  # packets the handler sends itself (duplicates) carry it and are not queued again
KINDS = ("delay", "loss", "rate", "duplicate", "corrupt")


@dataclass
class NetFault:
    """One degradation: `kind` with its setting (ms, percent or kbit), towards `to` peers (all when empty)."""

    kind: str
    value: float  # delay: ms · loss/duplicate/corrupt: percent · rate: kbit/s
    jitter_ms: float = 0.0
    to: list[str] = field(default_factory=list)

    def describe(self) -> str:
        what = {
            "delay": f"delay {self.value:g}ms" + (f" ±{self.jitter_ms:g}ms" if self.jitter_ms else ""),
            "rate": f"rate {self.value:g}kbit",
        }.get(self.kind, f"{self.kind} {self.value:g}%")
        return what + (f" to {','.join(self.to)}" if self.to else "")


def check(f: NetFault) -> None:
    """One line for a setting no network shows: negative, zero, NaN or absurd."""
    limits = {"delay": (1, 60_000, "ms"), "rate": (8, 100_000_000, "kbit")}
    lo, hi, unit = limits.get(f.kind, (0.01, 100, "%"))
    if f.kind not in KINDS:
        raise UsageError(f"unknown network fault {f.kind!r}; one of {', '.join(KINDS)}")
    if not (math.isfinite(f.value) and lo <= f.value <= hi):
        raise UsageError(f"{f.kind} must be {lo:g}..{hi:g}{unit}, got {f.value:g}")
    if not (math.isfinite(f.jitter_ms) and 0 <= f.jitter_ms <= f.value) or (f.jitter_ms and f.kind != "delay"):
        raise UsageError(f"jitter must be 0..{f.value:g}ms (the delay), and only with delay; got {f.jitter_ms:g}")


def netem_commands(f: NetFault, iface: str, dsts: list[str]) -> list[list[str]]:
    """The tc commands of the netem path."""
    arg = {
        "delay": ["delay", f"{f.value:g}ms"] + ([f"{f.jitter_ms:g}ms"] if f.jitter_ms else []),
        "rate": ["rate", f"{f.value:g}kbit"],
    }.get(f.kind, [f.kind, f"{f.value:g}%"])
    dev = ["tc", "qdisc", "add", "dev", iface]
    if not dsts:
        return [[*dev, "root", "netem", *arg]]
    filters = [
        ["tc", "filter", "add", "dev", iface, "parent", "1:", "protocol", "ip", "prio", "1", "u32",
         "match", "ip", "dst", f"{d}/32", "flowid", "1:4"]
        for d in dsts
    ]  # fmt: skip
    return [[*dev, "root", "handle", "1:", "prio", "bands", "4"], [*dev, "parent", "1:4", "netem", *arg], *filters]


def userspace_commands(f: NetFault, iface: str, dsts: list[str]) -> list[list[str]]:
    """The iptables/tc commands of the userspace path (the chain itself is set up by `_ensure_chain`)."""
    to = ["-d", ",".join(dsts)] if dsts else []
    if f.kind == "loss":
        return [["iptables", "-w", "-I", CHAIN, *to, "-m", "statistic", "--mode", "random",
                 "--probability", f"{f.value / 100:.4f}", "-j", "DROP"]]  # fmt: skip
    if f.kind == "rate":
        rate = f"{f.value:g}kbit"
        burst = f"{max(4, int(f.value / 80))}kb"  # ~100 ms of the rate, at least a few packets
        if not dsts:
            return [["tc", "qdisc", "add", "dev", iface, "root", "tbf", "rate", rate, "burst", burst, "latency", "1s"]]
        cls = ["tc", "class", "add", "dev", iface, "parent", "1:"]
        return [
            ["tc", "qdisc", "add", "dev", iface, "root", "handle", "1:", "htb", "default", "1", "r2q", "100000"],
            [*cls, "classid", "1:1", "htb", "rate", "100gbit"],
            [*cls, "classid", "1:2", "htb", "rate", rate, "burst", burst],
        ] + [
            ["tc", "filter", "add", "dev", iface, "parent", "1:", "protocol", "ip", "prio", "1", "u32",
             "match", "ip", "dst", f"{d}/32", "flowid", "1:2"]
            for d in dsts
        ]  # fmt: skip
    return [["iptables", "-w", "-A", CHAIN, *to, "-m", "mark", "!", "--mark", MARK,
             "-j", "NFQUEUE", "--queue-num", str(QUEUE), "--queue-bypass"]]  # fmt: skip


def handler_args(f: NetFault) -> list[str]:
    """The handler's settings for a fault it serves (delay, duplicate, corrupt)."""
    if f.kind == "delay":
        return ["--delay-ms", f"{f.value:g}", "--jitter-ms", f"{f.jitter_ms:g}"]
    return [f"--{f.kind}", f"{f.value / 100:g}"]


def _ensure_chain(node: netns.NetNode, undo: list[list[str]]) -> None:
    """The CLUSTERCTL chain and OUTPUT's jump to it; what was made here is undone (last first) by `undo`."""
    if netns.run(node.pid, ["iptables", "-w", "-n", "-L", CHAIN], check=False).returncode != 0:
        netns.run(node.pid, ["iptables", "-w", "-N", CHAIN])
        undo.append(["iptables", "-w", "-X", CHAIN])
    jump = ["OUTPUT", "-o", node.iface, "-j", CHAIN]
    if netns.run(node.pid, ["iptables", "-w", "-C", *jump], check=False).returncode != 0:
        netns.run(node.pid, ["iptables", "-w", "-I", *jump])
        undo.append(["iptables", "-w", "-D", *jump])


def _inverse(cmd: list[str]) -> list[str] | None:
    """The command that takes back `cmd`: a rule deleted, our root qdisc removed (filters and classes go with it)."""
    if cmd[0] == "iptables":
        verb = cmd.index("-I") if "-I" in cmd else cmd.index("-A")
        return [*cmd[:verb], "-D", *cmd[verb + 1 :]]
    if cmd[:3] == ["tc", "qdisc", "add"] and "root" in cmd:
        return ["tc", "qdisc", "del", "dev", cmd[cmd.index("dev") + 1], "root"]
    return None


def present(node: netns.NetNode) -> list[str]:
    """The faults on a node now, in words: its packet handler, its CLUSTERCTL rules, our root qdisc."""
    out = [f"packet handler pid {p}" for p in handler_pids(node.container)]
    rules = netns.run(node.pid, ["iptables", "-w", "-S", CHAIN], check=False)
    n = sum(1 for ln in rules.stdout.splitlines() if ln.startswith("-A ")) if rules.returncode == 0 else 0
    if n:
        out.append(f"{n} iptables rule{'s' if n > 1 else ''} in {CHAIN}")
    if (kind := _root_qdisc(node)) in _OURS:
        out.append(f"{kind} qdisc on {node.iface}")
    return out


def apply(spec: ClusterSpec, name: str, f: NetFault) -> tuple[FaultResult, Callable[[], FaultResult]]:
    """Apply `f` to node `name`'s egress: its result (the note names the setting and the path taken) and the undo
    of exactly this fault. A fault that cannot be applied takes back only what it added (every other fault on the
    node stays as it was) and says so."""
    check(f)
    node = netns.net_node(spec, name)
    dsts = [netns.container_ip(spec, peer) for peer in f.to]
    path = netns.fault_path(node.pid)
    started, t0 = time.time(), time.monotonic()
    via = "netem"
    if path == "netem":
        cmds = netem_commands(f, node.iface, dsts)
    else:
        cmds = userspace_commands(f, node.iface, dsts)
        via = {"loss": "iptables statistic", "rate": "tc tbf" if not dsts else "tc htb"}.get(f.kind, "nfqueue")
        if via == "nfqueue" and handler_pids(node.container):
            raise ClusterctlError(
                f"{node.target} already has a delay/duplicate/corrupt fault; nothing was changed "
                "(`chaos heal` first to replace it)"
            )
    if path == "netem" or f.kind == "rate":
        _require_plain_root(node)
    undo: list[list[str]] = []  # commands that take this fault back, in the order they were made
    handler: list[int] = []
    try:
        if via == "nfqueue":
            handler.append(start_handler(node, QUEUE, MARK, handler_args(f)))
        if path == "userspace" and f.kind != "rate":
            _ensure_chain(node, undo)
        for cmd in cmds:
            netns.run(node.pid, cmd)
            inverse = _inverse(cmd)
            if inverse is not None and not (inverse[0] == "tc" and any(u[0] == "tc" for u in undo)):
                undo.append(inverse)
    except BaseException as exc:
        left = _take_back(node, undo, handler)
        if not isinstance(exc, ClusterctlError):
            raise
        others = ", ".join(present(node)) or "none"
        raise ClusterctlError(
            f"{f.describe()} on {node.target} not applied: {exc.message}; what it had added was taken back"
            + (f" except {', '.join(left)}" if left else "")
            + f", and the node's other faults are as they were ({others})",
            hint="`clusterctl chaos heal` removes every fault",
        ) from None
    note = f"{f.describe()} via {via} ({path} path)"
    res = FaultResult(
        f.kind, node.target, node.container, "clean", "degraded", started, round(time.monotonic() - t0, 3), note
    )

    def take_back() -> FaultResult:
        t, m = time.time(), time.monotonic()
        left = _take_back(node, undo, handler)
        after = "degraded" if left else "clean"
        return FaultResult("heal-network", node.target, node.container, "degraded", after, t,
                           round(time.monotonic() - m, 3), f"removed {f.describe()}"
                           + (f" (NOT: {', '.join(left)})" if left else ""))  # fmt: skip

    return res, take_back


def _take_back(node: netns.NetNode, undo: list[list[str]], handler: list[int]) -> list[str]:
    """Run `undo` last first (a chain is removed only when empty) and stop this fault's handler; what failed."""
    left = []
    for cmd in reversed(undo):
        if cmd[-2:] == ["-X", CHAIN]:
            rules = netns.run(node.pid, ["iptables", "-w", "-S", CHAIN], check=False).stdout
            if any(ln.startswith("-A ") for ln in rules.splitlines()):
                continue  # another fault's rules live in it
        if netns.run(node.pid, cmd, check=False).returncode != 0 and cmd[-2:] != ["-X", CHAIN]:
            left.append(" ".join(cmd[:3]))
    for pid in handler:
        from clusterctl.chaos.handlers import stop_handler

        if not stop_handler(pid):
            left.append(f"handler pid {pid}")
    undo.clear()
    handler.clear()
    return left


def degrade(spec: ClusterSpec, name: str, f: NetFault) -> FaultResult:
    """Apply `f` to node `name`'s egress (until `heal`); see `apply`."""
    return apply(spec, name, f)[0]


def _require_plain_root(node: netns.NetNode) -> None:
    kind = _root_qdisc(node)
    if kind in _OURS:
        raise ClusterctlError(
            f"{node.target} already has a {kind} qdisc on {node.iface} (another network fault); nothing was changed "
            "(`chaos heal` first to replace it)"
        )


_OURS = ("netem", "tbf", "htb", "prio")


def _root_qdisc(node: netns.NetNode) -> str:
    out = netns.run(node.pid, ["tc", "qdisc", "show", "dev", node.iface], check=False).stdout
    for line in out.splitlines():
        words = line.split()
        if len(words) > 3 and "root" in words:
            return words[1]
    return ""


def heal_network(spec: ClusterSpec, name: str) -> FaultResult | None:
    """Remove every network fault from node `name`: handler, CLUSTERCTL chain and our root qdisc; None if clean."""
    target, cname = node_target(spec, name)
    started, t0 = time.time(), time.monotonic()
    removed = [f"handler pid {p}" for p in stop_handlers(cname)]
    try:
        node = netns.net_node(spec, name, ("running", "paused"))
    except ClusterctlError:
        node = None  # not running: its namespace, rules and qdiscs are gone with it
    if node is not None:
        jump = ["iptables", "-w", "-D", "OUTPUT", "-o", node.iface, "-j", CHAIN]
        while netns.run(node.pid, jump, check=False).returncode == 0:
            removed.append(f"iptables chain {CHAIN}")
        if netns.run(node.pid, ["iptables", "-w", "-F", CHAIN], check=False).returncode == 0:
            netns.run(node.pid, ["iptables", "-w", "-X", CHAIN], check=False)
        if (kind := _root_qdisc(node)) in _OURS:
            netns.run(node.pid, ["tc", "qdisc", "del", "dev", node.iface, "root"])
            removed.append(f"{kind} qdisc on {node.iface}")
    if not removed:
        return None
    note = "removed " + ", ".join(dict.fromkeys(removed))
    took = round(time.monotonic() - t0, 3)
    return FaultResult("heal-network", target, cname, "degraded", "clean", started, took, note)


def heal_all_network(spec: ClusterSpec) -> list[FaultResult]:
    """`heal_network` on every node of the spec."""
    names = [spec.topology.zk_service(i) for i in spec.topology.zk_ids]
    names += [spec.topology.controller_service(i) for i in spec.topology.dedicated_controller_ids]
    names += [spec.topology.broker_service(i) for i in spec.topology.broker_ids]
    if spec.kafka_manager.enabled:
        names.append(spec.topology.manager_service)
    out = []
    for n in names:
        if (r := heal_network(spec, n)) is not None:
            out.append(r)
    return out


def degrade_for(
    spec: ClusterSpec, name: str, f: NetFault, seconds: float | None, stop_event: threading.Event | None = None
) -> list[FaultResult]:
    """Apply `f`; with `seconds`, heal the node again after that long (also on error or Ctrl-C)."""
    if seconds is not None and not (math.isfinite(seconds) and seconds > 0):
        raise UsageError(f"--for must be positive, got {seconds}")
    res, heal = apply(spec, name, f)
    out = [res]
    if seconds is None:
        return out
    with _always(heal, out):  # this fault only: another on the node stays until its own end or `heal`
        _sleep(seconds, stop_event)
    return out
