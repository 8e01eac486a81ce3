"""CLI for the 'perf' noun: `perf produce` / `perf consume` (kafka-*-perf-test.sh on confluent-kafka)."""

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from clusterctl.cli.common import (
    BootstrapOpt,
    GroupProtocolOpt,
    JsonOpt,
    bootstrap_servers,
    client_props,
    directory_option,
    finite_option,
    get_spec,
    group_option,
    seconds_option,
    skip_interpreter_teardown,
    state,
    timeout_option,
    uninterrupted,
)
from clusterctl.errors import ClusterctlError, SpecError, TimeoutError_
from clusterctl.kafka import diskguard
from clusterctl.output import Column, emit, format_time, info, outcome

if TYPE_CHECKING:
    from clusterctl.kafka import latency, perf

perf_app = typer.Typer(name="perf", help="Producer and consumer throughput/latency tests.", no_args_is_help=True)


def _ms(v: float) -> str:
    return f"{v:.2f} ms"


PRODUCE_FIELDS = [
    Column("Topic", "topic"),
    Column("Records sent", "delivered"),
    Column("Failed", "failed"),
    Column("Records/sec", "records_per_sec", fmt=lambda v: f"{v:,.1f}"),
    Column("MB/sec", "mb_per_sec", fmt=lambda v: f"{v:.2f}"),
    Column("Avg latency", "avg_latency_ms", fmt=_ms),
    Column("Max latency", "max_latency_ms", fmt=_ms),
    Column("50th", "p50_ms", fmt=_ms),
    Column("95th", "p95_ms", fmt=_ms),
    Column("99th", "p99_ms", fmt=_ms),
    Column("99.9th", "p999_ms", fmt=_ms),
    Column("Elapsed", "elapsed_s", fmt=lambda v: f"{v:.3f} s"),
    Column("Record size", "record_size", fmt=lambda v: f"{v} B"),
    Column("Acks / compression", lambda r: f"{r.acks} / {r.compression}"),
    Column("Target", "target_throughput", fmt=lambda v: "unthrottled" if v < 0 else f"{v:g} records/sec"),
    Column("Queue-full waits", "queue_full_waits"),
    Column("Engine", lambda r: f"{r.engine} (send stamp window {r.send_stamp_window_ms:.3f} ms)"),
    Column("Errors", "errors", fmt=lambda d: ", ".join(f"{k}: {v}" for k, v in d.items()) or "-"),
    Column("Disk", "disk", fmt=lambda d: _disk_line(d)),
]
CONSUME_FIELDS = [
    Column("start.time", "start_time", fmt=format_time),
    Column("end.time", "end_time", fmt=format_time),
    Column("data.consumed.in.MB", "data_consumed_mb", fmt=lambda v: f"{v:.4f}"),
    Column("MB.sec", "mb_per_sec", fmt=lambda v: f"{v:.4f}"),
    Column("data.consumed.in.nMsg", "records"),
    Column("nMsg.sec", "records_per_sec", fmt=lambda v: f"{v:.4f}"),
    Column("rebalance.time.ms", "rebalance_time_ms", fmt=lambda v: f"{v:.0f}"),
    Column("fetch.time.ms", "fetch_time_ms", fmt=lambda v: f"{v:.0f}"),
    Column("fetch.MB.sec", "fetch_mb_per_sec", fmt=lambda v: f"{v:.4f}"),
    Column("fetch.nMsg.sec", "fetch_records_per_sec", fmt=lambda v: f"{v:.4f}"),
    Column("group / threads", lambda r: f"{r.group or '(no group)'} / {r.threads}"),
    Column("Group protocol", lambda r: r.group_protocol or "-"),
    Column("Engine", "engine"),
    Column("Errors", "errors", fmt=lambda d: ", ".join(f"{k}: {v}" for k, v in d.items()) or "-"),
]


def _disk_line(d: diskguard.DiskCheck | None) -> str:
    if d is None:
        return "-"
    est = f"~{diskguard.fmt_bytes(d.estimated_bytes)} estimated (RF {d.replication_factor})"
    if d.free_bytes is None:
        return f"{est}; {d.note}"
    line = f"{est}; {diskguard.fmt_bytes(d.free_bytes)} free at {d.path} ({d.source})"
    return f"{line}; {d.note}" if d.note else line


def _print_window(window: "latency.ProduceWindow") -> None:
    from clusterctl.output import err_console  # rich: loaded only when a progress line is due

    err_console.print(window.line(), soft_wrap=True, highlight=False)


def _did(result: Any) -> str:
    """What a perf run did, for the one line of a failed stdout write (so a retry knows it happened)."""
    if hasattr(result, "delivered"):
        return f"perf produce sent to {result.topic}: {result.delivered} delivered, {result.failed} failed"
    if hasattr(result, "received"):
        return f"perf e2e on {result.topic}: {result.sent} sent, {result.received} received"
    return f"perf consume read {result.records} records from {result.topic}"


def _finish(result: Any, err: ClusterctlError | None, as_json: bool, kv: list[Column], title: str) -> None:
    """Print a perf result; with an error, raise it after the table (with --json: one document, the error object
    carrying the result)."""
    outcome(_did(result))
    if err is None or not as_json:
        emit(result, as_json=as_json, kv=kv, title=title)
    if err is not None:
        err.result = result
        raise err


@contextlib.contextmanager
def _partial_on_interrupt(as_json: bool, kv: list[Column], title: str) -> Iterator[None]:
    """A perf run stopped by a signal: its partial result (the exception's `result`) printed as a table, or with
    --json left to the error object's `result`; then the interrupt goes on (exit 130/143/129)."""
    try:
        yield
    except KeyboardInterrupt as exc:
        partial = getattr(exc, "result", None)
        if partial is not None:
            with uninterrupted():  # a second signal cannot cut the partial table short
                outcome(_did(partial) + " before the interrupt")
                if not as_json:
                    emit(partial, as_json=False, kv=kv, title=f"{title} (interrupted: partial result)")
        raise


def _topic_defaults(explicit_bootstrap: str | None) -> tuple[int, int, bool]:
    """(partitions, RF, local) for a topic perf creates: the spec's defaults when a spec is at hand."""
    if not state.spec_path.is_file():  # as SpecError below, without loading the spec machinery (pydantic)
        return 1, 1, False
    try:
        spec = get_spec()
    except SpecError:
        return 1, 1, False
    local = explicit_bootstrap is None or explicit_bootstrap == spec.topology.bootstrap_servers
    d = spec.kafka.defaults
    return d.partitions, d.replication_factor, local


RecordSizeOpt = Annotated[
    int,
    typer.Option(
        "--record-size",
        help="bytes per record value (0 to the producer's message.max.bytes less 36 bytes of record overhead: 999964 "
        "unless --producer-prop sets message.max.bytes)",
    ),
]
ThroughputOpt = Annotated[
    float,
    typer.Option(
        "--throughput",
        help="records/sec to hold (token bucket, at most 10000000); -1 = as fast as possible",
        callback=finite_option(),
    ),
]

LingerOpt = Annotated[
    float | None, typer.Option("--linger-ms", help="producer linger.ms (default 5)", callback=finite_option())
]
_PROP_HELP = (
    "property k=v (repeatable, at most 64; checked against librdkafka's own property table: its names, types "
    "and ranges; names such as group.id 1 to 255 characters, values at most 65536 bytes)"
)
ProducerPropOpt = Annotated[list[str] | None, typer.Option("--producer-prop", help=f"librdkafka producer {_PROP_HELP}")]
ConsumerPropOpt = Annotated[list[str] | None, typer.Option("--consumer-prop", help=f"librdkafka consumer {_PROP_HELP}")]
IdleTimeoutOpt = Annotated[float, timeout_option("stop after this many seconds without a record")]


@perf_app.command("produce")
def cmd_perf_produce(
    topic: Annotated[str, typer.Argument(help="topic to produce to")],
    num_records: Annotated[int, typer.Option("--num-records", "-n", help="records to send (1 to 1000000000)")],
    record_size: RecordSizeOpt = 100,
    throughput: ThroughputOpt = -1,
    acks: Annotated[str, typer.Option("--acks", help="0, 1 or all")] = "1",
    compression: Annotated[str, typer.Option("--compression", help="none, gzip, snappy, lz4 or zstd")] = "none",
    batch_size: Annotated[int | None, typer.Option("--batch-size", help="producer batch.size (bytes)")] = None,
    linger_ms: LingerOpt = None,
    producer_prop: ProducerPropOpt = None,
    payload_file: Annotated[
        Path | None,
        typer.Option(
            "--payload-file",
            help="a regular file of newline-separated record values to cycle through (its first 1000 non-empty "
            "lines, read up to 64 MiB; each at most the --record-size bound)",
        ),
    ] = None,
    create_topic: Annotated[
        bool, typer.Option("--create-topic/--no-create-topic", help="create the topic if it does not exist")
    ] = True,
    partitions: Annotated[
        int | None,
        typer.Option(
            "--partitions", help="partitions of a created topic (1 to 4096; default: spec, else 1; -1: the broker's)"
        ),
    ] = None,
    replication_factor: Annotated[
        int | None,
        typer.Option(
            "--replication-factor", help="RF of a created topic (1 to 16; default: spec, else 1; -1: the broker's)"
        ),
    ] = None,
    retention_bytes: Annotated[
        int | None,
        typer.Option("--retention-bytes", help="set retention.bytes on the test topic (caps repeated runs)"),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="produce even if the disk guard refuses")] = False,
    disk_path: Annotated[
        str | None,
        typer.Option(
            "--disk-path",
            help="filesystem the brokers write to, for the disk guard (default: $CLUSTERCTL_DISK_PATH, "
            "else the Docker data root for the spec's cluster)",
            show_default=False,
            callback=directory_option("--disk-path"),
        ),
    ] = None,
    engine: Annotated[
        str,
        typer.Option(
            "--engine",
            help="native: librdkafka's batch API via ctypes (fastest); client: confluent-kafka's Producer; "
            "auto: native when the wheel's librdkafka loads",
        ),
    ] = "auto",
    reporting_interval: Annotated[
        float,
        typer.Option(
            "--reporting-interval", help="seconds between progress lines (at most a day)", callback=seconds_option()
        ),
    ] = 5.0,
    bootstrap: BootstrapOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Send N records of B bytes and report throughput and send-to-ack latency percentiles."""
    from clusterctl.kafka import perf  # numpy and friends: loaded only when perf runs

    req = perf.ProduceRequest(
        topic, num_records, record_size, payload_file, throughput, acks, compression, batch_size, linger_ms,
        client_props(producer_prop, "--producer-prop", "producer"), create_topic, partitions, replication_factor,
        retention_bytes, force, disk_path, engine, reporting_interval,
    )  # fmt: skip

    def target() -> "perf.ProduceTarget":
        servers = bootstrap_servers(bootstrap)
        return perf.ProduceTarget(servers, *_topic_defaults(bootstrap))

    with _partial_on_interrupt(as_json, PRODUCE_FIELDS, f"perf produce {topic}"):
        result = perf.produce_test(req, target, progress=_print_window, notify=info)
    skip_interpreter_teardown()  # the producer is closed; its wall clock is part of what the user measures
    err = None
    if result.failed:
        errs = ", ".join(f"{k}: {v}" for k, v in result.errors.items())
        err = ClusterctlError(f"{result.failed} of {num_records} records failed ({errs})")
    _finish(result, err, as_json, PRODUCE_FIELDS, f"perf produce {topic}")


@perf_app.command("consume")
def cmd_perf_consume(
    topic: Annotated[str, typer.Argument(help="topic to consume from")],
    messages: Annotated[int, typer.Option("--messages", "-n", help="records to consume (1 to 1000000000)")],
    group: Annotated[
        str | None,
        typer.Option(
            "--group",
            "-g",
            help="consumer group (1 to 255 characters; default: perf-consumer-*)",
            callback=group_option,
        ),
    ] = None,
    threads: Annotated[int, typer.Option("--threads", help="consumers in the group, one thread each (1 to 64)")] = 1,
    timeout: IdleTimeoutOpt = 10.0,
    consumer_prop: ConsumerPropOpt = None,
    no_group: Annotated[
        bool,
        typer.Option(
            "--no-group",
            help="assign the partitions directly (spread over the threads): no group join, no rebalance, "
            "nothing committed",
        ),
    ] = False,
    engine: Annotated[
        str,
        typer.Option(
            "--engine",
            help="native: librdkafka's batch consume via ctypes (fastest); client: confluent-kafka's Consumer; "
            "auto: native when the wheel's librdkafka loads",
        ),
    ] = "auto",
    group_protocol: GroupProtocolOpt = "classic",
    bootstrap: BootstrapOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Read N records with T consumers in one group (or --no-group); report kafka-consumer-perf-test.sh's
    columns. Like the Java tool, the group is a fresh perf-consumer-* unless --group names one."""
    from clusterctl.kafka import perf_consume

    extra = client_props(consumer_prop, "--consumer-prop", "consumer")
    perf_consume.check_consume_args(messages, threads)
    servers = bootstrap_servers(bootstrap)
    from clusterctl.kafka.connection import check_topic

    partitions = check_topic(servers, topic)
    with _partial_on_interrupt(as_json, CONSUME_FIELDS, f"perf consume {topic}"):
        result = perf_consume.run_consume(
            servers, topic, messages, group=group, threads=threads, timeout=timeout, extra_config=extra,
            engine=engine, no_group=no_group, partitions=partitions, group_protocol=group_protocol,
        )  # fmt: skip
    skip_interpreter_teardown()
    err = None
    if not result.complete:
        err = TimeoutError_(f"consumed {result.records} of {messages} records; none arrived for {timeout:g}s")
    _finish(result, err, as_json, CONSUME_FIELDS, f"perf consume {topic}")


E2E_FIELDS = [
    Column("Topic", "topic"),
    Column("Records sent / received", lambda r: f"{r.sent} / {r.received}"),
    Column("Records/sec", "records_per_sec", fmt=lambda v: f"{v:,.1f}"),
    Column("Target", "target_throughput", fmt=lambda v: "unthrottled" if v < 0 else f"{v:g} records/sec"),
    Column("Avg latency", "avg_latency_ms", fmt=_ms),
    Column("50th", "p50_ms", fmt=_ms),
    Column("99th", "p99_ms", fmt=_ms),
    Column("99.9th", "p999_ms", fmt=_ms),
    Column("Max latency", "max_latency_ms", fmt=_ms),
    Column(
        "From the schedule 50th / 99th / 99.9th",
        lambda r: (
            "-"
            if r.target_throughput < 0
            else f"{_ms(r.scheduled_p50_ms)} / {_ms(r.scheduled_p99_ms)} / {_ms(r.scheduled_p999_ms)}"
        ),
    ),
    Column("Record size", "record_size", fmt=lambda v: f"{v} B"),
    Column("CPU while sending", "cpu_seconds", fmt=lambda v: f"{v:g} s"),
    Column("Errors", "errors", fmt=lambda d: ", ".join(f"{k}: {v}" for k, v in d.items()) or "-"),
]


@perf_app.command("e2e")
def cmd_perf_e2e(
    topic: Annotated[str, typer.Argument(help="topic to produce to and consume from (created if missing)")],
    num_records: Annotated[int, typer.Option("--num-records", "-n", help="records to send (1 to 1000000000)")],
    throughput: Annotated[
        float,
        typer.Option(
            "--throughput",
            help="records/sec to send (at most 10000000); -1 = as fast as possible",
            callback=finite_option(),
        ),
    ] = 1000,
    record_size: Annotated[int, typer.Option("--record-size", help="bytes per record value (16 to 999964)")] = 100,
    acks: Annotated[str, typer.Option("--acks", help="0, 1 or all")] = "1",
    timeout: IdleTimeoutOpt = 10.0,
    producer_prop: ProducerPropOpt = None,
    consumer_prop: ConsumerPropOpt = None,
    one_in_flight: Annotated[
        bool,
        typer.Option(
            "--one-in-flight",
            help="send each record once the previous one was consumed, as Kafka's EndToEndLatency does "
            "(--throughput is then ignored)",
        ),
    ] = False,
    bootstrap: BootstrapOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Produce N records at a fixed rate while consuming them; report produce -> consume latency percentiles
    (what Kafka's EndToEndLatency tool measures, one record at a time)."""
    from clusterctl.kafka import perf_e2e

    pprops = client_props(producer_prop, "--producer-prop", "producer")
    cprops = client_props(consumer_prop, "--consumer-prop", "consumer")
    servers = bootstrap_servers(bootstrap)
    parts, rf, _local = _topic_defaults(bootstrap)
    with _partial_on_interrupt(as_json, E2E_FIELDS, f"perf e2e {topic}"):
        result = perf_e2e.e2e_test(
            servers, topic, num_records, partitions=parts, replication_factor=rf, notify=info,
            record_size=record_size, throughput=throughput, acks=acks, timeout=timeout, producer_extra=pprops,
            consumer_extra=cprops, one_in_flight=one_in_flight,
        )  # fmt: skip
    skip_interpreter_teardown()
    err = None
    if not result.complete:
        err = TimeoutError_(f"received {result.received} of {num_records} records; none arrived for {timeout:g}s")
    _finish(result, err, as_json, E2E_FIELDS, f"perf e2e {topic}")


def register(app: typer.Typer) -> None:
    """Attach this noun's commands to the root app."""
    app.add_typer(perf_app)
