"""Spark's own Kafka connector (spark-sql-kafka-0-10) on a driver's classpath, the way Spark users add it.

`spark.jars.packages` names the connector at the version of the PySpark that runs it; Spark's own package
resolution (Ivy, inside spark-submit) fetches it and its dependencies from Maven Central once, into clusterctl's
cache, and later drivers resolve from that cache without the network. Two things differ from Spark's defaults,
both for reasons of this machine's kind rather than taste:

- the Ivy settings name Maven Central alone: Spark's default chain asks `~/.m2` first, and a `~/.m2` that holds a
  module's pom but not its jar (Maven resolving poms only, as it does for a parent) fails the whole resolution;
- the jars PySpark already ships (hadoop-client, lz4, snappy, slf4j, ...) are excluded, so each driver copies
  four small jars instead of 60 MB of duplicates.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from xml.sax.saxutils import quoteattr

from clusterctl.errors import ClusterctlError
from clusterctl.spark.classarchive import cache_dir
from clusterctl.spec.profiles import SPARK_CONNECTOR_PROVIDED, SPARK_KAFKA_CONNECTOR

CONNECTOR_CLASS = "org.apache.spark.sql.kafka010.KafkaSourceProvider"
MAVEN_CENTRAL = "https://repo1.maven.org/maven2/"
RESOLVE_TIMEOUT_S = 600.0
#: spark-sql-kafka's compile dependencies that PySpark's own jars already hold (same versions)
PROVIDED_BY_PYSPARK = tuple(f"{group}:{artifact}" for group, artifact in SPARK_CONNECTOR_PROVIDED)


def spark_version() -> str:
    import pyspark

    return str(pyspark.__version__)


def connector_package(version: str | None = None) -> str:
    """The Maven coordinate of Spark's Kafka connector for this PySpark (Scala 2.13, as PySpark 4 is)."""
    group, artifact = SPARK_KAFKA_CONNECTOR
    return f"{group}:{artifact}:{version or spark_version()}"


def repository() -> str:
    """The Maven repository Ivy resolves from: $CLUSTERCTL_MAVEN_REPOSITORY (a mirror), else Maven Central."""
    return os.environ.get("CLUSTERCTL_MAVEN_REPOSITORY") or MAVEN_CENTRAL


def ivy_dir() -> Path:
    return cache_dir() / "ivy"


def ivy_settings() -> Path:
    """The Ivy settings file (written when missing or different): Maven Central, clusterctl's cache."""
    root = ivy_dir()
    text = (
        "<ivysettings>\n"
        '  <settings defaultResolver="central"/>\n'
        f"  <caches defaultCacheDir={quoteattr(str(root / 'cache'))}/>\n"
        "  <resolvers>\n"
        f'    <ibiblio name="central" m2compatible="true" root={quoteattr(repository())}/>\n'
        "  </resolvers>\n"
        "</ivysettings>\n"
    )
    path = root / "ivysettings.xml"
    if not path.is_file() or path.read_text() != text:
        root.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(text)
        os.replace(tmp, path)
    return path


def connector_conf(conf: dict[str, str] | None = None) -> dict[str, str]:
    """Spark configuration that puts the connector on a driver's classpath, merged into the user's `conf`
    (a `spark.jars.packages` or `spark.jars.excludes` of the user's is kept and ours appended)."""
    conf = dict(conf or {})
    package = connector_package()
    packages = [p for p in conf.get("spark.jars.packages", "").split(",") if p.strip()]
    group, artifact = SPARK_KAFKA_CONNECTOR
    named = f"{group}:{artifact.rsplit('_', 1)[0]}_"  # the connector at any Scala and Spark version
    if not any(p.strip().startswith(named) for p in packages):
        packages.append(package)
    excludes = [e for e in conf.get("spark.jars.excludes", "").split(",") if e.strip()]
    excludes += [e for e in PROVIDED_BY_PYSPARK if e not in excludes]
    conf["spark.jars.packages"] = ",".join(packages)
    conf["spark.jars.excludes"] = ",".join(excludes)
    conf.setdefault("spark.jars.ivySettings", str(ivy_settings()))
    conf.setdefault("spark.jars.ivy", str(ivy_dir()))
    return conf


def submit_args(conf: dict[str, str]) -> list[str]:
    """`conf` as spark-submit arguments (PYSPARK_SUBMIT_ARGS for a user's own script)."""
    args: list[str] = []
    for key, value in conf.items():
        args += ["--conf", f"{key}={value}"]
    return args


def connector_jar(version: str | None = None) -> Path:
    """Where Spark's resolution puts the connector's jar (spark.jars.ivy/jars)."""
    group, artifact = SPARK_KAFKA_CONNECTOR
    return ivy_dir() / "jars" / f"{group}_{artifact}-{version or spark_version()}.jar"


def resolve(progress: Callable[[str], None], force: bool = False) -> tuple[Path, bool]:
    """Have Spark resolve the connector into the cache unless it is there: (the jar, whether resolved now).

    A driver started in a child process with the connector's configuration does it (Spark's own resolution, as
    every later driver), then checks the connector's class loads."""
    jar = connector_jar()
    if jar.is_file() and not force:
        return jar, False
    progress(f"resolving {connector_package()} from {repository()} into {ivy_dir()} (once)")
    proc = subprocess.run(
        [sys.executable, "-m", "clusterctl.spark.resolve_connector"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=RESOLVE_TIMEOUT_S,
        check=False,
    )
    if proc.returncode != 0 or not jar.is_file():
        last = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        raise ClusterctlError(f"resolving Spark's Kafka connector failed: {last[:300]}")
    return jar, True
