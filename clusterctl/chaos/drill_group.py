"""A drill's consumer group: N member processes (group_member.py) beside the load, their logs, and faults on them.

Each member is a process of its own with its own log, member-N.jsonl under the drill's work directory. A thread
here reads what the logs gained every LOG_POLL_S: each assignment change is handed to `on_change` (the observer's
timeline, with the member's own time) and the reads are kept per partition for the consume gaps and the
at-least-once check (group_timeline.py). A member is killed with SIGKILL (a crash: no LeaveGroup, no last
commit) and stopped with SIGTERM (it commits and leaves); whatever still runs when the drill ends is stopped.
The members stay in this process's process group, so whatever stops the drill's command stops them too.
"""

from __future__ import annotations

import contextlib
import json
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clusterctl.chaos.group_timeline import AssignmentChange, Read
from clusterctl.errors import ClusterctlError, UsageError
from clusterctl.wait import wait_until

LOG_POLL_S = 0.5
STOP_GRACE_S = 20.0  # a member's close: a last commit and LeaveGroup, each bounded by librdkafka's timeouts


@dataclass
class MemberProc:
    index: int
    process: subprocess.Popen[bytes]
    log: Path
    died: float | None = None  # when the drill killed it


@dataclass
class GroupLog:
    """What the members' logs say so far."""

    reads: dict[int, list[Read]] = field(default_factory=dict)  # per partition, in the order read
    changes: list[AssignmentChange] = field(default_factory=list)
    assigned: dict[int, set[int]] = field(default_factory=dict)  # member → its partitions now
    errors: list[str] = field(default_factory=list)
    # (member, partition) → the newest record timestamp (s) it read: when the newest record it read was written
    newest_read: dict[tuple[int, int], float] = field(default_factory=dict)


class DrillGroup:
    """Start with `start()`; `kill(n)` crashes member n; `stop()` ends every member still running."""

    def __init__(
        self,
        bootstrap: str,
        topic: str,
        group: str,
        protocol: str,
        members: int,
        work_dir: Path,
        *,
        session_timeout_ms: int | None = None,
        commit_interval_ms: int = 1000,
        on_change: Callable[[AssignmentChange], None] | None = None,
    ) -> None:
        self.bootstrap, self.topic, self.group, self.protocol = bootstrap, topic, group, protocol
        self.count, self.work_dir = members, work_dir
        self.session_timeout_ms, self.commit_interval_ms = session_timeout_ms, commit_interval_ms
        self.on_change = on_change
        self.members: dict[int, MemberProc] = {}
        self.log = GroupLog()
        self.started: float | None = None
        self.settled: float | None = None  # when start() saw the assignment settled
        self.stopping: float | None = None  # when stop() began: the group's part of the drill ends here
        self.stopped: float | None = None
        self.partitions = 0
        self._offsets: dict[int, int] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- processes
    def _argv(self, index: int, log: Path) -> list[str]:
        argv = [sys.executable, "-m", "clusterctl.chaos.group_member", "--bootstrap", self.bootstrap,
                "--topic", self.topic, "--group", self.group, "--protocol", self.protocol, "--member", str(index),
                "--log", str(log), "--commit-interval-ms", str(self.commit_interval_ms)]  # fmt: skip
        if self.session_timeout_ms is not None and self.protocol == "classic":
            argv += ["--session-timeout-ms", str(self.session_timeout_ms)]
        return argv

    def start(self, partitions: int, timeout: float) -> float:
        """Start every member; return the seconds until every partition was assigned to one."""
        directory = self.work_dir / "group"
        directory.mkdir(parents=True, exist_ok=True)
        self.started, self.partitions = time.time(), partitions
        for i in range(1, self.count + 1):
            log = directory / f"member-{i}.jsonl"
            with (directory / f"member-{i}.err").open("wb") as err:
                proc = subprocess.Popen(self._argv(i, log), stdin=subprocess.DEVNULL, stdout=err, stderr=err)
            self.members[i] = MemberProc(i, proc, log)
        self._thread = threading.Thread(target=self._tail, name="drill-group", daemon=True)
        self._thread.start()
        wait_until(
            self._unbalanced,
            timeout=timeout,
            what=f"every partition of {self.topic} assigned once, evenly, over the members of group {self.group}",
            interval=0.2,
            done=lambda why: not why,
            seen=lambda why: f"{why}; {self._exits() or 'every member running'}",
        )
        self.settled = time.time()
        return self.settled - self.started

    def _unbalanced(self) -> str:
        """What keeps the assignment from being settled ("" once every partition is held by one member and each
        member holds as many as any other, give or take one: what both protocols' assignors end with)."""
        self.refresh()
        exited = self._exits()
        if exited:
            raise ClusterctlError(f"group {self.group}: {exited}")
        with self._lock:
            held = {m: set(ps) for m, ps in self.log.assigned.items()}
        counts = [len(held.get(m, set())) for m in self.members]
        owners = [p for ps in held.values() for p in ps]
        missing = [p for p in range(self.partitions) if p not in owners]
        if missing or len(owners) != len(set(owners)):
            return f"partitions {missing} unassigned, {len(owners) - len(set(owners))} held twice"
        low = self.partitions // len(self.members)
        if any(not low <= n <= low + (self.partitions % len(self.members) > 0) for n in counts):
            return f"partitions per member {counts}"
        return ""

    def _exits(self) -> str:
        """Members that exited without being killed or stopped, with the last line of their error output."""
        out = []
        for m in self.members.values():
            if m.died is None and self.stopped is None and m.process.poll() is not None:
                err = m.log.with_suffix(".err")
                lines = err.read_text(errors="replace").strip().splitlines() if err.is_file() else []
                last = lines[-1] if lines else (self.log.errors[-1] if self.log.errors else "no output")
                out.append(f"member {m.index} exited ({m.process.returncode}): {last[:300]}")
        return "; ".join(out)

    def kill(self, index: int) -> tuple[float, int]:
        """SIGKILL member `index` (a crash); (when, its pid)."""
        m = self.members.get(index)
        if m is None:
            raise UsageError(f"kill-member: the group has members 1..{self.count}, not {index}")
        if m.died is not None or m.process.poll() is not None:
            raise ClusterctlError(f"kill-member: member {index} is not running")
        t = time.time()
        m.process.send_signal(signal.SIGKILL)
        m.process.wait(timeout=30)
        m.died = t
        return t, m.process.pid

    def stop(self, timeout: float = STOP_GRACE_S) -> None:
        """SIGTERM every member still running (it commits and leaves the group), SIGKILL one not gone in time."""
        if self.stopped is not None:
            return
        self.stopping = time.time()
        live = [m for m in self.members.values() if m.process.poll() is None]
        for m in live:
            m.process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout
        for m in live:
            try:
                m.process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                m.process.kill()
                m.process.wait(timeout=30)
        self.stopped = time.time()
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.refresh()

    @property
    def deaths(self) -> dict[int, float]:
        return {m.index: m.died for m in self.members.values() if m.died is not None}

    def live(self) -> list[int]:
        return [m.index for m in self.members.values() if m.died is None and m.process.poll() is None]

    # -- the logs
    def _tail(self) -> None:
        while not self._stop.wait(LOG_POLL_S):
            with contextlib.suppress(OSError, ValueError):
                self.refresh()

    def refresh(self) -> None:
        """Read what every member's log gained since the last call."""
        for m in list(self.members.values()):
            if not m.log.is_file():
                continue
            with self._lock, m.log.open("rb") as fh:
                fh.seek(self._offsets.get(m.index, 0))
                chunk = fh.read()
                complete = chunk[: chunk.rfind(b"\n") + 1]
                self._offsets[m.index] = self._offsets.get(m.index, 0) + len(complete)
                self._apply(m.index, complete)

    def _apply(self, member: int, chunk: bytes) -> None:
        for line in chunk.decode("utf-8", "replace").splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            self._apply_row(member, row)

    def _apply_row(self, member: int, row: dict[str, Any]) -> None:
        kind, t = row.get("e"), float(row.get("t", 0.0))
        log = self.log
        if kind == "read":
            p = int(row["p"])
            log.reads.setdefault(p, []).append(Read(t, member, p, tuple((int(a), int(b)) for a, b in row["r"])))
            written = float(row.get("ts", 0)) / 1000
            log.newest_read[(member, p)] = max(written, log.newest_read.get((member, p), 0.0))
        elif kind in ("assign", "revoke", "lost"):
            parts = [int(p) for p in row.get("p", [])]
            held = log.assigned.setdefault(member, set())
            if kind == "assign":
                held.update(parts)
            else:
                held.difference_update(parts)
            change = AssignmentChange(t, member, str(kind), parts)
            log.changes.append(change)
            if self.on_change is not None:
                self.on_change(change)
        elif kind == "error":
            log.errors.append(f"member {member}: {row.get('error')}")

    def not_read_since(self, t: float) -> list[int]:
        """Partitions of which no live member has read a record written (its timestamp) after `t`."""
        self.refresh()
        live = set(self.live())
        with self._lock:
            read = {p for (m, p), newest in self.log.newest_read.items() if m in live and newest > t}
        return [p for p in range(self.partitions) if p not in read]

    def snapshot(self) -> GroupLog:
        """A copy of what the logs say now (reads sorted by time)."""
        self.refresh()
        with self._lock:
            reads = {p: sorted(rs, key=lambda r: r.t) for p, rs in self.log.reads.items()}
            return GroupLog(reads, list(self.log.changes), {m: set(p) for m, p in self.log.assigned.items()},
                            list(self.log.errors), dict(self.log.newest_read))  # fmt: skip
