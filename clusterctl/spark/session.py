"""SparkSession for clusterctl jobs: local mode by default, quiet, with the Kafka data source registered."""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from clusterctl.errors import ClusterctlError, UsageError
from clusterctl.runtime.fault_records import process_alive
from clusterctl.spark import classarchive, packages
from clusterctl.spec import validate

DEFAULT_MASTER = "local[*]"
# Spark logs every failed task with a Java stack trace; clusterctl reports one line per failure instead
QUIET_LOG4J2 = """\
rootLogger.level = fatal
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n
"""


def _quiet_log_config() -> str:
    path = Path(tempfile.gettempdir()) / f"clusterctl-spark-log4j2-{os.getuid()}.properties"
    if not path.exists() or path.read_text() != QUIET_LOG4J2:
        path.write_text(QUIET_LOG4J2)
    return str(path)


CLUSTER_MASTER = "cluster"
MAX_LOCAL_THREADS = 1024
MAX_CONF = 64  # --conf entries
MAX_CONF_VALUE_BYTES = 65_536
_LOCAL = re.compile(r"local(?:\[(\*|[0-9]+)(?:,([0-9]+))?\])?")
_CONF_KEY = re.compile(r"spark\.[A-Za-z0-9_.-]{1,200}")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\ud800-\udfff]")


def check_master(master: str) -> str:
    """`--master` before any JVM starts: local, local[N], local[*] (optionally ,maxFailures), `cluster` or
    spark://host:port[,host:port]; anything else (yarn, k8s://, a typo) is one line, exit 2, not a Java trace."""
    m = _LOCAL.fullmatch(master)
    if m:
        for part, what in ((m.group(1), "threads"), (m.group(2), "task failures")):
            if part not in (None, "*"):
                validate.at_most(int(part), f"--master {master}: {what}", MAX_LOCAL_THREADS)
        return master
    if master == CLUSTER_MASTER:
        return master
    if master.startswith("spark://"):
        hosts = master[len("spark://") :]
        if not hosts:
            raise UsageError("--master spark:// names no host:port")
        validate.host_ports(hosts, f"--master {master}")
        return master
    raise UsageError(
        f"--master must be local, local[N], local[*], cluster or spark://host:port, got {master!r}"
        " (clusterctl runs Spark in this process or on a standalone master)"
    )


def check_conf(conf: dict[str, str]) -> dict[str, str]:
    """`--conf` before any JVM starts: at most MAX_CONF Spark properties (spark.*; spark.master is --master),
    values bounded and free of control characters. Spark checks the values' meaning when it starts."""
    if len(conf) > MAX_CONF:
        raise UsageError(f"--conf: {len(conf)} properties given (at most {MAX_CONF})")
    for key, value in conf.items():
        if not _CONF_KEY.fullmatch(key):
            raise UsageError(f"--conf {key[:80]!r}: not a Spark property (spark.<name>; Spark ignores others)")
        if key == "spark.master":
            raise UsageError("--conf spark.master: use --master")
        if len(value.encode("utf-8", "surrogateescape")) > MAX_CONF_VALUE_BYTES:
            raise UsageError(f"--conf {key}: the value is longer than {MAX_CONF_VALUE_BYTES} bytes")
        if _CONTROL.search(value):
            raise UsageError(f"--conf {key}: the value holds control characters or bytes that are not UTF-8")
    return conf


@contextlib.contextmanager
def quiet_py4j() -> Iterator[None]:
    """py4j logs a traceback through Python's root logger when a call is interrupted (Ctrl-C, SIGTERM) or the
    JVM goes away: the command's one line says what happened, so those records are dropped while it runs."""
    root = logging.getLogger()
    loggers = [root, logging.getLogger("py4j")]
    saved = [(lg, lg.level) for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        for lg, level in saved:
            lg.setLevel(level)


def jvm_log_path() -> Path:
    """Where the Spark JVM's own stderr goes (startup banners, warnings, a stack trace when it is stopped)."""
    return Path(tempfile.gettempdir()) / f"clusterctl-spark-jvm-{os.getuid()}.log"


@contextlib.contextmanager
def _jvm_stderr() -> Iterator[Path]:
    """While a JVM may be launched, descriptors 1 and 2 are the JVM log: the JVM keeps them for its life, so its
    noise (Ivy's resolution report on stdout, a Java trace on an interrupt) never reaches the user's terminal or
    a `--json` document; this process's stdout and stderr are restored."""
    path = jvm_log_path()
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        saved = {n: os.dup(n) for n in (1, 2)}
    except OSError:
        yield path
        return
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
    for n in saved:
        os.dup2(fd, n)
    os.close(fd)
    try:
        yield path
    finally:
        for n, old in saved.items():
            os.dup2(old, n)
            os.close(old)


def scratch_root() -> Path:
    return Path(tempfile.gettempdir()) / f"clusterctl-spark-{os.getuid()}"


_scratch: Path | None = None


def sweep_scratch() -> list[str]:
    """Remove the scratch directories of processes that are gone (a driver killed before its own cleanup)."""
    removed = []
    root = scratch_root()
    for entry in sorted(root.iterdir()) if root.is_dir() else []:
        pid = entry.name.split("-", 1)[0]
        if pid.isdigit() and not process_alive(int(pid)):  # this process counts as alive
            shutil.rmtree(entry, ignore_errors=True)
            removed.append(str(entry))
    return removed


def _remove_scratch() -> None:
    if _scratch is not None:
        shutil.rmtree(_scratch, ignore_errors=True)


def scratch_dir() -> Path:
    """This process's Spark scratch directory, the driver JVM's java.io.tmpdir: Spark's spark-*, blockmgr-* and
    artifacts-* directories and lz4's native library land there instead of straight in /tmp, where a driver that did
    not stop cleanly left them for good. Removed when this process exits, or by the next driver if it was killed."""
    global _scratch
    if _scratch is None:
        sweep_scratch()
        root = scratch_root()
        root.mkdir(mode=0o700, exist_ok=True)
        _scratch = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=root))
        atexit.register(_remove_scratch)
    return _scratch


# The driver JVM as the lab's brokers run (spec kafka.defaults.jvm_opts): C1 only and the serial collector start a
# driver in ~30 s where the default JIT and G1 take ~40 s on 2 cores, and a lab job's batches are small. A job that
# wants C2 passes its own --conf spark.driver.extraJavaOptions (it replaces this line).
DRIVER_JVM_OPTS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


def driver_java_options() -> str:
    """spark.driver.extraJavaOptions of clusterctl's drivers: the flags above, the quiet log config and the scratch
    directory."""
    return f"{DRIVER_JVM_OPTS} -Dlog4j2.configurationFile=file:{_quiet_log_config()} -Djava.io.tmpdir={scratch_dir()}"


def register(spark: Any) -> None:
    """Make `format("clusterctl-kafka")` available in `spark` (idempotent)."""
    from clusterctl.spark.datasource import KafkaDataSource

    spark.dataSource.register(KafkaDataSource)


def get_session(
    master: str = DEFAULT_MASTER,
    app_name: str = "clusterctl",
    conf: dict[str, str] | None = None,
    shuffle_partitions: int | None = None,
) -> Any:
    """A SparkSession (the active one if it exists) with the UI off, UTC, and the Kafka source registered."""
    try:
        from pyspark.sql import SparkSession
    except ImportError:
        raise ClusterctlError("PySpark is not installed", hint="pip install 'clusterctl[spark]'") from None
    # executors must run this interpreter: it has clusterctl and confluent-kafka
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions or _default_shuffle(master)))
        .config("spark.sql.streaming.stopGracefullyOnShutdown", "true")
        .config("spark.driver.extraJavaOptions", f"{driver_java_options()} {classarchive.use_opts(DRIVER_JVM_OPTS)}")
    )
    if master.startswith("local"):
        # local mode needs no reachable driver address; executors on a real cluster must reach the driver
        builder = builder.config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    try:
        before = jvm_log_path().stat().st_size
    except OSError:
        before = 0
    try:
        with _jvm_stderr() as log:
            spark = builder.getOrCreate()
    except Exception as exc:  # JVM missing or failing to start
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        unresolved = _unresolved_packages(log, before, (conf or {}).get("spark.jars.packages"))
        if unresolved:
            raise ClusterctlError(
                f"Spark could not resolve {unresolved} from {packages.repository()} (spark.jars.packages)",
                hint=f"Maven Central must be reachable once (later runs use the cache); the JVM's output is in {log}; "
                "--connector clusterctl needs no jar",
            ) from None
        hint = f"PySpark needs Java 17+; the JVM's own output is in {log}"
        if conf:
            hint += "; check --conf"
        raise ClusterctlError(f"could not start Spark ({master}): {first}", hint=hint) from None
    spark.sparkContext.setLogLevel("FATAL")
    register(spark)
    return spark


def _unresolved_packages(log: Path, since: int, packages: str | None, most: int = 1 << 20) -> str | None:
    """`packages` when this start's part of the JVM log (from byte `since`) says spark-submit failed to resolve
    them (None: not that failure)."""
    if not packages:
        return None
    try:
        with log.open("rb") as f:
            f.seek(max(since, log.stat().st_size - most))
            text = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    if "unresolved dependency" in text or "download failed" in text or "MavenUtils" in text:
        return packages
    return None


def _default_shuffle(master: str) -> int:
    # local jobs aggregate small state; 200 shuffle partitions would mean 200 tiny state stores per batch
    return 4 if master.startswith("local") else 32


def has_builtin_kafka(spark: Any) -> bool:
    """True when Spark's own Kafka connector (spark-sql-kafka) is on the classpath."""
    try:
        loader = spark.sparkContext._jvm.java.lang.Thread.currentThread().getContextClassLoader()
        spark.sparkContext._jvm.java.lang.Class.forName(packages.CONNECTOR_CLASS, False, loader)
        return True
    except Exception:
        return False
