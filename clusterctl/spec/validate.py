"""Checks on user-supplied values, refused up front with one line (before any request is sent).

Addresses (bootstrap servers, ZooKeeper connect strings), Kafka topic names, partition/RF counts,
timeouts and offsets. Each function returns the checked value or raises `UsageError`. Every number a user
gives has a bound here (the one place), named in the option's --help.
"""

from __future__ import annotations

import errno
import ipaddress
import math
import re
import stat
from collections.abc import Callable
from pathlib import Path

from clusterctl.errors import SpecError, SpecNotFoundError, UsageError

# Kafka's rule (kafka.common.internals.Topic): legal characters, at most 249 of them, not "." or "..".
TOPIC_MAX_LENGTH = 249
_TOPIC_RE = re.compile(r"[a-zA-Z0-9._-]+")
# an RFC 1123 host name (labels of letters, digits and hyphens) — IP literals are checked separately
_LABEL = r"[a-zA-Z0-9_]([a-zA-Z0-9_-]{0,61}[a-zA-Z0-9_])?"
_HOST_RE = re.compile(rf"(?=.{{1,253}}$){_LABEL}(\.{_LABEL})*\.?")
INT32_MAX = 2**31 - 1
# a lab cluster has at most 9 brokers; 100000 partitions (librdkafka's limit) stall every later metadata call
MAX_PARTITIONS = 4096
MAX_REPLICATION_FACTOR = 16  # never more than the brokers; int16 on the wire, but no cluster here has more
INT64_MAX = 2**63 - 1
MAX_MESSAGE_BYTES = 1_000_000  # the producer's message.max.bytes (librdkafka's default, which clusterctl keeps)
# librdkafka refuses a record whose key + value + RECORD_OVERHEAD exceed message.max.bytes (its
# RD_KAFKAP_MESSAGE_V2_MAX_OVERHEAD: the varints of a v2 record at their widest); tests/test_fuzz_inputs.py finds
# the number again by asking librdkafka
RECORD_OVERHEAD = 36
MAX_RECORD_BYTES = MAX_MESSAGE_BYTES - RECORD_OVERHEAD  # key + value of one record: 999,964 bytes
MAX_LINE_SKIP_BYTES = 1024 * 1024 * 1024  # how far an over-long input line is skimmed for its end before input stops
MAX_PAYLOAD_FILE_BYTES = 64 * 1024 * 1024  # how much of `perf produce --payload-file` is read
MAX_RECORDS = 1_000_000_000  # records a perf run sends or reads, messages a consume prints
MAX_THROUGHPUT = 10_000_000  # records/s a perf producer is asked to hold
MAX_SECONDS = 86_400.0  # any duration or timeout: one day
MAX_LOG_LINES = 1_000_000  # `logs --tail`
MAX_TREE_DEPTH = 64  # `zk tree --depth` (ZooKeeper paths are rarely ten deep)
MAX_REPEAT = 100  # runs per mode of a scenario comparison
MAX_JOB_OPTIONS = 32  # options of a Spark job in a scenario's spark_job step
MAX_CONSUMER_THREADS = 64  # consumers of one perf group (more than the partitions only sit idle)
MAX_GROUP_MEMBERS = 32  # member processes of a drill's consumer group (start_group): a Python process each
MAX_SECURITY_USERS = 32  # security.users: SCRAM credentials formatted into every node's storage
MAX_USER_NAME_LENGTH = 64  # a SCRAM user name (it is also a principal in ACLs and super.users)
MAX_PRINCIPAL_NAME = 128  # the NAME of an ACL's User:NAME (a SCRAM user, or a certificate's CN=...)
MAX_ACL_RESOURCE_NAME = 255  # an ACL's topic (Kafka: 249), group or transactional id (255)


def finite(value: float, what: str) -> float:
    """A float option's value: a finite number (nan and inf are refused)."""
    if math.isnan(value) or math.isinf(value):
        raise UsageError(f"{what} must be a finite number, got {value}")
    return value


def at_most(value: int | float, what: str, maximum: int | float, minimum: int | float = 1) -> int | float:
    """A count or size within [minimum, maximum]."""
    finite(float(value), what)
    if value < minimum:
        raise UsageError(f"{what} must be at least {_num(minimum)}, got {_num(value)}")
    if value > maximum:
        raise UsageError(f"{what} is too large: {_num(value)} (at most {_num(maximum)})")
    return value


def _num(value: int | float) -> str:
    return str(value) if isinstance(value, int) else f"{value:g}"


def topic_name(name: str) -> str:
    """Kafka's topic-name rule: [a-zA-Z0-9._-], 1..249 characters, not "." or ".."."""
    if not name:
        raise UsageError("topic name is empty")
    if name in (".", ".."):
        raise UsageError(f"topic name cannot be {name!r}")
    if len(name) > TOPIC_MAX_LENGTH:
        raise UsageError(f"topic name is {len(name)} characters long; Kafka allows at most {TOPIC_MAX_LENGTH}")
    if not _TOPIC_RE.fullmatch(name):
        bad = sorted({c for c in name if not _TOPIC_RE.fullmatch(c)})
        raise UsageError(
            f"topic name {name!r} contains {', '.join(repr(c) for c in bad)}; "
            "Kafka allows only letters, digits, '.', '_' and '-'"
        )
    return name


_DIRECTORY_ID_RE = re.compile(r"[A-Za-z0-9_-]{21}[AQgw]")  # 16 bytes in base64url: the last char holds 2 bits


def directory_id(value: str, what: str = "--directory-id") -> str:
    """A KRaft directory id as Kafka prints a Uuid: 22 characters of base64url (16 bytes), not the zero id."""
    if not _DIRECTORY_ID_RE.fullmatch(value) or value == "A" * 22:
        raise UsageError(
            f"{what} {value[:40]!r} is not a directory id: 22 characters of base64url, as `clusterctl quorum` "
            "shows them"
        )
    return value


def host_port(item: str, what: str) -> tuple[str, int]:
    """One `host:port` (IPv6 as `[addr]:port`): a valid host name or IP literal and a port 1-65535."""
    item = item.strip()
    if item.startswith("["):
        host, sep, rest = item[1:].partition("]")
        if not sep or not rest.startswith(":"):
            raise UsageError(f"{what}: {item!r} is not host:port ([IPv6]:port for IPv6)")
        port_text = rest[1:]
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            raise UsageError(f"{what}: {host!r} in {item!r} is not an IPv6 address") from None
    else:
        host, sep, port_text = item.rpartition(":")
        if not sep or not host:
            raise UsageError(f"{what}: {item!r} is not host:port")
        if ":" in host:
            raise UsageError(f"{what}: {item!r} is not host:port (write IPv6 addresses as [addr]:port)")
        if not _HOST_RE.fullmatch(host):
            raise UsageError(f"{what}: {host!r} in {item!r} is not a valid host name")
    if not port_text.isascii() or not port_text.isdigit():
        raise UsageError(f"{what}: port {port_text!r} in {item!r} is not a number")
    port = int(port_text)
    if not 1 <= port <= 65535:
        raise UsageError(f"{what}: port {port} in {item!r} is outside 1-65535")
    return host, port


def host_ports(value: str, what: str) -> list[tuple[str, int]]:
    """A comma-separated `host:port,...` list (at least one)."""
    items = [s for s in value.split(",")]
    if not value.strip() or any(not s.strip() for s in items):
        raise UsageError(f"{what}: expected host:port[,host:port...], got {value!r}")
    return [host_port(s, what) for s in items]


def bootstrap_servers(value: str, what: str = "--bootstrap-server") -> str:
    """A Kafka bootstrap list, checked; returned unchanged."""
    host_ports(value, what)
    return value


def zk_connect(value: str, what: str = "--zookeeper") -> str:
    """A ZooKeeper connect string `host:port,...[/chroot]`, checked; returned unchanged."""
    hosts, slash, chroot = value.partition("/")
    host_ports(hosts, what)
    if slash and chroot and (chroot.endswith("/") or "//" in chroot):
        raise UsageError(f"{what}: chroot /{chroot} in {value!r} is not a valid znode path")
    return value


def count(value: int, what: str, *, broker_default: bool = False, maximum: int = MAX_PARTITIONS) -> int:
    """A partition count or replication factor: >= 1 (or -1 for the broker's default when allowed), at most
    MAX_PARTITIONS per topic (or MAX_REPLICATION_FACTOR)."""
    if broker_default and value == -1:
        return value
    if value < 1:
        extra = " or -1 for the broker's default" if broker_default else ""
        raise UsageError(f"{what} must be at least 1{extra}, got {value}")
    if value > maximum:
        raise UsageError(f"{what} is too large: {value} (at most {maximum})")
    return value


def seconds(value: float, what: str, *, allow_zero: bool = True) -> float:
    """A duration: finite, not negative (zero only when allowed), at most MAX_SECONDS."""
    if math.isnan(value) or math.isinf(value):
        raise UsageError(f"{what} must be a finite number of seconds, got {value}")
    if value < 0 or (value == 0 and not allow_zero):
        raise UsageError(f"{what} must be {'>= 0' if allow_zero else 'positive'}, got {value:g}")
    if value > MAX_SECONDS:
        raise UsageError(f"{what} is too long: {value:g} s (at most {MAX_SECONDS:g} s, a day)")
    return value


def partition(value: int, what: str = "--partition") -> int:
    if not 0 <= value <= INT32_MAX:
        raise UsageError(f"{what} must be between 0 and {INT32_MAX}, got {value}")
    return value


def offset(value: int, what: str = "--offset") -> int:
    if not 0 <= value <= INT64_MAX:
        raise UsageError(f"{what} must be between 0 and {INT64_MAX} (a 64-bit offset), got {value}")
    return value


def input_file(path: Path, what: str, hint: str | None = None) -> Path:
    """`path` if it is a regular file to read; else one line saying what is there: nothing (not found, exit 3),
    or a directory, a FIFO, a symlink loop... (exit 2). Checked without opening it: a FIFO would block a read."""
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            dangling = " (a symlink to nothing)" if path.is_symlink() else ""
            raise SpecNotFoundError(f"{what} {path} not found{dangling}", hint=hint) from None
        if exc.errno == errno.ELOOP:
            raise SpecError(f"{what} {path} is a symlink loop, not a file") from None
        raise SpecError(f"{what} {path}: cannot read ({exc.strerror or exc})") from None
    if stat.S_ISREG(mode):
        return path
    kind = (
        "a directory" if stat.S_ISDIR(mode)
        else "a FIFO (named pipe)" if stat.S_ISFIFO(mode)
        else "a socket" if stat.S_ISSOCK(mode)
        else "a device"
    )  # fmt: skip
    raise SpecError(f"{what} {path} is {kind}, not a file")


def output_dir(path: Path, what: str) -> Path:
    """`path` if it is a directory this process can write into, or can be made as one (its nearest existing
    ancestor is such a directory); else one line (exit 2), before any work: not after a drill has run."""
    import os

    probe = path
    while True:
        try:
            mode = probe.stat().st_mode
        except FileNotFoundError:
            if probe.parent == probe:
                raise UsageError(f"{what} {path}: no part of it exists") from None
            probe = probe.parent
            continue
        except NotADirectoryError:
            raise UsageError(f"{what} {path} cannot be made (a part of it is a file, not a directory)") from None
        except OSError as exc:
            raise UsageError(f"{what} {path}: {exc.strerror or exc}") from None
        break
    if not stat.S_ISDIR(mode):
        kind = "is not a directory" if probe == path else f"cannot be made ({probe} is not a directory)"
        raise UsageError(f"{what} {path} {kind}")
    if not os.access(probe, os.W_OK | os.X_OK):
        where = "" if probe == path else f" ({probe} is not writable)"
        raise UsageError(f"{what} {path} is not writable{where}")
    _try_writing(probe, path, what)
    return path


def can_look_at(path: Path, error: Callable[[str], Exception] = UsageError) -> None:
    """Raise `error("cannot write PATH: why")` when `path` cannot even be looked at (a name too long, ENAMETOOLONG,
    or an unsearchable part, EACCES: Path.exists() raises for those); a path that is simply absent is fine."""
    try:
        path.stat()
    except (FileNotFoundError, NotADirectoryError):
        pass
    except OSError as exc:
        raise error(f"cannot write {path}: {exc.strerror or exc}") from None


def _try_writing(probe: Path, path: Path, what: str) -> None:
    """Make (and remove) a file in `probe`, or a directory where `path` is still to be made: os.access answers yes
    to root for /sys and /proc, where nothing can be written, and the run would fail only at its end."""
    import os
    import tempfile

    try:
        if probe == path:
            fd, name = tempfile.mkstemp(prefix=".clusterctl-probe-", dir=probe)
            os.close(fd)
            os.unlink(name)
        else:
            os.rmdir(tempfile.mkdtemp(prefix=".clusterctl-probe-", dir=probe))
    except OSError as exc:
        raise UsageError(f"{what} {path} is not writable ({probe}: {exc.strerror or exc})") from None


def output_file(path: Path, what: str) -> Path:
    """`path` if it is a regular file (or nothing yet) in a directory `output_dir` accepts; else one line (exit 2)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise UsageError(f"{what} {path}: {exc.strerror or exc}") from None
    if mode is not None and not stat.S_ISREG(mode):
        raise UsageError(f"{what} {path} is not a regular file")
    output_dir(path.parent, what)
    return path


def existing_dir(value: str, what: str) -> str:
    """`value` if it names an existing directory (a filesystem to check), else one line (exit 2)."""
    p = Path(value)
    try:
        mode = p.stat().st_mode
    except OSError as exc:
        raise UsageError(f"{what} {value}: {exc.strerror or exc}") from None
    if not stat.S_ISDIR(mode):
        raise UsageError(f"{what} {value} is not a directory")
    return value
