"""Run the jobs in spark_jobs/ by name: preflight the cluster, start Spark, run, stop when idle.

A job is a module `spark_jobs/<name>.py` with:

- `DESCRIPTION` (one line), `KIND` ("streaming" or "batch");
- `OPTIONS`: its options and their defaults (overridden with `--option k=v`);
- `INPUT_TOPICS` / `OUTPUT_TOPICS`: the option names that hold topic names (checked before Spark starts);
- optionally `resolve_options(opts) -> opts`: validate/complete options before anything starts;
- streaming: `build(ctx: JobContext) -> DataStreamWriter` (not started; the runner sets checkpoint and trigger);
- batch: `run(ctx: JobContext) -> dict` (the job's result, printed by the CLI).

Jobs read and write through `ctx`, so the same job runs on Spark's own Kafka connector (`kafka`,
spark-sql-kafka-0-10 from Maven Central through `spark.jars.packages`: the default) or on clusterctl's Python one
(`clusterctl-kafka`, where the connector's jar cannot be had).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Literal

from clusterctl.errors import ClusterctlError, NotFoundError, UsageError
from clusterctl.spark.changelog import BATCH_HEADER
from clusterctl.spark.options import FORMAT
from clusterctl.spark.progress import BatchProgress, QueryWatch
from clusterctl.spark.session import DEFAULT_MASTER, get_session, has_builtin_kafka

Connector = Literal["kafka", "clusterctl"]
CONNECTORS: tuple[str, ...] = ("kafka", "clusterctl")
DEFAULT_CONNECTOR: Connector = "kafka"
#: every accepted name, the names of earlier releases (builtin, python) included
_NAMES: dict[str, Connector] = {
    "kafka": "kafka",
    "clusterctl": "clusterctl",
    "builtin": "kafka",
    "python": "clusterctl",
}
BUILTIN_FORMAT = "kafka"
BUILTIN_HINT = (
    "Spark resolves it from Maven Central once (spark.jars.packages, cached under ~/.cache/clusterctl/spark/ivy); "
    "where it cannot, use --connector clusterctl"
)


def choose_connector(requested: str | None, engine: str | None) -> Connector:
    """The connector of a run: the one asked for, else Spark's own, except on tansu (the spec's kafka.engine),
    whose answers mislead Spark's Java client (word_count read 2 of 5,000 records there): clusterctl's."""
    if requested is None:
        return "clusterctl" if engine == "tansu" else DEFAULT_CONNECTOR
    name = connector_name(requested)
    if name == "kafka" and engine == "tansu":
        raise UsageError(
            "--connector kafka: Spark's Kafka connector misreads tansu's offsets (2 of 5,000 records read here); "
            "use --connector clusterctl, or a cluster of Apache Kafka"
        )
    return name


def connector_name(name: str) -> Connector:
    """`kafka` or `clusterctl` (the old names `builtin` and `python` accepted); anything else is exit 2."""
    if name not in _NAMES:
        raise UsageError(f"--connector must be kafka (Spark's own) or clusterctl, got {name!r}")
    return _NAMES[name]


def jobs_dir() -> Path:
    """spark_jobs/ next to the clusterctl package (or $CLUSTERCTL_SPARK_JOBS)."""
    explicit = os.environ.get("CLUSTERCTL_SPARK_JOBS")
    if explicit:
        return Path(explicit)
    return Path(__file__).resolve().parent.parent.parent / "spark_jobs"


@dataclass
class JobInfo:
    name: str
    kind: str
    description: str
    options: dict[str, str]


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"clusterctl_spark_job_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ClusterctlError(f"cannot load Spark job {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _job_paths() -> dict[str, Path]:
    root = jobs_dir()
    if not root.is_dir():
        return {}
    return {p.stem: p for p in sorted(root.glob("*.py")) if not p.name.startswith("_")}


def job_names() -> list[str]:
    """The jobs in spark_jobs/ by name, without loading any."""
    return list(_job_paths())


def list_jobs() -> list[JobInfo]:
    """Every job in spark_jobs/, with its kind, description and default options."""
    out = []
    for name, path in _job_paths().items():
        m = _load(path)
        out.append(JobInfo(name, m.KIND, m.DESCRIPTION, dict(m.OPTIONS)))
    return out


def load_job(name: str) -> ModuleType:
    paths = _job_paths()
    if name not in paths:
        valid = ", ".join(paths) or f"none found in {jobs_dir()}"
        raise NotFoundError(f"unknown Spark job {name!r}; valid jobs: {valid}")
    return _load(paths[name])


# ---------------------------------------------------------------- what a job sees


@dataclass
class JobContext:
    """What a job needs: the session, the cluster, the connector and its options."""

    spark: Any
    bootstrap: str
    connector: Connector
    options: dict[str, str]

    @property
    def format(self) -> str:
        return FORMAT if self.connector == "clusterctl" else BUILTIN_FORMAT

    def option(self, name: str) -> str:
        return self.options[name]

    def _passthrough(self) -> dict[str, str]:
        """Connector options given with --option (kafka.*, maxOffsetsPerTrigger, failOnDataLoss, ...)."""
        keys = ("maxoffsetspertrigger", "failondataloss", "startingoffsets", "endingoffsets")
        return {k: v for k, v in self.options.items() if k.lower().startswith("kafka.") or k.lower() in keys}

    def read_stream(self, topics: str, starting: str = "earliest") -> Any:
        opts = {"startingOffsets": starting, **self._passthrough()}
        opts.pop("endingOffsets", None)
        reader = self.spark.readStream.format(self.format).option("kafka.bootstrap.servers", self.bootstrap)
        return reader.option("subscribe", topics).options(**opts).load()

    def read_batch(self, topics: str, starting: str = "earliest", ending: str = "latest") -> Any:
        opts = {"startingOffsets": starting, "endingOffsets": ending, **self._passthrough()}
        opts.pop("maxOffsetsPerTrigger", None)
        reader = self.spark.read.format(self.format).option("kafka.bootstrap.servers", self.bootstrap)
        return reader.option("subscribe", topics).options(**opts).load()

    def write_stream(self, df: Any, topic: str, mode: str = "append") -> Any:
        """An unstarted DataStreamWriter producing `df`'s key/value columns to `topic`.

        Update mode goes through foreachBatch (Spark's Python data sources take append and complete only), each
        micro-batch written by the batch writer of the same connector (same producer, same guarantees), every
        record carrying its batch id in the `clusterctl.batch` header: spark/changelog.py keeps the newest batch's
        value per key, so a replayed batch's re-writes are told from new values.
        """
        kafka = {k: v for k, v in self._passthrough().items() if k.lower().startswith("kafka.")}
        if mode == "update":
            fmt, bootstrap, connector = self.format, self.bootstrap, self.connector

            def write_batch(batch: Any, batch_id: int) -> None:
                w = batch
                if connector == "kafka":  # Spark's sink writes a `headers` column: array<struct<key, value>>
                    from pyspark.sql import functions as F

                    batch_bytes = F.lit(str(batch_id)).cast("binary")
                    header = F.struct(F.lit(BATCH_HEADER).alias("key"), batch_bytes.alias("value"))
                    w = batch.withColumn("headers", F.array(header))
                w = w.write.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("topic", topic)
                w = w.options(**kafka)
                if connector == "clusterctl":
                    w = w.option("batchId", str(batch_id))
                w.mode("append").save()

            return df.writeStream.outputMode("update").foreachBatch(write_batch)
        writer = df.writeStream.format(self.format).outputMode(mode)
        return writer.option("kafka.bootstrap.servers", self.bootstrap).option("topic", topic).options(**kafka)


# ---------------------------------------------------------------- running


@dataclass
class RunResult:
    """The outcome of one `spark run`."""

    job: str
    kind: str
    connector: str
    master: str
    bootstrap: str
    checkpoint: str | None
    stopped: str
    wall_s: float
    batches: int = 0
    input_rows: int = 0
    #: query start to the end of the last micro-batch that had input (its output acknowledged by then)
    busy_s: float | None = None
    records_per_s: float | None = None
    #: records the input topics held beyond what the last batch read (its lag)
    lag: int | None = None
    progress: list[BatchProgress] = field(default_factory=list)
    result: dict[str, Any] | None = None


def preflight(bootstrap: str, job: ModuleType, options: dict[str, str]) -> None:
    """Before Spark starts: the cluster answers and every input/output topic exists (one line otherwise)."""
    from clusterctl.kafka.connection import fetch_metadata

    md = fetch_metadata(bootstrap)
    for opt in (*job.INPUT_TOPICS, *job.OUTPUT_TOPICS):
        for topic in (t.strip() for t in options[opt].split(",") if t.strip()):
            t = md.topics.get(topic)
            if t is None or t.error is not None:
                raise NotFoundError(
                    f"unknown topic {topic!r} on {bootstrap} (job option {opt})",
                    hint=f"clusterctl topic create {topic}, or --option {opt}=<topic>",
                )


def error_line(exc: BaseException) -> str:
    """The one meaningful line of a Spark/Python-worker failure."""
    text = str(exc)
    for pattern in (
        r"(Kafka delivery failed[^\n]*)",
        r"(Kafka produce to [^\n]*)",
        r"(data loss on [^\n]*)",
        r"(no records from [^\n]*)",
        r"(clusterctl-kafka(?: sink)?: [^\n]*)",
        r"(?:RuntimeError|ValueError|KafkaException|ClusterctlError|NotFoundError|\w+Error_?): ([^\n]+)",
    ):
        found = re.findall(pattern, text)
        if found:
            return found[-1].strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[0] if lines else type(exc).__name__


def run_job(
    name: str,
    bootstrap: str,
    *,
    master: str = DEFAULT_MASTER,
    checkpoint: str | Path | None = None,
    trigger_s: float = 1.0,
    until_idle_s: float | None = None,
    timeout_s: float | None = None,
    available_now: bool = False,
    connector: str = DEFAULT_CONNECTOR,
    options: dict[str, str] | None = None,
    spark_conf: dict[str, str] | None = None,
    spark: Any = None,
    on_progress: Callable[[BatchProgress], None] | None = None,
    on_start: Callable[[], None] | None = None,
    checkpoint_root: str | Path | None = None,
    resume: bool = False,
) -> RunResult:
    """Run job `name`; streaming jobs stop after `until_idle_s` without input (or `timeout_s`, or Ctrl-C).

    Bad names, options, topics and an unreachable cluster fail before Spark starts; `on_start` is
    called just before it does. A temporary checkpoint (no `checkpoint`) goes under `checkpoint_root`
    (default: the system temp dir); executors on other machines need one they can see. A given checkpoint
    must be this job's, on these topics, and exist when `resume` (CheckpointError otherwise, before Spark).
    """
    connector = connector_name(connector)
    job = load_job(name)
    opts = _job_options(name, job, options)
    owner = _check_checkpoint(name, job, opts, connector, checkpoint, resume)
    preflight(bootstrap, job, opts)
    if owner is not None and checkpoint is not None:
        from clusterctl.spark import checkpoint as checkpoints

        checkpoints.record(Path(checkpoint), owner)
    if on_start:
        on_start()

    own_session = spark is None
    if spark is None:
        if connector == "kafka":
            from clusterctl.spark.packages import connector_conf

            spark_conf = connector_conf(spark_conf)
        spark = get_session(master, app_name=f"clusterctl-{name}", conf=spark_conf)
    if connector == "kafka" and not has_builtin_kafka(spark):
        if own_session:
            spark.stop()
        raise UsageError(
            "Spark's Kafka connector (spark-sql-kafka-0-10) is not on this Spark's classpath", hint=BUILTIN_HINT
        )
    ctx = JobContext(spark, bootstrap, connector, opts)
    start = time.monotonic()
    try:
        if job.KIND == "batch":
            try:
                result = job.run(ctx)
            except ClusterctlError:
                raise
            except Exception as exc:
                raise ClusterctlError(f"job {name} failed: {error_line(exc)}") from None
            return RunResult(
                name, "batch", connector, master, bootstrap, None, "finished", time.monotonic() - start, result=result
            )
        return _run_streaming(
            name,
            job,
            ctx,
            master,
            checkpoint,
            trigger_s,
            until_idle_s,
            timeout_s,
            available_now,
            start,
            on_progress,
            checkpoint_root,
        )
    finally:
        if own_session:
            with contextlib.suppress(Exception):
                spark.stop()


def _job_options(name: str, job: ModuleType, options: dict[str, str] | None) -> dict[str, str]:
    """The job's defaults overridden by `options` (unknown names refused), completed by the job."""
    unknown = sorted(k for k in (options or {}) if k not in job.OPTIONS and not _is_connector_option(k))
    if unknown:
        raise UsageError(
            f"job {name} has no option {', '.join(unknown)}; its options: {', '.join(job.OPTIONS) or 'none'}"
        )
    opts = {**job.OPTIONS, **(options or {})}
    if hasattr(job, "resolve_options"):  # e.g. a default taken from an input file
        opts = job.resolve_options(opts)
    return opts


def _check_checkpoint(
    name: str, job: ModuleType, opts: dict[str, str], connector: str, checkpoint: str | Path | None, resume: bool
) -> Any:
    """The checkpoint's owner once it is checked to fit this run (None: no checkpoint of the user's)."""
    from clusterctl.spark import checkpoint as checkpoints

    if resume and (checkpoint is None or job.KIND != "streaming"):
        raise UsageError("--resume needs --checkpoint and a streaming job")
    if checkpoint is None or job.KIND != "streaming":
        return None
    owner = checkpoints.owner_of(name, job, opts, connector)
    checkpoints.check(Path(checkpoint), owner, resume=resume)
    return owner


def _is_connector_option(key: str) -> bool:
    k = key.lower()
    return k.startswith("kafka.") or k in ("maxoffsetspertrigger", "failondataloss", "startingoffsets", "endingoffsets")


def _run_streaming(
    name: str,
    job: ModuleType,
    ctx: JobContext,
    master: str,
    checkpoint: str | Path | None,
    trigger_s: float,
    until_idle_s: float | None,
    timeout_s: float | None,
    available_now: bool,
    start: float,
    on_progress: Callable[[BatchProgress], None] | None,
    checkpoint_root: str | Path | None = None,
) -> RunResult:
    temp_checkpoint = checkpoint is None
    if checkpoint:
        cp = Path(checkpoint)
    else:
        if checkpoint_root is not None:
            Path(checkpoint_root).mkdir(parents=True, exist_ok=True)
        cp = Path(tempfile.mkdtemp(prefix=f"clusterctl-{name}-", dir=checkpoint_root))
    writer = job.build(ctx).option("checkpointLocation", str(cp))
    if available_now:  # everything up to the end offsets at start, in maxOffsetsPerTrigger batches, then stop
        writer = writer.trigger(availableNow=True)
    elif trigger_s > 0:
        writer = writer.trigger(processingTime=f"{trigger_s} seconds")
    query_start = time.time()
    try:
        query = writer.queryName(f"clusterctl_{name}_{os.getpid()}").start()
    except Exception as exc:
        raise ClusterctlError(f"job {name} could not start: {error_line(exc)}") from None
    watch = QueryWatch(query, on_progress)
    failure = None
    try:
        stopped = watch.run(start, until_idle_s, timeout_s, available_now)
        failure = query.exception()
    finally:
        # on the way out of an exception the JVM may be gone; the exception says more than a py4j error here
        with contextlib.suppress(Exception):
            query.stop()
        if temp_checkpoint:
            shutil.rmtree(cp, ignore_errors=True)
    if stopped == "interrupted":
        # the running micro-batch finished and the query stopped; the signal ends the command as it ends every
        # other (one line, 128 + signal), not as a run that stopped by itself
        watch.redeliver()
    if failure is not None:
        raise ClusterctlError(f"job {name} failed: {error_line(failure)}")
    seen = watch.seen
    rows = sum(p.input_rows for p in seen.values())
    busy_s = (watch.last_data_end - query_start) if watch.last_data_end else None
    return RunResult(
        job=name,
        kind="streaming",
        connector=ctx.connector,
        master=master,
        bootstrap=ctx.bootstrap,
        checkpoint=None if temp_checkpoint else str(cp),
        stopped=stopped,
        wall_s=time.monotonic() - start,
        batches=len(seen),
        input_rows=rows,
        busy_s=busy_s,
        records_per_s=rows / busy_s if busy_s and rows else None,
        lag=seen[max(seen)].lag if seen else None,
        progress=[seen[k] for k in sorted(seen)],
    )
