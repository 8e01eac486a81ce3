"""The same drill on a ZooKeeper-mode and a KRaft-mode cluster, or on two Kafka versions in KRaft mode, side by side.

For each mode the spec is used as is (its own mode) or derived (the other mode, cluster `<name>-<mode>`, same
network and ports, so the two never run at once). A cluster that is not running is rendered, started, and
removed with its volumes afterwards; one that was already running is left as it was. Every run appends one
row to a JSON-lines results file, so a long series can be split over several invocations and summarised once.

What bounds failure detection differs by mode, and the table names it: in ZooKeeper mode a SIGKILLed broker
is noticed when its ZooKeeper session expires (zookeeper.session.timeout.ms); in KRaft mode when it misses
heartbeats to the active controller for broker.session.timeout.ms.

Versions (`--versions 3.9.2,4.4.0`): each is the spec in KRaft mode on the offline image clusterctl/kafka:<version>
(cluster `<name>-v<digits>`, same network and ports), refused before any work unless every image is built here.
Group protocols (`--group-protocols classic,consumer`, compare_groups.py): a group drill on the spec's own cluster,
once per protocol in each round. A row records what it compared (`by`: mode, version or group-protocol), so one
results file can hold every kind of series, and the load average when the run ended.
"""

from __future__ import annotations

import json
import os
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from clusterctl.chaos.stats import main_fault
from clusterctl.errors import ClusterctlError, UsageError
from clusterctl.spec import kafkadist, validate
from clusterctl.spec.capabilities import kraft_ready
from clusterctl.spec.model import ClusterSpec, parse_spec

MODES = ("zookeeper", "kraft")


@dataclass
class CompareRun:
    """One drill run: the failover times of its first fault and what the ledger found."""

    mode: str
    cluster: str
    scenario: str
    ok: bool
    started: float
    detected_s: float | None
    detected_by: str | None
    new_leader_s: float | None
    write_gap_s: float | None
    lost: int | None
    bounding_setting: str
    bounding_ms: int
    report: str | None = None
    error: str | None = None
    kafka_version: str | None = None  # the offline image's Kafka version (None: not an offline image)
    by: str = "mode"  # what the series compared: mode | version | group-protocol
    load1: float | None = None  # the machine's 1-minute load average when the run ended
    group_protocol: str | None = None  # a group-protocol series: classic | consumer (compare_groups.py)
    consume_gap_s: float | None = None
    others_gap_s: float | None = None
    gap_bound: str | None = None
    unread: int | None = None  # acknowledged records the drill's group never read
    duplicated_reads: int | None = None


@dataclass
class Spread:
    median: float | None
    min: float | None
    max: float | None
    n: int

    def text(self) -> str:
        if self.median is None:
            return "-"
        return f"{self.median:.2f} ({self.min:.2f}-{self.max:.2f})"


@dataclass
class ModeSummary:
    mode: str
    runs: int
    passed: int
    lost_total: int
    bounding_setting: str
    bounding_ms: int
    detected_s: Spread
    new_leader_s: Spread
    write_gap_s: Spread
    clusters: list[str] = field(default_factory=list)
    kafka_version: str | None = None  # a version comparison's column (None in a mode comparison)
    load1: Spread | None = None
    group_protocol: str | None = None  # a group-protocol comparison's column
    consume_gap_s: Spread | None = None
    others_gap_s: Spread | None = None
    gap_bound: str | None = None
    unread_total: int | None = None
    duplicated_reads: int | None = None


def bounding(spec: ClusterSpec) -> tuple[str, int]:
    """The setting that bounds how fast a dead broker is noticed, and its value in ms."""
    if spec.kraft_mode:
        return "broker.session.timeout.ms", spec.kraft.broker_session_timeout_ms
    return "zookeeper.session.timeout.ms", spec.kafka.defaults.zookeeper_session_timeout_ms


def spec_for_mode(spec: ClusterSpec, mode: str) -> ClusterSpec:
    """The spec itself in its own mode; otherwise the same cluster shape in `mode`, named `<name>-<mode>`."""
    if mode not in MODES:
        raise UsageError(f"--modes takes zookeeper and/or kraft, got {mode!r}")
    if spec.kafka.mode == mode:
        return spec
    data: dict[str, Any] = spec.model_dump(mode="json", exclude_unset=True)
    data["name"] = f"{spec.name}-{'zk' if mode == 'zookeeper' else 'kraft'}"[:40]
    kafka = dict(data.get("kafka") or {})
    kafka["mode"] = mode
    data["kafka"] = kafka
    if mode == "kraft":
        data.pop("zookeeper", None)
        # the user's web UI settings hold (enabled, host port: another cluster may have the default 9000), but
        # not its kind: CMAK needs ZooKeeper, and kraft mode's own default is the console
        manager = {k: v for k, v in (data.get("kafka_manager") or {}).items() if k != "kind"}
        if manager:
            data["kafka_manager"] = manager
        else:
            data.pop("kafka_manager", None)
        # ZooKeeper's session timeout has no meaning without ZooKeeper (kraft.broker_session_timeout_ms is its twin)
        defaults = dict(kafka.get("defaults") or {})
        defaults.pop("zookeeper_session_timeout_ms", None)
        kafka["defaults"] = defaults
    else:
        data.pop("kraft", None)
        data["kafka_manager"] = {"enabled": False}
    return parse_spec(data, source=f"{spec.name} as {mode}")


def parse_versions(text: str, built: list[str] | None) -> list[str]:
    """The Kafka versions of `--versions` (exact, distinct, KRaft-ready), each built here (`built`: the
    clusterctl/kafka versions of this machine; None: not checked); one UsageError line otherwise, before any work."""
    wanted = [v.strip() for v in text.split(",") if v.strip()]
    if (
        not wanted
        or len(set(wanted)) != len(wanted)
        or any(not re.fullmatch(kafkadist.EXACT_VERSION, v) for v in wanted)
    ):
        raise UsageError(
            f"--versions takes exact Kafka versions, comma-separated, once each (3.9.2,4.4.0), got {text!r}"
        )
    for v in wanted:
        if not kraft_ready(v):
            raise UsageError(
                f"--versions: Kafka {v} has no production KRaft mode (3.3+), and versions compare in KRaft"
            )
    for v in wanted:
        if built is not None and v not in built:
            raise UsageError(
                f"--versions: image {kafkadist.offline_image(v)} is not built here: "
                f"`clusterctl images build kafka --kafka-version {v}`"
            )
    return wanted


def spec_for_version(spec: ClusterSpec, version: str) -> ClusterSpec:
    """The spec in KRaft mode on clusterctl/kafka:<version>: itself when it is exactly that, else derived
    (`<name>-v<digits>`, the same network and ports)."""
    if spec.profile != "offline" or spec.kafka.engine != "kafka" or spec.images.kafka:
        raise UsageError(
            f"--versions compares the offline images (clusterctl/kafka:<version>): cluster {spec.name} needs "
            f"profile offline, engine kafka and no images.kafka"
        )
    if spec.kraft_mode and spec.kafka.version == version:
        return spec
    kraft = spec_for_mode(spec, "kraft")
    data: dict[str, Any] = kraft.model_dump(mode="json", exclude_unset=True)
    data["name"] = f"{spec.name[:32]}-v{version.replace('.', '')}"
    data["kafka"] = {**(data.get("kafka") or {}), "version": version}
    return parse_spec(data, source=f"{spec.name} on Kafka {version}")


def run_metrics(result: Any, mode_spec: ClusterSpec, by: str = "mode", protocol: str | None = None) -> CompareRun:
    """Detection, new-leader time and write gap of the run's main fault (worst partition it led); with `protocol`,
    the group's consume gap too (compare_groups.py)."""
    from clusterctl.chaos.compare_groups import group_fields

    setting, ms = bounding(mode_spec)
    fault = main_fault(result)
    led = [p for p in fault.partitions if p.led_by_target] if fault else []
    new_leader = [p.time_to_new_leader_s for p in led if p.time_to_new_leader_s is not None]
    gaps = [p.write_gap_s for p in led if p.write_gap_s is not None]
    row = CompareRun(
        mode=mode_spec.kafka.mode,
        cluster=mode_spec.name,
        scenario=result.scenario,
        ok=result.ok,
        started=result.started,
        detected_s=fault.detected_s if fault else None,
        detected_by=fault.detected_by if fault else None,
        new_leader_s=max(new_leader) if new_leader else None,
        write_gap_s=max(gaps) if gaps else None,
        lost=result.verify.lost_count if result.verify is not None else None,
        bounding_setting=setting,
        bounding_ms=ms,
        report=result.report_html,
        error=result.error,
        kafka_version=_offline_version(mode_spec),
        by=by,
        load1=round(os.getloadavg()[0], 2),
    )
    return row if protocol is None else replace(row, **group_fields(result, protocol))


def _offline_version(spec: ClusterSpec) -> str | None:
    image = spec.broker_image
    prefix = kafkadist.OFFLINE_KAFKA_REPO + ":"
    return image.removeprefix(prefix) if image.startswith(prefix) else None


def _spread(values: list[float | None]) -> Spread:
    xs = [v for v in values if v is not None]
    if not xs:
        return Spread(None, None, None, 0)
    return Spread(round(statistics.median(xs), 3), min(xs), max(xs), len(xs))


def summarize(
    runs: list[CompareRun], versions: list[str] | None = None, protocols: list[str] | None = None
) -> list[ModeSummary]:
    """One column per mode (rows of mode comparisons), per version of `versions` (rows of version comparisons), or
    per group protocol of `protocols`."""
    out = []
    groups: list[tuple[str, str | None, list[CompareRun]]]
    if protocols is not None:
        groups = [(p, None, [r for r in runs if r.by == "group-protocol" and r.group_protocol == p]) for p in protocols]
    elif versions is None:
        groups = [(m, None, [r for r in runs if r.by == "mode" and r.mode == m]) for m in MODES]
    else:
        groups = [("kraft", v, [r for r in runs if r.by == "version" and r.kafka_version == v]) for v in versions]
    for mode, version, rs in groups:
        if not rs:
            continue
        grouped = protocols is not None
        out.append(
            ModeSummary(
                mode=rs[-1].mode,
                kafka_version=version,
                runs=len(rs),
                passed=sum(r.ok for r in rs),
                lost_total=sum(r.lost or 0 for r in rs),
                bounding_setting=rs[-1].bounding_setting,
                bounding_ms=rs[-1].bounding_ms,
                detected_s=_spread([r.detected_s for r in rs]),
                new_leader_s=_spread([r.new_leader_s for r in rs]),
                write_gap_s=_spread([r.write_gap_s for r in rs]),
                clusters=sorted({r.cluster for r in rs}),
                load1=_spread([r.load1 for r in rs]),
                group_protocol=mode if grouped else None,
                consume_gap_s=_spread([r.consume_gap_s for r in rs]) if grouped else None,
                others_gap_s=_spread([r.others_gap_s for r in rs]) if grouped else None,
                gap_bound=next((r.gap_bound for r in reversed(rs) if r.gap_bound), None),
                unread_total=sum(r.unread or 0 for r in rs) if grouped else None,
                duplicated_reads=sum(r.duplicated_reads or 0 for r in rs) if grouped else None,
            )
        )
    return out


def side_by_side(summary: list[ModeSummary]) -> tuple[list[str], list[dict[str, Any]]]:
    """The comparison table: a column label per summary (its mode, or `Kafka <version>`) and a row per metric."""
    labels = [m.group_protocol or (m.mode if m.kafka_version is None else f"Kafka {m.kafka_version}") for m in summary]
    cells = list(zip(labels, summary, strict=True))
    rows: list[dict[str, Any]] = [
        {"metric": "runs (passed)", **{k: f"{m.runs} ({m.passed})" for k, m in cells}},
        {"metric": "acknowledged writes lost", **{k: m.lost_total for k, m in cells}},
        {"metric": "bounding setting", **{k: f"{m.bounding_setting}={m.bounding_ms}" for k, m in cells}},
        {"metric": "detection s, median (min-max)", **{k: m.detected_s.text() for k, m in cells}},
        {"metric": "new leader s", **{k: m.new_leader_s.text() for k, m in cells}},
        {"metric": "write gap s", **{k: m.write_gap_s.text() for k, m in cells}},
    ]
    if any(m.group_protocol for m in summary):
        rows[2]["metric"] = "dead member noticed after"
        rows[3:3] = [
            {"metric": "acknowledged records unread by the group", **{k: m.unread_total for k, m in cells}},
            {"metric": "records the group read twice", **{k: m.duplicated_reads for k, m in cells}},
            {"metric": "consume gap s", **{k: _text(m.consume_gap_s) for k, m in cells}},
            {"metric": "consume gap bounded by", **{k: m.gap_bound or "-" for k, m in cells}},
            {"metric": "others' gap s (the rebalance)", **{k: _text(m.others_gap_s) for k, m in cells}},
        ]
    if any(m.load1 is not None and m.load1.n for m in summary):
        rows.append({"metric": "load average (1 min) at run end", **{k: _text(m.load1) for k, m in cells}})
    return labels, rows


def _text(spread: Spread | None) -> str:
    return "-" if spread is None else spread.text()


def load_runs(path: Path, scenario: str | None = None) -> list[CompareRun]:
    """Rows of an earlier results file (JSON lines), optionally of one scenario only."""
    if not path.is_file():
        return []
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = CompareRun(**json.loads(line))
        except (ValueError, TypeError) as exc:
            raise ClusterctlError(f"{path}:{n}: not a compare result row ({exc})") from None
        if scenario is None or row.scenario == scenario:
            out.append(row)
    return out


def append_run(path: Path, run: CompareRun) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(asdict(run)) + "\n")


def _running(spec: ClusterSpec) -> bool:
    from clusterctl.runtime import docker as dk

    return any(c.state == "running" for c in dk.container_states(spec))


def _prefixed(progress: Callable[[str], None], prefix: str) -> Callable[[str], None]:
    return lambda message: progress(prefix + message)


@dataclass
class _Leg:
    """One column of a comparison on one cluster: its label, the scenario it runs, the protocol of its group."""

    label: str
    scenario: Any
    tag: str
    protocol: str | None = None


def compare(
    spec: ClusterSpec,
    scenario: Any,
    modes: list[str],
    repeat: int,
    results: Path,
    report_dir: Path,
    progress: Callable[[str], None],
    up_timeout: float = 240.0,
    versions: list[str] | None = None,
    group_protocols: list[str] | None = None,
) -> list[CompareRun]:
    """Run `scenario` `repeat` times per mode (or per Kafka version, in KRaft mode, when `versions` is given:
    checked by parse_versions first; or per group protocol on the spec's own cluster, the runs alternating, with
    `group_protocols`); every run is appended to `results` as it finishes."""
    from clusterctl.chaos.compare_groups import scenario_for_protocol
    from clusterctl.compose import render
    from clusterctl.runtime import cluster

    validate.at_most(repeat, "--repeat", validate.MAX_REPEAT)
    by = "mode" if versions is None else "version"
    if group_protocols is not None:
        specs, by = [spec], "group-protocol"
        legs = {id(spec): [_Leg(p, scenario_for_protocol(scenario, p), p, p) for p in group_protocols]}
    else:
        specs = [spec_for_mode(spec, m) for m in modes] if versions is None else [
            spec_for_version(spec, v) for v in versions]  # fmt: skip
        legs = {
            id(s): [_Leg(s.kafka.mode if versions is None else f"Kafka {v}", scenario,
                         s.kafka.mode if versions is None else f"kafka{s.kafka.version}")]
            for s, v in zip(specs, versions or modes, strict=True)
        }  # fmt: skip
    for s in specs:
        if scenario.mode not in ("any", s.kafka.mode):
            raise UsageError(f"scenario {scenario.name} is for kafka.mode={scenario.mode} only; it cannot be compared")
    out: list[CompareRun] = []
    for s in specs:
        label = legs[id(s)][0].label if group_protocols is None else s.name
        others = [o for o in specs if o is not s and _running(o)]
        started_here = not _running(s)
        if started_here and others:
            raise UsageError(
                f"cluster {others[0].name} is running on the network and ports cluster {s.name} needs",
                hint="`clusterctl -s <its spec> down` first, or compare one at a time "
                f"({'--modes ' + s.kafka.mode if versions is None else '--versions ' + str(s.kafka.version)})",
            )
        try:
            if started_here:
                progress(f"{label}: rendering and starting cluster {s.name}")
                render.render(s)
                up = cluster.Cluster(s).up(up_timeout)
                progress(f"{label}: cluster {s.name} healthy after {up.seconds_to_healthy:.1f}s")
            out += _series(s, legs[id(s)], repeat, by, results, report_dir, progress)
        finally:
            if started_here:
                progress(f"{label}: removing cluster {s.name} (with its volumes)")
                cluster.Cluster(s).down(volumes=True)
    return out


def _series(
    spec: ClusterSpec, legs: list[_Leg], repeat: int, by: str, results: Path, report_dir: Path,
    progress: Callable[[str], None],
) -> list[CompareRun]:  # fmt: skip
    """`repeat` rounds on one running cluster, each running every leg once; each row appended as it is known."""
    from clusterctl.chaos.report import write_reports
    from clusterctl.chaos.runner import Runner

    out = []
    for i in range(1, repeat + 1):
        for leg in legs:
            progress(f"{leg.label}: run {i}/{repeat} of {leg.scenario.name}")
            work = report_dir / f"{leg.scenario.name}-{leg.tag}-{int(time.time())}-{i}"
            runner = Runner(spec, leg.scenario, work_dir=work, progress=_prefixed(progress, f"  {leg.label}: "))
            result = runner.run()
            write_reports(result, work)
            row = run_metrics(result, spec, by, leg.protocol)
            append_run(results, row)
            out.append(row)
    return out
