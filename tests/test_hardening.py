"""Issue 11: honest exit codes, no traceback, nothing lost — each case from the issue, through the real CLI.

Every test here runs `clusterctl` as a user would (a subprocess), against tansu on loopback where a
broker is needed. Ctrl-C is a real SIGINT sent to the process.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from _dataplane import CLUSTERCTL, run
from confluent_kafka.admin import AdminClient, NewTopic

from clusterctl.kafka import groups

pytestmark = pytest.mark.tansu


def one_error_line(proc: subprocess.CompletedProcess[str]) -> str:
    """The single `error:` line on stderr (and no traceback)."""
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error: ")]
    assert len(errors) == 1, proc.stderr
    return errors[0]


def make_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    res = run("topic", "create", name, "-p", str(partitions), "-b", bootstrap)
    assert res.returncode == 0, res.stderr


def committed(bootstrap: str, group: str) -> int:
    return sum(o.committed or 0 for o in groups.describe_group(bootstrap, group).offsets)


def popen(*args: str, stdin: int | None = None) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "CLUSTERCTL_BOOTSTRAP_SERVER"}
    env["COLUMNS"] = "200"
    return subprocess.Popen(
        [str(CLUSTERCTL), *args], stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def interrupt(proc: subprocess.Popen[str], timeout: float = 60) -> tuple[int, str, str]:
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def wait_until(predicate: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


# ---------------------------------------------------------------- data loss


def test_render_refuses_a_foreign_directory_and_keeps_the_spec(tmp_path: Path) -> None:
    spec = tmp_path / "clusterctl.yaml"
    assert run("-s", str(spec), "init", "--profile", "offline", "--engine", "tansu").returncode == 0
    (tmp_path / "notes.txt").write_text("mine")
    before = sorted(p.name for p in tmp_path.iterdir())
    res = run("-s", str(spec), "render", "--output-dir", str(tmp_path))
    assert res.returncode == 2, res.stderr
    assert "not written by clusterctl render" in one_error_line(res)
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert (tmp_path / "notes.txt").read_text() == "mine" and spec.is_file()

    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("keep")
    res = run("-s", str(spec), "render", "--output-dir", str(other))
    assert res.returncode == 2 and (other / "keep.txt").read_text() == "keep", res.stderr


def test_rerender_keeps_files_it_did_not_write(tmp_path: Path) -> None:
    spec = tmp_path / "clusterctl.yaml"
    assert run("-s", str(spec), "init", "--profile", "offline", "--engine", "tansu").returncode == 0
    out = tmp_path / "out"
    assert run("-s", str(spec), "render", "--output-dir", str(out)).returncode == 0
    (out / "notes.txt").write_text("mine")
    res = run("-s", str(spec), "render", "--output-dir", str(out))
    assert res.returncode == 0, res.stderr
    assert (out / "notes.txt").read_text() == "mine" and (out / "docker-compose.yml").is_file()


def test_produce_stops_at_the_first_bad_line_before_sending_it(bootstrap: str, unique_name: str) -> None:
    make_topic(bootstrap, unique_name)
    good = [f"k{i}:v{i}" for i in range(2000)]
    lines = [*good, "no-separator-here", *[f"k{i}:late{i}" for i in range(100)]]
    res = run("produce", unique_name, "-k", ":", "-b", bootstrap, stdin="\n".join(lines) + "\n")
    assert res.returncode == 2
    line = one_error_line(res)
    assert "line 2001" in line and "2000 earlier lines sent, 2000 delivered, 0 failed" in line
    assert "delivery summary" in res.stdout and "Sent         2000" in res.stdout
    # exactly the lines before the bad one are in the topic: nothing after it was sent
    got = run("consume", unique_name, "--from-beginning", "--timeout", "2", "--json", "-b", bootstrap)
    values = [json.loads(ln)["value"] for ln in got.stdout.splitlines()]
    assert values == [f"v{i}" for i in range(2000)]


def test_produce_json_failure_is_one_document_with_the_summary(bootstrap: str, unique_name: str) -> None:
    make_topic(bootstrap, unique_name)
    res = run("produce", unique_name, "-k", ":", "--json", "-b", bootstrap, stdin="a:1\nb:2\nbad\n")
    assert res.returncode == 2
    doc = json.loads(res.stdout)
    assert doc["exit_code"] == 2 and "line 3" in doc["error"]
    assert doc["result"]["sent"] == 2 and doc["result"]["delivered"] == 2 and doc["result"]["bad_line"] == 3


def test_produce_non_utf8_names_the_line(bootstrap: str, unique_name: str) -> None:
    make_topic(bootstrap, unique_name)
    proc = subprocess.run(
        [str(CLUSTERCTL), "produce", unique_name, "-b", bootstrap],
        input=b"ok\n\xff\xfe bad\nafter\n",
        capture_output=True,
        timeout=60,
    )
    err = proc.stderr.decode()
    assert proc.returncode == 2 and "Traceback" not in err
    assert "line 2: is not UTF-8" in err and "1 earlier lines sent, 1 delivered" in err


def test_oversize_message_is_reported_per_message(bootstrap: str, unique_name: str) -> None:
    make_topic(bootstrap, unique_name)
    big = "x" * 1_200_000  # over the producer's 1 MB message.max.bytes
    res = run("produce", unique_name, "-b", bootstrap, stdin=f"small\n{big}\nsmall2\n")
    assert res.returncode == 1
    line = one_error_line(res)
    assert "1 of 3 messages were not delivered" in line and "line 2: message of 1200000 bytes" in line
    assert "Delivered    2" in res.stdout


def test_consume_table_with_group_ctrl_c_prints_then_commits_exactly_that(bootstrap: str, unique_name: str) -> None:
    make_topic(bootstrap, unique_name)
    assert run("produce", unique_name, "-b", bootstrap, stdin="".join(f"m{i}\n" for i in range(25))).returncode == 0
    group = f"g-{unique_name}"
    proc = popen("consume", unique_name, "-g", group, "--table", "--timeout", "120", "-b", bootstrap)
    time.sleep(12)  # table mode prints nothing before the end; a group join + fetch takes ~3 s on tansu
    rc, out, err = interrupt(proc)
    assert rc == 130 and "interrupted" in err and "Traceback" not in err
    printed = [ln for ln in out.splitlines() if "│" in ln and " m" in ln]
    assert len(printed) == 25, out
    assert committed(bootstrap, group) == 25  # what was printed, no more


def test_consume_stream_with_group_ctrl_c_exits_130(bootstrap: str, unique_name: str) -> None:
    make_topic(bootstrap, unique_name)
    assert run("produce", unique_name, "-b", bootstrap, stdin="".join(f"m{i}\n" for i in range(10))).returncode == 0
    group = f"g-{unique_name}"
    proc = popen("consume", unique_name, "-g", group, "--timeout", "120", "-b", bootstrap)
    assert proc.stdout is not None
    shown = [proc.stdout.readline() for _ in range(10)]  # every message printed: then Ctrl-C
    assert all(ln.startswith("partition=") for ln in shown)
    rc, out, err = interrupt(proc)
    assert rc == 130 and "error: interrupted" in err and out == ""
    assert committed(bootstrap, group) == 10


def test_perf_produce_ctrl_c_exits_130_with_json_on_stdout(bootstrap: str, unique_name: str) -> None:
    proc = popen(
        "perf", "produce", unique_name, "-n", "100000000", "--throughput", "2000", "--json", "-b", bootstrap,
        "--reporting-interval", "1",
    )  # fmt: skip
    wait_until(lambda: run("topic", "describe", unique_name, "-b", bootstrap).returncode == 0, 60, "the topic")
    time.sleep(2)
    started = time.monotonic()
    rc, out, err = interrupt(proc)
    assert time.monotonic() - started < 30  # the producer was closed, not waited out
    assert rc == 130 and "error: interrupted" in err and "Traceback" not in err
    doc = json.loads(out)  # the partial result rides in the error object (the README promises it)
    assert (doc["error"], doc["exit_code"], doc["result"]["interrupted"]) == ("interrupted by SIGINT", 130, True)
    assert doc["result"]["delivered"] > 0 and doc["result"]["topic"] == unique_name


# ---------------------------------------------------------------- user data is never markup


def test_markup_in_topic_names_and_values_is_printed_literally(bootstrap: str, unique_name: str) -> None:
    # a topic Kafka's rule forbids but a broker may hold (created by another tool): listing must not crash
    odd = f"[/]{unique_name}"
    client = AdminClient({"bootstrap.servers": bootstrap})
    client.create_topics([NewTopic(odd, 1, 1)])[odd].result(15)
    listing = run("topic", "list", "-b", bootstrap)
    assert listing.returncode == 0, listing.stderr
    assert odd in listing.stdout

    make_topic(bootstrap, unique_name)
    assert run("produce", unique_name, "-b", bootstrap, stdin="[bold]x[/bold]\n").returncode == 0
    table = run("consume", unique_name, "--from-beginning", "--timeout", "2", "--table", "-b", bootstrap)
    assert table.returncode == 0 and "[bold]x[/bold]" in table.stdout


def test_markup_in_error_messages_is_printed_literally(tmp_path: Path) -> None:
    res = run("topic", "describe", "[/]", "-b", "127.0.0.1:1")
    assert res.returncode == 2 and "'[/]'" in one_error_line(res)
    missing = tmp_path / "[bold]x[/bold].yaml"
    res = run("-s", str(missing), "status")
    assert res.returncode == 3 and "[bold]x[/bold].yaml not found" in one_error_line(res)
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"name": "lab", "network": {"subnet": "[oops]"}}))
    res = run("-s", str(bad), "status")
    assert res.returncode == 2 and "[oops]" in one_error_line(res)
    bad.write_text(yaml.safe_dump({"name": "lab", "kafka": {"defaults": {"heap": "lots"}}}))
    res = run("-s", str(bad), "status")
    assert res.returncode == 2 and "[mMgG]" in one_error_line(res)  # a regex keeps its bracket class


# ---------------------------------------------------------------- one line, not a traceback


@pytest.mark.parametrize(
    "args",
    [
        ["topic", "list", "-b", "::::"],
        ["topic", "list", "-b", "host:notaport"],
        ["topic", "list", "-b", "localhost:99999"],
        ["zk", "status", "--zookeeper", "::::"],
        ["zk", "ls", "/", "--zookeeper", "host:notaport"],
        ["zk", "tree", "/", "--zookeeper", "localhost:99999"],
    ],
)
def test_malformed_addresses_are_refused_at_once(args: list[str]) -> None:
    res = run(*args)
    assert res.returncode == 2, res.stderr
    line = one_error_line(res)  # refused as an address, not tried (and blamed on the cluster) for 5 s
    assert "answered" not in line and ("host:port" in line or "port" in line)


def test_offset_beyond_64_bits_and_empty_key_separator(bootstrap: str, unique_name: str) -> None:
    make_topic(bootstrap, unique_name)
    res = run("consume", unique_name, "--offset", str(2**64), "-b", bootstrap)
    assert res.returncode == 2 and "64-bit" in one_error_line(res)
    res = run("produce", unique_name, "-k", "", "-b", bootstrap, stdin="a\n")
    assert res.returncode == 2 and "--key-separator must not be empty" in one_error_line(res)


def test_empty_and_unwritable_output_paths(tmp_path: Path) -> None:
    spec = tmp_path / "clusterctl.yaml"
    assert run("-s", str(spec), "init", "--profile", "offline", "--engine", "tansu").returncode == 0
    # an empty path and a path that cannot be written are bad input (2), for render and init alike
    for args, code in (
        (["render", "--output-dir", ""], 2),
        (["render", "--output-dir", "/proc/clusterctl-nope"], 2),
        (["render", "--output-dir", str(spec / "sub")], 2),
        (["init", "-o", ""], 2),
        (["init", "-o", "/proc/clusterctl-nope.yaml"], 2),
        (["init", "-o", str(spec / "x.yaml")], 2),
    ):
        res = run("-s", str(spec), *args)
        assert res.returncode == code, (args, res.returncode, res.stderr)
        one_error_line(res)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clusterctl.yaml"]


def test_unexpected_error_is_one_line_with_a_debug_pointer(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from clusterctl import cli
    from clusterctl.images import build as images

    def boom(*_a: object, **_k: object) -> None:
        raise RuntimeError("simulated bug")

    monkeypatch.setattr(images, "list_images", boom)  # cli/images.py imports it when the command runs
    assert cli.run(["images", "list"]) == cli.EX_SOFTWARE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "simulated bug" in err and "--debug" in err and "Traceback" not in err
    assert cli.run(["--debug", "images", "list", "--json"]) == cli.EX_SOFTWARE
    captured = capsys.readouterr()
    assert "Traceback" in captured.err and json.loads(captured.out)["exit_code"] == cli.EX_SOFTWARE


def test_typer_exit_code_inside_a_command_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`logs` when docker compose fails: compose's own status, not 0."""
    spec = tmp_path / "clusterctl.yaml"
    assert run("-s", str(spec), "init", "--profile", "offline", "--engine", "tansu").returncode == 0
    out = tmp_path / "compose" / "kafka-lab"  # the spec's default compose dir, relative to the cwd
    assert run("-s", str(spec), "render", "--output-dir", str(out)).returncode == 0
    compose = out / "docker-compose.yml"
    compose.write_text("services: [this is not a compose file\n")
    monkeypatch.chdir(tmp_path)
    res = run("-s", str(spec), "logs")
    line = one_error_line(res)
    assert "docker compose logs exited with status" in line
    assert res.returncode == int(line.rsplit("status ", 1)[1].split()[0]) != 0, (res.returncode, line)


# ---------------------------------------------------------------- accepted when it should not be


@pytest.mark.parametrize("name", ["has space", "x" * 250, ".", "..", "a/b", "", "ünï"])
def test_topic_names_kafka_forbids_are_refused_before_any_request(bootstrap: str, name: str) -> None:
    res = run("topic", "create", name, "-b", bootstrap)
    assert res.returncode == 2
    assert "topic name" in one_error_line(res)
    assert name not in [t["name"] for t in json.loads(run("topic", "list", "--json", "-b", bootstrap).stdout)]


def test_topic_name_of_249_chars_is_accepted(bootstrap: str) -> None:
    name = "t" * 240 + os.urandom(4).hex() + "x"
    res = run("topic", "create", name, "-b", bootstrap)
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("args", [["-p", "0"], ["-r", "0"], ["-p", "-2"], ["-r", "-5"]])
def test_partitions_and_rf_must_be_positive_or_minus_one(bootstrap: str, unique_name: str, args: list[str]) -> None:
    res = run("topic", "create", unique_name, *args, "-b", bootstrap)
    assert res.returncode == 2 and "at least 1 or -1" in one_error_line(res)
    assert unique_name not in run("topic", "list", "-b", bootstrap).stdout


@pytest.mark.parametrize(
    "args",
    [
        ["consume", "t", "--timeout", "-1"],
        ["zk", "status", "--timeout", "-1"],
        ["zk", "ls", "/", "--timeout", "-0.5"],
        ["up", "--timeout", "-3"],
        ["chaos", "pause-broker", "1", "--for", "-1"],
        ["perf", "consume", "t", "-n", "1", "--timeout", "-1"],
        ["consume", "t", "--timeout", "nan"],
    ],
)
def test_negative_timeouts_are_refused(args: list[str]) -> None:
    res = run(*args, "-b", "127.0.0.1:1") if args[0] in ("consume", "perf") else run(*args)
    assert res.returncode == 2
    assert "seconds must be" in one_error_line(res)


def test_empty_spec_file_is_refused(tmp_path: Path) -> None:
    spec = tmp_path / "empty.yaml"
    spec.write_text("")
    res = run("-s", str(spec), "render")
    assert res.returncode == 2 and "empty" in one_error_line(res)
    assert list(tmp_path.iterdir()) == [spec]


def test_json_failure_is_an_error_object_on_stdout() -> None:
    for args, code in (
        (["topic", "list", "-b", "h:0", "--json"], 2),
        (["topic", "create", "--json"], 2),  # a usage error from the argument parser
        (["topic", "list", "-b", "127.0.0.1:1", "--json"], 4),  # nothing listens there
    ):
        res = run(*args)
        assert res.returncode == code, res.stderr
        doc = json.loads(res.stdout)
        assert doc["exit_code"] == code and doc["error"]
        one_error_line(res)


def test_partition_beyond_32_bits_is_one_line(bootstrap: str, unique_name: str) -> None:
    make_topic(bootstrap, unique_name)
    for args in (
        ["leader", "elect", "--topic", unique_name, "--partition", str(2**40)],
        ["consume", unique_name, "-p", str(2**40)],
        ["produce", unique_name, "-p", str(2**40)],
    ):
        res = run(*args, "-b", bootstrap, stdin="")
        assert res.returncode == 2 and "--partition must be between 0 and" in one_error_line(res)


@pytest.mark.parametrize(
    "args",
    [
        ["zk", "status", "--zookeeper", ""],
        ["zk", "status", "--zookeeper", "x"],
        ["ui", "--zookeeper", "", "-b", "127.0.0.1:9", "--print-url"],
        ["ui", "--zookeeper", "x:y", "-b", "127.0.0.1:9", "--print-url"],
    ],
    ids=["zk-status-empty", "zk-status-no-port", "ui-empty", "ui-bad-port"],
)
def test_a_bad_zookeeper_address_is_one_line_exit_2(args: list[str], tmp_path: Path) -> None:
    """An empty --zookeeper is a bad address, not "use the spec" (there is none here: that would be exit 3)."""
    res = subprocess.run([str(CLUSTERCTL), *args], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert res.returncode == 2, res
    assert res.stdout == "" and res.stderr.startswith("error: --zookeeper:") and res.stderr.count("\n") == 1, res
