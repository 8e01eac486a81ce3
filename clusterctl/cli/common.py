"""Options shared by every command and the resolution of the cluster a command talks to."""

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from clusterctl import signals
from clusterctl.env import DEFAULT_SPEC_PATH, SPEC_ENV
from clusterctl.errors import UsageError
from clusterctl.spec import validate

if TYPE_CHECKING:
    from clusterctl.spec.model import ClusterSpec


@dataclass
class State:
    spec_path: Path = DEFAULT_SPEC_PATH
    debug: bool = False


state = State()


def versions() -> dict[str, str]:
    """clusterctl, the Kafka client library (confluent-kafka and the librdkafka it runs on) and Python."""
    import platform

    import confluent_kafka

    from clusterctl import __version__

    return {
        "clusterctl": __version__,
        "confluent-kafka": str(confluent_kafka.__version__),  # a str at run time (the stub says tuple)
        "librdkafka": confluent_kafka.libversion()[0],
        "python": f"{platform.python_version()} ({platform.python_implementation()})",
    }


def print_version(value: bool) -> None:
    if not value:
        return
    v = versions()
    typer.echo(f"clusterctl {v['clusterctl']}")
    typer.echo(f"confluent-kafka {v['confluent-kafka']} (librdkafka {v['librdkafka']})")
    typer.echo(f"Python {v['python']}")
    raise typer.Exit()


def root_callback(
    spec: Annotated[
        Path | None,
        typer.Option(
            "--spec",
            "-s",
            help="cluster spec file (default ./clusterctl.yaml, or $CLUSTERCTL_SPEC)",
            show_default=False,
        ),
    ] = None,
    debug: Annotated[
        bool, typer.Option("--debug", help="print the traceback of an unexpected error (or set CLUSTERCTL_DEBUG=1)")
    ] = False,
    local_time: Annotated[
        bool, typer.Option("--local-time", help="show times in the local zone (default: UTC); --json keeps epochs")
    ] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            help="print clusterctl's, the Kafka client library's and Python's versions, then exit",
            callback=print_version,
            is_eager=True,
        ),
    ] = False,
) -> None:
    """Stand up, inspect, load and break a ZooKeeper + Kafka cluster on Docker."""
    from clusterctl.output import use_local_time

    state.spec_path = spec or Path(os.environ.get(SPEC_ENV, str(DEFAULT_SPEC_PATH)))
    state.debug = debug
    use_local_time(local_time)


def get_spec() -> "ClusterSpec":
    """The validated spec this invocation works on (raises SpecError with one line)."""
    from clusterctl.spec.model import load_spec

    spec = load_spec(state.spec_path)
    if spec.security.enabled:  # the cluster's clients authenticate (kafka.settings); nothing to do otherwise
        from clusterctl.kafka.settings import secure_clients_of

        secure_clients_of(spec)
    return spec


JsonOpt = Annotated[bool, typer.Option("--json", help="print the result as JSON instead of a table")]
BootstrapOpt = Annotated[
    str | None,
    typer.Option(
        "--bootstrap-server",
        "-b",
        help="any Kafka's bootstrap servers (host:port,...); default: derived from the spec",
        envvar="CLUSTERCTL_BOOTSTRAP_SERVER",
        show_default=False,
    ),
]
ZkOpt = Annotated[
    str | None,
    typer.Option(
        "--zookeeper",
        help="ZooKeeper connect string (host:port,...); default: derived from the spec",
        envvar="CLUSTERCTL_ZOOKEEPER",
        show_default=False,
    ),
]


def _checked(check: Callable[..., object]) -> Callable[[object], object]:
    """A Typer option callback running a `validate` check (None passes: the option was not given)."""

    def callback(value: object) -> object:
        if value is None:
            return value
        try:
            check(value)
        except UsageError as exc:
            raise typer.BadParameter(exc.message) from None
        return value

    return callback


def seconds_option(allow_zero: bool = False) -> Callable[[object], object]:
    """Callback for a duration option: finite, not negative (and not zero unless allowed), at most a day."""
    return _checked(lambda v: validate.seconds(v, "seconds", allow_zero=allow_zero))


def timeout_option(what: str) -> Any:
    """`--timeout`: seconds (finite, positive, at most a day, which its help says after `what`)."""
    return typer.Option("--timeout", help=f"{what} (at most a day)", callback=seconds_option())


def directory_option(what: str) -> Callable[[object], object]:
    """Callback for an option naming an existing directory (a filesystem to look at): checked before any work."""
    return _checked(lambda v: validate.existing_dir(str(v), what))


def finite_option() -> Callable[[object], object]:
    """Callback for any other float option: nan and inf are refused (one line, exit 2)."""
    return _checked(lambda v: validate.finite(float(v), "the value"))


def bootstrap_servers(explicit: str | None) -> str:
    """`--bootstrap-server` if given (checked: host:port,...), else the spec's host-side bootstrap list."""
    if explicit is not None:
        return validate.bootstrap_servers(explicit)
    return get_spec().topology.bootstrap_servers


def zk_connect(explicit: str | None) -> str:
    """`--zookeeper` if given (checked: host:port,...[/chroot]), else the spec's connect string."""
    if explicit is not None:
        return validate.zk_connect(explicit)
    spec = get_spec()
    require_zookeeper(spec)
    return spec.topology.zk_connect


def require_zookeeper(spec: "ClusterSpec") -> None:
    """One line when the spec's cluster runs KRaft: there is no ZooKeeper to talk to."""
    if spec.kraft_mode:
        raise UsageError(
            f"cluster {spec.name} runs in KRaft mode: there is no ZooKeeper",
            hint="`clusterctl quorum` shows the controller quorum; --zookeeper HOST:PORT reaches another ensemble",
        )


def parse_kv(pairs: list[str] | None, what: str = "--config") -> dict[str, str]:
    """`k=v` pairs into a dict; a malformed pair is a one-line usage error."""
    out: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"{what} expects key=value, got {pair!r}")
        out[key.strip()] = value.strip()
    return out


def client_props(pairs: list[str] | None, option: str, role: str) -> dict[str, str]:
    """`--producer-prop` / `--consumer-prop` pairs, each checked against librdkafka's own property table
    (kafka/clientprops.py) before any client exists: one line, exit 2, for what it would refuse or crash on."""
    from clusterctl.kafka import clientprops

    return clientprops.check(parse_kv(pairs, option), role, option)  # type: ignore[arg-type]


def group_protocol_option(value: str) -> str:
    """Callback for --group-protocol: classic or consumer."""
    if value not in ("classic", "consumer"):
        raise typer.BadParameter(f"must be classic or consumer, got {value!r}")
    return value


GroupProtocolOpt = Annotated[
    str,
    typer.Option(
        "--group-protocol",
        help="classic (JoinGroup/SyncGroup) or consumer (KIP-848, Kafka 4.0+: the broker assigns partitions; the "
        "session timeout is the group's, group.consumer.session.timeout.ms)",
        callback=group_protocol_option,
    ),
]


def group_option(value: str | None) -> str | None:
    """Callback for a group id option or argument: 1 to 255 characters, no control characters."""
    if value is None:
        return value
    from clusterctl.kafka.clientprops import check_name

    try:
        return check_name(value, "the group id")
    except UsageError as exc:
        raise typer.BadParameter(exc.message) from None


_received: list[signal.Signals] = []


def _stop(signum: int, _frame: object) -> None:
    _received.append(signal.Signals(signum))
    raise KeyboardInterrupt(signal.Signals(signum).name)


@contextlib.contextmanager
def signals_interrupt(final: bool = False) -> Iterator[None]:
    """While the block runs, SIGTERM and SIGHUP stop the command exactly as Ctrl-C does: a KeyboardInterrupt,
    so every cleanup written for Ctrl-C runs (faults healed, groups left, partial reports and results).

    A signal the parent set to be ignored (`nohup`, a background job's SIGINT) stays ignored. After the block
    the previous handlers return, or with `final` (the process ends with the command) the signals are
    ignored: the outcome is decided, and one arriving now, even one already caught, cannot muddle its status.
    """
    _received.clear()
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {sig: signal.getsignal(sig) for sig in signals.STOP_SIGNALS}
    for sig, previous in saved.items():
        if previous is not signal.SIG_IGN:
            signal.signal(sig, _stop)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_BLOCK, signals.STOP_SIGNALS)
        try:
            for sig, previous in saved.items():
                signal.signal(sig, signal.SIG_IGN if final else previous)
        finally:
            signal.pthread_sigmask(signal.SIG_UNBLOCK, signals.STOP_SIGNALS)


def stopped_by() -> signal.Signals:
    """The first stop signal this command received (SIGINT when none was: a KeyboardInterrupt raised in code)."""
    return _received[0] if _received else signal.SIGINT


def uninterrupted() -> contextlib.AbstractContextManager[list[bool]]:
    """Hold the stop signals until the block is done (they are raised right after), so a pair of steps such as
    "print a record, then acknowledge it" cannot be cut between the two."""
    return signals.held()


_skip_teardown = False


def skip_interpreter_teardown() -> None:
    """Let the process end right after this command returns, without the interpreter's teardown.

    For a command that has closed everything it opened and whose own wall clock is what the user measures:
    tearing down numpy and librdkafka's module state adds ~40 ms to a one-second `perf produce`.
    """
    global _skip_teardown
    _skip_teardown = True


def teardown_skipped() -> bool:
    return _skip_teardown
