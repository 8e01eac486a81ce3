"""A local Spark driver's start with and without its class archive (`clusterctl spark prepare`), side by side.

Each start is a fresh process: clusterctl's SparkSession (local[2]) and one small aggregation, timed to the
session and to the job's result, with the driver JVM's own CPU time read from /proc before it stops. The
baseline is the same start with an empty cache directory (no archive). Rounds alternate the two, so a shared
machine's load falls on both; medians and their ratios are printed.

    .venv/bin/python bench/spark_driver_start.py [ROUNDS]     # default 5 rounds, ~3 min
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile

CHILD = r"""
import json, os, time
t0 = time.monotonic()
from clusterctl.spark import session
spark = session.get_session("local[2]", "bench-driver-start")
t1 = time.monotonic()
spark.range(1000).selectExpr("id % 7 AS k").groupBy("k").count().collect()
t2 = time.monotonic()
stat = open(f"/proc/{spark._jvm.ProcessHandle.current().pid()}/stat").read().rsplit(")", 1)[1].split()
cpu = (int(stat[11]) + int(stat[12])) / os.sysconf("SC_CLK_TCK")
spark.stop()
print(json.dumps({"session_s": t1 - t0, "first_job_s": t2 - t0, "jvm_cpu_s": cpu}))
"""


def start(cache: str | None) -> dict[str, float]:
    env = dict(os.environ)
    if cache is not None:
        env["XDG_CACHE_HOME"] = cache
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, check=True).stdout
    return dict(json.loads(out.strip().splitlines()[-1]))


def main() -> None:
    from clusterctl.spark import classarchive, session

    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    path, recorded = classarchive.prepare(session.DRIVER_JVM_OPTS, lambda line: print(line, file=sys.stderr))
    print(f"archive {path} ({'recorded now' if recorded else 'already recorded'})")
    runs: dict[str, list[dict[str, float]]] = {"archive": [], "none": []}
    with tempfile.TemporaryDirectory(prefix="bench-spark-nocache-") as empty:
        for i in range(rounds):
            for name, cache in (("none", empty), ("archive", None)) if i % 2 else (("archive", None), ("none", empty)):
                runs[name].append(start(cache))
                print(f"round {i + 1} {name:8} {runs[name][-1]}", file=sys.stderr)
    print(f"{'median of ' + str(rounds):14} {'session (s)':>12} {'first job (s)':>14} {'JVM CPU (s)':>12}")
    med = {n: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for n, rs in runs.items()}
    for name in ("none", "archive"):
        m = med[name]
        print(f"{name:14} {m['session_s']:12.1f} {m['first_job_s']:14.1f} {m['jvm_cpu_s']:12.1f}")
    ratio = {k: med["archive"][k] / med["none"][k] for k in med["none"]}
    print(f"{'ratio':14} {ratio['session_s']:12.2f} {ratio['first_job_s']:14.2f} {ratio['jvm_cpu_s']:12.2f}")


if __name__ == "__main__":
    main()
