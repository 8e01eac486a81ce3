"""`clusterctl spark prepare`: the Spark driver's class archive, recorded once, mapped by later drivers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _runtime_helpers import CLI, run_group

from clusterctl.spark import classarchive, session

pytestmark = pytest.mark.spark

SESSION_JOB = r"""
import sys
from clusterctl.spark import session
extra = sys.argv[1]
conf = {"spark.driver.extraJavaOptions": f"{session.driver_java_options()} {extra}"} if extra else None
spark = session.get_session("local[1]", "archive-test", conf)
args = list(spark._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
print(spark.range(10).count(), " ".join(a for a in args if "Shared" in a or "Xshare" in a))
spark.stop()
"""


def session_in(cache: Path, extra: str = "") -> tuple[int, str]:
    """A fresh driver with this cache; (its count of 10 rows, the sharing flags its JVM got)."""
    res = subprocess.run(
        [sys.executable, "-c", SESSION_JOB, extra],
        env={**os.environ, "XDG_CACHE_HOME": str(cache)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    count, _, flags = res.stdout.strip().splitlines()[-1].partition(" ")
    return int(count), flags


def test_the_archive_belongs_to_its_flags_and_is_used_only_when_present(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    path = classarchive.archive_path(session.DRIVER_JVM_OPTS)
    assert path is not None and path.parent == tmp_path / "clusterctl" / "spark"
    assert classarchive.archive_path(session.DRIVER_JVM_OPTS + " -XX:+UseG1GC") != path
    assert classarchive.use_opts(session.DRIVER_JVM_OPTS) == ""
    path.parent.mkdir(parents=True)
    path.write_bytes(b"x")
    assert classarchive.use_opts(session.DRIVER_JVM_OPTS) == f"-XX:SharedArchiveFile={path} {classarchive.SILENT}"


def test_prepare_records_once_and_drivers_map_it(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    env_cmd = ["env", f"XDG_CACHE_HOME={cache}", CLI, "spark", "prepare", "--json"]
    first = run_group(env_cmd, timeout=600)
    assert first.returncode == 0, first.stderr
    got = json.loads(first.stdout)
    path = Path(got["archive"])
    assert got["recorded"] is True and path.is_file() and got["bytes"] == path.stat().st_size > 10 << 20
    assert "recording the Spark driver's class archive" in first.stderr
    # no partial archive; beside it, the cache of Spark's Kafka connector, resolved by the same command
    assert sorted(p.name for p in path.parent.iterdir()) == sorted([path.name, ".prepare.lock", "ivy"])
    assert got["resolved"] is True and Path(got["connector_jar"]).is_file(), got
    assert Path(got["connector_jar"]).is_relative_to(path.parent / "ivy")

    again = run_group(env_cmd, timeout=120)
    assert again.returncode == 0, again.stderr
    assert (json.loads(again.stdout)["recorded"], json.loads(again.stdout)["resolved"]) == (False, False)

    # clusterctl's drivers get the archive; -Xshare:on makes a JVM that cannot map it fail, so this one mapped it
    assert session_in(cache) == (10, f"-XX:SharedArchiveFile={path}")
    assert session_in(cache, f"-XX:SharedArchiveFile={path} -Xshare:on") == (
        10,
        f"-XX:SharedArchiveFile={path} -Xshare:on",
    )

    # a damaged archive: the driver starts without it
    damaged = tmp_path / "damaged"
    (damaged / "clusterctl" / "spark").mkdir(parents=True)
    (damaged / "clusterctl" / "spark" / path.name).write_bytes(os.urandom(1 << 16))
    assert session_in(damaged)[0] == 10


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_an_interrupted_recording_leaves_no_file_and_no_process(tmp_path: Path, sig: signal.Signals) -> None:
    cache = tmp_path / "cache"
    proc = subprocess.Popen(
        [CLI, "spark", "prepare"],
        env={**os.environ, "XDG_CACHE_HOME": str(cache)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        work = cache / "clusterctl" / "spark"
        deadline = time.monotonic() + 120
        while not list(work.glob(".recording-*")) and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(8)  # the recording driver's JVM is up by now
        os.killpg(proc.pid, sig)
        _out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 128 + sig, err
    assert [ln for ln in err.splitlines() if ln.startswith("error: ")] == [f"error: interrupted by {sig.name}"], err
    gone = time.monotonic() + 60
    while _recorders(cache) and time.monotonic() < gone:
        time.sleep(0.5)
    assert _recorders(cache) == []
    assert sorted(p.name for p in work.iterdir()) == [".prepare.lock"]


def _recorders(cache: Path) -> list[int]:
    """Processes whose command line names this cache (the recording child and its JVM)."""
    found = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                if str(cache).encode() in (d / "cmdline").read_bytes():
                    found.append(int(d.name))
            except OSError:
                pass
    return found
