"""Bounded data volumes (`storage.bounded_mb`): each data volume is an ext4 image loop-mounted on the host.

A Docker volume lives on the host's own filesystem, so filling one fills the host's disk, and tmpfs loses its
data when the container stops. A loop-mounted ext4 image has a size of its own and keeps its data across
restarts, so a broker whose log dir fills up fails as on a real disk (ENOSPC on append → log dir offline →
shutdown) and comes back with its data. Layout, under the rendered compose file's directory:

    disks/<volume>.img   the image (sparse; mkfs.ext4 -m 0: no blocks reserved for root)
    disks/<volume>/      where `up` mounts it (mount -o loop: the loop device goes with the unmount)

The Docker volume is a bind of that mount point (local driver, type none, o bind), created before compose up
with compose's labels, so compose adopts it. `down` unmounts (the loop devices detach with it); `down
--volumes` also removes the images. Everything is found from the directory: no state is kept elsewhere.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from clusterctl.errors import ClusterctlError, UsageError
from clusterctl.runtime import compose
from clusterctl.spec.model import ClusterSpec

FILL_NAME = ".clusterctl-fill"  # the file `chaos fill-disk` writes; `heal` removes it


@dataclass
class BoundedDisk:
    """One bounded data volume on the host."""

    volume: str  # the Docker volume's name
    image: str
    mountpoint: str
    size_mb: int
    mounted: bool


def disk_dir(spec: ClusterSpec, root: Path | None = None) -> Path:
    """Where the cluster's images and mount points live (beside its rendered compose file)."""
    return compose.compose_file(spec, root).parent / "disks"


def _run(argv: list[str]) -> str:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except FileNotFoundError:
        raise ClusterctlError(f"`{argv[0]}` not found: bounded volumes need util-linux and e2fsprogs") from None
    if proc.returncode != 0:
        why = (proc.stderr or proc.stdout).strip().splitlines()
        raise ClusterctlError(f"`{' '.join(argv)}` failed: {why[-1] if why else f'exit {proc.returncode}'}")
    return proc.stdout


def mounted_at(path: str | Path) -> str | None:
    """The source (a loop device) mounted at `path`, or None."""
    target = os.path.realpath(path)
    with open("/proc/self/mountinfo") as f:
        for line in f:
            fields = line.split()
            sep = fields.index("-")
            if fields[4] == target:
                return fields[sep + 2]
    return None


def _make_image(image: Path, size_mb: int) -> None:
    """A fresh ext4 image with an empty root: lost+found is removed, as Kafka takes every directory in its log
    dir for a partition and refuses to start on one that is not."""
    with open(image, "wb") as f:
        f.truncate(size_mb * 1024 * 1024)
    try:
        _run(["mkfs.ext4", "-q", "-F", "-m", "0", "-E", "lazy_itable_init=0,lazy_journal_init=0", str(image)])
        _run(["debugfs", "-w", "-R", "rmdir lost+found", str(image)])
    except BaseException:
        image.unlink(missing_ok=True)
        raise


def attach(spec: ClusterSpec, names: list[str], root: Path | None = None) -> list[BoundedDisk]:
    """Make (first time) and mount the image of each volume in `names`; the mounted disks."""
    size = spec.storage.bounded_mb
    if size is None:
        return []
    if os.geteuid() != 0:
        raise UsageError(
            "storage.bounded_mb needs root (losetup and mount of the volume images)",
            hint="run as root, or set storage.bounded_mb: null",
        )
    base = disk_dir(spec, root)
    base.mkdir(mode=0o700, parents=True, exist_ok=True)
    out = []
    for name in names:
        image, point = base / f"{name}.img", base / name
        if not image.exists():
            _make_image(image, size)
        point.mkdir(exist_ok=True)
        if mounted_at(point) is None:
            _run(["mount", "-o", "loop", str(image), str(point)])
        out.append(BoundedDisk(name, str(image), str(point), size, True))
    return out


def volume_options(spec: ClusterSpec, name: str, root: Path | None = None) -> dict[str, str]:
    """The local driver's options that make Docker volume `name` a bind of its mounted image ({} unbounded)."""
    if spec.storage.bounded_mb is None:
        return {}
    return {"type": "none", "o": "bind", "device": str(disk_dir(spec, root) / name)}


def disks(spec: ClusterSpec, root: Path | None = None) -> list[BoundedDisk]:
    """The bounded disks found in the cluster's disk directory."""
    base = disk_dir(spec, root)
    if not base.is_dir():
        return []
    out = []
    for image in sorted(base.glob("*.img")):
        point = base / image.name.removesuffix(".img")
        size = image.stat().st_size // (1024 * 1024)
        out.append(BoundedDisk(point.name, str(image), str(point), size, mounted_at(point) is not None))
    return out


def release(spec: ClusterSpec, root: Path | None = None, remove: bool = False) -> list[str]:
    """Unmount every disk of the cluster (its loop device detaches); with `remove`, delete the images too.
    What was done, one entry each."""
    base = disk_dir(spec, root)
    if not base.is_dir():
        return []
    done = []
    for point in sorted(p for p in base.iterdir() if p.is_dir()):
        if (dev := mounted_at(point)) is not None:
            _run(["umount", str(point)])
            done.append(f"unmounted {point.name} ({dev})")
        # a loop device left attached (an unmount by hand that kept it) goes too
        image = base / f"{point.name}.img"
        for dev in _loops_of(image):
            try:
                _run(["losetup", "-d", dev])
            except ClusterctlError:
                # the unmount's autoclear detaches the device a moment later: listed above, gone by now
                time.sleep(0.5)
                if dev in _loops_of(image):
                    raise
                continue
            done.append(f"detached {dev}")
    if remove:
        for image in sorted(base.glob("*.img")):
            image.unlink()
            done.append(f"removed {image.name}")
        shutil.rmtree(base)
    return done


def _loops_of(image: Path) -> list[str]:
    if not image.exists():
        return []
    out = _run(["losetup", "--noheadings", "--output", "NAME", "--associated", str(image)])
    return [line.strip() for line in out.splitlines() if line.strip()]


def leftovers(spec: ClusterSpec, root: Path | None = None) -> list[str]:
    """Images, mounts and loop devices of the cluster still present on the host."""
    out = []
    for d in disks(spec, root):
        out.append(d.image)
        if d.mounted:
            out.append(f"mount {d.mountpoint}")
        out += [f"loop {dev}" for dev in _loops_of(Path(d.image))]
    return out
