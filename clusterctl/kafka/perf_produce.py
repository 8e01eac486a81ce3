"""The produce side of `perf`: the driver (`run_produce`: token-bucket throttling, progress windows, HDR
percentiles), its result, and the `client` engine (the `native` one is perf_native.py).

- `native` (perf_native.py): librdkafka's batch API through ctypes; Python works per batch, never per
  record. Send time is interpolated within each batch call; acks come as DR events.
- `client`: confluent-kafka's Producer. Records are pre-built once (one payload, or a small pool from
  --payload-file) into message dicts that `produce_batch` enqueues in C. Latency is stamped per record by
  librdkafka at enqueue and read back with `Message.latency()` in the one Python delivery callback,
  which appends a float to a flat `array('d')`.

Either way latencies land in an HDR histogram (latency.py: µs, 3 significant digits) in bulk, with numpy,
once per progress tick. Like Java's tool, a latency ends when the application serves the ack; the driver serves
acks after every chunk and sleeps inside the poll, so that wait stays small.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from clusterctl.errors import ClusterctlError, UsageError
from clusterctl.kafka.diskguard import DiskCheck
from clusterctl.kafka.latency import MB, LatencyRecorder, ProduceWindow
from clusterctl.kafka.settings import producer_config
from clusterctl.spec import validate

# confluent-kafka (and the asyncio it imports) loads only where it is used: the native engine and the topic
# lookup talk to librdkafka directly, so an unthrottled `perf produce` starts sending ~60 ms sooner.

CHUNK = 1000  # records per produce_batch call on the unthrottled path
POOL_MAX = 1000  # payload-file lines kept (Java's tool picks a random line per record)
PROGRESS_INTERVAL_S = 5.0
COMPRESSIONS = ("none", "gzip", "snappy", "lz4", "zstd")
ENGINES = ("auto", "native", "client")
JAVA_BUFFER_MEMORY_KB = 32 * 1024  # the Java producer's buffer.memory default


@dataclass
class ProduceResult:
    """The final summary (kafka-producer-perf-test.sh's last line, plus failures and settings)."""

    topic: str
    records: int
    delivered: int
    failed: int
    record_size: int
    elapsed_s: float
    records_per_sec: float
    mb_per_sec: float
    avg_latency_ms: float
    max_latency_ms: float
    p50_ms: float
    p95_ms: float
    p99_ms: float
    p999_ms: float
    acks: str
    compression: str
    target_throughput: float
    queue_full_waits: int
    engine: str
    send_stamp_window_ms: float
    errors: dict[str, int] = field(default_factory=dict)
    producer_config: dict[str, str] = field(default_factory=dict)
    topic_created: bool = False
    retention_bytes: int | None = None
    disk: DiskCheck | None = None
    #: stopped by a signal (Ctrl-C, SIGTERM, SIGHUP): a partial result, what was acknowledged until then
    interrupted: bool = False


def max_record_bytes(conf: dict[str, Any]) -> int:
    """The largest record value librdkafka takes: the producer's message.max.bytes (--producer-prop's, else the
    default that clusterctl keeps) less its record overhead."""
    try:
        limit = int(conf.get("message.max.bytes", validate.MAX_MESSAGE_BYTES))
    except (TypeError, ValueError):
        limit = validate.MAX_MESSAGE_BYTES  # librdkafka refuses the property itself, with its own message
    return max(limit - validate.RECORD_OVERHEAD, 0)


def build_payloads(
    record_size: int,
    payload_file: Path | None = None,
    max_bytes: int = validate.MAX_RECORD_BYTES,
) -> list[bytes]:
    """One random A-Z payload of `record_size` bytes (as Java's tool does), or the lines of `payload_file`;
    the size is checked against the largest record the producer takes before anything is allocated."""
    if payload_file is None:
        what = "--record-size (the producer's message.max.bytes less 36 bytes of record overhead)"
        validate.at_most(record_size, what, max_bytes, minimum=0)
        # os.urandom rather than numpy.random, whose import costs more than the whole payload
        return [bytes(np.frombuffer(os.urandom(record_size), dtype=np.uint8) % 26 + 65)]
    return read_payload_file(payload_file, max_bytes)


def read_payload_file(path: Path, max_bytes: int) -> list[bytes]:
    """The first POOL_MAX non-empty lines of a regular file, each at most `max_bytes`, reading no more than
    MAX_PAYLOAD_FILE_BYTES: a device, a FIFO or an endless file cannot stall or fill the process."""
    from clusterctl.errors import SpecError
    from clusterctl.kafka.clients import EndlessLine, Oversize, read_lines

    what = "--payload-file"
    try:
        validate.input_file(path, what)
    except SpecError as exc:
        if exc.exit_code != 2:
            raise  # not found: exit 3
        raise UsageError(exc.message) from None
    lines: list[bytes] = []
    read = 0
    try:
        with path.open("rb") as fh:
            for number, raw in enumerate(read_lines(fh, max_bytes, validate.MAX_PAYLOAD_FILE_BYTES), start=1):
                if isinstance(raw, Oversize):
                    raise UsageError(
                        f"{what} {path} line {number} is {raw.size} bytes; a record may be at most {max_bytes} "
                        f"(the producer's message.max.bytes less {validate.RECORD_OVERHEAD} bytes of overhead)"
                    )
                read += len(raw) + 1
                if raw:
                    lines.append(raw)
                if len(lines) >= POOL_MAX or read > validate.MAX_PAYLOAD_FILE_BYTES:
                    break
    except EndlessLine:
        mib = validate.MAX_PAYLOAD_FILE_BYTES // (1 << 20)
        raise UsageError(f"{what} {path} has a line with no end in its first {mib} MiB; refused") from None
    except OSError as exc:
        raise UsageError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    if not lines:
        raise UsageError(f"{what} {path} has no non-empty records")
    return lines


def perf_producer_config(
    bootstrap: str,
    acks: str,
    compression: str,
    batch_size: int | None,
    linger_ms: float | None,
    extra: dict[str, str],
) -> dict[str, Any]:
    if compression not in COMPRESSIONS:
        raise UsageError(f"--compression must be one of {', '.join(COMPRESSIONS)}, got {compression!r}")
    overrides: dict[str, Any] = {
        "compression.type": compression,
        # as Java's producer, which kafka-producer-perf-test.sh runs: TCP_NODELAY on its sockets (librdkafka
        # leaves Nagle on), and at most buffer.memory = 32 MiB waiting to be sent (librdkafka allows 1 GiB:
        # sending flat out, every queued MiB is latency). --producer-prop overrides either.
        "socket.nagle.disable": True,
        "queue.buffering.max.kbytes": JAVA_BUFFER_MEMORY_KB,
        # connect while the engine is set up, not when the first batch is waiting (sparse connections)
        "enable.sparse.connections": False,
    }
    if batch_size is not None:
        overrides["batch.size"] = batch_size
    if linger_ms is not None:
        overrides["linger.ms"] = linger_ms
    conf = producer_config(bootstrap, acks)
    conf.update(overrides)
    conf.update(extra)
    return conf


class ClientEngine:
    """confluent-kafka's Producer: produce_batch over pre-built dicts, one Python delivery callback per record."""

    name = "client"

    def __init__(
        self, conf: dict[str, Any], topic: str, payloads: list[bytes], rec: LatencyRecorder, records: int
    ) -> None:
        self.bootstrap = str(conf.get("bootstrap.servers", ""))
        self.topic = topic
        self.rec = rec
        self.queue_full = 0
        self.max_call_s = 0.0  # latency is stamped by librdkafka per record: no interpolation window
        from confluent_kafka import KafkaException, Producer

        try:
            self.producer = Producer({**conf, "on_delivery": rec.callback()})
        except KafkaException as exc:
            raise UsageError(f"invalid producer settings: {exc.args[0].str() if exc.args else exc}") from None
        # built once and reused for every call: produce_batch reads the dicts, nothing is allocated per record
        self.chunk = [{"value": payloads[i % len(payloads)]} for i in range(CHUNK)]
        self.poll = self.producer.poll

    def enqueue(self, n: int) -> int:
        """Try to enqueue n records; returns how many were dealt with (queued, or failed at enqueue)."""
        from confluent_kafka import KafkaError, KafkaException

        from clusterctl.kafka.connection import kafka_error

        batch = self.chunk if n == len(self.chunk) else self.chunk[:n]
        try:
            queued = self.producer.produce_batch(self.topic, batch)
        except BufferError:
            queued = 0
        except KafkaException as exc:
            raise kafka_error(exc, self.bootstrap) from None
        if queued == n:
            return n
        # produce_batch marks each dict it could not enqueue with '_error'; clear them for the next call
        err: Any = None
        for d in batch:
            e = d.pop("_error", None)
            err = err or e
        if err is None or (hasattr(err, "code") and err.code() == KafkaError._QUEUE_FULL):
            self.queue_full += 1
            self.poll(0.005)  # let librdkafka drain; the rest is retried on the next round
            return queued
        self.rec.count_failures(err.name() if hasattr(err, "name") else str(err), n - queued)
        return n

    def flush(self, timeout: float, idle: Callable[[], bool] | None = None) -> int:
        return int(self.producer.flush(timeout))  # its latencies are Python floats: nothing to drain early

    def abort(self) -> None:
        self.producer.purge()
        self.producer.flush(1)

    def close(self) -> None:
        pass


def make_engine(
    engine: str, conf: dict[str, Any], topic: str, payloads: list[bytes], rec: LatencyRecorder, records: int
) -> ClientEngine | Any:
    """`native` (librdkafka's batch API, the default when the wheel's librdkafka loads) or `client`."""
    if engine not in ENGINES:
        raise UsageError(f"--engine must be one of {', '.join(ENGINES)}, got {engine!r}")
    if engine in ("native", "auto"):
        from clusterctl.kafka import perf_native

        if perf_native.available():
            return perf_native.NativeEngine(conf, topic, payloads, rec, records)
        if engine == "native":
            raise ClusterctlError(f"--engine native: {perf_native.unavailable_reason()}", hint="use --engine client")
    return ClientEngine(conf, topic, payloads, rec, records)


def check_produce_args(num_records: int, throughput: float, engine: str) -> None:
    validate.at_most(num_records, "--num-records", validate.MAX_RECORDS)
    validate.finite(throughput, "--throughput")
    if throughput == 0 or (throughput < 0 and throughput != -1):
        raise UsageError(f"--throughput must be positive or -1 (unthrottled), got {throughput:g}")
    validate.at_most(throughput, "--throughput", validate.MAX_THROUGHPUT, minimum=-1)
    if engine not in ENGINES:
        raise UsageError(f"--engine must be one of {', '.join(ENGINES)}, got {engine!r}")


def run_produce(
    bootstrap: str,
    topic: str,
    num_records: int,
    payloads: list[bytes],
    *,
    throughput: float = -1,
    acks: str = "1",
    compression: str = "none",
    batch_size: int | None = None,
    linger_ms: float | None = None,
    extra_config: dict[str, str] | None = None,
    progress: Callable[[ProduceWindow], None] | None = None,
    progress_interval: float = PROGRESS_INTERVAL_S,
    flush_timeout: float | None = None,
    engine: str = "auto",
) -> ProduceResult:
    """Send `num_records` records as fast as allowed (or at `throughput` records/s); summary with percentiles.

    Throttling is a token bucket on the monotonic clock: record k may go at start + k/throughput, so the
    average rate is exact however coarse the sleeps are; waits are spent serving delivery reports.
    """
    check_produce_args(num_records, throughput, engine)
    conf = perf_producer_config(bootstrap, acks, compression, batch_size, linger_ms, dict(extra_config or {}))
    rec = LatencyRecorder()
    eng = make_engine(engine, conf, topic, payloads, rec, num_records)
    record_size = sum(len(p) for p in payloads) // len(payloads)
    start = time.monotonic()
    try:
        _send_all(eng, rec, num_records, throughput, start, record_size, progress, progress_interval)
        timeout = flush_timeout
        if timeout is None:
            timeout = float(conf.get("message.timeout.ms", 30000)) / 1000 + 10
        left = eng.flush(timeout, rec.drain_some)
        end = time.monotonic()
    except KeyboardInterrupt as exc:
        try:
            eng.abort()  # what is still queued is purged (counted as failed), so the summary is final
            rec.drain()
            partial = _produce_result(
                topic, num_records, record_size, time.monotonic() - start, rec, eng, conf, acks, compression,
                throughput,
            )  # fmt: skip
            partial.interrupted = True
            exc.result = partial  # type: ignore[attr-defined]  # printed by the CLI, `result` in --json
        finally:
            eng.close()
        raise
    except BaseException:
        eng.close()
        raise
    eng.close()
    rec.count_failures("not delivered before flush timeout", left)
    rec.drain()
    return _produce_result(topic, num_records, record_size, end - start, rec, eng, conf, acks, compression, throughput)


def _send_all(
    eng: ClientEngine | Any,
    rec: LatencyRecorder,
    num_records: int,
    throughput: float,
    start: float,
    record_size: int,
    progress: Callable[[ProduceWindow], None] | None,
    progress_interval: float,
) -> None:
    """Enqueue every record (paced by the token bucket when throttled), reporting a window each interval."""
    enqueue, poll = eng.enqueue, eng.poll
    sent = 0  # records enqueued or failed at enqueue
    next_tick = start + progress_interval
    window_start = start
    throttled = throughput > 0
    burst = max(1, int(throughput / 1000))  # records due per millisecond
    while sent < num_records:
        now = time.monotonic()
        if throttled:
            due = min(num_records, int((now - start) * throughput) + 1) - sent
            if due < min(burst, num_records - sent):
                # Ahead of schedule: wait (serving acks the moment they arrive) until about a millisecond's
                # worth of records is due, at least 1 ms (the engines' poll granularity); records then go
                # out in small bursts, as with Java's throttler, each stamped when it is really sent.
                # Sending each record the moment it is due instead means a busy loop, which takes a core
                # from librdkafka's I/O thread and the broker on a small machine: queueing, in every
                # percentile.
                poll(max(start + (sent + burst - 1) / throughput - now, 0.001))
                continue
            n = min(due, CHUNK)
        else:
            n = min(CHUNK, num_records - sent)
        sent += enqueue(n)
        poll(0)
        if now >= next_tick:
            rec.drain()
            if progress is not None:
                progress(rec.take_window(now - window_start, record_size))
            window_start = now
            next_tick = now + progress_interval


def _produce_result(
    topic: str,
    num_records: int,
    record_size: int,
    elapsed: float,
    rec: LatencyRecorder,
    eng: ClientEngine | Any,
    conf: dict[str, Any],
    acks: str,
    compression: str,
    throughput: float,
) -> ProduceResult:
    """The summary of a finished run, from the recorder's counts and histogram."""
    delivered = rec.delivered
    rate = delivered / elapsed if elapsed > 0 else 0.0
    shown = {k: str(v) for k, v in conf.items() if k != "logger"}
    p50, p95, p99, p999 = rec.percentiles_ms(50, 95, 99, 99.9)
    return ProduceResult(
        topic=topic,
        records=num_records,
        delivered=delivered,
        failed=rec.failed,
        record_size=record_size,
        elapsed_s=round(elapsed, 6),
        records_per_sec=round(rate, 1),
        mb_per_sec=round(rate * record_size / MB, 2),
        avg_latency_ms=round(rec.sum_us / delivered / 1000, 2) if delivered else 0.0,
        max_latency_ms=round(rec.max_us / 1000, 2),
        p50_ms=round(p50, 2),
        p95_ms=round(p95, 2),
        p99_ms=round(p99, 2),
        p999_ms=round(p999, 2),
        acks=acks,
        compression=compression,
        target_throughput=throughput,
        queue_full_waits=eng.queue_full,
        engine=eng.name,
        send_stamp_window_ms=round(eng.max_call_s * 1000, 3),
        errors=dict(rec.errors),
        producer_config=shown,
    )
