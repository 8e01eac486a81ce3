"""Records of the faults that leave a node frozen or cut off (pause, partition), on disk under the cluster's state.

A SIGKILL cannot be handled: the process that paused a broker (a `scenario run`, a `chaos pause --for`) may die
before its `finally` unpauses it. So such a fault records itself *before* it is applied, one small JSON file per
container and fault in `compose/<cluster>/.clusterctl-faults/`, and its undo removes the record. A record whose
owner is gone is what `chaos heal`, `up`, `status` and `scenario run` find and report; `chaos heal` undoes the
fault (it finds every paused or disconnected container anyway) and removes the records of what it healed.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from clusterctl.spec.model import ClusterSpec

RECORDS_DIR = ".clusterctl-faults"
KINDS = ("pause", "partition")


@dataclass
class FaultRecord:
    kind: str  # pause | partition
    target: str  # "broker 2"
    container: str
    pid: int  # the process that applied it
    started: float
    path: str

    @property
    def owner_alive(self) -> bool:
        return process_alive(self.pid)

    def line(self) -> str:
        what = "paused" if self.kind == "pause" else "cut off its network"
        when = time.strftime("%H:%M:%S", time.localtime(self.started))
        owner = f"pid {self.pid} still running" if self.owner_alive else f"pid {self.pid}, which is gone"
        return f"{self.target} ({self.container}) {what} at {when} by {owner}"


def records_dir(spec: ClusterSpec) -> Path:
    return spec.topology.compose_dir / RECORDS_DIR


def _path(spec: ClusterSpec, kind: str, container: str) -> Path:
    return records_dir(spec) / f"{container}.{kind}.json"


def record(spec: ClusterSpec | None, kind: str, target: str, container: str) -> None:
    """Write the record of a fault about to be applied (atomically: a rename). Without a spec, or where the cluster's
    rendered directory is not (a cluster run from elsewhere), nothing: `chaos heal` still finds the fault in Docker."""
    if spec is None or not spec.topology.compose_dir.is_dir():
        return
    assert kind in KINDS
    path = _path(spec, kind, container)
    data = {"kind": kind, "target": target, "container": container, "pid": os.getpid(), "started": time.time()}
    try:
        path.parent.mkdir(mode=0o700, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(data), encoding="utf-8")
        tmp.replace(path)
    except OSError:  # an unwritable state directory must not stop a fault; `chaos heal` still finds it in Docker
        return


def forget(spec: ClusterSpec | None, kind: str, container: str) -> None:
    """Remove the record of a fault that was undone (or never applied)."""
    if spec is None:
        return
    with contextlib.suppress(OSError):
        _path(spec, kind, container).unlink(missing_ok=True)


def records(spec: ClusterSpec) -> list[FaultRecord]:
    """Every record of this cluster, oldest first; an unreadable one is skipped (and removed)."""
    out = []
    try:
        files = sorted(records_dir(spec).glob("*.json"))
    except OSError:
        return []
    for p in files:
        try:
            d = json.loads(p.read_text(encoding="utf-8"))
            out.append(FaultRecord(str(d["kind"]), str(d["target"]), str(d["container"]), int(d["pid"]),
                                   float(d["started"]), str(p)))  # fmt: skip
        except (OSError, ValueError, KeyError, TypeError):
            with contextlib.suppress(OSError):
                p.unlink()
    return sorted(out, key=lambda r: r.started)


def left_behind(spec: ClusterSpec) -> list[FaultRecord]:
    """The records whose owner is gone: faults a killed process applied and never undid."""
    return [r for r in records(spec) if not r.owner_alive]


def forget_all(spec: ClusterSpec, keep: set[str] | None = None) -> list[FaultRecord]:
    """Remove every record except those of containers in `keep` (still faulted); the removed ones."""
    gone = []
    for r in records(spec):
        if keep and r.container in keep:
            continue
        with contextlib.suppress(OSError):
            Path(r.path).unlink(missing_ok=True)
        gone.append(r)
    return gone


def process_alive(pid: int) -> bool:
    """Whether process `pid` runs (this one does; a zombie does not)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie (killed, not yet reaped) is gone
        with open(f"/proc/{pid}/stat", encoding="ascii") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return True


def still_applied(spec: ClusterSpec, among: list[FaultRecord] | None = None) -> list[FaultRecord]:
    """The records whose pause or cut still holds in Docker; by default those of processes that are gone."""
    from clusterctl.runtime.docker import find_container

    out = []
    for r in left_behind(spec) if among is None else among:
        c = find_container(r.container)
        if c is None:
            continue
        nets = c.attrs.get("NetworkSettings", {}).get("Networks") or {}
        if (r.kind == "pause" and c.status == "paused") or (
            r.kind == "partition" and spec.topology.network_name not in nets
        ):
            out.append(r)
    return out
