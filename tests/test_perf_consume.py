"""perf consume's engines against a real Kafka-protocol broker (tansu), through the real CLI."""

from __future__ import annotations

import ctypes
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.tansu

CLI = [sys.executable, "-m", "clusterctl"]
ENGINES = ["native", "client"]
SHAPE = {
    "topic", "group", "threads", "engine", "start_time", "end_time", "data_consumed_mb", "mb_per_sec", "records",
    "records_per_sec", "rebalance_time_ms", "fetch_time_ms", "fetch_mb_per_sec", "fetch_records_per_sec",
    "expected", "complete", "errors", "interrupted", "group_protocol",
}  # fmt: skip


def run_cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, cwd=Path(__file__).parent)


def produce(bootstrap: str, topic: str, n: int, size: int = 100, partitions: int = 3) -> None:
    made = run_cli("perf", "produce", topic, "-n", str(n), "--record-size", str(size), "--partitions",
                   str(partitions), "-b", bootstrap, "--json")  # fmt: skip
    assert made.returncode == 0, made.stderr


@pytest.mark.parametrize("engine", ENGINES)
def test_group_run_reads_every_record(bootstrap: str, unique_name: str, engine: str) -> None:
    produce(bootstrap, unique_name, 30_000, size=200)
    proc = run_cli("perf", "consume", unique_name, "-n", "30000", "--engine", engine, "--timeout", "5",
                   "-b", bootstrap, "--json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout)
    assert set(r) == SHAPE
    assert (r["records"], r["expected"], r["complete"], r["engine"]) == (30_000, 30_000, True, engine)
    assert r["group"].startswith("perf-consumer-") and r["errors"] == {} and r["group_protocol"] == "classic"
    assert r["data_consumed_mb"] == pytest.approx(30_000 * 200 / 2**20, abs=1e-4)  # key-less: value bytes
    assert r["rebalance_time_ms"] > 0 and r["fetch_time_ms"] > 0 and r["fetch_records_per_sec"] > 0
    assert r["records_per_sec"] <= r["fetch_records_per_sec"]


def test_no_group_assigns_every_partition_over_the_threads(bootstrap: str, unique_name: str) -> None:
    produce(bootstrap, unique_name, 20_000)
    proc = run_cli("perf", "consume", unique_name, "-n", "20000", "--no-group", "--threads", "2", "--timeout", "5",
                   "-b", bootstrap, "--json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout)
    assert set(r) == SHAPE
    assert (r["records"], r["complete"], r["group"], r["threads"], r["engine"]) == (20_000, True, None, 2, "native")
    assert r["group_protocol"] is None
    assert r["rebalance_time_ms"] < 1000  # no group join: only the assign call
    human = run_cli("perf", "consume", unique_name, "-n", "20000", "--no-group", "-b", bootstrap)
    assert human.returncode == 0 and "(no group) / 1" in human.stdout


@pytest.mark.parametrize("args", [[], ["--no-group"]])
def test_native_short_of_n_is_incomplete(bootstrap: str, unique_name: str, args: list[str]) -> None:
    produce(bootstrap, unique_name, 700, partitions=2)
    proc = run_cli("perf", "consume", unique_name, "-n", "1000", "--engine", "native", "--timeout", "1",
                   *args, "-b", bootstrap, "--json")  # fmt: skip
    assert proc.returncode == 5, proc.stderr
    r = json.loads(proc.stdout)["result"]
    assert (r["records"], r["expected"], r["complete"]) == (700, 1000, False)
    assert "consumed 700 of 1000 records" in proc.stderr
    # the idle second waiting for the missing records is not fetch time
    assert r["fetch_time_ms"] < 1000


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--no-group", "--group", "g"], "--group and --no-group exclude each other"),
        (["--no-group", "--engine", "client"], "--no-group needs --engine native"),
        (["--engine", "turbo"], "--engine must be one of"),
        (["--consumer-prop", "no.such.property=1"], "no.such.property"),
    ],
)
def test_bad_consume_input_is_one_line(bootstrap: str, unique_name: str, args: list[str], message: str) -> None:
    produce(bootstrap, unique_name, 10, partitions=1)
    proc = run_cli("perf", "consume", unique_name, "-n", "10", *args, "-b", bootstrap)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr


def test_gather_reads_what_ctypes_reads() -> None:
    """read_u64 against ctypes on scattered, unaligned and aligned addresses."""
    import numpy as np

    from clusterctl.kafka.perf_consume_native import read_u64

    rng = np.random.default_rng(7)
    blocks = [ctypes.create_string_buffer(rng.bytes(64), 64) for _ in range(200)]
    base = np.array([ctypes.addressof(b) for b in blocks], dtype=np.uint64)
    for shift in (0, 3):
        addrs = base + np.uint64(shift)
        got = read_u64(addrs, (0, 8, 13))
        for i, b in enumerate(blocks):
            for res, k in zip(got, (0, 8, 13), strict=True):
                want = int.from_bytes(b.raw[shift + k : shift + k + 8], "little")
                assert int(res[i]) == want


def test_e2e_measures_every_record_at_the_rate(bootstrap: str, unique_name: str) -> None:
    produce(bootstrap, unique_name, 500, partitions=2)  # records already there are not part of the run
    proc = run_cli("perf", "e2e", unique_name, "-n", "3000", "--throughput", "2000", "-b", bootstrap, "--json")
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout)
    assert (r["records"], r["received"], r["complete"], r["errors"]) == (3000, 3000, True, {})
    assert 1500 < r["records_per_sec"] < 2200
    assert 0 < r["p50_ms"] <= r["p99_ms"] <= r["p999_ms"] <= r["max_latency_ms"]
    # no record is sent before its slot in the schedule, so from the slot no latency is shorter
    sched = (r["scheduled_p50_ms"], r["scheduled_p99_ms"], r["scheduled_p999_ms"])
    assert all(s >= c for s, c in zip(sched, (r["p50_ms"], r["p99_ms"], r["p999_ms"]), strict=True))
    assert 0 < sched[0] <= sched[1] <= sched[2]
    assert 0 < r["cpu_seconds"] <= 2 * r["elapsed_s"] + 0.5  # this process, its threads over ~2 cores at most
    human = run_cli("perf", "e2e", unique_name, "-n", "200", "-b", bootstrap)
    assert human.returncode == 0 and "99th" in human.stdout and "200 / 200" in human.stdout


def test_e2e_creates_a_missing_topic_and_refuses_tiny_records(bootstrap: str, unique_name: str) -> None:
    bad = run_cli("perf", "e2e", unique_name, "-n", "10", "--record-size", "8", "-b", bootstrap)
    assert bad.returncode == 2 and "--record-size must be at least 16" in bad.stderr
    from clusterctl.kafka import admin

    assert unique_name not in [t.name for t in admin.list_topics(bootstrap)]  # refused before creating
    ok = run_cli("perf", "e2e", unique_name, "-n", "100", "-b", bootstrap, "--json")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["received"] == 100


def test_e2e_one_in_flight_waits_for_each_record(bootstrap: str, unique_name: str) -> None:
    proc = run_cli("perf", "e2e", unique_name, "-n", "3", "--one-in-flight", "-b", bootstrap, "--json")
    assert proc.returncode == 0, proc.stderr
    r = json.loads(proc.stdout)
    assert (r["records"], r["received"], r["complete"]) == (3, 3, True)
    # one record at a time: the send rate cannot exceed one per measured round trip
    assert r["records_per_sec"] <= 1000 / r["p50_ms"] * 1.5
    # no schedule: each record's slot is its send call
    assert (r["scheduled_p50_ms"], r["scheduled_p99_ms"]) == (r["p50_ms"], r["p99_ms"])


def test_e2e_producer_keeps_few_requests_in_flight() -> None:
    from clusterctl.kafka import perf_e2e, perf_native

    conf = perf_e2e.e2e_producer_config("127.0.0.1:9092", "1", {})
    assert conf["max.in.flight.requests.per.connection"] == "5" and conf["linger.ms"] == 0
    perf_native.check_config(conf)  # librdkafka takes it, with idempotence (acks=all) too
    perf_native.check_config(perf_e2e.e2e_producer_config("127.0.0.1:9092", "all", {}))
    mine = perf_e2e.e2e_producer_config("127.0.0.1:9092", "1", {"max.in.flight.requests.per.connection": "100"})
    assert mine["max.in.flight.requests.per.connection"] == "100"  # --producer-prop wins
