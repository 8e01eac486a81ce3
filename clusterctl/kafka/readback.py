"""Read a topic back: every record from the beginning up to the end offsets taken when the read starts.

The drill's verifier (the ledger against the topic) and the Spark verifier (a job's changelog) both read this way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

from clusterctl.errors import ClusterctlError
from clusterctl.kafka.connection import check_topic, consumer_config, log_end_offsets
from clusterctl.kafka.retry import retrying
from clusterctl.wait import wait_until

T = TypeVar("T")


def read_to_end(bootstrap: str, topic: str, convert: Callable[[Any], T], timeout: float = 120.0) -> list[T]:
    """`convert(message)` of every record of `topic` below the end offsets taken now, partition by partition in
    offset order (read_committed off). A fatal consumer error raises; librdkafka retries the others itself."""
    partitions = check_topic(bootstrap, topic)
    # right after a failover a broker may still answer with the old leader epoch: retried, with a bound
    ends = retrying(
        f"end offsets of {topic}", lambda: log_end_offsets(bootstrap, [(topic, p) for p in range(partitions)])
    )
    remaining = {p for (_t, p), end in ends.items() if end > 0}
    out: list[T] = []
    if not remaining:
        return out

    def take(msg: Any) -> None:
        if msg is None:
            return
        err, partition, offset = msg.error(), msg.partition(), msg.offset()
        if err is not None:
            if err.code() == KafkaError._PARTITION_EOF:
                if offset >= ends[(topic, partition)]:
                    remaining.discard(partition)
            elif err.fatal():
                raise ClusterctlError(f"reading {topic}[{partition}] failed: {err.str()}")
            return
        if offset < ends[(topic, partition)]:
            out.append(convert(msg))
        if offset + 1 >= ends[(topic, partition)]:
            remaining.discard(partition)

    consumer = Consumer(consumer_config(bootstrap, enable_partition_eof=True))
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(remaining)])
        wait_until(
            lambda: take(consumer.poll(0.5)),
            timeout=timeout,
            what=f"every partition of {topic!r} to reach its end offset",
            interval=0.0,
            done=lambda _r: not remaining,
            seen=lambda _r: f"read {len(out)} records; partitions {sorted(remaining)} short of their end offsets",
        )
    finally:
        consumer.close()
    return out
