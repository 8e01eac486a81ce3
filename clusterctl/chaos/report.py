"""Scenario reports: a JSON file with everything, and a self-contained HTML page with an inline SVG timeline."""

from __future__ import annotations

import html
import io
import json
from pathlib import Path
from typing import Any

from clusterctl.output import to_jsonable

ZK_MODE_LEVEL = {"leader": 3, "standalone": 3, "follower": 2, "observer": 2, "not serving": 1, "down": 0}


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


def timeline_svg(tl: Any) -> str:
    """The timeline plot as an inline <svg>: leaders, ISR sizes, ZK modes, throughput/errors, fault markers."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    t0 = tl.started
    fig, axes = plt.subplots(4, 1, figsize=(11, 9.5), sharex=True, constrained_layout=True)
    ax_leader, ax_isr, ax_zk, ax_load = axes
    keys = sorted({(s.topic, s.partition) for s in tl.partitions})
    for topic, pid in keys:
        ss = [s for s in tl.partitions if (s.topic, s.partition) == (topic, pid)]
        xs = [s.t - t0 for s in ss]
        label = f"{topic}-{pid}" if len({k[0] for k in keys}) > 1 else f"p{pid}"
        ax_leader.step(xs, [s.leader for s in ss], where="post", label=label)
        ax_isr.step(xs, [len(s.isr) for s in ss], where="post", label=label)
    ax_leader.set_ylabel("leader (broker id)")
    ax_isr.set_ylabel("ISR size")
    if keys:
        ax_leader.legend(loc="upper right", fontsize=7, ncol=4)
    else:
        ax_leader.text(0.5, 0.5, "no partitions observed", transform=ax_leader.transAxes, ha="center")
    if getattr(tl, "mode", "zookeeper") == "kraft":
        _kraft_panel(ax_zk, tl, t0)
    else:
        for zk_id in sorted({s.zk_id for s in tl.zk_modes}):
            ss = [s for s in tl.zk_modes if s.zk_id == zk_id]
            levels = [ZK_MODE_LEVEL.get(s.mode, 1) for s in ss]
            ax_zk.step([s.t - t0 for s in ss], levels, where="post", label=f"zk{zk_id}")
        ax_zk.set_yticks([0, 1, 2, 3], ["down", "not serving", "follower", "leader"])
        ax_zk.set_ylabel("ZK mode")
        if tl.zk_modes:
            ax_zk.legend(loc="upper right", fontsize=7)
    if tl.load:
        xs = [_get(iv, "t") - t0 for iv in tl.load]
        width = 0.45
        ax_load.bar(xs, [_get(iv, "acked") / 0.5 for iv in tl.load], width=width, align="edge", label="acked/s")
        ax_err = ax_load.twinx()
        ax_err.bar(xs, [_get(iv, "errors") for iv in tl.load], width=width, align="edge", color="tab:red",
                   alpha=0.6, label="errors")  # fmt: skip
        ax_err.set_ylabel("produce errors", color="tab:red")
        ax_load.legend(loc="upper left", fontsize=7)
    else:
        ax_load.text(0.5, 0.5, "no drill load in this scenario", transform=ax_load.transAxes, ha="center")
    ax_load.set_ylabel("acked records/s")
    ax_load.set_xlabel("seconds since start")
    for m in tl.markers:
        for ax in axes:
            ax.axvline(m.t - t0, color="tab:green" if m.heal else "tab:red", linestyle="--", linewidth=1)
        ax_leader.annotate(
            f"{m.action} {m.target}", (m.t - t0, 1.0), xycoords=("data", "axes fraction"), rotation=90,
            fontsize=7, va="top", ha="right", color="tab:green" if m.heal else "tab:red",
        )  # fmt: skip
    ax_load.set_xlim(0, max(1.0, tl.ended - t0))
    buf = io.StringIO()
    fig.savefig(buf, format="svg")
    plt.close(fig)
    svg = buf.getvalue()
    return svg[svg.find("<svg") :]


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


def _get(obj: Any, name: str) -> Any:
    return obj[name] if isinstance(obj, dict) else getattr(obj, name)


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape('-' if c is None else str(c))}</td>" for c in r) + "</tr>" for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def render_html(result: Any) -> str:
    """One self-contained page: verdict, steps, failover times, verification, timeline plot, events."""
    tl = result.timeline
    verdict = "PASS" if result.ok else "FAIL"
    steps = _table(
        ["#", "step", "ok", "took s", "detail"],
        [[s.index, s.description, "yes" if s.ok else "NO", f"{s.took_s:.2f}", s.detail] for s in result.steps],
    )
    fault_rows = [
        [f.action, f.target, f.detected_s, f.detected_by, f.controller_change_s, f.quorum_lost_s,
         f.quorum_ok_after_heal_s]
        for f in result.faults
    ]  # fmt: skip
    faults = _table(
        ["fault", "target", "detected s", "by", "controller change s", "quorum lost s", "quorum back after heal s"],
        fault_rows,
    )
    part_rows = [
        [f.action, f"{p.topic}-{p.partition}", p.leader_before, p.new_leader, p.time_to_new_leader_s,
         p.isr_shrunk_s, p.isr_full_s, p.unavailable_s, p.write_gap_s]
        for f in result.faults
        for p in f.partitions
    ]  # fmt: skip
    parts = _table(
        ["fault", "partition", "leader before", "new leader", "new leader s", "ISR shrunk s", "ISR full after heal s",
         "unavailable s", "longest wait for an ack s"],
        part_rows,
    )  # fmt: skip
    verify = "<p>no verification step</p>"
    if result.verify is not None:
        v = result.verify
        verify = _table(
            ["acked", "consumed", "lost", "duplicated", "unacked but present", "reordered", "verdict"],
            [[v.acked, v.consumed, v.lost_count, v.duplicated_count, v.unacked_present_count, v.reordered_count,
              "ok" if v.ok else "FAILED"]],
        )  # fmt: skip
    load = ""
    if result.load is not None:
        ld = result.load
        load = _table(
            ["sent", "acked", "failed", "errors", "seconds"], [[ld.sent, ld.acked, ld.failed, ld.errors, ld.seconds]]
        )
    events = _table(
        ["t s", "source", "kind", "subject", "detail"],
        [[f"{e.t - tl.started:.3f}", e.source, e.kind, e.subject, e.detail] for e in tl.events],
    )
    svg = timeline_svg(tl)
    error = f"<p class='err'>{html.escape(result.error)}</p>" if result.error else ""
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>clusterctl scenario {html.escape(result.scenario)}</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; color: #222; }}
h1 .PASS {{ color: #197a2e; }} h1 .FAIL {{ color: #b3261e; }}
table {{ border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 13px; }}
th, td {{ border: 1px solid #ccc; padding: 3px 8px; text-align: left; }}
th {{ background: #f2f2f2; }} .err {{ color: #b3261e; font-weight: bold; }}
.plot svg {{ max-width: 100%; height: auto; }}
</style></head><body>
<h1>Scenario {html.escape(result.scenario)}: <span class="{verdict}">{verdict}</span></h1>
<p>cluster <b>{html.escape(result.cluster)}</b>, topic {html.escape(str(result.topic or "-"))},
{result.ended - result.started:.1f}s</p>
{error}
<h2>Timeline</h2><div class="plot" id="timeline">{svg}</div>
<h2>Steps</h2>{steps}
<h2>Failover times</h2>{faults}{parts}
<h2>Verification (acknowledged writes)</h2>{verify}{load}
<h2>Events</h2>{events}
</body></html>
"""
