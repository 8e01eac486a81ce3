#!/usr/bin/env python3
"""Adversarial tour (issue 51's first acceptance point): generated bad inputs against the README's contract.

Each case runs `python -m clusterctl ...` in its own process with a timeout and is judged by an oracle that
knows nothing of clusterctl's code, only docs/reference/exit-codes.md and docs/reference/bounds.md:

- the exit status is in the set the docs give for that input (never >= 128 unless the harness sent 128+N's
  signal; never killed by a signal; never a timeout unless the case sends the signal that ends it);
- stderr holds no Python traceback, and a failure's stderr ends with exactly one `error: ...` line (the
  progress lines `perf` and `scenario run` print before it aside; hints are inline, `(hint: ...)`);
- with `--json`, a failure's stdout ends with `{"error": ..., "exit_code": <the status>}`;
- nothing half-done: a refused `render`/`init -o` leaves its target as it was, a report after a signal is
  whole JSON marked interrupted, and after every signal case no container of the cluster is paused or off its
  network and no fault record is left (`compose/<name>/.clusterctl-faults/`).

Classes (see CLASSES): spec and scenario YAML (duplicate keys, loose scalars, nan/inf, bombs, wrong types at
generated paths, oversized/deep/odd files), CLI argument bounds, librdkafka property maps, endless and odd
input files, closed/full stdout, stop signals during long commands. The cluster classes start a small
real-Kafka cluster (offline profile: 1 ZooKeeper + 3 brokers of Kafka 3.9.2, subnet 10.51.0.0/24, host ports
39592-39594) in a temporary directory and tear it down (`down --volumes`) at the end; `--no-cluster` skips them.

    .venv/bin/python bench/adversarial_tour.py --seed 51 --cases 560 --out /tmp/adv51.jsonl
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import random
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parent.parent
SCENARIOS = sorted((REPO / "scenarios").glob("*.yaml"))
CLUSTER = "adv51"
SUBNET = "10.51.0.0/24"
HOST_PORT = 39592
BOOTSTRAP = f"127.0.0.1:{HOST_PORT}"
UNREACHABLE = "127.0.0.1:9"  # discard port on loopback: nothing listens, nothing leaves the machine
RECORD_BOUND = 999_964
PROGRESS_OK = re.compile(r"^(\s|\[|\d|records? |run \d|\w[\w ./:-]*: |waiting|step|series|  )")

Check = Callable[["Case", "Outcome"], list[str]]


@dataclasses.dataclass
class Case:
    cls: str
    name: str
    argv: list[str]
    expect: set[int]
    cwd: str
    timeout: float = 60.0
    stdin: str = "devnull"  # devnull | a path | "data:<text>"
    stdout: str = "pipe"  # pipe | closed-pipe | closed-fd | full
    sig: int = 0  # a signal to send after `sig_after` seconds (0: none)
    sig_after: float = 0.0
    progress: bool = False  # stderr may carry progress lines before the error line
    cluster: bool = False
    checks: list[Check] = dataclasses.field(default_factory=list)
    env: dict[str, str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class Outcome:
    rc: int | None
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool


# ---------------------------------------------------------------- running one case


def _env(extra: dict[str, str]) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CLUSTERCTL_")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
    env["COLUMNS"] = "200"
    env.update(extra)
    return env


def run_case(case: Case) -> Outcome:
    argv = [sys.executable, "-m", "clusterctl", *case.argv]
    stdin: Any = subprocess.DEVNULL
    to_close: list[int] = []
    if case.stdin.startswith("data:"):
        stdin = subprocess.PIPE
    elif case.stdin != "devnull":
        stdin = open(case.stdin, "rb")  # noqa: SIM115 - closed below
    out_file: Any = None
    stdout: Any = subprocess.PIPE
    if case.stdout == "closed-pipe":  # the reader left before the first write (`| head -c0`)
        r, w = os.pipe()
        os.close(r)
        stdout, to_close = w, [w]
    elif case.stdout == "full":
        out_file = stdout = open("/dev/full", "wb")  # noqa: SIM115
    elif case.stdout == "closed-fd":  # `>&-`: no descriptor 1 at all
        argv = ["sh", "-c", 'exec "$@" >&-', "sh", *argv]
        stdout = subprocess.DEVNULL
    started = time.monotonic()
    proc = subprocess.Popen(
        argv, cwd=case.cwd, env=_env(case.env), stdin=stdin, stdout=stdout, stderr=subprocess.PIPE,
        start_new_session=True,
    )  # fmt: skip
    for fd in to_close:
        os.close(fd)
    if out_file is not None:
        out_file.close()
    if hasattr(stdin, "close"):
        stdin.close()
    if case.sig:
        threading.Thread(target=_signal_later, args=(proc, case.sig, case.sig_after), daemon=True).start()
    timed_out = False
    try:
        data = case.stdin[5:].encode("utf-8", "surrogateescape") if case.stdin.startswith("data:") else None
        out, err = proc.communicate(input=data, timeout=case.timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    return Outcome(
        proc.returncode, (out or b"").decode("utf-8", "replace"), (err or b"").decode("utf-8", "replace"),
        round(time.monotonic() - started, 2), timed_out,
    )  # fmt: skip


def _catches(pid: int, sig: int) -> bool:
    """The process has a handler for `sig` (SigCgt): clusterctl's code runs. Before that it is Python starting."""
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) & (1 << (sig - 1)))
    return False


def _signal_later(proc: subprocess.Popen[bytes], sig: int, after: float) -> None:
    """`sig` `after` seconds from the moment clusterctl's code runs (no program can answer a signal earlier)."""
    deadline = time.monotonic() + 30
    while proc.poll() is None and not _catches(proc.pid, sig) and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(after)
    with contextlib.suppress(ProcessLookupError):
        if proc.poll() is None:
            proc.send_signal(sig)


# ---------------------------------------------------------------- the oracle


def judge(case: Case, res: Outcome) -> list[str]:
    breaks: list[str] = []
    rc = res.rc
    if res.timed_out:
        breaks.append(f"timed out after {case.timeout:.0f}s (killed)")
    elif rc is None or rc < 0:
        breaks.append(f"killed by signal {-(rc or 0)}")
    elif rc >= 128 and rc != 128 + case.sig:
        breaks.append(f"exit {rc} >= 128 without that signal")
    elif rc not in case.expect:
        breaks.append(f"exit {rc} not in {sorted(case.expect)}")
    if "Traceback (most recent call last)" in res.stderr or re.search(r"^\w+Error: ", res.stderr, re.M):
        breaks.append("a Python traceback on stderr")
    if "py4j" in res.stderr or re.search(r"^\s+at [\w.$]+\(", res.stderr, re.M):
        breaks.append("a Java/py4j trace on stderr")
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    if rc not in (None, 0) and not res.timed_out:
        errors = [ln for ln in lines if ln.startswith("error: ")]
        if len(errors) != 1 or not lines or lines[-1] != errors[0]:
            breaks.append(f"stderr of a failure is not one error line: {res.stderr[-300:]!r}")
        elif not case.progress and len(lines) != 1:
            breaks.append(f"stderr of a failure has {len(lines)} lines: {res.stderr[-300:]!r}")
        if "--json" in case.argv and case.stdout == "pipe" and rc != 128 + case.sig:
            last = res.stdout.strip().splitlines()[-1:] or [""]
            doc = _json_tail(res.stdout) or _json(last[0])
            if not isinstance(doc, dict) or doc.get("exit_code") != rc or "error" not in doc:
                breaks.append(f"--json failure without an error object on stdout: {res.stdout[-200:]!r}")
        if case.sig and rc == 128 + case.sig:
            name = signal.Signals(case.sig).name
            if errors and errors[0] != f"error: interrupted by {name}":
                breaks.append(f"the signal's line is {errors[0]!r}")
    for check in case.checks:
        breaks += check(case, res)
    return breaks


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _json_tail(text: str) -> Any:
    """The last JSON document of stdout (a --json command prints one indented object, or JSON lines)."""
    text = text.strip()
    doc = _json(text)
    if doc is not None:
        return doc
    idx = text.rfind("\n{")
    return _json(text[idx + 1 :]) if idx >= 0 else None


# ---------------------------------------------------------------- YAML generation


def dump(doc: Any) -> str:
    return yaml.safe_dump(doc, sort_keys=False, default_flow_style=False, allow_unicode=True)


def leaf_paths(doc: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any]]:
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from leaf_paths(v, (*prefix, k))
    elif isinstance(doc, list) and doc and not all(isinstance(x, str | int) for x in doc):
        for i, v in enumerate(doc):
            yield from leaf_paths(v, (*prefix, i))
    else:
        yield prefix, doc


def mapping_paths(doc: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(doc, dict):
        yield prefix
        for k, v in doc.items():
            yield from mapping_paths(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from mapping_paths(v, (*prefix, i))


def set_path(doc: Any, path: tuple[Any, ...], value: Any) -> None:
    node = doc
    for p in path[:-1]:
        node = node[p]
    node[path[-1]] = value


class Raw(str):
    """A YAML token written as is (`.nan`, `yes`, `0x10`)."""


def _raw_representer(dumper: yaml.SafeDumper, data: Raw) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", "RAW<" + str(data) + ">RAW")


yaml.SafeDumper.add_representer(Raw, _raw_representer)


def dump_raw(doc: Any) -> str:
    text = dump(doc)
    return re.sub(r"'?RAW<(.*?)>RAW'?", lambda m: m.group(1), text)


def with_duplicate(text: str, rng: random.Random) -> str | None:
    """The file with one `key: value` line given twice in its mapping (same indent, right after it)."""
    lines = text.splitlines()
    keyed = [i for i, ln in enumerate(lines) if re.match(r"^\s*(- )?[A-Za-z_][\w.-]*:(\s|$)", ln)]
    if not keyed:
        return None
    i = rng.choice(keyed)
    line = lines[i]
    m = re.match(r"^(\s*)(- )?([A-Za-z_][\w.-]*):(.*)$", line)
    assert m
    indent = m.group(1) + ("  " if m.group(2) else "")
    if m.group(4).strip() in ("", "|", ">") or m.group(4).strip().startswith("#"):
        dup = f"{indent}{m.group(3)}: null"
        # after the block that follows the key
        j = i + 1
        while j < len(lines) and (not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > len(indent)):
            j += 1
        lines.insert(j, dup)
    else:
        lines.insert(i + 1, f"{indent}{m.group(3)}:{m.group(4)}")
    return "\n".join(lines) + "\n"


def _flow_dup(text: str, rng: random.Random) -> str | None:
    """A duplicate inside a flow mapping (`{rate: 500, rate: 600}`)."""
    spots = [m for m in re.finditer(r"\{([A-Za-z_]\w*): ([^,{}]+)", text)]
    if not spots:
        return None
    m = rng.choice(spots)
    return text[: m.end()] + f", {m.group(1)}: {m.group(2)}" + text[m.end() :]


INT_BAD: list[tuple[Any, str]] = [
    (True, "a boolean"), (False, "a boolean"), (Raw("yes"), "a YAML 1.1 boolean"), ("3", "a numeric string"),
    (2.5, "a float"), (3.0, "a float"), (Raw(".nan"), "nan"), (Raw(".inf"), "inf"), (Raw("-.inf"), "-inf"),
    ([1, 2], "a list"), ({"a": 1}, "a mapping"), ("abc", "a string"), (10**30, "a huge integer"),
]  # fmt: skip
FLOAT_BAD: list[tuple[Any, str]] = [
    (True, "a boolean"), (Raw(".nan"), "nan"), (Raw(".inf"), "inf"), (Raw("-.inf"), "-inf"), ([1], "a list"),
    ({"a": 1}, "a mapping"), ("abc", "a string"), (1e308 * 10, "inf as a number"),
]  # fmt: skip
STR_BAD: list[tuple[Any, str]] = [([1, 2], "a list"), ({"a": "b"}, "a mapping")]
BOOL_BAD: list[tuple[Any, str]] = [([True], "a list"), ({"a": 1}, "a mapping"), ("maybe", "a word")]
FLOAT_OK = re.compile(
    r"^(sleep|timeout|for|rate|delay|jitter|loss|percent|probability|duration|after|within|"
    r"interval|seconds|\w+_seconds|\w+_s)$"
)
LOOSE: list[tuple[Any, str]] = [(None, "null"), (0, "zero"), (-1, "minus one"), ("", "an empty string"),
                                ("x" * 300, "a long string"), (12, "a number"), (False, "false")]  # fmt: skip


def mutate_type(doc: Any, rng: random.Random) -> tuple[Any, str, set[int]]:
    """A wrong type at a generated leaf path: refused (2) where the docs say so, else 0 or 2."""
    paths = [(p, v) for p, v in leaf_paths(doc) if p]
    path, orig = rng.choice(paths)
    where = ".".join(str(p) for p in path)
    if isinstance(orig, bool):
        value, what = rng.choice(BOOL_BAD + LOOSE)
        expect = {2} if (value, what) in BOOL_BAD else {0, 2}
    elif isinstance(orig, int) and FLOAT_OK.search(str(path[-1])):  # a duration or a rate: a float is fine
        value, what = rng.choice(FLOAT_BAD + LOOSE)
        expect = {2} if (value, what) in FLOAT_BAD else {0, 2}
    elif isinstance(orig, int):
        value, what = rng.choice(INT_BAD + LOOSE)
        expect = {2} if (value, what) in INT_BAD else {0, 2}
    elif isinstance(orig, float):
        value, what = rng.choice(FLOAT_BAD + LOOSE)
        expect = {2} if (value, what) in FLOAT_BAD else {0, 2}
    elif isinstance(orig, str):
        value, what = rng.choice(STR_BAD + LOOSE)
        expect = {2} if (value, what) in STR_BAD else {0, 2}
    else:
        value, what = rng.choice(INT_BAD + LOOSE)
        expect = {0, 2}
    out = json.loads(json.dumps(doc))
    set_path(out, path, value)
    return out, f"{where} = {what}", expect


def bomb(levels: int, width: int) -> str:
    lines = ["a0: &a0 [x, x, x]"]
    for i in range(1, levels):
        refs = ", ".join([f"*a{i - 1}"] * width)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "\n".join(lines) + f"\nname: *a{levels - 1}\n"


def odd_yaml_files(rng: random.Random, base: str) -> list[tuple[str, bytes | None, set[int]]]:
    """(what, content, expected codes) for files every YAML loader of clusterctl must refuse; None: not a file."""
    deep = "x: " + "[" * 200 + "]" * 200 + "\n"
    deep_map = "".join("  " * i + f"k{i}:\n" for i in range(100)) + "  " * 100 + "v: 1\n"
    big = base + "# " + "x" * (1024 * 1024 + 10) + "\n"
    return [
        ("billion laughs (9 levels x 9)", bomb(9, 9).encode(), {2}),
        (f"alias bomb ({rng.randint(6, 12)} levels x 10)", bomb(rng.randint(6, 12), 10).encode(), {2}),
        ("nesting 200 deep (flow)", deep.encode(), {2}),
        ("nesting 100 deep (block)", deep_map.encode(), {2}),
        ("over 1 MiB", big.encode(), {2}),
        ("invalid UTF-8", base.encode()[:40] + b"\xff\xfe\xc3(" + base.encode()[40:], {2}),
        ("NUL bytes", b"name: a\x00b\n", {2}),
        ("empty", b"", {2}),
        ("a list at the top", b"- 1\n- 2\n", {2}),
        ("a scalar at the top", b"42\n", {2}),
        ("tabs for indentation", b"name: x\nkafka:\n\tbrokers: 3\n", {2}),
        ("an unclosed flow", b"name: [a, b\n", {2}),
        ("a custom tag", b"name: !!python/object:os.system 'id'\n", {2}),
        ("a merge key bomb", (bomb(6, 8) + "kafka:\n  <<: *a5\n").encode(), {2}),
        ("a second document", (base + "---\nname: other\n").encode(), {2}),
        ("BOM then garbage", b"\xef\xbb\xbf:::\n", {2}),
    ]


# ---------------------------------------------------------------- case generators


class Gen:
    def __init__(self, rng: random.Random, work: Path, spec_text: str, cluster_dir: Path | None) -> None:
        self.rng = rng
        self.work = work
        self.spec_text = spec_text
        self.spec = yaml.safe_load(spec_text)
        self.cluster_dir = cluster_dir
        self.n = 0
        self.scenarios = {p.name: p.read_text() for p in SCENARIOS}
        (work / "specdir").mkdir(exist_ok=True)
        (work / "specdir" / "clusterctl.yaml").write_text(spec_text)
        validate = [sys.executable, "-m", "clusterctl", "scenario", "validate"]
        self.base_rc = {  # each shipped scenario against this spec, unchanged (a Spark or KRaft one is refused)
            name: subprocess.run([*validate, str(REPO / "scenarios" / name)], cwd=work / "specdir", env=_env({}),
                                 capture_output=True, timeout=120).returncode
            for name in self.scenarios
        }  # fmt: skip

    def path(self, suffix: str = "") -> Path:
        self.n += 1
        return self.work / f"c{self.n:04d}{suffix}"

    # -- spec files through render (and init -o)
    def spec_case(self) -> Case:
        rng = self.rng
        kind = rng.choice(["dup", "dup", "type", "type", "type", "odd", "node"])
        f = self.path(".yaml")
        expect: set[int] = {2}
        if kind == "dup":
            text = with_duplicate(self.spec_text, rng) or self.spec_text
            what = "a key given twice"
            f.write_text(text)
        elif kind == "type":
            doc, what, expect = mutate_type(self.spec, rng)
            f.write_text(dump_raw(doc))
        elif kind == "odd":
            what, content, expect = rng.choice(odd_yaml_files(rng, self.spec_text))
            assert content is not None
            f.write_bytes(content)
        else:
            what, expect = self._odd_node(f, self.spec_text)
        out_dir = self.path("-render")  # new: render makes it; a refused render must not
        argv = ["-s", str(f), "render", "--output-dir", str(out_dir)]
        if rng.random() < 0.3:
            argv.append("--json")

        def untouched(case: Case, res: Outcome) -> list[str]:
            if res.rc != 0 and out_dir.exists():
                return [f"a refused render left {out_dir.name}: {sorted(_tree(out_dir))}"]
            if any(p.name.startswith(f".{out_dir.name}") or p.name.startswith(f"{out_dir.name}.")
                   for p in out_dir.parent.iterdir()):  # fmt: skip
                return ["a staging directory was left"]
            return []

        return Case("spec-yaml", f"render a spec: {what}", argv, expect, str(self.work), checks=[untouched])

    def _odd_node(self, f: Path, text: str) -> tuple[str, set[int]]:
        what = self.rng.choice(["directory", "fifo", "symlink loop", "missing", "unreadable", "dev-zero"])
        if what == "directory":
            f.mkdir()
            return what, {2}
        if what == "fifo":
            os.mkfifo(f)
            return what, {2}
        if what == "symlink loop":
            f.symlink_to(f)
            return what, {2}
        if what == "missing":
            return what, {3}
        if what == "dev-zero":
            f.symlink_to("/dev/zero")
            return what, {2}
        f.write_text(text)
        f.chmod(0)
        return what, ({2, 3} if os.geteuid() != 0 else {0})  # root reads it anyway: as valid as the file

    # -- scenario files through scenario validate
    def scenario_case(self) -> Case:
        rng = self.rng
        name = rng.choice(sorted(self.scenarios))
        text = self.scenarios[name]
        doc = yaml.safe_load(text)
        f = self.path(".yaml")
        kind = rng.choice(["dup", "dup", "flowdup", "type", "type", "type", "steps", "steps", "odd", "node"])
        expect: set[int] = {2}
        if kind == "dup":
            f.write_text(with_duplicate(text, rng) or text)
            what = "a key given twice"
        elif kind == "flowdup":
            new = _flow_dup(text, rng)
            f.write_text(new or (with_duplicate(text, rng) or text))
            what = "a key given twice in a flow mapping"
        elif kind == "type":
            doc, what, expect = mutate_type(doc, rng)
            f.write_text(dump_raw(doc))
        elif kind == "steps":
            doc, what, expect = self._bad_steps(doc)
            f.write_text(dump_raw(doc))
        elif kind == "odd":
            what, content, expect = rng.choice(odd_yaml_files(rng, text))
            assert content is not None
            f.write_bytes(content)
        else:
            what, expect = self._odd_node(f, text)
        if self.base_rc[name] != 0 and 0 in expect:  # refused as shipped (a Spark or KRaft one): may stay so
            expect = expect | {self.base_rc[name]}
        argv = ["scenario", "validate", str(f)]
        if rng.random() < 0.3:
            argv.append("--json")
        return Case("scenario-yaml", f"validate {name}: {what}", argv, expect, str(self.work / "specdir"))

    def _bad_steps(self, doc: dict[str, Any]) -> tuple[Any, str, set[int]]:
        rng = self.rng
        steps = doc.get("steps") or []
        kinds = [next(iter(s)) for s in steps if isinstance(s, dict)]
        choice = rng.choice(["unknown", "order", "broker", "nofault", "empty", "sleep", "verify-first", "many"])
        if choice == "unknown":
            steps.insert(rng.randrange(len(steps) + 1), {"explode": {}})
            return doc, "an unknown step", {2}
        if choice == "order" and "create_topic" in kinds:
            steps.append(steps.pop(kinds.index("create_topic")))
            return doc, "create_topic moved to the end", {2}
        if choice == "broker":
            steps.insert(1, {"fault": {"action": "pause-broker", "broker": rng.choice([0, 99, -1, 10**12]), "for": 1}})
            return doc, "a fault on a broker the spec lacks", {2}
        if choice == "nofault":
            steps.insert(0, {"wait_for": {"leader_changed": {"partition": 0}, "timeout": 5}})
            return doc, "leader_changed before any fault", {2}
        if choice == "empty":
            doc["steps"] = []
            return doc, "no steps", {2}
        if choice == "sleep":
            steps.insert(0, {"sleep": rng.choice([Raw(".nan"), Raw(".inf"), -1, 10**9, True, "5"])})
            return doc, "a sleep out of bounds", {2}
        if choice == "many":
            doc["steps"] = [{"sleep": 0}] * rng.choice([10_001, 100_001])
            return doc, "a huge step list", {0, 2}
        if "stop_load" in kinds or "verify" in kinds:
            steps.insert(0, {"verify": {}})
            return doc, "verify before any load", {2}
        steps.insert(0, {"stop_load": {}})
        return doc, "stop_load before any load", {2}

    # -- argument bounds
    def bounds_case(self) -> Case:
        rng = self.rng
        b = BOOTSTRAP if self.cluster_dir else UNREACHABLE
        cwd = str(self.cluster_dir or self.work / "specdir")
        long_name = "g" * rng.choice([256, 300, 5000])
        ctrl = rng.choice(["a\x1bb", "a\nb", "a\x07", "\x7f", "a\rb", "\x9b"])
        huge = rng.choice(["1000000001", "99999999999999999999", "-1", "0", "1e3", "abc", "", "0x10", "nan"])
        afile = str(self.work / "specdir" / "clusterctl.yaml")
        adir = str(self.work / "specdir")
        unwritable = rng.choice(["/proc/self/nope", "/sys/adv51", afile + "/sub", "/dev/null/x"])
        toolong = "/tmp/" + "d" * rng.choice([256, 5000])
        options: list[tuple[str, list[str], set[int]]] = [
            ("scenario run --repeat", ["scenario", "run", "short-pause", "--repeat",
                                       rng.choice(["0", "-1", "101", "1000000", "99999999999999999999", "x", "1.5"])],
             {2}),
            ("logs --tail", ["logs", "--tail", rng.choice(["-1", "1000001", "x", "1e9", "99999999999999999999"])], {2}),
            ("consume -n", ["consume", "t", "-b", b, "-n", huge], {2}),
            ("consume --timeout", ["consume", "t", "-b", b, "--timeout",
                                   rng.choice(["nan", "inf", "-inf", "-1", "86401", "1e308", "x"])], {2}),
            ("consume -g long", ["consume", "t", "-b", b, "-g", long_name], {2}),
            ("consume -g control", ["consume", "t", "-b", b, "-g", ctrl], {2}),
            ("consume -g empty", ["consume", "t", "-b", b, "-g", ""], {2}),
            ("consume --offset", ["consume", "t", "-b", b, "--offset",
                                  rng.choice(["-5", "x", "1e3", "99999999999999999999"])], {2}),
            ("consume -p", ["consume", "t", "-b", b, "-p", rng.choice(["-2", "4096", "99999999999", "x"])], {2, 3}),
            ("group describe long", ["group", "describe", long_name, "-b", b], {2}),
            ("group describe control", ["group", "describe", ctrl, "-b", b], {2}),
            ("group delete empty", ["group", "delete", "", "-b", b], {2}),
            ("group reset long", ["group", "reset", long_name, "-b", b, "--topic", "t", "--to-earliest"], {2}),
            ("perf consume --group", ["perf", "consume", "t", "-n", "1", "-b", b, "-g",
                                      rng.choice([long_name, ctrl, ""])], {2}),
            ("perf consume --threads", ["perf", "consume", "t", "-n", "1", "-b", b, "--threads",
                                        rng.choice(["0", "65", "-1", "100000"])], {2}),
            ("perf produce -n", ["perf", "produce", "t", "-b", b, "-n", huge], {2}),
            ("perf produce --record-size", ["perf", "produce", "t", "-b", b, "-n", "1", "--record-size",
                                            rng.choice(["-1", str(RECORD_BOUND + 1), "2000000", "99999999999"])], {2}),
            ("perf produce --throughput", ["perf", "produce", "t", "-b", b, "-n", "1", "--throughput",
                                           rng.choice(["nan", "inf", "0", "-2", "10000001", "1e20"])], {2}),
            ("perf produce client.id", ["perf", "produce", "t", "-b", b, "-n", "1", "--producer-prop",
                                        f"client.id={rng.choice([long_name, ctrl, ''])}"], {2}),
            ("perf e2e --record-size", ["perf", "e2e", "t", "-b", b, "-n", "1", "--record-size",
                                        rng.choice(["15", "0", str(RECORD_BOUND + 1)])], {2}),
            ("perf produce --disk-path file", ["perf", "produce", "t", "-b", b, "-n", "1", "--disk-path",
                                               rng.choice([afile, toolong, "/nonexistent/adv51", "/dev/zero"])],
             {2}),
            ("topic create name", ["topic", "create", rng.choice(["a" * 250, "a/b", ".", "..", "t t", "é", "a\x1b",
                                                                  "-x", ""]), "-b", b], {2}),
            ("topic create -p", ["topic", "create", "adv-ok", "-b", b, "-p", rng.choice(["0", "4097", "-2"])], {2}),
            ("topic create -r", ["topic", "create", "adv-ok", "-b", b, "-r", rng.choice(["0", "17", "-2"])], {2}),
            ("topic describe name", ["topic", "describe", rng.choice(["a" * 250, "a/b", "", "\x1b[2J"]), "-b", b], {2}),
            ("scenario run --report-dir", ["scenario", "run", "short-pause", "-b", b, "--report-dir",
                                           rng.choice([afile, unwritable, toolong])], {2}),
            ("scenario compare --results", ["scenario", "compare", "short-pause", "--results",
                                            rng.choice([str(self.work), afile + "/sub", toolong, "/dev/null/x"]),
                                            "--summary-only"], {2}),
            ("produce -f", ["produce", "t", "-b", b, "-f", rng.choice([str(self.work), toolong, "/nonexistent/x"])],
             {2, 3}),
            ("produce -p", ["produce", "t", "-b", b, "-p", rng.choice(["-2", "99999999999", "x"])], {2, 3}),
            ("init -o", ["init", "--profile", "offline", "-o", rng.choice([adir, unwritable, toolong, afile])],
             {2}),
            ("init --brokers", ["init", "--profile", "offline", "-o", str(self.path(".yaml")), "--brokers",
                                rng.choice(["0", "10", "-1", "x", "99999999999999999999"])], {2}),
            ("init --zk-nodes", ["init", "--profile", "offline", "-o", str(self.path(".yaml")), "--zk-nodes",
                                 rng.choice(["2", "0", "11", "x"])], {2}),
            ("init --subnet", ["init", "--profile", "offline", "-o", str(self.path(".yaml")), "--subnet",
                               rng.choice(["8.8.8.0/24", "10.0.0.0/30", "x", "10.0.0.0/99", "::1/64"])], {2}),
            ("render --output-dir", ["-s", afile, "render", "--output-dir", rng.choice([afile, unwritable, toolong])],
             {2}),
            ("chaos heal --timeout", ["chaos", "heal", "--timeout", rng.choice(["nan", "inf", "-1", "86401", "x"])],
             {2}),
            ("chaos pause-broker --for", ["chaos", "pause-broker", "1", "--for",
                                          rng.choice(["nan", "inf", "-1", "86401", "x"])], {2}),
            ("chaos pause-broker id", ["chaos", "pause-broker", rng.choice(["0", "99", "-1", "x"]), "--for", "1"],
             {2, 3}),
        ]  # fmt: skip
        what, argv, expect = rng.choice(options)
        if rng.random() < 0.3:
            argv = [*argv, "--json"] if what not in ("logs --tail",) else argv
        checks: list[Check] = []
        if what == "init -o":
            target = argv[argv.index("-o") + 1]
            before = _snap(target)
            checks.append(lambda c, r: [] if _snap(target) == before else [f"init -o changed {target}"])
        return Case("cli-bounds", what, argv, expect, cwd, timeout=90, checks=checks)

    # -- librdkafka property maps
    def props_case(self) -> Case:
        rng = self.rng
        cmd = rng.choice(["produce", "consume", "e2e"])
        refused: list[str] = [
            "group.id=", "client.id=", "nosuch.property=1", "linger.ms=abc", "linger.ms=-5", "linger.ms=9999999999999",
            "batch.size=1.5", "acks=maybe", "enable.idempotence=perhaps", "internal.termination.signal=9",
            "plugin.library.paths=/tmp/x.so", "error_cb=x", "opaque=1", "logger=x", "on_delivery=x",
            "sasl.kerberos.kinit.cmd=id", "api.version.request=false", "ssl.ca.location=/dev/zero",
            "ssl.key.location=/dev/stdin", "client.id=" + "c" * 70000, "message.max.bytes=" + "9" * 40,
            "socket.timeout.ms=0x10", "=1", "noequals", "statistics.interval.ms=nan",
            "queued.max.messages.kbytes=-1", "client.rack=a\x1bb", "debug=all,nonsense",
            "ssl.engine.location=/x", "enabled_events=1", "log.queue=true",
        ]  # fmt: skip
        consumer_only = ["auto.offset.reset=earliest", "enable.auto.commit=false", "fetch.min.bytes=1"]
        producer_only = ["linger.ms=5", "compression.codec=lz4", "enable.idempotence=true"]
        kept = ["client.id=adv51", "socket.keepalive.enable=true", "reconnect.backoff.ms=100"]
        n = rng.choice([1, 1, 2, 3, 4, 65])
        base = ["perf", cmd, f"adv-props-{rng.randrange(4)}", "-b", BOOTSTRAP, "-n", "20"]
        if cmd == "consume":
            base += ["--timeout", "3"]
        elif cmd == "e2e":
            base += ["--timeout", "5"]
        opts: list[str] = []
        bad = False
        roles = {"produce": ["--producer-prop"], "consume": ["--consumer-prop"],
                 "e2e": ["--producer-prop", "--consumer-prop"]}[cmd]  # fmt: skip
        for i in range(n):
            opt = rng.choice(roles)
            if n == 65:
                prop = MANY[opt][i % len(MANY[opt])] if i < len(MANY[opt]) else f"client.id=adv{i}"
                bad = True
            elif rng.random() < 0.6:
                prop = rng.choice(refused)
                bad = True
            elif rng.random() < 0.5:
                wrong = consumer_only if opt == "--producer-prop" else producer_only
                prop = rng.choice(wrong)
                bad = bad or prop.split("=")[0] not in ("enable.auto.commit",)  # role mismatch
                if prop.startswith(("fetch.", "auto.offset", "enable.auto")) and opt == "--consumer-prop":
                    bad = False
            else:
                prop = rng.choice(kept)
            opts += [opt, prop]
        if n == 65:
            opts = []
            opt = roles[0]
            for i in range(65):
                opts += [opt, MANY[opt][i]]
        expect = {2} if bad else {0, 1, 2, 5}
        if not bad and cmd == "consume":
            expect = {0, 1, 5}
        what = f"perf {cmd} {n} prop(s)" + (" incl. refused" if bad else "")
        # a role mismatch might be taken (librdkafka ignores some): widen when unsure
        if bad and all(p.split("=")[0] in {x.split("=")[0] for x in consumer_only + producer_only}
                       for p in opts[1::2]):  # fmt: skip
            expect = {0, 1, 2, 5}
        return Case("client-props", what, base + opts, expect, str(self.work), timeout=90, cluster=True, progress=True)

    # -- endless and odd input files
    def input_case(self) -> Case:
        rng = self.rng
        kind = rng.choice(["produce", "produce", "payload"])
        topic = f"adv-input-{rng.randrange(3)}"
        f = self.path(".dat")
        choice = rng.choice(["dev-zero", "fifo", "huge-line", "bad-utf8", "empty", "dir", "missing", "nul", "big-ok",
                             "urandom", "lines-over-bound"])  # fmt: skip
        sig = 0
        if choice == "dev-zero":
            path = "/dev/zero"
            expect = {2}
        elif choice == "urandom":
            path = "/dev/urandom"
            expect = {1, 2}
        elif choice == "fifo":
            os.mkfifo(f)
            path = str(f)
            expect = {2} if kind == "payload" else {143, 130}
            sig = 0 if kind == "payload" else rng.choice([signal.SIGTERM, signal.SIGINT])
        elif choice == "huge-line":
            f.write_bytes(b"x" * rng.choice([RECORD_BOUND + 1, 2_000_000, 20_000_000]) + b"\nok\n")
            path = str(f)
            expect = {1, 2}
        elif choice == "lines-over-bound":
            f.write_bytes(b"ok\n" + b"y" * (RECORD_BOUND + rng.randrange(1, 100)) + b"\n")
            path = str(f)
            expect = {1, 2}
        elif choice == "bad-utf8":
            f.write_bytes(b"good\n\xff\xfe bad\n\xc3(\n")
            path = str(f)
            expect = {0, 1, 2}
        elif choice == "nul":
            f.write_bytes(b"a\x00b\n" * 10)
            path = str(f)
            expect = {0, 2}
        elif choice == "empty":
            f.write_bytes(b"")
            path = str(f)
            expect = {0, 2}
        elif choice == "dir":
            path = str(self.work)
            expect = {2}
        elif choice == "missing":
            path = str(self.work / "nope" / "x")
            expect = {3, 2}
        else:
            f.write_bytes(b"".join(b"line %d\n" % i for i in range(2000)))
            path = str(f)
            expect = {0}
        if kind == "payload":
            argv = ["perf", "produce", topic, "-b", BOOTSTRAP, "-n", "50", "--payload-file", path,
                    "--record-size", str(RECORD_BOUND)]  # fmt: skip
            if choice in ("huge-line", "lines-over-bound"):
                expect = {2}
            if choice == "bad-utf8":
                expect = {0, 2}
        else:
            argv = ["produce", topic, "-b", BOOTSTRAP, "-f", path]
        if rng.random() < 0.3:
            argv.append("--json")
        c = Case("input-files", f"{argv[0] if kind == 'produce' else 'perf produce --payload-file'} {choice}", argv,
                 expect, str(self.work), timeout=90, cluster=True, progress=True)  # fmt: skip
        if sig:
            c.sig, c.sig_after = sig, rng.uniform(1.5, 4.0)
        return c

    # -- closed or full stdout
    def stdout_case(self) -> Case:
        rng = self.rng
        mode = rng.choice(["closed-pipe", "closed-fd", "full"])
        topic = "adv-stdout"
        sc = str(REPO / "scenarios" / rng.choice(["short-pause.yaml", "kill-leader.yaml", "graceful-stop.yaml"]))
        cmds: list[tuple[str, list[str], bool]] = [
            ("topic list", ["topic", "list", "-b", BOOTSTRAP], True),
            ("topic describe", ["topic", "describe", topic, "-b", BOOTSTRAP], True),
            ("perf produce", ["perf", "produce", topic, "-b", BOOTSTRAP, "-n", str(rng.choice([10, 1000]))], True),
            ("perf consume", ["perf", "consume", topic, "-b", BOOTSTRAP, "-n", "5", "--timeout", "5"], True),
            ("perf e2e", ["perf", "e2e", topic, "-b", BOOTSTRAP, "-n", "20", "--timeout", "5"], True),
            ("consume", ["consume", topic, "-b", BOOTSTRAP, "--from-beginning", "-n", "3", "--timeout", "5"], True),
            (
                "consume -g",
                [
                    "consume",
                    topic,
                    "-b",
                    BOOTSTRAP,
                    "--from-beginning",
                    "-n",
                    "3",
                    "--timeout",
                    "5",
                    "-g",
                    f"adv-g{rng.randrange(1000)}",
                ],
                True,
            ),
            ("scenario list", ["scenario", "list"], False),
            ("scenario validate", ["scenario", "validate", sc], False),
            ("status", ["status"], True),
            ("cluster describe", ["cluster", "describe", "-b", BOOTSTRAP], True),
            ("group list", ["group", "list", "-b", BOOTSTRAP], True),
            ("--version", ["--version"], False),
            ("init", ["init", "--profile", "offline", "-o", str(self.path(".yaml"))], False),
        ]
        what, argv, needs = rng.choice(cmds)
        if rng.random() < 0.4 and what not in ("--version",):
            argv = [*argv, "--json"]
        cwd = str(self.cluster_dir) if needs and self.cluster_dir else str(self.work / "specdir")
        return Case("closed-stdout", f"{what} > {mode}", argv, {74}, cwd, timeout=90, stdout=mode, cluster=needs,
                    progress=True)  # fmt: skip

    # -- stop signals during long commands
    def signal_case(self) -> Case:
        rng = self.rng
        sig = rng.choice([signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
        what = rng.choice(["perf produce", "perf produce", "consume -g", "perf consume", "perf e2e", "scenario run",
                           "scenario run --repeat"])  # fmt: skip
        rdir = self.path("-report")
        checks: list[Check] = [self.nothing_left]
        if what == "perf produce":
            argv = ["perf", "produce", "adv-sig", "-b", BOOTSTRAP, "-n", "1000000", "--throughput", "3000",
                    "--reporting-interval", "1"]  # fmt: skip
            after = rng.uniform(0.3, 8)
            checks.append(_partial_result)
        elif what == "consume -g":
            argv = ["consume", "adv-sig", "-b", BOOTSTRAP, "-g", f"adv-sig-{rng.randrange(10**6)}", "--timeout",
                    "600", "--from-beginning", "-n", "100000000"]  # fmt: skip
            after = rng.uniform(0.3, 6)
        elif what == "perf consume":
            argv = ["perf", "consume", "adv-sig", "-b", BOOTSTRAP, "-n", "100000000", "--timeout", "600"]
            after = rng.uniform(0.3, 6)
            checks.append(_partial_result)
        elif what == "perf e2e":
            argv = ["perf", "e2e", "adv-sig-e2e", "-b", BOOTSTRAP, "-n", "1000000", "--throughput", "500"]
            after = rng.uniform(0.5, 8)
            checks.append(_partial_result)
        else:
            sc = rng.choice(["short-pause", "short-partition"])
            argv = ["scenario", "run", sc, "-b", BOOTSTRAP, "--report-dir", str(rdir)]
            if what.endswith("--repeat"):
                argv += ["--repeat", "3"]
            after = rng.uniform(1, 45 if what.endswith("--repeat") else 14)
            checks.append(lambda c, r: _report_whole(rdir, r))
        if rng.random() < 0.4:
            argv.append("--json")
        return Case("signals", f"{what} <- {signal.Signals(sig).name} at {after:.1f}s", argv, {128 + sig},
                    str(self.cluster_dir), timeout=240 if what.startswith("scenario") else 90, sig=sig,
                    sig_after=after, progress=True, cluster=True, checks=checks)  # fmt: skip

    def nothing_left(self, case: Case, res: Outcome) -> list[str]:
        return cluster_left_broken(self.cluster_dir)


def _partial_result(case: Case, res: Outcome) -> list[str]:
    if "--json" in case.argv and res.rc == 128 + case.sig and res.stdout.strip():
        doc = _json_tail(res.stdout)
        if not isinstance(doc, dict) or doc.get("exit_code") != res.rc:
            return [f"--json after a signal is not an error object: {res.stdout[-200:]!r}"]
    return []


def _report_whole(rdir: Path, res: Outcome) -> list[str]:
    out = []
    for f in rdir.rglob("*.json") if rdir.exists() else []:
        try:
            json.loads(f.read_text())
        except ValueError:
            out.append(f"{f.name} is not whole JSON")
    for f in rdir.rglob("*"):
        if f.name.endswith((".tmp", ".part")):
            out.append(f"a temporary file left: {f}")
    return out


def cluster_left_broken(cluster_dir: Path | None) -> list[str]:
    if cluster_dir is None:
        return []
    problems: list[str] = []
    names = subprocess.run(
        ["docker", "ps", "-a", "--filter", f"label=com.docker.compose.project={CLUSTER}", "--format", "{{.Names}}"],
        capture_output=True, text=True, timeout=60,
    ).stdout.split()  # fmt: skip
    for name in names:
        info = json.loads(subprocess.run(["docker", "inspect", name], capture_output=True, text=True,
                                         timeout=60).stdout)[0]  # fmt: skip
        if info["State"].get("Paused"):
            problems.append(f"{name} left paused")
        if not info["State"].get("Running"):
            problems.append(f"{name} left stopped")
        if f"{CLUSTER}-net" not in (info["NetworkSettings"].get("Networks") or {}):
            problems.append(f"{name} left off {CLUSTER}-net")
    records = cluster_dir / "compose" / CLUSTER / ".clusterctl-faults"
    if records.exists() and any(records.iterdir()):
        problems.append(f"fault records left: {sorted(p.name for p in records.iterdir())}")
    if problems:  # heal so the next case starts clean; the break is already counted
        subprocess.run([sys.executable, "-m", "clusterctl", "chaos", "heal"], cwd=cluster_dir, env=_env({}),
                       capture_output=True, timeout=300)  # fmt: skip
    return problems


def _tree(d: Path) -> set[str]:
    return {str(p.relative_to(d)) for p in d.rglob("*")} if d.is_dir() else set()


def _snap(target: str) -> Any:
    p = Path(target)
    try:
        st = p.lstat()
    except OSError:
        return None
    if stat.S_ISREG(st.st_mode):
        return ("file", p.read_bytes())
    if stat.S_ISDIR(st.st_mode):
        return ("dir", sorted(os.listdir(p)))
    return ("other", st.st_mode)


def _many_props() -> dict[str, list[str]]:
    """65 distinct properties per role at librdkafka's own defaults (names from its table; one over the bound)."""
    from clusterctl.kafka import clientprops

    out = {}
    for opt, scope in (("--producer-prop", "P"), ("--consumer-prop", "C")):
        rows = [
            p
            for p in clientprops.table().values()
            if p.scope in ("*", scope)
            and p.default
            and not p.path
            and p.kind in ("integer", "boolean", "float", "enum value")
            and p.name not in clientprops.POLICY
        ]
        out[opt] = [f"{p.name}={p.default}" for p in rows][:65]
        assert len(out[opt]) == 65, len(out[opt])
    return out


MANY = _many_props()


# ---------------------------------------------------------------- the cluster


@contextlib.contextmanager
def small_cluster(root: Path, keep: bool) -> Iterator[Path]:
    d = root / "cluster"
    d.mkdir()

    def cli(*args: str, timeout: float = 600) -> None:
        subprocess.run([sys.executable, "-m", "clusterctl", *args], cwd=d, env=_env({}), check=True,
                       timeout=timeout, stdout=subprocess.DEVNULL)  # fmt: skip

    cli("init", "--profile", "offline", "--kafka-version", "3.9.2", "--brokers", "3", "--zk-nodes", "1", "--subnet",
        SUBNET)  # fmt: skip
    spec = (d / "clusterctl.yaml").read_text()
    spec = re.sub(r'^name: "[^"]*"', f'name: "{CLUSTER}"', spec, flags=re.M)
    spec = re.sub(r"host_port: 9092\b", f"host_port: {HOST_PORT}", spec)
    spec = re.sub(r"(kafka_manager:\n(?:\s*#.*\n)*\s*enabled:) true", r"\1 false", spec)
    (d / "clusterctl.yaml").write_text(spec)
    try:
        cli("render")
        cli("up")
        topics = ["adv-stdout", "adv-sig", "adv-sig-e2e"] + [f"adv-input-{i}" for i in range(3)]
        for t in topics + [f"adv-props-{i}" for i in range(4)]:
            cli("topic", "create", t, "-b", BOOTSTRAP, "--if-not-exists")
        cli("perf", "produce", "adv-stdout", "-b", BOOTSTRAP, "-n", "50")
        cli("perf", "produce", "adv-sig", "-b", BOOTSTRAP, "-n", "200000")
        yield d
    finally:
        if not keep:
            subprocess.run([sys.executable, "-m", "clusterctl", "down", "--volumes"], cwd=d, env=_env({}),
                           timeout=600, stdout=subprocess.DEVNULL)  # fmt: skip


# ---------------------------------------------------------------- main

CLASSES: dict[str, tuple[str, float]] = {
    # class: (generator, share of the cases)
    "spec-yaml": ("spec_case", 0.20),
    "scenario-yaml": ("scenario_case", 0.22),
    "cli-bounds": ("bounds_case", 0.22),
    "client-props": ("props_case", 0.12),
    "input-files": ("input_case", 0.08),
    "closed-stdout": ("stdout_case", 0.10),
    "signals": ("signal_case", 0.06),
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=51)
    ap.add_argument("--cases", type=int, default=560)
    ap.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "adversarial_tour.jsonl")
    ap.add_argument("--no-cluster", action="store_true", help="skip the classes that need a running cluster")
    ap.add_argument("--only", action="append", help="run only this class (repeatable)")
    ap.add_argument("--workers", type=int, default=2, help="parallel cases of the classes without a cluster")
    ap.add_argument("--keep", action="store_true", help="leave the cluster and the work directory")
    args = ap.parse_args()
    # a background job of a non-interactive shell has SIGINT ignored, and children inherit that (clusterctl keeps
    # a signal its parent ignores, as documented): the signal cases need the default in every child
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)
    rng = random.Random(args.seed)
    classes = {k: v for k, v in CLASSES.items() if not args.only or k in args.only}
    total_share = sum(s for _, s in classes.values())
    counts = {k: max(1, round(args.cases * s / total_share)) for k, (_, s) in classes.items()}
    work = Path(tempfile.mkdtemp(prefix="adv51-"))
    started = time.monotonic()
    loads: list[float] = []
    results: list[dict[str, Any]] = []
    try:
        spec_dir = work / "base"
        spec_dir.mkdir()
        subprocess.run([sys.executable, "-m", "clusterctl", "init", "--profile", "offline", "--kafka-version", "3.9.2",
                        "--brokers", "3", "--zk-nodes", "1", "--subnet", SUBNET], cwd=spec_dir, env=_env({}),
                       check=True, stdout=subprocess.DEVNULL)  # fmt: skip
        spec_text = (spec_dir / "clusterctl.yaml").read_text()
        need_cluster = not args.no_cluster and any(k in classes for k in ("client-props", "input-files",
                                                                          "closed-stdout", "signals"))  # fmt: skip
        with contextlib.ExitStack() as stack:
            cdir = stack.enter_context(small_cluster(work, args.keep)) if need_cluster else None
            gen = Gen(rng, work, spec_text, cdir)
            cases: list[Case] = []
            for cls, n in counts.items():
                for _ in range(n):
                    c = getattr(gen, classes[cls][0])()
                    if c.cluster and cdir is None:
                        continue
                    cases.append(c)
            plain = [c for c in cases if not c.cluster and not c.sig]
            serial = [c for c in cases if c.cluster or c.sig]
            done = 0

            def record(c: Case, res: Outcome) -> None:
                nonlocal done
                breaks = judge(c, res)
                done += 1
                row = {"class": c.cls, "case": c.name, "argv": c.argv, "stdout_mode": c.stdout, "signal": c.sig,
                       "signal_after": round(c.sig_after, 2), "expect": sorted(c.expect), "rc": res.rc,
                       "seconds": res.seconds, "stderr": res.stderr[-600:], "breaks": breaks}  # fmt: skip
                results.append(row)
                if breaks:
                    print(f"BREAK [{c.cls}] {c.name}: {'; '.join(breaks)}\n    argv: {c.argv[:12]}", flush=True)
                if done % 50 == 0:
                    loads.append(os.getloadavg()[0])
                    print(f"... {done}/{len(cases)} cases, {time.monotonic() - started:.0f}s, load {loads[-1]:.1f}",
                          flush=True)  # fmt: skip

            lock = threading.Lock()

            def one(c: Case) -> None:
                res = run_case(c)
                with lock:
                    record(c, res)

            with ThreadPoolExecutor(max_workers=max(1, args.workers)) as pool:
                list(pool.map(one, plain))
            for c in serial:
                one(c)
            if cdir is not None:  # the cluster as the tour leaves it: nothing paused, cut or recorded
                left = cluster_left_broken(cdir)
                results.append({"class": "signals", "case": "cluster after the tour", "argv": [], "rc": 0,
                                "breaks": left, "expect": [0], "seconds": 0, "stderr": ""})  # fmt: skip
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w") as fh:
        for row in results:
            fh.write(json.dumps(row) + "\n")
    per = Counter(r["class"] for r in results if r["case"] != "cluster after the tour")
    broken = Counter(r["class"] for r in results if r["breaks"])
    print(f"\nseed {args.seed}, {sum(per.values())} cases in {time.monotonic() - started:.0f}s, "
          f"load (1 min) {min(loads or [0]):.1f}-{max(loads or [0]):.1f}; all cases in {args.out}\n")  # fmt: skip
    print("| class | cases | breaks |\n|---|---|---|")
    for cls in classes:
        print(f"| {cls} | {per[cls]} | {broken[cls]} |")
    print(f"| **total** | **{sum(per.values())}** | **{sum(broken.values())}** |")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
