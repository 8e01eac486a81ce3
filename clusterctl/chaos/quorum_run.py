"""The steps of a dynamic-quorum drill (quorum_steps.py's models), a part of the Runner (runner.py).

The wipe-controller fault records which controller lost its disk and the directory id the quorum knew it by;
`quorum` steps default to that controller and `remove-controller` to that directory. Each voter change goes on the
timeline (a heal marker) and into the result; the metadata probe's summary too, with the setting that bounds its
longest gap.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clusterctl.chaos.fault_steps import FaultSteps
from clusterctl.chaos.metadata_probe import MetadataProbe as Probe
from clusterctl.chaos.metadata_probe import MetadataWrites
from clusterctl.chaos.quorum_steps import MetadataProbe, QuorumChange
from clusterctl.chaos.results import StepFailed
from clusterctl.chaos.scenario import Fault
from clusterctl.errors import ClusterctlError, UsageError


class QuorumSteps(FaultSteps):
    """The `quorum` and `metadata_probe` steps and the wipe-controller fault; the Runner supplies the state."""

    work_dir: Path
    probe: Probe | None
    metadata_writes: MetadataWrites | None
    quorum_changes: list[Any]
    leader_wiped: bool

    def _step_fault(self, f: Fault) -> str:
        if f.action != "wipe-controller":
            return super()._step_fault(f)
        from clusterctl.chaos import faults
        from clusterctl.chaos.controllers import wipe_controller

        self.cond.snapshot_leaders()
        node = f.controller
        if node is None:
            leader = faults.active_controller(self.spec)
            others = [c for c in self.spec.topology.controller_ids if c != leader]
            node = leader if f.node != "follower" or not others else others[-1]
        self.leader_wiped = self.leader_wiped or node == self.cond.controller_at_fault
        r, directory = wipe_controller(self.spec, node)
        self.cond.wiped.append((node, directory))
        self._mark(r, heal=False)
        return f"{r.action} {r.target} ({r.container}): {r.note}"

    def _step_quorum(self, q: QuorumChange) -> str:
        from clusterctl.chaos.controllers import provision_controller
        from clusterctl.runtime import voters

        node = self.cond.controller(q.controller, f"quorum {q.action}")
        if q.action == "provision-controller":
            r = provision_controller(self.spec, node)
            self._mark(r, heal=True)
            return f"{r.target} ({r.container}) started in {r.took_s:.1f}s: {r.note}"
        if q.action == "remove-controller":
            directory = q.directory_id or self._wiped_directory(node)
            change = voters.remove_controller(self.spec, node, directory)
        else:
            change = voters.add_controller(self.spec, node, q.timeout)
        self.quorum_changes.append(change)
        note = f"directory {change.directory_id}; voters {', '.join(change.voters)}"
        self.observer.mark(change.action, f"controller {node}", heal=True, note=note)
        return (
            f"{change.action} {node} (directory {change.directory_id}) in {change.seconds:.1f}s (Kafka's tool "
            f"{change.tool_seconds:.1f}s, its JVM included; one VotersRecord committed by a majority); voters now "
            f"{', '.join(change.voters)}, leader {change.leader_id}"
        )

    def _wiped_directory(self, node: int) -> str:
        directory = next((d for n, d in reversed(self.cond.wiped) if n == node), None)
        if directory is None:
            raise UsageError(
                f"remove-controller: the directory id of controller {node} is not known (no wipe-controller of it "
                "saw one); give directory_id"
            )
        return directory

    def _step_metadata_probe(self, p: MetadataProbe) -> str:
        if p.action == "start":
            if self.probe is not None:
                raise UsageError("metadata_probe: the probe is running already")
            path = self.work_dir / "metadata-writes.jsonl"
            self.probe = Probe(self._live_bootstrap(), f"{self.topic}-md", path, p.interval, self.observer.event)
            self.probe.start()
            return f"a metadata write (create / delete topic {self.topic}-md) every {p.interval:g}s, log {path}"
        if self.probe is None:
            raise UsageError("metadata_probe: no probe is running")
        m = self._stop_probe()
        assert m is not None
        line = metadata_line(m)
        if p.max_gap is not None and (m.longest_gap_s is None or m.longest_gap_s > p.max_gap):
            raise StepFailed(f"{line} (at most {p.max_gap:g}s)")
        return line

    def _stop_probe(self) -> MetadataWrites | None:
        """Stop the probe when it runs (also at the end of a failed run) and keep its summary."""
        from clusterctl.chaos.bounds import metadata_gap_bound, settings_of

        if self.probe is None:
            return self.metadata_writes
        try:
            m = self.probe.stop()
        except ClusterctlError:
            self.probe = None
            raise
        self.probe = None
        m.bound = metadata_gap_bound({k: v for k, v in settings_of(self.spec).items()}, self.leader_wiped)
        self.metadata_writes = m
        return m


def metadata_line(m: MetadataWrites) -> str:
    gap = "no write committed" if m.longest_gap_s is None else f"longest metadata-write gap {m.longest_gap_s:.2f}s"
    return (
        f"{m.writes} metadata writes, {m.failed} failed; {gap} (≈ {m.bound}); latency median {m.median_ms} ms, "
        f"max {m.max_ms} ms; load average {m.load_average}"
    )
