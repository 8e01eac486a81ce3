"""The `native` consume engine: librdkafka's consumer driven through ctypes, from the librdkafka that the
confluent-kafka wheel ships (as perf_native.py does for producing).

Why: confluent-kafka's Consumer builds a Message object per record and our loop asked each for its error and
length: ~1 µs of Python per record, a third of what Java's kafka-consumer-perf-test.sh fetches. Here Python
touches batches, never records:

- `rd_kafka_consume_queue` waits for one message, then `rd_kafka_consume_batch_queue` takes whatever else is
  queued (up to BATCH) without waiting (with a timeout it would wait for a full batch);
- the error code and the key/value lengths of every message in it are read with one numpy gather over the
  memory the pointers point into (the messages are librdkafka's own structs, 8-byte aligned; see `_fields`);
- the messages are freed by `map`ping `rd_kafka_message_destroy` over the pointers (a C loop in the
  interpreter, no bytecode per record).

Group mode subscribes and serves the rebalance itself (a ctypes callback, called inside the batch call), which
is when the partitions count as assigned; `--no-group` assigns the partitions directly from the beginning.
"""

from __future__ import annotations

import ctypes
import time
from collections import deque
from ctypes import POINTER, Structure, c_char_p, c_int, c_int32, c_int64, c_size_t, c_ssize_t, c_void_p
from typing import TYPE_CHECKING, Any

import numpy as np

from clusterctl.errors import UsageError
from clusterctl.kafka import perf_native
from clusterctl.kafka.perf_native import _Message

if TYPE_CHECKING:
    from clusterctl.kafka.perf_consume import _GroupRun

BATCH = 10_000
RD_KAFKA_CONSUMER = 1
RD_KAFKA_OFFSET_BEGINNING = -2
ERR_ASSIGN = -175  # RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS
SPAN_BYTES = 1 << 30  # one gather window of address space (never read as a whole, only indexed)
# librdkafka's consumer defaults favour latency and memory; a perf run wants long fetches and a deep queue.
THROUGHPUT_CONFIG = {
    "fetch.max.bytes": 52_428_800,
    "max.partition.fetch.bytes": 8_388_608,
    "queued.min.messages": 1_000_000,
    "queued.max.messages.kbytes": 262_144,
    "fetch.queue.backoff.ms": 0,  # 2.x waits 1 s before fetching again once the queue was full
}
_OFFSETS = tuple(getattr(_Message, name).offset for name in ("err", "len", "key_len", "payload"))
_SPAN = ctypes.c_uint8 * SPAN_BYTES
_EIGHT = np.arange(8, dtype=np.uint64)
_REBALANCE_CB = ctypes.CFUNCTYPE(None, c_void_p, c_int, c_void_p, c_void_p)


class _TopicPartition(Structure):
    """rd_kafka_topic_partition_t."""

    _fields_ = (
        ("topic", c_char_p),
        ("partition", c_int32),
        ("offset", c_int64),
        ("metadata", c_void_p),
        ("metadata_size", c_size_t),
        ("opaque", c_void_p),
        ("err", c_int),
        ("_private", c_void_p),
    )


_SIGS: dict[str, tuple[Any, list[Any]]] = {
    "rd_kafka_conf_set_rebalance_cb": (None, [c_void_p, _REBALANCE_CB]),
    "rd_kafka_poll_set_consumer": (c_int, [c_void_p]),
    "rd_kafka_queue_get_consumer": (c_void_p, [c_void_p]),
    "rd_kafka_subscribe": (c_int, [c_void_p, c_void_p]),
    "rd_kafka_assign": (c_int, [c_void_p, c_void_p]),
    "rd_kafka_incremental_assign": (c_void_p, [c_void_p, c_void_p]),
    "rd_kafka_incremental_unassign": (c_void_p, [c_void_p, c_void_p]),
    "rd_kafka_error_destroy": (None, [c_void_p]),
    "rd_kafka_rebalance_protocol": (c_char_p, [c_void_p]),
    "rd_kafka_topic_partition_list_new": (c_void_p, [c_int]),
    "rd_kafka_topic_partition_list_add": (POINTER(_TopicPartition), [c_void_p, c_char_p, c_int32]),
    "rd_kafka_topic_partition_list_destroy": (None, [c_void_p]),
    "rd_kafka_consume_batch_queue": (c_ssize_t, [c_void_p, c_int, c_void_p, c_size_t]),
    "rd_kafka_consume_queue": (c_void_p, [c_void_p, c_int]),
    "rd_kafka_poll": (c_int, [c_void_p, c_int]),
    "rd_kafka_query_watermark_offsets": (
        c_int,
        [c_void_p, c_char_p, c_int32, POINTER(c_int64), POINTER(c_int64), c_int],
    ),
    "rd_kafka_message_destroy": (None, [c_void_p]),
    "rd_kafka_consumer_close": (c_int, [c_void_p]),
}
_ready = False


def _lib() -> Any:
    global _ready
    lib = perf_native._load()
    if lib is None:
        raise UsageError(f"--engine native: {perf_native.unavailable_reason()}")
    if not _ready:
        for name, (res, args) in _SIGS.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = res, args
        _ready = True
    return lib


def available() -> bool:
    try:
        _lib()
    except (UsageError, AttributeError):
        return False
    return True


def check_config(conf: dict[str, Any]) -> None:
    """Reject unknown or invalid consumer properties before any handle exists."""
    lib = _lib()
    lib.rd_kafka_conf_destroy(perf_native._new_conf(lib, conf, "consumer"))


def _window(lo: int) -> np.ndarray:
    """A uint8 view of SPAN_BYTES of address space from `lo` (only the indexed bytes are ever read)."""
    return np.frombuffer(memoryview(_SPAN.from_address(lo)), dtype=np.uint8)


def _gather(mem: np.ndarray, rel: np.ndarray, offsets: np.ndarray, aligned: bool) -> np.ndarray:
    """(n, len(offsets)) little-endian uint64 at mem[rel + offset]: one fancy index for all of them."""
    if aligned:
        return mem.view(np.uint64)[(rel >> np.uint64(3))[:, None] + (offsets >> np.uint64(3))]
    raw = mem[rel[:, None, None] + offsets[None, :, None] + _EIGHT]
    return np.ascontiguousarray(raw).view("<u8")[..., 0]


def read_u64(addrs: np.ndarray, offsets: tuple[int, ...]) -> list[np.ndarray]:
    """For each byte offset k, the little-endian uint64 at addrs + k, gathered with numpy (word by word when
    every address is 8-byte aligned, as librdkafka's structs are; byte by byte otherwise, as payloads are).
    Addresses further apart than one window are read window by window, in address order."""
    if not len(addrs):
        return [np.zeros(0, dtype=np.uint64) for _ in offsets]
    offs = np.array(offsets, dtype=np.uint64)
    aligned = not np.any(addrs & np.uint64(7)) and not np.any(offs & np.uint64(7))
    lo, hi = int(addrs.min()), int(addrs.max())
    if hi - lo < SPAN_BYTES - 64:
        got = _gather(_window(lo), addrs - np.uint64(lo), offs, aligned)
    else:
        order = np.argsort(addrs)
        ordered = addrs[order]
        got = np.empty((len(addrs), len(offsets)), dtype=np.uint64)
        start = 0
        while start < len(ordered):
            first = int(ordered[start])
            end = int(np.searchsorted(ordered, first + SPAN_BYTES - 64, side="left"))
            rel = ordered[start:end] - np.uint64(first)
            got[order[start:end]] = _gather(_window(first), rel, offs, aligned)
            start = end
    return [got[:, i] for i in range(len(offsets))]


def _fields(addrs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(err, key_len + len, payload address) of the rd_kafka_message_t structs at `addrs`."""
    err, size, key_len, payload = read_u64(addrs, _OFFSETS)
    return (err & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.int32), (size + key_len).astype(np.int64), payload


class NativeConsumer:
    """One librdkafka consumer handle, reading batches into `run` (perf_consume._GroupRun)."""

    def __init__(self, run: _GroupRun, conf: dict[str, Any], partitions: list[int] | None) -> None:
        lib = _lib()
        self.lib, self.run, self.partitions = lib, run, partitions
        rconf = perf_native._new_conf(lib, {**THROUGHPUT_CONFIG, **conf}, "consumer")
        self._cb = _REBALANCE_CB(self._rebalance)  # referenced for the handle's lifetime
        if partitions is None:
            lib.rd_kafka_conf_set_rebalance_cb(rconf, self._cb)
        errstr = ctypes.create_string_buffer(512)
        self.rk = lib.rd_kafka_new(RD_KAFKA_CONSUMER, rconf, errstr, 512)
        if not self.rk:
            lib.rd_kafka_conf_destroy(rconf)
            raise UsageError(f"invalid consumer settings: {errstr.value.decode(errors='replace')}")
        lib.rd_kafka_poll_set_consumer(self.rk)
        self.queue = lib.rd_kafka_queue_get_consumer(self.rk)
        if not self.queue:  # no consumer queue (no group.id): every call on it would read address 0
            lib.rd_kafka_destroy(self.rk)
            raise UsageError("invalid consumer settings: librdkafka gave the consumer no queue (is group.id set?)")
        self.ptrs = (c_void_p * BATCH)()
        self.view = np.frombuffer(memoryview(self.ptrs), dtype=np.uint64)
        self.rest = ctypes.addressof(self.ptrs) + ctypes.sizeof(c_void_p)

    def _rebalance(self, rk: int, err: int, parts: int, _opaque: int) -> None:
        lib = self.lib
        cooperative = lib.rd_kafka_rebalance_protocol(rk) == b"COOPERATIVE"
        if cooperative:
            fn = lib.rd_kafka_incremental_assign if err == ERR_ASSIGN else lib.rd_kafka_incremental_unassign
            error = fn(rk, parts)
            if error:
                lib.rd_kafka_error_destroy(error)
        else:
            lib.rd_kafka_assign(rk, parts if err == ERR_ASSIGN else None)
        if err == ERR_ASSIGN:
            self.run.assigned()

    def _tp_list(self, partitions: list[int], offsets: list[int] | None = None) -> int:
        tps = self.lib.rd_kafka_topic_partition_list_new(max(len(partitions), 1))
        for i, p in enumerate(partitions):
            tp = self.lib.rd_kafka_topic_partition_list_add(tps, self.run.topic.encode(), p)
            tp.contents.offset = RD_KAFKA_OFFSET_BEGINNING if offsets is None else offsets[i]
        return int(tps)

    def high_watermarks(self, timeout_ms: int) -> list[int]:
        """The end offset of each of this consumer's partitions (--no-group), asked of their leaders."""
        lib, low, high = self.lib, c_int64(), c_int64()
        ends = []
        for p in self.partitions or []:
            code = lib.rd_kafka_query_watermark_offsets(
                self.rk, self.run.topic.encode(), p, ctypes.byref(low), ctypes.byref(high), timeout_ms
            )
            if code != 0:
                raise UsageError(f"cannot read the end offset of {self.run.topic}[{p}]: {self._name(code)}")
            ends.append(high.value)
        return ends

    def start(self, offsets: list[int] | None = None) -> None:
        """Subscribe (group mode) or assign the partitions, from the beginning unless `offsets` are given."""
        lib = self.lib
        if self.partitions is None:
            tps = self._tp_list([])
            lib.rd_kafka_topic_partition_list_add(tps, self.run.topic.encode(), -1)
            code = lib.rd_kafka_subscribe(self.rk, tps)
        else:
            tps = self._tp_list(self.partitions, offsets)
            code = lib.rd_kafka_assign(self.rk, tps)
        lib.rd_kafka_topic_partition_list_destroy(tps)
        if code != 0:
            raise UsageError(f"cannot {'subscribe' if self.partitions is None else 'assign'}: {self._name(code)}")
        if self.partitions is not None:
            self.run.assigned()

    def _name(self, code: int) -> str:
        name = self.lib.rd_kafka_err2name(code)
        return name.decode() if name else str(code)

    def poll(self, timeout_ms: int) -> np.ndarray:
        """Wait up to timeout_ms for one message, then take whatever else is queued (up to BATCH) without
        waiting: the message pointers (a batch call alone would wait for a full batch)."""
        lib = self.lib
        first = lib.rd_kafka_consume_queue(self.queue, timeout_ms)
        if not first:
            return self.view[:0]
        self.ptrs[0] = first
        more = lib.rd_kafka_consume_batch_queue(self.queue, 0, self.rest, BATCH - 1)
        return self.view[: 1 + max(more, 0)].copy()

    def count(self, addrs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Count a batch into the run (records, bytes, errors), free it; (ok mask, payload addresses)."""
        err, size, payload = _fields(addrs)
        ok = err == 0
        errors: dict[str, int] = {}
        if not ok.all():
            for code, count in zip(*np.unique(err[~ok], return_counts=True), strict=True):
                errors[self._name(int(code))] = int(count)
        self.run.add(int(np.count_nonzero(ok)), int(size[ok].sum()), errors)
        return ok, payload

    def free(self, addrs: np.ndarray) -> None:
        deque(map(self.lib.rd_kafka_message_destroy, addrs.tolist()), maxlen=0)

    def close(self) -> None:
        if self.rk:
            self.lib.rd_kafka_queue_destroy(self.queue)
            self.lib.rd_kafka_consumer_close(self.rk)
            self.lib.rd_kafka_destroy(self.rk)
            self.rk = None


def worker(run: _GroupRun, conf: dict[str, Any], partitions: list[int] | None) -> None:
    """One thread's consumer until the run is done (or nothing came for the run's timeout)."""
    c = NativeConsumer(run, conf, partitions)
    try:
        c.start()
        while not run.done.is_set():
            addrs = c.poll(200)
            if len(addrs):
                c.count(addrs)
                c.free(addrs)
            else:
                run.check_idle(time.monotonic())
    finally:
        c.close()
