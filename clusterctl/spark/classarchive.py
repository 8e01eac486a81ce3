"""The Spark driver's class archive (HotSpot AppCDS): the classes a driver loads, recorded once, mapped by every
later driver instead of being read, parsed and verified from Spark's jars again.

A local driver on 2 cores spends most of its start loading ~20,000 classes: with the archive its JVM used
6-9 CPU-seconds to its first job where it used 13-16 (bench/spark_driver_start.py). The archive belongs to one
Java, one PySpark and one set of driver flags (its file name is their digest); a JVM that cannot use it (another
classpath, a damaged file) starts as if it were absent. `clusterctl spark prepare` records it (scripts/setup.sh
does); nothing records it behind the user's back.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from clusterctl.errors import ClusterctlError

# -Xlog: a JVM that cannot map the archive says so on stderr; it starts without it, which is all that matters here
SILENT = "-Xlog:cds=off -Xlog:cds+dynamic=off"
RECORD_TIMEOUT_S = 600.0


def cache_dir() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "clusterctl" / "spark"


def _java() -> Path | None:
    """The java spark-submit starts: $JAVA_HOME/bin/java, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def archive_path(driver_opts: str) -> Path | None:
    """Where the archive for this Java, this PySpark and these driver flags lives (None: no java, no PySpark)."""
    java = _java()
    try:
        import pyspark
    except ImportError:
        return None
    if java is None:
        return None
    st = java.stat()
    jars = Path(pyspark.__file__).parent / "jars"
    key = "\n".join([str(java), str(st.st_size), str(st.st_mtime_ns), pyspark.__version__, str(jars), driver_opts])
    return cache_dir() / f"driver-{pyspark.__version__}-{hashlib.sha256(key.encode()).hexdigest()[:16]}.jsa"


def use_opts(driver_opts: str) -> str:
    """The JVM flags that map the recorded archive, or "" when there is none."""
    path = archive_path(driver_opts)
    return f"-XX:SharedArchiveFile={path} {SILENT}" if path is not None and path.is_file() else ""


def prepare(driver_opts: str, progress: Callable[[str], None], force: bool = False) -> tuple[Path, bool]:
    """Record the archive unless it exists: (its path, whether it was recorded now).

    A driver runs a small streaming job in a child process with -XX:ArchiveClassesAtExit; the JVM writes the
    archive as it exits, into a directory of this recording, and the file is renamed into place only once that
    JVM is gone. One recording at a time per cache (a lock); an interrupted one leaves no file.
    """
    path = archive_path(driver_opts)
    if path is None:
        raise ClusterctlError("no Java or no PySpark here: nothing to record", hint="pip install 'clusterctl[spark]'")
    from clusterctl.images.kafka_maven import machine_lock

    with machine_lock(path.parent / ".prepare.lock"):
        if path.is_file() and not force:
            return path, False
        progress(f"recording the Spark driver's class archive in {path} (once, ~30 s)")
        # the JVM writes into a directory of this recording alone: one that outlives an interrupted recording
        # finds the directory gone and writes nothing
        work = Path(tempfile.mkdtemp(prefix=".recording-", dir=path.parent))
        partial = work / path.name
        proc = subprocess.Popen(
            [sys.executable, "-m", "clusterctl.spark.record_archive", str(partial)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            _out, err = proc.communicate(timeout=RECORD_TIMEOUT_S)
            if proc.returncode != 0 or not partial.is_file() or partial.stat().st_size < 1 << 20:
                last = (err.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
                raise ClusterctlError(f"recording the Spark class archive failed: {last[:300]}")
            os.replace(partial, path)
        except subprocess.TimeoutExpired:
            raise ClusterctlError(f"recording the Spark class archive took over {RECORD_TIMEOUT_S:.0f}s") from None
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            # its JVM would exit on its own once its stdin closed, but only after dumping the archive (a minute on
            # a busy machine): SIGKILL, found by the recording's directory in its command line
            _kill_naming(str(work))
            shutil.rmtree(work, ignore_errors=True)
    return path, True


def _kill_naming(text: str) -> None:
    needle = text.encode()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            with contextlib.suppress(OSError):
                if needle in (entry / "cmdline").read_bytes():
                    os.kill(int(entry.name), signal.SIGKILL)
