"""The recording driver of `clusterctl spark prepare` (classarchive.prepare runs it as a child process)."""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from clusterctl.spark import session
from clusterctl.spark.classarchive import RECORD_TIMEOUT_S, SILENT


def record(partial: Path) -> None:
    """The recording driver: the classes of a streaming aggregation with foreachBatch and a Python UDF, loaded
    through clusterctl's session (so the archive matches its flags), then the JVM is stopped and waited for."""
    opts = f"{session.driver_java_options()} -XX:ArchiveClassesAtExit={partial} {SILENT}"
    spark = session.get_session("local[2]", "clusterctl-class-archive", {"spark.driver.extraJavaOptions": opts})
    jvm = spark.sparkContext._gateway.proc
    from pyspark.sql.functions import udf

    plus_one = udf(lambda v: v + 1, "long")
    with tempfile.TemporaryDirectory(prefix="clusterctl-cds-") as tmp:
        rows = spark.readStream.format("rate").option("rowsPerSecond", 50).load()
        counts = rows.groupBy((rows.value % 7).alias("k")).count().withColumn("n", plus_one("count"))
        query = (
            counts.writeStream.outputMode("update")
            .foreachBatch(lambda batch, _id: batch.collect())
            .option("checkpointLocation", tmp)
            .trigger(processingTime="1 second")
            .start()
        )
        deadline = time.monotonic() + 120
        while (query.lastProgress is None or query.lastProgress["batchId"] < 2) and time.monotonic() < deadline:
            time.sleep(0.2)
        query.stop()
        spark.range(100).selectExpr("id % 3 AS k").groupBy("k").count().collect()
        spark.stop()
    # the JVM exits on end of its stdin, writing the archive on its way out
    jvm.stdin.close()
    jvm.wait(timeout=RECORD_TIMEOUT_S)


if __name__ == "__main__":
    record(Path(sys.argv[1]))
