"""Boundary fuzzing (design.md test layer 6): generated argument values and stdin bytes at the CLI, against tansu.

Each case runs the CLI entry point in-process (`clusterctl.cli.run`, what the console script calls) with
generated argv and stdin, and checks the contract every command owes a script:

- no traceback and no internal error (exit 70): every refusal is a ClusterctlError or a usage error;
- a non-zero exit prints exactly one `error:` line on stderr;
- with `--json`, stdout is valid JSON (JSON lines for `consume`), and a failure ends with
  `{"error": ..., "exit_code": <the exit status>}`;
- nothing left behind: a failed `init`/`render` leaves the directory as it was; a group never has more
  committed than the consume printed.

The number of generated cases and the time they took are printed at the end of the module's run.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import string
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _fuzz import Tally, report_fixture
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterctl import cli
from clusterctl.errors import NotFoundError
from clusterctl.kafka import clients, groups
from clusterctl.signals import STOP_SIGNALS
from clusterctl.testing.tansu import TansuBroker

pytestmark = pytest.mark.tansu

CASES = Tally()
SCALE = float(os.environ.get("CLUSTERCTL_FUZZ_SCALE", "1"))  # more cases in a longer run: CLUSTERCTL_FUZZ_SCALE=10
CLUSTERCTL = Path(sys.executable).parent / "clusterctl"
FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)


report_count = report_fixture(CASES, "fuzz layer: {n} generated CLI cases in {seconds:.1f}s")


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A cwd with no spec in it, so no generated command can reach a real cluster through a default spec."""
    d = tmp_path_factory.mktemp("fuzz")
    old = os.getcwd()
    os.chdir(d)
    prev_spec = os.environ.get("CLUSTERCTL_SPEC")
    os.environ["CLUSTERCTL_SPEC"] = str(d / "no-such-spec.yaml")
    os.environ.pop("CLUSTERCTL_BOOTSTRAP_SERVER", None)
    try:
        yield d
    finally:
        os.chdir(old)
        if prev_spec is None:
            os.environ.pop("CLUSTERCTL_SPEC", None)
        else:
            os.environ["CLUSTERCTL_SPEC"] = prev_spec


@dataclass
class Outcome:
    code: int
    out: str
    err: str


def invoke(args: list[str], stdin: bytes = b"") -> Outcome:
    """Run the CLI in-process the way the console script does; any escaping exception fails the case."""
    out, err = io.StringIO(), io.StringIO()
    saved_stdin = sys.stdin
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    started = time.monotonic()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.run(args)
    finally:
        sys.stdin = saved_stdin
        CASES.add(started)
    return Outcome(code, out.getvalue(), err.getvalue())


def check_contract(args: list[str], res: Outcome) -> None:
    shown = f"args={args!r} code={res.code}\nstdout={res.out[-2000:]}\nstderr={res.err[-2000:]}"
    assert "Traceback" not in res.err, shown
    assert res.code != cli.EX_SOFTWARE, f"internal error: {shown}"
    errors = [ln for ln in res.err.splitlines() if ln.startswith("error: ")]
    if res.code == 0:
        assert not errors, shown
    else:
        assert len(errors) == 1, shown
    if "--json" in args and "--" not in args and "--help" not in args:
        docs = _json_docs(res.out, shown)
        if res.code != 0:
            assert docs and docs[-1].get("exit_code") == res.code and docs[-1].get("error"), shown


def _json_docs(out: str, shown: str) -> list[dict]:
    text = out.strip()
    if not text:
        return []
    try:
        doc = json.loads(text)
        return [doc] if isinstance(doc, dict) else [{"list": doc}]
    except json.JSONDecodeError:
        pass
    docs = []
    for line in text.splitlines():  # JSON lines (consume --json), then maybe the error object
        try:
            docs.append(json.loads(line))
        except json.JSONDecodeError as exc:
            raise AssertionError(f"stdout is not JSON ({exc}): {shown}") from None
    return docs


# ---------------------------------------------------------------- strategies

# argv strings: what execve can carry (no NUL), non-UTF-8 bytes included (they arrive as lone surrogates)
ARG_CHARS = st.characters(blacklist_characters="\x00", blacklist_categories=["Cs"])
args_text = st.one_of(
    st.text(alphabet=ARG_CHARS, max_size=30),
    st.binary(min_size=1, max_size=8).map(lambda b: os.fsdecode(b.replace(b"\x00", b"x"))),
)
LEGAL = string.ascii_letters + string.digits + "._-"
topic_names = st.one_of(
    st.text(alphabet=LEGAL, min_size=1, max_size=12).map(lambda s: f"fz-{s}"),
    args_text,
    st.sampled_from([".", "..", "a b", "a/b", "[/]", "[bold]x[/bold]", "x" * 250, "-", "--json", "ü", "\udcff"]),
)
ints = st.one_of(
    st.integers(-3, 5), st.integers(-(2**70), 2**70), st.sampled_from([2**31, 2**31 - 1, 2**63, 2**63 - 1, -1])
)
int_texts = st.one_of(
    ints.map(str), st.text(alphabet=ARG_CHARS, max_size=8), st.sampled_from(["1e3", "0x10", " 1", "nan", "-0", "٣"])
)
small_timeouts = st.one_of(
    st.floats(0, 0.6).map(lambda f: f"{f:.2f}"), st.sampled_from(["-1", "nan", "inf", "-inf", "x", "1e400", ""])
)
addresses = st.one_of(
    st.sampled_from(["::::", "host:notaport", "localhost:99999", "h:0", "", ",", "[::1]", "[zz]:1", "a b:1", ":9092"]),
    args_text,
    st.builds(lambda h, p: f"{h}:{p}", st.text(alphabet=string.ascii_lowercase + ".-_", max_size=10), ints),
)
key_separators = st.one_of(st.none(), st.sampled_from([":", "", "::", "\t", "[/]"]), st.text(ARG_CHARS, max_size=3))


def maybe(flag: str, values: st.SearchStrategy[str]) -> st.SearchStrategy[list[str]]:
    return st.one_of(st.just([]), values.map(lambda v: [flag, v]))


# ---------------------------------------------------------------- the fuzz cases


@settings(FUZZ, max_examples=int(60 * SCALE))
@given(
    name=topic_names,
    p=maybe("-p", int_texts),
    r=maybe("-r", int_texts),
    config=maybe("-c", st.one_of(args_text, st.sampled_from(["retention.ms=1000", "=", "a=b=c"]))),
    as_json=st.booleans(),
)
def test_fuzz_topic_create_describe_delete(
    work: Path, tansu_broker: TansuBroker, name: str, p: list[str], r: list[str], config: list[str], as_json: bool
) -> None:
    bs = ["-b", tansu_broker.bootstrap]
    js = ["--json"] if as_json else []
    for args in (
        ["topic", "create", name, *p, *r, *config, *bs, *js],
        ["topic", "describe", name, *bs, *js],
        ["topic", "configs", name, *bs, *js],
        ["topic", "delete", name, "--yes", *bs, *js],
    ):
        check_contract(args, invoke(args))


@settings(FUZZ, max_examples=int(25 * SCALE))
@given(
    suffix=st.text(alphabet=LEGAL, min_size=1, max_size=12),
    partitions=st.integers(1, 4),
    config=st.sampled_from([[], ["-c", "retention.ms=1000"], ["-c", "cleanup.policy=compact"]]),
    as_json=st.booleans(),
)
def test_fuzz_legal_topic_is_created_described_deleted(
    work: Path, tansu_broker: TansuBroker, suffix: str, partitions: int, config: list[str], as_json: bool
) -> None:
    """A legal name with legal settings succeeds at every step, and the topic really exists, then really vanishes."""
    name = f"fz-{uuid.uuid4().hex[:6]}-{suffix}"  # unique: no two cases collide on '.' vs '_'
    bs = ["-b", tansu_broker.bootstrap]
    js = ["--json"] if as_json else []
    steps = [
        ["topic", "create", name, "-p", str(partitions), "-r", "1", *config, *bs, *js],
        ["topic", "describe", name, *bs, "--json"],
        ["topic", "delete", name, "--yes", *bs, *js],
    ]
    created = invoke(steps[0])
    check_contract(steps[0], created)
    assert created.code == 0, f"{steps[0]}: {created.err}"
    assert name in _topic_names(tansu_broker.bootstrap)
    described = invoke(steps[1])
    check_contract(steps[1], described)
    assert described.code == 0, f"{steps[1]}: {described.err}"
    (desc,) = json.loads(described.out)
    assert desc["name"] == name and len(desc["partitions"]) == partitions, desc
    deleted = invoke(steps[2])
    check_contract(steps[2], deleted)
    assert deleted.code == 0, f"{steps[2]}: {deleted.err}"
    assert name not in _topic_names(tansu_broker.bootstrap)


@settings(FUZZ, max_examples=int(50 * SCALE))
@given(
    stdin=st.one_of(
        st.binary(max_size=300),
        st.lists(st.text(max_size=20), max_size=20).map(lambda ls: "\n".join(ls).encode("utf-8", "surrogatepass")),
        st.sampled_from([b"a:1\nb:2\nc\n", b"\xff\xfe\n", b"[bold]x[/bold]\n", b"k:v\r\nk2:v2\r\n", b""]),
    ),
    sep=key_separators,
    partition=maybe("-p", int_texts),
    acks=maybe("--acks", st.sampled_from(["0", "1", "all", "-1", "2", "", "ALL"])),
    as_json=st.booleans(),
)
def test_fuzz_produce_stdin(
    work: Path,
    tansu_broker: TansuBroker,
    stdin: bytes,
    sep: str | None,
    partition: list[str],
    acks: list[str],
    as_json: bool,
) -> None:
    topic = _topic(tansu_broker)
    args = ["produce", topic, *(["-k", sep] if sep is not None else []), *partition, *acks]
    args += ["-b", tansu_broker.bootstrap, *(["--json"] if as_json else [])]
    res = invoke(args, stdin)
    check_contract(args, res)
    lines = stdin.split(b"\n")
    if res.code == 0 and as_json:  # everything sent was valid: one message per input line
        assert json.loads(res.out)["sent"] == len(lines) - (1 if stdin.endswith(b"\n") or not stdin else 0)


@settings(FUZZ, max_examples=int(40 * SCALE))
@given(
    offset=maybe("--offset", st.one_of(int_texts, st.sampled_from(["earliest", "latest", "beginning"]))),
    partition=maybe("-p", int_texts),
    n=maybe("-n", int_texts),
    timeout=small_timeouts,
    group=st.booleans(),
    table=st.booleans(),
    as_json=st.booleans(),
)
def test_fuzz_consume(
    work: Path,
    tansu_broker: TansuBroker,
    offset: list[str],
    partition: list[str],
    n: list[str],
    timeout: str,
    group: bool,
    table: bool,
    as_json: bool,
) -> None:
    topic = _topic(tansu_broker, messages=5)
    gid = f"fzg-{uuid.uuid4().hex[:8]}"
    args = ["consume", topic, *offset, *partition, *n, "--timeout", timeout, "-b", tansu_broker.bootstrap]
    args += (["-g", gid] if group else []) + (["--table"] if table else []) + (["--json"] if as_json else [])
    res = invoke(args)
    check_contract(args, res)
    if group:  # nothing committed beyond what was printed (reading from --offset K, each partition starts at K)
        printed = _printed_records(res.out, as_json, table)
        start = int(offset[1]) if offset and offset[1].strip().lstrip("-").isdecimal() and offset[1].isascii() else 0
        assert _committed(tansu_broker.bootstrap, gid) <= printed + 2 * max(start, 0), f"{args}: {res.out}"


@settings(FUZZ, max_examples=int(60 * SCALE))
@given(
    command=st.sampled_from(
        [
            ["topic", "list"],
            ["cluster", "describe"],
            ["group", "list"],
            ["group", "describe", "g"],
            ["leader", "imbalance"],
            ["zk", "ls", "/"],
            ["zk", "status"],
            ["zk", "tree", "/"],
        ]
    ),
    address=addresses,
    timeout=small_timeouts,
    as_json=st.booleans(),
)
def test_fuzz_addresses(work: Path, command: list[str], address: str, timeout: str, as_json: bool) -> None:
    flag = "--zookeeper" if command[0] == "zk" else "-b"
    extra = ["--timeout", timeout] if command[0] == "zk" else []
    args = [*command, flag, address, *extra, *(["--json"] if as_json else [])]
    res = invoke(args)
    check_contract(args, res)
    if command == ["zk", "status"] and res.code == 0:
        # a report, not a request: it exits 0 and says every node is down and the quorum is lost
        if as_json:
            data = json.loads(res.out)
            assert data["quorum"]["has_quorum"] is False and not any(n["ok"] for n in data["nodes"]), args
        else:
            assert "quorum lost: 0/" in res.out, args
        return
    # nothing listens on any generated address: a bad address (2), unreachable (4) or timed out (5)
    assert res.code in (2, 4, 5), f"{args}: {res.code} {res.err}"


@settings(FUZZ, max_examples=int(40 * SCALE))
@given(
    output=st.one_of(
        args_text,
        st.sampled_from(
            [
                "",
                ".",
                "..",
                "/proc/x",
                "spec.yaml",
                "spec.yaml/sub",
                "a/b/c",
                "[bold]d[/bold]",
                "\udcff",
                "/sys/fz-out",
                "n" * 256,
                "a/" + "n" * 300 + "/b",
            ]
        ),
    ),
    command=st.sampled_from(["render", "init"]),
    as_json=st.booleans(),
)
def test_fuzz_output_paths_leave_nothing_behind(work: Path, output: str, command: str, as_json: bool) -> None:
    case = work / f"case-{uuid.uuid4().hex[:8]}"
    case.mkdir()
    spec = case / "spec.yaml"
    assert invoke(["-s", str(spec), "init", "--profile", "offline", "--engine", "tansu"]).code == 0
    (case / "notes.txt").write_text("user data")
    before = _snapshot(case)
    flag = "--output-dir" if command == "render" else "-o"
    args = ["-s", str(spec), command, flag, output, *(["--json"] if as_json else [])]
    with _cwd(case):
        res = invoke(args)
    check_contract(args, res)
    after = _snapshot(case)
    # nothing it does not own is lost or changed, failing or not (init without --force overwrites nothing)
    assert {k: v for k, v in after.items() if k in before} == before, f"{args}: changed {_changed(before, after)}"
    if res.code != 0:
        assert after == before, f"{args}: left {set(after) - set(before)}"
    else:  # what is new is its output (and the directories leading to it), nothing else
        target = (case / output).resolve()
        strays = [k for k in set(after) - set(before) if not _owned(case / k, target)]
        assert not strays, f"{args}: wrote {strays} outside {target}"
    assert (case / "notes.txt").read_text() == "user data" and spec.is_file()


VOCAB = [
    "topic", "create", "list", "describe", "delete", "alter", "configs", "produce", "consume", "group", "reset",
    "zk", "ls", "get", "tree", "leader", "elect", "cluster",
    "-p", "-r", "-c", "-k", "-n", "-g", "-b", "--json", "--table", "--timeout", "--offset", "--partition",
    "--to-offset", "--execute", "--yes", "--all", "--topic", "--from-beginning", "--help", "--", "-s", "--debug",
]  # fmt: skip


@settings(FUZZ, max_examples=int(80 * SCALE))
@given(tokens=st.lists(st.one_of(st.sampled_from(VOCAB), args_text, ints.map(str)), max_size=7))
def test_fuzz_argv(work: Path, tansu_broker: TansuBroker, tokens: list[str]) -> None:
    """Arbitrary token soups (no docker-, image- or load-starting commands in the vocabulary)."""
    if any(t in ("up", "down", "images", "perf", "chaos", "scenario", "spark", "reassign") for t in tokens):
        return
    args = [*tokens, "-b", tansu_broker.bootstrap] if tokens[:1] in (["topic"], ["consume"], ["produce"]) else tokens
    if "--timeout" not in args and any(t in ("consume", "zk") for t in args):
        args = [*args, "--timeout", "0.2"]
    res = invoke(args)
    check_contract(args, res)


# ---------------------------------------------------------------- issue 32: signals, broken streams, user data

# values a user's topic may hold: controls, ESC sequences, markup, emoji codes, non-ASCII, invalid UTF-8
USER_DATA = st.one_of(
    st.text(alphabet=st.characters(blacklist_categories=["Cs"]), max_size=12),
    st.lists(
        st.sampled_from(["\x1b[31m", "\x1b]0;t\x07", "\r", "\n", "\x00", "\x7f", "\x9b", ":thumbs_up:", "[bold]",
                         "[/]", "ü", "€", "日本", "\t", "x", " "]),
        max_size=6,
    ).map("".join),
    st.binary(max_size=8),
)  # fmt: skip


def _escaped(value: str) -> str:
    """The output contract, written out independently: tab kept; C0, DEL, C1 as \\xNN; the rest as is."""
    return "".join(
        c if c == "\t" or not (ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F) else f"\\x{ord(c):02x}" for c in value
    )


@settings(FUZZ, max_examples=int(12 * SCALE))
@given(records=st.lists(st.tuples(st.one_of(st.none(), USER_DATA), USER_DATA), min_size=1, max_size=4))
def test_fuzz_user_data_is_printed_literally(
    work: Path, tansu_broker: TansuBroker, records: list[tuple[str | bytes | None, str | bytes]]
) -> None:
    """Whatever a record holds, `consume` shows it as text: escaped controls, no markup, no emoji; --json exact."""
    topic = f"fz-{uuid.uuid4().hex[:8]}"
    bs = ["-b", tansu_broker.bootstrap]
    assert invoke(["topic", "create", topic, *bs]).code == 0
    clients.produce(tansu_broker.bootstrap, topic, records)

    def text(v: str | bytes) -> str:
        return v.decode("utf-8", errors="replace") if isinstance(v, bytes) else v

    args = ["consume", topic, "--from-beginning", "-n", str(len(records)), "--timeout", "5", *bs]
    res = invoke(args)
    check_contract(args, res)
    expected = [
        f"partition=0 offset={i} key={_escaped(text(k)) if k is not None else '-'} value={_escaped(text(v))}"
        for i, (k, v) in enumerate(records)
    ]
    assert res.out.split("\n")[:-1] == expected, res.out
    res = invoke([*args, "--json"])
    assert [json.loads(ln)["value"] for ln in res.out.splitlines()] == [text(v) for _, v in records]


def _stop_command(name: str, topic: str, bootstrap: str, as_json: bool) -> tuple[list[str], bytes | None]:
    """A short command and its stdin (None: stdin is kept open, so the command waits for more)."""
    js = ["--json"] if as_json else []
    if name == "produce":
        return ["produce", topic, "-b", bootstrap, *js], None
    if name == "consume":
        gid = f"fzs-{uuid.uuid4().hex[:8]}"
        return ["consume", topic, "-g", gid, "--offset", "earliest", "--timeout", "2", "-b", bootstrap, *js], b""
    if name == "perf produce":
        return ["perf", "produce", topic, "-n", "400", "--throughput", "400", "-b", bootstrap, *js], b""
    if name == "perf e2e":
        return ["perf", "e2e", topic, "-n", "400", "--throughput", "400", "-b", bootstrap, *js], b""
    if name == "perf consume":  # 5 records there, 400 asked: it waits for more until the signal or its timeout
        return ["perf", "consume", topic, "-n", "400", "--no-group", "--timeout", "3", "-b", bootstrap, *js], b""
    return ["topic", "list", "-b", bootstrap, *js], b""


def _handlers_installed(pid: int) -> bool:
    """The process catches SIGTERM (clusterctl's stop handlers are in place: before that, Python's defaults)."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    return False


@settings(FUZZ, max_examples=int(16 * SCALE))
@given(
    sig=st.sampled_from(STOP_SIGNALS),
    name=st.sampled_from(["produce", "consume", "perf produce", "perf consume", "perf e2e", "topic list"]),
    delay=st.floats(0, 1.5),
    as_json=st.booleans(),
)
def test_fuzz_stop_signals_at_random_moments(
    work: Path, tansu_broker: TansuBroker, sig: signal.Signals, name: str, delay: float, as_json: bool
) -> None:
    """SIGINT, SIGTERM or SIGHUP at any moment of a short command: it finishes, or it stops with 128 + the signal
    and one line naming it; never killed outright, no traceback; --json stays JSON; nothing committed unprinted."""
    topic = _topic(tansu_broker, messages=5)
    args, stdin = _stop_command(name, topic, tansu_broker.bootstrap, as_json)
    started = time.monotonic()
    proc = subprocess.Popen(
        [str(CLUSTERCTL), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env()
    )
    assert proc.stdin is not None
    proc.stdin.write(stdin if stdin is not None else b"fz-1\nfz-2\n")
    proc.stdin.flush()
    if stdin is not None:
        proc.stdin.close()
        proc.stdin = None  # communicate() must not flush it
    deadline = time.monotonic() + 10
    while proc.poll() is None and not _handlers_installed(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.002)
    time.sleep(delay)
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(sig)
    out_b, err_b = proc.communicate(timeout=60)
    CASES.add(started)
    res = Outcome(proc.returncode, out_b.decode(), err_b.decode())
    check_contract(args, res)
    assert res.code in ((0, 128 + sig) if stdin is not None else (128 + sig,)), f"{args} {sig.name}: {res.err}"
    if res.code == 128 + sig:
        assert [ln for ln in res.err.splitlines() if ln.startswith("error: ")] == [f"error: interrupted by {sig.name}"]
    if name == "consume":
        gid = args[args.index("-g") + 1]
        assert _committed(tansu_broker.bootstrap, gid) <= _printed_records(res.out, as_json, False), res.out
    if name.startswith("perf") and res.code == 128 + sig:  # a partial result, once the run had begun (issue 51)
        if as_json:
            partial = json.loads(res.out).get("result")
            assert partial is None or (partial["interrupted"] is True and partial["topic"] == topic), res.out
        else:
            assert "partial result" in res.out or "Topic" not in res.out, res.out


@pytest.mark.parametrize(
    "args",
    [["scenario", "list"], ["scenario", "list", "--json"], ["scenario", "validate", "scenarios/short-pause.yaml"],
     ["--version"], ["topic", "--help"], ["init", "--profile", "offline", "--engine", "tansu", "-o", "{out}"]],
)  # fmt: skip
def test_a_reader_that_left_is_exit_74_with_one_line(args: list[str], tmp_path: Path) -> None:
    """`clusterctl ... | head -c0`: the pipe's reader is gone before the first write. Exit 74 and one line saying
    what was done (the adversarial tour of issue 51 found a silent exit 1 for every command)."""
    args = [a.format(out=tmp_path / "spec.yaml") for a in args]
    r, w = os.pipe()
    os.close(r)
    try:
        proc = subprocess.run([str(CLUSTERCTL), *args], stdout=w, stderr=subprocess.PIPE, text=True, timeout=60,
                              cwd=Path(__file__).resolve().parent.parent, env=_env())  # fmt: skip
    finally:
        os.close(w)
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert proc.returncode == 74, proc.stderr
    assert len(errors) == 1 and proc.stderr.splitlines()[-1] == errors[0], proc.stderr
    assert "stdout could not be written (its reader left: a broken pipe)" in errors[0], errors
    assert "Traceback" not in proc.stderr and "Exception ignored" not in proc.stderr, proc.stderr
    if args[0] == "init":  # the work was done, and the line says so: a retry need not repeat it
        assert (tmp_path / "spec.yaml").is_file() and "did its work" in errors[0], errors


@settings(FUZZ, max_examples=int(12 * SCALE))
@given(sig=st.sampled_from(STOP_SIGNALS), delay=st.floats(0, 0.25), as_json=st.booleans(), how=st.booleans())
def test_fuzz_a_stop_signal_while_the_command_starts(
    work: Path, sig: signal.Signals, delay: float, as_json: bool, how: bool
) -> None:
    """A stop signal once clusterctl's code runs but before the command's own handlers are in place (Python still
    importing it): 128 + N and the one line, `--json` its error object; no KeyboardInterrupt traceback (SIGINT) and
    no death without a word (SIGTERM, SIGHUP), as the adversarial tour of issue 51 found."""
    args = ["consume", "fz-start", "-b", "127.0.0.1:9", "--timeout", "60", *(["--json"] if as_json else [])]
    cmd = [str(CLUSTERCTL), *args] if how else [sys.executable, "-m", "clusterctl", *args]
    started = time.monotonic()
    proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
    deadline = time.monotonic() + 10
    while proc.poll() is None and not _handlers_installed(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.001)
    time.sleep(delay)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    CASES.add(started)
    shown = f"{cmd} {sig.name} after {delay:.3f}s: {proc.returncode}\n{err.decode()}"
    assert proc.returncode == 128 + sig, shown
    assert err.decode().splitlines() == [f"error: interrupted by {sig.name}"], shown
    if as_json:
        assert json.loads(out.decode().strip().splitlines()[-1]) == {
            "error": f"interrupted by {sig.name}", "exit_code": 128 + sig
        }, shown  # fmt: skip


def test_importing_clusterctl_keeps_the_importers_signals() -> None:
    """Only the clusterctl command takes the stop signals while it starts: a program importing the package (a test
    runner, tests/_forkcli.py) keeps its own."""
    code = "import signal, clusterctl; print([signal.getsignal(s) is signal.SIG_DFL for s in (15, 1)])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=_env())
    assert out.stdout.strip() == "[True, True]", out


STREAM_COMMANDS = [
    ["topic", "list"],
    ["topic", "describe", "{data}"],
    ["consume", "{data}", "-g", "{group}", "--offset", "earliest", "--timeout", "1"],
    ["consume", "{data}", "--from-beginning", "--timeout", "1", "--table"],
    ["produce", "{topic}"],
    ["topic", "describe", "fz-no-such-topic"],
    ["scenario", "list"],
    ["perf", "produce", "{topic}", "-n", "20"],
    ["perf", "consume", "{data}", "-n", "5", "--no-group", "--timeout", "2"],
    ["perf", "e2e", "{topic}", "-n", "5", "--timeout", "2"],
]


@settings(FUZZ, max_examples=int(24 * SCALE))
@given(
    stdout=st.sampled_from(["pipe", "closed", "/dev/full", "reader-left"]),
    stderr=st.sampled_from(["pipe", "closed", "/dev/full", "reader-left"]),
    encoding=st.sampled_from([None, "ascii", "latin-1", "utf-8"]),
    command=st.sampled_from(STREAM_COMMANDS),
    as_json=st.booleans(),
)
def test_fuzz_broken_streams_and_encodings(
    work: Path, tansu_broker: TansuBroker, stdout: str, stderr: str, encoding: str | None, command: list[str],
    as_json: bool,
) -> None:  # fmt: skip
    """stdout/stderr closed, full or a pipe whose reader left (`| head -c0`), any encoding: no traceback, never exit
    70; a command whose stdout failed does not exit 0 (74, or its own failure) and says so in one line (a reader
    that left was a silent exit 1 until the adversarial tour of issue 51); with a group, nothing is committed that
    was not printed."""
    bs = tansu_broker.bootstrap
    group = f"fzb-{uuid.uuid4().hex[:8]}"
    fill = {"data": _data_topic(tansu_broker), "topic": _topic(tansu_broker), "group": group}
    args = [w.format(**fill) for w in command]
    args += [] if args[0] == "scenario" else ["-b", bs]
    args += ["--json"] if as_json else []
    env = _env() | ({"PYTHONIOENCODING": encoding} if encoding else {})
    started = time.monotonic()
    with contextlib.ExitStack() as stack:
        fds: dict[str, Any] = {}
        for name, how in (("stdout", stdout), ("stderr", stderr)):
            if how == "reader-left":  # the pipe's read end is closed before the command writes a byte
                r, w = os.pipe()
                os.close(r)
                stack.callback(os.close, w)
                fds[name] = w
            else:
                fds[name] = subprocess.PIPE if how in ("pipe", "closed") else stack.enter_context(open(how, "wb"))

        def close_fds() -> None:
            for fd, how in ((1, stdout), (2, stderr)):
                if how == "closed":
                    os.close(fd)

        proc = subprocess.run([str(CLUSTERCTL), *args], input=b"fz\n", env=env, timeout=60, preexec_fn=close_fds, **fds)
    CASES.add(started)
    res = Outcome(proc.returncode, (proc.stdout or b"").decode("utf-8", "replace"), (proc.stderr or b"").decode())
    shown = f"{args} stdout={stdout} stderr={stderr} encoding={encoding}: {res.code}\n{res.out[-500:]}\n{res.err}"
    assert 0 <= res.code != cli.EX_SOFTWARE, shown
    if stderr == "pipe":
        assert "Traceback" not in res.err and "Exception ignored" not in res.err, shown
        errors = [ln for ln in res.err.splitlines() if ln.startswith("error: ")]
        assert len(errors) == (0 if res.code == 0 else 1), shown
    if stdout != "pipe":
        assert res.code != 0, shown  # every command here prints a result: losing it is never success
        if res.code == 74 and stderr == "pipe":
            assert "but stdout could not be written" in res.err or "the command stopped there" in res.err, shown
        if stdout == "reader-left" and stderr == "pipe" and res.code == 74:
            assert "its reader left" in res.err, shown
    elif as_json and res.code in (0, 74):
        _json_docs(res.out, shown)
    if stderr != "pipe" and stdout == "pipe" and args[0] == "consume":
        assert res.code == 74, shown  # its closing progress line was lost: not a success
    if "-g" in args:
        printed = _printed_records(res.out, as_json, False) if stdout == "pipe" else 0
        assert _committed(bs, group) <= printed, shown


_DATA = {"values": ["plain", "grüße", "\x1b[31mred\x1b[0m", ":thumbs_up: [bold]x[/bold]", "日本\r"]}


def _data_topic(broker: TansuBroker) -> str:
    """One topic of user data a terminal or an encoding may choke on."""
    key = f"{broker.bootstrap}/data"
    if key not in _TOPICS:
        name = f"fz-data-{uuid.uuid4().hex[:8]}"
        assert invoke(["topic", "create", name, "-b", broker.bootstrap]).code == 0
        clients.produce(broker.bootstrap, name, [(None, v) for v in _DATA["values"]])
        _TOPICS[key] = name
    return _TOPICS[key]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("CLUSTERCTL_BOOTSTRAP_SERVER", "COLUMNS")}


# ---------------------------------------------------------------- helpers

_TOPICS: dict[str, str] = {}


def _topic(broker: TansuBroker, messages: int = 0) -> str:
    """One shared 2-partition topic per purpose (created once: the fuzz cases must stay fast)."""
    key = f"{broker.bootstrap}/{messages}"
    if key not in _TOPICS:
        name = f"fz-{uuid.uuid4().hex[:8]}"
        assert invoke(["topic", "create", name, "-p", "2", "-b", broker.bootstrap]).code == 0
        if messages:
            body = "".join(f"m{i}\n" for i in range(messages)).encode()
            assert invoke(["produce", name, "-b", broker.bootstrap], body).code == 0
        _TOPICS[key] = name
    return _TOPICS[key]


def _printed_records(out: str, as_json: bool, table: bool) -> int:
    if as_json:
        return sum(1 for ln in out.splitlines() if ln.startswith("{") and '"offset"' in ln)
    if table:
        return sum(1 for ln in out.splitlines() if "│" in ln and "m" in ln.split("│")[-2])
    return sum(1 for ln in out.splitlines() if ln.startswith("partition="))


def _committed(bootstrap: str, group: str) -> int:
    """Offsets the group committed; a group that never committed is not found (0); any other error fails."""
    try:
        return sum(max(o.committed or 0, 0) for o in groups.describe_group(bootstrap, group).offsets)
    except NotFoundError:
        return 0


def _topic_names(bootstrap: str) -> set[str]:
    res = invoke(["topic", "list", "-b", bootstrap, "--json"])
    assert res.code == 0, res.err
    return {t["name"] for t in json.loads(res.out)}


def _changed(before: dict[str, bytes], after: dict[str, bytes]) -> list[str]:
    return sorted(k for k, v in before.items() if after.get(k) != v)


def _owned(path: Path, target: Path) -> bool:
    """`path` is the output `target`, inside it, or a directory created on the way to it."""
    p = path.resolve()
    return p == target or target in p.parents or (p.is_dir() and p in target.parents)


@contextlib.contextmanager
def _cwd(path: Path) -> Iterator[None]:
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def _snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else b"<dir>") for p in sorted(root.rglob("*"))}
