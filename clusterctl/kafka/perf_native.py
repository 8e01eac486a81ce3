"""The `native` produce engine: librdkafka's batch API, called through ctypes, from the librdkafka that the
confluent-kafka wheel ships (the very library confluent-kafka's Producer runs on).

Why: confluent-kafka's Producer costs ~1 µs of Python per record (argument parsing on enqueue, a Message
object and a Python callback per delivery report), which caps it near half of what librdkafka itself
does on two cores. Here Python touches batches, never records:

- enqueue: `rd_kafka_produce_batch` over a preallocated `rd_kafka_message_t[CHUNK]` whose payload
  pointers point at the pre-built payloads (no copy, nothing allocated per record); each message's
  opaque is its sequence number, written for the whole chunk at once through a numpy view;
- send time: the monotonic clock is read before and after each batch call and record i of the call gets
  the linear interpolation between the two (the error is bounded by the call's duration, reported as
  `send_stamp_window_ms`);
- delivery: reports arrive as DR events on the main queue (`rd_kafka_conf_set_events`). A DR event is one
  partition's acknowledged batch, so its records are consecutive sequence numbers: reading the first and
  the last message is enough and the latencies (ack time - send time) are one numpy subtraction. An event
  whose records are not consecutive (a retried or partly failed enqueue) is read message by message.
  The ack time is when the event is served, as in Java's tool.
"""

from __future__ import annotations

import ctypes
import glob
import math
import os
import time
from ctypes import POINTER, Structure, c_char_p, c_int, c_int32, c_int64, c_size_t, c_void_p
from typing import TYPE_CHECKING, Any

import numpy as np

from clusterctl.errors import UsageError

if TYPE_CHECKING:
    from collections.abc import Callable

CHUNK = 1000
RD_KAFKA_PRODUCER = 0
RD_KAFKA_PARTITION_UA = -1
RD_KAFKA_EVENT_DR = 0x1
RD_KAFKA_PURGE_F_QUEUE = 0x1
RD_KAFKA_PURGE_F_INFLIGHT = 0x2
ERR_QUEUE_FULL = -184
RING_MAX = 1 << 22  # send-time slots kept when a run is longer than this (4 Mi records in flight is plenty)


class _Message(Structure):
    """rd_kafka_message_t (rdkafka.h; stable public ABI)."""

    _fields_ = (
        ("err", c_int),
        ("rkt", c_void_p),
        ("partition", c_int32),
        ("payload", c_void_p),
        ("len", c_size_t),
        ("key", c_void_p),
        ("key_len", c_size_t),
        ("offset", c_int64),
        ("_private", c_void_p),
    )


class _MetadataPartition(Structure):
    """rd_kafka_metadata_partition_t."""

    _fields_ = (
        ("id", c_int32),
        ("err", c_int),
        ("leader", c_int32),
        ("replica_cnt", c_int),
        ("replicas", POINTER(c_int32)),
        ("isr_cnt", c_int),
        ("isrs", POINTER(c_int32)),
    )


class _MetadataTopic(Structure):
    """rd_kafka_metadata_topic_t."""

    _fields_ = (
        ("topic", c_char_p),
        ("partition_cnt", c_int),
        ("partitions", POINTER(_MetadataPartition)),
        ("err", c_int),
    )


class _Metadata(Structure):
    """rd_kafka_metadata_t."""

    _fields_ = (
        ("broker_cnt", c_int),
        ("brokers", c_void_p),
        ("topic_cnt", c_int),
        ("topics", POINTER(_MetadataTopic)),
        ("orig_broker_id", c_int32),
        ("orig_broker_name", c_char_p),
    )


_MSG_DTYPE = np.dtype(
    {
        "names": ["err", "payload", "len", "opaque"],
        "formats": ["<i4", "<u8", "<u8", "<u8"],
        "offsets": [_Message.err.offset, _Message.payload.offset, _Message.len.offset, _Message._private.offset],
        "itemsize": ctypes.sizeof(_Message),
    }
)

_lib: Any = None
_load_error: str | None = None


def _library_path() -> str | None:
    import importlib.util

    spec = importlib.util.find_spec("confluent_kafka")  # located, not imported
    if spec is None or not spec.submodule_search_locations:
        return None
    base = os.path.dirname(next(iter(spec.submodule_search_locations)))
    found = sorted(glob.glob(os.path.join(base, "confluent_kafka.libs", "librdkafka*.so*")))
    return found[0] if found else None


def _load() -> Any:
    global _lib, _load_error
    if _lib is not None or _load_error is not None:
        return _lib
    path = _library_path()
    if path is None:
        _load_error = "the confluent-kafka wheel ships no librdkafka shared library here"
        return None
    try:
        lib = ctypes.CDLL(path)
    except OSError as exc:
        _load_error = f"cannot load {path}: {exc}"
        return None
    sigs: dict[str, tuple[Any, list[Any]]] = {
        "rd_kafka_conf_new": (c_void_p, []),
        "rd_kafka_conf_destroy": (None, [c_void_p]),
        "rd_kafka_conf_set": (c_int, [c_void_p, c_char_p, c_char_p, c_char_p, c_size_t]),
        "rd_kafka_conf_set_events": (None, [c_void_p, c_int]),
        "rd_kafka_new": (c_void_p, [c_int, c_void_p, c_char_p, c_size_t]),
        "rd_kafka_destroy": (None, [c_void_p]),
        "rd_kafka_topic_new": (c_void_p, [c_void_p, c_char_p, c_void_p]),
        "rd_kafka_topic_destroy": (None, [c_void_p]),
        "rd_kafka_produce_batch": (c_int, [c_void_p, c_int32, c_int, c_void_p, c_int]),
        "rd_kafka_queue_get_main": (c_void_p, [c_void_p]),
        "rd_kafka_queue_destroy": (None, [c_void_p]),
        "rd_kafka_queue_poll": (c_void_p, [c_void_p, c_int]),
        "rd_kafka_event_type": (c_int, [c_void_p]),
        "rd_kafka_event_message_count": (c_size_t, [c_void_p]),
        "rd_kafka_event_message_array": (c_size_t, [c_void_p, c_void_p, c_size_t]),
        "rd_kafka_event_destroy": (None, [c_void_p]),
        "rd_kafka_outq_len": (c_int, [c_void_p]),
        "rd_kafka_purge": (c_int, [c_void_p, c_int]),
        "rd_kafka_err2name": (c_char_p, [c_int]),
        "rd_kafka_metadata": (c_int, [c_void_p, c_int, c_void_p, c_void_p, c_int]),
        "rd_kafka_metadata_destroy": (None, [c_void_p]),
    }
    try:
        for name, (res, args) in sigs.items():
            fn = getattr(lib, name)
            fn.restype = res
            fn.argtypes = args
    except AttributeError as exc:
        _load_error = f"{path} lacks {exc}"
        return None
    _lib = lib
    return lib


def available() -> bool:
    return _load() is not None


def unavailable_reason() -> str:
    _load()
    return _load_error or "available"


def _conf_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _new_conf(lib: Any, conf: dict[str, Any], what: str = "producer") -> Any:
    """An rd_kafka_conf_t holding `conf` (Python-only keys skipped, librdkafka's own log quiet); one line on a
    bad setting, with nothing left allocated."""
    errstr = ctypes.create_string_buffer(512)
    rconf = lib.rd_kafka_conf_new()
    settings = {k: v for k, v in conf.items() if not callable(v) and k not in ("logger", "on_delivery")}
    settings.setdefault("log_level", 0)
    for key, value in settings.items():
        if lib.rd_kafka_conf_set(rconf, key.encode(), _conf_value(value).encode(), errstr, 512) != 0:
            lib.rd_kafka_conf_destroy(rconf)
            raise UsageError(f"invalid {what} setting {key}={value}: {errstr.value.decode(errors='replace')}")
    return rconf


def _new_handle(lib: Any, rconf: Any, what: str = "producer") -> Any:
    """rd_kafka_new (a producer handle), which takes ownership of `rconf`."""
    errstr = ctypes.create_string_buffer(512)
    rk = lib.rd_kafka_new(RD_KAFKA_PRODUCER, rconf, errstr, 512)
    if not rk:
        lib.rd_kafka_conf_destroy(rconf)
        raise UsageError(f"invalid {what} settings: {errstr.value.decode(errors='replace')}")
    return rk


def check_config(conf: dict[str, Any]) -> None:
    """Reject unknown or invalid librdkafka properties before anything is created (no handle, no connection)."""
    lib = _load()
    if lib is not None:
        lib.rd_kafka_conf_destroy(_new_conf(lib, conf))


class MetadataError(Exception):
    """A failed Metadata request: librdkafka's error code and name, and how long it waited."""

    def __init__(self, code: int, name: str, waited: float) -> None:
        super().__init__(name)
        self.code, self.name, self.waited = code, name, waited


def topic_layout(conf: dict[str, Any], topic: str, timeout_s: float) -> tuple[int, int] | None:
    """(partitions, replication factor) of `topic` from one Metadata request (all topics, as `topic list` asks:
    naming the topic would let a broker auto-create it); None when the topic does not exist."""
    lib = _load()
    if lib is None:
        raise UsageError(f"librdkafka: {_load_error}")
    rk = _new_handle(lib, _new_conf(lib, conf, "client"), "client")
    md = POINTER(_Metadata)()
    start = time.monotonic()
    try:
        err = lib.rd_kafka_metadata(rk, 1, None, ctypes.byref(md), int(timeout_s * 1000))
        if err != 0:
            name = lib.rd_kafka_err2name(err)
            raise MetadataError(err, name.decode() if name else str(err), time.monotonic() - start)
        try:
            m = md.contents
            for i in range(m.topic_cnt):
                t = m.topics[i]
                if t.topic.decode() != topic:
                    continue
                if t.err != 0 or t.partition_cnt == 0:
                    return None
                rf = max(t.partitions[j].replica_cnt for j in range(t.partition_cnt))
                return t.partition_cnt, rf
            return None
        finally:
            lib.rd_kafka_metadata_destroy(md)
    finally:
        lib.rd_kafka_destroy(rk)


class NativeEngine:
    """One librdkafka producer handle driven batch by batch (see the module docstring)."""

    name = "native"

    def __init__(self, conf: dict[str, Any], topic: str, payloads: list[bytes], rec: Any, records: int) -> None:
        lib = _load()
        if lib is None:
            raise UsageError(f"--engine native: {_load_error}")
        self.lib = lib
        self.rec = rec
        self.queue_full = 0
        self.max_call_s = 0.0
        # librdkafka's own log lines stay quiet, as for the client engine; failures come back as delivery reports
        rconf = _new_conf(lib, conf)
        lib.rd_kafka_conf_set_events(rconf, RD_KAFKA_EVENT_DR)
        self.rk = _new_handle(lib, rconf)
        self.rkt = lib.rd_kafka_topic_new(self.rk, topic.encode(), None)
        self.queue = lib.rd_kafka_queue_get_main(self.rk)
        # payloads stay referenced for the engine's lifetime: librdkafka reads them without copying
        self._buffers = [ctypes.create_string_buffer(p, len(p)) for p in payloads]
        self.msgs = (_Message * CHUNK)()
        self.view = np.frombuffer(memoryview(self.msgs), dtype=_MSG_DTYPE)
        addrs = np.array([ctypes.addressof(b) for b in self._buffers], dtype=np.uint64)
        lens = np.array([len(p) for p in payloads], dtype=np.uint64)
        idx = np.arange(CHUNK) % len(payloads)
        self.view["payload"] = addrs[idx]
        self.view["len"] = lens[idx]
        self.steps = np.arange(1, CHUNK + 1, dtype=np.int64)
        self.offsets = np.arange(CHUNK, dtype=np.uint64)
        self.seq = 0
        self.ring = 1 << max(10, (min(records, RING_MAX) - 1).bit_length())
        self.mask = self.ring - 1
        self.sent_ns = np.zeros(self.ring, dtype=np.int64)
        self.ptr_cap = 0
        self.ptrs: Any = None
        self._grow_ptrs(10_000)

    def _grow_ptrs(self, n: int) -> None:
        if n > self.ptr_cap:
            self.ptr_cap = n
            self.ptrs = (POINTER(_Message) * n)()

    def enqueue(self, n: int) -> int:
        view = self.view
        seq = self.seq
        view["opaque"][:n] = self.offsets[:n] + np.uint64(seq)
        view["err"][:n] = 0
        t0 = time.monotonic_ns()
        queued = self.lib.rd_kafka_produce_batch(self.rkt, RD_KAFKA_PARTITION_UA, 0, self.msgs, n)
        t1 = time.monotonic_ns()
        span = t1 - t0
        self.max_call_s = max(self.max_call_s, span / 1e9)
        slots = (np.arange(seq, seq + n, dtype=np.int64)) & self.mask
        self.sent_ns[slots] = t0 + (span * self.steps[:n]) // n
        self.seq = seq + n
        if queued == n:
            return n
        errs = view["err"][:n]
        failed = errs != 0
        full = int(np.count_nonzero(errs == ERR_QUEUE_FULL))
        for code in np.unique(errs[failed & (errs != ERR_QUEUE_FULL)]).tolist():
            self.rec.count_failures(self._err_name(code), int(np.count_nonzero(errs == code)))
        if full:
            self.queue_full += 1
            self.poll(0.005)
        return n - full  # queue-full records are sent again (with new sequence numbers)

    def _err_name(self, code: int) -> str:
        name = self.lib.rd_kafka_err2name(code)
        return name.decode() if name else str(code)

    def poll(self, timeout_s: float) -> None:
        """Serve delivery reports; wait up to timeout_s for the first."""
        lib = self.lib
        timeout_ms = math.ceil(timeout_s * 1000) if timeout_s > 0 else 0  # 0.4 ms waits 1 ms, not 0 (a spin)
        while True:
            ev = lib.rd_kafka_queue_poll(self.queue, timeout_ms)
            if not ev:
                return
            timeout_ms = 0
            try:
                if lib.rd_kafka_event_type(ev) == RD_KAFKA_EVENT_DR:
                    self._delivered(ev, time.monotonic_ns())
            finally:
                lib.rd_kafka_event_destroy(ev)

    def _delivered(self, ev: int, now_ns: int) -> None:
        count = self.lib.rd_kafka_event_message_count(ev)
        if count == 0:
            return
        self._grow_ptrs(count)
        got = self.lib.rd_kafka_event_message_array(ev, self.ptrs, count)
        first = self.ptrs[0].contents
        last = self.ptrs[got - 1].contents
        a, b = first._private or 0, last._private or 0
        # librdkafka acks or fails a partition's batch as a whole (one error for the DR op), in enqueue order
        if first.err == 0 and last.err == 0 and b - a + 1 == got:
            slots = np.arange(a, b + 1, dtype=np.int64) & self.mask
            self.rec.add_ns(now_ns - self.sent_ns[slots])
            return
        lat = []
        for i in range(got):
            m = self.ptrs[i].contents
            if m.err:
                self.rec.count_failures(self._err_name(m.err), 1)
            else:
                lat.append(now_ns - int(self.sent_ns[(m._private or 0) & self.mask]))
        if lat:
            self.rec.add_ns(np.array(lat, dtype=np.int64))

    def flush(self, timeout: float, idle: Callable[[], bool] | None = None) -> int:
        """Serve delivery reports until none is outstanding; between them run `idle()` (a short step of
        other work, True while it had some) instead of waiting."""
        deadline = time.monotonic() + timeout
        while self.lib.rd_kafka_outq_len(self.rk) > 0 and time.monotonic() < deadline:
            busy = idle() if idle is not None else False
            self.poll(0 if busy else 0.1)
        self.poll(0)
        return int(self.lib.rd_kafka_outq_len(self.rk))

    def abort(self) -> None:
        self.lib.rd_kafka_purge(self.rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT)
        self.poll(0.5)

    def close(self) -> None:
        if self.rk:
            self.poll(0)
            self.lib.rd_kafka_topic_destroy(self.rkt)
            self.lib.rd_kafka_queue_destroy(self.queue)
            self.lib.rd_kafka_destroy(self.rk)
            self.rk = None
