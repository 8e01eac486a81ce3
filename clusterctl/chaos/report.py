"""Scenario reports: a JSON file with everything, and a self-contained HTML page with an inline SVG timeline.

The pages are Jinja2 templates (templates/*.html.j2, autoescaped); this module prepares their rows and draws the
timeline plot (matplotlib → inline SVG).
"""

from __future__ import annotations

import functools
import io
import json
import os
from pathlib import Path
from typing import Any

import jinja2

from clusterctl.chaos.report_pipeline import group_context, pipeline_context
from clusterctl.output import to_jsonable

ZK_MODE_LEVEL = {"leader": 3, "standalone": 3, "follower": 2, "observer": 2, "not serving": 1, "down": 0}
TEMPLATES_DIR = Path(__file__).parent / "templates"


def write_reports(result: Any, directory: Path) -> tuple[Path, Path]:
    """Write report.json and report.html for a ScenarioResult; return their paths."""
    directory.mkdir(parents=True, exist_ok=True)
    json_path = directory / "report.json"
    html_path = directory / "report.html"
    result.report_json = str(json_path)
    result.report_html = str(html_path)
    json_path.write_text(json.dumps(to_jsonable(result), indent=2) + "\n", encoding="utf-8")
    html_path.write_text(render_html(result), encoding="utf-8")
    return json_path, html_path


def timeline_svg(tl: Any, pipeline: Any = None) -> str:
    """The timeline plot as an inline <svg>: leaders, ISR sizes, ZK modes, throughput/errors, fault markers, and
    with a Spark pipeline its micro-batches (rows/s; duration and lag) below Kafka's panels."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from clusterctl.chaos.report_pipeline import pipeline_panels

    t0 = tl.started
    spark = bool(pipeline is not None and pipeline.batches)
    fig, axes = plt.subplots(6 if spark else 4, 1, figsize=(11, 13.5 if spark else 9.5), sharex=True,
                             constrained_layout=True)  # fmt: skip
    ax_leader, ax_isr, ax_zk, ax_load = axes[:4]
    if spark:
        pipeline_panels(axes[4], axes[5], pipeline, t0)
    _partition_panels(ax_leader, ax_isr, tl, t0)
    if getattr(tl, "mode", "zookeeper") == "kraft":
        _kraft_panel(ax_zk, tl, t0)
    else:
        _zk_panel(ax_zk, tl, t0)
    _load_panel(ax_load, tl, t0)
    if spark:
        ax_load.set_xlabel("")  # the pipeline's panels below carry the time axis
    _phase_bands(axes, tl, t0)
    for m in tl.markers:
        for ax in axes:
            ax.axvline(m.t - t0, color="tab:green" if m.heal else "tab:red", linestyle="--", linewidth=1)
        ax_leader.annotate(
            f"{m.action} {m.target}", (m.t - t0, 1.0), xycoords=("data", "axes fraction"), rotation=90,
            fontsize=7, va="top", ha="right", color="tab:green" if m.heal else "tab:red",
        )  # fmt: skip
    axes[-1].set_xlim(0, max(1.0, tl.ended - t0))
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    plt.close(fig)
    svg = buf.getvalue()
    return svg[svg.find("<svg") :]


def _partition_panels(ax_leader: Any, ax_isr: Any, tl: Any, t0: float) -> None:
    """Leader and ISR size per partition as step lines, broken and shaded where metadata went unanswered."""
    from matplotlib.ticker import MaxNLocator

    keys = sorted({(s.topic, s.partition) for s in tl.partitions})
    gaps = [(_get(g, "t0") - t0, _get(g, "t1") - t0) for g in getattr(tl, "gaps", None) or []]
    styles = ["-", "--", ":", "-."]
    for k, (topic, pid) in enumerate(keys):
        ss = [s for s in tl.partitions if (s.topic, s.partition) == (topic, pid)]
        # partitions whose lines coincide stay apart: a small offset each, and their own dash style
        shift = (k - (len(keys) - 1) / 2) * 0.07
        label = f"{topic}-{pid}" if len({k[0] for k in keys}) > 1 else f"p{pid}"
        style = {"where": "post", "label": label, "linestyle": styles[k % len(styles)], "linewidth": 1.6}
        xs, leaders = _gapped([s.t - t0 for s in ss], [s.leader for s in ss], gaps)
        _, isr = _gapped([s.t - t0 for s in ss], [len(s.isr) for s in ss], gaps)
        ax_leader.step(xs, [y + shift for y in leaders], **style)
        ax_isr.step(xs, [y + shift for y in isr], **style)
    leader_ids = sorted({s.leader for s in tl.partitions} | {r for s in tl.partitions for r in s.replicas})
    if leader_ids:
        ax_leader.set_yticks(leader_ids, [str(b) if b >= 0 else "none" for b in leader_ids])
        ax_leader.set_ylim(min(leader_ids) - 0.5, max(leader_ids) + 0.5)
    top = max((len(s.replicas) for s in tl.partitions), default=1)
    ax_isr.set_yticks(range(0, top + 1))
    ax_isr.set_ylim(-0.3, top + 0.5)
    ax_isr.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax_leader.set_ylabel("leader (broker id)")
    ax_isr.set_ylabel("ISR size")
    for a, b in gaps:
        for ax in (ax_leader, ax_isr):
            ax.axvspan(a, b, color="0.85", zorder=0)
        ax_leader.text((a + b) / 2, 0.5, "no answer", transform=ax_leader.get_xaxis_transform(), ha="center",
                       fontsize=7, color="0.35")  # fmt: skip
    if keys:
        ax_leader.legend(loc="upper right", fontsize=7, ncol=4)
    else:
        ax_leader.text(0.5, 0.5, "no partitions observed", transform=ax_leader.transAxes, ha="center")


def _zk_panel(ax_zk: Any, tl: Any, t0: float) -> None:
    """ZooKeeper mode: each node's Mode (down .. leader) as a step line."""
    for zk_id in sorted({s.zk_id for s in tl.zk_modes}):
        ss = [s for s in tl.zk_modes if s.zk_id == zk_id]
        levels = [ZK_MODE_LEVEL.get(s.mode, 1) for s in ss]
        ax_zk.step([s.t - t0 for s in ss], levels, where="post", label=f"zk{zk_id}")
    ax_zk.set_yticks([0, 1, 2, 3], ["down", "not serving", "follower", "leader"])
    ax_zk.set_ylabel("ZK mode")
    if tl.zk_modes:
        ax_zk.legend(loc="upper right", fontsize=7)


def _load_panel(ax_load: Any, tl: Any, t0: float) -> None:
    """The drill load: acknowledged records/s as bars, produce errors on a second axis when there were any."""
    from matplotlib.ticker import MaxNLocator

    if tl.load:
        xs = [_get(iv, "t") - t0 for iv in tl.load]
        width = 0.45
        ax_load.bar(xs, [_get(iv, "acked") / 0.5 for iv in tl.load], width=width, align="edge", label="acked/s")
        errors = [_get(iv, "errors") for iv in tl.load]
        if any(errors):
            ax_err = ax_load.twinx()
            ax_err.bar(xs, errors, width=width, align="edge", color="tab:red", alpha=0.6, label="errors")
            ax_err.set_ylabel("produce errors", color="tab:red")
            ax_err.yaxis.set_major_locator(MaxNLocator(integer=True))
            ax_err.set_ylim(bottom=0)
        else:
            ax_load.text(0.99, 0.9, "no produce errors", transform=ax_load.transAxes, ha="right", fontsize=8)
        ax_load.legend(loc="upper left", fontsize=7)
    else:
        ax_load.text(0.5, 0.5, "no drill load in this scenario", transform=ax_load.transAxes, ha="center")
    ax_load.set_ylabel("acked records/s")
    ax_load.set_xlabel("seconds since start")


def _kraft_panel(ax: Any, tl: Any, t0: float) -> None:
    """KRaft: the active controller (node id, -1 = none) as a step line, fenced brokers as red bars."""
    cs = tl.controllers
    if cs:
        ax.step([c.t - t0 for c in cs], [c.leader for c in cs], where="post", color="tab:purple",
                label="active controller")  # fmt: skip
        for a, b in zip([None, *cs], cs, strict=False):
            if a is None or a.leader != b.leader:
                text = f"{b.leader}" if b.leader >= 0 else "none"
                ax.annotate(text, (b.t - t0, b.leader), fontsize=7, color="tab:purple", va="bottom")
    ax.set_ylabel("active controller")
    ax.legend(loc="upper left", fontsize=7)
    ax_f = ax.twinx()
    spans: dict[int, list[tuple[float, float]]] = {}
    for a, b in zip(tl.fenced, [*tl.fenced[1:], None], strict=False):
        end = (b.t if b is not None else tl.ended) - t0
        for broker in a.brokers:
            spans.setdefault(broker, []).append((a.t - t0, max(0.05, end - (a.t - t0))))
    for broker, bars in spans.items():
        ax_f.broken_barh(bars, (broker - 0.3, 0.6), color="tab:red", alpha=0.6)
    ax_f.set_ylabel("fenced broker", color="tab:red")
    ids = sorted({b for f in tl.fenced for b in f.brokers}) or [1]
    ax_f.set_ylim(0.5, max(ids) + 0.5)
    ax_f.set_yticks(ids)


PHASE_COLOURS = ("#dbe9f6", "#fde7c9")  # alternating, so neighbouring phases stay apart


def _phase_bands(axes: Any, tl: Any, t0: float) -> None:
    """Each phase of a migration (or its rollback) as a shaded band over every panel, named above the top one."""
    for k, band in enumerate(getattr(tl, "phases", None) or []):
        a, b = _get(band, "t0") - t0, (_get(band, "t1") or tl.ended) - t0
        for ax in axes:
            ax.axvspan(a, b, color=PHASE_COLOURS[k % 2], alpha=0.6, zorder=0, gid=f"phase-band-{k + 1}")
        done = "" if _get(band, "done") else " (not done)"
        axes[0].text((a + b) / 2, 1.01, f"{_get(band, 'name')}{done}", transform=axes[0].get_xaxis_transform(),
                     ha="center", va="bottom", fontsize=7, color="0.25")  # fmt: skip


def _gapped(xs: list[float], ys: list[float], gaps: list[tuple[float, float]]) -> tuple[list[float], list[float]]:
    """Break a step series at each gap (NaN from its start): what was seen before it is not carried across."""
    points = sorted([*zip(xs, ys, strict=True), *[(a, float("nan")) for a, _ in gaps if xs and a > xs[0]]])
    return [p[0] for p in points], [p[1] for p in points]


def _get(obj: Any, name: str) -> Any:
    return obj[name] if isinstance(obj, dict) else getattr(obj, name)


@functools.cache
def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
    )


def _render(template: str, **context: Any) -> str:
    return _environment().get_template(template).render(**context)


def _settings_text(settings: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v}" for k, v in settings.items()) or "none (no replication)"


def render_html(result: Any) -> str:
    """One self-contained page: verdict, steps, failover times, verification, timeline plot, events."""
    tl = result.timeline
    settings = getattr(result, "bounds", None) or {}
    return _render(
        "report.html.j2",
        r=result,
        verdict=getattr(result, "verdict", "") or ("PASS" if result.ok else "FAIL"),
        expect=getattr(result, "expect", "no-loss"),
        settings_text=_settings_text(settings),
        svg=timeline_svg(tl, getattr(result, "pipeline", None)),
        steps=[[s.index, s.description, "yes" if s.ok else "NO", f"{s.took_s:.2f}", s.detail] for s in result.steps],
        faults=_fault_rows(result, settings),
        partitions=_partition_rows(result, settings),
        phases=[
            [
                p.phase,
                p.started_s,
                p.seconds,
                "yes" if p.done else "NO",
                p.write_gap_s,
                p.write_gap_partition,
                p.leader_moves,
                p.controller_changes,
            ]
            for p in getattr(result, "phases", None) or []
        ],
        events=[[f"{e.t - tl.started:.3f}", e.source, e.kind, e.subject, e.detail] for e in tl.events],
        elections=_election_rows(result),
        load=result.load,
        spark=getattr(result, "spark", None),
        **pipeline_context(getattr(result, "pipeline", None), tl.started),
        **_verify_context(result),
        **group_context(getattr(result, "group", None), tl.started),
        **_quorum_context(result, tl.started),
    )


def _quorum_context(result: Any, t0: float) -> dict[str, Any]:
    """The controller quorum section: the metadata-write probe and each voter change (dynamic quorum drills)."""
    mw = getattr(result, "metadata_writes", None)
    rows = []
    if mw is not None:
        at = [None if t is None else round(t - t0, 2) for t in (mw.gap_from, mw.gap_to)]
        rows = [[mw.writes, mw.failed, mw.longest_gap_s, *at, mw.median_ms, mw.max_ms, mw.bound or "-"]]
    changes = [[c.action, f"{c.node_id} ({c.service})", c.directory_id, c.seconds, c.tool_seconds,
                ", ".join(c.voters), c.leader_id] for c in getattr(result, "quorum_changes", None) or []]  # fmt: skip
    return {"mw": mw, "metadata_rows": rows, "quorum_rows": changes}


def _election_rows(result: Any) -> list[list[Any]]:
    """Elections out of a leaderless partition or from outside the ISR (election_rules.py), a row each."""
    return [
        [f"{e.topic}-{e.partition}", e.leader_before, e.leader, e.rule, e.leaderless_s, e.isr_before,
         "-" if e.elr_before is None else e.elr_before, "-" if e.last_known_before is None else e.last_known_before,
         e.detail]
        for e in getattr(result, "elections", None) or []
        if e.leaderless_s is not None or e.rule != "isr"
    ]  # fmt: skip


def _fault_rows(result: Any, settings: dict[str, Any]) -> list[list[Any]]:
    from clusterctl.chaos.bounds import explain

    return [
        [f.action, f.target, explain(f.detected_s, f.action, "detected", False, settings), f.detected_by,
         f.controller_change_s, f.quorum_lost_s, f.quorum_ok_after_heal_s]
        for f in result.faults
    ]  # fmt: skip


def _partition_rows(result: Any, settings: dict[str, Any]) -> list[list[Any]]:
    from clusterctl.chaos.bounds import explain

    return [
        [f.action, f"{p.topic}-{p.partition}", p.leader_before, p.new_leader,
         explain(p.time_to_new_leader_s, f.action, "new_leader", p.led_by_target, settings, p.elected_by),
         explain(p.isr_shrunk_s, f.action, "isr_shrunk", p.led_by_target, settings), p.isr_full_s, p.unavailable_s,
         explain(p.write_gap_s, f.action, "write_gap", p.led_by_target, settings, p.elected_by),
         ", ".join(p.also) or "-"]
        for f in result.faults
        for p in f.partitions
    ]  # fmt: skip


def _verify_context(result: Any) -> dict[str, Any]:
    """The verification section: the verdict line, and the lost offsets per partition with what allowed them."""
    v = result.verify
    if v is None:
        return {"v": None, "verify_verdict": None, "lost_rows": [], "allowed": ""}
    verdict = "ok" if v.ok else "FAILED"
    if getattr(result, "expect", "no-loss") == "loss":
        verdict = "loss expected and found" if v.lost_count else "FAILED: loss expected, none found"
    lost_rows = [[f"{p.topic}-{p.partition}", p.acked, p.lost, p.lost_offsets] for p in v.partitions if p.lost]
    allowed = "; ".join(getattr(result, "loss_settings", None) or []) or "no setting of this scenario"
    return {"v": v, "verify_verdict": verdict, "lost_rows": lost_rows, "allowed": allowed}


def _spark_cell(r: Any) -> str | None:
    if r.spark_exact is None:
        return None
    verdict = "exact" if r.spark_exact else "NOT exact"
    return f"{verdict}: {r.spark_missing} missing, {r.spark_mismatched} mismatched"


def write_summary_html(rep: Any, path: Path) -> Path:
    """The HTML summary of `scenario run --repeat`: a row per run (linking its report) and the statistics."""
    path.parent.mkdir(parents=True, exist_ok=True)
    runs = [
        {
            "cells": [r.run, r.verdict, r.acked, r.lost, r.duplicated, r.detected_s, r.new_leader_s,
                      r.isr_shrunk_s, r.write_gap_s, r.stall_s, _spark_cell(r), r.metadata_gap_s, r.load_average,
                      r.fault],
            "href": os.path.relpath(r.report, path.parent) if r.report else None,
        }
        for r in rep.runs
    ]  # fmt: skip
    stats = [[s.metric, s.n, s.median, s.p95, s.max, s.bound] for s in rep.summary]
    page = _render("summary.html.j2", rep=rep, runs=runs, stats=stats, settings_text=_settings_text(rep.bounds))
    path.write_text(page, encoding="utf-8")
    rep.report_html = str(path)
    return path
