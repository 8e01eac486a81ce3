"""What the spark and console images copy from this environment: Python distributions and clusterctl modules.

Both images run clusterctl code (the Spark connector on executors, the console), so they carry the
driver's exact package versions and a fixed list of clusterctl modules; the lists are hashed into the
image's inputs, so a changed module rebuilds the image.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from clusterctl.errors import NotFoundError, UsageError
from clusterctl.spec.profiles import SPARK_CONNECTOR_PROVIDED, SPARK_KAFKA_CONNECTOR, SPARK_VERSION


def hash_file(h: hashlib._Hash, path: Path) -> None:
    with path.open("rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)


def hash_record(h: hashlib._Hash, path: Path) -> None:
    """A dist-info RECORD without its entries outside site-packages (`../../../bin/...`): the console scripts pip
    wrote with the venv's own python in their first line, so a clone elsewhere would hash differently."""
    for line in path.read_bytes().splitlines(keepends=True):
        if not line.startswith(b"../"):
            h.update(line)


# ---- the spark image: Python packages from the driver's environment ----

# distributions copied into clusterctl/spark (import name, distribution name); the executors' Python
# connector needs them and they must be the driver's exact versions (PySpark above all)
SPARK_DISTS = (
    ("pyspark", "pyspark"),
    ("py4j", "py4j"),
    ("pyarrow", "pyarrow"),
    ("confluent_kafka", "confluent_kafka"),
    ("numpy", "numpy"),  # the source's Arrow read path (spark/arrowread.py)
)
# what executors import of clusterctl: the connector and the Kafka helpers it calls (the Dockerfile's import
# check fails the build if one is missing); other modules change without rebuilding the image
SPARK_CLUSTERCTL_FILES = (
    "__init__.py",
    "errors.py",
    "kafka/__init__.py",
    "kafka/connection.py",
    "kafka/perf_consume_native.py",
    "kafka/perf_native.py",
    "kafka/settings.py",
    "spec/__init__.py",
    "spec/validate.py",
    "spark/__init__.py",
    "spark/arrowread.py",
    "spark/datasource.py",
    "spark/options.py",
    "spark/source.py",
    "spark/sink.py",
    "spark/changelog.py",
)
# not needed by a master, a worker or an executor: Spark Connect's REPL, examples, headers, tests
_SPARK_SKIP = {
    "pyspark": ("jars/connect-repl", "examples", "data"),
    "pyarrow": ("include", "tests", "src"),
}
_SKIP_SUFFIXES = (".pyx", ".pxd", ".pxi", ".pyc")


def _site_packages() -> Path:
    """The site-packages holding the driver's PySpark (a one-line error when it is missing)."""
    try:
        import pyspark
    except ImportError:
        raise NotFoundError(
            "the spark image copies PySpark from this environment, and it has none",
            hint="pip install 'clusterctl[spark]'",
        ) from None
    root = Path(pyspark.__file__).resolve().parent.parent
    if getattr(pyspark, "__version__", None) != SPARK_VERSION:
        raise UsageError(
            f"PySpark {getattr(pyspark, '__version__', '?')} is installed but clusterctl/spark is Spark {SPARK_VERSION}"
        )
    return root


def _dist_info(root: Path, dist: str) -> Path:
    found = sorted(root.glob(f"{dist}-*.dist-info"))
    if not found:
        raise NotFoundError(f"{dist} is not installed in {root}", hint="pip install 'clusterctl[spark]'")
    return found[-1]


def _spark_inputs() -> list[Path]:
    """What the spark image copies, for its inputs hash: dist-info RECORDs (every file's hash) and sources."""
    root = _site_packages()
    out = [_dist_info(root, dist) / "RECORD" for _, dist in SPARK_DISTS]
    pkg = Path(__file__).resolve().parent.parent
    return out + [pkg / name for name in SPARK_CLUSTERCTL_FILES]


def spark_hash_inputs(h: hashlib._Hash) -> None:
    pkg = Path(__file__).resolve().parent.parent
    h.update(f"{':'.join(SPARK_CONNECTOR)}:{SPARK_VERSION} without {_CONNECTOR_PROVIDED}\0".encode())
    for path in _spark_inputs():
        record = path.name == "RECORD"
        h.update(path.name.encode() if record else str(path.relative_to(pkg)).encode())
        h.update(b"\0")
        (hash_record if record else hash_file)(h, path)


def _ignore(skip: tuple[str, ...], top: Path) -> Callable[[str, list[str]], set[str]]:
    def ignore(directory: str, names: list[str]) -> set[str]:
        rel = Path(directory).relative_to(top)
        out = {n for n in names if n == "__pycache__" or n.endswith(_SKIP_SUFFIXES)}
        out |= {n for n in names if (rel / n).as_posix() in skip}
        return out

    return ignore


def _copy_tree(src: Path, dest: Path, skip: tuple[str, ...] = ()) -> None:
    """Hard links where the filesystem allows (fast, no space), copies otherwise."""

    def link_or_copy(s: str, d: str) -> None:
        try:
            os.link(s, d)
        except OSError:
            shutil.copy2(s, d)

    shutil.copytree(src, dest, symlinks=True, ignore=_ignore(skip, src), copy_function=link_or_copy)


# Spark's Kafka connector in the image's Spark jars (executors load it from there; a driver adds the same version
# through spark.jars.packages): resolved by Maven from Maven Central like Kafka's jars, without what PySpark ships
SPARK_CONNECTOR = SPARK_KAFKA_CONNECTOR
# Spark's own resolution leaves out what Spark provides (spark-tags, and with it scala-library); Maven must be told
_CONNECTOR_PROVIDED = (
    *SPARK_CONNECTOR_PROVIDED,
    ("org.scala-lang", "scala-library"),
    ("org.apache.spark", "spark-tags_2.13"),
)
_CONNECTOR_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>clusterctl</groupId><artifactId>spark-kafka-connector</artifactId><version>1</version>
  <dependencies><dependency>
    <groupId>{group}</groupId><artifactId>{artifact}</artifactId><version>{version}</version>
    <exclusions>{exclusions}</exclusions>
  </dependency></dependencies>
</project>
"""


def spark_connector_jars(progress: Callable[[str], None] = lambda _: None) -> list[Path]:
    """The connector's jars for SPARK_VERSION (spark-sql-kafka, its token provider, kafka-clients, commons-pool2),
    resolved once into the cache (Maven's ~/.m2 serves later resolutions without the network)."""
    from clusterctl.images import kafka_maven

    root = kafka_maven.CACHE_DIR / "spark-connector" / SPARK_VERSION
    done = root / ".complete"
    with kafka_maven.machine_lock(kafka_maven.CACHE_DIR / "spark-connector.lock"):
        if not done.is_file():
            shutil.rmtree(root, ignore_errors=True)
            root.mkdir(parents=True)
            group, artifact = SPARK_CONNECTOR
            exclusions = "".join(
                f"<exclusion><groupId>{g}</groupId><artifactId>{a}</artifactId></exclusion>"
                for g, a in _CONNECTOR_PROVIDED
            )
            pom = root / "pom.xml"
            pom.write_text(
                _CONNECTOR_POM.format(group=group, artifact=artifact, version=SPARK_VERSION, exclusions=exclusions)
            )
            kafka_maven.run_maven(pom, root / "jars", progress, what="Spark's Kafka connector")
            done.write_text(SPARK_VERSION)
    return sorted((root / "jars").glob("*.jar"))


def spark_context(ctx: Path) -> None:
    root = _site_packages()
    site = ctx / "site-packages"
    site.mkdir()
    for module, dist in SPARK_DISTS:
        _copy_tree(root / module, site / module, _SPARK_SKIP.get(module, ()))
        info = _dist_info(root, dist)
        _copy_tree(info, site / info.name)
        libs = root / f"{module}.libs"  # auditwheel-vendored shared libraries
        if libs.is_dir():
            _copy_tree(libs, site / libs.name)
    for jar in spark_connector_jars():
        shutil.copy2(jar, site / "pyspark" / "jars" / jar.name)
    pkg = Path(__file__).resolve().parent.parent
    for name in SPARK_CLUSTERCTL_FILES:
        dest = site / "clusterctl" / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(pkg / name, dest)


# ---- the console image: the console's Python packages and the clusterctl modules it imports

# distributions the console imports (their dependencies are added from their metadata)
CONSOLE_DISTS = ("starlette", "uvicorn", "asgi-csrf", "python-multipart", "Jinja2", "confluent-kafka", "kazoo",
                 "pydantic", "PyYAML")  # fmt: skip
# clusterctl modules the console imports (the Dockerfile's import check fails the build if one is missing)
CONSOLE_CLUSTERCTL_FILES = (
    "__init__.py",
    "env.py",
    "errors.py",
    "spec/__init__.py",
    "spec/deploy.py",
    "spec/profiles.py",
    "spec/model.py",
    "spec/monitoring.py",
    "spec/sections.py",
    "spec/security.py",
    "spec/topology.py",
    "zookeeper/__init__.py",
    "zookeeper/client.py",
    "spec/kafkadist.py",
    "spec/capabilities.py",
    "spec/quorum.py",
    "spec/validate.py",
    "spec/yamlfile.py",
    "kafka/__init__.py",
    "kafka/admin.py",
    "kafka/brokers.py",
    "kafka/browse.py",
    "kafka/configs.py",
    "kafka/connection.py",
    "kafka/elections.py",
    "kafka/features.py",
    "kafka/groups.py",
    "kafka/logdirs.py",
    "kafka/protocol.py",
    "kafka/retry.py",
    "kafka/settings.py",
    "kafka/topicpartitions.py",
    "kafka/kraft/__init__.py",
    "kafka/kraft/describe_quorum.py",
    "kafka/kraft/quorum.py",
    "chaos/__init__.py",
    "chaos/timeline.py",
    "wait.py",
)


def _dist_closure(names: Iterable[str]) -> list[Any]:
    """The installed distributions `names` need at run time (no extras), from their metadata."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    seen: dict[str, Any] = {}
    todo = list(names)
    while todo:
        name = canonicalize_name(todo.pop())
        if name in seen:
            continue
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            raise NotFoundError(f"the console image copies {name} from this environment, and it has none") from None
        seen[name] = dist
        for raw in dist.requires or []:
            req = Requirement(raw)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(req.name)
    return [seen[k] for k in sorted(seen)]


def _console_files() -> list[tuple[Path, str]]:
    """(source, path under site-packages) of everything the console image copies."""
    out: list[tuple[Path, str]] = []
    for dist in _dist_closure(CONSOLE_DISTS):
        for f in dist.files or []:
            rel = str(f)
            if rel.startswith("..") or "__pycache__" in rel or rel.endswith(".pyc"):
                continue  # console scripts outside site-packages, bytecode
            out.append((Path(str(dist.locate_file(f))), rel))
    pkg = Path(__file__).resolve().parent.parent
    names = [*CONSOLE_CLUSTERCTL_FILES]
    names += sorted(str(p.relative_to(pkg)) for p in (pkg / "console").rglob("*") if p.is_file() and
                    "__pycache__" not in p.parts)  # fmt: skip
    out += [(pkg / n, f"clusterctl/{n}") for n in names]
    return out


def console_hash_inputs(h: hashlib._Hash) -> None:
    for src, rel in _console_files():
        h.update(rel.encode())
        h.update(b"\0")
        if src.is_file():
            (hash_record if src.name == "RECORD" else hash_file)(h, src)


def console_context(ctx: Path) -> None:
    site = ctx / "site-packages"
    for src, rel in _console_files():
        if not src.is_file():
            continue  # a RECORD may list files a packager removed
        dest = site / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(src, dest)
        except OSError:
            shutil.copy2(src, dest)
