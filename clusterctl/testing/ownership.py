"""What a test run owns: one run id, a claim file per run, and the sweep that removes what a run left behind.

A run (one pytest session with its xdist workers) gets an id and a directory under the state dir
(`$CLUSTERCTL_TEST_STATE`, default ~/.cache/clusterctl/test-runs/<run id>/) holding `owner` (pid and start time
of the process that began the run) and `claims`: one line per thing a test of the run creates, written before
it is created:

    project NAME        a compose project: everything labelled com.docker.compose.project=NAME
    pid PID START       a process (and its process group) the run started, with its start time
    command JSON        an argv that removes something outside Docker (a harness's namespaces, daemons, rules)
    -LINE               LINE released: removed by its owner already

The sweep finds a run whose owner is gone (or whose pid now names another process) and removes what it claimed,
by those labels and pids, never by guessing names; `sweep_own` does the same for this run at its end. A
compose project that still has things in the engine when a test is about to create it is removed when a dead or
this run claimed it, else refused with one line naming it (`ensure_fresh`): never reused.

Workers and subprocesses of a run find it through $CLUSTERCTL_TEST_RUN.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from clusterctl.errors import ClusterctlError

RUN_ENV = "CLUSTERCTL_TEST_RUN"
STATE_ENV = "CLUSTERCTL_TEST_STATE"
PROJECT_LABEL = "com.docker.compose.project"


def state_dir() -> Path:
    return Path(os.environ.get(STATE_ENV) or Path.home() / ".cache" / "clusterctl" / "test-runs")


def _start_time(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/PID/stat field 22), None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[19]


def alive(pid: int, start: str) -> bool:
    """The process `pid` started at `start` still runs (a reused pid is another process: not alive)."""
    return _start_time(pid) == start


@dataclass
class Claims:
    projects: list[str] = field(default_factory=list)
    pids: list[tuple[int, str]] = field(default_factory=list)
    commands: list[list[str]] = field(default_factory=list)


class Run:
    """One test run's directory: its owner and its claims."""

    def __init__(self, run_id: str, root: Path | None = None) -> None:
        self.id = run_id
        self.dir = (root or state_dir()) / run_id
        self._claimed: set[str] = set()

    @classmethod
    def begin(cls, root: Path | None = None, pid: int | None = None) -> Run:
        """A new run owned by `pid` (default this process)."""
        run = cls(f"run-{uuid.uuid4().hex[:12]}", root)
        run.dir.mkdir(parents=True)
        pid = pid or os.getpid()
        (run.dir / "owner").write_text(f"{pid} {_start_time(pid)}\n")
        (run.dir / "claims").touch()
        return run

    @property
    def owner(self) -> tuple[int, str] | None:
        try:
            pid, start = (self.dir / "owner").read_text().split()
        except (OSError, ValueError):
            return None
        return int(pid), start

    def owner_alive(self) -> bool:
        owner = self.owner
        return owner is not None and alive(*owner)

    def _append(self, line: str) -> None:
        if line in self._claimed:
            return
        with (self.dir / "claims").open("a") as f:  # one short write per line: appends of workers do not interleave
            f.write(line + "\n")
        self._claimed.add(line)

    def claim_project(self, project: str) -> None:
        self._append(f"project {project}")

    def claim_pid(self, pid: int) -> str | None:
        """The process (and its group when it leads one); the claim's line, for `release`."""
        start = _start_time(pid)
        if start is None:
            return None
        line = f"pid {pid} {start}"
        self._append(line)
        return line

    def claim_command(self, argv: list[str]) -> str:
        """An argv the sweep runs (timeout 120 s) to remove what the run made outside Docker; the claim's line,
        for `release`."""
        line = f"command {json.dumps(argv)}"
        self._append(line)
        return line

    def release(self, line: str) -> None:
        """The claim `line` is done with (its owner removed what it names)."""
        self._append(f"-{line}")

    def claims(self) -> Claims:
        out = Claims()
        with contextlib.suppress(OSError):
            lines = (self.dir / "claims").read_text().splitlines()
            released = {ln[1:] for ln in lines if ln.startswith("-")}
            for line in lines:
                if line.startswith("-") or line in released:
                    continue
                kind, _, rest = line.partition(" ")
                if kind == "project" and rest:
                    out.projects.append(rest)
                elif kind == "pid":
                    pid, start = rest.split()
                    out.pids.append((int(pid), start))
                elif kind == "command":
                    out.commands.append(json.loads(rest))
        return out

    def ensure_fresh(self, project: str) -> None:
        """Claim the project, first removing leftovers in the engine of an earlier (dead) run or of this run
        (once per process: a test's own `down` then `up` keeps its volumes); refuse, naming it, a project that a
        live run owns or no run does: its volumes are never reused."""
        if f"project {project}" in self._claimed:
            return
        things = project_things(project)
        if any(things.values()):
            owner = owner_of(project, self.dir.parent)
            if owner is not None and (owner.id == self.id or not owner.owner_alive()):
                remove_project(project)
            else:
                who = f"live run {owner.id}" if owner is not None else "no test run"
                listed = "; ".join(f"{k} {', '.join(v)}" for k, v in things.items() if v)
                raise ClusterctlError(
                    f"compose project {project} already exists ({listed}), owned by {who}; not reused"
                )
        self.claim_project(project)

    def remove_all(self, spare: frozenset[str] = frozenset()) -> list[str]:
        """Remove everything claimed (processes first, then the compose projects, except those in `spare`); what
        was found, one per item."""
        claims = self.claims()
        found = [f"pid {p}" for p, s in claims.pids if alive(p, s)]
        for pid, start in claims.pids:
            kill_group(pid, start)
        for argv in claims.commands:
            found.append(f"command {' '.join(argv)}")
            with contextlib.suppress(OSError, subprocess.SubprocessError):
                subprocess.run(argv, capture_output=True, timeout=120, check=False)
        for project in dict.fromkeys(claims.projects):
            if project not in spare:
                found += remove_project(project)
        return found


def kill_group(pid: int, start: str) -> None:
    """SIGKILL the process and the process group it leads (or led: a group keeps its id while a member lives,
    and the kernel never hands that id to a new process meanwhile; a pid reused by another process means the
    group is empty)."""
    now = _start_time(pid)
    if now is not None and now != start:
        return  # another process now: the one claimed and its group are gone
    with contextlib.suppress(OSError):
        os.killpg(pid, signal.SIGKILL)
    if now is not None:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def project_things(project: str) -> dict[str, list[str]]:
    """Containers, networks and volumes labelled with the compose project."""
    from clusterctl.runtime.docker import client

    flt = {"label": f"{PROJECT_LABEL}={project}"}
    c = client()
    return {
        "containers": sorted(x.name for x in c.containers.list(all=True, filters=flt, ignore_removed=True)),
        "networks": sorted(n.name for n in c.networks.list(filters=flt)),
        "volumes": sorted(v.name for v in c.volumes.list(filters=flt)),
    }


def remove_project(project: str) -> list[str]:
    """Remove every container, network and volume labelled with the project; what was there ("kind name")."""
    from docker.errors import APIError, NotFound

    from clusterctl.runtime.docker import client

    flt = {"label": f"{PROJECT_LABEL}={project}"}
    c = client()
    found: list[str] = []
    for _ in range(3):  # a compose process killed mid-`up` may still have created one more thing
        containers = c.containers.list(all=True, filters=flt, ignore_removed=True)
        for x in containers:
            with contextlib.suppress(NotFound, APIError):
                x.remove(force=True, v=True)
        networks = c.networks.list(filters=flt)
        for n in networks:
            with contextlib.suppress(NotFound, APIError):
                n.remove()
        volumes = c.volumes.list(filters=flt)
        for v in volumes:
            with contextlib.suppress(NotFound, APIError):
                v.remove(force=True)
        now = [f"container {x.name}" for x in containers] + [f"network {n.name}" for n in networks]
        now += [f"volume {v.name}" for v in volumes]
        if not now:
            break
        found += [t for t in now if t not in found]
        time.sleep(0.5)
    return found


def runs(root: Path | None = None) -> list[Run]:
    base = root or state_dir()
    if not base.is_dir():
        return []
    return [Run(d.name, base) for d in sorted(base.iterdir()) if d.is_dir() and d.name.startswith("run-")]


def sweep(root: Path | None = None) -> dict[str, list[str]]:
    """Remove what every run whose owner is gone left behind, then its directory; {run id: what was found}."""
    out: dict[str, list[str]] = {}
    every = runs(root)
    live = [r for r in every if r.owner_alive()]
    spare = frozenset(p for r in live for p in r.claims().projects)  # a fixed name a live run claimed again
    for run in every:
        if run in live:
            continue
        out[run.id] = run.remove_all(spare)
        shutil.rmtree(run.dir, ignore_errors=True)
    return out


def owner_of(project: str, root: Path | None = None) -> Run | None:
    """The run that claimed the compose project, if any."""
    return next((r for r in runs(root) if project in r.claims().projects), None)


_current: Run | None = None


def current() -> Run:
    """This process's run: the one named by $CLUSTERCTL_TEST_RUN, else a new one owned by this process."""
    global _current
    if _current is None:
        run_id = os.environ.get(RUN_ENV)
        if run_id and (state_dir() / run_id / "owner").is_file():
            _current = Run(run_id)
        else:
            _current = Run.begin()
            os.environ[RUN_ENV] = _current.id
    return _current


def sweep_own() -> list[str]:
    """At the end of the run: remove whatever it still owns, then its directory (owner process only)."""
    global _current
    run = _current
    if run is None or run.owner is None or run.owner[0] != os.getpid():
        return []
    found = run.remove_all()
    shutil.rmtree(run.dir, ignore_errors=True)
    _current = None
    os.environ.pop(RUN_ENV, None)
    return found


def claim(project: str) -> None:
    """Within a test run ($CLUSTERCTL_TEST_RUN set): `ensure_fresh` the project for it; else nothing."""
    if os.environ.get(RUN_ENV):
        current().ensure_fresh(project)
