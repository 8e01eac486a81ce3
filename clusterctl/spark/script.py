"""A user's own PySpark script, run unchanged the way `spark-submit` would run it, with Spark's Kafka connector.

The script builds its own SparkSession (`SparkSession.builder...getOrCreate()`) and reads and writes with
`format("kafka")`. PySpark starts its JVM with the arguments in PYSPARK_SUBMIT_ARGS: the master, the connector
(`spark.jars.packages`, resolved from clusterctl's cache) and the user's `--conf`; the script's own builder settings
win where it sets the same ones. The cluster's bootstrap servers are in KAFKA_BOOTSTRAP_SERVERS.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

from clusterctl import signals
from clusterctl.errors import UsageError
from clusterctl.spark import packages

BOOTSTRAP_ENV = "KAFKA_BOOTSTRAP_SERVERS"
MAX_SCRIPT_BYTES = 16 << 20
MAX_ARGS = 256
STOP_GRACE_S = 30.0


def is_script(name: str) -> bool:
    """A `spark run` argument naming a script rather than a job of spark_jobs/."""
    return name.endswith(".py") or "/" in name


def check_script(name: str) -> Path:
    """The script's path: a regular, readable file of at most MAX_SCRIPT_BYTES (one line, exit 2 otherwise)."""
    path = Path(name)
    try:
        st = path.stat()
    except OSError as exc:
        raise UsageError(f"spark run {name}: no such script ({exc.strerror})") from None
    if not path.is_file():
        raise UsageError(f"spark run {name}: not a regular file")
    if st.st_size > MAX_SCRIPT_BYTES:
        raise UsageError(f"spark run {name}: {st.st_size} bytes (a script has at most {MAX_SCRIPT_BYTES})")
    if not os.access(path, os.R_OK):
        raise UsageError(f"spark run {name}: not readable")
    return path.resolve()


def submit_env(master: str, bootstrap: str, conf: dict[str, str]) -> dict[str, str]:
    """The environment a script's PySpark starts its JVM with."""
    conf = packages.connector_conf(conf)
    if master.startswith("local"):  # a local driver needs no address but loopback
        conf.setdefault("spark.driver.bindAddress", "127.0.0.1")
        conf.setdefault("spark.driver.host", "127.0.0.1")
    args = ["--master", master, *packages.submit_args(conf), "pyspark-shell"]
    env = dict(os.environ)
    if master.startswith("local"):
        env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env["PYSPARK_SUBMIT_ARGS"] = shlex.join(args)
    env[BOOTSTRAP_ENV] = bootstrap
    env.setdefault("PYSPARK_PYTHON", sys.executable)
    env.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    return env


def run_script(path: Path, args: list[str], master: str, bootstrap: str, conf: dict[str, str]) -> int:
    """Run the script with this Python; its exit status (128 + N when a signal N ended it).

    The script and its JVM run in a process group of their own: an interrupt of this command stops them with
    SIGTERM (SIGKILL after STOP_GRACE_S) and is raised again here once they are gone."""
    if len(args) > MAX_ARGS:
        raise UsageError(f"spark run {path.name}: {len(args)} script arguments (at most {MAX_ARGS})")
    env = submit_env(master, bootstrap, conf)
    proc = subprocess.Popen([sys.executable, str(path), *args], env=env, start_new_session=True)
    try:
        rc = proc.wait()
    except KeyboardInterrupt:
        with signals.held():  # a second signal cannot cut the stop short
            _stop_group(proc)
        raise
    return 128 - rc if rc < 0 else rc


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    for sig, grace in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=grace)
            break
        except subprocess.TimeoutExpired:
            continue
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # the JVM, if it outlived the script
