"""Streaming word count with Spark's own Kafka connector, written as any PySpark user writes it.

Nothing in it is clusterctl's: the same file runs with `spark-submit --packages
org.apache.spark:spark-sql-kafka-0-10_2.13:<spark version> word_count.py IN OUT` against any Kafka. With clusterctl:

    clusterctl spark run examples/spark/word_count.py -- words word-counts

which adds the connector and sets KAFKA_BOOTSTRAP_SERVERS to the cluster's. It counts the words of every line
`IN` holds now (Trigger.AvailableNow), writes (word, running total) to `OUT` in update mode and stops.
"""

import os
import sys
import tempfile

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

bootstrap = os.environ.get("KAFKA_BOOTSTRAP_SERVERS", "localhost:9092")
source, sink = sys.argv[1], sys.argv[2]

spark = SparkSession.builder.appName("word-count").getOrCreate()
lines = (
    spark.readStream.format("kafka")
    .option("kafka.bootstrap.servers", bootstrap)
    .option("subscribe", source)
    .option("startingOffsets", "earliest")
    .load()
)
words = lines.select(F.explode(F.split(F.col("value").cast("string"), r"\s+")).alias("word")).where("word != ''")
counts = words.groupBy("word").count()
query = (
    counts.select(F.col("word").alias("key"), F.col("count").cast("string").alias("value"))
    .writeStream.format("kafka")
    .outputMode("update")
    .option("kafka.bootstrap.servers", bootstrap)
    .option("topic", sink)
    .option("checkpointLocation", tempfile.mkdtemp(prefix="word-count-"))
    .trigger(availableNow=True)
    .start()
)
query.awaitTermination()
print(f"counted the words of {source} into {sink}")
spark.stop()
