"""The disk guard on real filesystems: a tiny tmpfs mounted for the test, through the real CLI code path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from clusterctl.kafka import admin, diskguard

CLI = [sys.executable, "-m", "clusterctl"]
GIB = 1024**3


def mount_tmpfs(path: Path, size: str) -> None:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)


@pytest.fixture
def tiny_fs(tmp_path: Path) -> Iterator[Path]:
    """A real 8 MiB filesystem (tmpfs; this workplace runs tests as root)."""
    mnt = tmp_path / "tiny"
    mount_tmpfs(mnt, "8m")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


@pytest.fixture
def roomy_fs(tmp_path: Path) -> Iterator[Path]:
    """A 4 GiB tmpfs: tmpfs only uses memory for what is written, so this costs nothing."""
    mnt = tmp_path / "roomy"
    mount_tmpfs(mnt, "4g")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=True)


def run_cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})})


def topic_names(bootstrap: str) -> list[str]:
    return [t.name for t in admin.list_topics(bootstrap)]


def test_refuses_run_that_does_not_fit(bootstrap: str, unique_name: str, tiny_fs: Path) -> None:
    proc = run_cli("perf", "produce", unique_name, "-n", "20000", "--record-size", "1000", "--disk-path", str(tiny_fs),
                   "-b", bootstrap)  # fmt: skip
    assert proc.returncode == diskguard.DiskSpaceError.exit_code == 7
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    line = lines[0]
    assert "refusing to produce" in line and str(tiny_fs) in line
    for flag in ("--num-records", "--retention-bytes", "--disk-path", "--force"):
        assert flag in line
    assert "8.0 MiB free" in line or "MiB free" in line
    assert unique_name not in topic_names(bootstrap)  # refused before the topic was created


def test_env_var_names_the_filesystem(bootstrap: str, unique_name: str, tiny_fs: Path) -> None:
    proc = run_cli("perf", "produce", unique_name, "-n", "100", "--record-size", "100", "-b", bootstrap,
                   env={diskguard.DISK_PATH_ENV: str(tiny_fs)})  # fmt: skip
    # even a tiny run is refused: an 8 MiB filesystem is already inside the 1 GiB safety margin
    assert proc.returncode == 7
    assert f"${diskguard.DISK_PATH_ENV}" in proc.stderr


def test_force_overrides_and_reports(bootstrap: str, unique_name: str, tiny_fs: Path) -> None:
    proc = run_cli("perf", "produce", unique_name, "-n", "2000", "--record-size", "1000", "--disk-path", str(tiny_fs),
                   "--force", "-b", bootstrap, "--json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout)
    assert r["delivered"] == 2000
    disk = r["disk"]
    assert disk["ok"] is False and disk["forced"] is True and "--force" in disk["note"]
    assert disk["path"] == str(tiny_fs) and disk["source"] == "--disk-path"
    assert disk["total_bytes"] == 8 * 1024**2 and disk["margin_bytes"] == GIB


def test_passes_with_enough_room(bootstrap: str, unique_name: str, roomy_fs: Path) -> None:
    proc = run_cli("perf", "produce", unique_name, "-n", "2000", "--record-size", "1000", "--disk-path", str(roomy_fs),
                   "-b", bootstrap, "--json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    disk = json.loads(proc.stdout)["disk"]
    assert disk["ok"] is True and disk["forced"] is False
    assert disk["total_bytes"] == 4 * GIB and disk["free_bytes"] > 3 * GIB
    assert disk["margin_bytes"] == max(int(4 * GIB * 0.1), GIB)
    assert disk["estimated_bytes"] == 2000 * (1000 + diskguard.RECORD_OVERHEAD_BYTES)


def test_real_free_space_decides(roomy_fs: Path) -> None:
    """Writing into the filesystem moves the decision: the guard reads live free space, not a figure."""
    # 4 GiB fs, margin 1 GiB: ~3 GB of records fit now (1.27 GB would stay free) ...
    diskguard.check(1_000_000, 3000, 1, path=str(roomy_fs), source="test")
    with (roomy_fs / "filler").open("wb") as fh:  # ... but not once 300 MiB are used (tmpfs: RAM, freed at umount)
        fh.truncate(0)
        chunk = b"\0" * (1 << 20)
        for _ in range(300):
            fh.write(chunk)
    with pytest.raises(diskguard.DiskSpaceError, match="refusing to produce"):
        diskguard.check(1_000_000, 3000, 1, path=str(roomy_fs), source="test")


def test_estimate_counts_replicas_and_margin_rule() -> None:
    assert diskguard.estimate_bytes(1000, 100, 3) == 1000 * (100 + diskguard.RECORD_OVERHEAD_BYTES) * 3
    assert diskguard.safe_margin(100 * GIB) == 10 * GIB
    assert diskguard.safe_margin(2 * GIB) == GIB


def test_local_cluster_uses_docker_data_root() -> None:
    path, source = diskguard.resolve_path(None, local_cluster=True)
    assert source == "docker data root"
    assert path is not None and Path(path).is_dir()
    remote_path, remote_source = diskguard.resolve_path(None, local_cluster=False)
    assert remote_path is None and "remote cluster" in remote_source
