"""Free subnets and host ports are reserved for the life of the process that picked them.

CI once lost a run this way: a test module picked its ports when it was imported, another xdist worker picked
an overlapping block half an hour later (still free: nothing was bound yet), started first, and the first
module's `compose up` failed with "port is already allocated". Here a real second process holds a pick made
from the same random sequence, and this process must step around it.
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path

import pytest

from clusterctl.runtime import allocate

SEED = 4242

HOLDER = """
import random, sys
from clusterctl.runtime import allocate
kind = sys.argv[1]
pick = allocate.free_port_block(4, rng=random.Random({seed})) if kind == "ports" else allocate.free_subnet(
    rng=random.Random({seed}))
print(pick, flush=True)
sys.stdin.read()  # hold the reservation until the test closes our stdin
"""


def reserved_names() -> set[str]:
    """The abstract Unix socket names bound on this machine (the reservations of every live process)."""
    lines = Path("/proc/net/unix").read_text().splitlines()[1:]
    return {f.split()[-1] for f in lines if f.split()[-1].startswith("@clusterctl-reserved-")}


def hold(kind: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER.format(seed=SEED), kind], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


def release(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    assert proc.wait(timeout=30) == 0


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="abstract Unix sockets are Linux's")
def test_a_port_block_another_process_holds_is_not_handed_out_again() -> None:
    proc, held = hold("ports")
    try:
        theirs = set(range(int(held), int(held) + 4))
        assert {f"@clusterctl-reserved-port-{p}" for p in theirs} <= reserved_names()
        # the same random sequence would hand out the same block first
        mine = allocate.free_port_block(4, rng=random.Random(SEED))
        assert not theirs & set(range(mine, mine + 4)), (held, mine)
    finally:
        release(proc)
    assert not {f"@clusterctl-reserved-port-{p}" for p in theirs} & reserved_names()  # gone with the process


@pytest.mark.docker
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="abstract Unix sockets are Linux's")
def test_a_subnet_another_process_holds_is_not_handed_out_again() -> None:
    proc, held = hold("subnet")
    try:
        assert f"@clusterctl-reserved-net-{held.split('/')[0]}" in reserved_names()
        mine = allocate.free_subnet(rng=random.Random(SEED))
        assert mine != held
    finally:
        release(proc)


def test_one_process_never_hands_out_the_same_ports_twice() -> None:
    rng_a, rng_b = random.Random(SEED + 1), random.Random(SEED + 1)
    first = allocate.free_port_block(3, rng=rng_a)
    second = allocate.free_port_block(3, rng=rng_b)
    assert not set(range(first, first + 3)) & set(range(second, second + 3))


def test_a_subnet_is_reserved_by_the_slash24s_it_covers() -> None:
    import ipaddress

    assert allocate._slash24s(ipaddress.IPv4Network("10.201.4.0/23")) == ["net-10.201.4.0", "net-10.201.5.0"]
    assert allocate._slash24s(ipaddress.IPv4Network("10.201.4.128/25")) == ["net-10.201.4.0"]
