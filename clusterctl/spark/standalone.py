"""Running a job's executors on the cluster's Spark standalone workers (spec section `spark`).

The driver stays on this host; only executors run in the spark-worker containers. What makes that work:

- master: the master's published port, spark://<publish host>:<spark.master_port>;
- driver address: executors connect back to the driver, so it binds to and advertises the cluster
  network's gateway address (this host's address on the bridge), never 0.0.0.0;
- Python: the driver's interpreter path means nothing in a worker, so Python workers are started as
  `python3` (this venv's bin directory goes first on the driver's PATH; clusterctl/spark has python3.11);
- Kafka: brokers advertise their host-published address (tansu has no other listener); each worker relays
  that loopback address to the broker over the cluster network, so one bootstrap list serves both sides;
- checkpoints: streaming state is written by executors, offsets by the driver, so checkpoints live in
  spark.shared_dir, mounted at the same path in every worker.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from clusterctl.errors import TimeoutError_, UnreachableError, UsageError
from clusterctl.spec.model import ClusterSpec
from clusterctl.wait import wait_until

CLUSTER_MASTER = "cluster"


@dataclass
class StandaloneSettings:
    """What `spark run` needs to run on the spec's standalone master."""

    master: str
    bootstrap: str
    driver_host: str
    shared_dir: Path
    ui: str | None  # the master's web UI (its /json/ lists alive workers); None for a foreign master
    conf: dict[str, str] = field(default_factory=dict)


def targets_cluster(master: str, spec: ClusterSpec | None) -> bool:
    """True for `cluster`, or a spark:// URL naming the spec's own master (published port or static IP)."""
    if master == CLUSTER_MASTER:
        return True
    if spec is None or not spec.spark.enabled or not master.startswith("spark://"):
        return False
    try:
        parts = urlsplit(master)
        where = (parts.hostname, parts.port)
    except ValueError:
        return False
    from clusterctl.spec.sections import SPARK_MASTER_PORT

    return where in ((spec.topology.host, spec.spark.master_port), (spec.topology.spark_master_ip, SPARK_MASTER_PORT))


def settings(spec: ClusterSpec, master: str = CLUSTER_MASTER, bootstrap: str | None = None) -> StandaloneSettings:
    """Master URL, driver address, bootstrap and Spark conf for the spec's workers (one-line errors)."""
    if not spec.spark.enabled:
        raise UsageError(
            f"--master {master}: cluster {spec.name} has no Spark master (spark.enabled is false in the spec)",
            hint="set spark.enabled: true, then `clusterctl render` and `clusterctl up`; or use --master local[*]",
        )
    url = spec.topology.spark_master_url if master == CLUSTER_MASTER else master
    ui = master_ui(spec) if url == spec.topology.spark_master_url else None
    total_cores = spec.spark.workers * spec.spark.worker_cores
    gateway = spec.network.gateway_ip
    conf = {
        "spark.driver.host": gateway,
        "spark.driver.bindAddress": gateway,
        "spark.executor.memory": spec.spark.worker_memory,
        "spark.cores.max": str(total_cores),
        "spark.sql.shuffle.partitions": str(2 * total_cores),
        # executors (root in the workers) and the driver (any user here) both write checkpoint files
        "spark.hadoop.fs.permissions.umask-mode": "000",
    }
    return StandaloneSettings(
        url, bootstrap or spec.topology.bootstrap_servers, gateway, Path(spec.topology.spark_shared_dir), ui, conf
    )


def check_master(url: str, timeout: float = 3.0) -> None:
    """The master accepts TCP connections (a one-line error before any JVM starts)."""
    parts = urlsplit(url)
    host, port = parts.hostname, parts.port or 7077
    try:
        with socket.create_connection((host or "", port), timeout=timeout):
            return
    except OSError as exc:
        raise UnreachableError(
            f"Spark master {url} does not answer ({exc.strerror or exc})",
            hint="start the cluster with `clusterctl up`; `clusterctl status` shows spark-master",
        ) from None


def master_ui(spec: ClusterSpec) -> str:
    """The spec's master web UI on this host (its /json/ has the workers and applications)."""
    return f"http://{spec.topology.host}:{spec.spark.ui_port}"


def alive_workers(ui: str) -> int:
    """Alive workers per the master's /json/; 0 while it does not answer."""
    try:
        with urllib.request.urlopen(f"{ui}/json/", timeout=3) as resp:
            return int(json.load(resp).get("aliveworkers", 0))
    except (OSError, ValueError):
        return 0


HEARTBEAT_FRESH_S = 25.0  # a worker heartbeats every spark.worker.timeout / 4 (15 s)


def live_worker_hosts(ui: str) -> set[str]:
    """Hosts of the workers the master lists ALIVE with a heartbeat in the last HEARTBEAT_FRESH_S.

    A SIGKILLed worker whose connection close never reached the master stays ALIVE there until
    spark.worker.timeout (60 s, checked every 60 s); its heartbeats stop at once."""
    try:
        with urllib.request.urlopen(f"{ui}/json/", timeout=3) as resp:
            workers = json.load(resp).get("workers", [])
    except (OSError, ValueError):
        return set()
    now_ms = time.time() * 1000
    return {
        str(w["host"])
        for w in workers
        if w.get("state") == "ALIVE" and now_ms - float(w.get("lastheartbeat", 0)) < HEARTBEAT_FRESH_S * 1000
    }


def wait_for_workers(ui: str, timeout: float = 30.0) -> int:
    """Alive workers per the master's /json/ (a just-started worker registers within seconds); 0 is an error."""
    try:
        return wait_until(lambda: alive_workers(ui), timeout=timeout, what="an alive Spark worker", interval=1.0)
    except TimeoutError_:
        raise UnreachableError(
            f"the Spark master has no alive workers after {timeout:.0f}s ({ui})",
            hint="`clusterctl status` and `clusterctl logs spark-worker1` show why",
        ) from None


def check_checkpoint(checkpoint: Path | None, shared_dir: Path) -> None:
    """A checkpoint must be where the executors write state too: under spark.shared_dir."""
    if checkpoint is None:
        return
    resolved = checkpoint.resolve()
    if not resolved.is_relative_to(shared_dir.resolve()):
        raise UsageError(
            f"--checkpoint {checkpoint} is not under spark.shared_dir {shared_dir}: executors in the workers "
            "could not see it",
            hint=f"use --checkpoint {shared_dir}/<name>",
        )


def python_for_workers() -> None:
    """Python workers run as `python3`: this venv's on the driver side, the image's in the workers."""
    bindir = str(Path(sys.executable).parent)
    os.environ["PYSPARK_PYTHON"] = "python3"
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    path = os.environ.get("PATH", "")
    if path.split(os.pathsep)[0] != bindir:
        os.environ["PATH"] = os.pathsep.join([bindir, path]) if path else bindir
