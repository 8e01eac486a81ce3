"""CLI for the 'spark' noun (thin: parse, call the domain layer, render through output)."""

from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Annotated, Any

import typer

from clusterctl.cli.common import (
    BootstrapOpt,
    JsonOpt,
    bootstrap_servers,
    get_spec,
    parse_kv,
    seconds_option,
    timeout_option,
)
from clusterctl.errors import ClusterctlError, UsageError, VerificationError
from clusterctl.output import Column, emit, event_json, info

if TYPE_CHECKING:
    from clusterctl.spec.model import ClusterSpec


def _runner() -> ModuleType:
    """The runner module; without PySpark (the `spark` extra) a one-line error instead of a traceback."""
    try:
        from clusterctl.spark import runner
    except ImportError as exc:
        raise ClusterctlError(
            f"Spark jobs need PySpark and pyarrow ({exc})", hint="pip install 'clusterctl[spark]'"
        ) from None
    return runner


spark_app = typer.Typer(
    help="Run Spark Structured Streaming jobs (spark_jobs/) on the cluster's topics.", no_args_is_help=True
)


@spark_app.command("list")
def cmd_spark_list(as_json: JsonOpt = False) -> None:
    """List the jobs in spark_jobs/ with their kind and default options."""
    jobs = _runner().list_jobs()
    emit(
        jobs,
        as_json=as_json,
        columns=[
            Column("Job", "name", style="bold"),
            Column("Kind", "kind"),
            Column("Options (defaults)", lambda j: " ".join(f"{k}={v!r}" for k, v in j.options.items())),
            Column("Description", "description"),
        ],
        empty="no Spark jobs found",
    )


TriggerOpt = Annotated[
    float,
    typer.Option(
        "--trigger",
        help="micro-batch interval in seconds (0: back to back; at most a day)",
        callback=seconds_option(allow_zero=True),
    ),
]
UntilIdleOpt = Annotated[
    float | None,
    typer.Option(
        "--until-idle",
        help="stop a streaming job after this many seconds without new input (at most a day)",
        callback=seconds_option(),
    ),
]
StreamTimeoutOpt = Annotated[float | None, timeout_option("stop a streaming job after this many seconds")]


@spark_app.command("run")
def cmd_spark_run(
    job: Annotated[
        str,
        typer.Argument(
            help="job name (see: clusterctl spark list), or a PySpark script of yours (path/to/script.py), run "
            "unchanged with Spark's Kafka connector and KAFKA_BOOTSTRAP_SERVERS set to the cluster's"
        ),
    ],
    script_args: Annotated[
        list[str] | None, typer.Argument(help="a script's own arguments (after --)", show_default=False)
    ] = None,
    master: Annotated[
        str,
        typer.Option(
            "--master",
            help="Spark master: local[*], local[N], cluster (the spec's standalone master: spark.enabled) "
            "or spark://host:port (its workers need clusterctl installed)",
        ),
    ] = ("local[*]"),
    checkpoint: Annotated[
        Path | None,
        typer.Option("--checkpoint", help="checkpoint directory; rerun with the same one to resume (default: temp)"),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="resume from --checkpoint: it must exist (exit 8 when missing, or another job's or topics')",
        ),
    ] = False,
    trigger: TriggerOpt = 1.0,
    until_idle: UntilIdleOpt = None,
    timeout: StreamTimeoutOpt = None,
    available_now: Annotated[
        bool,
        typer.Option(
            "--available-now", help="process what the topics hold now (in maxOffsetsPerTrigger batches), then stop"
        ),
    ] = False,
    connector: Annotated[
        str | None,
        typer.Option(
            "--connector",
            help="kafka: Spark's own (spark-sql-kafka-0-10 from Maven Central, cached after the first run); "
            "clusterctl: clusterctl's Python connector (no jar needed). Default: kafka, or clusterctl when the "
            "spec's kafka.engine is tansu",
            show_default=False,
        ),
    ] = None,
    option: Annotated[
        list[str] | None,
        typer.Option("--option", "-o", help="job or connector option k=v (repeatable; e.g. input=words)"),
    ] = None,
    conf: Annotated[list[str] | None, typer.Option("--conf", help="Spark configuration k=v (repeatable)")] = None,
    bootstrap: BootstrapOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Run a Spark job on the cluster's topics (streaming jobs run until idle, --timeout or Ctrl-C), or your own
    PySpark script as spark-submit would (its exit status is the command's)."""
    runner = _runner()
    from clusterctl.spark import script

    if script.is_script(job):
        given = {
            "--checkpoint": checkpoint is not None,
            "--resume": resume,
            "--available-now": available_now,
            "--until-idle": until_idle is not None,
            "--timeout": timeout is not None,
            "--option": bool(option),
            "--json": as_json,
            "--connector clusterctl": connector is not None and runner.connector_name(connector) != "kafka",
        }
        for flag, used in given.items():
            if used:
                raise UsageError(f"spark run {job}: {flag} is for jobs of spark_jobs/, not for a script")
        _run_script(script.check_script(job), script_args or [], master, conf, bootstrap)
        return
    if script_args:
        raise UsageError(f"job {job} takes no arguments ({script_args[0]!r}); its options go in --option k=v")
    if trigger < 0:
        raise UsageError(f"--trigger must be >= 0, got {trigger}")
    if until_idle is not None and until_idle <= 0:
        raise UsageError(f"--until-idle must be > 0, got {until_idle}")
    from clusterctl.kafka import clientprops
    from clusterctl.spark import session

    chosen = runner.choose_connector(connector, _engine(connector))
    runner.load_job(job)  # a bad name fails here, before any cluster or Spark work
    session.check_master(master)
    spark_conf = session.check_conf(parse_kv(conf, "--conf"))
    options = parse_kv(option, "--option")
    client = {
        k: v for k, v in options.items() if k.lower().startswith("kafka.") and k.lower() != "kafka.bootstrap.servers"
    }
    if chosen == "clusterctl":  # its client is librdkafka (Spark's connector's kafka.* are Java client properties)
        clientprops.check(client, "client", "--option", prefix="kafka.")
    master, servers, checkpoint_root, cluster_conf = _target(master, bootstrap, checkpoint)
    spark_conf = {**cluster_conf, **spark_conf}

    def progress(p: Any) -> None:  # progress.BatchProgress: a line, or with --json an event, on stderr
        if as_json:
            event_json({"event": "batch", "job": job, **vars(p)})
        else:
            from clusterctl.output import err_console  # rich: loaded only when a progress line is due

            err_console.print(p.line(), soft_wrap=True, highlight=False)

    with session.quiet_py4j():
        result = runner.run_job(
            job,
            servers,
            master=master,
            checkpoint=checkpoint,
            trigger_s=trigger,
            until_idle_s=until_idle,
            timeout_s=timeout,
            available_now=available_now,
            connector=chosen,
            options=options,
            spark_conf=spark_conf,
            checkpoint_root=checkpoint_root,
            resume=resume,
            on_progress=progress,
            on_start=lambda: info(f"running {job} on {servers} (Spark {master}, connector {chosen})"),
        )
    _emit_result(job, result, as_json)


@spark_app.command("prepare")
def cmd_spark_prepare(
    force: Annotated[bool, typer.Option("--force", help="record it again even if it exists")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Record the Spark driver's class archive once (AppCDS: later local drivers start about twice as fast) and
    have Spark resolve its Kafka connector into the cache (later runs need no network)."""
    _runner()  # without PySpark: one line
    from clusterctl.spark import classarchive, packages, session

    path, recorded = classarchive.prepare(session.DRIVER_JVM_OPTS, info, force=force)
    jar, resolved = packages.resolve(info, force=force)
    row = {
        "archive": str(path),
        "recorded": recorded,
        "bytes": path.stat().st_size,
        "connector": packages.connector_package(),
        "connector_jar": str(jar),
        "resolved": resolved,
    }
    emit(
        row,
        as_json=as_json,
        title="Spark driver class archive and Kafka connector",
        kv=[
            Column("Archive", "archive"),
            Column("Recorded now", "recorded"),
            Column("Bytes", "bytes"),
            Column("Kafka connector", "connector"),
            Column("Connector jar", "connector_jar"),
            Column("Resolved now", "resolved"),
        ],
    )


def _engine(connector: str | None) -> str | None:
    """The spec's kafka.engine when there is a spec to read (the connector's choice depends on it), else None."""
    if connector is not None and connector not in ("kafka", "builtin"):
        return None  # clusterctl's connector runs on every engine
    try:
        return get_spec().kafka.engine
    except ClusterctlError:
        return None


def _run_script(path: Path, args: list[str], master: str, conf: list[str] | None, bootstrap: str | None) -> None:
    from clusterctl.spark import script, session

    session.check_master(master)
    spark_conf = session.check_conf(parse_kv(conf, "--conf"))
    master, servers, _root, cluster_conf = _target(master, bootstrap, None)
    info(f"running {path.name} on {servers} (Spark {master}, Spark's Kafka connector)")
    rc = script.run_script(path, args, master, servers, {**cluster_conf, **spark_conf})
    if rc != 0:
        raise typer.Exit(rc)


def _target(
    master: str, bootstrap: str | None, checkpoint: Path | None
) -> tuple[str, str, Path | None, dict[str, str]]:
    """(master, bootstrap servers, checkpoint root, Spark conf) for a run: the spec's standalone cluster when
    the master names it (checked: checkpoint, master, workers, their Python), else the given master."""
    from clusterctl.spark import standalone

    spec = _spec_for(master)
    if not standalone.targets_cluster(master, spec):
        servers = bootstrap_servers(bootstrap)
        if master.startswith("spark://") and "," not in master:
            standalone.check_master(master)  # another standalone master: it answers, or one line before the JVM
        return master, servers, None, {}
    if spec is None:
        spec = get_spec()  # `cluster` needs the spec: its error (no file, invalid) is the one line
    cluster = standalone.settings(spec, master, bootstrap)
    standalone.check_checkpoint(checkpoint, cluster.shared_dir)
    standalone.check_master(cluster.master)
    if cluster.ui is not None:
        standalone.wait_for_workers(cluster.ui)
    standalone.python_for_workers()
    return cluster.master, cluster.bootstrap, cluster.shared_dir, dict(cluster.conf)


def _emit_result(job: str, result: Any, as_json: bool) -> None:
    """A batch job's own result fields (its `ok: false` fails the command), or a streaming run's summary."""
    if result.kind == "batch":
        data: dict[str, Any] = result.result or {}
        fields = [Column(k, lambda _r, k=k: data.get(k)) for k in data]  # type: ignore[misc]
        emit(result, as_json=as_json, title=f"spark job {job}", kv=fields)
        if data.get("ok") is False:
            raise VerificationError(f"spark job {job}: {data.get('summary', 'check failed')}")
        return
    emit(
        result,
        as_json=as_json,
        title=f"spark job {job}",
        kv=[
            Column("Stopped", "stopped"),
            Column("Batches", "batches"),
            Column("Input rows", "input_rows"),
            Column("Busy (s)", "busy_s"),
            Column("Records/s", "records_per_s"),
            Column("Lag (records)", "lag"),
            Column("Wall (s)", "wall_s"),
            Column("Checkpoint", "checkpoint"),
        ],
    )


def _spec_for(master: str) -> "ClusterSpec | None":
    """The spec when a spark:// master might be its own (auto-detected); None when there is none."""
    if not master.startswith("spark://"):
        return None
    try:
        return get_spec()
    except ClusterctlError:
        return None


def register(app: typer.Typer) -> None:
    """Attach this noun's commands to the root app."""
    app.add_typer(spark_app, name="spark")
