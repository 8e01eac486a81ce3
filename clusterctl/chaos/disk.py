"""Disk faults: fill a node's bounded data volumes to 100%, and free them again.

The volumes are the ext4 images `storage.bounded_mb` loop-mounts on the host (runtime/disks.py); the fill is
one file, `.clusterctl-fill`, allocated from the host in the volume's root until the filesystem has no free
block, so every write of the node's process that needs a new block gets ENOSPC, as on a real full disk. Kafka
then marks the log dir offline, and with its only log dir offline the broker halts (exit 1); Docker's restart
policy restarts it, and it halts again for as long as the disk stays full. Healing removes the file and
restarts the node. The fill file and the mounts are found from the containers' volumes, so
`heal` needs no state of the fault.
"""

from __future__ import annotations

import errno
import os
import time
from dataclasses import dataclass

from docker.errors import NotFound
from docker.models.containers import Container

from clusterctl.chaos.targets import FaultResult, _container, _require, node_target, state_of
from clusterctl.errors import ClusterctlError, UsageError
from clusterctl.runtime import disks
from clusterctl.runtime import docker as dk
from clusterctl.spec.model import ClusterSpec

MIN_CHUNK = 4096


@dataclass
class NodeDisk:
    """A bounded data volume of a node, as the host sees it."""

    volume: str
    mountpoint: str  # on the host
    destination: str  # in the container

    @property
    def fill_file(self) -> str:
        return os.path.join(self.mountpoint, disks.FILL_NAME)


def node_disks(c: Container) -> list[NodeDisk]:
    """The container's data volumes that are bounded images mounted on the host."""
    out = []
    for m in c.attrs.get("Mounts") or []:
        if m.get("Type") != "volume" or not m.get("Name"):
            continue
        try:
            opts = dk.client().volumes.get(m["Name"]).attrs.get("Options") or {}
        except NotFound:
            continue
        point = opts.get("device")
        if point and str(disks.mounted_at(point) or "").startswith("/dev/loop"):
            out.append(NodeDisk(m["Name"], point, str(m.get("Destination"))))
    return out


def free_bytes(path: str) -> int:
    """What a writer can still allocate (ext4 keeps some clusters back from everyone, root included)."""
    st = os.statvfs(path)
    return st.f_bavail * st.f_frsize


def _fill(d: NodeDisk) -> int:
    """Allocate free space into the fill file until none is left; the bytes allocated (a failed allocation may
    keep blocks past the file's end, so they are counted from its blocks, not its size)."""
    fd = os.open(d.fill_file, os.O_WRONLY | os.O_CREAT, 0o600)
    offset = os.fstat(fd).st_size
    start = os.fstat(fd).st_blocks * 512
    try:
        chunk = free_bytes(d.mountpoint)
        while chunk >= MIN_CHUNK:
            try:
                os.posix_fallocate(fd, offset, chunk)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                chunk //= 2  # metadata takes some of what statvfs called free
                continue
            offset += chunk
            chunk = min(chunk, free_bytes(d.mountpoint))
        os.fsync(fd)
        return os.fstat(fd).st_blocks * 512 - start
    finally:
        os.close(fd)


def fill_disk(spec: ClusterSpec, name: str) -> FaultResult:
    """Fill every bounded data volume of running node `name` to 100%; one line when it is unknown, not running,
    or has no bounded volume (nothing is applied then)."""
    target, cname = node_target(spec, name)
    c = _container(cname)
    _require(c, target, "running")
    found = node_disks(c)
    if not found:
        raise UsageError(
            f"{target} has no bounded data volume: its data is on the host's disk, which a fill would fill",
            hint="set storage.bounded_mb in the spec, then `clusterctl down` and `clusterctl up`",
        )
    started, t0 = time.time(), time.monotonic()
    done = []
    for d in found:
        try:
            n = _fill(d)
        except OSError as exc:
            _free(d)
            raise ClusterctlError(f"could not fill {d.volume}: {exc.strerror or exc}") from None
        done.append(f"{d.destination} ({d.volume}) +{n // (1024 * 1024)} MiB, {free_bytes(d.mountpoint)} B free")
    took = round(time.monotonic() - t0, 3)
    return FaultResult("fill-disk", target, cname, "running", state_of(c), started, took, "filled " + ", ".join(done))


def _free(d: NodeDisk) -> int:
    try:
        size = os.stat(d.fill_file).st_blocks * 512
        os.unlink(d.fill_file)
    except FileNotFoundError:
        return -1
    return size


def heal_disk(spec: ClusterSpec, name: str) -> FaultResult | None:
    """Remove the fill of node `name`'s volumes and restart it; None when it was not filled."""
    target, cname = node_target(spec, name)
    c = dk.find_container(cname)
    if c is None:
        return None
    started, t0 = time.time(), time.monotonic()
    freed = [(d, _free(d)) for d in node_disks(c)]
    freed = [(d, n) for d, n in freed if n >= 0]
    if not freed:
        return None
    before = state_of(c)
    loops = int(c.attrs.get("RestartCount") or 0)
    note = "freed " + ", ".join(f"{n // (1024 * 1024)} MiB on {d.destination} ({d.volume})" for d, n in freed)
    # always: a process that met the full disk may be halting, between two of Docker's restarts, or carrying on
    # with a failed write behind it; a fresh start on the freed disk is the recovery
    dk.restart(c)
    note += f"; restarted (was {before}" + (f", restarted {loops}x by Docker meanwhile)" if loops else ")")
    took = round(time.monotonic() - t0, 3)
    return FaultResult("free-disk", target, cname, "disk full", state_of(c), started, took, note)


def heal_all_disks(spec: ClusterSpec) -> list[FaultResult]:
    """`heal_disk` on every node of the spec."""
    names = [spec.topology.zk_service(i) for i in spec.topology.zk_ids]
    names += [spec.topology.controller_service(i) for i in spec.topology.dedicated_controller_ids]
    names += [spec.topology.broker_service(i) for i in spec.topology.broker_ids]
    return [r for n in names if (r := heal_disk(spec, n)) is not None]
