"""Spark jobs on tansu through the clusterctl-kafka data source (real Spark local mode, one session)."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterctl.chaos.ledger import LedgerEntry, LedgerWriter, encode_value, parse_seq
from clusterctl.kafka.admin import create_topic
from clusterctl.kafka.connection import producer_config
from clusterctl.testing.tansu import free_port

# the data source is built on PySpark's Python Data Source API: without the spark extra there is nothing to test
SPARK_EXTRA = "needs the spark extra (pip install 'clusterctl[spark]'): {} is not installed"
pytest.importorskip("pyspark", reason=SPARK_EXTRA.format("pyspark"))
pytest.importorskip("pyarrow", reason=SPARK_EXTRA.format("pyarrow"))

from clusterctl.spark import session  # noqa: E402
from clusterctl.spark.options import KafkaOptions  # noqa: E402
from clusterctl.spark.runner import error_line, run_job  # noqa: E402
from clusterctl.spark.source import cap_offsets  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.tansu]

FORMAT = "clusterctl-kafka"


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    from clusterctl.spark.session import get_session

    session = get_session("local[2]", app_name="clusterctl-tests", shuffle_partitions=2)
    yield session
    session.stop()


def topics(bootstrap: str, *names: str, partitions: int = 2) -> None:
    for name in names:
        create_topic(bootstrap, name, partitions, 1)


def produce(bootstrap: str, topic: str, records: Sequence[tuple[str | None, str, int | None]]) -> None:
    """(key, value, timestamp ms or None), round-robin over 2 partitions."""
    p = Producer(producer_config(bootstrap))
    for i, (key, value, ts) in enumerate(records):
        kwargs: dict[str, Any] = {"timestamp": ts} if ts is not None else {}
        p.produce(topic, value=value.encode(), key=key.encode() if key else None, partition=i % 2, **kwargs)
    assert p.flush(30) == 0


def read_all(spark: Any, bootstrap: str, topic: str) -> list[Any]:
    df = spark.read.format(FORMAT).option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    return sorted(df.option("startingOffsets", "earliest").load().collect(), key=lambda r: (r.partition, r.offset))


def last_per_key(rows: list[Any]) -> dict[str, str]:
    """The value a compacted topic would keep per key (per-key order is within one partition)."""
    return {r.key.decode(): r.value.decode() for r in rows}


def word_totals(lines: list[str]) -> dict[str, str]:
    return {w: str(n) for w, n in Counter(w for line in lines for w in line.split()).items()}


def test_word_count_resumes_from_checkpoint_exactly(spark: Any, bootstrap: str, unique_name: str, tmp_path: Path):
    src, out = f"{unique_name}-in", f"{unique_name}-out"
    topics(bootstrap, src, out)
    first = [f"kafka spark w{i % 13} w{i % 7}" for i in range(600)]
    produce(bootstrap, src, [(None, line, None) for line in first])
    opts = {"input": src, "output": out, "maxOffsetsPerTrigger": "400"}
    cp = tmp_path / "checkpoint"

    run1 = run_job(
        "word_count", bootstrap, spark=spark, connector="clusterctl", checkpoint=cp, available_now=True, options=opts
    )
    assert run1.input_rows == 600 and run1.stopped == "caught up"
    assert run1.batches >= 2 and max(p.input_rows for p in run1.progress) <= 400  # maxOffsetsPerTrigger held
    assert last_per_key(read_all(spark, bootstrap, out)) == word_totals(first)

    second = [f"spark late{i % 5}" for i in range(250)]
    produce(bootstrap, src, [(None, line, None) for line in second])
    run2 = run_job(
        "word_count",
        bootstrap,
        spark=spark,
        connector="clusterctl",
        checkpoint=cp,
        until_idle_s=2,
        trigger_s=0.5,
        options=opts,
    )
    # the restarted query read exactly the new records: none twice, none skipped
    assert run2.input_rows == 250 and run2.stopped == "idle"
    assert last_per_key(read_all(spark, bootstrap, out)) == word_totals(first + second)


def test_windowed_counts_match_reference(spark: Any, bootstrap: str, unique_name: str):
    src, out = f"{unique_name}-in", f"{unique_name}-out"
    topics(bootstrap, src, out)
    t0 = 1_700_000_000_000  # a multiple of 10 s
    events = [(f"k{i % 3}", f"e{i}", t0 + (i * 7_919) % 60_000) for i in range(300)]
    events.append(("sentinel", "advance the watermark", t0 + 120_000))
    produce(bootstrap, src, events)

    result = run_job(
        "windowed_counts",
        bootstrap,
        spark=spark,
        connector="clusterctl",
        available_now=True,
        options={"input": src, "output": out},
    )
    assert result.input_rows == len(events) and result.stopped == "caught up"

    watermark = max(ts for _, _, ts in events) - 10_000
    expected: Counter[tuple[str, int]] = Counter()
    for key, _, ts in events:
        start = ts - ts % 10_000
        if start + 10_000 <= watermark:  # append mode emits a window once the watermark passes its end
            expected[(key, start)] += 1
    got = {}
    for row in read_all(spark, bootstrap, out):
        v = json.loads(row.value)
        start_ms = int(dt.datetime.fromisoformat(v["window_start"].replace("Z", "+00:00")).timestamp()) * 1000
        assert (v["key"], start_ms) not in got, "append mode wrote a window twice"
        got[(v["key"], start_ms)] = v["count"]
    assert got == dict(expected)
    assert ("sentinel", t0 + 120_000) not in got  # its window is still open


def test_sink_delivery_failure_fails_the_batch_and_a_restart_redelivers(
    spark: Any, bootstrap: str, unique_name: str, tmp_path: Path
):
    src, out = f"{unique_name}-in", f"{unique_name}-out"
    topics(bootstrap, src, out)
    produce(bootstrap, src, [(f"k{i}", f"v{i}", None) for i in range(4)])
    checkpoint = str(tmp_path / "checkpoint")

    def start(servers: str, **trigger: Any) -> Any:
        stream = spark.readStream.format(FORMAT).option("kafka.bootstrap.servers", bootstrap).option("subscribe", src)
        stream = stream.option("startingOffsets", "earliest").load().select("key", "value")
        writer = stream.writeStream.format(FORMAT).option("kafka.bootstrap.servers", servers).option("topic", out)
        writer = writer.option("kafka.message.timeout.ms", "1500").option("checkpointLocation", checkpoint)
        return writer.trigger(**trigger).start() if trigger else writer.start()

    query = start(f"127.0.0.1:{free_port()}")  # nothing listens there: every delivery times out
    try:
        with pytest.raises(Exception) as failed:
            query.awaitTermination(90)
        assert not query.isActive
        line = error_line(failed.value)
        assert line.startswith("Kafka delivery failed for 2 records"), line  # per task: 2 partitions
        assert "timed out" in line.lower()
    finally:
        query.stop()
    assert read_all(spark, bootstrap, out) == []

    # the failed batch was never committed: the same checkpoint against a live broker delivers all of it
    query = start(bootstrap, availableNow=True)
    query.awaitTermination(90)
    assert query.exception() is None
    assert sorted((r.key, r.value) for r in read_all(spark, bootstrap, out)) == [
        (f"k{i}".encode(), f"v{i}".encode()) for i in range(4)
    ]


def test_batch_reader_starting_and_ending_offsets(spark: Any, bootstrap: str, unique_name: str):
    src = f"{unique_name}-in"
    topics(bootstrap, src)
    produce(bootstrap, src, [(f"k{i}", f"v{i}", 1_700_000_000_000 + i) for i in range(20)])  # 10 per partition
    df = (
        spark.read.format(FORMAT)
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", src)
        .option("startingOffsets", json.dumps({src: {"0": 3, "1": -2}}))
        .option("endingOffsets", json.dumps({src: {"0": 7, "1": -1}}))
        .load()
    )
    rows = df.collect()
    assert sorted((r.partition, r.offset) for r in rows) == [(0, o) for o in range(3, 7)] + [(1, o) for o in range(10)]
    by = {(r.partition, r.offset): r for r in rows}
    r = by[(0, 3)]  # partition 0 holds the even records: offset 3 is record 6
    assert (r.key, r.value, r.topic, r.timestampType) == (b"k6", b"v6", src, 0)
    assert int(r.timestamp.timestamp() * 1000) == 1_700_000_000_006


def test_options_are_validated_with_one_clear_line():
    ok = KafkaOptions.parse(
        {"bootstrap.servers": "h:1", "subscribe": "a, b", "startingOffsets": '{"a": {"0": 5}}', "kafka.acks": "1"},
        need_topics=True,
    )
    assert (ok.topics, ok.starting, ok.client) == (("a", "b"), {"a": {"0": 5}}, {"acks": "1"})
    for bad, message in [
        ({"subscribe": "a"}, "kafka.bootstrap.servers is required"),
        ({"kafka.bootstrap.servers": "h:1"}, "option subscribe"),
        ({"kafka.bootstrap.servers": "h:1", "subscribe": "a", "startingOffsets": "soon"}, "startingOffsets must be"),
        (
            {"kafka.bootstrap.servers": "h:1", "subscribe": "a", "startingOffsets": '{"b": {"0": 1}}'},
            "not in subscribe",
        ),
        ({"kafka.bootstrap.servers": "h:1", "subscribe": "a", "maxOffsetsPerTrigger": "0"}, "must be positive"),
    ]:
        with pytest.raises(ValueError, match=message):
            KafkaOptions.parse(bad, need_topics=True)


def test_cap_offsets_spreads_the_limit_by_lag():
    start = {("t", 0): 0, ("t", 1): 100}
    end = {("t", 0): 300, ("t", 1): 200}
    assert cap_offsets(start, end, 1000) == end
    assert cap_offsets(start, end, 40) == {("t", 0): 30, ("t", 1): 110}
    assert cap_offsets({("t", 0): 0, ("t", 1): 0}, {("t", 0): 1, ("t", 1): 1}, 1) in (
        {("t", 0): 1, ("t", 1): 0},
        {("t", 0): 0, ("t", 1): 1},
    )


def test_verify_drill_catches_a_lost_acknowledged_write(spark: Any, bootstrap: str, unique_name: str, tmp_path: Path):
    topic = f"{unique_name}-drill"
    topics(bootstrap, topic)
    acked: list[LedgerEntry] = []

    def on_delivery(err: Any, msg: Any) -> None:
        assert err is None
        value = msg.value().decode()
        seq = parse_seq(value)
        assert seq is not None
        acked.append(LedgerEntry(topic, msg.partition(), msg.offset(), msg.key().decode(), value, seq, time.time()))

    p = Producer(producer_config(bootstrap))
    for seq in range(200):
        p.produce(topic, key=f"p{seq % 2}", value=encode_value(seq, 32), partition=seq % 2, on_delivery=on_delivery)
    assert p.flush(30) == 0
    good, lossy = tmp_path / "good.jsonl", tmp_path / "lossy.jsonl"
    with LedgerWriter(good, topic) as w:
        for e in acked:
            w.append(e)
    # the same drill, plus one write the ledger says was acknowledged but the topic never got
    ghost = LedgerEntry(topic, 1, 100, "p1", encode_value(200, 32), 200, time.time())
    with LedgerWriter(lossy, topic) as w:
        for e in [*acked, ghost]:
            w.append(e)

    clean = run_job(
        "verify_drill", bootstrap, spark=spark, connector="clusterctl", options={"ledger": str(good)}
    ).result
    assert clean is not None
    assert (clean["ok"], clean["acked"], clean["consumed"], clean["lost"]) == (True, 200, 200, 0)

    lost = run_job(
        "verify_drill", bootstrap, spark=spark, connector="clusterctl", options={"ledger": str(lossy)}
    ).result
    assert lost is not None
    assert (lost["ok"], lost["acked"], lost["consumed"], lost["lost"]) == (False, 201, 200, 1)
    assert lost["first_lost"] == [f"{topic}-1@100 key=p1 seq=200"]

    # end to end through the CLI: a loss is exit code 6 with one line naming it
    proc = cli(
        "spark",
        "run",
        "verify_drill",
        "-b",
        bootstrap,
        "--option",
        f"ledger={lossy}",
        "--master",
        "local[1]",
        "--connector",
        "clusterctl",
    )
    assert proc.returncode == 6, proc.stderr
    assert "lost 1" in proc.stderr and "Traceback" not in proc.stderr


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "clusterctl", *args], capture_output=True, text=True, timeout=120, check=False
    )


def test_cli_errors_are_one_line_before_spark_starts(bootstrap: str, unique_name: str):
    bad = cli("spark", "run", "no_such_job", "-b", bootstrap)
    assert bad.returncode == 3 and "valid jobs:" in bad.stderr and "word_count" in bad.stderr

    missing = cli("spark", "run", "word_count", "-b", bootstrap, "--option", f"input={unique_name}")
    assert missing.returncode == 3
    assert f"unknown topic '{unique_name}'" in missing.stderr and "Traceback" not in missing.stderr

    down = cli("spark", "run", "word_count", "-b", f"127.0.0.1:{free_port()}")
    assert down.returncode == 4 and "no Kafka broker answered" in down.stderr

    listed = cli("spark", "list", "--json")
    assert listed.returncode == 0
    assert {"word_count", "windowed_counts"} <= {j["name"] for j in json.loads(listed.stdout)}


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=lambda s: s.name)
def test_an_interrupted_run_says_one_line_without_py4j_or_java(bootstrap: str, unique_name: str, sig: Any):
    """Ctrl-C or SIGTERM while a streaming job runs: exit 130/143 and `error: interrupted by SIG...`, nothing of
    py4j's tracebacks (logged through Python's root logger) nor the JVM's stderr (19 and 53 lines before)."""
    create_topic(bootstrap, unique_name, 2, 1, {})
    create_topic(bootstrap, f"{unique_name}-out", 1, 1, {})
    produce(bootstrap, unique_name, [(None, "a b c", None)] * 20)
    args = ["spark", "run", "word_count", "-b", bootstrap, "--master", "local[1]", "--connector", "clusterctl",
            "--until-idle", "120",
            "--trigger", "0.5", "--option", f"input={unique_name}",
            "--option", f"output={unique_name}-out"]  # fmt: skip
    # a group of its own: whatever happens here, the CLI and its JVM end with the test
    proc = subprocess.Popen([sys.executable, "-m", "clusterctl", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()  # "running word_count on ...": the JVM starts now
        assert first.startswith("running word_count"), first
        # the JVM up and micro-batches under way (py4j calls in flight): the first batch's line (not a fixed sleep:
        # a driver's start takes 5 s on a quiet machine, 40 s on a busy one)
        batch = proc.stderr.readline()
        assert batch.startswith("batch 0: 20 rows"), batch
        time.sleep(1)
        proc.send_signal(sig)  # the CLI alone, as a terminal's Ctrl-C reaches it (PySpark's JVM ignores SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert proc.returncode == 128 + sig, err
    assert [ln for ln in err.splitlines() if not ln.startswith("batch ")] == [f"error: interrupted by {sig.name}"], err
    assert list(session.scratch_root().glob(f"{proc.pid}-*")) == []  # its scratch directory went with it
    assert "py4j" not in out + err and "at org.apache" not in out + err


def _children(pid: int) -> list[int]:
    out = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            with contextlib.suppress(OSError, IndexError, ValueError):
                if int(Path(entry.path, "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                    out.append(int(entry.name))
    return out


def test_a_killed_run_takes_its_jvm_with_it(
    bootstrap: str, unique_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGKILL to `clusterctl spark run` (the OOM killer, `kill -9`, a CI runner's hard stop) cannot run a cleanup;
    its PySpark JVM must still end (it watches its stdin, a pipe from the driver process) instead of running on."""
    # a scratch root of its own: any other driver on the machine sweeps the shared one, and would take the killed
    # run's directory before this test looks for it
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    create_topic(bootstrap, unique_name, 1, 1, {})
    produce(bootstrap, unique_name, [(None, "a b c", None)] * 5)
    args = ["spark", "run", "word_count", "-b", bootstrap, "--master", "local[1]", "--connector", "clusterctl",
            "--until-idle", "120",
            "--trigger", "0.5", "--option", f"input={unique_name}",
            "--option", f"output={unique_name}-out"]  # fmt: skip
    create_topic(bootstrap, f"{unique_name}-out", 1, 1, {})
    proc = subprocess.Popen([sys.executable, "-m", "clusterctl", *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "TMPDIR": str(tmp_path)})  # fmt: skip
    jvms: list[int] = []
    try:
        assert proc.stderr is not None
        assert proc.stderr.readline().startswith("running word_count")
        batch = proc.stderr.readline()
        assert batch.startswith("batch 0: "), batch
        jvms = [c for c in _children(proc.pid) if b"java" in Path(f"/proc/{c}/cmdline").read_bytes()]
        assert len(jvms) == 1, jvms
        proc.kill()
        proc.wait(timeout=30)
        deadline = time.monotonic() + 60
        while Path(f"/proc/{jvms[0]}").exists() and time.monotonic() < deadline:
            time.sleep(0.5)
        alive = Path(f"/proc/{jvms[0]}").exists()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    assert not alive, f"the JVM {jvms[0]} of a killed `spark run` still runs 60 s later"
    # the JVM's temporary files went to the run's scratch directory (its shutdown removed Spark's own); the killed
    # driver could not remove the directory, the next driver's sweep (here called directly) does
    [left] = session.scratch_root().glob(f"{proc.pid}-*")
    assert str(left) in session.sweep_scratch() and not left.exists()


_MASTERS = st.one_of(
    st.builds(lambda n: f"local[{n}]", st.one_of(st.integers(-5, 1030), st.sampled_from(["*", "x", "", "1,2", "2,0"]))),
    st.builds(lambda p: f"spark://127.0.0.1:{p}", st.one_of(st.just(free_port()), st.integers(0, 70000))),
    st.sampled_from(["local", "yarn", "k8s://x", "mesos://x:5050", "spark://", "spark://:7077", "cluster ", "LOCAL"]),
    st.text(max_size=20).filter(lambda s: not s.startswith("-")),
)


def _master_ok(master: str) -> bool:
    """The forms --master's help names: local, local[N|*] (N 1..1024, optionally ,F with F 1..1024), spark://."""
    import re

    m = re.fullmatch(r"local(?:\[(\*|[0-9]+)(?:,([0-9]+))?\])?", master)
    if m:
        return all(g in (None, "*") or 1 <= int(g) <= 1024 for g in m.groups())
    port = re.fullmatch(r"spark://127\.0\.0\.1:([0-9]+)", master)
    return port is not None and 1 <= int(port.group(1)) <= 65535


@settings(deadline=None, database=None, max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(master=_MASTERS, conf=st.lists(st.one_of(
    st.builds(lambda v: f"spark.executor.cores={v}", st.text(max_size=8).filter(lambda v: "\x00" not in v)),
    st.sampled_from(["foo=bar", "spark.master=local", "spark.x=" + "v" * 70_000, "spark.ok=a\x1bb", "=x"]),
), max_size=2))  # fmt: skip
def test_master_and_conf_are_checked_before_spark(bootstrap: str, master: str, conf: list[str]):
    """Generated --master and --conf: what the help allows goes on (here to a missing input topic: exit 3, or a
    spark:// master that does not answer: exit 4); anything else is one line, exit 2; never a Java trace."""
    import contextlib
    import io

    from clusterctl import cli as app

    err = io.StringIO()
    args = ["spark", "run", "word_count", "--master", master, "--option", "input=fz-missing", "-b", bootstrap]
    args += [x for c in conf for x in ("--conf", c)]
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = app.run(args)
    lines = [ln for ln in err.getvalue().splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1 and "Traceback" not in err.getvalue() and "at org.apache" not in err.getvalue(), err
    # as parse_kv hands them on: a key given twice keeps its last value (as spark-submit's --conf does)
    values = list({c.partition("=")[0].strip(): c.partition("=")[2].strip() for c in conf}.values())
    conf_ok = all(c.startswith("spark.executor.cores=") for c in conf) and not any(
        ord(ch) < 0x20 or 0x7F <= ord(ch) <= 0x9F for v in values for ch in v
    )
    if not _master_ok(master) or not conf_ok:
        assert code == 2, (master, conf, lines)
    else:
        assert code in (3, 4), (master, conf, lines)
