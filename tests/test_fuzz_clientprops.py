"""Generated librdkafka property maps through every command that takes them (issue 51: native crashes are ours).

`perf produce --producer-prop`, `perf consume --consumer-prop`, `perf e2e` (both) and `spark run --option kafka.*`
get maps of 1 to 4 properties. Names come from librdkafka's own property table (what the wheel's librdkafka
prints about itself), plus names it does not have; values are of two classes:

- *refused*: an unknown name, a property of the other role, one set only through the C API (callbacks), one of
  the policy list (native code, a command, signals), an integer past its range, a wrong type, an empty name
  (`group.id=`), control characters, a value over 64 KiB, a file property naming a device, a FIFO or a
  directory. One of them in a map: exit 2 and one line naming the option, before any client exists.
- *kept*: a property at librdkafka's own default. The command runs against tansu: 0, or a documented failure.

Every case runs in a child forked from a server that imported clusterctl once (tests/_forkcli.py), so a
segmentation fault or a SIGKILL is seen as what it is (exit -11, -9) and a hang as SIGALRM. Before this pass,
`--consumer-prop group.id=` was exit 139 (134 with --engine client), `internal.termination.signal=9` exit 137,
`api.version.request=false` with `broker.version.fallback=0.8.0` a consume that hung past its --timeout, a FIFO
as `ssl.ca.location` an rd_kafka_new that no signal could stop, and `error_cb=x` exit 70.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from _fuzz import Tally, report_fixture
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from clusterctl.kafka import admin, clientprops
from clusterctl.testing.tansu import TansuBroker

pytestmark = pytest.mark.tansu

CASES = Tally()
SCALE = float(os.environ.get("CLUSTERCTL_FUZZ_SCALE", "1"))
FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
                database=None)  # fmt: skip
HERE = Path(__file__).resolve().parent
DOCUMENTED = {0, 1, 2, 3, 4, 5}  # ok, failed, bad input, not found, unreachable, timed out
TABLE = clientprops.table()
ROLES = {"P": "producer", "C": "consumer"}

report_count = report_fixture(CASES, "fuzz client properties: {n} generated property maps in {seconds:.1f}s")


class Server:
    """tests/_forkcli.py as a subprocess: one JSON line per case, in and out."""

    def __init__(self) -> None:
        env = {k: v for k, v in os.environ.items() if not k.startswith("CLUSTERCTL_")}
        env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent), env.get("PYTHONPATH", "")])
        self.proc = subprocess.Popen(
            [sys.executable, str(HERE / "_forkcli.py")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            env=env, cwd=HERE,
        )  # fmt: skip
        assert self.proc.stdout is not None and json.loads(self.proc.stdout.readline()) == {"ready": True}

    def run(self, argv: list[str], alarm: int = 30) -> dict[str, Any]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"argv": argv, "alarm": alarm}) + "\n")
        self.proc.stdin.flush()
        return dict(json.loads(self.proc.stdout.readline()))

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


@dataclass
class Target:
    bootstrap: str
    topic: str  # holds 5 records, one partition
    fifo: Path
    directory: Path


@pytest.fixture(scope="module")
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.close()


@pytest.fixture(scope="module")
def target(tansu_broker: TansuBroker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    from clusterctl.kafka import clients

    topic = f"fzp-{uuid.uuid4().hex[:8]}"
    admin.create_topic(tansu_broker.bootstrap, topic, 1, 1, {})
    clients.produce(tansu_broker.bootstrap, topic, [(None, f"v{i}") for i in range(5)])
    d = tmp_path_factory.mktemp("props")
    fifo = d / "fifo"
    os.mkfifo(fifo)
    yield Target(tansu_broker.bootstrap, topic, fifo, d)
    admin.delete_topic(tansu_broker.bootstrap, topic)


# ---------------------------------------------------------------- entries: (name, value, class)


def _props(pred: Any) -> list[clientprops.Property]:
    return sorted((p for p in TABLE.values() if pred(p)), key=lambda p: p.name)


def _usable(p: clientprops.Property) -> bool:
    return p.kind != "see dedicated API" and p.name not in clientprops.POLICY


API = _props(lambda p: p.kind == "see dedicated API")
POLICY = [TABLE[n] for n in sorted(clientprops.POLICY) if n in TABLE]
INTEGERS = _props(lambda p: _usable(p) and p.kind == "integer" and p.high is not None)
TYPED = _props(lambda p: _usable(p) and p.kind in ("integer", "float", "boolean", "enum value"))
PATHS = _props(lambda p: _usable(p) and p.path is not None)
NAMES = sorted(n for n in clientprops.NAME_PROPERTIES if n in TABLE)
ANY = _props(_usable)


def _default(p: clientprops.Property) -> str | None:
    return p.default if p.default not in (None, "") and p.kind != "CSV flags" else None


KEPT = [p for p in ANY if _default(p) is not None and p.path is None and p.name not in clientprops.NAME_PROPERTIES]


def fits(p: clientprops.Property, role: str) -> bool:
    return p.scope == "*" or role == "client" or ROLES[p.scope] == role


@st.composite
def entry(draw: st.DrawFn, role: str, fifo: str, directory: str) -> tuple[str, str, str]:
    """(name, value, class): class "kept" or the refusal it is an instance of."""
    fitting = [p for p in ANY if fits(p, role)]
    kind = draw(st.sampled_from(
        ["kept"] * 5 + ["unknown", "api", "policy", "past-range", "wrong-type", "empty-name", "control", "huge",
                        "not-a-file"] + (["other-role"] if role != "client" else [])
    ))  # fmt: skip
    event(kind)
    if kind == "kept":
        p = draw(st.sampled_from([p for p in KEPT if fits(p, role)]))
        return p.name, str(_default(p)), kind
    if kind == "unknown":
        name = draw(st.from_regex(r"[a-z][a-z0-9_.]{0,40}", fullmatch=True).filter(lambda n: n not in TABLE))
        return name, draw(st.text(max_size=20).filter(lambda v: "\x00" not in v)), kind
    if kind == "api":
        return draw(st.sampled_from(API)).name, draw(st.sampled_from(["x", "", "0", "print"])), kind
    if kind == "policy":
        p = draw(st.sampled_from(POLICY))
        return (
            p.name,
            draw(st.sampled_from(["9", "0", "true", "/lib/x86_64-linux-gnu/libc.so.6", "touch /tmp/x"])),
            kind,
        )
    if kind == "past-range":
        p = draw(st.sampled_from([p for p in INTEGERS if fits(p, role)]))
        over = draw(st.one_of(st.integers(1, 3), st.integers(4, 2**70)))
        value = int(p.high or 0) + over if draw(st.booleans()) else int(p.low or 0) - over
        return p.name, str(value), kind
    if kind == "wrong-type":
        p = draw(st.sampled_from([p for p in TYPED if fits(p, role)]))
        bad = {"integer": ["x", "1.5", "", "0x10", "1e3"], "float": ["x", "nan", "inf", ""],
               "boolean": ["maybe", "2", "yes", ""], "enum value": ["nope", "", "ALL"]}[p.kind]  # fmt: skip
        return p.name, draw(st.sampled_from(bad)), kind
    if kind == "empty-name":
        names = [n for n in NAMES if fits(TABLE[n], role)]
        return draw(st.sampled_from(names)), draw(st.sampled_from(["", "x" * 256, "g\x1bx"])), kind
    if kind == "control":
        p = draw(st.sampled_from(fitting))
        return p.name, "a" + draw(st.sampled_from(["\x00", "\x1b[2J", "\x07", "\x7f", "\x9b"])) + "b", kind
    if kind == "huge":
        p = draw(st.sampled_from(fitting))
        return p.name, "9" * (clientprops.MAX_VALUE_BYTES + draw(st.integers(1, 10_000))), kind
    if kind == "not-a-file":
        p = draw(st.sampled_from([p for p in PATHS if fits(p, role)]))
        choices = ["/dev/zero", fifo] + (["/dev/null"] if "directory" in (p.path or "") else [directory, "/dev/null"])
        return p.name, draw(st.sampled_from(choices)), kind
    p = draw(st.sampled_from([p for p in ANY if p.scope != "*" and not fits(p, role)]))  # other-role
    return p.name, str(_default(p) or "1"), kind


COMMANDS = ["perf produce", "perf consume", "perf e2e producer", "perf e2e consumer", "spark run"]
ROLE_OF = {"perf produce": "producer", "perf consume": "consumer", "perf e2e producer": "producer",
           "perf e2e consumer": "consumer", "spark run": "client"}  # fmt: skip


def _argv(command: str, t: Target, pairs: list[str]) -> tuple[list[str], str]:
    """The command line and the option the pairs go to."""
    bs = ["-b", t.bootstrap]
    if command == "spark run":  # a missing input topic: kept maps end with exit 3 before Spark starts
        opts = [x for kv in pairs for x in ("--option", f"kafka.{kv}")]
        return [
            "spark",
            "run",
            "word_count",
            "--connector",
            "clusterctl",
            "--option",
            "input=fzp-missing",
            *opts,
            *bs,
        ], "--option"
    option = "--consumer-prop" if ROLE_OF[command] == "consumer" else "--producer-prop"
    opts = [x for kv in pairs for x in (option, kv)]
    if command == "perf produce":
        return ["perf", "produce", t.topic, "-n", "5", *opts, *bs], option
    if command == "perf consume":
        return ["perf", "consume", t.topic, "-n", "5", "--no-group", "--timeout", "2", *opts, *bs], option
    return ["perf", "e2e", t.topic, "-n", "5", "--timeout", "2", *opts, *bs], option


@st.composite
def cases(draw: st.DrawFn, fifo: str, directory: str) -> tuple[str, list[tuple[str, str, str]]]:
    command = draw(st.sampled_from(COMMANDS))
    entries = draw(st.lists(entry(ROLE_OF[command], fifo, directory), min_size=1, max_size=4,
                            unique_by=lambda e: e[0]))  # fmt: skip
    return command, entries


@settings(FUZZ, max_examples=int(60 * SCALE))
@given(data=st.data())
def test_generated_property_maps_never_crash_and_exit_as_documented(
    server: Server, target: Target, data: st.DataObject
) -> None:
    command, entries = data.draw(cases(str(target.fifo), str(target.directory)))
    pairs = [f"{name}={value}" for name, value, _ in entries]
    argv, option = _argv(command, target, pairs)
    refused = [e for e in entries if e[2] != "kept"]
    event("refused" if refused else "kept")
    with CASES.case():
        res = server.run(argv)
    code, err = res["code"], res["err"]
    shown = f"{command} {[(n, v[:80], k) for n, v, k in entries]}: exit {code} in {res['seconds']}s\n{err[-1500:]}"
    assert code >= 0, f"killed by signal {-code}: {shown}"  # SIGSEGV, SIGKILL, SIGABRT, or SIGALRM: a hang
    assert code in DOCUMENTED and "Traceback" not in err, shown
    lines = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert len(lines) == (0 if code == 0 else 1), shown
    if refused:
        assert code == 2 and (lines[0].startswith(f"error: {option}") or "Invalid value" in lines[0]), shown
        assert res["seconds"] < 10, shown  # refused before any client: no connection waited for
    elif command == "spark run":  # checked, then the missing topic, before Spark; or librdkafka's own refusal
        assert (code == 3 and "fzp-missing" in lines[0]) or (code == 2 and lines[0].startswith("error: --option")), (
            shown
        )


def test_the_table_is_librdkafkas_own() -> None:
    """Derived from librdkafka at run time, not typed here: every property confluent-kafka's librdkafka knows."""
    assert len(TABLE) > 150
    assert TABLE["fetch.max.bytes"].kind == "integer" and TABLE["fetch.max.bytes"].scope == "C"
    assert TABLE["acks"].scope == "P" and TABLE["compression.type"].kind == "enum value"
    assert TABLE["error_cb"].kind == "see dedicated API"
    assert TABLE["ssl.ca.location"].path == "file or directory" and TABLE["ssl.key.location"].path == "file"
    for name in clientprops.POLICY:
        assert name in TABLE, name  # the policy names librdkafka's properties, none of its own
