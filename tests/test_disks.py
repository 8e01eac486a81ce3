"""Bounded data volumes on the host (loop-mounted ext4 images) and the disk fill, without containers.

Needs root, losetup, mount and mkfs.ext4 (as `storage.bounded_mb` does); the spec and the images live in
tmp_path, so nothing here touches Docker.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterctl.chaos import disk
from clusterctl.errors import UsageError
from clusterctl.runtime import disks
from clusterctl.spec.model import ClusterSpec

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0 or not all(shutil.which(t) for t in ("losetup", "mkfs.ext4", "debugfs", "mount")),
    reason="bounded volumes need root, util-linux and e2fsprogs",
)


@pytest.fixture
def spec(tmp_path: Path) -> Iterator[ClusterSpec]:
    s = ClusterSpec.model_validate({"name": f"dk{os.getpid()}", "storage": {"bounded_mb": 64}})
    yield s
    disks.release(s, tmp_path, remove=True)  # also when a test failed half-way


def write(path: str, size: int) -> None:
    with open(path, "wb") as f:
        f.write(b"k" * size)


def test_attach_mounts_an_empty_bounded_filesystem_and_down_leaves_nothing(spec: ClusterSpec, tmp_path: Path) -> None:
    [d] = disks.attach(spec, ["v-data"], tmp_path)
    assert d.mounted and str(disks.mounted_at(d.mountpoint)).startswith("/dev/loop")
    assert os.listdir(d.mountpoint) == []  # no lost+found: Kafka would take it for a partition directory
    st = os.statvfs(d.mountpoint)
    assert 50 * 2**20 < st.f_blocks * st.f_frsize <= 64 * 2**20
    write(os.path.join(d.mountpoint, "segment.log"), 1000)

    dev = str(disks.mounted_at(d.mountpoint))
    assert disks.release(spec, tmp_path) == [f"unmounted v-data ({dev})"]
    assert disks.mounted_at(d.mountpoint) is None and disks._loops_of(Path(d.image)) == []  # detached with it
    assert disks.leftovers(spec, tmp_path) == [d.image]  # `down` keeps the data, like a volume
    [again] = disks.attach(spec, ["v-data"], tmp_path)
    assert Path(again.mountpoint, "segment.log").read_bytes() == b"k" * 1000  # survives a restart

    done = disks.release(spec, tmp_path, remove=True)
    assert done[0].startswith("unmounted v-data (/dev/loop") and done[-1] == "removed v-data.img"
    assert disks.leftovers(spec, tmp_path) == [] and not disks.disk_dir(spec, tmp_path).exists()


def test_unbounded_spec_attaches_nothing(tmp_path: Path) -> None:
    plain = ClusterSpec.model_validate({"name": "plain"})
    assert disks.attach(plain, ["v-data"], tmp_path) == [] and disks.volume_options(plain, "v-data") == {}
    assert not disks.disk_dir(plain, tmp_path).exists()


@pytest.mark.parametrize("size", [0, 63, 65537])
def test_absurd_sizes_are_refused(size: int) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="bounded_mb"):
        ClusterSpec.model_validate({"storage": {"bounded_mb": size}})


def test_fill_leaves_no_space_and_freeing_restores_it(spec: ClusterSpec, tmp_path: Path) -> None:
    [d] = disks.attach(spec, ["v-data"], tmp_path)
    before = disk.free_bytes(d.mountpoint)
    nd = disk.NodeDisk("v-data", d.mountpoint, "/var/lib/kafka/data")
    filled = disk._fill(nd)
    assert filled > before * 0.95 and disk.free_bytes(d.mountpoint) == 0
    with pytest.raises(OSError) as exc:  # what Kafka's next append gets
        write(os.path.join(d.mountpoint, "00000000000000000000.log"), 1 << 20)
    assert exc.value.errno == errno.ENOSPC
    assert disk._free(nd) == filled and not os.path.exists(nd.fill_file)
    assert disk.free_bytes(d.mountpoint) > before - (2 << 20)  # back, less what the failed append kept
    assert disk._free(nd) == -1  # nothing left to free


def test_root_is_required(spec: ClusterSpec, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(UsageError, match="needs root"):
        disks.attach(spec, ["v-data"], tmp_path)
    assert not disks.disk_dir(spec, tmp_path).exists()
