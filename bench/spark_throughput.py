#!/usr/bin/env python3
"""Benchmark: Spark's Kafka connectors (Spark's own `kafka`, clusterctl's `clusterctl-kafka`) against `clusterctl
perf consume`, on the same topics, in one run.

For each `--rows` size, fills a 3-partition topic with that many text lines (5 words each), then, alternately for
`--runs` rounds, for each `--connector`:

- **source**: a streaming query over the whole topic (Trigger.AvailableNow, no maxOffsetsPerTrigger) into
  Spark's `noop` sink;
- **word_count**: `spark_jobs/word_count.py` through the runner (`spark run word_count --available-now`), its
  output to a second topic;

and **perf consume**: `clusterctl perf consume TOPIC -n ROWS --no-group --json` (a fresh process): its records/s
overall and while fetching, the ceiling.

Two rates for each Spark query: **busy**, rows over query start to the end of its last micro-batch (what
`spark run` reports: it includes Spark starting the query's Python source process, ~1-1.5 s here), and
**processing**, rows over the micro-batches' own durations (Spark's processedRowsPerSecond: planning offsets,
reading, processing and committing each batch). Medians and the ratios to perf consume (overall, fetch) are
printed with the load average. One SparkSession (local mode, `--master`) serves every Spark run, after a
warm-up query on a small topic (JVM and Python workers started); a cold `spark run` pays ~10-30 s more for
those. The broker is tansu on loopback unless `--bootstrap` names one (e.g. a real Kafka from `clusterctl up`).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("COLUMNS", "150")

from confluent_kafka import Producer  # noqa: E402

from clusterctl.kafka import admin  # noqa: E402
from clusterctl.kafka.connection import producer_config  # noqa: E402
from clusterctl.output import Column, emit, info  # noqa: E402
from clusterctl.testing.tansu import start_tansu  # noqa: E402

ROWS = 200_000
PARTITIONS = 3
CONNECTORS = ("kafka", "clusterctl")
WORDS = [f"w{i}" for i in range(1000)]


@dataclass
class Row:
    what: str
    rates: list[float] = field(default_factory=list)  # busy (Spark) / overall (perf consume)
    processing: list[float] = field(default_factory=list)  # per-batch processing (Spark) / fetch (perf consume)
    median_rps: float = 0.0
    median_processing_rps: float = 0.0
    ratio_vs_perf_consume: float | None = None
    processing_ratio_vs_perf_consume: float | None = None


def clusterctl_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("clusterctl")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "clusterctl"]


def fill(bootstrap: str, topic: str, rows: int) -> None:
    """`rows` lines of 5 words, round-robin over the partitions."""
    admin.create_topic(bootstrap, topic, PARTITIONS, 1)
    conf = {**producer_config(bootstrap), "linger.ms": 20, "queue.buffering.max.messages": 1_000_000}
    p = Producer(conf)
    n = len(WORDS)
    for i in range(rows):
        line = " ".join(WORDS[(i * k + k) % n] for k in (1, 3, 7, 11, 13))
        p.produce(topic, value=line.encode(), partition=i % PARTITIONS)
        if i % 10_000 == 0:
            p.poll(0)
    if p.flush(120) != 0:
        raise SystemExit(f"filling {topic}: not every record was acknowledged")


def source_alone(spark: Any, bootstrap: str, topic: str, expect: int, connector: str) -> tuple[float, float]:
    """(busy, processing) rows/s of a noop-sink streaming query over the whole topic."""
    from clusterctl.spark.options import FORMAT
    from clusterctl.spark.progress import BatchProgress, parse_ts

    df = spark.readStream.format(FORMAT if connector == "clusterctl" else "kafka")
    df = df.option("kafka.bootstrap.servers", bootstrap).option("subscribe", topic)
    df = df.option("startingOffsets", "earliest").load()
    with tempfile.TemporaryDirectory(prefix="bench-spark-") as cp:
        start = time.time()
        q = df.writeStream.format("noop").option("checkpointLocation", cp).trigger(availableNow=True).start()
        q.awaitTermination(600)
        if q.exception() is not None:
            raise SystemExit(f"source query failed: {q.exception()}")
        batches = [BatchProgress.of(p) for p in q.recentProgress]
    batches = [b for b in batches if b.input_rows]
    rows = sum(b.input_rows for b in batches)
    if rows != expect:
        raise SystemExit(f"source query read {rows} rows, expected {expect}")
    end = parse_ts(batches[-1].started) + batches[-1].duration_ms / 1000
    return rows / (end - start), rows * 1000 / sum(b.duration_ms for b in batches)


def word_count(spark: Any, bootstrap: str, topic: str, rows: int, connector: str) -> tuple[float, float]:
    """(busy, processing) rows/s of `spark run word_count --available-now`."""
    from clusterctl.spark.runner import run_job

    out = f"{topic}-counts-{uuid.uuid4().hex[:6]}"
    admin.create_topic(bootstrap, out, PARTITIONS, 1)
    opts = {"input": topic, "output": out}
    try:
        r = run_job("word_count", bootstrap, spark=spark, connector=connector, available_now=True, options=opts)
    finally:
        admin.delete_topic(bootstrap, out)
    if r.input_rows != rows or not r.records_per_s:
        raise SystemExit(f"word_count read {r.input_rows} rows, expected {rows}")
    busy_ms = sum(b.duration_ms for b in r.progress if b.input_rows)
    return float(r.records_per_s), r.input_rows * 1000 / busy_ms


def perf_consume(bootstrap: str, topic: str, rows: int) -> tuple[float, float]:
    cmd = [*clusterctl_cmd(), "perf", "consume", topic, "-n", str(rows), "--no-group", "-b", bootstrap, "--json"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"clusterctl perf consume failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    r = json.loads(proc.stdout)
    return float(r["records_per_sec"]), float(r["fetch_records_per_sec"])


def _sizes(text: str) -> list[int]:
    try:
        sizes = [int(x.replace("_", "")) for x in text.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"--rows: comma-separated counts, got {text!r}") from None
    if not sizes or any(not 1_000 <= n <= 20_000_000 for n in sizes):
        raise SystemExit("--rows: each count from 1,000 to 20,000,000")
    return sizes


def _connectors(text: str) -> list[str]:
    names = [x.strip() for x in text.split(",") if x.strip()]
    if not names or any(n not in CONNECTORS for n in names):
        raise SystemExit(f"--connector: a comma-separated list of {', '.join(CONNECTORS)}, got {text!r}")
    return names


def measure(spark: Any, bootstrap: str, topic: str, rows: int, connectors: list[str], runs: int) -> list[Row]:
    """`runs` alternating rounds of every measurement on `topic` (filled with `rows` lines)."""
    order: list[tuple[str, str | None]] = [("source (noop sink)", c) for c in connectors]
    order += [("word_count", c) for c in connectors] + [("perf consume --no-group", None)]
    table = {(what, c): Row(f"{what}, {c} connector" if c else what) for what, c in order}
    for i in range(runs):
        for what, c in order if i % 2 == 0 else order[::-1]:
            if c is None:
                rate, proc = perf_consume(bootstrap, topic, rows)
            elif what.startswith("source"):
                rate, proc = source_alone(spark, bootstrap, topic, rows, c)
            else:
                rate, proc = word_count(spark, bootstrap, topic, rows, c)
            row = table[(what, c)]
            row.rates.append(round(rate))
            row.processing.append(round(proc))
            load = os.getloadavg()[0]
            info(f"{rows:,} rows, run {i + 1} {row.what}: {rate:,.0f} rows/s, {proc:,.0f} processing (load {load:.1f})")
    pc = table[("perf consume --no-group", None)]
    for row in table.values():
        row.median_rps = round(statistics.median(row.rates))
        row.median_processing_rps = round(statistics.median(row.processing))
    for row in table.values():
        if row is not pc:
            row.ratio_vs_perf_consume = round(row.median_rps / pc.median_rps, 2)
            row.processing_ratio_vs_perf_consume = round(row.median_processing_rps / pc.median_processing_rps, 2)
    return list(table.values())


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="rounds of the measurements (default 3)")
    ap.add_argument("--rows", default=str(ROWS), help=f"topic sizes, comma-separated (default {ROWS})")
    ap.add_argument("--connector", default=",".join(CONNECTORS), help="kafka, clusterctl or both (the default)")
    ap.add_argument("--bootstrap", help="a running cluster (default: tansu on loopback, started here)")
    ap.add_argument("--master", default="local[*]", help="Spark master (default local[*])")
    ap.add_argument("--json", action="store_true", help="print the result as JSON")
    args = ap.parse_args()
    sizes, connectors = _sizes(args.rows), _connectors(args.connector)

    from clusterctl.spark.packages import connector_conf
    from clusterctl.spark.session import get_session

    broker = None if args.bootstrap else start_tansu()
    bootstrap = args.bootstrap or broker.bootstrap  # type: ignore[union-attr]
    base = f"bench-spark-{uuid.uuid4().hex[:6]}"
    topics = {n: f"{base}-{n}" for n in sizes}
    warm = f"{base}-warmup"
    spark = None
    results: dict[int, list[Row]] = {}
    try:
        for n, t in topics.items():
            fill(bootstrap, t, n)
        fill(bootstrap, warm, 3_000)
        conf = connector_conf() if "kafka" in connectors else None
        spark = get_session(args.master, app_name="bench-spark-throughput", conf=conf)
        for c in connectors:  # the first query also starts Python workers and loads the connector's classes
            source_alone(spark, bootstrap, warm, 3_000, c)
        for n, t in topics.items():
            results[n] = measure(spark, bootstrap, t, n, connectors, args.runs)
    finally:
        if spark is not None:
            spark.stop()
        for t in (*topics.values(), warm):
            try:
                admin.delete_topic(bootstrap, t)
            except Exception as exc:  # the broker may be gone; the numbers are what matters
                info(f"could not delete {t}: {exc}")
        if broker is not None:
            broker.stop()
    load = os.getloadavg()
    if args.json:
        out = {str(n): [vars(r) for r in rows] for n, rows in results.items()}
        print(json.dumps({"load_average": [round(x, 2) for x in load], "results": out}))
        return 0
    for n, rows in results.items():
        emit(
            rows,
            as_json=False,
            title=f"{n:,} rows, {PARTITIONS} partitions, Spark {args.master}, broker {bootstrap}",
            columns=[
                Column("What", "what"),
                Column("busy rows/s (perf: overall)", "median_rps"),
                Column("runs", lambda r: ", ".join(f"{x:,.0f}" for x in r.rates)),
                Column("ratio", "ratio_vs_perf_consume"),
                Column("processing rows/s (perf: fetch)", "median_processing_rps"),
                Column("runs", lambda r: ", ".join(f"{x:,.0f}" for x in r.processing)),
                Column("ratio", "processing_ratio_vs_perf_consume"),
            ],
        )
    info(f"load average (1/5/15 min) at the end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} CPUs")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
