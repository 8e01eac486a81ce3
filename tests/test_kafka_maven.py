"""Apache Kafka installations assembled from Kafka's Maven Central artifacts (clusterctl/images/kafka_maven.py).

The version and POM logic is pure. The assembly itself runs Maven and Java for real: `make setup` (and this test
session's conftest) have already assembled Kafka 3.9.x into ~/.cache/clusterctl/kafka, so here it is a cache hit
that is then checked file by file and run (`kafka-topics.sh --version`). No Docker is needed.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest

from clusterctl.errors import ClusterctlError, UsageError
from clusterctl.images import kafka_maven
from clusterctl.spec import kafkadist

POM_NS = {"m": "http://maven.apache.org/POM/4.0.0"}


# ---- requested versions ----


@pytest.mark.parametrize(
    ("requested", "maven"),
    [
        ("3.9.2", "3.9.2"),
        ("3.9.10", "3.9.10"),
        ("3.9", "[3.9,3.10)"),
        ("3.9.x", "[3.9,3.10)"),
        ("3.10.x", "[3.10,3.11)"),
        (" 3.9.x ", "[3.9,3.10)"),
        ("4", "[4,5)"),
        ("4.x", "[4,5)"),
        ("3.x", "[3,4)"),
    ],
)
def test_maven_version(requested: str, maven: str) -> None:
    assert kafka_maven.maven_version(requested) == maven


@pytest.mark.parametrize("garbage", ["", "latest", "3.9.y", "3.x.1", "v3.9.2", "3.9.2-rc1", "3..9", "x", "4.x.x"])
def test_maven_version_refuses_garbage_in_one_line(garbage: str) -> None:
    with pytest.raises(UsageError) as info:
        kafka_maven.maven_version(garbage)
    expected = f"--kafka-version {garbage!r} is not a Kafka version: give 3.9.2, a line (3.9.x) or 4.x"
    assert str(info.value) == expected
    assert info.value.exit_code == 2


@pytest.mark.parametrize(
    ("version", "requested", "inside"),
    [
        ("3.9.2", "3.9.2", True),
        ("3.9.2", "3.9.x", True),
        ("3.9.2", "3.9", True),
        ("3.9.2", "3.x", True),
        ("3.9.2", "3", True),
        ("4.4.0", "4.x", True),
        ("3.9.2", "4.x", False),
        ("3.9.1", "3.9.2", False),
        ("3.9.20", "3.9.2", False),
        ("3.10.0", "3.1.x", False),
        ("4.0.0", "3.9.x", False),
    ],
)
def test_in_request(version: str, requested: str, inside: bool) -> None:
    assert kafka_maven.in_request(version, requested) is inside


# ---- the POM ----


def _dependencies(pom: str) -> list[tuple[str, str, str]]:
    root = ET.fromstring(pom)
    return [
        (d.findtext("m:groupId", namespaces=POM_NS) or "", d.findtext("m:artifactId", namespaces=POM_NS) or "",
         d.findtext("m:version", namespaces=POM_NS) or "")
        for d in root.iterfind("m:dependencies/m:dependency", POM_NS)
    ]  # fmt: skip


def test_pom_for_kafka_3_has_no_log4j2() -> None:
    pom = kafka_maven._pom("[3.9,3.10)", 3)
    root = ET.fromstring(pom)
    assert root.findtext("m:packaging", namespaces=POM_NS) == "pom"
    assert _dependencies(pom) == [
        ("org.apache.kafka", "kafka_2.13", "[3.9,3.10)"),
        ("org.apache.kafka", "kafka-tools", "[3.9,3.10)"),
    ]  # log4j 1.x (reload4j) comes with Kafka 3's own dependencies


def test_pom_for_kafka_4_adds_log4j2_and_its_slf4j_binding() -> None:
    deps = _dependencies(kafka_maven._pom("4.4.0", 4))
    v = kafka_maven.LOG4J2_VERSION
    assert deps == [
        ("org.apache.kafka", "kafka_2.13", "4.4.0"),
        ("org.apache.kafka", "kafka-tools", "4.4.0"),
        ("org.apache.logging.log4j", "log4j-api", v),
        ("org.apache.logging.log4j", "log4j-core", v),
        ("org.apache.logging.log4j", "log4j-slf4j-impl", v),
    ]


# ---- the layout written beside libs/ ----


def _fake_libs(root: Path, classes: list[str], jar: str = "kafka_2.13-3.9.2.jar") -> None:
    """A libs/ directory with one jar holding empty .class entries for `classes`."""
    libs = root / "libs"
    libs.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(libs / jar, "w") as zf:
        for name in classes:
            zf.writestr(name.replace(".", "/") + ".class", b"")


def test_layout_without_a_required_main_class_is_one_line_naming_the_script(tmp_path: Path) -> None:
    root = tmp_path / "kafka"
    _fake_libs(root, ["kafka.Kafka", "kafka.Kafka$"])  # the broker only: no StorageTool
    with pytest.raises(ClusterctlError) as info:
        kafka_maven._write_layout(root, "3.9.2")
    message = str(info.value)
    assert "\n" not in message
    assert message == "Kafka 3.9.2's jars have no main class for kafka-storage.sh (kafka.tools.StorageTool)"
    assert not (root / kafka_maven.COMPLETE_MARK).exists()  # never marked complete


def test_layout_classes_count_only_in_kafka_and_zookeeper_jars(tmp_path: Path) -> None:
    root = tmp_path / "kafka"
    _fake_libs(root, ["kafka.Kafka"])
    # every tool's class, but in a jar that is neither Kafka's nor ZooKeeper's
    others = [c for candidates, _, _ in kafka_maven.TOOLS.values() for c in candidates if c != "kafka.Kafka"]
    _fake_libs(root, others, jar="shaded-tools-1.0.jar")
    with pytest.raises(ClusterctlError, match=r"no main class for kafka-storage\.sh"):
        kafka_maven._write_layout(root, "3.9.2")


@pytest.mark.parametrize(
    ("version", "logs", "not_logs"),
    [
        ("3.9.2", {"log4j.properties", "tools-log4j.properties"}, "log4j2.properties"),
        ("4.4.0", {"log4j2.properties", "tools-log4j2.properties"}, "log4j.properties"),
    ],
)
def test_layout_writes_a_script_per_tool_the_jars_carry(
    tmp_path: Path, version: str, logs: set[str], not_logs: str
) -> None:
    root = tmp_path / "kafka"
    # the last candidate of each required tool (the older class name where there are two); no optional tool
    required = {s: c[-1] for s, (c, _, req) in kafka_maven.TOOLS.items() if req}
    _fake_libs(root, sorted(required.values()), jar=f"kafka_2.13-{version}.jar")
    kafka_maven._write_layout(root, version)
    bin_dir = root / "bin"
    assert {p.name for p in bin_dir.iterdir()} == {*required, "kafka-run-class.sh"}  # optional ones left out
    for script, main in required.items():
        path = bin_dir / script
        assert os.access(path, os.X_OK), script
        text = path.read_text()
        assert f'kafka-run-class.sh" {main} "$@"' in text and f"Apache Kafka {version}" in text, text
    heap = kafka_maven.TOOLS["kafka-server-start.sh"][1]
    assert f'KAFKA_HEAP_OPTS="${{KAFKA_HEAP_OPTS:-{heap}}}"' in (bin_dir / "kafka-server-start.sh").read_text()
    assert "KAFKA_HEAP_OPTS" not in (bin_dir / "kafka-topics.sh").read_text()  # the launcher's default
    assert {p.name for p in (root / "config").iterdir()} == logs and not (root / "config" / not_logs).exists()
    assert (root / kafka_maven.COMPLETE_MARK).read_text().startswith(f"Apache Kafka {version}")


def test_layout_prefers_the_first_candidate_class(tmp_path: Path) -> None:
    root = tmp_path / "kafka"
    required = [c for c, _, req in kafka_maven.TOOLS.values() if req]
    _fake_libs(root, sorted({name for candidates in required for name in candidates}))
    kafka_maven._write_layout(root, "3.9.2")
    text = (root / "bin" / "kafka-topics.sh").read_text()
    assert "org.apache.kafka.tools.TopicCommand" in text and "kafka.admin.TopicCommand" not in text


# ---- a real assembly (Maven + Java; cached on a set-up machine) ----


@pytest.fixture(scope="module")
def kafka_3() -> kafka_maven.Installation:
    return kafka_maven.assemble("3.9.x")


def test_assembled_kafka_3_is_a_complete_installation(kafka_3: kafka_maven.Installation) -> None:
    version = kafka_3.version
    assert re.fullmatch(r"3\.9\.\d+", version) and kafka_maven.in_request(version, "3.9.x")
    assert kafka_3.path == kafka_maven.INSTALL_ROOT / version and kafka_maven.installed(version) == kafka_3.path
    assert kafkadist.dist_version(kafka_3.path) == version  # its jars say the same
    bin_dir = kafka_3.path / "bin"
    for script in ["kafka-run-class.sh", *(s for s, (_, _, required) in kafka_maven.TOOLS.items() if required)]:
        assert (bin_dir / script).is_file() and os.access(bin_dir / script, os.X_OK), script
    for script in ("zookeeper-server-start.sh", "zookeeper-shell.sh"):  # Kafka 3 brings its ZooKeeper
        assert os.access(bin_dir / script, os.X_OK), script
    config = kafka_3.path / "config"
    assert (config / "log4j.properties").is_file() and (config / "tools-log4j.properties").is_file()
    assert not (config / "log4j2.properties").exists()


def test_assembled_kafka_3_tools_run(kafka_3: kafka_maven.Installation, tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("JMX_PORT", "KAFKA_OPTS", "KAFKA_LOG4J_OPTS")}
    env["LOG_DIR"] = str(tmp_path)  # not the shared installation's logs/
    res = subprocess.run(
        [str(kafka_3.path / "bin" / "kafka-topics.sh"), "--version"], capture_output=True, text=True, env=env,
        timeout=60,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    assert res.stdout.split()[0] == kafka_3.version, res.stdout


def test_second_assembly_is_cached(kafka_3: kafka_maven.Installation) -> None:
    started = time.monotonic()
    again = kafka_maven.assemble("3.9.x")
    elapsed = time.monotonic() - started
    assert (again.action, again.path, again.version) == ("cached", kafka_3.path, kafka_3.version)
    assert elapsed < 5, f"a cached assembly took {elapsed:.1f}s"
    exact = kafka_maven.assemble(kafka_3.version)  # an exact version already here needs no Maven at all
    assert (exact.action, exact.path) == ("cached", kafka_3.path)
