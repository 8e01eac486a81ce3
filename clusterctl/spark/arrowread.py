"""One partition's offset range as Arrow record batches, read with librdkafka's batch consume via ctypes.

Why: confluent-kafka's Consumer builds a Message object per record and the columns were filled from its
methods, ~5 µs of Python per record, the source's whole budget. Here Python handles batches (up to
`perf_consume_native.BATCH` messages a poll), never records:

- the fields of every message (error, key and value pointers and lengths, offset) come from one numpy gather
  over librdkafka's own structs (`perf_consume_native.read_u64`);
- key and value bytes are copied straight into the Arrow buffers by `ctypes.memmove`, and timestamps read by
  `rd_kafka_message_timestamp`, each `map`ped over the batch (a C loop, no bytecode per record); the messages
  are freed the same way;
- the binary columns are built from their buffers (`pa.Array.from_buffers`), topic and partition are
  constants.

`available()` says whether the wheel's librdkafka (and numpy) can be used; `source.read_range` falls back
to confluent-kafka's Consumer otherwise.
"""

from __future__ import annotations

import ctypes
import time
from collections import deque
from collections.abc import Iterator
from ctypes import c_int, c_int64, c_void_p
from typing import Any

#: librdkafka error codes the reader acts on (rdkafka.h)
ERR_PARTITION_EOF = -191
ERR_AUTO_OFFSET_RESET = -140
#: one record batch's binary column must stay under Arrow's 32-bit offsets
MAX_BATCH_BYTES = 1 << 30
#: a task reads one bounded range: pre-fetch less past its end than perf consume's 256 MiB (several tasks
#: share an executor's memory)
QUEUE_KBYTES = 65_536
_TS_TYPE_SHIFT = 1  # librdkafka's timestamp type (0 none, 1 create, 2 log append) minus 1 = Kafka's id


def available() -> bool:
    """True when numpy and the confluent-kafka wheel's librdkafka load here."""
    try:
        _native()
    except Exception:
        return False
    return True


def _native() -> tuple[Any, Any, Any]:
    """(librdkafka with the signatures this module calls, perf_consume_native, perf_native)."""
    from clusterctl.kafka import perf_consume_native, perf_native

    lib = perf_consume_native._lib()
    if not getattr(lib, "_clusterctl_arrowread", False):
        lib.rd_kafka_message_timestamp.restype = c_int64
        lib.rd_kafka_message_timestamp.argtypes = [c_void_p, c_void_p]
        lib.rd_kafka_position.restype = c_int
        lib.rd_kafka_position.argtypes = [c_void_p, c_void_p]
        lib.rd_kafka_err2str.restype = ctypes.c_char_p
        lib.rd_kafka_err2str.argtypes = [c_int]
        lib._clusterctl_arrowread = True
    return lib, perf_consume_native, perf_native


class RangeConsumer:
    """A librdkafka consumer assigned to one topic-partition from `start` (no group, nothing committed)."""

    def __init__(self, conf: dict[str, Any], topic: str, partition: int, start: int) -> None:
        lib, pcn, pn = _native()
        self.lib, self.pcn, self.topic, self.partition = lib, pcn, topic, partition
        settings = {**pcn.THROUGHPUT_CONFIG, "queued.max.messages.kbytes": QUEUE_KBYTES, **conf}
        rconf = pn._new_conf(lib, settings, "consumer")
        errstr = ctypes.create_string_buffer(512)
        self.rk = lib.rd_kafka_new(pcn.RD_KAFKA_CONSUMER, rconf, errstr, 512)
        if not self.rk:
            lib.rd_kafka_conf_destroy(rconf)
            raise ValueError(f"invalid consumer settings: {errstr.value.decode(errors='replace')}")
        lib.rd_kafka_poll_set_consumer(self.rk)
        self.queue = lib.rd_kafka_queue_get_consumer(self.rk)
        self.tps = lib.rd_kafka_topic_partition_list_new(1)
        self.tp = lib.rd_kafka_topic_partition_list_add(self.tps, topic.encode(), partition)
        self.tp.contents.offset = start
        code = lib.rd_kafka_assign(self.rk, self.tps)
        if code != 0:
            self.close()
            raise RuntimeError(f"cannot assign {topic}[{partition}]: {self.error_name(code)}")
        self.ptrs = (c_void_p * pcn.BATCH)()
        self.rest = ctypes.addressof(self.ptrs) + ctypes.sizeof(c_void_p)

    def error_name(self, code: int) -> str:
        name = self.lib.rd_kafka_err2str(code)
        return name.decode(errors="replace") if name else str(code)

    def poll(self, timeout_ms: int) -> Any:
        """Message addresses (numpy uint64): up to timeout_ms for the first, then whatever else is queued."""
        import numpy as np

        first = self.lib.rd_kafka_consume_queue(self.queue, timeout_ms)
        if not first:
            return np.zeros(0, dtype=np.uint64)
        self.ptrs[0] = first
        more = self.lib.rd_kafka_consume_batch_queue(self.queue, 0, self.rest, self.pcn.BATCH - 1)
        n = 1 + max(more, 0)
        return np.frombuffer(memoryview(self.ptrs), dtype=np.uint64)[:n].copy()

    def position(self) -> int:
        """The offset the consumer will fetch next (past transaction markers and compacted gaps); -1001 unknown."""
        self.lib.rd_kafka_position(self.rk, self.tps)
        return int(self.tp.contents.offset)

    def free(self, addrs: Any) -> None:
        deque(map(self.lib.rd_kafka_message_destroy, addrs.tolist()), maxlen=0)

    def close(self) -> None:
        if self.rk:
            self.lib.rd_kafka_topic_partition_list_destroy(self.tps)
            self.lib.rd_kafka_queue_destroy(self.queue)
            self.lib.rd_kafka_consumer_close(self.rk)
            self.lib.rd_kafka_destroy(self.rk)
            self.rk = None


def _fields(pcn: Any, addrs: Any) -> dict[str, Any]:
    """err, payload, len, key, key_len and offset of the rd_kafka_message_t structs at `addrs` (numpy)."""
    import numpy as np

    from clusterctl.kafka.perf_native import _Message

    names = ("err", "payload", "len", "key", "key_len", "offset")
    got = pcn.read_u64(addrs, tuple(getattr(_Message, n).offset for n in names))
    out = dict(zip(names, got, strict=True))
    out["err"] = (out["err"] & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.int32)
    out["offset"] = out["offset"].view(np.int64)
    return out


def _binary(ptrs: Any, lens: Any, nullable: bool) -> Any:
    """A pa.binary() array of the bytes at ptrs[i] (lens[i] long), copied once into its Arrow buffer."""
    import numpy as np
    import pyarrow as pa

    n = len(ptrs)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(lens, out=offsets[1:], dtype=np.int32)
    data = np.empty(int(offsets[-1]), dtype=np.uint8)
    some = lens > 0
    if data.size:
        dst = (np.uint64(data.ctypes.data) + offsets[:-1].astype(np.uint64))[some]
        deque(map(ctypes.memmove, dst.tolist(), ptrs[some].tolist(), lens[some].tolist()), maxlen=0)
    validity = None
    if nullable:
        present = ptrs != 0
        if not present.all():
            validity = pa.py_buffer(np.packbits(present, bitorder="little"))
    return pa.Array.from_buffers(pa.binary(), n, [validity, pa.py_buffer(offsets), pa.py_buffer(data)])


def _timestamps(lib: Any, addrs: Any) -> tuple[Any, Any]:
    """(timestamp ms, Kafka timestamp type id) per message (rd_kafka_message_timestamp over the batch)."""
    import numpy as np

    n = len(addrs)
    kinds = np.zeros(n, dtype=np.int32)
    kind_ptrs = (np.uint64(kinds.ctypes.data) + np.arange(n, dtype=np.uint64) * np.uint64(4)).tolist()
    ts = np.fromiter(map(lib.rd_kafka_message_timestamp, addrs.tolist(), kind_ptrs), dtype=np.int64, count=n)
    return ts, kinds - _TS_TYPE_SHIFT


def record_batch(lib: Any, schema: Any, topic: str, partition: int, addrs: Any, f: dict[str, Any]) -> Any:
    """The Arrow record batch (the source's schema) of the good messages at `addrs`, fields `f`."""
    import numpy as np
    import pyarrow as pa

    n = len(addrs)
    ts, kinds = _timestamps(lib, addrs)
    ts_us = pa.array(ts * 1000, pa.int64(), mask=ts < 0).cast(pa.timestamp("us", tz="UTC"))
    columns = [
        _binary(f["key"], f["key_len"], nullable=True),
        _binary(f["payload"], f["len"], nullable=True),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array(np.ascontiguousarray(f["offset"]), pa.int64()),
        ts_us,
        pa.array(kinds, pa.int32()),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _slices(f: dict[str, Any]) -> list[tuple[int, int]]:
    """Row ranges whose key and value bytes each stay under MAX_BATCH_BYTES."""
    import numpy as np

    size = np.cumsum(np.maximum(f["len"], f["key_len"]).astype(np.int64))
    out, start = [], 0
    while start < len(size):
        base = int(size[start - 1]) if start else 0
        stop = max(start + 1, int(np.searchsorted(size, base + MAX_BATCH_BYTES, side="right")))
        out.append((start, stop))
        start = stop
    return out


def read_range(
    conf: dict[str, Any],
    schema: Any,
    where: tuple[str, int, int, int],
    *,
    fail_on_data_loss: bool,
    poll_timeout_ms: int,
) -> Iterator[Any]:
    """Record batches with every record of topic[partition] offsets [start, end) (`where`); fail on data
    loss (the log ends or starts past a planned offset) or when no record comes for poll_timeout_ms."""
    topic, partition, start, end = where
    label = f"{topic}[{partition}] offsets {start}..{end}"
    committed_only = conf.get("isolation.level") == "read_committed"
    consumer = RangeConsumer(conf, topic, partition, start)
    lib, pcn = consumer.lib, consumer.pcn
    try:
        next_offset, last_progress = start, time.monotonic()
        while next_offset < end:
            addrs = consumer.poll(500)
            if len(addrs):
                last_progress = time.monotonic()
                f = _fields(pcn, addrs)
                try:
                    next_offset = _check_errors(consumer, f, end, label, fail_on_data_loss, committed_only, next_offset)
                    keep = (f["err"] == 0) & (f["offset"] < end)
                    if keep.any():
                        good = addrs[keep]
                        gf = {k: v[keep] for k, v in f.items()}
                        next_offset = max(next_offset, int(gf["offset"][-1]) + 1)
                        for lo, hi in _slices(gf):
                            part = {k: v[lo:hi] for k, v in gf.items()}
                            yield record_batch(lib, schema, topic, partition, good[lo:hi], part)
                finally:
                    consumer.free(addrs)
            if next_offset < end:
                # transaction markers and compacted-away offsets never arrive as records: position says where
                if consumer.position() >= end:
                    break
                if time.monotonic() - last_progress > poll_timeout_ms / 1000:
                    raise RuntimeError(
                        f"no records from {label} at offset {next_offset} for {poll_timeout_ms} ms "
                        f"(broker {conf.get('bootstrap.servers')})"
                    )
    finally:
        consumer.close()


def _check_errors(
    consumer: RangeConsumer,
    f: dict[str, Any],
    end: int,
    label: str,
    fail_on_data_loss: bool,
    committed_only: bool,
    next_offset: int,
) -> int:
    """Act on the batch's error messages (end of log, offset reset, others): the new next offset."""
    bad = (f["err"] != 0).nonzero()[0]
    for i in bad.tolist():
        code, offset = int(f["err"][i]), int(f["offset"][i])
        if code == ERR_PARTITION_EOF:
            # the log ends before the planned end offset: records were truncated away
            # (under read_committed the end may be an open transaction's start: wait instead)
            if offset < end and not committed_only:
                if fail_on_data_loss:
                    raise RuntimeError(f"data loss on {label}: the log ends at {offset} (failOnDataLoss=true)")
                next_offset = end
            continue
        if code == ERR_AUTO_OFFSET_RESET:
            raise RuntimeError(f"data loss on {label}: {consumer.error_name(code)} (failOnDataLoss=true)")
        raise RuntimeError(f"Kafka error reading {label}: {consumer.error_name(code)}")
    return next_offset
