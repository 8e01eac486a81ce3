"""The Spark steps' models: `spark_job` (start, resume, stop or kill a job from spark_jobs/) and `verify_spark`
(its results against the input topic); pipeline.py runs them."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from clusterctl.spec import validate


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class SparkJob(_M):
    """Start a job from spark_jobs/ on the scenario's topic (again: resume its checkpoint), stop or kill it.

    Its output topic is `output`, else <topic>-<job> (created like the scenario's topic)."""

    job: str = Field(pattern=r"^[A-Za-z0-9_]{1,64}$", description="a job in spark_jobs/ (clusterctl spark list)")
    action: Literal["start", "stop", "kill"] = Field(
        default="start", description="stop: Ctrl-C (the running batch finishes); kill: SIGKILL the driver"
    )
    output: str | None = Field(default=None, pattern=rf"^[A-Za-z0-9._-]{{1,{validate.TOPIC_MAX_LENGTH}}}$")
    options: dict[str, str] = Field(default_factory=dict, max_length=validate.MAX_JOB_OPTIONS)
    conf: dict[str, str] = Field(
        default_factory=dict, max_length=validate.MAX_JOB_OPTIONS, description="Spark configuration (spark run --conf)"
    )
    trigger: float = Field(default=1.0, ge=0, le=validate.MAX_SECONDS, description="micro-batch interval (s)")
    master: str = Field(
        default="local[2]",
        pattern=r"^(local(\[([1-9][0-9]{0,2}|\*)\])?|cluster)$",
        description="local mode, or cluster: the spec's Spark standalone master (executors in its workers)",
    )
    timeout: float = Field(default=60.0, gt=0, le=validate.MAX_SECONDS, description="stop: wait for the driver")
    connector: Literal["kafka", "clusterctl"] | None = Field(
        default=None,
        description="Spark's own Kafka connector (spark-sql-kafka) or clusterctl's Python one (default: kafka; "
        "clusterctl on a tansu cluster, which Spark's connector misreads)",
    )


class VerifySpark(_M):
    """The job's newest value per key against its expected results over the whole input topic."""

    job: str = Field(pattern=r"^[A-Za-z0-9_]{1,64}$")
    timeout: float = Field(default=180.0, gt=0, le=validate.MAX_SECONDS, description="a running job's catch-up")


class SparkCommitted(_M):
    """wait_for: the job has committed this many micro-batches (its checkpoint's commit log)."""

    job: str = Field(pattern=r"^[A-Za-z0-9_]{1,64}$")
    batches: int = Field(default=1, ge=1, le=validate.MAX_RECORDS)
