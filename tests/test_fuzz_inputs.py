"""Generated inputs past every bound issue 51 names: records at the real limit, files that never end, names.

- the record overhead is librdkafka's own (asked again for generated key sizes), and `produce` lines around the
  bound are delivered exactly up to it: never a record librdkafka refuses after we let it through;
- input files of every kind (regular with generated lines, FIFO, device, directory, missing) as `perf produce
  --payload-file` and `produce -f`: one line and the documented exit, never an endless read;
- group ids (empty, long, control characters, undecodable bytes) for every command that takes one.

In-process through `cli.run`, against tansu; the number of generated cases is printed at the module's end.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from _fuzz import Tally, report_fixture
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from clusterctl import cli
from clusterctl.kafka import admin, browse
from clusterctl.spec import validate
from clusterctl.testing.tansu import TansuBroker

pytestmark = pytest.mark.tansu

CASES = Tally()
SCALE = float(os.environ.get("CLUSTERCTL_FUZZ_SCALE", "1"))
FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
                database=None)  # fmt: skip

report_count = report_fixture(CASES, "fuzz inputs: {n} generated cases in {seconds:.1f}s")


def invoke(args: list[str], stdin: bytes = b"") -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    saved = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    try:
        with CASES.case(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.run(args)
    finally:
        sys.stdin = saved
    return code, out.getvalue(), err.getvalue()


def one_line(code: int, err: str, shown: object) -> str:
    assert "Traceback" not in err and code not in (cli.EX_SOFTWARE,) and 0 <= code < 128, (shown, err)
    lines = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert len(lines) == (0 if code == 0 else 1), (shown, err)
    return lines[0] if lines else ""


@pytest.fixture(scope="module")
def topic(tansu_broker: TansuBroker) -> Iterator[str]:
    name = f"fzi-{uuid.uuid4().hex[:8]}"
    admin.create_topic(tansu_broker.bootstrap, name, 1, 1, {})
    yield name
    admin.delete_topic(tansu_broker.bootstrap, name)


# ---------------------------------------------------------------- the record limit is the real one


def _largest_value(key_len: int) -> int:
    """The largest value librdkafka's producer takes beside a key of `key_len` bytes (binary search; no broker)."""
    from confluent_kafka import KafkaException, Producer

    p = Producer({"bootstrap.servers": "127.0.0.1:1", "log_level": 0, "message.max.bytes": validate.MAX_MESSAGE_BYTES})
    key = b"k" * key_len if key_len else None

    def takes(n: int) -> bool:
        try:
            p.produce("t", key=key, value=b"x" * n)
        except KafkaException:
            return False
        except BufferError:
            return True
        return True

    lo, hi = 0, validate.MAX_MESSAGE_BYTES
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if takes(mid) else (lo, mid - 1)
    p.purge()
    return lo


@settings(FUZZ, max_examples=int(6 * SCALE))
@given(key_len=st.one_of(st.just(0), st.integers(1, 100_000)))
def test_the_record_overhead_is_librdkafkas(key_len: int) -> None:
    with CASES.case():
        assert key_len + _largest_value(key_len) == validate.MAX_RECORD_BYTES  # = message.max.bytes - overhead


@settings(FUZZ, max_examples=int(8 * SCALE))
@given(
    lengths=st.lists(st.integers(-3, 3).map(lambda d: validate.MAX_RECORD_BYTES + d), min_size=1, max_size=3),
    keyed=st.booleans(),
)
def test_produce_lines_around_the_bound_go_exactly_up_to_it(
    tansu_broker: TansuBroker, topic: str, lengths: list[int], keyed: bool
) -> None:
    """A line (its key separator counted) of at most the bound is delivered; a longer one is refused by us with
    the bound named, never sent to be refused by librdkafka (MSG_SIZE_TOO_LARGE)."""
    lines = [(b"k:" + b"v" * (n - 2)) if keyed else b"v" * n for n in lengths]
    args = ["produce", topic, "-b", tansu_broker.bootstrap, *(["-k", ":"] if keyed else [])]
    before = _end(tansu_broker, topic)
    code, _out, err = invoke(args, b"\n".join(lines) + b"\n")
    line = one_line(code, err, lengths)
    over = sum(1 for n in lengths if n > validate.MAX_RECORD_BYTES)
    event(f"{over} over")
    assert code == (1 if over else 0), (lengths, err)
    if over:
        assert f"larger than a record may be ({validate.MAX_RECORD_BYTES}" in line and "MSG_SIZE_TOO_LARGE" not in line
    assert _end(tansu_broker, topic) - before == len(lengths) - over


def _end(broker: TansuBroker, topic: str) -> int:
    """The topic's end offset (one partition)."""
    return browse.read_window(broker.bootstrap, topic, limit=1).spans.get(0, (0, 0))[1]


# ---------------------------------------------------------------- files of every kind


@st.composite
def input_files(draw: st.DrawFn, where: Path) -> tuple[str, Path, list[bytes]]:
    """(kind, path, the non-empty lines a regular file holds)."""
    kind = draw(st.sampled_from(["regular", "regular", "regular", "fifo", "device", "directory", "missing"]))
    path = where / f"in-{uuid.uuid4().hex[:8]}"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "device":
        path = Path(draw(st.sampled_from(["/dev/zero", "/dev/null", "/dev/urandom"])))
    elif kind == "directory":
        path.mkdir()
    elif kind == "regular":
        sizes = draw(st.lists(st.one_of(st.integers(0, 50), st.integers(-2, 2).map(lambda d: 999_964 + d)),
                              max_size=4))  # fmt: skip
        empties = draw(st.integers(0, 3000))  # blank lines: read, never kept
        lines = [b"p" * n for n in sizes]
        path.write_bytes(b"\n" * empties + b"\n".join(lines) + (b"\n" if lines else b""))
        return kind, path, [ln for ln in lines if ln]
    return kind, path, []


@settings(FUZZ, max_examples=int(25 * SCALE))
@given(data=st.data())
def test_payload_files_of_every_kind(
    tansu_broker: TansuBroker, topic: str, tmp_path: Path, data: st.DataObject
) -> None:
    kind, path, lines = data.draw(input_files(tmp_path))
    event(kind)
    args = ["perf", "produce", topic, "-n", "3", "--payload-file", str(path), "-b", tansu_broker.bootstrap]
    started = time.monotonic()
    code, _out, err = invoke(args)
    line = one_line(code, err, (kind, path))
    assert time.monotonic() - started < 20, (kind, path)
    if kind == "missing":
        assert code == 3 and "not found" in line
    elif kind != "regular":
        assert code == 2 and "not a file" in line, line
    elif any(len(ln) > validate.MAX_RECORD_BYTES for ln in lines):
        assert code == 2 and f"at most {validate.MAX_RECORD_BYTES}" in line, line
    elif not lines:
        assert code == 2 and "no non-empty records" in line, line
    else:
        assert code == 0, err


@settings(FUZZ, max_examples=int(15 * SCALE))
@given(data=st.data())
def test_produce_files_of_every_kind(
    tansu_broker: TansuBroker, topic: str, tmp_path: Path, data: st.DataObject
) -> None:
    """produce -f: a FIFO is a stream (read as its writer writes), a device or a directory one line; /dev/zero is
    the endless case of its own test below."""
    kind, path, lines = data.draw(input_files(tmp_path))
    if str(path) in ("/dev/zero", "/dev/urandom"):
        path = Path("/dev/null")  # endless: test_endless_inputs_stop
    event(kind)
    writer = None
    if kind == "fifo":
        sent = [b"fifo-%d" % i for i in range(data.draw(st.integers(0, 5)))]

        def write() -> None:
            with path.open("wb") as fh:
                fh.write(b"".join(s + b"\n" for s in sent))

        writer = threading.Thread(target=write, daemon=True)
        writer.start()
        lines = sent
    code, _out, err = invoke(["produce", topic, "-f", str(path), "-b", tansu_broker.bootstrap])
    line = one_line(code, err, (kind, path))
    if writer is not None:
        writer.join(10)
    if kind in ("missing", "directory"):
        assert code == 2 and "cannot read" in line, line
    elif any(len(ln) > validate.MAX_RECORD_BYTES for ln in lines):
        assert code == 1 and "larger than a record may be" in line, line
    else:
        assert code == 0, err


def test_endless_inputs_stop(tansu_broker: TansuBroker, topic: str) -> None:
    """/dev/zero has no line end: produce stops after the skim bound (about 2 s) with the line and exit 2; as a
    payload file it is refused before a byte is read (it grew 150 MB/s and ignored SIGTERM)."""
    started = time.monotonic()
    code, _out, err = invoke(["produce", topic, "-f", "/dev/zero", "-b", tansu_broker.bootstrap])
    assert code == 2 and "line 1: has no line end in its first 1024 MiB" in one_line(code, err, "/dev/zero")
    assert time.monotonic() - started < 15
    started = time.monotonic()
    code, _out, err = invoke(["perf", "produce", topic, "-n", "1", "--payload-file", "/dev/zero"])
    assert code == 2 and "is a device, not a file" in one_line(code, err, "/dev/zero")
    assert time.monotonic() - started < 2


# ---------------------------------------------------------------- names

GROUP_COMMANDS = [
    ["group", "describe", "{g}"],
    ["group", "delete", "{g}"],
    ["group", "reset", "{g}", "-t", "{t}", "--to-earliest"],
    ["consume", "{t}", "-g", "{g}", "--timeout", "1"],
    ["perf", "consume", "{t}", "-n", "1", "--timeout", "1", "--group", "{g}"],
]
CONTROLS = ["\x1b[2J", "\x00", "\x07", "\x9b", "\r", "\n", "\udcff"]
bad_group_ids = st.one_of(
    st.just(""),
    st.integers(256, 5000).map(lambda n: "g" * n),
    st.builds(
        lambda a, c, b: a + c + b, st.text("abc", max_size=5), st.sampled_from(CONTROLS), st.text("xyz", max_size=5)
    ),
)
fine_group_ids = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0x2FFF, blacklist_categories=["Cs"]), min_size=1, max_size=255
).filter(lambda s: not s.startswith("-") and not any(0x7F <= ord(c) <= 0x9F for c in s))


@settings(FUZZ, max_examples=int(30 * SCALE))
@given(command=st.sampled_from(GROUP_COMMANDS), bad=st.booleans(), data=st.data())
def test_group_ids_are_bounded_everywhere(
    tansu_broker: TansuBroker, topic: str, command: list[str], bad: bool, data: st.DataObject
) -> None:
    bad = bad or command[0] in ("perf", "consume")  # a fine id there is a group join: 3 s on tansu
    group = data.draw(bad_group_ids if bad else fine_group_ids)
    args = [w.format(g=group, t=topic) for w in command] + ["-b", tansu_broker.bootstrap]
    event("bad" if bad else "fine")
    code, _out, err = invoke(args)
    line = one_line(code, err, (args[:2], group[:40]))
    if bad:
        assert code == 2 and "group id" in line, (group[:40], line)
        assert "\x1b" not in err and "\x07" not in err  # shown escaped, never driving the terminal
    else:
        assert code in (0, 1, 3, 5), (group[:40], line)  # not found, nothing to read, or done
