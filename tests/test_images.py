"""Offline images on the real engine: idempotent builds, the ZooKeeper and Kafka entrypoint contracts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import kafka_dist

from clusterctl.images import build as images
from clusterctl.images import inputs as image_inputs
from clusterctl.images import kafka_maven
from clusterctl.runtime import docker as dk
from clusterctl.spec import kafkadist, profiles
from clusterctl.zookeeper import client as zk

pytestmark = pytest.mark.docker

CLI = [str(Path(sys.executable).parent / "clusterctl")]  # the console script of the running environment


def run_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=cwd, timeout=600)


@pytest.fixture(scope="module", autouse=True)
def offline_images() -> None:
    """The default images (`make setup` builds them), Kafka from the session's installation (conftest pins it in
    $CLUSTERCTL_KAFKA_DIST, which the CLI reads too); a no-op when their inputs are unchanged."""
    images.build_images(list(images.DEFAULT_TARGETS), kafka_dist=kafka_dist())


def test_default_targets_include_kafka() -> None:
    assert images.DEFAULT_TARGETS == ("zookeeper", "kafka", "tansu", "console")
    assert images.resolve_targets([], None) == ["zookeeper", "kafka", "tansu", "console"]  # no distribution needed
    assert images.resolve_targets(["kafka", "zookeeper", "kafka"], None) == ["kafka", "zookeeper"]


def test_warm_build_skips_everything() -> None:
    started = time.monotonic()
    res = run_cli("images", "build", "--json")
    elapsed = time.monotonic() - started
    assert res.returncode == 0, res.stderr
    results = json.loads(res.stdout)
    actions = {r["target"]: r["action"] for r in results}
    assert actions == {t: "skipped" for t in ("base", "zookeeper", "kafka", "tansu", "console")}
    kafka = next(r for r in results if r["target"] == "kafka")
    assert kafka["image"] == kafkadist.offline_image(kafkadist.dist_version(kafka_dist()))  # tagged by its jars
    assert elapsed < 15, f"warm build took {elapsed:.1f}s"


def test_images_list_reports_hash_labels() -> None:
    res = run_cli("images", "list", "--json")
    assert res.returncode == 0, res.stderr
    rows = json.loads(res.stdout)
    by_target = {r["target"]: r for r in rows if r["target"] != "kafka"}
    for target in ("base", "zookeeper", "tansu", "console"):
        assert by_target[target]["present"] is True
        assert by_target[target]["inputs_hash"]
    assert by_target["zookeeper"]["image"] == profiles.OFFLINE_ZOOKEEPER_IMAGE
    # one row per clusterctl/kafka:<version> built here, the session's among them
    session = kafkadist.offline_image(kafkadist.dist_version(kafka_dist()))
    kafka = {r["image"]: r for r in rows if r["target"] == "kafka"}
    assert kafka[session]["present"] is True and kafka[session]["inputs_hash"], kafka


def test_spark_image_tags_match_the_installed_pyspark() -> None:
    """Driver and workers must run one Spark version: the image tags follow the PySpark clusterctl runs."""
    pyspark = pytest.importorskip("pyspark")
    assert pyspark.__version__ == profiles.SPARK_VERSION
    assert images.TARGETS["spark"] == profiles.OFFLINE_SPARK_IMAGE == f"clusterctl/spark:{pyspark.__version__}"
    assert f"apache/spark:{pyspark.__version__}-python3" == profiles.PUBLISHED_SPARK_IMAGE
    assert "spark" not in images.DEFAULT_TARGETS  # `make setup` does not build it
    assert images.resolve_targets(["spark"], None) == ["spark"]


def test_dist_records_hash_the_same_in_a_venv_elsewhere(tmp_path: Path) -> None:
    """The console and spark images hash their distributions' RECORDs; pip writes the console scripts there with the
    venv's python in their first line, so a fresh clone elsewhere rebuilt both images. Those entries do not count."""
    import hashlib

    def digest(record: str) -> str:
        path = tmp_path / "RECORD"
        path.write_text(record)
        h = hashlib.sha256()
        image_inputs.hash_record(h, path)
        return h.hexdigest()

    here = "../../../bin/uvicorn,sha256=FtVgBB3T,222\nuvicorn/main.py,sha256=aaaa,100\n"
    elsewhere = "../../../bin/uvicorn,sha256=L5pxx_jq,221\nuvicorn/main.py,sha256=aaaa,100\n"
    upgraded = "../../../bin/uvicorn,sha256=FtVgBB3T,222\nuvicorn/main.py,sha256=bbbb,100\n"
    assert digest(here) == digest(elsewhere)
    assert digest(here) != digest(upgraded)


def _installations() -> list[str]:
    root = kafka_maven.INSTALL_ROOT
    return sorted(p.name for p in root.iterdir()) if root.is_dir() else []


@pytest.mark.parametrize("bad", ["3.9.y", "latest", "4.x.1"])
def test_bad_kafka_version_is_one_line_and_builds_nothing(bad: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != kafkadist.KAFKA_DIST_ENV}
    # no engine at this address: a refusal before any work never needs one (exit 4 would mean it was asked)
    env["DOCKER_HOST"] = "unix:///nonexistent/docker.sock"
    before = _installations()
    res = subprocess.run(
        [*CLI, "images", "build", "kafka", "--kafka-version", bad], capture_output=True, text=True, env=env, timeout=60
    )
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1, res.stderr
    assert lines[0] == f"error: --kafka-version {bad!r} is not a Kafka version: give 3.9.2, a line (3.9.x) or 4.x"
    assert res.stdout == ""  # no build results
    assert _installations() == before  # nothing assembled either


def test_kafka_dist_and_kafka_version_together_are_refused() -> None:
    res = run_cli("images", "build", "kafka", "--kafka-dist", str(kafka_dist()), "--kafka-version", "3.9.x")
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2 and len(lines) == 1, res.stderr
    assert lines[0] == "error: give --kafka-dist or --kafka-version, not both"
    assert res.stdout == ""


def test_kafka_dist_that_is_not_kafka(tmp_path: Path) -> None:
    not_tar = tmp_path / "kafka.tgz"
    not_tar.write_text("not a tarball")
    res = run_cli("images", "build", "kafka", "--kafka-dist", str(not_tar))
    assert res.returncode == 2 and "not a readable tar archive" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1

    src = tmp_path / "kafka-src"
    (src / "bin").mkdir(parents=True)
    (src / "bin" / "kafka-topics.sh").write_text("#!/bin/sh\n")
    wrong = tmp_path / "kafka-source.tgz"
    with tarfile.open(wrong, "w:gz") as tar:
        tar.add(src, arcname="kafka-3.9.0-src")
    res = run_cli("images", "build", "kafka", "--kafka-dist", str(wrong))
    assert res.returncode == 2 and "no bin/kafka-server-start.sh" in res.stderr

    res = run_cli("images", "build", "kafka", "--kafka-dist", str(tmp_path / "missing.tgz"))
    assert res.returncode == 3 and "does not exist" in res.stderr


def _container_output(name: str, marker: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        logs = dk.client().containers.get(name).logs().decode()
        if marker in logs:
            return logs
        time.sleep(0.3)
    raise AssertionError(f"{marker!r} not in logs of {name}: {logs[-500:]}")


@pytest.fixture
def stub_kafka_image(tmp_path: Path) -> Iterator[str]:
    """The real kafka Dockerfile + entrypoint, built around a stub distribution whose start script reports."""
    dist = tmp_path / "kafka_2.13-3.9.0"
    (dist / "bin").mkdir(parents=True)
    (dist / "config").mkdir()
    (dist / "config" / "log4j.properties").write_text("log4j.rootLogger=INFO, stdout\n")
    start = dist / "bin" / "kafka-server-start.sh"
    start.write_text('#!/bin/bash\necho "JMX_PORT=${JMX_PORT:-unset}"\ncat "$1"\necho "---"\nexec sleep 60\n')
    start.chmod(0o755)
    tgz = tmp_path / "kafka_2.13-3.9.0.tgz"
    with tarfile.open(tgz, "w:gz") as tar:
        tar.add(dist, arcname=dist.name)
    tag = f"clusterctl-test/kafka-stub:{uuid.uuid4().hex[:8]}"
    result = images.build_target("kafka", image=tag, kafka_dist=tgz, force=True)
    assert result.action == "built"
    try:
        yield tag
    finally:
        dk.client().images.remove(tag, force=True)


def test_kafka_entrypoint_env_contract(stub_kafka_image: str) -> None:
    name = f"ctl-test-kafka-{uuid.uuid4().hex[:6]}"
    env = {
        "KAFKA_BROKER_ID": "2",
        "KAFKA_ZOOKEEPER_CONNECT": "zk1:2181,zk2:2181",
        "KAFKA_ADVERTISED_LISTENERS": "INTERNAL://kafka2:19092,EXTERNAL://127.0.0.1:9093",
        "KAFKA_LISTENER_SECURITY_PROTOCOL_MAP": "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT",
        "KAFKA_MIN_INSYNC_REPLICAS": "2",
        "KAFKA_SOME__UNDERSCORED_KEY": "a",
        "KAFKA_DASHED___KEY": "b",
        "KAFKA_HEAP_OPTS": "-Xmx128m",
        "KAFKA_JMX_PORT": "9999",
        "KAFKA_JMX_HOSTNAME": "kafka2",
    }
    c = dk.client().containers.run(stub_kafka_image, name=name, environment=env, detach=True)
    try:
        out = _container_output(name, "---")
        props = dict(
            line.split("=", 1) for line in out.splitlines() if "=" in line and not line.startswith(("#", "JMX"))
        )
        assert props["broker.id"] == "2"
        assert props["zookeeper.connect"] == "zk1:2181,zk2:2181"
        assert props["listener.security.protocol.map"] == "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT"
        assert props["min.insync.replicas"] == "2"
        assert props["some_underscored.key"] == "a"
        assert props["dashed-key"] == "b"
        assert props["log.dirs"] == "/var/lib/kafka/data"
        assert not any(k.startswith(("heap", "jmx")) for k in props), props
        # JMX only for the broker process: the broker sees JMX_PORT, a `docker exec` tool does not
        assert "JMX_PORT=9999" in out
        exec_env = c.exec_run(["env"]).output.decode()
        assert "JMX_PORT=" not in exec_env.replace("KAFKA_JMX_PORT=", "")
        broker_env = c.exec_run(["cat", "/proc/1/environ"], user="kafka").output.decode().split("\0")
        assert "JMX_PORT=9999" in broker_env
        assert c.exec_run(["ps", "-o", "user=", "-p", "1"]).output.decode().strip() == "kafka"
    finally:
        c.remove(force=True, v=True)


def test_kafka_entrypoint_requires_zookeeper_connect(stub_kafka_image: str) -> None:
    c = dk.client().containers.run(
        stub_kafka_image, environment={"KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://x:9092"}, detach=True
    )
    try:
        assert c.wait(timeout=30)["StatusCode"] == 1  # bash ${VAR:?} in the entrypoint exits 1
        assert "KAFKA_ZOOKEEPER_CONNECT is required" in c.logs().decode()
    finally:
        c.remove(force=True, v=True)


def test_kafka_entrypoint_sets_aside_kraft_logs_without_topic_id(stub_kafka_image: str) -> None:
    """A partition directory without partition.metadata (a broker killed between creating it and writing its
    topic ID) keeps Kafka 3.7 from starting in KRaft mode; the entrypoint renames it to Kafka's stray form and
    leaves every other directory alone."""
    volume = dk.client().volumes.create(f"ctl-test-kafka-data-{uuid.uuid4().hex[:6]}")
    data = {volume.name: {"bind": "/var/lib/kafka/data", "mode": "rw"}}
    prepare = (
        "cd /var/lib/kafka/data && mkdir -p t-0 t-1 my-topic-12 __cluster_metadata-0 t-2.0123abcd-delete notes"
        " && echo topic_id: x > t-1/partition.metadata && touch t-0/00000000000000000000.log"
    )
    dk.client().containers.run(stub_kafka_image, ["bash", "-c", prepare], volumes=data, remove=True)
    env = {
        "KAFKA_PROCESS_ROLES": "broker",
        "KAFKA_NODE_ID": "2",
        "CLUSTER_ID": "AAAAAAAAAAAAAAAAAAAAAA",
        "KAFKA_ADVERTISED_LISTENERS": "INTERNAL://kafka2:19092",
    }
    c = dk.client().containers.run(stub_kafka_image, environment=env, volumes=data, detach=True)
    try:
        out = _container_output(c.name, "---")
        listing = sorted(c.exec_run(["ls", "/var/lib/kafka/data"]).output.decode().split())
        stray = [n for n in listing if n.endswith("-stray")]
        assert sorted(n.split(".")[0] for n in stray) == ["my-topic-12", "t-0"], listing
        assert all(len(n.split(".")[1]) == len("-stray") + 32 for n in stray), stray  # Kafka's <tp>.<id>-stray
        assert {"t-1", "__cluster_metadata-0", "t-2.0123abcd-delete", "notes", "meta.properties"} <= set(listing)
        kept = c.exec_run(["ls", f"/var/lib/kafka/data/{next(n for n in stray if n.startswith('t-0'))}"])
        assert kept.output.decode().split() == ["00000000000000000000.log"]  # set aside, not deleted
        assert out.count("set aside as") == 2
    finally:
        c.remove(force=True, v=True)
        volume.remove(force=True)


def test_zookeeper_image_standalone_runs_as_non_root() -> None:
    c = dk.client().containers.run(
        profiles.OFFLINE_ZOOKEEPER_IMAGE,
        environment={"ZOO_MY_ID": "5", "ZOO_TICK_TIME": "500"},
        ports={"2181/tcp": ("127.0.0.1", None)},
        detach=True,
    )
    try:
        c.reload()
        port = int(c.attrs["NetworkSettings"]["Ports"]["2181/tcp"][0]["HostPort"])
        deadline = time.monotonic() + 60
        status = zk.probe_node(5, c.name, "127.0.0.1", port)
        while status.mode != "standalone" and time.monotonic() < deadline:
            time.sleep(0.5)
            status = zk.probe_node(5, c.name, "127.0.0.1", port)
        assert status.mode == "standalone" and status.ok, status
        assert status.version == "3.8.0"
        assert c.exec_run(["ps", "-o", "user=", "-p", "1"]).output.decode().strip() == "zookeeper"
        assert c.exec_run(["cat", "/data/myid"]).output.decode().strip() == "5"
        cfg = c.exec_run(["cat", "/conf/zoo.cfg"]).output.decode()
        assert "tickTime=500" in cfg and "4lw.commands.whitelist=" in cfg
    finally:
        c.remove(force=True, v=True)


@pytest.mark.parametrize(
    ("entry", "listed"),
    [
        ("clusterctl.spark.datasource, clusterctl.spark.arrowread", "SPARK_CLUSTERCTL_FILES"),
        ("clusterctl.console.app, clusterctl.console.__main__", "CONSOLE_CLUSTERCTL_FILES"),
    ],
)
def test_image_module_lists_cover_what_the_image_imports(entry: str, listed: str) -> None:
    """The spark and console images copy a fixed list of clusterctl modules; a module they import that is
    missing from the list fails the image build's import check, so the list must cover the import closure."""
    code = (
        f"import sys, {entry}\n"
        "print('\\n'.join(m.__file__ for n, m in sys.modules.items() if n.startswith('clusterctl') and m.__file__))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    pkg = Path(images.__file__).resolve().parent.parent
    imported = {str(Path(f).resolve().relative_to(pkg)) for f in out.split()}
    copied = set(getattr(image_inputs, listed)) | (
        {f for f in imported if f.startswith("console/")} if "console" in entry else set()
    )
    assert imported <= copied, f"{listed} lacks {sorted(imported - copied)}"


def test_the_console_imports_from_exactly_the_files_its_image_copies(tmp_path: Path) -> None:
    """What the console image's import check runs at build time, without Docker: the console's clusterctl modules
    copied alone (CONSOLE_CLUSTERCTL_FILES and console/), imported with this checkout out of the path. A module the
    console starts to import and the list misses (spec/capabilities.py once) fails here, not in `make setup`."""
    for src, rel in image_inputs._console_files():
        if rel.startswith("clusterctl/"):
            (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / rel).write_bytes(src.read_bytes())
    checkout = str(Path(image_inputs.__file__).resolve().parents[2])
    code = (
        "import sys\n"
        f"sys.path = [{str(tmp_path)!r}] + [p for p in sys.path if p.rstrip('/') != {checkout!r}]\n"
        "sys.meta_path = [m for m in sys.meta_path if 'editable' not in repr(m).lower()]\n"
        "import clusterctl, clusterctl.console.app, clusterctl.console.__main__\n"
        "print(clusterctl.__file__)\n"
    )
    res = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=tmp_path)  # fmt: skip
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip() == str(tmp_path / "clusterctl" / "__init__.py")
