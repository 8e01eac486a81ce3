"""A Spark standalone master + worker from the rendered compose file, running word_count with `--master cluster`.

Real everything: the spec (a free subnet and free host ports, one ZooKeeper node,
tansu, spark.enabled with one worker) is rendered and started with the real CLI; the driver runs on this
host, the executors in the clusterctl/spark worker container. Exact per-word totals are checked on the
output topic, and the master's own JSON API shows the application ran there.
"""

from __future__ import annotations

import json
import shutil
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from _runtime_helpers import cli, leftovers, release, render, wait_for, write_spec
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition

from clusterctl.images import build as images
from clusterctl.kafka.admin import create_topic
from clusterctl.kafka.connection import consumer_config, producer_config
from clusterctl.runtime import allocate
from clusterctl.spec.model import ClusterSpec, load_spec

pytestmark = [pytest.mark.docker, pytest.mark.spark]

# free host ports (runtime/allocate.py; no Docker needed to pick them), a free subnet when the cluster is made
SUBNET = None
_BASE = allocate.free_port_block(4)
ZK_PORT, BROKER_PORT, MASTER_PORT, UI_PORT = _BASE, _BASE + 1, _BASE + 2, _BASE + 3
RECORDS = 5_000


@dataclass
class Cluster:
    spec_path: Path
    spec: ClusterSpec
    seconds_to_healthy: float


def with_spark(spec_path: Path, **spark: Any) -> None:
    data = yaml.safe_load(spec_path.read_text())
    data["spark"] = spark
    spec_path.write_text(yaml.safe_dump(data, sort_keys=False))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    started = time.monotonic()
    results = images.build_images(["zookeeper", "tansu", "spark"])
    built = [f"{r.target} {r.action} {r.seconds}s" for r in results]
    print(f"images: {', '.join(built)} ({time.monotonic() - started:.1f}s)")
    work = tmp_path_factory.mktemp("spark-standalone")
    spec_path = write_spec(
        work, f"ctlspark-{uuid.uuid4().hex[:6]}", SUBNET, zk_port=ZK_PORT, broker_port=BROKER_PORT, zk_nodes=1
    )
    shared = work / "shared"
    with_spark(
        spec_path,
        enabled=True,
        workers=1,
        worker_cores=2,
        worker_memory="1g",
        master_port=MASTER_PORT,
        ui_port=UI_PORT,
        shared_dir=str(shared),
    )
    render(spec_path)
    spec = load_spec(spec_path)
    try:
        up = time.monotonic()
        res = cli(spec_path, "up", "--timeout", "120")
        assert res.returncode == 0, res.stderr
        yield Cluster(spec_path, spec, round(time.monotonic() - up, 1))
    finally:
        release(spec_path)
        shutil.rmtree(shared, ignore_errors=True)


def master_state(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/", timeout=5) as resp:
        return dict(json.load(resp))


def workers_alive(port: int) -> int:
    """The master's alive workers; 0 while its UI does not answer yet (Docker's proxy accepts, then resets)."""
    try:
        return int(master_state(port)["aliveworkers"])
    except OSError:
        return 0


def read_topic(bootstrap: str, topic: str, partitions: int) -> list[tuple[str, str]]:
    """(key, value) of every record up to the end of each partition, in offset order per partition."""
    conf = consumer_config(bootstrap, auto_offset_reset="earliest")
    conf["enable.partition.eof"] = True
    consumer = Consumer(conf)
    out: list[tuple[str, str]] = []
    try:
        for p in range(partitions):
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING)])
            offsets: list[int] = []
            deadline = time.monotonic() + 30
            eof = False
            while not eof and time.monotonic() < deadline:
                for msg in consumer.consume(1000, timeout=1):
                    err = msg.error()
                    if err is not None and err.code() == KafkaError._PARTITION_EOF:
                        eof = True
                        break
                    assert err is None, err
                    key, value, offset = msg.key(), msg.value(), msg.offset()
                    assert key is not None and value is not None and offset is not None
                    offsets.append(offset)
                    out.append((key.decode(), value.decode()))
            assert eof, f"{topic}[{p}]: no end of partition after {len(offsets)} records"
            assert offsets == list(range(len(offsets))), f"{topic}[{p}]: offsets not contiguous"
    finally:
        consumer.close()
    return out


def test_word_count_runs_on_the_standalone_worker(cluster: Cluster) -> None:
    spec = cluster.spec
    print(f"cluster healthy {cluster.seconds_to_healthy}s after `up`")
    wait_for(lambda: workers_alive(UI_PORT), 60, "the worker registered with the master")
    state = master_state(UI_PORT)
    assert state["status"] == "ALIVE" and state["aliveworkers"] == 1 and state["cores"] == 2
    assert state["workers"][0]["host"] == spec.topology.spark_worker_ip(1)

    src, out = f"words-{uuid.uuid4().hex[:6]}", f"counts-{uuid.uuid4().hex[:6]}"
    bootstrap = spec.topology.bootstrap_servers
    for topic in (src, out):
        create_topic(bootstrap, topic, 2, 1)
    lines = [f"kafka spark w{i % 97} w{i % 13} standalone" for i in range(RECORDS)]
    producer = Producer(producer_config(bootstrap))
    for i, line in enumerate(lines):
        producer.produce(src, value=line.encode(), partition=i % 2)
    assert producer.flush(30) == 0

    started = time.monotonic()
    res = cli(
        cluster.spec_path,
        "spark",
        "run",
        "word_count",
        "--master",
        "cluster",
        "--available-now",
        "--option",
        f"input={src}",
        "--option",
        f"output={out}",
        "--option",
        "maxOffsetsPerTrigger=2500",
        "--json",
        timeout=240,
    )
    wall = time.monotonic() - started
    assert res.returncode == 0, res.stderr
    result = json.loads(res.stdout)
    print(
        f"word_count on {result['master']}: {result['input_rows']} records, {result['batches']} batches, "
        f"{result['records_per_s']:.0f} records/s busy, job wall {result['wall_s']:.1f}s, CLI wall {wall:.1f}s"
    )
    assert result["master"] == f"spark://127.0.0.1:{MASTER_PORT}"
    assert (result["input_rows"], result["stopped"]) == (RECORDS, "caught up")
    assert result["batches"] >= 2  # maxOffsetsPerTrigger held on the cluster too

    expected = Counter(w for line in lines for w in line.split())
    last = dict(read_topic(bootstrap, out, 2))  # per key, the last record is the word's total
    assert last == {w: str(n) for w, n in expected.items()}

    # the application ran on this master, with executors on its worker
    apps = master_state(UI_PORT)["completedapps"]
    mine = [a for a in apps if a["name"] == "clusterctl-word_count"]
    assert len(mine) == 1 and mine[0]["cores"] == 2, apps
    # the temporary checkpoint (driver offsets + executor state) was created and removed in the shared dir
    assert list(Path(spec.topology.spark_shared_dir).iterdir()) == []


def test_cluster_master_errors_are_one_line(cluster: Cluster, tmp_path: Path) -> None:
    no_spark = write_spec(tmp_path, "ctlspark-off", SUBNET, zk_port=ZK_PORT, broker_port=BROKER_PORT, zk_nodes=1)
    res = cli(no_spark, "spark", "run", "word_count", "--master", "cluster")
    assert res.returncode == 2 and res.stderr.count("\n") <= 2, res.stderr
    assert "has no Spark master (spark.enabled is false" in res.stderr and "Traceback" not in res.stderr

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    down = write_spec(elsewhere, "ctlspark-down", SUBNET, zk_port=ZK_PORT, broker_port=BROKER_PORT, zk_nodes=1)
    with_spark(down, enabled=True, master_port=24078, ui_port=24081)  # nothing listens on 24078
    res = cli(down, "spark", "run", "word_count", "--master", "cluster")
    assert res.returncode == 4 and "Spark master spark://127.0.0.1:24078 does not answer" in res.stderr, res.stderr

    bad_cp = cli(cluster.spec_path, "spark", "run", "word_count", "--master", "cluster", "--checkpoint", "/tmp/x")
    assert bad_cp.returncode == 2 and "is not under spark.shared_dir" in bad_cp.stderr, bad_cp.stderr


def test_down_leaves_nothing(cluster: Cluster) -> None:
    project = cluster.spec.topology.project
    assert leftovers(project)["containers"]
    res = cli(cluster.spec_path, "down", "--volumes")
    assert res.returncode == 0, res.stderr
    assert leftovers(project) == {"containers": [], "networks": [], "volumes": []}
