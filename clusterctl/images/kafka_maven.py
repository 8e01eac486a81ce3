"""Apache Kafka installations assembled from Kafka's own Maven Central artifacts.

`assemble("3.9.x")` resolves `org.apache.kafka:kafka_2.13` and `kafka-tools` (and what they depend on, ZooKeeper
included) with Maven into the user's Maven repository (`~/.m2`, so a second assembly needs no network), and lays
them out as an installation under ~/.cache/clusterctl/kafka/<version>/: `libs/` (the jars), `bin/` (clusterctl's
own launcher `kafka-run-class.sh` and one script per tool whose main class the jars carry), `config/` (log4j 1.x
for 3.x, Log4j 2 for 4.x). That directory is a Kafka distribution for everything else: the image build
(`images build kafka`), the benches' Java tools. The version is read from the jars, never from the request.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from clusterctl import TEMPLATES_DIR
from clusterctl.errors import ClusterctlError, UsageError
from clusterctl.spec import kafkadist
from clusterctl.templating import text_environment

# ZooKeeper mode's last line: what `make setup`, `init` and the test suite run unless told otherwise
DEFAULT_KAFKA_VERSION = "3.9.x"
# the newest line (KRaft only)
NEWEST_KAFKA_LINE = "4.x"
KAFKA_ARTIFACTS = ("kafka_2.13", "kafka-tools")
# Kafka 4's jars log through SLF4J 1.7 to Log4j 2 but declare no binding: the distribution adds
# log4j-slf4j-impl, so does this (one version for api, core and binding)
LOG4J2_VERSION = "2.25.5"
RESOLUTION_TTL_S = 24 * 3600  # a range ("3.9.x") is resolved again after a day, as Maven refreshes its metadata

CACHE_DIR = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "clusterctl"
INSTALL_ROOT = CACHE_DIR / "kafka"
INSTALL_TEMPLATES = TEMPLATES_DIR / "kafka-install"
COMPLETE_MARK = ".clusterctl-installation"

Progress = Callable[[str], None]

# script -> (main classes, first found wins; default heap or None; required)
TOOLS: dict[str, tuple[tuple[str, ...], str | None, bool]] = {
    "kafka-server-start.sh": (("kafka.Kafka",), "-Xmx1G -Xms1G", True),
    "kafka-storage.sh": (("kafka.tools.StorageTool", "org.apache.kafka.tools.StorageTool"), None, True),
    "kafka-topics.sh": (("org.apache.kafka.tools.TopicCommand", "kafka.admin.TopicCommand"), None, True),
    "kafka-producer-perf-test.sh": (("org.apache.kafka.tools.ProducerPerformance",), "-Xmx512M", True),
    "kafka-consumer-perf-test.sh": (
        ("org.apache.kafka.tools.ConsumerPerformance", "kafka.tools.ConsumerPerformance"),
        "-Xmx512M",
        True,
    ),
    "kafka-e2e-latency.sh": (("org.apache.kafka.tools.EndToEndLatency", "kafka.tools.EndToEndLatency"), None, True),
    "kafka-metadata-quorum.sh": (("org.apache.kafka.tools.MetadataQuorumCommand",), None, True),
    "kafka-log-dirs.sh": (("org.apache.kafka.tools.LogDirsCommand", "kafka.admin.LogDirsCommand"), None, True),
    "kafka-reassign-partitions.sh": (
        ("org.apache.kafka.tools.reassign.ReassignPartitionsCommand", "kafka.admin.ReassignPartitionsCommand"),
        None,
        True,
    ),
    "kafka-consumer-groups.sh": (
        ("org.apache.kafka.tools.consumer.group.ConsumerGroupCommand", "kafka.admin.ConsumerGroupCommand"),
        None,
        True,
    ),
    "kafka-configs.sh": (("org.apache.kafka.tools.ConfigCommand", "kafka.admin.ConfigCommand"), None, True),
    "kafka-leader-election.sh": (
        ("org.apache.kafka.tools.LeaderElectionCommand", "kafka.admin.LeaderElectionCommand"),
        None,
        True,
    ),
    "kafka-features.sh": (("org.apache.kafka.tools.FeatureCommand", "kafka.admin.FeatureCommand"), None, True),
    "kafka-acls.sh": (("org.apache.kafka.tools.AclCommand", "kafka.admin.AclCommand"), None, True),
    "kafka-console-producer.sh": (
        ("org.apache.kafka.tools.ConsoleProducer", "kafka.tools.ConsoleProducer"),
        "-Xmx512M",
        True,
    ),
    "kafka-console-consumer.sh": (
        ("org.apache.kafka.tools.consumer.ConsoleConsumer", "kafka.tools.ConsoleConsumer"),
        "-Xmx512M",
        True,
    ),
    "kafka-broker-api-versions.sh": (
        ("org.apache.kafka.tools.BrokerApiVersionsCommand", "kafka.admin.BrokerApiVersionsCommand"),
        None,
        True,
    ),
    "kafka-get-offsets.sh": (("org.apache.kafka.tools.GetOffsetShell", "kafka.tools.GetOffsetShell"), None, True),
    "kafka-delete-records.sh": (
        ("org.apache.kafka.tools.DeleteRecordsCommand", "kafka.admin.DeleteRecordsCommand"),
        None,
        True,
    ),
    "kafka-dump-log.sh": (("org.apache.kafka.tools.DumpLogSegments", "kafka.tools.DumpLogSegments"), None, True),
    "kafka-transactions.sh": (("org.apache.kafka.tools.TransactionsCommand",), None, True),
    "kafka-cluster.sh": (("org.apache.kafka.tools.ClusterTool",), None, True),
    "kafka-metadata-shell.sh": (("org.apache.kafka.shell.MetadataShell",), None, False),
    # ZooKeeper mode only (3.x): the same ZooKeeper the distribution ships, and its shell with Kafka's TLS support
    "zookeeper-server-start.sh": (("org.apache.zookeeper.server.quorum.QuorumPeerMain",), "-Xmx512M -Xms512M", False),
    "zookeeper-shell.sh": (("org.apache.zookeeper.ZooKeeperMainWithTlsSupportForKafka",), None, False),
}

_EXACT = re.compile(kafkadist.EXACT_VERSION)
_LINE = re.compile(r"^(\d+)\.(\d+)(?:\.x)?$")
_MAJOR = re.compile(r"^(\d+)(?:\.x)?$")
_KAFKA_JAR = re.compile(r"^kafka_\d+\.\d+-(\d+\.\d+\.\d+)\.jar$")


@dataclass(frozen=True)
class Installation:
    """A Kafka installation laid out from Maven artifacts."""

    path: Path
    version: str
    requested: str
    action: str  # assembled | cached


def maven_version(requested: str) -> str:
    """The Maven version (or range) for a requested Kafka version: 3.9.2 exact, 3.9 / 3.9.x a line, 4 / 4.x a major."""
    text = requested.strip()
    if _EXACT.match(text):
        return text
    m = _LINE.match(text)
    if m:
        major, minor = int(m.group(1)), int(m.group(2))
        return f"[{major}.{minor},{major}.{minor + 1})"
    m = _MAJOR.match(text)
    if m:
        major = int(m.group(1))
        return f"[{major},{major + 1})"
    raise UsageError(f"--kafka-version {requested!r} is not a Kafka version: give 3.9.2, a line (3.9.x) or 4.x")


def in_request(version: str, requested: str) -> bool:
    """Whether a resolved version is what `requested` asked for (3.9.2 is in 3.9.x and in 3; not in 4.x)."""
    got = version.split(".")
    want = [p for p in requested.strip().split(".") if p != "x"]
    return got[: len(want)] == want


def _jar_version(libs: Path) -> str:
    for jar in libs.glob("kafka_*.jar"):
        m = _KAFKA_JAR.match(jar.name)
        if m:
            return m.group(1)
    raise ClusterctlError(f"Maven resolved no kafka_2.13 jar into {libs}")


def _classes(libs: Path) -> set[str]:
    """Class names in Kafka's and ZooKeeper's own jars (where every tool's main class lives)."""
    found: set[str] = set()
    for jar in libs.glob("*.jar"):
        if not jar.name.startswith(("kafka", "zookeeper")):
            continue
        with zipfile.ZipFile(jar) as zf:
            for name in zf.namelist():
                if name.endswith(".class") and "$" not in name:
                    found.add(name[: -len(".class")].replace("/", "."))
    return found


def _pom(kafka_version: str, major: int) -> str:
    env = text_environment(INSTALL_TEMPLATES, {})
    logging = (
        [("org.apache.logging.log4j", a, LOG4J2_VERSION) for a in ("log4j-api", "log4j-core", "log4j-slf4j-impl")]
        if major >= 4
        else []
    )
    return env.get_template("pom.xml.j2").render(
        kafka_artifacts=KAFKA_ARTIFACTS, kafka_version=kafka_version, logging=logging
    )


def run_maven(pom: Path, libs: Path, progress: Progress, what: str = "Kafka's artifacts") -> None:
    """`mvn dependency:copy-dependencies` of `pom` (runtime scope) into `libs`: online, then offline from ~/.m2."""
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ClusterctlError(
            f"Maven (mvn) not found: {what} come from Maven Central",
            hint="apt-get install maven (scripts/setup.sh does)",
        )
    base = [mvn, "-B", "-f", str(pom), "dependency:copy-dependencies", f"-DoutputDirectory={libs}"]
    base += ["-DincludeScope=runtime"]
    last_error = "?"
    # online first (a range needs the newest metadata); then from the local repository alone, for a machine
    # that has the artifacts but no network
    for extra in ([], ["-o"]):
        proc = subprocess.Popen([*base, *extra], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("Downloaded from"):
                progress(f"kafka: maven {line.split('/')[-1].split(' ')[0][:60]}")
            elif line.startswith("[ERROR]") and last_error == "?":
                last_error = line.removeprefix("[ERROR]").strip()
        if proc.wait() == 0:
            return
    raise ClusterctlError(
        f"Maven could not resolve {what}: {last_error[:200]}",
        hint="Maven Central (or the mirror in ~/.m2/settings.xml) must be reachable once; later builds use ~/.m2",
    )


def _write_layout(root: Path, version: str) -> None:
    """bin/ and config/ beside libs/: clusterctl's launcher, a script per tool the jars carry, log configs."""
    classes = _classes(root / "libs")
    bin_dir, config = root / "bin", root / "config"
    bin_dir.mkdir()
    config.mkdir()
    env = text_environment(INSTALL_TEMPLATES, {})
    shutil.copy2(INSTALL_TEMPLATES / "kafka-run-class.sh", bin_dir / "kafka-run-class.sh")
    tool = env.get_template("tool.sh.j2")
    for script, (candidates, heap, required) in TOOLS.items():
        main = next((c for c in candidates if c in classes), None)
        if main is None:
            if required:
                raise ClusterctlError(f"Kafka {version}'s jars have no main class for {script} ({candidates[0]})")
            continue
        (bin_dir / script).write_text(tool.render(script=script, main_class=main, version=version, heap=heap))
    for path in bin_dir.iterdir():
        path.chmod(0o755)
    logs = ("log4j2.properties", "tools-log4j2.properties") if int(version.split(".")[0]) >= 4 else ()
    logs = logs or ("log4j.properties", "tools-log4j.properties")
    for name in logs:
        shutil.copy2(INSTALL_TEMPLATES / name, config / name)
    (root / COMPLETE_MARK).write_text(f"Apache Kafka {version}, assembled from Maven Central by clusterctl\n")


@contextlib.contextmanager
def machine_lock(path: Path) -> Iterator[None]:
    """One holder at a time on this machine (parallel test workers, two shells): an exclusive flock on `path`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def installed(version: str) -> Path | None:
    """The complete installation of exactly `version`, if assembled."""
    path = INSTALL_ROOT / version
    return path if (path / COMPLETE_MARK).is_file() else None


def _resolutions() -> dict[str, dict[str, object]]:
    try:
        data = json.loads((INSTALL_ROOT / "resolved.json").read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def resolutions() -> dict[str, dict[str, object]]:
    """What each requested line (3.9.x, 4.x) last resolved to here: {line: {"version": ..., "at": epoch s}}."""
    return _resolutions()


def _cached_resolution(requested: str) -> str | None:
    entry = _resolutions().get(requested.strip())
    if not isinstance(entry, dict):
        return None
    version, at = entry.get("version"), entry.get("at")
    if not isinstance(version, str) or not isinstance(at, int | float) or time.time() - at > RESOLUTION_TTL_S:
        return None
    return version if installed(version) else None


def _remember(requested: str, version: str) -> None:
    data = _resolutions()
    data[requested.strip()] = {"version": version, "at": int(time.time())}
    tmp = INSTALL_ROOT / "resolved.json.tmp"
    tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    tmp.replace(INSTALL_ROOT / "resolved.json")


def assemble(requested: str = DEFAULT_KAFKA_VERSION, progress: Progress = lambda _: None) -> Installation:
    """The installation of `requested` (3.9.2, 3.9.x, 4.x), assembled from Maven unless already here.

    An exact version already assembled costs nothing; a line is resolved again by Maven once a day.
    """
    spec = maven_version(requested)
    exact = requested.strip() if _EXACT.match(requested.strip()) else None
    with machine_lock(INSTALL_ROOT / ".lock"):  # one assembly at a time
        version = exact if exact and installed(exact) else _cached_resolution(requested)
        if version is not None:
            return Installation(INSTALL_ROOT / version, version, requested, "cached")
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=INSTALL_ROOT))
        try:
            pom = staging / "pom.xml"
            pom.write_text(_pom(spec, int(requested.strip().split(".")[0])))
            progress(f"kafka: resolving org.apache.kafka:kafka_2.13:{spec} with Maven")
            root = staging / "kafka"
            run_maven(pom, root / "libs", progress)
            version = _jar_version(root / "libs")
            if not in_request(version, requested):
                raise ClusterctlError(f"Maven resolved Kafka {version} for {requested!r}")
            dest = INSTALL_ROOT / version
            if installed(version) is None:
                _write_layout(root, version)
                if dest.exists():
                    shutil.rmtree(dest)  # an earlier assembly that did not finish
                root.rename(dest)
            _remember(requested, version)
            return Installation(dest, version, requested, "assembled")
        finally:
            shutil.rmtree(staging, ignore_errors=True)
