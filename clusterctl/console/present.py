"""How the console shows values: times as ISO 8601 (UTC, the browser adds "3 s ago"), sizes in KiB/MiB, and a
record's bytes as text, pretty JSON or a hex dump. Everything returned is plain text; the templates escape it.
"""

from __future__ import annotations

import datetime as dt
import json
import string
from dataclasses import dataclass
from typing import Any

from markupsafe import Markup, escape

from clusterctl.errors import UsageError

HEX_BYTES = 4096  # of a binary value shown as hex (the rest is counted, not shown)
_PRINTABLE = set(string.printable) - set("\x0b\x0c")


def iso(t: Any) -> str:
    """Epoch seconds (or milliseconds, when that large) as ISO 8601 UTC to the millisecond; '-' when not a time."""
    try:
        secs = float(t)
        secs = secs / 1000 if secs > 1e11 else secs
        return dt.datetime.fromtimestamp(secs, dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    except (TypeError, ValueError, OverflowError, OSError):
        return "-"


def epoch_ms(raw: str, what: str) -> int | None:
    """A time a page was given: ISO 8601 (UTC unless it says otherwise, as a datetime-local field) or epoch ms."""
    if not raw:
        return None
    if raw.isdigit() and len(raw) <= 15:
        return int(raw)
    try:
        t = dt.datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"{what} must be an ISO date-time or epoch milliseconds, got {raw[:40]!r}") from None
    return int((t if t.tzinfo else t.replace(tzinfo=dt.UTC)).timestamp() * 1000)


def when(t: Any) -> Markup:
    """A <time> element: ISO text; console.js adds the relative age ("12 s ago") beside it."""
    text = iso(t)
    if text == "-":
        return Markup("-")
    return Markup('<time datetime="{0}" class="when">{0}</time>').format(escape(text))


def size(n: Any) -> str:
    """Bytes as B, KiB, MiB, GiB (1024-based, one decimal past B)."""
    try:
        value = float(n)
    except (TypeError, ValueError):
        return "-"
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return "-"  # unreachable


def duration(ms: float) -> str:
    """Milliseconds as the largest whole-ish unit: 500 ms, 1.5 s, 10 min, 7 d."""
    for unit, size_ms in (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)):
        if abs(ms) >= size_ms:
            return f"{ms / size_ms:.4g} {unit}"
    return f"{ms:g} ms"


def config_hint(name: str, value: Any) -> str:
    """A human reading of a config value in ms or bytes ('' for others, and for -1 meaning unlimited)."""
    try:
        n = int(str(value))
    except ValueError:
        return ""
    if n == -1 or n == 2**63 - 1:  # Kafka's "no limit" (Long.MAX_VALUE as a default)
        return "unlimited"
    if n < 0:
        return ""
    if name.endswith((".ms", ".ms.config")) and n >= 1000:
        return duration(n)
    if name.endswith(".bytes") and n >= 1024:
        return size(n)
    return ""


@dataclass
class Shown:
    """Bytes as a page shows them: `kind` is null, text, json or hex; `cut` bytes of `size` are not shown."""

    kind: str
    text: str
    size: int
    cut: int


def _text(data: bytes, truncated: bool) -> str | None:
    """The bytes as UTF-8 text of printable characters, or None (a multi-byte character cut at the end is dropped)."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if not (truncated and exc.start >= len(data) - 3):
            return None
        text = data[: exc.start].decode("utf-8", errors="strict")
    return text if all(c in _PRINTABLE or ord(c) > 0x9F for c in text) else None


def hexdump(data: bytes) -> str:
    """16 bytes a line: offset, hex, and the printable ASCII."""
    lines = []
    for at in range(0, len(data), 16):
        chunk = data[at : at + 16]
        ascii_ = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in chunk)
        lines.append(f"{at:08x}  {chunk.hex(' '):<47}  {ascii_}")
    return "\n".join(lines)


def shown(data: bytes | None, full_size: int | None = None) -> Shown:
    """`data` (already cut to what was kept; `full_size` is the record's) as text, pretty JSON or hex."""
    if data is None:
        return Shown("null", "", 0, 0)
    total = len(data) if full_size is None else full_size
    text = _text(data, total > len(data))
    if text is None:
        part = data[:HEX_BYTES]
        return Shown("hex", hexdump(part), total, total - len(part))
    if total == len(data) and text[:1] in "{[":
        try:
            return Shown("json", json.dumps(json.loads(text), indent=2, ensure_ascii=False), total, 0)
        except ValueError:
            pass
    return Shown("text", text, total, total - len(text.encode()))
