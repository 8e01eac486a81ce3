"""The one place results become text: a rich table (or key/value panel) or `--json`.

Domain calls return plain data (dataclasses, dicts, lists). CLI modules describe *which* fields
to show as `Column`s; this module does all the rendering, so `--json` prints exactly the data
the table shows.

Piped or logged output (stdout not a terminal) is never cut: tables are printed at their natural width and
cells fold rather than end in an ellipsis. Times shown to people are ISO-8601, UTC unless `--local-time`;
`--json` keeps the data as it is (epochs stay numbers). rich is imported on first use, not at import time,
so `clusterctl --help` does not pay for it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import enum
import errno
import json
import re
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clusterctl.errors import OutputError

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

# created on first use by __getattr__ (tests may replace them with setattr)
console: Console
err_console: Console

_local_time = False


def __getattr__(name: str) -> Any:
    if name in ("console", "err_console"):
        from rich.console import Console

        made = Console(stderr=name == "err_console")
        globals()[name] = made
        return made
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _out() -> Console:
    return globals().get("console") or __getattr__("console")


def _err() -> Console:
    return globals().get("err_console") or __getattr__("err_console")


def use_local_time(local: bool) -> None:
    """Show times in the local zone with its offset (`--local-time`) instead of UTC."""
    global _local_time
    _local_time = local


def format_time(v: Any) -> str:
    """An epoch in seconds, a datetime or an ISO string as ISO-8601: UTC (`Z`) unless `--local-time`."""
    if v is None or v == "":
        return "-"
    if isinstance(v, str):
        try:
            when = _dt.datetime.fromisoformat(v.replace("Z", "+00:00"))
        except ValueError:
            return v
    elif isinstance(v, _dt.datetime):
        when = v
    elif isinstance(v, int | float) and not isinstance(v, bool):
        when = _dt.datetime.fromtimestamp(v, tz=_dt.timezone.utc)
    else:
        return format_value(v)
    if when.tzinfo is None:  # naive times here are UTC (Docker's, ZooKeeper's)
        when = when.replace(tzinfo=_dt.timezone.utc)
    spec = "milliseconds" if when.microsecond else "seconds"
    if _local_time:
        return when.astimezone().isoformat(timespec=spec)
    return when.astimezone(_dt.timezone.utc).isoformat(timespec=spec).replace("+00:00", "Z")


@dataclasses.dataclass(frozen=True)
class Column:
    """A table column: header, the field (or callable) it reads, and optional formatting."""

    header: str
    field: str | Callable[[Any], Any]
    justify: str = "left"
    style: str | None = None
    fmt: Callable[[Any], str] | None = None

    def value(self, row: Any) -> Any:
        if callable(self.field):
            return self.field(row)
        if isinstance(row, Mapping):
            return row.get(self.field)
        return getattr(row, self.field, None)

    def cell(self, row: Any) -> str:
        v = self.value(row)
        return literal(self.fmt(v) if self.fmt is not None else format_value(v))


def format_value(v: Any) -> str:
    """Kafka-tool style: lists as `1,2,3`, None as `-`, floats trimmed."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:,.2f}"
    if isinstance(v, list | tuple | set | frozenset):
        return ",".join(format_value(x) for x in v)
    if isinstance(v, enum.Enum):
        return str(v.value)
    if isinstance(v, _dt.datetime):
        return format_time(v)
    return str(v)


def to_jsonable(obj: Any) -> Any:
    """Dataclasses, enums, paths, datetimes and sets into JSON-ready structures."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | set | frozenset):
        seq = sorted(obj) if isinstance(obj, set | frozenset) else obj
        return [to_jsonable(x) for x in seq]
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, Path):
        return str(obj)
    if isinstance(obj, _dt.datetime | _dt.date):
        return obj.isoformat()
    if isinstance(obj, bytes):
        return obj.decode("utf-8", errors="replace")
    if hasattr(obj, "model_dump"):  # pydantic models
        return to_jsonable(obj.model_dump(mode="json"))
    return obj


# C0 controls but tab (and newline, unless one line is asked for), DEL, C1, and lone surrogates (undecodable bytes)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")
_CONTROL_OR_NEWLINE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f-\x9f\ud800-\udfff]")


def literal(text: str, one_line: bool = False) -> str:
    """User data as it may reach a terminal: control characters (ESC, CR, BEL, ...) and undecodable bytes
    shown as escapes (`\\x1b`, `\\udcff`), so no value can move the cursor, recolour or retitle the terminal."""
    pattern = _CONTROL_OR_NEWLINE if one_line else _CONTROL
    return pattern.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", text)


def print_line(text: str) -> None:
    """One line of user data on stdout, literally: no markup, no emoji codes, control characters escaped."""
    done()
    sys.stdout.write(literal(text, one_line=True) + "\n")
    sys.stdout.flush()


def print_json(data: Any) -> None:
    done()
    sys.stdout.write(json.dumps(to_jsonable(data), indent=2, sort_keys=False) + "\n")
    sys.stdout.flush()


def print_json_line(data: Any) -> None:
    """One compact JSON object per line (for streams such as `consume --json`)."""
    done()
    sys.stdout.write(json.dumps(to_jsonable(data), separators=(",", ":")) + "\n")
    sys.stdout.flush()


def event_json(data: Any) -> None:
    """One compact JSON object per line on stderr: progress events beside a `--json` result on stdout."""
    sys.stderr.write(json.dumps(to_jsonable(data), separators=(",", ":")) + "\n")
    sys.stderr.flush()


def plain(text: str | None) -> Text | None:
    """User data (names, values, paths, messages) as literal text: never parsed as Rich markup."""
    from rich.text import Text

    return None if text is None else Text(literal(text))


def build_table(rows: Iterable[Any], columns: Sequence[Column], title: str | None = None) -> Table:
    from rich.table import Table
    from rich.text import Text

    table = Table(title=plain(title), header_style="bold", show_lines=False)
    for col in columns:
        # fold, never ellipsis: a narrow terminal wraps a long value instead of cutting it
        table.add_column(col.header, justify=col.justify, style=col.style, overflow="fold")  # type: ignore[arg-type]
    for row in rows:
        table.add_row(*(Text(col.cell(row)) for col in columns))
    return table


def build_kv(data: Any, fields: Sequence[Column], title: str | None = None) -> Table:
    """A two-column key/value table for a single record (e.g. a perf summary)."""
    from rich.table import Table
    from rich.text import Text

    table = Table(title=plain(title), show_header=False, box=None, pad_edge=False)
    table.add_column("key", style="bold", overflow="fold")
    table.add_column("value", overflow="fold")
    for col in fields:
        table.add_row(col.header, Text(col.cell(data)))
    return table


def print_table(table: Table, out: Console | None = None) -> None:
    """Print a table; when the output is not a terminal, at its natural width (however wide) so nothing wraps."""
    out = out or _out()
    if out.is_terminal:
        out.print(table)
        return
    from rich.measure import Measurement

    natural = Measurement.get(out, out.options.update(width=1_000_000), table).maximum
    before = out.width
    if natural <= before:
        out.print(table)
        return
    out.width = natural
    if table.title_justify == "center":
        table.title_justify = "left"  # a wide key/value table's title stays above its keys
    try:
        out.print(table)
    finally:
        out.width = before


def emit(
    data: Any,
    *,
    as_json: bool,
    columns: Sequence[Column] | None = None,
    rows: Iterable[Any] | None = None,
    title: str | None = None,
    kv: Sequence[Column] | None = None,
    empty: str | None = None,
) -> None:
    """Print `data` as JSON, or as a table of `rows` (default: `data`) / a key-value panel.

    A plain `str` is printed literally (pass a `rich.text.Text` for styled text).
    """
    if as_json:
        print_json(data)
        return
    done()
    out = _out()
    if kv is not None:
        print_table(build_kv(data, kv, title=title), out)
        return
    if columns is None:
        from rich.text import Text

        out.print(Text(literal(data)) if isinstance(data, str) else data, soft_wrap=not out.is_terminal)
        return
    row_list = list(data if rows is None else rows)
    if not row_list and empty:
        from rich.text import Text

        out.print(Text(literal(empty)), soft_wrap=not out.is_terminal)
        return
    print_table(build_table(row_list, columns, title=title), out)


def live(
    refresh: Callable[[Any], tuple[Any, Any]],
    rows: Callable[[Any], Iterable[Any]],
    columns: Sequence[Column],
    notes: Callable[[Any], Sequence[str]],
    interval: float,
    title: str | None = None,
) -> None:
    """A table refreshed in place every `interval` seconds until interrupted (`--watch`), with `notes` in red
    under it. `refresh(state)` returns (data, the next call's state); it starts with state None."""
    import time

    from rich.console import Group
    from rich.live import Live
    from rich.text import Text

    def view(data: Any) -> Group:
        lines = [Text(literal(n), style="bold red") for n in notes(data)] or [Text("nothing wrong", style="green")]
        return Group(build_table(rows(data), columns, title=title), *lines)

    done()
    data, state = refresh(None)
    with Live(view(data), console=_out(), auto_refresh=False) as screen:
        while True:
            time.sleep(interval)
            data, state = refresh(state)
            screen.update(view(data), refresh=True)


def info(message: str) -> None:
    """Progress / status text for humans, on stderr so `--json` stdout stays clean (printed literally)."""
    from rich.text import Text

    err = _err()
    err.print(Text(literal(message)), soft_wrap=not err.is_terminal)


def one_line(message: str) -> str:
    return " ".join(message.split())


def error_line(message: str) -> None:
    """`error: <message>` as one literal line on stderr (the message may carry user data)."""
    from rich.text import Text

    _err().print(Text.assemble(("error: ", "bold red"), literal(one_line(message))), highlight=False, soft_wrap=True)


def error_json(message: str, exit_code: int, result: Any = None) -> None:
    """The `--json` failure object on stdout: `{"error": ..., "exit_code": ...}` (+ `result` done so far)."""
    data: dict[str, Any] = {"error": one_line(message), "exit_code": exit_code}
    if result is not None:
        data["result"] = result
    print_json_line(data)


# ---------------------------------------------------------------- writes that fail

_outcome: str | None = None


def outcome(text: str) -> None:
    """What the command has done so far, for the one line a failed stdout write ends with ("... delivered")."""
    global _outcome
    _outcome = text


def done() -> None:
    """A result is being printed: the work before it is done (unless the command said more with `outcome`)."""
    if _outcome is None:
        outcome("the command did its work")


@dataclasses.dataclass
class Lost:
    """Writes that failed while a command ran: stream name -> the reason."""

    streams: dict[str, str] = dataclasses.field(default_factory=dict)


class _Guarded:
    """sys.stdout / sys.stderr while a command runs. A failed stdout write is an OutputError (the command stops
    there, before acknowledging what it could not show); a failed stderr write (progress, the error line) is
    noted and the work goes on. A closed stream (None) fails every write; a pipe whose reader left (EPIPE,
    `| head -c0`) fails like any other: stdout's is an OutputError too (exit 74 and its one line, never a silent
    exit 1)."""

    def __init__(self, raw: Any, name: str, lost: Lost) -> None:
        self._raw, self._name, self._lost = raw, name, lost

    def _call(self, op: str, *args: Any) -> Any:
        try:
            if self._raw is None:
                raise OSError(errno.EBADF, f"{self._name} is closed")
            return getattr(self._raw, op)(*args)
        except (OSError, ValueError, UnicodeEncodeError) as exc:
            reason = _reason(exc)
            self._lost.streams.setdefault(self._name, reason)
            if self._name == "stdout":
                raise OutputError(f"stdout could not be written ({reason})") from None
        return None

    def write(self, text: str) -> int:
        self._call("write", text)
        return len(text)

    def flush(self) -> None:
        self._call("flush")

    def __getattr__(self, name: str) -> Any:
        return getattr(self._raw, name)  # isatty, fileno, encoding...: a closed stream has none


def _reason(exc: Exception) -> str:
    if isinstance(exc, UnicodeEncodeError):
        bad = exc.object[exc.start : exc.end]
        return f"its encoding {exc.encoding} cannot carry {bad!r}; set PYTHONIOENCODING=utf-8"
    if isinstance(exc, BrokenPipeError):
        return "its reader left: a broken pipe"
    if isinstance(exc, OSError):
        return exc.strerror or str(exc)
    return str(exc)  # ValueError: I/O operation on closed file


@contextlib.contextmanager
def guarded_streams() -> Iterator[Lost]:
    """Guard sys.stdout and sys.stderr for one command (see `_Guarded`); yields what was lost."""
    global _outcome
    _outcome = None
    lost = Lost()
    saved = sys.stdout, sys.stderr
    sys.stdout = _Guarded(saved[0], "stdout", lost)
    sys.stderr = _Guarded(saved[1], "stderr", lost)
    try:
        yield lost
    finally:
        sys.stdout, sys.stderr = saved


def lost_output_line(exc: OutputError) -> str:
    """The one line for a failed stdout write: what was done, then what failed."""
    return f"{_outcome}, but {exc.message}" if _outcome else f"{exc.message}; the command stopped there"
