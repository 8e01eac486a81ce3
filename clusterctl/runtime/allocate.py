"""Free addresses for throwaway clusters: an unused RFC1918 subnet and a block of free host ports.

Parallel sessions pick at random from large pools. A pick is also reserved for the life of the process
that made it (an abstract Unix socket named after it, which the kernel frees when the process ends and which
leaves no file), so two processes of this machine never hand out the same subnet or port while both live,
however long the gap between the pick and the `compose up` that binds it. A clash that still slips through
(a process that does not reserve, another network namespace) shows up as a compose error that `is_clash`
recognises, and the caller retries with a fresh pick.
"""

from __future__ import annotations

import contextlib
import ipaddress
import random
import socket
import sys
from pathlib import Path

# 10.200.0.0-10.255.255.255: clear of the subnets our own tests and the default spec use (10.77-10.79)
SUBNET_POOL = ipaddress.IPv4Network("10.192.0.0/10")
SUBNET_FIRST_OCTET2 = 200
# below Linux's ephemeral range (32768-60999), above the fixed ports of our own tests (22181-29494)
PORT_POOL = (30000, 32700)

_CLASH_MARKERS = (
    "pool overlaps",
    "address already in use",
    "port is already allocated",
    "already exists",
    "conflict",
)


# the reservations this process holds; closed by the kernel when it ends
_HELD: dict[str, socket.socket] = {}


def _reserve(what: str) -> bool:
    """Reserve `what` (a subnet or port) for this process; False when another live process reserved it first."""
    if what in _HELD:
        return False  # this process handed it out already
    if not sys.platform.startswith("linux"):
        return True  # no abstract sockets: the bind check and `is_clash` retries are all there is
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.bind(f"\0clusterctl-reserved-{what}")
    except OSError:
        sock.close()
        return False
    _HELD[what] = sock
    return True


def _reserve_all(keys: list[str]) -> bool:
    """Reserve every key, or none of them."""
    taken = [k for k in keys if _reserve(k)]
    if len(taken) == len(keys):
        return True
    for k in taken:
        if (sock := _HELD.pop(k, None)) is not None:
            sock.close()
    return False


def _slash24s(net: ipaddress.IPv4Network) -> list[str]:
    """The /24s a subnet covers (or lies in): the unit a subnet is reserved by, whatever its prefix."""
    nets = net.subnets(new_prefix=24) if net.prefixlen <= 24 else [net.supernet(new_prefix=24)]
    return [f"net-{n.network_address}" for n in nets]


def _used_networks() -> list[ipaddress.IPv4Network]:
    """Subnets of Docker networks and of host routes (Linux /proc/net/route)."""
    from clusterctl.runtime.docker import client

    used: list[ipaddress.IPv4Network] = []
    for net in client().networks.list():
        for cfg in (net.attrs.get("IPAM") or {}).get("Config") or []:
            with contextlib.suppress(ValueError, TypeError):
                n = ipaddress.ip_network(cfg.get("Subnet", ""), strict=False)
                if isinstance(n, ipaddress.IPv4Network):
                    used.append(n)
    with contextlib.suppress(OSError):
        for line in Path("/proc/net/route").read_text().splitlines()[1:]:
            fields = line.split()
            if len(fields) < 8 or fields[1] == "00000000":
                continue  # the default route is not a subnet
            dest = ipaddress.IPv4Address(int(fields[1], 16).to_bytes(4, "little"))
            mask = ipaddress.IPv4Address(int(fields[7], 16).to_bytes(4, "little"))
            with contextlib.suppress(ValueError):
                used.append(ipaddress.IPv4Network(f"{dest}/{mask}", strict=False))
    return used


def free_subnet(prefix: int = 24, rng: random.Random | None = None) -> str:
    """A random /`prefix` inside 10.200.0.0-10.255.255.255 that overlaps no Docker network or host route."""
    rng = rng or random.SystemRandom()
    used = _used_networks()
    first = int(ipaddress.IPv4Address(f"10.{SUBNET_FIRST_OCTET2}.0.0"))
    last = int(SUBNET_POOL.broadcast_address)
    size = 2 ** (32 - prefix)
    for _ in range(200):
        base = first + rng.randrange((last - first + 1) // size) * size
        cand = ipaddress.IPv4Network(f"{ipaddress.IPv4Address(base)}/{prefix}")
        if not any(cand.overlaps(u) for u in used) and _reserve_all(_slash24s(cand)):
            return str(cand)
    raise RuntimeError("no free private subnet found in 10.200.0.0-10.255.255.255")


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def free_port_block(count: int, host: str = "127.0.0.1", rng: random.Random | None = None) -> int:
    """The first of `count` consecutive host ports that are free on `host` right now, reserved for this process."""
    rng = rng or random.SystemRandom()
    lo, hi = PORT_POOL
    for _ in range(500):
        base = rng.randrange(lo, hi - count)
        ports = range(base, base + count)
        if all(_port_free(host, p) for p in ports) and _reserve_all([f"port-{p}" for p in ports]):
            return base
    raise RuntimeError(f"no block of {count} free ports found in {lo}-{hi}")


def is_clash(message: str) -> bool:
    """True when a compose/engine error means another cluster took our subnet, ports or name first."""
    low = message.lower()
    return any(m in low for m in _CLASH_MARKERS)
