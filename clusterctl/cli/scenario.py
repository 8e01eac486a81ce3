"""CLI for the 'scenario' noun: list, validate and run drill scenarios (scenarios/*.yaml)."""

from pathlib import Path
from typing import Annotated, Any

import typer

from clusterctl.cli.common import BootstrapOpt, JsonOpt, bootstrap_servers, get_spec, state, uninterrupted
from clusterctl.spec import validate

scenario_app = typer.Typer(name="scenario", help="Failover drills described as YAML steps.", no_args_is_help=True)

FileArg = Annotated[str, typer.Argument(help="scenario file, or the name of a shipped scenario (scenario list)")]


@scenario_app.command("list")
def cmd_scenario_list(as_json: JsonOpt = False) -> None:
    """The shipped scenarios."""
    from clusterctl.chaos.scenario import list_scenarios
    from clusterctl.output import Column, emit

    cols = [Column("Name", "name"), Column("Requires", "requires"), Column("Mode", "mode"), Column("Expect", "expect"),
            Column("Steps", "steps", justify="right"), Column("Description", "description")]  # fmt: skip
    emit(list_scenarios(), as_json=as_json, columns=cols)


@scenario_app.command("validate")
def cmd_scenario_validate(file: FileArg, as_json: JsonOpt = False) -> None:
    """Check a scenario file without running it."""
    from clusterctl.chaos.migration_steps import planned_from_scratch
    from clusterctl.chaos.scenario import load_scenario
    from clusterctl.output import Column, emit

    sc = load_scenario(file)
    _check_against_local_spec(sc)
    parsed = sc.parsed_steps()
    plans = planned_from_scratch([(s.kind, s.args) for s in parsed], sc.name)
    steps = [
        {"index": i, "step": s.describe() + (f" ({plans[i]})" if s.kind == "migrate" and i in plans else "")}
        for i, s in enumerate(parsed, 1)
    ]
    data = {"name": sc.name, "requires": sc.requires, "expect": sc.expect, "steps": steps} if as_json else steps
    cols = [Column("#", "index", justify="right"), Column("Step", "step")]
    emit(data, as_json=as_json, columns=cols, title=f"{sc.name}: valid")


def _check_against_local_spec(sc: Any) -> None:
    """With a spec at hand (-s, $CLUSTERCTL_SPEC or ./clusterctl.yaml) whose mode the scenario is for, every broker,
    node and id a step names must exist in it and every condition fit its mode (exit 2), as `scenario run` checks
    when it starts. No spec, or one that does not load: the file alone is checked."""
    from clusterctl.chaos.scenario_checks import check_against_spec
    from clusterctl.errors import SpecError

    try:
        if not state.spec_path.is_file():
            return
        spec = get_spec()
    except (OSError, SpecError):
        return
    if sc.mode in ("any", spec.kafka.mode):
        check_against_spec(sc, spec)


@scenario_app.command("run")
def cmd_scenario_run(
    file: FileArg,
    report_dir: Annotated[
        Path | None,
        typer.Option("--report-dir", help="where report.json/report.html/ledger go (default reports/<run>)"),
    ] = None,
    repeat: Annotated[
        int | None,
        typer.Option(
            "--repeat",
            min=1,
            help="run it as a series of N (1 to 100): per-run numbers, their median/p95/max and the series' summary "
            "(its shape also for N=1)",
        ),
    ] = None,
    bootstrap_server: BootstrapOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run a scenario against the spec's cluster; write a JSON and an HTML report; exit 6 if it failed, 75 if a fault
    could not be applied (nothing was tested; what had been applied is undone)."""
    from dataclasses import replace

    from clusterctl.chaos.report import write_reports
    from clusterctl.chaos.results import StepFailed
    from clusterctl.chaos.runner import Runner
    from clusterctl.chaos.scenario import load_scenario
    from clusterctl.errors import FaultNotAppliedError
    from clusterctl.output import emit, info

    sc = load_scenario(file)
    if report_dir is not None:  # checked before the drill, not when its report is written
        validate.output_dir(report_dir, "--report-dir")
    if repeat is not None:
        validate.at_most(repeat, "--repeat", validate.MAX_REPEAT)
    spec = get_spec()
    bootstrap = bootstrap_servers(bootstrap_server)
    if repeat is not None:
        _run_repeated(sc, spec, bootstrap, str(file), repeat, report_dir, as_json)
        return
    runner = Runner(spec, sc, bootstrap, report_dir, progress=info, file=str(file), spec_path=state.spec_path)
    result = runner.run()
    with uninterrupted():  # the reports are written whole; a signal meanwhile ends the command right after
        _json, html = write_reports(result, runner.work_dir)
        if as_json:
            if result.ok:  # a failed run's result goes out once, inside the --json error object
                emit(replace(result, timeline=None), as_json=True)
        else:
            _print_result(result)
            info(f"report: {html}")
    if result.interrupted:  # a stop signal: the partial report is written; exit 128 + the signal, "interrupted"
        stop = KeyboardInterrupt()
        stop.result = replace(result, timeline=None) if as_json else None  # type: ignore[attr-defined]
        raise stop
    if not result.ok:
        cls = FaultNotAppliedError if result.fault_not_applied else StepFailed
        err = cls(result.error or "scenario failed", hint=f"see {html}")
        err.result = replace(result, timeline=None) if as_json else None
        raise err


def _print_result(result: Any) -> None:
    from clusterctl.chaos.bounds import explain
    from clusterctl.output import Column, emit, info

    settings = result.bounds
    emit(
        result.steps,
        as_json=False,
        title=f"scenario {result.scenario}: {result.verdict}"
        + (" (negative control: expects loss)" if result.expect == "loss" else ""),
        columns=[Column("#", "index", justify="right"), Column("Step", "description"), Column("Ok", "ok"),
                 Column("Took s", "took_s", justify="right"), Column("Detail", "detail")],
    )  # fmt: skip
    if result.freeze_retries:
        info(f"freeze retries: {result.freeze_retries} (a busy container's pause was asked again until it took)")
    if result.faults:
        emit(
            result.faults,
            as_json=False,
            title="faults",
            columns=[Column("Fault", "action"), Column("Target", "target"),
                     Column("Detected s", lambda f: explain(f.detected_s, f.action, "detected", False, settings)),
                     Column("By", "detected_by"),
                     Column("Quorum lost s", "quorum_lost_s", justify="right"),
                     Column("Quorum back s", "quorum_ok_after_heal_s", justify="right")],
        )  # fmt: skip
        parts = [
            (f, p) for f in result.faults for p in f.partitions if p.led_by_target or p.isr_shrunk_s or p.write_gap_s
        ]
        if parts:

            def ex(metric: str, attr: str) -> Any:
                return lambda r: explain(
                    getattr(r[1], attr), r[0].action, metric, r[1].led_by_target, settings, r[1].elected_by
                )

            emit(
                parts,
                as_json=False,
                title="failover per partition (≈ the broker setting or election rule that bounds the time)",
                columns=[Column("Fault", lambda r: f"{r[0].action} {r[0].target}"),
                         Column("Partition", lambda r: f"{r[1].topic}-{r[1].partition}"),
                         Column("Leader before", lambda r: r[1].leader_before, justify="right"),
                         Column("New leader", lambda r: r[1].new_leader, justify="right"),
                         Column("New leader s", ex("new_leader", "time_to_new_leader_s")),
                         Column("ISR shrunk s", ex("isr_shrunk", "isr_shrunk_s")),
                         Column("ISR full s", lambda r: r[1].isr_full_s, justify="right"),
                         Column("Write gap s", ex("write_gap", "write_gap_s")),
                         Column("Also explained by", lambda r: ", ".join(r[1].also) or "-")],
            )  # fmt: skip
    if result.phases:
        emit(
            result.phases,
            as_json=False,
            title="migration phases (longest write gap: the longest wait for an ack from the phase's start on)",
            columns=[Column("Phase", "phase"), Column("Start s", "started_s", justify="right"),
                     Column("Seconds", "seconds", justify="right"), Column("Done", "done"),
                     Column("Longest write gap s", "write_gap_s", justify="right"),
                     Column("Partition", "write_gap_partition"),
                     Column("Leader moves", "leader_moves", justify="right"),
                     Column("Controller changes", "controller_changes", justify="right")],
        )  # fmt: skip
    v = result.verify
    if v is not None:
        info(f"verification: {v.summary()}")
        lost = [p for p in v.partitions if p.lost]
        if lost:
            emit(
                lost,
                as_json=False,
                title="lost acknowledged offsets",
                columns=[Column("Partition", lambda p: f"{p.topic}-{p.partition}"),
                         Column("Acked", "acked", justify="right"), Column("Lost", "lost", justify="right"),
                         Column("Lost offsets", "lost_offsets")],
            )  # fmt: skip
            info("allowed by: " + ("; ".join(result.loss_settings) or "no setting of this scenario"))
    _print_elections(result)
    _print_pipeline(result)
    _print_group(result)
    _print_quorum(result)


def _print_group(result: Any) -> None:
    """The drill group's consume gap per fault, with the setting that bounds it, and its verification."""
    from clusterctl.output import Column, emit, info

    g = result.group
    if g is None:
        return
    emit(
        g.gaps,
        as_json=False,
        title=f"group {g.group} ({g.protocol} protocol, {g.members} members): consume gap per fault (the longest "
        f"wait of a partition with records to read; normal {g.normal_s:.1f}s)",
        columns=[Column("Fault", lambda x: f"{x.action} {x.target}"),
                 Column("Consume gap s", lambda x: "-" if x.gap_s is None else f"{x.gap_s:.1f}", justify="right"),
                 Column("≈ bounded by", "bound"), Column("Partition", "partition", justify="right"),
                 Column("Unassigned s", "unassigned_s", justify="right"),
                 Column("Others' gap s", "others_gap_s", justify="right"),
                 Column("Partitions stalled", "stalled_partitions", justify="right"),
                 Column("Members revoked", "members_revoked", justify="right")],
    )  # fmt: skip
    if g.verify is not None:
        info(f"group verification: {g.verify.summary()}")


def _print_quorum(result: Any) -> None:
    """A dynamic-quorum drill: the metadata-write probe and each voter change."""
    from clusterctl.chaos.quorum_run import metadata_line
    from clusterctl.output import Column, emit, info

    if result.metadata_writes is not None:
        info(metadata_line(result.metadata_writes))
    if result.quorum_changes:
        emit(
            result.quorum_changes,
            as_json=False,
            title="controller quorum changes",
            columns=[Column("Change", "action"), Column("Controller", "node_id", justify="right"),
                     Column("Directory id", "directory_id"), Column("Took s", "seconds", justify="right"),
                     Column("Voters after", lambda c: ", ".join(c.voters))],
        )  # fmt: skip


def _print_elections(result: Any) -> None:
    """Each election out of a leaderless partition, or from outside the ISR, with the rule that allowed it."""
    from clusterctl.output import Column, emit, info

    shown = [e for e in result.elections if e.leaderless_s is not None or e.rule != "isr"]
    if shown:
        emit(
            shown,
            as_json=False,
            title="elections (the rule that allowed each: isr, elr, last-known-leader, unclean; KIP-966)",
            columns=[Column("Partition", lambda e: f"{e.topic}-{e.partition}"),
                     Column("Leader before", "leader_before", justify="right"),
                     Column("New leader", "leader", justify="right"), Column("Rule", "rule"),
                     Column("Leaderless s", lambda e: "-" if e.leaderless_s is None else
                            f"{e.leaderless_s:.1f} ≈ until broker {e.leader} was back"),
                     Column("ISR before", "isr_before"), Column("ELR before", "elr_before"),
                     Column("Last known ELR", "last_known_before")],
        )  # fmt: skip
    if result.safety:
        info(f"safety: {result.safety}")


def _print_pipeline(result: Any) -> None:
    """The Spark jobs' verdict and each fault's pipeline stall next to Kafka's write gap."""
    from clusterctl.output import Column, emit, info

    if result.spark is not None:
        info(f"Spark results: {result.spark.summary()}")
    if result.pipeline is not None and result.pipeline.stalls:
        emit(
            result.pipeline.stalls,
            as_json=False,
            title="pipeline stall per fault (the longest wait for a Spark micro-batch that read input)",
            columns=[Column("Fault", lambda s: f"{s.action} {s.target}"), Column("Job", "job"),
                     Column("Stall s", "stall_s", justify="right"), Column("Normal s", "normal_s", justify="right"),
                     Column("Stalled", "stalled"), Column("Kafka write gap s", "write_gap_s", justify="right"),
                     Column("Behind peak", "lag_peak", justify="right"),
                     Column("Oldest unread peak s", "behind_peak_s", justify="right")],
        )  # fmt: skip


def _run_repeated(
    sc: Any, spec: Any, bootstrap: str, file: str, n: int, report_dir: Path | None, as_json: bool
) -> None:
    import uuid

    from clusterctl.chaos import stats
    from clusterctl.chaos.bounds import settings_of
    from clusterctl.chaos.report import write_reports, write_summary_html
    from clusterctl.chaos.results import StepFailed
    from clusterctl.chaos.runner import Runner
    from clusterctl.output import info

    base = report_dir or Path("reports") / f"{sc.name}-x{n}-{uuid.uuid4().hex[:6]}"

    def run_once(i: int, directory: Path) -> Any:
        info(f"run {i}/{n}")
        runner = Runner(
            spec, sc, bootstrap, directory, progress=lambda m: info(f"  {m}"), file=file, spec_path=state.spec_path
        )
        result = runner.run()
        write_reports(result, directory)
        return result

    def show(r: stats.RunStats) -> None:
        info(
            f"run {r.run}/{n}: {r.verdict} acked {r.acked} lost {r.lost} duplicated {r.duplicated} "
            f"detected {r.detected_s} new leader {r.new_leader_s} ISR shrunk {r.isr_shrunk_s} write gap {r.write_gap_s}"
            + ("" if r.spark_exact is None else f" Spark {'exact' if r.spark_exact else 'NOT exact'} stall {r.stall_s}")
            + ("" if r.metadata_gap_s is None else f" metadata gap {r.metadata_gap_s} (load {r.load_average})")
            + (f" elections {r.elections}" if r.elections else "")
        )
        if r.safety:
            info(f"  safety: {r.safety}")

    rep = stats.repeat(run_once, n, base, sc, settings_of(spec), on_run=show)
    with uninterrupted():  # the summary is written whole; a signal meanwhile ends the command right after
        write_summary_html(rep, base / "summary.html")
        _show_repeated(rep, sc, n, as_json)
    if rep.interrupted:  # one stop signal ends the series: 128 + the signal, the summary inside --json's error
        stop = KeyboardInterrupt()
        stop.result = rep if as_json else None  # type: ignore[attr-defined]
        raise stop
    if not rep.ok:
        err = StepFailed(f"{len(rep.runs) - rep.passed} of {len(rep.runs)} runs failed", hint=f"see {rep.report_html}")
        err.result = rep if as_json else None
        raise err


def _show_repeated(rep: Any, sc: Any, n: int, as_json: bool) -> None:
    from clusterctl.output import Column, emit, info

    if as_json:
        if rep.ok and not rep.interrupted:  # otherwise the summary goes out once, inside the --json error object
            emit(rep, as_json=True)
    else:
        emit(
            rep.runs,
            as_json=False,
            title=f"scenario {sc.name} x{len(rep.runs)} of {n}: {rep.passed}/{len(rep.runs)} passed"
            + (" (interrupted)" if rep.interrupted else ""),
            columns=[Column("Run", "run", justify="right"), Column("Verdict", "verdict"),
                     Column("Acked", "acked", justify="right"), Column("Lost", "lost", justify="right"),
                     Column("Duplicated", "duplicated", justify="right"),
                     Column("Detected s", "detected_s", justify="right"),
                     Column("New leader s", "new_leader_s", justify="right"),
                     Column("ISR shrunk s", "isr_shrunk_s", justify="right"),
                     Column("Write gap s", "write_gap_s", justify="right"),
                     Column("Stall s", "stall_s", justify="right"),
                     Column("Metadata gap s", "metadata_gap_s", justify="right"),
                     Column("Load", "load_average", justify="right"),
                     Column("Elections (not ISR)", "elections")],
        )  # fmt: skip
        emit(
            rep.summary,
            as_json=False,
            title="over the runs",
            columns=[Column("Metric", "metric"), Column("Runs", "n", justify="right"),
                     Column("Median", "median", justify="right"), Column("p95", "p95", justify="right"),
                     Column("Max", "max", justify="right"), Column("Bounded by", "bound")],
        )  # fmt: skip
        info(f"summary: {rep.report_html}")
        if rep.interrupted:
            info(f"interrupted in run {len(rep.runs)} of {n}: that run was healed; no further run started")


@scenario_app.command("compare")
def cmd_scenario_compare(
    file: FileArg,
    modes: Annotated[
        str | None,
        typer.Option("--modes", help="comma-separated: zookeeper, kraft (default: both; not with --versions)"),
    ] = None,
    versions: Annotated[
        str | None,
        typer.Option(
            "--versions",
            help="comma-separated Kafka versions (3.9.2,4.4.0), each on its offline image built here, all in KRaft "
            "mode, instead of --modes",
            show_default=False,
        ),
    ] = None,
    group_protocols: Annotated[
        str | None,
        typer.Option(
            "--group-protocols",
            help="comma-separated: classic, consumer: a group drill (start_group) once per protocol in each round, "
            "on the spec's own cluster, instead of --modes",
            show_default=False,
        ),
    ] = None,
    repeat: Annotated[int, typer.Option("--repeat", "-n", help="runs per mode, version or protocol (1 to 100)")] = 3,
    results: Annotated[
        Path, typer.Option("--results", help="JSON-lines file each run is appended to; the table covers all its rows")
    ] = Path("reports/compare.jsonl"),
    report_dir: Annotated[Path, typer.Option("--report-dir", help="where each run's report goes")] = Path("reports"),
    summary_only: Annotated[
        bool, typer.Option("--summary-only", help="run nothing: summarise the rows already in --results")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Run the same drill on a ZooKeeper-mode and a KRaft-mode cluster (--modes), on two Kafka versions in KRaft
    mode (--versions), or with each consumer group protocol (--group-protocols); print the times side by side."""
    from clusterctl.chaos import compare as cmp
    from clusterctl.chaos.scenario import load_scenario
    from clusterctl.errors import UsageError
    from clusterctl.output import Column, emit, info
    from clusterctl.spec import kafkadist

    if modes is not None and versions is not None:
        raise UsageError(
            "--modes and --versions are mutually exclusive: --versions compares Kafka versions in KRaft mode"
        )
    if group_protocols is not None and (modes is not None or versions is not None):
        raise UsageError("--group-protocols runs on the spec's own cluster: it is not given with --modes or --versions")
    sc = load_scenario(file)
    validate.at_most(repeat, "--repeat", validate.MAX_REPEAT)
    validate.output_file(results, "--results")
    if group_protocols is not None:
        summary, runs, title, key = _compare_protocols(sc, group_protocols, repeat, results, report_dir, summary_only)
    elif versions is not None:
        # checked against what is built only when something is to run: --summary-only reads the results file alone
        wanted = cmp.parse_versions(versions, None if summary_only else kafkadist.built_versions())
        if not summary_only:
            validate.output_dir(report_dir, "--report-dir")
            cmp.compare(get_spec(), sc, ["kraft"], repeat, results, report_dir, progress=info, versions=wanted)
        summary = cmp.summarize(cmp.load_runs(results, sc.name), versions=wanted)
        runs = [r for r in cmp.load_runs(results, sc.name) if r.by == "version" and r.kafka_version in wanted]
        title = f"{sc.name}: Kafka {' vs '.join(wanted)}, KRaft ({results})"
        key = "versions"
    else:
        modes = "zookeeper,kraft" if modes is None else modes
        wanted = [m.strip() for m in modes.split(",") if m.strip()]
        if not wanted or len(set(wanted)) != len(wanted) or any(m not in cmp.MODES for m in wanted):
            raise UsageError(f"--modes takes zookeeper and/or kraft (comma-separated, once each), got {modes!r}")
        if not summary_only:
            validate.output_dir(report_dir, "--report-dir")
            cmp.compare(get_spec(), sc, wanted, repeat, results, report_dir, progress=info)
        runs = [r for r in cmp.load_runs(results, sc.name) if r.by == "mode" and r.mode in wanted]
        summary = cmp.summarize(runs)
        title = f"{sc.name}: ZooKeeper vs KRaft ({results})"
        key = "modes"
    if as_json:
        emit({"scenario": sc.name, key: summary, "runs": runs}, as_json=True)
        return
    if not summary:
        info(f"no runs of {sc.name} in {results}")
        return
    labels, rows = cmp.side_by_side(summary)
    emit(rows, as_json=False, columns=[Column("", "metric")] + [Column(k, k) for k in labels], title=title)


def _compare_protocols(
    sc: Any, text: str, repeat: int, results: Path, report_dir: Path, summary_only: bool
) -> tuple[list[Any], list[Any], str, str]:
    """`--group-protocols`: run the series (unless --summary-only) and summarise the results file's rows of it."""
    from clusterctl.chaos import compare as cmp
    from clusterctl.chaos.compare_groups import parse_group_protocols, scenario_for_protocol
    from clusterctl.output import info

    wanted = parse_group_protocols(text)
    for p in wanted:  # a scenario without a group is refused before any work
        scenario_for_protocol(sc, p)
    if not summary_only:
        validate.output_dir(report_dir, "--report-dir")
        spec = get_spec()
        cmp.compare(spec, sc, [spec.kafka.mode], repeat, results, report_dir, progress=info, group_protocols=wanted)
    runs = [r for r in cmp.load_runs(results, sc.name) if r.by == "group-protocol" and r.group_protocol in wanted]
    title = f"{sc.name}: consumer group protocols {' vs '.join(wanted)} ({results})"
    return cmp.summarize(runs, protocols=wanted), runs, title, "group_protocols"


def register(app: typer.Typer) -> None:
    """Attach `scenario` to the root app."""
    app.add_typer(scenario_app)
