#!/usr/bin/env python3
"""Benchmark: `clusterctl perf produce` against kcat (C, librdkafka) on the same broker, in one run.

Starts tansu on loopback, then for each record size runs kcat and clusterctl alternately (>= 3 runs each),
with identical librdkafka settings (acks=1, linger.ms=5, the same batch.size, no compression), and prints
records/s, MB/s, medians and the ratio clusterctl/kcat. Then one throttled clusterctl run for its p99.

How each side is timed (see bench/README.md):
- clusterctl: the real CLI (`--json`); its own clock, first produce() to last acknowledgement.
- kcat: the process wall clock minus its fixed cost (start-up, connect, metadata), measured as the
  fastest of three 1-record runs. kcat prints no throughput of its own.
Both are also shown as raw process wall-clock rates, where clusterctl pays ~1 s of Python start-up.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
os.environ.setdefault("COLUMNS", "170")  # the results table is wide; rich reads COLUMNS when not on a terminal

from clusterctl.kafka import admin, perf_native, perf_produce  # noqa: E402
from clusterctl.output import Column, emit, info  # noqa: E402
from clusterctl.testing.tansu import start_tansu  # noqa: E402

MB = 1024 * 1024
LINGER_MS = 5
BATCH_SIZE = 1_000_000  # librdkafka's default batch.size, set explicitly on both sides
CASES = [(100, 1_000_000), (1024, 300_000)]


@dataclass
class Row:
    record_size: int
    records: int
    tool: str
    rates: list[float] = field(default_factory=list)  # records/s, as measured (see module docstring)
    wall_rates: list[float] = field(default_factory=list)  # records/s over the whole process
    median_rps: float = 0.0
    median_mbps: float = 0.0
    median_wall_rps: float = 0.0
    ratio_vs_kcat: float | None = None
    wall_ratio_vs_kcat: float | None = None


def clusterctl_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("clusterctl")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "clusterctl"]


def kcat_env(system_librdkafka: bool, shim: Path) -> dict[str, str]:
    """kcat on the wheel's librdkafka unless asked otherwise (Debian's 2.0.2 cannot parse tansu's ApiVersions)."""
    env = dict(os.environ)
    if system_librdkafka:
        return env
    lib = perf_native._library_path()
    if lib is None:
        raise SystemExit("confluent-kafka wheel ships no librdkafka; rerun with --system-librdkafka")
    (shim / "librdkafka.so.1").symlink_to(lib)
    env["LD_LIBRARY_PATH"] = f"{shim}:{env.get('LD_LIBRARY_PATH', '')}".rstrip(":")
    return env


def shared_settings(bootstrap: str) -> dict[str, str]:
    """The librdkafka settings clusterctl's engine uses, to hand to kcat verbatim."""
    conf = perf_produce.perf_producer_config(bootstrap, "1", "none", BATCH_SIZE, LINGER_MS, {})
    conf.pop("logger", None)
    return {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in conf.items()}


def payload_file(directory: Path, size: int, records: int) -> Path:
    path = directory / f"payload-{size}x{records}.txt"
    if not path.exists():
        line = perf_produce.build_payloads(size)[0] + b"\n"
        with path.open("wb") as fh:
            block = line * 10_000
            for _ in range(records // 10_000):
                fh.write(block)
            fh.write(line * (records % 10_000))
    return path


def run_kcat(kcat: str, env: dict[str, str], settings: dict[str, str], topic: str, path: Path) -> float:
    args = [kcat, "-P", "-b", settings["bootstrap.servers"], "-t", topic, "-l"]
    for k, v in settings.items():
        if k != "bootstrap.servers":
            args += ["-X", f"{k}={v}"]
    t0 = time.monotonic()
    proc = subprocess.run([*args, str(path)], env=env, capture_output=True, text=True, timeout=600)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"kcat failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    return wall


def run_clusterctl(
    bootstrap: str, topic: str, size: int, records: int, engine: str, extra: list[str], batch_size: int = BATCH_SIZE
) -> tuple[dict, float]:
    cmd = [*clusterctl_cmd(), "perf", "produce", topic, "-n", str(records), "--record-size", str(size),
           "--acks", "1", "--linger-ms", str(LINGER_MS), "--batch-size", str(batch_size), "--engine", engine,
           "--reporting-interval", "3600", "-b", bootstrap, "--json", *extra]  # fmt: skip
    t0 = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"clusterctl perf produce failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    return json.loads(proc.stdout), wall


def new_topic(bootstrap: str, name: str) -> str:
    admin.create_topic(bootstrap, name, 1, 1)
    return name


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else 0.0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="runs per tool and size (>= 3)")
    ap.add_argument("--engines", default="native,client", help="clusterctl engines to measure (comma-separated)")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply the record counts (1M x 100 B, 300k x 1 KiB)")
    ap.add_argument("--throttle", type=int, default=20_000, help="records/s of the throttled p99 run")
    ap.add_argument("--kcat", default=shutil.which("kcat") or "/usr/bin/kcat")
    ap.add_argument("--system-librdkafka", action="store_true", help="run kcat on its own librdkafka")
    ap.add_argument("--json", action="store_true", help="print the results as JSON")
    args = ap.parse_args()
    if args.runs < 3:
        ap.error("--runs must be at least 3")
    if not Path(args.kcat).exists():
        print(f"kcat not found at {args.kcat} (apt-get install kcat)", file=sys.stderr)
        return 2
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    scratch = Path(tempfile.mkdtemp(prefix="bench-payload-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    env = kcat_env(args.system_librdkafka, scratch)
    broker = start_tansu()
    rows: list[Row] = []
    throttled: dict = {}
    began = time.monotonic()
    try:
        bootstrap = broker.bootstrap
        settings = shared_settings(bootstrap)
        warm = new_topic(bootstrap, "bench-warmup")
        tiny = payload_file(scratch, 100, 1)
        fixed = min(run_kcat(args.kcat, env, settings, warm, tiny) for _ in range(3))
        run_clusterctl(bootstrap, warm, 100, 10_000, "auto", [])  # warm the page cache for the CLI's imports
        admin.delete_topic(bootstrap, warm)
        info(f"tansu at {bootstrap}; kcat fixed cost {fixed * 1000:.0f} ms (fastest 1-record run)")
        seq = 0
        for size, base_records in CASES:
            records = max(10_000, int(base_records * args.scale))
            path = payload_file(scratch, size, records)
            kc = Row(size, records, "kcat")
            cc = {e: Row(size, records, f"clusterctl ({e})") for e in engines}
            for i in range(args.runs):
                order = ["kcat", *engines] if i % 2 == 0 else [*engines, "kcat"]
                for tool in order:
                    seq += 1
                    topic = new_topic(bootstrap, f"bench-{size}-{seq}")
                    if tool == "kcat":
                        wall = run_kcat(args.kcat, env, settings, topic, path)
                        kc.rates.append(records / max(wall - fixed, 1e-6))
                        kc.wall_rates.append(records / wall)
                        info(f"{size} B run {i + 1}: kcat {records / max(wall - fixed, 1e-6):,.0f} records/s")
                    else:
                        res, wall = run_clusterctl(bootstrap, topic, size, records, tool, [])
                        if res["failed"] or res["delivered"] != records:
                            raise SystemExit(f"clusterctl run lost records: {res['failed']} failed")
                        cc[tool].rates.append(res["records_per_sec"])
                        cc[tool].wall_rates.append(records / wall)
                        info(f"{size} B run {i + 1}: clusterctl {tool} {res['records_per_sec']:,.0f} records/s")
                    admin.delete_topic(bootstrap, topic)
            for row in (kc, *cc.values()):
                row.median_rps = round(median(row.rates), 1)
                row.median_mbps = round(row.median_rps * size / MB, 2)
                row.median_wall_rps = round(median(row.wall_rates), 1)
                if row is not kc:
                    row.ratio_vs_kcat = round(row.median_rps / kc.median_rps, 3)
                    row.wall_ratio_vs_kcat = round(row.median_wall_rps / kc.median_wall_rps, 3)
                rows.append(row)
        topic = new_topic(bootstrap, "bench-throttled")
        n = args.throttle * 5
        res, _ = run_clusterctl(bootstrap, topic, 100, n, "auto", ["--throughput", str(args.throttle)])
        throttled = {k: res[k] for k in ("records", "target_throughput", "records_per_sec", "p50_ms", "p95_ms",
                                         "p99_ms", "p999_ms", "max_latency_ms", "engine")}  # fmt: skip
        admin.delete_topic(bootstrap, topic)
    finally:
        broker.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    elapsed = time.monotonic() - began
    data = {
        "broker": "tansu (loopback, in-memory)",
        "settings": {"acks": "1", "linger.ms": LINGER_MS, "batch.size": BATCH_SIZE, "compression": "none"},
        "kcat_librdkafka": "system" if args.system_librdkafka else "confluent-kafka wheel's",
        "kcat_fixed_cost_ms": round(fixed * 1000, 1),
        "runs": args.runs,
        "rows": rows,
        "throttled": throttled,
        "elapsed_s": round(elapsed, 1),
    }
    fmt_rates = lambda v: ", ".join(f"{x / 1000:,.0f}k" for x in v)  # noqa: E731
    emit(
        data,
        as_json=args.json,
        rows=rows,
        title=f"perf produce vs kcat, acks=1, medians of {args.runs} runs (tansu, loopback)",
        columns=[
            Column("Size", "record_size", justify="right", fmt=lambda v: f"{v} B"),
            Column("Records", "records", justify="right"),
            Column("Tool", "tool"),
            Column("Runs (records/s)", "rates", fmt=fmt_rates),
            Column("Median records/s", "median_rps", justify="right", fmt=lambda v: f"{v:,.0f}"),
            Column("Median MB/s", "median_mbps", justify="right"),
            Column("Ratio vs kcat", "ratio_vs_kcat", justify="right", fmt=lambda v: "-" if v is None else f"{v:.2f}"),
            Column("Process wall records/s", "median_wall_rps", justify="right", fmt=lambda v: f"{v:,.0f}"),
            Column("Wall ratio", "wall_ratio_vs_kcat", justify="right", fmt=lambda v: "-" if v is None else f"{v:.2f}"),
        ],
    )
    if not args.json:
        t = throttled
        print(
            f"throttled ({t['engine']} engine, 100 B, target {t['target_throughput']:g}/s, {t['records']} records): "
            f"{t['records_per_sec']:,.1f} records/s, p50 {t['p50_ms']} ms, p95 {t['p95_ms']} ms, "
            f"p99 {t['p99_ms']} ms, p99.9 {t['p999_ms']} ms, max {t['max_latency_ms']} ms"
        )
        print(f"kcat fixed cost subtracted: {data['kcat_fixed_cost_ms']} ms; whole bench {elapsed:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
