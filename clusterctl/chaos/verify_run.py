"""The `verify` step of a drill run, and the feature levels a scenario runs under (KIP-966's ELR among them).

`verify` reads back the ledger's acknowledged writes; its line says which election rule kept them (an ELR member,
the last known leader) or which election lost them (an unclean one), from the observer's timeline so far
(election_rules.py). `features` (scenario.py, elr_steps.py) are finalized before the first step, as
`kafka-features.sh upgrade|downgrade` would, and the levels found before are finalized again after the run.
"""

from __future__ import annotations

from typing import Any

from clusterctl.chaos.elr_steps import ELR_FEATURE
from clusterctl.chaos.scenario import Verify
from clusterctl.errors import ClusterctlError, UsageError, VerificationError
from clusterctl.spec.model import ClusterSpec


class VerifySteps:
    """The verify step and the run's feature levels; the Runner supplies the state declared here."""

    spec: ClusterSpec
    sc: Any
    bootstrap: str
    load: Any
    load_summary: Any
    verify_result: Any
    observer: Any
    progress: Any
    features_before: dict[str, int | None]
    elr_level: int | None = None  # the finalized eligible.leader.replicas.version during the run (None: not KRaft)

    # -- feature levels
    def _addresses(self) -> list[tuple[str, int]]:
        t = self.spec.topology
        return [(t.broker_host(b), t.broker_host_port(b)) for b in t.broker_ids]

    def _set_features(self) -> None:
        """Finalize the scenario's feature levels (the ones found are restored after the run), then read the ELR
        level the run has, for the report (the settings line) and the election rules."""
        from clusterctl.kafka import features

        for name, level in self.sc.features.items():
            before = features.set_feature_level(self._addresses(), name, level)
            self.features_before[name] = before
            if (before or 0) != level:
                self.progress(f"{name}: {before or 0} -> {level} for this run")
                self.observer.event("feature", "feature", name, f"{name} {before or 0} -> {level} for this run", level)
        if self.spec.kraft_mode:
            try:
                level = features.describe_features(self._addresses()).finalized.get(ELR_FEATURE, 0)
            except ClusterctlError:
                return
            if level or ELR_FEATURE in self.sc.features or self._knows_elr():
                self.elr_level = level

    def _knows_elr(self) -> bool:
        """Whether the brokers' Kafka has KIP-966 (4.0+), by their image's tag (unknown: no)."""
        from clusterctl.spec.capabilities import NO, supports
        from clusterctl.spec.profiles import kafka_version_of

        try:
            version = kafka_version_of(self.spec.broker_image)
        except ClusterctlError:
            return False
        return version is not None and supports(version, "elr") != NO

    def _restore_features(self) -> str | None:
        """Finalize again the levels the scenario changed; what failed, or None."""
        from clusterctl.kafka import features

        problems = []
        for name, before in self.features_before.items():
            try:
                features.set_feature_level(self._addresses(), name, before or 0)
            except ClusterctlError as exc:
                problems.append(f"{name} not restored to {before or 0}: {exc}")
        self.features_before = {}
        return "; ".join(problems) or None

    def _feature_bounds(self) -> dict[str, str]:
        return {} if self.elr_level is None else {ELR_FEATURE: str(self.elr_level)}

    # -- verify
    def _election_rules(self, timeline: Any, faults: list[Any]) -> tuple[list[Any], str | None]:
        """The run's elections with their rules (naming on the fault rows what bounded a time), and its safety line."""
        from clusterctl.chaos.election_rules import elections, mark_failovers, safety

        elected = elections(timeline, self.sc.topic.min_insync_replicas)
        mark_failovers(faults, elected)
        return elected, safety(elected, self.verify_result, self.sc.expect)

    def _safety(self) -> str | None:
        from clusterctl.chaos.election_rules import elections, safety

        tl = self.observer.timeline if self.observer is not None else None
        return safety(elections(tl, self.sc.topic.min_insync_replicas), self.verify_result, self.sc.expect)

    def _verdict_ok(self, v: Any) -> bool:
        """no-loss: nothing acknowledged lost or reordered; loss (a negative control): something was lost."""
        return v.lost_count > 0 if self.sc.expect == "loss" else bool(v.ok)

    def _step_verify(self, v: Verify) -> str:
        from clusterctl.chaos.load import verify_drill

        if self.load is None:
            raise UsageError("verify: no load ran in this scenario (add start_load/stop_load)")
        if self.load_summary is None:
            self.load_summary = self.load.stop()
        self.verify_result = verify_drill(self.bootstrap, self.load.ledger_path, v.timeout)
        summary = self.verify_result.summary()
        rule = self._safety()
        if rule and self.observer is not None:  # the console's drill page lists it with the run's events
            self.observer.event("verify", "safety", "acknowledged writes", rule)
        if self.sc.expect == "loss":
            if self.verify_result.lost_count == 0:
                raise VerificationError(
                    f"negative control: this scenario must lose acknowledged writes, but the verifier found none "
                    f"({summary})"
                )
            allowed = "; ".join(self.sc.loss_settings()) or "no setting of the scenario"
            return f"{summary}: loss expected and found, allowed by {allowed}" + (f"; {rule}" if rule else "")
        if not self.verify_result.ok:
            raise VerificationError(f"drill verification failed: {summary}")
        return summary + self._verify_bounds(v) + (f"; {rule}" if rule else "")

    def _verify_bounds(self, v: Verify) -> str:
        """The scenario's own expectations past no loss: at most N duplicated, no partition waiting too long."""
        from clusterctl.chaos.ledger import read_ledger

        dup = self.verify_result.duplicated_count
        if v.max_duplicated is not None and dup > v.max_duplicated:
            raise VerificationError(f"{dup} acknowledged records read back more than once (at most {v.max_duplicated})")
        if v.max_write_gap is None:
            return ""
        gap = read_ledger(self.load.ledger_path).longest_ack_gap()
        if gap is None:
            raise VerificationError("no partition had two acknowledged writes: the write gap is not known")
        topic, partition, seconds = gap
        if seconds > v.max_write_gap:
            raise VerificationError(
                f"{topic}-{partition} waited {seconds:.1f}s for an acknowledged write (at most {v.max_write_gap:g}s)"
            )
        return f"; longest write gap {seconds:.1f}s ({topic}-{partition}, at most {v.max_write_gap:g}s)"
