"""The NFQUEUE packet handler of the userspace network-fault path: `python -m clusterctl.chaos.nfqhandler`, run
from the host inside a node's network namespace (`nsenter -t PID -n`), where no netem qdisc exists.

It holds each queued packet for its delay (± jitter) on a timer heap and gives its verdict (accept) when the
time is up, so one held packet never blocks the next; it sends an extra copy of a packet (duplicate, through a
raw socket, marked so it is not queued again) or flips a random byte of it (corrupt: the receiver's checksum
drops it, as with netem). It prints `ready` once bound, exits on SIGTERM/SIGINT (accepting what it holds) and
when the node's process is gone. Needs the `netfilterqueue` package (the `netfaults` extra).
"""

from __future__ import annotations

import argparse
import contextlib
import heapq
import os
import random
import select
import signal
import socket
import sys
import time
from typing import Any

SO_MARK = 36


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="nfqhandler")
    ap.add_argument("--queue", type=int, required=True)
    ap.add_argument("--container", required=True)  # names the node (heal finds the handler by it)
    ap.add_argument("--pid", type=int, required=True)  # the node's init: exit when it is gone
    ap.add_argument("--mark", type=lambda v: int(v, 0), required=True)
    ap.add_argument("--delay-ms", type=float, default=0.0)
    ap.add_argument("--jitter-ms", type=float, default=0.0)
    ap.add_argument("--duplicate", type=float, default=0.0)
    ap.add_argument("--corrupt", type=float, default=0.0)
    a = ap.parse_args(argv)
    try:
        from netfilterqueue import NetfilterQueue
    except ImportError:
        print("the userspace network-fault path needs netfilterqueue (pip install 'clusterctl[netfaults]')")
        return 2
    held: list[tuple[float, int, Any]] = []
    raw = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
    raw.setsockopt(socket.SOL_SOCKET, SO_MARK, a.mark)
    seq = 0

    def on_packet(pkt: Any) -> None:
        nonlocal seq
        if a.corrupt and random.random() < a.corrupt:
            pkt.set_payload(_flip_byte(pkt.get_payload()))
        if a.duplicate and random.random() < a.duplicate:
            data = pkt.get_payload()
            with contextlib.suppress(OSError):  # a copy that cannot be sent is a copy the network lost
                raw.sendto(data, (socket.inet_ntoa(data[16:20]), 0))
        if a.delay_ms <= 0:
            pkt.accept()
            return
        d = a.delay_ms + (random.uniform(-a.jitter_ms, a.jitter_ms) if a.jitter_ms else 0.0)
        seq += 1
        heapq.heappush(held, (time.monotonic() + max(0.0, d) / 1000, seq, pkt))

    nfq = NetfilterQueue()
    try:
        nfq.bind(a.queue, on_packet, max_len=10_000)
    except OSError as exc:
        print(f"binding NFQUEUE {a.queue} failed: {exc}")
        return 1
    stopping: list[int] = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(1))
    signal.signal(signal.SIGINT, lambda *_: stopping.append(1))
    print("ready", flush=True)
    _quiet_stdio()
    _serve(nfq, held, stopping, a.pid)
    for _, _, pkt in held:
        pkt.accept()
    nfq.unbind()
    return 0


def _serve(nfq: Any, held: list[tuple[float, int, Any]], stopping: list[int], pid: int) -> None:
    """Read packets and release held ones when due, until told to stop or the node's process is gone."""
    fd = nfq.get_fd()
    alive_check = 0.0
    while not stopping:
        now = time.monotonic()
        while held and held[0][0] <= now:
            heapq.heappop(held)[2].accept()
        if now >= alive_check:
            if not os.path.exists(f"/proc/{pid}"):
                return
            alive_check = now + 1.0
        wait = min(0.5, max(0.0, held[0][0] - now)) if held else 0.5
        try:
            ready, _, _ = select.select([fd], [], [], wait)
        except InterruptedError:
            continue
        if ready:
            nfq.run(block=False)


def _flip_byte(data: bytes) -> bytes:
    """Flip one random byte past the IP header (the transport header or payload)."""
    start = (data[0] & 0x0F) * 4 if data else 0
    if len(data) <= start:
        return data
    i = random.randrange(start, len(data))
    return data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1 :]


def _quiet_stdio() -> None:
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - lives as long as the process


if __name__ == "__main__":
    sys.exit(main())
