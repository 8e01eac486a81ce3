"""Interrupt the real-Kafka test suite with SIGTERM at random moments; check that nothing it made is left.

    python scripts/suite_interrupts.py [--runs 5] [--min 20] [--max 300] [--seed N] [-- PYTEST ARGS]

Each run starts `pytest -n 2 --dist loadfile -m real_kafka` (the suite's real-Kafka tests, as `make test` runs them)
with a state directory of its own, sends SIGTERM to pytest at a random moment between --min and --max seconds,
and waits for it to exit. While it runs, every claim the run writes (clusterctl.testing.ownership: the compose
projects, processes and harness commands it owns) is collected. For up to 60 s after the signal it then checks:
- labelled: nothing carries the label of a compose project the run claimed, and no process it claimed or started
  (found by an environment marker every child inherits) is alive;
- anything: compared with a snapshot taken before the run, no new container, volume, network, network
  namespace or link, mount, loop device, iptables rule or root qdisc (run it with the machine to itself: another
  engineer's work would show here too).
A run passes when both are empty within 60 s. Prints one line per run and exits 1 if any run left something.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
MARK_ENV = "CLUSTERCTL_SUITE_INTERRUPT"


def _lines(*cmd: str) -> set[str]:
    res = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return {ln.strip() for ln in res.stdout.splitlines() if ln.strip()}


def _marked(marker: str) -> list[str]:
    """Processes whose environment holds MARKER (every child of the run's pytest inherits it)."""
    found = []
    needle = f"{MARK_ENV}={marker}".encode()
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            if needle not in (d / "environ").read_bytes().split(b"\0"):
                continue
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        found.append(f"{d.name} {cmd[:160]}")
    return sorted(found)


def labelled(projects: set[str], marker: str) -> dict[str, list[str]]:
    from clusterctl.testing import ownership

    left: dict[str, list[str]] = {}
    for project in sorted(projects):
        for kind, names in ownership.project_things(project).items():
            left.setdefault(kind, []).extend(names)
    left["processes"] = _marked(marker)
    return {k: v for k, v in left.items() if v}


def snapshot() -> dict[str, set[str]]:
    """What a test run could leave on this machine, each kind as a set of lines."""
    return {
        "containers": _lines("docker", "ps", "-aq", "--no-trunc"),
        "volumes": _lines("docker", "volume", "ls", "-q"),
        "networks": _lines("docker", "network", "ls", "-q", "--no-trunc"),
        "netns": _lines("ip", "netns", "list"),
        "links": {ln.split(":")[1].strip().split("@")[0] for ln in _lines("ip", "-o", "link") if ":" in ln},
        "mounts": {" ".join(ln.split()[:2]) for ln in Path("/proc/mounts").read_text().splitlines()},
        "loop devices": _lines("losetup", "-a"),
        "iptables": {ln for ln in _lines("iptables-save") if ln.startswith("-A")},
        "qdiscs": {ln for ln in _lines("tc", "qdisc", "show") if "noqueue" not in ln and "qdisc noop" not in ln},
    }


def new_things(before: dict[str, set[str]]) -> dict[str, list[str]]:
    now = snapshot()
    left: dict[str, list[str]] = {}
    for kind, lines in now.items():
        extra = lines - before[kind]
        if extra:
            left[kind] = sorted(extra)
    return left


def one_run(n: int, delay: float, pytest_args: list[str]) -> bool:
    from clusterctl.testing import ownership

    before = snapshot()
    marker = f"run{n}-{os.getpid()}"
    state = Path(f"/tmp/suite-interrupt-state-{marker}")
    env = {k: v for k, v in os.environ.items() if k != ownership.RUN_ENV}
    env |= {MARK_ENV: marker, ownership.STATE_ENV: str(state)}
    cmd = [str(REPO / ".venv/bin/pytest"), "-n", "2", "--dist", "loadfile", "-p", "no:cacheprovider", "-q",
           "-m", "real_kafka", *pytest_args]  # fmt: skip
    log = Path(f"/tmp/suite-interrupt-{n}.log")
    claimed: set[str] = set()

    def collect() -> None:
        for claims in state.glob("run-*/claims"):
            with contextlib.suppress(OSError):
                claimed.update(
                    ln.split(" ", 1)[1] for ln in claims.read_text().splitlines() if ln.startswith("project ")
                )

    with log.open("w") as fh:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=fh, stderr=subprocess.STDOUT, env=env)
        t_start = time.monotonic()
        while proc.poll() is None and time.monotonic() - t_start < delay:
            collect()
            time.sleep(0.1)
        if proc.poll() is not None:
            print(f"run {n}: pytest ended by itself after {time.monotonic() - t_start:.0f} s (exit {proc.returncode})")
            return False
        proc.send_signal(signal.SIGTERM)
        t_sig = time.monotonic()
        while proc.poll() is None and time.monotonic() - t_sig < 120:
            collect()
            time.sleep(0.1)
        if proc.poll() is None:
            proc.kill()
        rc = proc.wait()
    exited = time.monotonic() - t_sig

    def check() -> dict[str, dict[str, list[str]]]:
        found = {"labelled": labelled(claimed, marker), "anything": new_things(before)}
        return {k: v for k, v in found.items() if v}

    left = check()
    while left and time.monotonic() - t_sig < 60:
        time.sleep(1)
        left = check()
    took = time.monotonic() - t_sig
    verdict = "nothing left" if not left else f"LEFT {left}"
    print(f"run {n}: SIGTERM after {delay:.0f} s (projects claimed: {', '.join(sorted(claimed)) or 'none'}); "
          f"pytest exited {rc} in {exited:.1f} s; {verdict} ({took:.1f} s after the signal); log {log}",
          flush=True)  # fmt: skip
    shutil.rmtree(state, ignore_errors=True)
    return not left


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--min", type=float, default=20.0)
    ap.add_argument("--max", type=float, default=300.0)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("pytest_args", nargs="*")
    args = ap.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    print(f"seed {seed}: {args.runs} runs, SIGTERM between {args.min:.0f} and {args.max:.0f} s", flush=True)
    ok = [one_run(i + 1, rng.uniform(args.min, args.max), args.pytest_args) for i in range(args.runs)]
    print(f"{sum(ok)} of {len(ok)} interrupted runs left nothing within 60 s")
    return 0 if all(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
