"""librdkafka properties a user passes (`--producer-prop`, `--consumer-prop`, Spark's `--option kafka.*`), checked
against librdkafka's own property table before any client is built.

The table is not typed here: it is what the librdkafka inside the confluent-kafka wheel prints about itself
(`rd_kafka_conf_properties_show`, the text of its CONFIGURATION.md): every property's name, whether it is a
producer's (P), a consumer's (C) or both (*), its type and its range. A property is refused with one line when:

- librdkafka has no such property, or it belongs to the other role;
- it can only be set through librdkafka's C API (callbacks, pointers: `*Type: see dedicated API*`), or is one of
  the few that take over the process (POLICY: loading native code, running a command, signalling its threads);
- its value does not fit the type and range (librdkafka itself reads an integer past INT_MAX as something else);
- a name (group.id, client.id, ...) is empty or longer than MAX_NAME_LENGTH, a value is longer than
  MAX_VALUE_BYTES or holds control characters, or more than MAX_PROPS are given.

Then `rd_kafka_conf_set` itself gets the last word on a scratch configuration (what else it refuses).
Found by generated property maps (tests/test_fuzz_clientprops.py): `group.id=` crashed the process (SIGSEGV,
exit 139; SIGABRT in confluent-kafka's Consumer), `internal.termination.signal=9` killed it (exit 137),
`api.version.request=false` with an old `broker.version.fallback` hung a consume past its --timeout, and
confluent-kafka's Python-only keys (`error_cb=x`) were an internal error.
"""

from __future__ import annotations

import ctypes
import functools
import math
import os
import re
import stat
import tempfile
from dataclasses import dataclass
from typing import Any, Literal

from clusterctl.errors import UsageError

Role = Literal["producer", "consumer", "client"]  # client: either (Spark's connector reads and writes)

MAX_PROPS = 64  # properties per command (each option is repeatable)
MAX_NAME_LENGTH = 255  # group.id, client.id, transactional.id, ...: names in Kafka's protocol and logs
MAX_VALUE_BYTES = 65_536  # any value (a PEM certificate inline fits; a CA bundle goes by ssl.ca.location)
MAX_FILE_BYTES = 16 * 1024 * 1024  # a file a property names (certificates, keys, keytabs)
NAME_PROPERTIES = frozenset({"group.id", "client.id", "group.instance.id", "transactional.id", "client.rack"})

# Properties librdkafka accepts that hand the process over to something else. Not a table of properties: the
# table comes from librdkafka; this says which of its properties clusterctl will not pass on, and why.
POLICY: dict[str, str] = {
    "plugin.library.paths": "loads native code into clusterctl",
    "ssl.engine.location": "loads native code into clusterctl",
    "ssl.providers": "loads native code into clusterctl",
    "sasl.kerberos.kinit.cmd": "runs a shell command",
    "internal.termination.signal": "makes librdkafka send a signal to clusterctl's threads (9 kills it)",
    "enabled_events": "changes what librdkafka hands clusterctl's event loop",
    "log.queue": "moves librdkafka's log to a queue clusterctl does not serve",
    "api.version.request": "is for brokers older than Kafka 0.10, which clusterctl does not run",
    "broker.version.fallback": "is for brokers older than Kafka 0.10, which clusterctl does not run",
    "api.version.fallback.ms": "is for brokers older than Kafka 0.10, which clusterctl does not run",
    "offset.store.method": "is deprecated (file offsets); consumers commit to the brokers",
    "offset.store.path": "is deprecated (file offsets); consumers commit to the brokers",
}
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")  # tab, LF, CR pass: PEM values have line ends
_NAME_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_INTEGER = re.compile(r"-?[0-9]+")
_WORD = re.compile(r"[A-Za-z_]+")  # librdkafka reads "1.5" or "1e3" as 1 for an integer: only words go to it
_BOOLEANS = ("true", "false", "t", "f", "1", "0")  # what librdkafka reads as a boolean (any case)


@dataclass(frozen=True)
class Property:
    """One row of librdkafka's property table."""

    name: str
    scope: str  # "*" both, "C" consumer, "P" producer
    kind: str  # integer, float, boolean, enum value, CSV flags, string, pattern list, see dedicated API
    low: float | None = None
    high: float | None = None
    choices: tuple[str, ...] = ()
    #: the value names a file librdkafka opens ("Path to ..."): "file", or "file or directory"
    path: str | None = None
    default: str = ""

    def fits(self, role: Role) -> bool:
        return self.scope == "*" or role == "client" or self.scope == {"producer": "P", "consumer": "C"}[role]

    def expects(self) -> str:
        if self.kind == "integer":
            return f"an integer from {self.low:.0f} to {self.high:.0f}"
        if self.kind == "float":
            return f"a number from {self.low:g} to {self.high:g}"
        if self.kind == "boolean":
            return "true or false"
        if self.kind == "enum value":
            return f"one of {', '.join(self.choices)}"
        if self.kind == "CSV flags":
            return f"a comma-separated list of {', '.join(self.choices)}"
        return self.kind


_ROW = re.compile(r"^([A-Za-z0-9_.]+)\s*\|\s*([*CP])\s*\|\s*(.*?)\s*\|\s*([^|]*?)\s*\|[^|]*\|(.*)\*Type: ([^*]+)\*\s*$")
_PATH = re.compile(r"\b(?:(file or directory) )?path to\b", re.IGNORECASE)
_RANGE = re.compile(r"^(-?[0-9.e+]+) \.\. (-?[0-9.e+]+)$")


def parse_table(text: str) -> dict[str, Property]:
    """librdkafka's CONFIGURATION.md text (global and topic tables) as {name: Property}."""
    table: dict[str, Property] = {}
    for line in text.splitlines():
        m = _ROW.match(line)
        if m is None:
            continue
        name, scope, rng, kind = m.group(1), m.group(2), m.group(3).strip(), m.group(6).strip()
        path = _PATH.search(m.group(5))
        low = high = None
        choices: tuple[str, ...] = ()
        span = _RANGE.match(rng)
        if span:
            low, high = float(span.group(1)), float(span.group(2))
        elif rng:
            choices = tuple(c.strip() for c in rng.split(",") if c.strip())
        where = None if path is None else "file or directory" if path.group(1) else "file"
        table.setdefault(name, Property(name, scope, kind, low, high, choices, where, m.group(4)))
    return table


def _library() -> Any:
    from clusterctl.kafka import perf_native

    lib = perf_native._load()
    if lib is None:
        raise UsageError(f"cannot check client properties: librdkafka: {perf_native.unavailable_reason()}")
    return lib


@functools.lru_cache(maxsize=1)
def table() -> dict[str, Property]:
    """The property table of the librdkafka this process runs (printed by librdkafka itself, read once)."""
    lib = _library()
    libc = ctypes.CDLL(None)
    libc.fdopen.restype, libc.fdopen.argtypes = ctypes.c_void_p, [ctypes.c_int, ctypes.c_char_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    show = lib.rd_kafka_conf_properties_show
    show.restype, show.argtypes = None, [ctypes.c_void_p]
    with tempfile.TemporaryFile() as fh:
        fp = libc.fdopen(os.dup(fh.fileno()), b"w")
        if not fp:
            raise UsageError("cannot check client properties: fdopen failed")
        show(fp)
        libc.fclose(fp)
        fh.seek(0)
        text = fh.read().decode("utf-8", errors="replace")
    parsed = parse_table(text)
    if len(parsed) < 50:  # a librdkafka that prints no table cannot vouch for anything
        raise UsageError("cannot check client properties: librdkafka printed no property table")
    return parsed


def _shown(value: str) -> str:
    return repr(value if len(value) <= 60 else value[:57] + "...")


def check_one(key: str, value: str, role: Role, option: str, prefix: str = "") -> None:
    """One property against the table and the bounds; UsageError (exit 2) with one line otherwise."""
    shown = f"{option} {prefix}{key}"
    if len(key) > 128 or _NAME_CONTROL.search(key):
        raise UsageError(f"{option}: {_shown(prefix + key)} is not a librdkafka property name")
    prop = table().get(key)
    if prop is None:
        raise UsageError(f"{shown}: librdkafka has no such property (see its CONFIGURATION.md)")
    if not prop.fits(role):
        owner = "consumer" if prop.scope == "C" else "producer"
        raise UsageError(f"{shown}: a {owner} property, not a {role}'s")
    if prop.kind == "see dedicated API":
        raise UsageError(f"{shown}: set only through librdkafka's C API (a callback or pointer), not here")
    if key in POLICY:
        raise UsageError(f"{shown}: refused, it {POLICY[key]}")
    where = f"{shown}={_shown(value)}"
    if len(value.encode("utf-8", "surrogateescape")) > MAX_VALUE_BYTES:
        raise UsageError(f"{shown}: the value is longer than {MAX_VALUE_BYTES} bytes")
    if _CONTROL.search(value) or any("\ud800" <= c <= "\udfff" for c in value):
        raise UsageError(f"{where}: the value holds control characters or bytes that are not UTF-8")
    if key in NAME_PROPERTIES:
        check_name(value, f"{shown}")
    if not _fits(prop, value.strip()):
        raise UsageError(f"{where}: {prop.expects()} expected")
    if prop.path is not None and value and not (value == "probe" and "directory" in prop.path):
        _check_path(value, prop.path, where)  # ssl.ca.location=probe: librdkafka looks in the system's places


def _check_path(value: str, allowed: str, where: str) -> None:
    """A file librdkafka opens and reads whole, in C, where no signal reaches: a regular file (or a directory
    where the property allows one) of at most MAX_FILE_BYTES; never a FIFO (it would block), a device
    (/dev/zero: endless) or a socket."""
    try:
        st = os.stat(value)
    except OSError as exc:
        raise UsageError(f"{where}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(st.st_mode) and "directory" in allowed:
        return
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{where}: not a regular {allowed} (a FIFO or a device would stall librdkafka)")
    if st.st_size > MAX_FILE_BYTES:
        raise UsageError(f"{where}: the file is larger than {MAX_FILE_BYTES // (1 << 20)} MiB")


def _fits(prop: Property, value: str) -> bool:
    """Whether `value` has the property's type and lies in its range (as far as the table says)."""
    if prop.kind == "integer":  # a word (acks=all) is librdkafka's to read; anything else a number in the range
        if _WORD.fullmatch(value):
            return True  # librdkafka's named values; it refuses a word it does not know
        return bool(_INTEGER.fullmatch(value)) and (prop.low or 0) <= int(value) <= (prop.high or 0)
    if prop.kind == "float":
        try:
            number = float(value)
        except ValueError:
            return False
        return math.isfinite(number) and (prop.low or 0) <= number <= (prop.high or 0)
    if prop.kind == "boolean":
        return value.lower() in _BOOLEANS
    if prop.kind == "enum value":
        return value in prop.choices
    if prop.kind == "CSV flags" and prop.choices:
        return bool(value) and all(f.strip() in prop.choices for f in value.split(","))
    return True


def check_name(value: str, what: str) -> str:
    """A client-side name (group id, client id): 1 to MAX_NAME_LENGTH characters, no control characters."""
    if not value:
        raise UsageError(f"{what} is empty")
    if len(value) > MAX_NAME_LENGTH:
        raise UsageError(f"{what} is {len(value)} characters long (at most {MAX_NAME_LENGTH})")
    if _NAME_CONTROL.search(value) or any("\ud800" <= c <= "\udfff" for c in value):
        raise UsageError(f"{what} {_shown(value)} holds control characters or bytes that are not UTF-8")
    return value


def check(props: dict[str, str], role: Role, option: str, prefix: str = "") -> dict[str, str]:
    """Every property of `props` (see the module's docstring), then librdkafka's own conf_set on a scratch
    configuration; returns `props` unchanged. `prefix`: the keys carry it (Spark's `kafka.`), librdkafka's not."""
    if len(props) > MAX_PROPS:
        raise UsageError(f"{option}: {len(props)} properties given (at most {MAX_PROPS})")
    bare = {key[len(prefix) :]: value for key, value in props.items()}
    for key, value in bare.items():
        check_one(key, value, role, option, prefix)
    if bare:
        _conf_set(bare, option, prefix)
    return props


def _conf_set(props: dict[str, str], option: str, prefix: str = "") -> None:
    lib = _library()
    errstr = ctypes.create_string_buffer(512)
    rconf = lib.rd_kafka_conf_new()
    try:
        for key, value in props.items():
            if lib.rd_kafka_conf_set(rconf, key.encode(), value.encode(), errstr, 512) != 0:
                reason = errstr.value.decode(errors="replace")
                raise UsageError(f"{option} {prefix}{key}={_shown(value)}: {reason}")
    finally:
        lib.rd_kafka_conf_destroy(rconf)
