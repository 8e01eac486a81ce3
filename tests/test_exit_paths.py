"""Issue 32: SIGTERM and SIGHUP stop a command as Ctrl-C does; a write that fails is exit 74 with the work's
outcome; user data reaches stdout literally (no emoji codes, no markup, control characters escaped); and
nothing is committed that could not be printed. Through the real console script, against tansu."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _dataplane import CLUSTERCTL, run

from clusterctl import output
from clusterctl.compose.writer import STAGING_PREFIX
from clusterctl.errors import NotFoundError
from clusterctl.kafka import clients, groups

pytestmark = pytest.mark.tansu

EX_IOERR = 74


def cli(*args: str, stdin: bytes = b"", env: dict[str, str] | None = None, **fds: object) -> tuple[int, str, str]:
    """The console script with stdout/stderr wired as given (`stdout=`/`stderr=`: a file, or -1 to close it)."""
    full_env = {k: v for k, v in os.environ.items() if k != "CLUSTERCTL_BOOTSTRAP_SERVER"} | (env or {})
    closing = {name: fds.get(name) == -1 for name in ("stdout", "stderr")}
    streams = {name: (subprocess.PIPE if fds.get(name) in (None, -1) else fds[name]) for name in closing}

    def close_fds() -> None:  # `>&-` / `2>&-` in the child, after the pipes are set up
        for fd, name in ((1, "stdout"), (2, "stderr")):
            if closing[name]:
                os.close(fd)

    proc = subprocess.run(
        [str(CLUSTERCTL), *args], input=stdin, env=full_env, timeout=90, preexec_fn=close_fds, **streams
    )  # type: ignore[call-overload]
    return proc.returncode, (proc.stdout or b"").decode(), (proc.stderr or b"").decode()


def make_topic(bootstrap: str, name: str, values: list[str]) -> None:
    assert run("topic", "create", name, "-b", bootstrap).returncode == 0
    if values:
        clients.produce(bootstrap, name, [(None, v) for v in values])


def committed(bootstrap: str, group: str) -> int:
    try:
        return sum(max(o.committed or 0, 0) for o in groups.describe_group(bootstrap, group).offsets)
    except NotFoundError:
        return 0


def error_lines(err: str) -> list[str]:
    assert "Traceback" not in err, err
    return [ln for ln in err.splitlines() if ln.startswith("error: ")]


# ---------------------------------------------------------------- offsets and output that match


@pytest.mark.parametrize("target", ["closed", "/dev/full"])
def test_consume_with_a_group_commits_nothing_it_could_not_print(bootstrap: str, unique_name: str, target: str) -> None:
    make_topic(bootstrap, unique_name, [f"m{i}" for i in range(5)])
    group = f"g-{unique_name}"
    args = ("consume", unique_name, "-g", group, "--offset", "earliest", "--timeout", "5", "-b", bootstrap)
    with open(os.devnull if target == "closed" else target, "wb") as out:
        code, _, err = cli(*args, stdout=-1 if target == "closed" else out)
    assert code == EX_IOERR, err
    (line,) = error_lines(err)
    reason = "stdout is closed" if target == "closed" else "No space left on device"
    assert line == (
        f"error: printed 0 messages from {unique_name}, group {group} commits only those, "
        f"but stdout could not be written ({reason})"
    )
    assert committed(bootstrap, group) == 0


def test_consume_prints_values_literally_and_escapes_control_characters(bootstrap: str, unique_name: str) -> None:
    values = [":thumbs_up: ok", "[bold]x[/bold]", "red \x1b[31mALERT\x1b[0m", "title \x1b]0;pwned\x07", "cr\rover"]
    make_topic(bootstrap, unique_name, values)
    for mode in ((), ("--table",)):
        code, out, err = cli("consume", unique_name, "--from-beginning", "--timeout", "3", *mode, "-b", bootstrap)
        assert code == 0, err
        assert ":thumbs_up: ok" in out and "👍" not in out and "[bold]x[/bold]" in out
        assert "\x1b" not in out and "\x07" not in out and "\r" not in out
        assert "red \\x1b[31mALERT\\x1b[0m" in out and "title \\x1b]0;pwned\\x07" in out and "cr\\x0dover" in out
    # --json keeps the data exact (JSON escapes the control characters itself)
    code, out, _ = cli("consume", unique_name, "--from-beginning", "--timeout", "3", "--json", "-b", bootstrap)
    assert code == 0 and [json.loads(ln)["value"] for ln in out.splitlines()] == values


def test_every_printer_escapes_control_characters_in_user_data(capsys: pytest.CaptureFixture[str]) -> None:
    """Names and data from a cluster (group ids, znode data, topic names another tool made) reach a terminal
    only through the output layer: tables, key/value panels, plain text, progress and error lines."""
    evil = "g\x1b[2J\x1b]0;title\x07\x9b1m\udcff"
    shown = "g\\x1b[2J\\x1b]0;title\\x07\\x9b1m\\udcff"
    rows = [{"group": evil, "state": "Stable"}]
    output.emit(rows, as_json=False, columns=[output.Column("Group", "group"), output.Column("State", "state")])
    output.emit(rows[0], as_json=False, kv=[output.Column("Group", "group")], title=evil)
    output.emit(f"data: {evil}\nline two", as_json=False)
    output.info(f"progress {evil}")
    output.error_line(f"no group {evil}")
    out, err = capsys.readouterr()
    for text in (out, err):
        assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text and "\udcff" not in text
    assert out.count(shown) == 4 and "line two" in out  # table, panel title and value, plain text
    assert f"progress {shown}" in err and f"error: no group {shown}" in err
    output.print_json(rows)  # JSON escapes them itself, and keeps the data exact
    assert json.loads(capsys.readouterr().out) == rows


# ---------------------------------------------------------------- writes that fail


@pytest.mark.parametrize("as_json", [False, True])
def test_produce_that_delivered_says_so_when_stdout_is_full(bootstrap: str, unique_name: str, as_json: bool) -> None:
    make_topic(bootstrap, unique_name, [])
    with open("/dev/full", "wb") as full:
        code, _, err = cli(
            "produce", unique_name, "-b", bootstrap, *(["--json"] if as_json else []), stdin=b"a\nb\nc\n", stdout=full
        )
    assert code == EX_IOERR, err
    (line,) = error_lines(err)
    assert line == (
        f"error: produced 3 messages to {unique_name}: 3 delivered, 0 failed, "
        "but stdout could not be written (No space left on device)"
    )
    got = list(clients.consume(bootstrap, unique_name, start="beginning", max_messages=3, timeout=10))
    assert [r.value for r in got] == ["a", "b", "c"]


def test_an_encoding_that_cannot_carry_the_data_stops_before_committing(bootstrap: str, unique_name: str) -> None:
    make_topic(bootstrap, unique_name, ["plain", "grüße", "after"])
    group = f"g-{unique_name}"
    code, out, err = cli(
        "consume", unique_name, "-g", group, "--offset", "earliest", "--timeout", "3", "-b", bootstrap,
        env={"PYTHONIOENCODING": "ascii"},
    )  # fmt: skip
    assert code == EX_IOERR, err
    (line,) = error_lines(err)
    assert f"printed 1 messages from {unique_name}, group {group} commits only those" in line
    assert "(its encoding ascii cannot carry '\\xfc\\xdf'; set PYTHONIOENCODING=utf-8)" in line  # stderr: escaped
    assert out.splitlines() == ["partition=0 offset=0 key=- value=plain"]
    assert committed(bootstrap, group) == 1  # the printed one, not the one that could not be shown


def test_stderr_that_cannot_be_written_keeps_the_work_and_says_74(bootstrap: str, unique_name: str) -> None:
    make_topic(bootstrap, unique_name, ["m0", "m1"])
    with open("/dev/full", "wb") as full:
        code, out, _ = cli("consume", unique_name, "--from-beginning", "--timeout", "2", "-b", bootstrap, stderr=full)
    assert code == EX_IOERR  # the records are on stdout; the progress line was lost
    assert [ln.split("value=")[1] for ln in out.splitlines()] == ["m0", "m1"]
    code, out, _err = cli("topic", "list", "-b", bootstrap, "--json", stderr=-1)
    assert code == 0 and unique_name in out  # nothing was lost: nothing was written there


# ---------------------------------------------------------------- SIGTERM and SIGHUP as Ctrl-C


def spawn(*args: str, stdin: int | None = None) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "CLUSTERCTL_BOOTSTRAP_SERVER"} | {"COLUMNS": "200"}
    return subprocess.Popen(
        [str(CLUSTERCTL), *args], stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def stop(proc: subprocess.Popen[str], sig: signal.Signals) -> tuple[int, str, str]:
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out, err


STOPS = [(signal.SIGTERM, 143), (signal.SIGHUP, 129)]


@pytest.mark.parametrize(("sig", "code"), STOPS, ids=["SIGTERM", "SIGHUP"])
def test_consume_with_a_group_stopped_by_a_signal(
    bootstrap: str, unique_name: str, sig: signal.Signals, code: int
) -> None:
    make_topic(bootstrap, unique_name, [f"m{i}" for i in range(10)])
    group = f"g-{unique_name}"
    proc = spawn("consume", unique_name, "-g", group, "--offset", "earliest", "--timeout", "120", "-b", bootstrap)
    assert proc.stdout is not None
    shown = [proc.stdout.readline() for _ in range(10)]
    assert all(ln.startswith("partition=") for ln in shown)
    rc, _out, err = stop(proc, sig)
    assert rc == code and error_lines(err) == [f"error: interrupted by {sig.name}"]
    assert committed(bootstrap, group) == 10
    desc = groups.describe_group(bootstrap, group)
    assert desc.members == [], desc  # it left the group: no member is left behind


@pytest.mark.parametrize(("sig", "code"), STOPS, ids=["SIGTERM", "SIGHUP"])
def test_perf_produce_stopped_by_a_signal_prints_its_json(
    bootstrap: str, unique_name: str, sig: signal.Signals, code: int
) -> None:
    proc = spawn("perf", "produce", unique_name, "-n", "100000000", "--throughput", "2000", "--json", "-b", bootstrap)
    deadline = time.monotonic() + 60
    while run("topic", "describe", unique_name, "-b", bootstrap).returncode != 0:
        assert time.monotonic() < deadline, "the topic"
        time.sleep(0.3)
    time.sleep(2)
    rc, out, err = stop(proc, sig)
    assert rc == code and error_lines(err) == [f"error: interrupted by {sig.name}"]
    doc = json.loads(out)  # the partial result rides in the error object
    assert (doc["error"], doc["exit_code"]) == (f"interrupted by {sig.name}", code)
    partial = doc["result"]
    assert partial["interrupted"] is True and partial["topic"] == unique_name and partial["delivered"] > 0
    assert partial["delivered"] + partial["failed"] <= 100_000_000


@pytest.mark.parametrize(("sig", "code"), STOPS, ids=["SIGTERM", "SIGHUP"])
def test_produce_stopped_by_a_signal_reports_what_was_delivered(
    bootstrap: str, unique_name: str, sig: signal.Signals, code: int
) -> None:
    make_topic(bootstrap, unique_name, [])
    proc = spawn("produce", unique_name, "--json", "-b", bootstrap, stdin=subprocess.PIPE)
    assert proc.stdin is not None
    proc.stdin.write("a\nb\nc\n")
    proc.stdin.flush()  # stdin stays open: produce waits for more lines
    deadline = time.monotonic() + 30
    while len(list(clients.consume(bootstrap, unique_name, start="beginning", max_messages=3, timeout=1))) < 3:
        assert time.monotonic() < deadline, "the three messages"
    rc, out, err = stop(proc, sig)
    assert rc == code and error_lines(err) == [f"error: interrupted by {sig.name}"]
    doc = json.loads(out)
    assert doc["exit_code"] == code and doc["result"]["sent"] == 3 and doc["result"]["delivered"] == 3


def test_render_stopped_by_sigterm_removes_its_staging_dir(tmp_path: Path) -> None:
    """The staging directory (it holds the console secret) lives inside the target; SIGTERM removes it and
    leaves nothing rendered, nor anything in TMPDIR."""
    spec = tmp_path / "clusterctl.yaml"
    assert run("-s", str(spec), "init", "--profile", "offline", "--engine", "tansu").returncode == 0
    tmp, out = tmp_path / "tmp", tmp_path / "out"
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "CLUSTERCTL_BOOTSTRAP_SERVER"} | {"TMPDIR": str(tmp)}
    proc = subprocess.Popen(
        [str(CLUSTERCTL), "-s", str(spec), "render", "--output-dir", str(out)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    )  # fmt: skip
    deadline = time.monotonic() + 30
    while not list(out.glob(f"{STAGING_PREFIX}*/docker-compose.yml")):  # staged: `docker compose config` next
        assert proc.poll() is None and time.monotonic() < deadline, "the staging directory"
        time.sleep(0.005)
    rc, _out, err = stop(proc, signal.SIGTERM)
    assert rc == 143 and error_lines(err) == ["error: interrupted by SIGTERM"]
    assert list(tmp.iterdir()) == []
    assert not out.exists() or list(out.iterdir()) == []
    assert not (tmp_path / "out" / "docker-compose.yml").exists()  # a stopped render changes nothing


def test_main_called_in_process_raises_system_exit_after_a_perf_command_set_its_skip_flag(tmp_path: Path) -> None:
    """`perf produce` in-process sets 'skip the interpreter's teardown' for its own process; a later in-process
    main() (a test worker's next test) must still end in SystemExit, not os._exit: CI lost an xdist worker so."""
    code = (
        "import sys\n"
        "from clusterctl.cli import main\n"
        "from clusterctl.cli.common import skip_interpreter_teardown\n"
        "skip_interpreter_teardown()\n"
        f"sys.argv = ['clusterctl', '-s', {str(tmp_path / 'nope.yaml')!r}, 'render']\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as exc:\n"
        "    print(f'SystemExit {exc.code}', flush=True)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert res.stdout == "SystemExit 3\n", (res.returncode, res.stdout, res.stderr)
