"""SparkSession for clusterctl jobs: local mode by default, quiet, with the Kafka data source registered."""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from clusterctl.errors import ClusterctlError

DEFAULT_MASTER = "local[*]"
BUILTIN_KAFKA_CLASS = "org.apache.spark.sql.kafka010.KafkaSourceProvider"
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
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{_quiet_log_config()}")
    )
    if master.startswith("local"):
        # local mode needs no reachable driver address; executors on a real cluster must reach the driver
        builder = builder.config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
    for key, value in (conf or {}).items():
        builder = builder.config(key, value)
    try:
        spark = builder.getOrCreate()
    except Exception as exc:  # JVM missing or failing to start
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ClusterctlError(f"could not start Spark ({master}): {first}", hint="PySpark needs Java 17+") from None
    spark.sparkContext.setLogLevel("FATAL")
    register(spark)
    return spark


def _default_shuffle(master: str) -> int:
    # local jobs aggregate small state; 200 shuffle partitions would mean 200 tiny state stores per batch
    return 4 if master.startswith("local") else 32


def has_builtin_kafka(spark: Any) -> bool:
    """True when Spark's own Kafka connector (spark-sql-kafka) is on the classpath."""
    try:
        loader = spark.sparkContext._jvm.java.lang.Thread.currentThread().getContextClassLoader()
        spark.sparkContext._jvm.java.lang.Class.forName(BUILTIN_KAFKA_CLASS, False, loader)
        return True
    except Exception:
        return False
