"""The Spark source's two partition readers (librdkafka batches into Arrow, confluent-kafka's Consumer) on tansu."""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import Producer

from clusterctl.kafka.admin import create_topic
from clusterctl.kafka.connection import producer_config

pytest.importorskip("pyspark", reason="needs the spark extra (pip install 'clusterctl[spark]')")
pa = pytest.importorskip("pyarrow", reason="needs the spark extra (pip install 'clusterctl[spark]')")

from clusterctl.spark import arrowread, source  # noqa: E402
from clusterctl.spark.options import KafkaOptions  # noqa: E402
from clusterctl.spark.source import KafkaInputPartition  # noqa: E402

pytestmark = [pytest.mark.spark, pytest.mark.tansu]


def _fill(bootstrap: str, topic: str) -> list[tuple[bytes | None, bytes, int]]:
    """300 records on partition 0: keys every other record (None otherwise), empty and 4 KiB values."""
    create_topic(bootstrap, topic, 1, 1)
    p = Producer(producer_config(bootstrap))
    records = []
    for i in range(300):
        key = f"k{i}".encode() if i % 2 else None
        value = b"" if i % 50 == 0 else (b"x" * 4096 if i % 7 == 0 else f"value {i}".encode())
        ts = 1_700_000_000_000 + i
        p.produce(topic, key=key, value=value, partition=0, timestamp=ts)
        records.append((key, value, ts))
    assert p.flush(30) == 0
    return records


def _read(fn: Any, bootstrap: str, topic: str, start: int, end: int) -> Any:
    opts = KafkaOptions.parse({"kafka.bootstrap.servers": bootstrap, "subscribe": topic}, need_topics=True)
    batches = list(fn(opts, KafkaInputPartition(topic, 0, start, end)))
    assert all(isinstance(b, pa.RecordBatch) for b in batches)
    return pa.Table.from_batches(batches, schema=source._arrow_schema())


def test_native_reader_matches_the_records_and_the_client_reader(
    bootstrap: str, unique_name: str, monkeypatch: pytest.MonkeyPatch
):
    assert arrowread.available(), "the wheel's librdkafka or numpy does not load: the source would be slow"
    records = _fill(bootstrap, unique_name)

    native = _read(source.read_range, bootstrap, unique_name, 25, 260)
    rows = native.to_pylist()
    assert [r["offset"] for r in rows] == list(range(25, 260))
    for r in rows:
        key, value, ts = records[r["offset"]]
        assert (r["key"], r["value"], r["topic"], r["partition"]) == (key, value, unique_name, 0)
        assert int(r["timestamp"].timestamp() * 1000) == ts and r["timestampType"] == 0  # CreateTime

    client = _read(source.read_range_client, bootstrap, unique_name, 25, 260)
    assert native.equals(client)

    # a batch whose bytes pass the cap is cut into several, none lost
    monkeypatch.setattr(arrowread, "MAX_BATCH_BYTES", 8192)
    opts = KafkaOptions.parse({"kafka.bootstrap.servers": bootstrap, "subscribe": unique_name}, need_topics=True)
    cut = list(source.read_range(opts, KafkaInputPartition(unique_name, 0, 0, 300)))
    assert len(cut) > 3
    assert all(sum(len(v or b"") for v in b.column("value").to_pylist()) <= 8192 + 4096 for b in cut)
    assert pa.Table.from_batches(cut).column("offset").to_pylist() == list(range(300))


def test_native_reader_fails_on_a_range_past_the_log_end(bootstrap: str, unique_name: str):
    _fill(bootstrap, unique_name)
    with pytest.raises(RuntimeError, match=r"data loss on .*\[0\] offsets 290\.\.310: the log ends at 300"):
        _read(source.read_range, bootstrap, unique_name, 290, 310)


def test_batch_progress_reads_rates_and_lag_from_spark_progress():
    from clusterctl.spark.progress import BatchProgress

    def progress(rate_in: float, end: str, latest: str | None) -> dict[str, Any]:
        return {
            "batchId": 4,
            "numInputRows": 1500,
            "timestamp": "2026-11-26T01:00:00.000Z",
            "durationMs": {"triggerExecution": 750},
            "inputRowsPerSecond": rate_in,
            "processedRowsPerSecond": 2000.0,
            "sources": [{"endOffset": end, "latestOffset": latest}],
        }

    p = BatchProgress.of(progress(float("nan"), '{"t": {"0": 10, "1": 5}}', '{"t": {"0": 25, "1": 5, "2": 7}}'))
    assert (p.batch_id, p.input_rows, p.duration_ms, p.input_rows_per_s, p.processed_rows_per_s) == (
        4,
        1500,
        750,
        None,  # NaN: no previous batch to measure the input rate against
        2000.0,
    )
    assert p.lag == 15 + 0 + 7  # a partition the batch has not read yet counts whole
    assert p.line() == "batch 4: 1,500 rows in 750 ms (2,000 rows/s processed), lag 22"
    unknown = BatchProgress.of(progress(120.0, '{"t": {"0": 10}}', None))
    assert unknown.lag is None and unknown.line().endswith("(2,000 rows/s processed, 120 rows/s in), lag ?")


@pytest.mark.real_kafka
@pytest.mark.docker
def test_ranges_ending_in_transaction_markers_end_without_waiting(real_kafka: Any, unique_name: str):
    """Commit markers take offsets but are never delivered: a range ending on one ends at once, not after the
    poll timeout (the reader asks the consumer's position), on both readers."""
    bootstrap = real_kafka.bootstrap
    create_topic(bootstrap, unique_name, 1, 3)
    p = Producer({**producer_config(bootstrap), "transactional.id": f"{unique_name}-tx"})
    p.init_transactions(30)
    for batch in range(3):
        p.begin_transaction()
        for i in range(5):
            p.produce(unique_name, value=f"t{batch}-{i}".encode(), partition=0)
        p.commit_transaction(30)
    from clusterctl.kafka.connection import log_end_offsets

    end = log_end_offsets(bootstrap, [(unique_name, 0)])[(unique_name, 0)]
    assert end == 18  # 15 records, 3 commit markers
    opts = KafkaOptions.parse(
        {"kafka.bootstrap.servers": bootstrap, "subscribe": unique_name, "kafkaConsumer.pollTimeoutMs": "5000"},
        need_topics=True,
    )
    for fn in (source.read_range, source.read_range_client):
        rows = pa.Table.from_batches(list(fn(opts, KafkaInputPartition(unique_name, 0, 0, end)))).to_pylist()
        assert [r["value"] for r in rows] == [f"t{b}-{i}".encode() for b in range(3) for i in range(5)]
        assert [r["offset"] for r in rows] == [o for o in range(18) if o % 6 != 5]


def test_latest_offsets_wait_out_a_leader_election(
    bootstrap: str, unique_name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Planning a batch while a partition's leader is being elected asks again (LEADER_NOT_AVAILABLE is what real
    Kafka answered in the spark-kill-leader drill); any other error still fails at once."""
    from clusterctl.errors import ClusterctlError
    from clusterctl.kafka import connection

    _fill(bootstrap, unique_name)
    real = connection.log_end_offsets
    answers: list[str] = ["LEADER_NOT_AVAILABLE", "_TIMED_OUT", "NOT_LEADER_OR_FOLLOWER"]

    def electing(bs: str, tps: list[tuple[str, int]], client: Any = None) -> dict[tuple[str, int], int]:
        if answers:
            err = ClusterctlError(f"{answers[0]}: Broker: Leader not available")
            err.kafka_code = answers.pop(0)  # as kafka_error keeps it
            raise err
        return real(bs, tps)

    monkeypatch.setattr(connection, "log_end_offsets", electing)
    assert source.latest_offsets(bootstrap, [(unique_name, 0)]) == {(unique_name, 0): 300} and answers == []
    answers.append("TOPIC_AUTHORIZATION_FAILED")
    with pytest.raises(ClusterctlError, match=r"^TOPIC_AUTHORIZATION_FAILED"):
        source.latest_offsets(bootstrap, [(unique_name, 0)])
