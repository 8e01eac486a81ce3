"""What a drill run returns: a result per step and one for the scenario (report.py and stats.py read them)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from clusterctl.errors import ClusterctlError

if TYPE_CHECKING:
    from clusterctl.chaos.analysis import FaultMetrics, PhaseMetrics
    from clusterctl.chaos.election_rules import Election
    from clusterctl.chaos.group_timeline import GroupReport
    from clusterctl.chaos.ledger import VerifyResult
    from clusterctl.chaos.load import LoadSummary
    from clusterctl.chaos.metadata_probe import MetadataWrites
    from clusterctl.chaos.pipeline import SparkVerifyResult
    from clusterctl.chaos.pipeline_timeline import PipelineTimeline
    from clusterctl.chaos.snapshot import ClusterSnapshot
    from clusterctl.chaos.timeline import Timeline
    from clusterctl.runtime.voters import VoterChange


@dataclass
class StepResult:
    index: int
    kind: str
    description: str
    ok: bool
    started: float
    took_s: float
    detail: str = ""


@dataclass
class ScenarioResult:
    scenario: str
    file: str | None
    cluster: str
    topic: str | None
    ok: bool
    started: float
    ended: float
    steps: list[StepResult]
    faults: list[FaultMetrics] = field(default_factory=list)
    verify: VerifyResult | None = None
    load: LoadSummary | None = None
    error: str | None = None
    report_html: str | None = None
    report_json: str | None = None
    ledger: str | None = None
    expect: str = "no-loss"
    loss_settings: list[str] = field(default_factory=list)  # settings of the scenario that allow a loss
    bounds: dict[str, str] = field(default_factory=dict)  # broker settings that bound failover times
    timeline: Timeline | None = None  # written to the JSON report, not printed
    interrupted: bool = False  # stopped by Ctrl-C: the steps after the interrupted one never ran
    fault_not_applied: bool = False  # a fault step could not be applied: nothing was tested, nothing is left applied
    freeze_retries: int = 0  # freezes the engine refused before a pause took (a busy container), over all steps
    verdict: str = ""  # PASS | FAIL | INTERRUPTED | FAULT NOT APPLIED
    phases: list[PhaseMetrics] = field(default_factory=list)  # migration phases: a band each on the timeline
    snapshots: list[ClusterSnapshot] = field(default_factory=list)  # topics, configs, group offsets (snapshot steps)
    spark: SparkVerifyResult | None = None  # verify_spark: the job's output against its input
    pipeline: PipelineTimeline | None = None  # the Spark jobs' micro-batches and each fault's pipeline stall
    group: GroupReport | None = None  # the drill's consumer group: each fault's consume gap, what it read
    metadata_writes: MetadataWrites | None = None  # metadata_probe: the quorum's writes and their longest gap
    quorum_changes: list[VoterChange] = field(default_factory=list)  # add-controller / remove-controller steps
    elections: list[Election] = field(default_factory=list)  # each leader change and the rule that allowed it
    safety: str | None = None  # the rule that kept acknowledged writes (ELR, last known leader), or the loss's election


def verdict_of(ok: bool, interrupted: bool, fault_not_applied: bool) -> str:
    """The run's one-word verdict: a fault that could not be applied is not a failed drill."""
    if interrupted:
        return "INTERRUPTED"
    if fault_not_applied:
        return "FAULT NOT APPLIED"
    return "PASS" if ok else "FAIL"


class StepFailed(ClusterctlError):
    exit_code = 6
