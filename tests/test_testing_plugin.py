"""The pytest plugin as a user meets it: sample test files run by pytest in a subprocess (pytester).

The plugin is loaded through its `pytest11` entry point (the editable install registers it). The plugin's own
mechanics (fixtures, isolation, interrupts, skips) are tested on the tansu container with one ZooKeeper node, which
starts in seconds; the example project runs on its default, 3 Apache Kafka brokers. Whatever each session created
is looked up afterwards with the Docker API: nothing may be left.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from clusterctl.runtime import docker as dk

pytest_plugins = ["pytester"]
pytestmark = [pytest.mark.docker, pytest.mark.tansu]

INI = "[pytest]\nclusterctl_engine = tansu\nclusterctl_zookeepers = 1\naddopts = -p no:cacheprovider\n"

SAMPLE = """
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer

from clusterctl.errors import VerificationError

SEEN = []


def test_cluster_facts(kafka_cluster):
    assert kafka_cluster.engine == "tansu"
    assert kafka_cluster.broker_ids == [1]
    assert kafka_cluster.bootstrap_servers.startswith("127.0.0.1:")
    assert kafka_cluster.zookeeper_connect.startswith("127.0.0.1:")
    assert kafka_cluster.controller() == 1


def test_produce_and_consume_on_a_fresh_topic(kafka_cluster, kafka_topic):
    SEEN.append(kafka_topic)
    p = Producer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "acks": "all"})
    for i in range(10):
        p.produce(kafka_topic, key=str(i), value=f"v{i}")
    assert p.flush(30) == 0
    c = Consumer({"bootstrap.servers": kafka_cluster.bootstrap_servers, "group.id": uuid.uuid4().hex,
                  "auto.offset.reset": "earliest"})
    c.subscribe([kafka_topic])
    got = []
    deadline = time.monotonic() + 60
    while len(got) < 10 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and m.error() is None:
            got.append(m.value().decode())
    c.close()
    assert sorted(got) == sorted(f"v{i}" for i in range(10))
    assert kafka_cluster.describe(kafka_topic).partition_count == 3


def test_topic_names_are_unique_and_deleted_after(kafka_cluster, kafka_topic):
    assert SEEN and kafka_topic not in SEEN
    from clusterctl.kafka.admin import list_topics
    names = {t.name for t in list_topics(kafka_cluster.bootstrap_servers)}
    assert SEEN[0] not in names and kafka_topic in names


def test_the_same_topic_name_in_every_session(kafka_cluster):
    # two sessions sharing a broker would fail here with "already exists"
    kafka_cluster.create_topic("same-name-in-every-session", partitions=1)


def test_drill_survives_a_broker_pause(kafka_cluster, kafka_drill):
    kafka_drill.wait_acked(100)
    kafka_cluster.pause_broker(1, 2)
    kafka_drill.wait_acked(kafka_drill.acked + 100)


def test_drill_detects_loss(kafka_cluster):
    # tansu keeps records in memory: a restart loses acknowledged writes, and the verifier must say so
    with pytest.raises(VerificationError, match=r"drill verification failed: acked \\d+, consumed \\d+, lost [1-9]"):
        with kafka_cluster.drill() as drill:
            drill.wait_acked(100)
            kafka_cluster.kill_broker(1)
            kafka_cluster.start_broker(1)
            kafka_cluster.wait_healthy()


def test_a_fault_left_behind_is_healed_for_the_next_test(kafka_cluster):
    kafka_cluster.kill_broker(1)
    kafka_cluster.partition("zk1")


def test_the_cluster_is_whole_again(kafka_cluster):
    assert kafka_cluster.faulted is False
    kafka_cluster.create_topic(partitions=1)


@pytest.mark.clusterctl_engine("kafka")
def test_needs_real_kafka(kafka_cluster):
    raise AssertionError("must be skipped on tansu")


def test_fails_on_purpose(kafka_cluster, kafka_topic):
    raise AssertionError("a failing test must not keep the cluster alive")
"""


def _cluster_names(output: str) -> list[str]:
    return re.findall(r"cluster (ctltest-[0-9a-f]+): engine", output)


def _leftovers(project: str) -> dict[str, list[str]]:
    found = {
        "containers": sorted(c.name for c in dk.project_containers(project)),
        "networks": dk.project_networks(project),
        "volumes": dk.project_volumes(project),
    }
    return {k: v for k, v in found.items() if v}


def test_sample_user_tests_run_against_tansu_and_leave_nothing(pytester: pytest.Pytester) -> None:
    pytester.makeini(INI)
    pytester.makepyfile(test_sample=SAMPLE)
    t0 = time.monotonic()
    result = pytester.runpytest_subprocess("-rs", timeout=300)
    took = time.monotonic() - t0
    out = result.stdout.str()
    result.assert_outcomes(passed=8, failed=1, skipped=1)
    assert "a failing test must not keep the cluster alive" in out
    assert "needs engine kafka; this session's kafka_cluster runs tansu" in out
    names = _cluster_names(out)
    assert len(names) == 1, out
    assert "engine tansu" in out and "1 ZooKeeper node," in out
    assert "LEFT BEHIND" not in out
    assert _leftovers(names[0]) == {}
    m = re.search(r"healthy ([\d.]+) s after the fixture was requested; removed in ([\d.]+) s", out)
    assert m, out
    print(f"\nsample session: healthy {m.group(1)} s, removed {m.group(2)} s, whole run {took:.1f} s")


PARALLEL = """
import pytest

pytestmark = pytest.mark.clusterctl(zookeepers=1)  # stronger than the ini's 3


def test_isolated(kafka_cluster):
    kafka_cluster.create_topic("same-name-in-every-session", partitions=1)
    print(kafka_cluster.subnet, kafka_cluster.bootstrap_servers)
"""


def test_two_sessions_in_parallel_do_not_clash(pytester: pytest.Pytester) -> None:
    dirs = []
    for name in ("a", "b"):
        d = pytester.mkdir(name)
        (d / "pytest.ini").write_text(INI.replace("clusterctl_zookeepers = 1", "clusterctl_zookeepers = 3"))
        (d / "test_parallel.py").write_text(PARALLEL)
        dirs.append(d)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "pytest", "-q", str(d)],
            cwd=d,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for d in dirs
    ]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    for p, out in zip(procs, outs, strict=True):
        assert p.returncode == 0, out
        assert "1 passed" in out
        assert "1 ZooKeeper node," in out  # the marker beat the ini option
    names = [_cluster_names(o)[0] for o in outs]
    subnets = [re.search(r"subnet (\S+),", o).group(1) for o in outs]  # type: ignore[union-attr]
    boots = [re.search(r"bootstrap (\S+)\n", o).group(1) for o in outs]  # type: ignore[union-attr]
    assert len(set(names)) == 2 and len(set(subnets)) == 2 and len(set(boots)) == 2, outs
    for name in names:
        assert _leftovers(name) == {}


INTERRUPTED = """
import time
from pathlib import Path

def test_hangs(kafka_cluster):
    Path("cluster-name").write_text(kafka_cluster.name)
    time.sleep(600)
"""


def test_interrupted_session_removes_its_cluster(pytester: pytest.Pytester) -> None:
    """SIGTERM to the process group (what a CI runner sends on timeout), twice, mid-test: the cluster goes anyway."""
    pytester.makeini(INI)
    pytester.makepyfile(test_interrupted=INTERRUPTED)
    marker = pytester.path / "cluster-name"
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q"],
        cwd=pytester.path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while not marker.exists():
            assert proc.poll() is None and time.monotonic() < deadline, "the session never reached its test"
            time.sleep(0.2)
        name = marker.read_text()
        assert _leftovers(name), "the cluster should be running"
        os.killpg(proc.pid, signal.SIGTERM)
        time.sleep(0.3)  # the second one arrives while the cluster is being removed
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert _leftovers(name) == {}


NEEDS_CLUSTER = """
def test_uses_cluster(kafka_cluster):
    raise AssertionError("must be skipped")

def test_uses_topic(kafka_topic):
    raise AssertionError("must be skipped")
"""


def test_no_docker_engine_skips_with_one_reason(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{pytester.path}/no-docker.sock")
    pytester.makeini(INI)
    pytester.makepyfile(test_needs=NEEDS_CLUSTER)
    t0 = time.monotonic()
    result = pytester.runpytest_subprocess("-rs", timeout=120)
    result.assert_outcomes(skipped=2)
    reasons = set(re.findall(r"SKIPPED \[\d+\] [^:]+:\d+: (.*)", result.stdout.str()))
    assert len(reasons) == 1, reasons
    assert next(iter(reasons)).startswith("clusterctl kafka_cluster: Docker engine not reachable")
    assert time.monotonic() - t0 < 60


def test_missing_image_skips_naming_it(pytester: pytest.Pytester, tmp_path: Path) -> None:
    spec = tmp_path / "clusterctl.yaml"
    spec.write_text(
        "profile: offline\nzookeeper: {nodes: 1}\nkafka_manager: {enabled: false}\n"
        "images: {zookeeper: 'clusterctl/no-such-image:1'}\n"
    )
    pytester.makeini(INI)
    pytester.makepyfile(test_needs=NEEDS_CLUSTER)
    result = pytester.runpytest_subprocess("-rs", f"--clusterctl-spec={spec}", timeout=120)
    result.assert_outcomes(skipped=2)
    result.stdout.fnmatch_lines(["*clusterctl kafka_cluster: image clusterctl/no-such-image:1 not present locally*"])


EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _run_examples(*args: str) -> tuple[str, float]:
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-rs", "-p", "no:cacheprovider", *args],
        cwd=EXAMPLES,
        capture_output=True,
        text=True,
        timeout=900,
    )
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    return out, time.monotonic() - t0


def test_example_project_on_tansu() -> None:
    out, took = _run_examples("--clusterctl-engine=tansu")
    assert "1 passed, 1 skipped" in out, out[-3000:]
    assert "needs engine kafka; this session's kafka_cluster runs tansu" in out
    assert _leftovers(_cluster_names(out)[0]) == {}
    print(f"\nexamples on tansu: {took:.1f} s")


@pytest.mark.real_kafka
def test_example_project_on_real_kafka() -> None:
    """The example project as a user runs it, with no option: the plugin's default is 3 Apache Kafka brokers (its
    own cluster, not the suite's shared one), and the broker-kill test runs."""
    out, took = _run_examples()
    assert "2 passed" in out, out[-3000:]
    assert "engine kafka" in out and "3 broker(s)" in out
    assert _leftovers(_cluster_names(out)[0]) == {}
    m = re.search(r"healthy ([\d.]+) s after the fixture was requested; removed in ([\d.]+) s", out)
    assert m, out[-3000:]
    print(f"\nexamples on real Kafka: healthy {m.group(1)} s after the fixture request, whole run {took:.1f} s")
