"""CLI for `metrics`: each Kafka node's health from its JMX exporter (thin: kafka/metrics, output)."""

from typing import TYPE_CHECKING, Annotated

import typer

from clusterctl.cli.common import JsonOpt, get_spec

if TYPE_CHECKING:
    from clusterctl.output import Column

WATCH_INTERVAL_S = 2.0


def _rate(v: object) -> str:
    return "-" if v is None else f"{v:.1f}"


def _bytes(v: object) -> str:
    if not isinstance(v, float):
        return "-"
    return f"{v / 1e6:.2f} MB/s" if v >= 1e5 else f"{v / 1e3:.1f} kB/s"


def _columns() -> list["Column"]:
    from clusterctl.output import Column

    return [
        Column("Node", "node_id", justify="right"),
        Column("Role", "role"),
        Column("URP", "under_replicated", justify="right"),
        Column("Under min ISR", "under_min_isr", justify="right"),
        Column("Offline", "offline_partitions", justify="right"),
        Column("Leaders", "leaders", justify="right"),
        Column("Partitions", "partitions", justify="right"),
        Column("ISR shrinks/s", "isr_shrinks_per_s", justify="right", fmt=_rate),
        Column("ISR expands/s", "isr_expands_per_s", justify="right", fmt=_rate),
        Column("Bytes in", "bytes_in_per_s", justify="right", fmt=_bytes),
        Column("Bytes out", "bytes_out_per_s", justify="right", fmt=_bytes),
        Column("Produce p99 ms", "produce_p99_ms", justify="right", fmt=_rate),
        Column("Handler idle", "handler_idle", justify="right", fmt=lambda v: "-" if v is None else f"{v:.0%}"),
        Column("Error", lambda n: n.error or ""),
    ]


def cmd_metrics(
    broker: Annotated[int | None, typer.Option("--broker", help="only this broker (its node id)")] = None,
    watch: Annotated[bool, typer.Option("--watch", help="refresh every 2 s until Ctrl-C (a live table)")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Per node: under-replicated and under-min-ISR partitions, offline partitions, leaders, partitions, ISR
    shrinks/expands per second, bytes in/out per second, produce p99, handler idle, read from each node's JMX
    exporter (monitoring.enabled) over the cluster network; rates over 1 s. Exit 2 when monitoring is off,
    4 when a node's exporter does not answer (what the others report is still printed)."""
    from clusterctl.errors import UnreachableError, UsageError
    from clusterctl.kafka import metrics
    from clusterctl.output import emit, info, live

    if watch and as_json:
        raise UsageError("--watch shows a live table: use it without --json")
    spec = get_spec()
    if broker is not None:
        metrics.targets(spec, broker)  # an unknown broker or monitoring off: one line before any scrape
    if watch:
        live(
            lambda before: metrics.health(spec, broker, before=before),
            lambda r: r.nodes,
            _columns(),
            lambda r: r.problems,
            WATCH_INTERVAL_S,
            title=f"metrics {spec.name} (every {WATCH_INTERVAL_S:g} s, Ctrl-C to stop)",
        )
        return
    result, _ = metrics.health(spec, broker)
    if not as_json:
        emit(result, as_json=False, columns=_columns(), rows=result.nodes, title=f"metrics {spec.name}")
        for line in result.problems:
            info(line)
    missing = result.unanswered
    if missing:
        err = UnreachableError(f"{len(missing)} of {len(result.nodes)} exporters did not answer: {missing[0].error}")
        err.result = result
        raise err
    if as_json:
        emit(result, as_json=True)


def register(app: typer.Typer) -> None:
    """Attach `metrics` to the root app."""
    app.command("metrics")(cmd_metrics)
