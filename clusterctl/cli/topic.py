"""CLI for topics (`topic ...`) and the top-level `produce` / `consume` commands."""

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, BinaryIO

import typer

from clusterctl.cli.common import (
    BootstrapOpt,
    GroupProtocolOpt,
    JsonOpt,
    bootstrap_servers,
    get_spec,
    group_option,
    parse_kv,
    timeout_option,
    uninterrupted,
)
from clusterctl.errors import ClusterctlError, InputError, SpecError, UsageError
from clusterctl.output import Column, emit, info, outcome, print_json, print_json_line, print_line
from clusterctl.spec import validate

if TYPE_CHECKING:
    from clusterctl.kafka import admin, clients

topic_app = typer.Typer(name="topic", help="Create, list, describe, alter and delete topics.", no_args_is_help=True)

PARTITION_COLUMNS = [
    Column("Partition", "partition", justify="right"),
    Column("Leader", "leader", justify="right"),
    Column("Replicas", "replicas"),
    Column("Isr", "isr"),
    Column("Status", lambda p: "offline" if p.offline else ("under-replicated" if p.under_replicated else "ok")),
]
# KIP-966 (Kafka 4.x with ELR on): replicas out of the ISR that are safe to elect, and the last known leader
ELR_COLUMNS = [Column("Elr", "elr"), Column("LastKnownElr", "last_known_elr")]
TOPIC_LIST_COLUMNS = [
    Column("Topic", "name"),
    Column("Partitions", "partitions", justify="right"),
    Column("ReplicationFactor", "replication_factor", justify="right"),
    Column("Internal", "internal"),
]
CHANGE_FIELDS = [
    Column("Topic", "topic"),
    Column("Action", "action"),
    Column("Changed", "changed"),
    Column("Partitions", "partitions"),
    Column("ReplicationFactor", "replication_factor"),
    Column("Configs", lambda c: ",".join(f"{k}={v}" for k, v in c.configs.items()) or None),
    Column("Deleted configs", "deleted_configs", fmt=lambda v: ",".join(v) or "-"),
    Column("Note", "note"),
]
PRODUCE_FIELDS = [
    Column("Topic", "topic"),
    Column("Acks", "acks"),
    Column("Sent", "sent"),
    Column("Delivered", "delivered"),
    Column("Failed", "failed"),
    Column("Elapsed (s)", "elapsed_s", fmt=lambda v: f"{v:.3f}"),
    Column("Errors", "errors", fmt=lambda v: "; ".join(v) or "-"),
    Column("Stopped", "stopped"),
]
RECORD_COLUMNS = [
    Column("Partition", "partition", justify="right"),
    Column("Offset", "offset", justify="right"),
    Column("Key", "key"),
    Column("Value", "value"),
]


def topic_header(t: "admin.TopicDescription") -> str:
    """kafka-topics.sh's per-topic line: Topic, PartitionCount, ReplicationFactor, Configs."""
    configs = ",".join(f"{k}={v}" for k, v in t.configs.items())
    return (
        f"Topic: {t.name}  PartitionCount: {t.partition_count}  ReplicationFactor: {t.replication_factor}  "
        f"Configs: {configs}"
    )


def filter_partitions(
    topics: "list[admin.TopicDescription]", under_replicated: bool, unavailable: bool
) -> "list[admin.TopicDescription]":
    """Keep only partitions matching the filters (topics left with none are dropped)."""
    from clusterctl.kafka import admin

    if not (under_replicated or unavailable):
        return topics
    out = []
    for t in topics:
        parts = [p for p in t.partitions if (under_replicated and p.under_replicated) or (unavailable and p.offline)]
        if parts:
            out.append(
                admin.TopicDescription(t.name, t.partition_count, t.replication_factor, t.internal, parts, t.configs)
            )
    return out


def render_describe(topics: "list[admin.TopicDescription]", as_json: bool) -> None:
    if as_json:
        print_json(topics)
        return
    if not topics:
        print_line("no matching partitions")
    for t in topics:
        print_line(topic_header(t))
        elr = any(p.elr is not None for p in t.partitions)
        emit(
            t.partitions,
            as_json=False,
            columns=PARTITION_COLUMNS[:-1] + (ELR_COLUMNS if elr else []) + PARTITION_COLUMNS[-1:],
        )


def _create_defaults(explicit_bootstrap: str | None) -> tuple[int, int]:
    """Partitions and RF: the spec's broker defaults when the cluster comes from a spec, else Kafka's (1, 1)."""
    if explicit_bootstrap:
        return 1, 1
    try:
        d = get_spec().kafka.defaults
    except SpecError:
        return 1, 1
    return d.partitions, d.replication_factor


@topic_app.command("create")
def cmd_topic_create(
    name: Annotated[str, typer.Argument(help="topic name")],
    partitions: Annotated[
        int | None,
        typer.Option("--partitions", "-p", help="1 to 4096; default: spec's, else 1; -1: broker's"),
    ] = None,
    replication_factor: Annotated[
        int | None,
        typer.Option("--replication-factor", "-r", help="1 to 16; default: spec's, else 1; -1: broker's"),
    ] = None,
    config: Annotated[list[str] | None, typer.Option("--config", "-c", help="topic config k=v (repeatable)")] = None,
    if_not_exists: Annotated[bool, typer.Option("--if-not-exists", help="succeed if the topic exists")] = False,
    bootstrap_server: BootstrapOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Create a topic (refuses a replication factor above the number of live brokers)."""
    from clusterctl.kafka import admin

    configs = parse_kv(config)
    validate.topic_name(name)
    for value, what, most in (
        (partitions, "--partitions", validate.MAX_PARTITIONS),
        (replication_factor, "--replication-factor", validate.MAX_REPLICATION_FACTOR),
    ):
        if value is not None:
            validate.count(value, what, broker_default=True, maximum=most)
    bs = bootstrap_servers(bootstrap_server)
    default_p, default_rf = _create_defaults(bootstrap_server)
    p = default_p if partitions is None else partitions
    rf = default_rf if replication_factor is None else replication_factor
    result = admin.create_topic(bs, name, p, rf, configs, if_not_exists=if_not_exists)
    emit(result, as_json=as_json, kv=CHANGE_FIELDS)


@topic_app.command("list")
def cmd_topic_list(
    internal: Annotated[bool, typer.Option("--internal", help="include internal topics (__consumer_offsets)")] = False,
    bootstrap_server: BootstrapOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """List topics with their partition count and replication factor."""
    from clusterctl.kafka import admin

    rows = admin.list_topics(bootstrap_servers(bootstrap_server), include_internal=internal)
    emit(rows, as_json=as_json, columns=TOPIC_LIST_COLUMNS, empty="no topics")


@topic_app.command("describe")
def cmd_topic_describe(
    names: Annotated[list[str] | None, typer.Argument(help="topics (default: all)")] = None,
    under_replicated: Annotated[
        bool, typer.Option("--under-replicated", help="only partitions whose ISR is smaller than the replicas")
    ] = False,
    unavailable: Annotated[bool, typer.Option("--unavailable", help="only partitions without a leader")] = False,
    internal: Annotated[bool, typer.Option("--internal", help="include internal topics when listing all")] = False,
    bootstrap_server: BootstrapOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Leader, replicas and ISR per partition (Leader -1 = no leader), like kafka-topics.sh --describe; with ELR on
    (Kafka 4.x, KIP-966) also Elr and LastKnownElr, from DescribeTopicPartitions."""
    from clusterctl.kafka import admin, topicpartitions

    bs = bootstrap_servers(bootstrap_server)
    topics = admin.describe_topics(bs, names or None, include_internal=internal, with_configs=True)
    topicpartitions.with_elr(bs, topics)
    render_describe(filter_partitions(topics, under_replicated, unavailable), as_json)


@topic_app.command("delete")
def cmd_topic_delete(
    name: Annotated[str, typer.Argument(help="topic name")],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="do not ask for confirmation")] = False,
    bootstrap_server: BootstrapOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Delete a topic and all its data."""
    from clusterctl.kafka import admin

    bs = bootstrap_servers(bootstrap_server)
    if not yes:
        if not sys.stdin.isatty():
            raise UsageError(f"refusing to delete topic {name!r} without --yes (no terminal to ask on)")
        admin.describe_topic(bs, name)  # unknown topic: fail before asking
        if not typer.confirm(f"Delete topic {name!r} on {bs} and all its data?", err=True):
            raise typer.Abort()
    emit(admin.delete_topic(bs, name), as_json=as_json, kv=CHANGE_FIELDS)


@topic_app.command("alter")
def cmd_topic_alter(
    name: Annotated[str, typer.Argument(help="topic name")],
    partitions: Annotated[
        int | None, typer.Option("--partitions", "-p", help="new total partition count (can only grow; at most 4096)")
    ] = None,
    config: Annotated[list[str] | None, typer.Option("--config", "-c", help="set topic config k=v")] = None,
    delete_config: Annotated[
        list[str] | None, typer.Option("--delete-config", help="remove a topic config override")
    ] = None,
    bootstrap_server: BootstrapOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Add partitions and/or change configs incrementally (other configs are left alone)."""
    from clusterctl.kafka import admin

    configs = parse_kv(config)
    if partitions is None and not configs and not delete_config:
        raise UsageError("nothing to alter: give --partitions, --config k=v or --delete-config k")
    validate.topic_name(name)
    if partitions is not None:
        validate.count(partitions, "--partitions")
    bs = bootstrap_servers(bootstrap_server)
    results = []
    if partitions is not None:
        results.append(admin.create_partitions(bs, name, partitions))
    if configs or delete_config:
        results.append(admin.alter_topic_configs(bs, name, configs, list(delete_config or [])))
    if as_json:
        print_json(results)
        return
    for r in results:
        emit(r, as_json=False, kv=CHANGE_FIELDS)


@topic_app.command("configs")
def cmd_topic_configs(
    name: Annotated[str, typer.Argument(help="topic name")],
    all_: Annotated[bool, typer.Option("--all", help="include defaults")] = False,
    bootstrap_server: BootstrapOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """A topic's configs and where each comes from (needs DescribeConfigs on the broker)."""
    from clusterctl.kafka import admin

    rows = admin.describe_configs(bootstrap_servers(bootstrap_server), name, include_defaults=all_)
    emit(
        rows,
        as_json=as_json,
        columns=[Column("Name", "name"), Column("Value", "value"), Column("Source", "source")],
        empty=f"topic {name!r} has no config overrides",
    )


# ---------------------------------------------------------------- produce / consume


def _lines(file: Path | None) -> "Iterator[str | clients.Oversize]":
    """Input lines (clients.read_lines: bounded); a line that is not UTF-8 is an InputError naming its number."""
    from clusterctl.kafka import clients

    fh: BinaryIO
    if file is not None:
        try:
            fh = file.open("rb")
        except OSError as exc:
            raise UsageError(f"cannot read {file}: {exc.strerror}") from None
    else:
        fh = sys.stdin.buffer
    number = 0
    with fh:
        lines = clients.read_lines(fh)
        while True:
            try:
                raw = next(lines)
            except StopIteration:
                return
            except clients.EndlessLine as exc:
                raise InputError(
                    number + 1,
                    f"has no line end in its first {exc.skimmed // (1 << 20)} MiB (an endless input such as "
                    "/dev/zero?)",
                ) from None
            number += 1
            if number > validate.MAX_RECORDS:
                raise InputError(number, f"is one too many: at most {validate.MAX_RECORDS} lines are sent")
            if isinstance(raw, clients.Oversize):
                yield raw
                continue
            try:
                yield raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(number, f"is not UTF-8 (byte {exc.start + 1} is {raw[exc.start]:#04x})") from None


def cmd_produce(
    topic: Annotated[str, typer.Argument(help="topic to write to")],
    file: Annotated[
        Path | None, typer.Option("--file", "-f", help="read lines from this file (default: stdin)")
    ] = None,
    key_separator: Annotated[
        str | None, typer.Option("--key-separator", "-k", help="split each line into key<SEP>value")
    ] = None,
    acks: Annotated[str, typer.Option("--acks", help="0, 1 or all (all = idempotent producer)")] = "all",
    partition: Annotated[
        int | None, typer.Option("--partition", "-p", help="write every line to this partition")
    ] = None,
    bootstrap_server: BootstrapOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Send one message per input line; print a delivery summary (non-zero exit if any failed).

    A line longer than a record may be (999964 bytes: the producer's message.max.bytes, 1000000, less 36 bytes of
    record overhead) is read no further and counts as not delivered; the other lines still go. A line with no end
    in its first 64 MiB (/dev/zero) stops the input (exit 2); at most 1000000000 lines.
    """
    from rich.markup import escape

    from clusterctl.kafka import clients
    from clusterctl.output import err_console

    if acks not in ("0", "1", "all", "-1"):
        raise UsageError(f"--acks must be 0, 1 or all, got {acks!r}")
    if key_separator == "":
        raise UsageError("--key-separator must not be empty")
    validate.topic_name(topic)
    if partition is not None:
        validate.partition(partition)
    bs = bootstrap_servers(bootstrap_server)
    records = (clients.parse_line(line, key_separator, n) for n, line in enumerate(_lines(file), start=1))
    try:
        with err_console.status(f"producing to {escape(topic)} ..."):
            summary = clients.produce(bs, topic, records, acks=acks, partition=partition)
    except (ClusterctlError, KeyboardInterrupt) as exc:
        stopped = getattr(exc, "result", None)
        if isinstance(stopped, clients.ProduceSummary):  # input stopped early: say what was sent before
            outcome(_produced(stopped, topic))
            _print_produce_summary(stopped, as_json)
            if isinstance(exc, ClusterctlError):
                exc.message += (
                    f"; stopped there, nothing from it on was sent: {stopped.sent} earlier lines sent, "
                    f"{stopped.delivered} delivered, {stopped.failed} failed"
                )
        raise
    outcome(_produced(summary, topic))  # said if the summary cannot be printed: delivered is delivered
    _print_produce_summary(summary, as_json)
    if summary.failed:
        first = summary.errors[0] if summary.errors else "unknown error"
        err = ClusterctlError(f"{summary.failed} of {summary.sent} messages were not delivered ({first})")
        err.result = summary if as_json else None
        raise err


def _produced(summary: "clients.ProduceSummary", topic: str) -> str:
    return f"produced {summary.sent} messages to {topic}: {summary.delivered} delivered, {summary.failed} failed"


def _print_produce_summary(summary: "clients.ProduceSummary", as_json: bool) -> None:
    """The delivery summary as a table; with --json it goes out once, in the success or the error object."""
    if summary.stopped is None and not summary.failed and as_json:
        print_json(summary)
        return
    if as_json:
        return
    emit(summary, as_json=False, kv=PRODUCE_FIELDS, title="delivery summary")
    emit(
        summary.partitions,
        as_json=False,
        columns=[
            Column("Partition", "partition", justify="right"),
            Column("Delivered", "delivered", justify="right"),
        ],
    )


def cmd_consume(
    topic: Annotated[str, typer.Argument(help="topic to read")],
    from_beginning: Annotated[bool, typer.Option("--from-beginning", help="start at the earliest offset")] = False,
    offset: Annotated[
        str | None, typer.Option("--offset", help="start offset: a number, 'earliest' or 'latest'")
    ] = None,
    partition: Annotated[int | None, typer.Option("--partition", "-p", help="read only this partition")] = None,
    group: Annotated[
        str | None,
        typer.Option(
            "--group",
            "-g",
            help="consumer group (commits offsets; 1 to 255 characters); default: none, no commits",
            callback=group_option,
        ),
    ] = None,
    max_messages: Annotated[
        int | None, typer.Option("--max-messages", "-n", help="stop after N messages (1 to 1000000000)")
    ] = None,
    timeout: Annotated[float, timeout_option("stop after this many idle seconds")] = 10.0,
    table: Annotated[bool, typer.Option("--table", help="print one table at the end instead of streaming")] = False,
    group_protocol: GroupProtocolOpt = "classic",
    bootstrap_server: BootstrapOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Print messages (partition, offset, key, value); `--json` gives one JSON object per line."""
    from clusterctl.kafka import clients

    if from_beginning and offset is not None:
        raise UsageError("give either --from-beginning or --offset, not both")
    start: Any = "beginning" if from_beginning else "committed" if group else "latest"
    if offset is not None:
        if offset in ("earliest", "beginning"):
            start = "beginning"
        elif offset == "latest":
            start = "latest"
        else:
            try:
                start = validate.offset(int(offset))
            except ValueError:
                raise UsageError(f"--offset must be a number, 'earliest' or 'latest', got {offset!r}") from None
    if max_messages is not None:
        validate.at_most(max_messages, "--max-messages", validate.MAX_RECORDS)
    validate.topic_name(topic)
    if partition is not None:
        validate.partition(partition)
    if group is not None and not group.strip():
        raise UsageError("--group must not be empty")
    if group is None and group_protocol != "classic":
        raise UsageError("--group-protocol needs --group (without a group nothing joins one)")
    bs = bootstrap_servers(bootstrap_server)
    began = time.monotonic()
    kept: list[clients.ConsumedRecord] = []
    count = 0
    # with a group, only what was printed is acknowledged, so only that is committed (table mode: at the end)
    with clients.Reader(
        bs, topic, start=start, partition=partition, group=group, max_messages=max_messages, timeout=timeout,
        group_protocol=group_protocol,
    ) as reader:  # fmt: skip
        try:
            for rec in reader:
                if not count:
                    outcome(_consumed(0, topic, group))
                count += 1
                if table and not as_json:
                    kept.append(rec)
                    continue
                with uninterrupted():  # a printed record is an acknowledged one, Ctrl-C or not
                    if as_json:
                        print_json_line(rec)
                    else:
                        key = rec.key if rec.key is not None else "-"
                        print_line(f"partition={rec.partition} offset={rec.offset} key={key} value={rec.value}")
                    reader.ack([rec])
                    outcome(_consumed(count, topic, group))
        finally:  # Ctrl-C or an error included: show what was read, then commit exactly that
            if table and not as_json:
                with uninterrupted():  # the table shown is the table acknowledged
                    outcome(_consumed(0, topic, group))
                    emit(kept, as_json=False, columns=RECORD_COLUMNS, empty="no messages")
                    reader.ack(kept)
                    outcome(_consumed(len(kept), topic, group))
    info(f"consumed {count} messages from {topic} in {time.monotonic() - began:.1f}s")


def _consumed(printed: int, topic: str, group: str | None) -> str:
    committed = f", group {group} commits only those" if group else ""
    return f"printed {printed} messages from {topic}{committed}"


def register(app: typer.Typer) -> None:
    """Attach `topic`, `produce` and `consume` to the root app."""
    app.add_typer(topic_app, name="topic")
    app.command("produce")(cmd_produce)
    app.command("consume")(cmd_consume)
