"""`perf e2e`: produce -> consume latency, what Kafka's EndToEndLatency tool measures, at a fixed rate.

One process holds both ends (librdkafka through ctypes, as the native engines): a producer sends N records at
`--throughput` records/s, each carrying a run id and its sequence number in its first 16 bytes, and stamps the
monotonic clock before each send call; a consumer, assigned every partition at its end offset before the first
send, reads them in batches, gathers the (run id, sequence) pairs with numpy and takes the latency as the
batch's arrival time minus the record's send stamp. Records of other runs are not counted. Measuring starts
once a warm-up record has made the whole trip (a just-created topic's leader takes seconds to be usable).

Java's EndToEndLatency keeps one record in flight (send, wait for the ack, poll until it is consumed), so its
rate is whatever one round trip allows; this holds a rate instead and measures every record under it.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from clusterctl.errors import UsageError
from clusterctl.kafka import clientprops, perf_consume_native, perf_native
from clusterctl.kafka.latency import LatencyRecorder
from clusterctl.kafka.perf_consume import _GroupRun
from clusterctl.kafka.perf_native import _Message
from clusterctl.kafka.perf_produce import perf_producer_config
from clusterctl.kafka.perf_topic import plan_topic, prepare_topic
from clusterctl.kafka.settings import consumer_config
from clusterctl.spec import validate

CHUNK = 1000
HEADER = 16  # run id, sequence number (little-endian uint64 each)
RD_KAFKA_MSG_F_COPY = 0x2
WATERMARK_TIMEOUT_MS = 10_000
WARM_UP = (1 << 64) - 1  # the sequence number of warm-up records
# Produce requests in flight per connection: Java's producer default. librdkafka's (1,000,000) lets a fixed-rate
# sender pipeline one small request per burst while the broker is stalled (a GC pause, a busy CPU); a broker reads
# one request per connection at a time, so the queue drains one round trip per request and the records behind it
# wait. With a few in flight, what is sent during a stall waits in the client and goes as one request after it.
MAX_IN_FLIGHT = 5


@dataclass
class E2EResult:
    """Produce -> consume latency of one run (ms); the rate is the producer's achieved send rate."""

    topic: str
    records: int
    received: int
    record_size: int
    target_throughput: float
    records_per_sec: float
    elapsed_s: float
    avg_latency_ms: float
    p50_ms: float
    p99_ms: float
    p999_ms: float
    max_latency_ms: float
    complete: bool
    errors: dict[str, int] = field(default_factory=dict)
    # from each record's slot in the schedule (start + i / rate) instead of its send call: a late send counts
    scheduled_p50_ms: float = 0.0
    scheduled_p99_ms: float = 0.0
    scheduled_p999_ms: float = 0.0
    cpu_seconds: float = 0.0  # this process's CPU time (all threads) from the first send until the last record
    #: stopped by a signal (Ctrl-C, SIGTERM, SIGHUP): a partial result, what was sent and received until then
    interrupted: bool = False
    sent: int = 0  # records sent (all of them unless interrupted)


class _Producer:
    """One librdkafka producer handle sending stamped, sequence-numbered records (copied at enqueue)."""

    def __init__(self, conf: dict[str, Any], topic: str, size: int, run_id: int, records: int) -> None:
        lib = perf_native._load()
        if lib is None:
            raise UsageError(f"perf e2e: {perf_native.unavailable_reason()}")
        self.lib = lib
        self.rk = perf_native._new_handle(lib, perf_native._new_conf(lib, conf))
        self.rkt = lib.rd_kafka_topic_new(self.rk, topic.encode(), None)
        self.payloads = np.zeros((CHUNK, size), dtype=np.uint8)
        self.payloads[:, :8] = np.frombuffer(run_id.to_bytes(8, "little"), dtype=np.uint8)
        self.seq_view = self.payloads[:, 8:16]
        self.msgs = (_Message * CHUNK)()
        view = np.frombuffer(memoryview(self.msgs), dtype=perf_native._MSG_DTYPE)
        view["payload"] = self.payloads.ctypes.data + np.arange(CHUNK, dtype=np.uint64) * np.uint64(size)
        view["len"] = size
        self.err = view["err"]
        self.sent_ns = np.zeros(records, dtype=np.int64)
        self.due_ns = self.sent_ns  # when each record was meant to be sent (pacing: its slot in the schedule)
        self.sent = 0
        self.failed: dict[str, int] = {}
        self.start_ns: int | None = None
        self.period_ns = 0.0

    def send(self, n: int, warm_up: bool = False) -> None:
        """Enqueue the next `n` records (stamped), or one unstamped warm-up record (sequence WARM_UP)."""
        seqs = np.full(1, WARM_UP, dtype="<u8") if warm_up else np.arange(self.sent, self.sent + n, dtype="<u8")
        self.seq_view[:n] = seqs.view(np.uint8).reshape(n, 8)
        self.err[:n] = 0
        if not warm_up:
            self.sent_ns[self.sent : self.sent + n] = time.monotonic_ns()
            if self.start_ns is not None:
                slots = np.arange(self.sent, self.sent + n, dtype=np.float64)
                self.due_ns[self.sent : self.sent + n] = self.start_ns + (slots * self.period_ns).astype(np.int64)
        queued = self.lib.rd_kafka_produce_batch(self.rkt, perf_native.RD_KAFKA_PARTITION_UA, RD_KAFKA_MSG_F_COPY,
                                                 self.msgs, n)  # fmt: skip
        if queued < n:
            for code in self.err[:n][self.err[:n] != 0].tolist():
                name = self.lib.rd_kafka_err2name(code)
                key = name.decode() if name else str(code)
                self.failed[key] = self.failed.get(key, 0) + 1
        if not warm_up:
            self.sent += n

    def close(self) -> None:
        self.lib.rd_kafka_topic_destroy(self.rkt)
        self.lib.rd_kafka_destroy(self.rk)


class _Receiver:
    """The consuming end: takes batches, keeps latencies from the send call and from the scheduled send time."""

    def __init__(self, run: _GroupRun, consumer: perf_consume_native.NativeConsumer, producer: _Producer,
                 run_id: int) -> None:  # fmt: skip
        self.run, self.consumer, self.producer, self.run_id = run, consumer, producer, run_id
        self.rec, self.rec_due = LatencyRecorder(), LatencyRecorder()
        self.received = 0
        self.primed, self.got = threading.Event(), threading.Event()

    @property
    def finished(self) -> bool:
        return self.received >= len(self.producer.sent_ns) or self.run.done.is_set()

    def poll(self, timeout_ms: int) -> None:
        """Take what arrived within `timeout_ms`: `primed` once a warm-up record came through, `got` whenever
        records of this run did; records of other runs are not counted."""
        addrs = self.consumer.poll(timeout_ms)
        if not len(addrs):
            self.run.check_idle(time.monotonic())
            return
        now = time.monotonic_ns()
        ok, payload = self.consumer.count(addrs)
        ids, seqs = perf_consume_native.read_u64(payload[ok], (0, 8))
        self.consumer.free(addrs)
        mine = ids == np.uint64(self.run_id)
        if not self.primed.is_set() and np.any(mine & (seqs == np.uint64(WARM_UP))):
            self.primed.set()
        mine &= seqs < np.uint64(len(self.producer.sent_ns))
        if mine.any():
            idx = seqs[mine].astype(np.int64)
            self.rec.add_ns(now - self.producer.sent_ns[idx])
            self.rec_due.add_ns(now - self.producer.due_ns[idx])
            self.received += len(idx)
            self.got.set()


def _receive(rx: _Receiver, until_primed: bool) -> None:
    """A reader thread: poll until every record arrived (or, `until_primed`, a warm-up record did)."""
    while not rx.finished and not (until_primed and rx.primed.is_set()):
        rx.poll(100)


def _prime(rx: _Receiver) -> None:
    """Until one warm-up record has gone all the way through (the producer knows the leader, the consumer is
    fetching: a topic created a moment ago takes seconds), one every 50 ms; not part of the measurement."""
    reader = threading.Thread(target=_receive, args=(rx, True), daemon=True)
    reader.start()
    while not rx.primed.is_set() and not rx.run.done.is_set():
        rx.producer.send(1, warm_up=True)
        rx.producer.lib.rd_kafka_poll(rx.producer.rk, 0)
        rx.primed.wait(0.05)
    reader.join()


def _one_in_flight(rx: _Receiver, records: int) -> float:
    """Send each record once the one before it was consumed, as Kafka's EndToEndLatency does; the seconds."""
    producer, done = rx.producer, rx.run.done
    reader = threading.Thread(target=_receive, args=(rx, False), daemon=True)
    reader.start()
    start = time.monotonic()
    while producer.sent < records and not done.is_set():
        rx.got.clear()
        producer.send(1)
        producer.lib.rd_kafka_poll(producer.rk, 0)
        while not rx.got.wait(0.1) and not done.is_set():
            pass
    elapsed = time.monotonic() - start
    while reader.is_alive():
        reader.join(0.2)
    return elapsed


def _pace(rx: _Receiver, records: int, throughput: float) -> float:
    """Send `records` at `throughput` records/s (-1: as fast as possible) in bursts of about a millisecond's
    worth, as Java's throttler does (one record per call would be one produce request each, since
    librdkafka does not hold records back with linger.ms=0), while a reader thread consumes; the seconds
    from the first send to the last."""
    producer, done = rx.producer, rx.run.done
    reader = threading.Thread(target=_receive, args=(rx, False), daemon=True)
    reader.start()
    burst = 1 if throughput < 0 else max(1, int(throughput / 1000))
    start_ns = time.monotonic_ns()
    start = start_ns / 1e9
    if throughput > 0:
        producer.due_ns = np.zeros(records, dtype=np.int64)
        producer.period_ns = 1e9 / throughput
        producer.start_ns = start_ns
    while producer.sent < records and not done.is_set():
        elapsed = time.monotonic() - start
        due = records if throughput < 0 else min(records, int(elapsed * throughput) + 1)
        n = min(due - producer.sent, CHUNK)
        if n >= burst or (n > 0 and due == records):
            producer.send(n)
            producer.lib.rd_kafka_poll(producer.rk, 0)
        else:
            time.sleep(max((producer.sent + burst - 1) / throughput - elapsed, 0.0001))
    elapsed = time.monotonic() - start
    while reader.is_alive():
        reader.join(0.2)
    return elapsed


def check_args(records: int, record_size: int, throughput: float) -> None:
    validate.at_most(records, "--num-records", validate.MAX_RECORDS)
    if record_size < HEADER:
        raise UsageError(f"--record-size must be at least {HEADER} (run id and sequence number), got {record_size}")
    validate.at_most(record_size, "--record-size", validate.MAX_RECORD_BYTES, minimum=HEADER)
    validate.finite(throughput, "--throughput")
    if throughput == 0 or throughput < -1:
        raise UsageError(f"--throughput must be positive or -1, got {throughput:g}")
    validate.at_most(throughput, "--throughput", validate.MAX_THROUGHPUT, minimum=-1)


def e2e_producer_config(bootstrap: str, acks: str, extra: dict[str, str]) -> dict[str, Any]:
    """The producing end's settings: sent at once (linger.ms=0, as EndToEndLatency), MAX_IN_FLIGHT requests in
    flight; `extra` (--producer-prop) overrides either."""
    in_flight = {"max.in.flight.requests.per.connection": str(MAX_IN_FLIGHT)}
    return perf_producer_config(bootstrap, acks, "none", None, 0, {**in_flight, **extra})


def e2e_test(
    bootstrap: str, topic: str, records: int, *, partitions: int, replication_factor: int,
    notify: Callable[[str], None] = lambda _line: None, **kw: Any,
) -> E2EResult:  # fmt: skip
    """One `perf e2e`: arguments checked, the topic created when missing (`partitions`, `replication_factor`;
    an existing topic keeps its own), then `run_e2e`."""
    check_args(records, kw.get("record_size", 100), kw.get("throughput", 1000))
    clientprops.check(kw.get("producer_extra") or {}, "producer", "--producer-prop")  # before the topic is made
    clientprops.check(kw.get("consumer_extra") or {}, "consumer", "--consumer-prop")
    plan = plan_topic(bootstrap, topic, partitions, replication_factor)
    created, _note = prepare_topic(bootstrap, plan, create=True, retention_bytes=None)
    if created:
        notify(f"created topic {topic} ({plan.partitions} partitions, RF {plan.replication_factor})")
    return run_e2e(bootstrap, topic, records, partitions=plan.partitions, **kw)


def run_e2e(
    bootstrap: str, topic: str, records: int, *, partitions: int, record_size: int = 100, throughput: float = 1000,
    acks: str = "1", timeout: float = 10.0, producer_extra: dict[str, str] | None = None,
    consumer_extra: dict[str, str] | None = None, one_in_flight: bool = False,
) -> E2EResult:  # fmt: skip
    """Produce `records` at `throughput` (or each once the previous was consumed: `one_in_flight`) while
    consuming them; produce -> consume latency percentiles."""
    check_args(records, record_size, throughput)
    clientprops.check(producer_extra or {}, "producer", "--producer-prop")
    clientprops.check(consumer_extra or {}, "consumer", "--consumer-prop")
    pconf = e2e_producer_config(bootstrap, acks, producer_extra or {})
    # read_uncommitted as Java's consumer (librdkafka's default is read_committed: the broker bounds each fetch
    # by the last stable offset and looks up aborted transactions)
    cconf = {**consumer_config(bootstrap), "socket.nagle.disable": True, "isolation.level": "read_uncommitted",
             **(consumer_extra or {})}  # fmt: skip
    perf_native.check_config(pconf)
    perf_consume_native.check_config(cconf)
    run_id = uuid.uuid4().int & ((1 << 64) - 1)
    # the run ends when this run's records are in (_Receiver.finished), not at a count that other records could reach
    run = _GroupRun(bootstrap, topic, None, 1 << 62, 1, timeout, consumer_extra, 0)
    consumer = perf_consume_native.NativeConsumer(run, cconf, list(range(partitions)))
    producer: _Producer | None = None
    rx: _Receiver | None = None
    stopped: KeyboardInterrupt | None = None
    try:
        consumer.start(consumer.high_watermarks(WATERMARK_TIMEOUT_MS))
        producer = _Producer(pconf, topic, record_size, run_id, records)
        rx = _Receiver(run, consumer, producer, run_id)
        _prime(rx)
        cpu, sending = time.process_time(), time.monotonic()
        try:
            elapsed = _one_in_flight(rx, records) if one_in_flight else _pace(rx, records, throughput)
        except KeyboardInterrupt as exc:  # the partial result below, then the interrupt goes on
            stopped, elapsed = exc, time.monotonic() - sending
        cpu = time.process_time() - cpu
    finally:
        run.done.set()
        if producer is not None:
            producer.close()
        consumer.close()
    assert producer is not None and rx is not None
    rec, rec_due = rx.rec, rx.rec_due
    rec.drain()
    rec_due.drain()
    p50, p99, p999 = rec.percentiles_ms(50, 99, 99.9)
    sched = rec_due.percentiles_ms(50, 99, 99.9)
    n = rec.delivered
    result = E2EResult(
        topic=topic, records=records, received=n, record_size=record_size, target_throughput=throughput,
        records_per_sec=round(producer.sent / elapsed, 1) if elapsed > 0 else 0.0, elapsed_s=round(elapsed, 3),
        avg_latency_ms=round(rec.sum_us / n / 1000, 3) if n else 0.0, p50_ms=p50, p99_ms=p99, p999_ms=p999,
        max_latency_ms=rec.max_us / 1000, complete=n >= records, errors={**producer.failed, **run.errors},
        scheduled_p50_ms=sched[0], scheduled_p99_ms=sched[1], scheduled_p999_ms=sched[2],
        cpu_seconds=round(cpu, 2), interrupted=stopped is not None, sent=producer.sent,
    )  # fmt: skip
    if stopped is not None:
        stopped.result = result  # type: ignore[attr-defined]  # printed by the CLI, `result` in --json
        raise stopped
    return result
