"""`Drill`: the acks=all ledger load of `scenario run` around a user's block, then the same verification.

chaos/load.py produces and keeps the ledger, chaos/load.verify_drill consumes the topic and checks
acked ⊆ consumed and per-partition order (chaos/ledger.verify); this only starts, stops and reports.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from clusterctl.errors import ClusterctlError, VerificationError
from clusterctl.wait import wait_until

if TYPE_CHECKING:
    from clusterctl.chaos.ledger import VerifyResult
    from clusterctl.chaos.load import DrillLoad, LoadSummary


class DrillTarget(Protocol):
    """What a drill needs of a cluster (KafkaCluster is one): where to produce, and how to heal it after."""

    @property
    def bootstrap_servers(self) -> str: ...

    def heal(self, wait: bool = True, timeout: float | None = None) -> object: ...


class Drill:
    """A background acks=all, idempotent producer on `topic` with a ledger of every acknowledged write."""

    def __init__(
        self,
        cluster: DrillTarget,
        topic: str,
        rate: float = 200.0,
        heal: bool = True,
        verify_timeout: float = 120.0,
    ) -> None:
        self.cluster = cluster
        self.topic = topic
        self.rate = rate
        self.heal = heal
        self.verify_timeout = verify_timeout
        self._dir = Path(tempfile.mkdtemp(prefix="clusterctl-drill-"))
        self.ledger_path = self._dir / "ledger.jsonl"
        self._load: DrillLoad | None = None
        self.load_summary: LoadSummary | None = None  # once stopped
        self.result: VerifyResult | None = None  # once verified

    def start(self) -> Drill:
        from clusterctl.chaos.load import DrillLoad

        self._load = DrillLoad(self.cluster.bootstrap_servers, self.topic, self.ledger_path, rate=self.rate).start()
        return self

    @property
    def running(self) -> bool:
        return self._load is not None and self.load_summary is None

    @property
    def acked(self) -> int:
        return 0 if self._load is None else self._load.stats()[1]

    @property
    def failed(self) -> int:
        return 0 if self._load is None else self._load.stats()[2]

    def wait_acked(self, count: int, timeout: float = 60.0) -> int:
        """Block until at least `count` writes were acknowledged in total; return the number acked."""

        def acked() -> int:
            if self._load is not None and self._load.fatal:
                raise ClusterctlError(f"drill producer failed: {self._load.fatal}")
            return self.acked

        return wait_until(
            acked,
            timeout=timeout,
            what=f"{count} acknowledged writes on drill topic {self.topic}",
            interval=0.05,
            done=lambda n: n >= count,
            seen=lambda n: f"{n} acknowledged ({self.failed} failed)",
        )

    def _stop_load(self) -> None:
        if self.running and self._load is not None:
            self.load_summary = self._load.stop()

    def abort(self) -> None:
        """Stop the load without verifying (the block failed); heal so the cluster stays usable."""
        try:
            self._stop_load()
            if self.heal:
                self.cluster.heal(wait=True)
        finally:
            shutil.rmtree(self._dir, ignore_errors=True)

    def finish(self) -> VerifyResult:
        """Stop the load, heal, verify; VerificationError unless every acknowledged write is there in order."""
        try:
            self._stop_load()
            if self.heal:
                self.cluster.heal(wait=True)
            from clusterctl.chaos.load import verify_drill

            self.result = result = verify_drill(self.cluster.bootstrap_servers, self.ledger_path, self.verify_timeout)
        finally:
            shutil.rmtree(self._dir, ignore_errors=True)
        s = self.load_summary
        if result.acked == 0:
            errors = f" (errors: {s.errors})" if s is not None and s.errors else ""
            raise VerificationError(f"drill on {self.topic}: no write was acknowledged, nothing to verify{errors}")
        fatal = self._load.fatal if self._load is not None else None
        try:
            result.raise_on_failure()
        except VerificationError as exc:
            if fatal:
                exc.message += f"; the producer stopped on {fatal}"
            raise
        return result

    def __enter__(self) -> Drill:
        return self if self._load is not None else self.start()

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        if exc_type is not None:
            self.abort()
        else:
            self.finish()
