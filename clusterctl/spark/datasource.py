"""The `clusterctl-kafka` Spark data source: the reader from `source`, the writer from `sink`."""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader
from pyspark.sql.types import StructType

from clusterctl.spark.options import FORMAT, SCHEMA, KafkaOptions
from clusterctl.spark.sink import KafkaBatchWriter, KafkaStreamWriter, check_sink_schema
from clusterctl.spark.source import KafkaBatchReader, KafkaStreamReader


class KafkaDataSource(DataSource):
    """The `clusterctl-kafka` format: Kafka records in, key/value records out."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> str:
        return SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return KafkaBatchReader(KafkaOptions.parse(self.options, need_topics=True))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return KafkaStreamReader(KafkaOptions.parse(self.options, need_topics=True))

    def writer(self, schema: StructType, overwrite: bool) -> Any:
        check_sink_schema(schema, self.options)
        return KafkaBatchWriter(KafkaOptions.parse(self.options, need_topics=False))

    def streamWriter(self, schema: StructType, overwrite: bool) -> Any:
        check_sink_schema(schema, self.options)
        return KafkaStreamWriter(KafkaOptions.parse(self.options, need_topics=False))
