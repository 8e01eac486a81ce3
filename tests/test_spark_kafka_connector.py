"""Spark's own Kafka connector (spark-sql-kafka-0-10, resolved by Spark from Maven Central into clusterctl's cache)
on real Apache Kafka: a user's plain PySpark script run unchanged by `clusterctl spark run`, and the shipped
word_count job on the default connector, its output carrying the batch-id header the exact-results check reads.
The refusals need no Spark."""

from __future__ import annotations

import random
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import cast

import pytest
from _runtime_helpers import cli
from confluent_kafka import Consumer, Producer, TopicPartition
from conftest import RealKafka

from clusterctl.kafka.admin import create_topic
from clusterctl.kafka.connection import producer_config
from clusterctl.spark.changelog import BATCH_HEADER

pytest.importorskip("pyspark", reason="needs the spark extra (pip install 'clusterctl[spark]')")

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = REPO / "examples" / "spark" / "word_count.py"
WORDS = [f"w{i}" for i in range(40)]


def _lines(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 6))) for _ in range(n)]


def _produce(bootstrap: str, topic: str, lines: list[str]) -> None:
    p = Producer(producer_config(bootstrap))
    for line in lines:
        p.produce(topic, value=line.encode())
    assert p.flush(60) == 0


def _read(bootstrap: str, topic: str, partitions: int) -> list[tuple[str, str, dict[str, bytes]]]:
    """Every record of `topic` (key, value, headers), partition by partition up to the end offsets."""
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "enable.auto.commit": False})
    out: list[tuple[str, str, dict[str, bytes]]] = []
    try:
        for p in range(partitions):
            _low, high = c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            c.assign([TopicPartition(topic, p, 0)])
            got = 0
            while got < high:
                m = c.poll(30)
                assert m is not None, f"{topic}-{p}: no record at offset {got} of {high}"
                assert m.error() is None, m.error()
                key, value = m.key(), m.value()
                assert key is not None and value is not None, f"{topic}-{p}@{got}: a record without key or value"
                headers = dict(cast("list[tuple[str, bytes]]", m.headers() or []))
                out.append((bytes(key).decode(), bytes(value).decode(), headers))
                got += 1
    finally:
        c.close()
    return out


def _totals(lines: list[str]) -> dict[str, str]:
    return {w: str(n) for w, n in Counter(w for ln in lines for w in re.split(r"\s+", ln) if w).items()}


@pytest.mark.real_kafka
@pytest.mark.docker
@pytest.mark.spark
def test_a_plain_pyspark_script_runs_unchanged_with_the_cluster_bootstrap(
    real_kafka: RealKafka, unique_name: str
) -> None:
    src, out = f"{unique_name}-in", f"{unique_name}-out"
    for t in (src, out):
        create_topic(real_kafka.bootstrap, t, 3, 3)
    lines = _lines(3000, 7)
    _produce(real_kafka.bootstrap, src, lines)
    res = cli(real_kafka.spec_path, "spark", "run", str(EXAMPLE), "--master", "local[2]", "--", src, out, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    # the script's own output; of Spark's, only the line its package resolution prints, as under spark-submit
    lines_out = [ln for ln in res.stdout.strip().splitlines() if not ln.startswith(":: loading settings :: ")]
    assert lines_out == [f"counted the words of {src} into {out}"], res.stdout
    newest = {k: v for k, v, _h in _read(real_kafka.bootstrap, out, 3)}  # one key lives in one partition
    assert newest == _totals(lines)


@pytest.mark.real_kafka
@pytest.mark.docker
@pytest.mark.spark
def test_word_count_on_spark_connector_writes_the_batch_header_and_resolves_offline(
    real_kafka: RealKafka, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from clusterctl.spark import packages

    packages.resolve(lambda _line: None)  # the first run's resolution (scripts/setup.sh does it)
    # then no repository answers (a closed port on loopback): the driver resolves from the cache alone
    monkeypatch.setenv("CLUSTERCTL_MAVEN_REPOSITORY", "http://127.0.0.1:9/maven2/")
    src, out = f"{unique_name}-in", f"{unique_name}-out"
    for t in (src, out):
        create_topic(real_kafka.bootstrap, t, 3, 3)
    lines = _lines(2000, 11)
    _produce(real_kafka.bootstrap, src, lines)
    args = ["spark", "run", "word_count", "--master", "local[2]", "--available-now", "--json", "-o", f"input={src}"]
    res = cli(real_kafka.spec_path, *args, "-o", f"output={out}", "-o", "maxOffsetsPerTrigger=700")
    assert res.returncode == 0, res.stderr[-3000:]
    assert '"connector": "kafka"' in res.stdout and '"input_rows": 2000' in res.stdout, res.stdout
    records = _read(real_kafka.bootstrap, out, 3)
    batches = {int(h[BATCH_HEADER]) for _k, _v, h in records}
    assert batches == {0, 1, 2}, batches  # 2000 rows in batches of at most 700, each record carrying its batch
    assert {k: v for k, v, _h in records} == _totals(lines)


def _clusterctl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "clusterctl", *args], capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["spark", "run", "no/such/script.py"], "spark run no/such/script.py: no such script"),
        (["spark", "run", str(EXAMPLE), "--option", "a=b"], "--option is for jobs of spark_jobs/, not for a script"),
        (["spark", "run", str(EXAMPLE), "--connector", "clusterctl"], "--connector clusterctl is for jobs"),
        (["spark", "run", str(REPO / "examples")], "not a regular file"),
        (["spark", "run", "word_count", "extra"], "job word_count takes no arguments ('extra')"),
        (["spark", "run", "word_count", "--connector", "java"], "--connector must be kafka (Spark's own)"),
    ],
)
def test_script_and_connector_refusals_are_one_line_exit_2(args: list[str], line: str) -> None:
    res = _clusterctl(*args, "-b", "127.0.0.1:1")
    assert res.returncode == 2, (res.returncode, res.stderr)
    errors = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(errors) == 1 and errors[0].startswith("error: ") and line in errors[0], res.stderr


@pytest.mark.parametrize(
    ("requested", "engine", "chosen"),
    [
        (None, "kafka", "kafka"),
        (None, None, "kafka"),  # no spec: Spark's own
        (None, "tansu", "clusterctl"),  # Spark's Java client misreads tansu's offsets
        ("clusterctl", "tansu", "clusterctl"),
        ("python", "kafka", "clusterctl"),  # the names of earlier releases
        ("builtin", "kafka", "kafka"),
        ("kafka", "kafka", "kafka"),
        ("kafka", "tansu", None),
        ("java", None, None),
    ],
)
def test_the_connector_is_spark_own_unless_asked_or_on_tansu(
    requested: str | None, engine: str | None, chosen: str | None
) -> None:
    from clusterctl.errors import UsageError
    from clusterctl.spark.runner import choose_connector

    if chosen is None:
        with pytest.raises(UsageError, match="--connector"):
            choose_connector(requested, engine)
    else:
        assert choose_connector(requested, engine) == chosen


def test_the_connector_conf_keeps_the_users_packages_and_adds_spark_own() -> None:
    from clusterctl.spark import packages

    conf = packages.connector_conf({"spark.jars.packages": "org.example:lib:1.0", "spark.jars.excludes": "a:b"})
    listed = conf["spark.jars.packages"].split(",")
    assert listed == ["org.example:lib:1.0", packages.connector_package()]
    assert packages.connector_package().endswith(f"_2.13:{packages.spark_version()}")
    excludes = conf["spark.jars.excludes"].split(",")
    assert excludes[0] == "a:b" and "org.apache.hadoop:hadoop-client-runtime" in excludes
    # a connector the user names (another version, say) is kept, not doubled
    own = packages.connector_conf({"spark.jars.packages": "org.apache.spark:spark-sql-kafka-0-10_2.13:4.1.1"})
    assert own["spark.jars.packages"] == "org.apache.spark:spark-sql-kafka-0-10_2.13:4.1.1"
    settings = Path(conf["spark.jars.ivySettings"]).read_text()
    assert f'root="{packages.repository()}"' in settings and "local-m2" not in settings


def test_a_scenario_asking_spark_own_connector_on_tansu_is_refused_before_anything_runs() -> None:
    from clusterctl.chaos.pipeline import job_connectors
    from clusterctl.chaos.scenario import parse_scenario
    from clusterctl.errors import UsageError
    from clusterctl.spec.model import parse_spec

    doc = "name: x\ntopic: {name: t}\nsteps:\n  - spark_job: {job: key_counts, connector: %s}\n"
    tansu = parse_spec(
        {"name": "lab", "profile": "offline", "kafka": {"engine": "tansu", "brokers": 1,
         "defaults": {"replication_factor": 1, "min_insync_replicas": 1}}, "kafka_manager": {"enabled": False}}
    )  # fmt: skip
    with pytest.raises(UsageError, match=r"^step spark_job job=key_counts .*misreads tansu"):
        job_connectors(tansu, parse_scenario(doc % "kafka", "<s>").parsed_steps())
    assert job_connectors(tansu, parse_scenario(doc % "null", "<s>").parsed_steps()) == {0: "clusterctl"}
