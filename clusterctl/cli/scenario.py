"""CLI for the 'scenario' noun: list, validate and run drill scenarios (scenarios/*.yaml)."""

from pathlib import Path
from typing import Annotated

import typer

from clusterctl.cli.common import BootstrapOpt, JsonOpt, bootstrap_servers, get_spec

scenario_app = typer.Typer(name="scenario", help="Failover drills described as YAML steps.", no_args_is_help=True)

FileArg = Annotated[str, typer.Argument(help="scenario file, or the name of a shipped scenario (scenario list)")]


@scenario_app.command("list")
def list_(as_json: JsonOpt = False) -> None:
    """The shipped scenarios."""
    from clusterctl.chaos.scenario import list_scenarios
    from clusterctl.output import Column, emit

    cols = [Column("Name", "name"), Column("Requires", "requires"), Column("Steps", "steps", justify="right"),
            Column("Description", "description")]  # fmt: skip
    emit(list_scenarios(), as_json=as_json, columns=cols)


@scenario_app.command("validate")
def validate(file: FileArg, as_json: JsonOpt = False) -> None:
    """Check a scenario file without running it."""
    from clusterctl.chaos.scenario import load_scenario
    from clusterctl.output import Column, emit

    sc = load_scenario(file)
    steps = [{"index": i, "step": s.describe()} for i, s in enumerate(sc.parsed_steps(), 1)]
    data = {"name": sc.name, "requires": sc.requires, "steps": steps} if as_json else steps
    cols = [Column("#", "index", justify="right"), Column("Step", "step")]
    emit(data, as_json=as_json, columns=cols, title=f"{sc.name}: valid")


@scenario_app.command("run")
def run(
    file: FileArg,
    report_dir: Annotated[
        Path | None,
        typer.Option("--report-dir", help="where report.json/report.html/ledger go (default reports/<run>)"),
    ] = None,
    bootstrap_server: BootstrapOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run a scenario against the spec's cluster; write a JSON and an HTML report; exit 6 if it failed."""
    from clusterctl.chaos.report import write_reports
    from clusterctl.chaos.scenario import Runner, StepFailed, load_scenario
    from clusterctl.output import Column, emit, info

    sc = load_scenario(file)
    spec = get_spec()
    runner = Runner(spec, sc, bootstrap_servers(bootstrap_server), report_dir, progress=info, file=str(file))
    result = runner.run()
    _json, html = write_reports(result, runner.work_dir)
    if as_json:
        from dataclasses import replace

        emit(replace(result, timeline=None), as_json=True)
    else:
        emit(
            result.steps,
            as_json=False,
            title=f"scenario {sc.name}: {'PASS' if result.ok else 'FAIL'}",
            columns=[Column("#", "index", justify="right"), Column("Step", "description"), Column("Ok", "ok"),
                     Column("Took s", "took_s", justify="right"), Column("Detail", "detail")],
        )  # fmt: skip
        if result.faults:
            emit(
                result.faults,
                as_json=False,
                title="faults",
                columns=[Column("Fault", "action"), Column("Target", "target"),
                         Column("Detected s", "detected_s", justify="right"), Column("By", "detected_by"),
                         Column("Quorum lost s", "quorum_lost_s", justify="right"),
                         Column("Quorum back s", "quorum_ok_after_heal_s", justify="right")],
            )  # fmt: skip
            parts = [
                (f, p)
                for f in result.faults
                for p in f.partitions
                if p.led_by_target or p.isr_shrunk_s or p.write_gap_s
            ]
            if parts:
                emit(
                    parts,
                    as_json=False,
                    title="failover per partition",
                    columns=[Column("Fault", lambda r: r[0].action),
                             Column("Partition", lambda r: f"{r[1].topic}-{r[1].partition}"),
                             Column("Leader before", lambda r: r[1].leader_before, justify="right"),
                             Column("New leader", lambda r: r[1].new_leader, justify="right"),
                             Column("New leader s", lambda r: r[1].time_to_new_leader_s, justify="right"),
                             Column("ISR shrunk s", lambda r: r[1].isr_shrunk_s, justify="right"),
                             Column("ISR full s", lambda r: r[1].isr_full_s, justify="right"),
                             Column("Write gap s", lambda r: r[1].write_gap_s, justify="right")],
                )  # fmt: skip
        if result.verify is not None:
            info(f"verification: {result.verify.summary()}")
        info(f"report: {html}")
    if not result.ok:
        raise StepFailed(result.error or "scenario failed", hint=f"see {html}")


def register(app: typer.Typer) -> None:
    """Attach `scenario` to the root app."""
    app.add_typer(scenario_app)
