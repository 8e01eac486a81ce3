"""Every input has a bound a user can read in --help; past it, one line and exit 2 before any work.

Issue 32's examples, each through the real CLI: an alias-bomb scenario or spec, a spec too large to
parse, 100000 partitions, a 1e11-byte record, nan/inf for any float option, an endless line to produce.
"""

from __future__ import annotations

import contextlib
import io
import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, get_args

import pytest
import typer
import yaml
from _dataplane import CLUSTERCTL, run

from clusterctl import cli
from clusterctl.errors import SpecError
from clusterctl.spec import validate, yamlfile
from clusterctl.spec.model import parse_spec

NOWHERE = ["-b", "127.0.0.1:1"]  # a bound must be refused before any broker is asked


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr
    errors = [ln for ln in proc.stderr.splitlines() if ln.startswith("error: ")]
    assert len(errors) == 1, proc.stderr
    return errors[0]


def refused(*args: str, match: str, timeout: float = 30) -> None:
    started = time.monotonic()
    res = run(*args, timeout=timeout)
    assert res.returncode == 2, (res.returncode, res.stderr)
    assert match in one_error_line(res), res.stderr
    assert time.monotonic() - started < timeout


def laughs(levels: int = 9, width: int = 9) -> str:
    """The "billion laughs" as one flow list: each anchor a list of `width` aliases of the one before."""
    items = [f"&l0 [{', '.join(['lol'] * width)}]"]
    items += [f"&l{i} [{', '.join([f'*l{i - 1}'] * width)}]" for i in range(1, levels)]
    return f"[{', '.join(items)}]"


# ---------------------------------------------------------------- YAML: aliases, nesting, size


def test_alias_bomb_scenario_is_refused_at_once(tmp_path: Path) -> None:
    """Issue 32: this (under 500 bytes) ran 111 s into a MemoryError while its step was checked."""
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text(f"name: bomb\nsteps:\n  - {{sleep: {laughs()}}}\n")
    assert len(bomb.read_bytes()) < 500
    refused("scenario", "validate", str(bomb), match="alias bomb", timeout=20)


def test_alias_bomb_spec_is_refused_at_once(tmp_path: Path) -> None:
    spec = tmp_path / "clusterctl.yaml"
    spec.write_text(f"name: lab\nkafka: {{brokers: {laughs()}}}\n")
    refused("-s", str(spec), "render", match="alias bomb", timeout=20)


def test_spec_larger_than_the_bound_is_refused_before_parsing(tmp_path: Path) -> None:
    spec = tmp_path / "clusterctl.yaml"
    filler = "# " + "x" * 78 + "\n"
    spec.write_text("name: lab\nprofile: offline\n" + filler * (yamlfile.MAX_YAML_BYTES // len(filler) + 1))
    refused("-s", str(spec), "render", match="larger than 1024 KiB")
    assert not (tmp_path / "compose").exists()


def test_scenario_larger_than_the_bound_is_refused(tmp_path: Path) -> None:
    sc = tmp_path / "big.yaml"
    sc.write_text("name: big\nsteps:\n" + "  - {sleep: 0.1}\n" * (yamlfile.MAX_YAML_BYTES // 16 + 1))
    refused("scenario", "validate", str(sc), match="larger than 1024 KiB")


@pytest.mark.parametrize(
    "doc, match",
    [
        ("a: &a [*a]\n", "refers to itself"),
        ("[" * 200 + "]" * 200, "nests deeper"),
        (
            "a: &a [[[[[[[[[[1]]]]]]]]]]\n"
            + "".join(f"b{i}: &b{i} [*{'a' if i == 0 else f'b{i - 1}'}]\n" for i in range(60)),
            "nests deeper",
        ),
    ],
)
def test_recursive_and_deep_documents_are_refused(doc: str, match: str) -> None:
    with pytest.raises(SpecError, match=match):
        yamlfile.load_text(doc, "doc")


def test_anchors_within_the_bound_still_work() -> None:
    doc = "base: &b {replication_factor: 1, min_insync_replicas: 1}\nkafka: {brokers: 1, defaults: *b}\nname: lab\n"
    data = yamlfile.load_text(doc, "doc")
    assert data["kafka"]["defaults"] == {"replication_factor": 1, "min_insync_replicas": 1}
    assert yamlfile.load_text(laughs(levels=3), "doc")[2][0][0][0] == "lol"  # 9*9*9 nodes: fine


# ---------------------------------------------------------------- counts and sizes


def test_partitions_past_the_bound_are_refused_for_create_and_alter() -> None:
    refused("topic", "create", "t", "-p", "100000", *NOWHERE, match="at most 4096")
    refused("topic", "alter", "t", "-p", "4097", *NOWHERE, match="at most 4096")
    refused("topic", "create", "t", "-r", "17", *NOWHERE, match="at most 16")
    with pytest.raises(SpecError, match="partitions"):
        parse_spec({"name": "lab", "kafka": {"defaults": {"partitions": 100_000}}})


def test_perf_sizes_are_checked_before_allocating() -> None:
    refused("perf", "produce", "t", "-n", "1", "--record-size", "100000000000", *NOWHERE, match="at most 999964")
    refused("perf", "produce", "t", "-n", "2000000000", *NOWHERE, match="at most 1000000000")
    refused("perf", "produce", "t", "-n", "1", "--throughput", "2e7", *NOWHERE, match="at most 10000000")
    refused("perf", "consume", "t", "-n", "1", "--threads", "65", *NOWHERE, match="at most 64")
    refused("consume", "t", "--max-messages", "1000000001", *NOWHERE, match="at most 1000000000")
    refused("chaos", "pause-broker", "1", "--for", "86401", match="at most 86400")


def _float_options() -> list[tuple[list[str], str]]:
    """(command path, option) for every float option of every command."""
    found = []

    def walk(command: Any, path: list[str]) -> None:
        for name, sub in (getattr(command, "commands", None) or {}).items():
            walk(sub, [*path, name])
        for p in command.params if not getattr(command, "commands", None) else []:
            annotation = p.type_descriptor.annotation if p.type_descriptor else None
            if p.param_type_name == "option" and (annotation is float or float in get_args(annotation)):
                found.append((path, p.opts[0]))

    walk(typer.main.get_command(cli.build_app()), [])
    return found


def test_every_float_option_refuses_nan_and_inf() -> None:
    options = _float_options()
    assert (["perf", "produce"], "--throughput") in options and len(options) >= 12
    for path, opt in options:
        for value in ("nan", "inf", "-inf"):
            err = io.StringIO()
            with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
                code = cli.run([*path, opt, value])
            lines = [ln for ln in err.getvalue().splitlines() if ln.startswith("error: ")]
            assert code == 2 and len(lines) == 1 and "finite" in lines[0], (path, opt, value, err.getvalue())


def test_bounds_are_in_help() -> None:
    for args, text in (
        (["topic", "create"], "4096"),
        (["perf", "produce"], "1000000000"),
        (["perf", "produce"], "message.max.bytes"),
        (["produce"], "message.max.bytes"),
        (["chaos", "pause-broker"], "at most a day"),
    ):
        res = run(*args, "--help")
        assert res.returncode == 0 and text in " ".join(res.stdout.split()), (args, res.stdout)


# ---------------------------------------------------------------- produce: one endless line


@pytest.mark.tansu
def test_endless_line_to_produce_is_read_in_bounded_chunks(bootstrap: str, unique_name: str) -> None:
    """A 200 MB line with no end in sight: counted as not delivered, the next line still goes, memory flat."""
    assert run("topic", "create", unique_name, "-b", bootstrap).returncode == 0
    env = {k: v for k, v in os.environ.items() if k != "CLUSTERCTL_BOOTSTRAP_SERVER"}
    proc = subprocess.Popen(
        [str(CLUSTERCTL), "produce", unique_name, "-b", bootstrap],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    big = 200 * 1024 * 1024

    def feed() -> None:
        assert proc.stdin is not None
        with contextlib.suppress(BrokenPipeError):
            chunk = b"x" * (1024 * 1024)
            for _ in range(big // len(chunk)):
                proc.stdin.write(chunk)
            proc.stdin.write(b"\nafter\n")
        proc.stdin.close()

    writer = threading.Thread(target=feed)
    writer.start()
    # VmHWM after exec: wait4's ru_maxrss would also count the forked copy of this (possibly large) pytest worker
    peak_kib = 0
    while proc.poll() is None:
        with contextlib.suppress(OSError, ValueError):
            status = Path(f"/proc/{proc.pid}/status").read_text()
            # a process that has exited but is not reaped yet (a zombie) has no Vm* lines
            if "VmHWM:" in status:
                peak_kib = max(peak_kib, int(status.split("VmHWM:")[1].split()[0]))
        time.sleep(0.02)
    writer.join()
    assert proc.stderr is not None and proc.stdout is not None
    err, out = proc.stderr.read().decode(), proc.stdout.read().decode()
    assert proc.returncode == 1, err
    assert f"line 1: message of {big} bytes is larger than a record may be ({validate.MAX_RECORD_BYTES}" in err
    assert "Delivered    1" in out
    assert 0 < peak_kib < 200 * 1024, f"peak RSS {peak_kib} KiB"


def test_read_lines_never_holds_more_than_the_bound() -> None:
    from clusterctl.kafka.clients import Oversize, read_lines

    class Stream(io.RawIOBase):
        """One line of `size` bytes then "ok"; records the largest read it was asked for."""

        def __init__(self, size: int) -> None:
            self.left, self.tail, self.asked = size, io.BytesIO(b"\nok\n"), 0

        def readline(self, limit: int | None = -1) -> bytes:
            assert limit is not None and limit > 0  # never "the whole line, however long"
            self.asked = max(self.asked, limit)
            if not self.left:
                return self.tail.readline(limit)
            n = min(limit, self.left)
            self.left -= n
            return b"y" * n

    s = Stream(5 * validate.MAX_MESSAGE_BYTES)
    got = list(read_lines(s))  # type: ignore[arg-type]
    assert got == [Oversize(5 * validate.MAX_MESSAGE_BYTES), b"ok"]
    assert s.asked <= validate.MAX_RECORD_BYTES + 2
    assert list(read_lines(io.BytesIO(b"a\r\n\nb")))[:3] == [b"a", b"", b"b"]
    exact = b"z" * validate.MAX_RECORD_BYTES  # a record's bound: message.max.bytes less librdkafka's overhead
    assert list(read_lines(io.BytesIO(exact + b"\n" + exact + b"z\n"))) == [exact, Oversize(len(exact) + 1)]


def test_yaml_dump_roundtrip_unchanged() -> None:
    """Plain documents load exactly as PyYAML's safe_load would load them."""
    doc = {"name": "lab", "kafka": {"brokers": 3, "defaults": {"partitions": 6}}, "list": [1, "two", None, 3.5]}
    assert yamlfile.load_text(yaml.safe_dump(doc), "doc") == doc
