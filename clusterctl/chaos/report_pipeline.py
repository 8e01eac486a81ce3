"""The Spark pipeline's and the consumer group's parts of a drill report: the pipeline's two plot panels below
Kafka's, and the rows of both one's tables."""

from __future__ import annotations

from typing import Any

DRIVER_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:purple", "tab:brown")


def pipeline_panels(ax_rate: Any, ax_batch: Any, pipeline: Any, t0: float) -> None:
    """Per micro-batch (at its completion): input and processed rows/s; its duration, and the lag on a second axis.

    Each driver (a start of the job) has its own colour; the time between one driver's last batch and the next
    one's first is shaded, and so is each fault's longest wait for a batch (the pipeline stall)."""
    twin = ax_batch.twinx()
    for k, d in enumerate(pipeline.drivers):
        bs = [b for b in pipeline.batches if (b.job, b.driver) == (d.job, d.driver)]
        colour = DRIVER_COLOURS[k % len(DRIVER_COLOURS)]
        xs = [b.t - t0 for b in bs]
        name = f"{d.job} driver {d.driver}"
        ax_rate.plot(xs, [b.processed_rows_per_s for b in bs], "o-", ms=3, color=colour, label=f"{name} processed")
        ax_rate.plot(xs, [b.input_rows_per_s for b in bs], "x:", ms=3, color=colour, label=f"{name} in")
        ax_batch.bar(xs, [b.duration_ms / 1000 for b in bs], width=0.3, color=colour, alpha=0.5, label=name)
        twin.plot(xs, [b.behind if b.behind is not None else b.lag for b in bs], "-", color=colour, linewidth=1)
    for a, b in zip(pipeline.drivers, pipeline.drivers[1:], strict=False):
        if a.job == b.job and a.last_t is not None and b.first_t is not None:
            ax_rate.axvspan(a.last_t - t0, b.first_t - t0, color="0.85", zorder=0)
            ax_rate.text((a.last_t + b.first_t) / 2 - t0, 0.5, "no driver", transform=ax_rate.get_xaxis_transform(),
                         ha="center", fontsize=7, color="0.35")  # fmt: skip
    for s in pipeline.stalls:
        if s.stall_s is not None and s.stall_from is not None and s.stalled:
            for ax in (ax_rate, ax_batch):
                ax.axvspan(s.stall_from - t0, s.stall_from - t0 + s.stall_s, color="tab:red", alpha=0.12, zorder=0)
            ax_batch.text(s.stall_from - t0 + s.stall_s / 2, 0.9, f"stall {s.stall_s:.1f}s", fontsize=7,
                          ha="center", color="tab:red", transform=ax_batch.get_xaxis_transform())  # fmt: skip
    ax_rate.set_ylabel("Spark rows/s")
    ax_rate.legend(loc="upper left", fontsize=7, ncol=2)
    ax_batch.set_ylabel("batch duration s")
    twin.set_ylabel("records behind (lines)")
    twin.set_ylim(bottom=0)
    ax_batch.set_xlabel("seconds since start")


def pipeline_context(pipeline: Any, started: float) -> dict[str, Any]:
    """The report's pipeline tables: a stall per fault and job, a row per driver, a row per micro-batch."""
    from clusterctl.chaos.pipeline_timeline import STALL_FACTOR

    if pipeline is None:
        return {"pipeline": None, "stall_rows": [], "driver_rows": [], "batch_rows": [], "stall_factor": STALL_FACTOR}
    stall_rows = [
        [f"{s.action} {s.target}", f"{s.t - started:.1f}", s.job, s.stall_s, s.normal_s,
         "yes" if s.stalled else "no", s.write_gap_s, s.batches_after, s.lag_before, s.lag_peak, s.behind_peak_s]
        for s in pipeline.stalls
    ]  # fmt: skip
    driver_rows = [
        [d.job, d.driver, d.batches, f"{d.first_batch}..{d.last_batch}" if d.batches else "-",
         _since(d.first_t, started), _since(d.last_t, started), d.input_rows]
        for d in pipeline.drivers
    ]  # fmt: skip
    batch_rows = [
        [b.job, b.driver, b.batch_id, f"{b.t - started:.1f}", b.input_rows, b.input_rows_per_s,
         b.processed_rows_per_s, b.duration_ms, b.lag, b.behind, b.behind_s]
        for b in pipeline.batches
    ]  # fmt: skip
    return {"pipeline": pipeline, "stall_rows": stall_rows, "driver_rows": driver_rows, "batch_rows": batch_rows,
            "stall_factor": STALL_FACTOR}  # fmt: skip


def _since(t: float | None, started: float) -> str | None:
    return None if t is None else f"{t - started:.1f}"


def group_context(group: Any, started: float) -> dict[str, Any]:
    """The report's group tables: a consume gap per fault (with the setting that bounds it), every assignment change."""
    if group is None:
        return {"group": None, "group_gaps": [], "group_changes": []}
    gaps = [
        [f"{g.action} {g.target}", f"{g.t - started:.1f}", g.gap_s, g.bound, None if g.partition is None else
         f"p{g.partition}", _since(g.gap_from, started), g.member_before, g.member_after, g.unassigned_s,
         g.others_gap_s, g.stalled_partitions, g.members_revoked, g.assignment_changes]
        for g in group.gaps
    ]  # fmt: skip
    changes = [[f"{c.t - started:.1f}", c.member, c.kind, ",".join(f"p{p}" for p in c.partitions)]
               for c in group.changes]  # fmt: skip
    return {"group": group, "group_gaps": gaps, "group_changes": changes}
