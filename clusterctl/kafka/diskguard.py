"""Refuse a load test that would fill the disk the brokers write to (the seed's perf test took the cluster down).

The estimate is deliberately an upper bound: records x (value size + per-record framing) x replication factor,
uncompressed, all replicas counted on one filesystem (a local cluster keeps every broker's log dir under
the Docker data root). Free space is only checked where it can be known: an explicit path
(`--disk-path` / $CLUSTERCTL_DISK_PATH) or, for the spec's own local cluster, the Docker data root.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from clusterctl.errors import ClusterctlError

DISK_PATH_ENV = "CLUSTERCTL_DISK_PATH"
GIB = 1024**3
MIN_MARGIN_BYTES = GIB
MARGIN_FRACTION = 0.10
# Record batch v2: ~7-20 B of per-record varints plus a 61 B batch header amortised over the batch;
# 24 B covers small uncompressed records with room to spare, plus offset/time index entries.
RECORD_OVERHEAD_BYTES = 24


class DiskSpaceError(ClusterctlError):
    """The run would leave less than the safe margin free on the brokers' filesystem."""

    exit_code = 7


@dataclass
class DiskCheck:
    """What the guard estimated and found; `free_bytes` is None when free space cannot be known."""

    estimated_bytes: int
    replication_factor: int
    path: str | None
    source: str
    free_bytes: int | None = None
    total_bytes: int | None = None
    margin_bytes: int | None = None
    ok: bool = True
    forced: bool = False
    note: str | None = None


def estimate_bytes(records: int, record_size: int, replication_factor: int) -> int:
    """Upper bound of the bytes a run writes across all replicas."""
    return records * (record_size + RECORD_OVERHEAD_BYTES) * max(1, replication_factor)


def safe_margin(total_bytes: int) -> int:
    """Space that must stay free: 10 % of the filesystem, and never less than 1 GiB."""
    return max(int(total_bytes * MARGIN_FRACTION), MIN_MARGIN_BYTES)


def docker_data_root() -> str | None:
    """The Docker engine's data root (where named volumes live), if the engine is local and answers."""
    try:
        import docker

        client = docker.from_env(timeout=5)
        try:
            root = client.info().get("DockerRootDir")
        finally:
            client.close()
    except Exception:  # no engine, remote engine, permission: free space is then unknown
        return None
    if root and Path(root).exists():
        return str(root)
    return None


def resolve_path(explicit: str | None, local_cluster: bool) -> tuple[str | None, str]:
    """Which filesystem to check and why: explicit path, $CLUSTERCTL_DISK_PATH, the Docker root, or none."""
    if explicit:
        return explicit, "--disk-path"
    env = os.environ.get(DISK_PATH_ENV)
    if env:
        return env, f"${DISK_PATH_ENV}"
    if local_cluster:
        root = docker_data_root()
        if root:
            return root, "docker data root"
        return None, "unknown (Docker engine did not report a local data root)"
    return None, "unknown (remote cluster; pass --disk-path to check a path)"


def fmt_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def check(
    records: int,
    record_size: int,
    replication_factor: int,
    *,
    path: str | None,
    source: str,
    force: bool = False,
) -> DiskCheck:
    """Estimate the run's footprint against free space at `path`; raise DiskSpaceError unless it fits or `force`."""
    est = estimate_bytes(records, record_size, replication_factor)
    result = DiskCheck(est, replication_factor, path, source, forced=force)
    if path is None:
        result.note = f"free space {source}"
        return result
    try:
        usage = shutil.disk_usage(path)
    except OSError as exc:
        raise ClusterctlError(f"cannot check free space at {path}: {exc.strerror or exc}") from None
    margin = safe_margin(usage.total)
    result.free_bytes, result.total_bytes, result.margin_bytes = usage.free, usage.total, margin
    left = usage.free - est
    result.ok = left >= margin
    if result.ok:
        return result
    if force:
        result.note = f"--force: would leave {fmt_bytes(max(left, 0))}, below the {fmt_bytes(margin)} margin"
        return result
    raise DiskSpaceError(
        f"refusing to produce: ~{fmt_bytes(est)} estimated ({records} records x ({record_size}+"
        f"{RECORD_OVERHEAD_BYTES}) B x RF {replication_factor}) but {path} ({source}) has {fmt_bytes(usage.free)} "
        f"free and must keep {fmt_bytes(margin)} (max(10%, 1 GiB))",
        hint="lower --num-records/--record-size, cap repeated runs with --retention-bytes, "
        "check another filesystem with --disk-path, or override with --force",
    )
