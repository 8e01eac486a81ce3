"""Free addresses for throwaway clusters: an unused RFC1918 subnet and a block of free host ports.

Parallel sessions pick at random from large pools, so two picks rarely collide; a collision that
slips through (both pick before either creates) shows up as a compose error that `is_clash` recognises,
and the caller retries with a fresh pick.
"""

from __future__ import annotations

import contextlib
import ipaddress
import random
import socket
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
        if not any(cand.overlaps(u) for u in used):
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
    """The first of `count` consecutive host ports that are free on `host` right now."""
    rng = rng or random.SystemRandom()
    lo, hi = PORT_POOL
    for _ in range(500):
        base = rng.randrange(lo, hi - count)
        if all(_port_free(host, p) for p in range(base, base + count)):
            return base
    raise RuntimeError(f"no block of {count} free ports found in {lo}-{hi}")


def is_clash(message: str) -> bool:
    """True when a compose/engine error means another cluster took our subnet, ports or name first."""
    low = message.lower()
    return any(m in low for m in _CLASH_MARKERS)
