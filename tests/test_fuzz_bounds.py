"""Generated inputs at and past every documented bound (design.md test layer 6, issue 32).

- YAML alias/nesting shapes (nested anchors of any width and depth, wrapped in lists or mappings, some
  referring to themselves): the bounded loader accepts exactly what an independent count of the
  expanded document allows, refuses the rest with one SpecError line, and never takes long;
- the same documents as scenario files through the CLI: exit 2 with one error line, never 70;
- file sizes around MAX_YAML_BYTES, counts and sizes around each bound in `validate`;
- every float option with a non-finite spelling, and counts past their bound, through the CLI.

The number of generated cases and their time are printed at the end of the module's run.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import io
import math
import os
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import yaml
from _fuzz import Tally, report_fixture
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from test_bounds import _float_options

from clusterctl import cli
from clusterctl.errors import SpecError, UsageError
from clusterctl.spec import validate, yamlfile

CASES = Tally()
FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)
NOWHERE = ["-b", "127.0.0.1:1"]


report_count = report_fixture(CASES, "fuzz bounds: {n} generated cases in {seconds:.1f}s")


@pytest.fixture(scope="module", autouse=True)
def no_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """No spec and no bootstrap from the environment: a bound not checked first fails to find a cluster (exit 3
    or 4) instead of reaching one."""
    saved = {k: os.environ.get(k) for k in ("CLUSTERCTL_SPEC", "CLUSTERCTL_BOOTSTRAP_SERVER")}
    os.environ["CLUSTERCTL_SPEC"] = str(tmp_path_factory.mktemp("nospec") / "no-such-spec.yaml")
    os.environ.pop("CLUSTERCTL_BOOTSTRAP_SERVER", None)
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def run_cli(args: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli.run(args)
    return code, err.getvalue()


def one_line(code: int, err: str, shown: object) -> str:
    assert "Traceback" not in err and code != cli.EX_SOFTWARE, (shown, err)
    lines = [ln for ln in err.splitlines() if ln.startswith("error: ")]
    assert len(lines) == 1, (shown, err)
    return lines[0]


# ---------------------------------------------------------------- YAML shapes


@st.composite
def alias_documents(draw: st.DrawFn) -> str:
    """Nested anchors: level i holds `width` aliases of level i-1, in lists or mappings, wrapped `wrap` deep."""
    levels, width = draw(st.integers(1, 10)), draw(st.integers(1, 12))
    as_map = draw(st.booleans())

    def collection(refs: list[str]) -> str:
        if as_map:
            return "{" + ", ".join(f"k{j}: {r}" for j, r in enumerate(refs)) + "}"
        return "[" + ", ".join(refs) + "]"

    items = [f"&a0 {collection(['lol'] * width)}"]
    items += [f"&a{i} {collection([f'*a{i - 1}'] * width)}" for i in range(1, levels)]
    if draw(st.integers(0, 9)) == 0:  # refer to itself: `&aN [... *aN]`
        items.append(f"&self [x, *a{levels - 1}, *self]")
    body = "[" + ", ".join(items) + "]"
    wrap = draw(st.integers(0, 80))
    opener, closer = draw(st.sampled_from([("[", "]"), ("{w: ", "}")]))
    return opener * wrap + body + closer * wrap


def expanded(data: Any) -> tuple[int, int] | None:
    """(nodes, depth) of the document with aliases expanded, counted on PyYAML's shared objects; None: cyclic."""
    memo: dict[int, tuple[int, int]] = {}
    active: set[int] = set()

    def walk(x: Any) -> tuple[int, int]:
        if not isinstance(x, list | dict):
            return 1, 1
        if id(x) in active:
            raise RecursionError
        if id(x) in memo:
            return memo[id(x)]
        active.add(id(x))
        kids = [walk(k) for pair in x.items() for k in pair] if isinstance(x, dict) else [walk(k) for k in x]
        active.discard(id(x))
        memo[id(x)] = (1 + sum(k[0] for k in kids), 1 + max((k[1] for k in kids), default=0))
        return memo[id(x)]

    try:
        return walk(data)
    except RecursionError:
        return None


@settings(FUZZ, max_examples=150)
@given(doc=alias_documents())
def test_alias_shapes_are_refused_exactly_past_the_bounds(doc: str) -> None:
    with CASES.case():
        reference = yaml.safe_load(doc)  # PyYAML shares aliased objects: cheap to count, not to expand
        size = expanded(reference)
        within = size is not None and size[0] <= yamlfile.MAX_YAML_NODES and size[1] <= yamlfile.MAX_YAML_DEPTH
        event("cyclic" if size is None else "within" if within else "too many nodes or too deep")
        started = time.monotonic()
        if within:
            assert yamlfile.load_text(doc, "doc") == reference
        else:
            with pytest.raises(SpecError, match=r"^doc: YAML .*; refused$"):
                yamlfile.load_text(doc, "doc")
        assert time.monotonic() - started < 2.0


@settings(FUZZ, max_examples=25)
@given(doc=alias_documents(), place=st.sampled_from(["sleep", "fault", "name"]))
def test_alias_shapes_in_a_scenario_file_are_one_line(
    tmp_path_factory: pytest.TempPathFactory, doc: str, place: str
) -> None:
    body = {
        "sleep": f"name: x\nsteps:\n  - {{sleep: {doc}}}\n",
        "fault": f"name: x\nsteps:\n  - {{fault: {{action: pause-broker, broker: {doc}}}}}\n",
        "name": f"name: {doc}\nsteps:\n  - {{sleep: 1}}\n",
    }[place]
    path = tmp_path_factory.mktemp("sc") / "s.yaml"
    path.write_text(body)
    with CASES.case():
        started = time.monotonic()
        code, err = run_cli(["scenario", "validate", str(path)])
        assert code == 2, err
        one_line(code, err, doc[:200])
        assert time.monotonic() - started < 5.0


@settings(FUZZ, max_examples=20)
@given(delta=st.integers(-64, 64), style=st.sampled_from(["comment", "scalar"]))
def test_yaml_file_size_at_and_past_the_bound(tmp_path_factory: pytest.TempPathFactory, delta: int, style: str) -> None:
    size = yamlfile.MAX_YAML_BYTES + delta
    head = "a: 1\n#" if style == "comment" else "a: "
    path = tmp_path_factory.mktemp("y") / "f.yaml"
    path.write_bytes((head + "x" * (size - len(head))).encode())
    with CASES.case():
        assert len(path.read_bytes()) == size
        if size <= yamlfile.MAX_YAML_BYTES:
            assert yamlfile.load_file(path)["a"] in (1, "x" * (size - len(head)))
        else:
            with pytest.raises(SpecError, match="larger than 1024 KiB"):
                yamlfile.load_file(path)


# ---------------------------------------------------------------- counts and sizes


BOUNDS: list[tuple[str, Callable[[int], object], int, int]] = [
    ("partitions", lambda v: validate.count(v, "p"), 1, validate.MAX_PARTITIONS),
    (
        "rf",
        lambda v: validate.count(v, "r", maximum=validate.MAX_REPLICATION_FACTOR),
        1,
        validate.MAX_REPLICATION_FACTOR,
    ),
    ("records", lambda v: validate.at_most(v, "n", validate.MAX_RECORDS), 1, validate.MAX_RECORDS),
    ("threads", lambda v: validate.at_most(v, "t", validate.MAX_CONSUMER_THREADS), 1, validate.MAX_CONSUMER_THREADS),
    ("repeat", lambda v: validate.at_most(v, "n", validate.MAX_REPEAT), 1, validate.MAX_REPEAT),
    ("bytes", lambda v: validate.at_most(v, "s", validate.MAX_MESSAGE_BYTES, 0), 0, validate.MAX_MESSAGE_BYTES),
    ("seconds", lambda v: validate.seconds(float(v), "s"), 0, int(validate.MAX_SECONDS)),
]


@settings(FUZZ, max_examples=120)
@given(
    bound=st.sampled_from(BOUNDS),
    offset=st.one_of(st.integers(-3, 3), st.integers(-(2**40), 2**40)),
    at=st.sampled_from(["low", "high"]),
)
def test_every_bound_holds_at_its_edges(
    bound: tuple[str, Callable[[int], object], int, int], offset: int, at: str
) -> None:
    _name, check, low, high = bound
    value = (low if at == "low" else high) + offset
    with CASES.case():
        if low <= value <= high:
            check(value)
        else:
            with pytest.raises(UsageError):
                check(value)


def _security_spec(users: list[dict[str, str]]) -> dict[str, object]:
    return {"name": "fz", "profile": "offline", "kafka": {"mode": "kraft", "version": "4.4.0"},
            "kraft": {"controllers": 1}, "kafka_manager": {"enabled": False},
            "security": {"protocol": "SASL_SSL", "users": users}}  # fmt: skip


@settings(FUZZ, max_examples=60)
@given(
    users=st.one_of(st.integers(0, 3), st.integers(-3, 3).map(lambda d: validate.MAX_SECURITY_USERS + d)),
    length=st.one_of(st.integers(1, 3), st.integers(-3, 3).map(lambda d: validate.MAX_USER_NAME_LENGTH + d)),
)
def test_security_users_and_names_at_and_past_their_bounds(users: int, length: int) -> None:
    """security.users: at most MAX_SECURITY_USERS, each name at most MAX_USER_NAME_LENGTH characters (a SCRAM
    user, a principal in super.users); past either, one SpecError line (exit 2) naming the bound or the field."""
    from clusterctl.spec.model import parse_spec

    listed = [{"name": f"u{i:03d}" + "x" * max(0, length - 4), "role": "admin"} for i in range(max(users, 1))]
    fits = len(listed) <= validate.MAX_SECURITY_USERS and len(listed[0]["name"]) <= validate.MAX_USER_NAME_LENGTH
    with CASES.case():
        if fits:
            assert len(parse_spec(_security_spec(listed)).security.users) == len(listed)
            return
        with pytest.raises(SpecError) as exc:
            parse_spec(_security_spec(listed))
        line = exc.value.message
        assert "\n" not in line and exc.value.exit_code == 2
        assert str(validate.MAX_SECURITY_USERS) in line or "security.users name" in line, line


@settings(FUZZ, max_examples=60)
@given(
    what=st.sampled_from(["user create", "user delete", "acl principal", "acl resource"]),
    length=st.one_of(st.integers(1, 3), st.integers(-3, 3), st.integers(4, 300)),
)
def test_user_and_acl_names_at_and_past_their_bounds_through_the_cli(what: str, length: int) -> None:
    """`user create|delete NAME` (MAX_USER_NAME_LENGTH), `acl create --principal User:NAME` (MAX_PRINCIPAL_NAME) and
    `--resource-name` (MAX_ACL_RESOURCE_NAME): past the bound one line, exit 2, naming it, before the spec or the
    network is touched (within it: exit 3, no spec here, or 4, nothing at 127.0.0.1:1)."""
    bound = {"acl principal": validate.MAX_PRINCIPAL_NAME, "acl resource": validate.MAX_ACL_RESOURCE_NAME}.get(
        what, validate.MAX_USER_NAME_LENGTH
    )
    size = bound + length if length <= 3 else length
    if size < 1:
        return
    name = "n" * size
    if what.startswith("user"):
        args = [*what.split(), name]
    else:
        principal = f"User:{name}" if what == "acl principal" else "User:a"
        resource = name if what == "acl resource" else "t"
        args = ["acl", "create", "--principal", principal, "--operation", "READ", "--resource-type", "TOPIC",
                "--resource-name", resource, *NOWHERE]  # fmt: skip
    with CASES.case():
        if size <= bound and what.startswith("acl"):  # within the bound it would wait for the broker: checked here
            from clusterctl.kafka import acls

            acls.checked(acls.Acl(args[3], "READ", "TOPIC", args[9]))
            return
        code, err = run_cli(args)
        if size > bound:
            line = one_line(code, err, args)
            assert code == 2 and str(bound) in line, (args[:3], line)
        else:
            assert code == 3, (args[:3], code, err)  # no spec here


PAST: list[tuple[list[str], int]] = [
    (["topic", "create", "t", *NOWHERE, "-p"], validate.MAX_PARTITIONS),
    (["topic", "create", "t", *NOWHERE, "-r"], validate.MAX_REPLICATION_FACTOR),
    (["topic", "alter", "t", *NOWHERE, "-p"], validate.MAX_PARTITIONS),
    (["perf", "produce", "t", "-n", "1", *NOWHERE, "--record-size"], validate.MAX_RECORD_BYTES),
    (["perf", "produce", "t", *NOWHERE, "-n"], validate.MAX_RECORDS),
    (["perf", "produce", "t", "-n", "1", *NOWHERE, "--throughput"], validate.MAX_THROUGHPUT),
    (["perf", "consume", "t", "-n", "1", *NOWHERE, "--threads"], validate.MAX_CONSUMER_THREADS),
    (["perf", "consume", "t", *NOWHERE, "-n"], validate.MAX_RECORDS),
    (["perf", "e2e", "t", *NOWHERE, "-n"], validate.MAX_RECORDS),
    (["perf", "e2e", "t", "-n", "1", *NOWHERE, "--record-size"], validate.MAX_RECORD_BYTES),
    (["perf", "e2e", "t", "-n", "1", *NOWHERE, "--throughput"], validate.MAX_THROUGHPUT),
    (["consume", "t", *NOWHERE, "--max-messages"], validate.MAX_RECORDS),
    (["consume", "t", *NOWHERE, "--timeout"], int(validate.MAX_SECONDS)),
    (["chaos", "pause-broker", "1", "--for"], int(validate.MAX_SECONDS)),
    (["logs", "--tail"], validate.MAX_LOG_LINES),
    (["group", "reset", "g", "-t", "t", *NOWHERE, "--to-offset"], validate.INT64_MAX),
    (["perf", "produce", "t", "-n", "1", *NOWHERE, "--retention-bytes"], validate.INT64_MAX),
    (["zk", "tree", "/", "--zookeeper", "127.0.0.1:1", "--depth"], validate.MAX_TREE_DEPTH),
    (["scenario", "compare", "kill-leader", "--repeat"], validate.MAX_REPEAT),
]


@settings(FUZZ, max_examples=40)
@given(where=st.sampled_from(PAST), over=st.one_of(st.integers(1, 3), st.integers(4, 2**62)))
def test_past_the_bound_through_the_cli_is_one_line_exit_2(where: tuple[list[str], int], over: int) -> None:
    args, bound = where
    with CASES.case():
        code, err = run_cli([*args, str(bound + over)])
        line = one_line(code, err, args)
        assert code == 2 and str(bound) in line, (args, line)  # the bound is named


# bounds of a scenario step's fields (start_group): exactly what validate names, through `scenario validate`
STEP_BOUNDS: list[tuple[str, str, int, int]] = [
    ("start_group", "members", 1, validate.MAX_GROUP_MEMBERS),
]


@settings(FUZZ, max_examples=30)
@given(bound=st.sampled_from(STEP_BOUNDS), offset=st.integers(-3, 3), at=st.sampled_from(["low", "high"]))
def test_step_bounds_hold_at_their_edges_through_the_cli(
    tmp_path_factory: pytest.TempPathFactory, bound: tuple[str, str, int, int], offset: int, at: str
) -> None:
    step, field, low, high = bound
    value = (low if at == "low" else high) + offset
    doc = (
        "name: x\ntopic: {partitions: 1, replication_factor: 1, min_insync_replicas: 1}\nsteps:\n"
        f"  - create_topic: {{}}\n  - {step}: {{{field}: {value}}}\n"
    )
    path = tmp_path_factory.mktemp("sc") / "s.yaml"
    path.write_text(doc)
    with CASES.case():
        code, err = run_cli(["scenario", "validate", str(path)])
        if low <= value <= high:
            assert code == 0, err
        else:
            line = one_line(code, err, doc)
            assert code == 2 and str(low if value < low else high) in line, line


B64URL = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


@settings(FUZZ, max_examples=80)
@given(
    text=st.one_of(
        st.text(alphabet=B64URL, min_size=20, max_size=24),
        st.text(min_size=0, max_size=30),
        st.binary(min_size=16, max_size=16).map(lambda b: base64.urlsafe_b64encode(b).decode().rstrip("=")),
    )
)
def test_directory_ids_are_22_base64url_characters_of_16_bytes(text: str) -> None:
    """`quorum remove-controller --directory-id` (and a drill's directory_id): exactly what Kafka prints for a Uuid
    (16 bytes in base64url, the last character holding 2 bits), never the zero id; else one line, exit 2, before
    the spec is read."""
    ok = len(text) == 22 and set(text) <= set(B64URL) and text[-1] in "AQgw" and text != "A" * 22
    with CASES.case():
        if ok:
            assert validate.directory_id(text) == text
            return
        with pytest.raises(UsageError):
            validate.directory_id(text)
        if text and not text.startswith("-") and "\x00" not in text:
            code, err = run_cli(["quorum", "remove-controller", "101", "--directory-id", text])
            assert code == 2 and "is not a directory id" in one_line(code, err, text)


NON_FINITE = st.sampled_from(["nan", "NaN", "-nan", "inf", "-inf", "Infinity", "-Infinity", "1e400", "-1e999"])


@settings(FUZZ, max_examples=40)
@given(option=st.sampled_from(_float_options()), value=NON_FINITE)
def test_non_finite_floats_are_one_line_exit_2(option: tuple[list[str], str], value: str) -> None:
    path, opt = option
    assert math.isinf(float(value)) or math.isnan(float(value))
    with CASES.case():
        code, err = run_cli([*path, opt, value])
        assert code == 2 and "finite" in one_line(code, err, (path, opt, value)), err


# ---------------------------------------------------------------- every bound --help names (issue 51)

_NUM = r"(2\^63-1|-?\d[\d,]*)"


def _number(text: str) -> int:
    return validate.INT64_MAX if text == "2^63-1" else int(text.replace(",", ""))


def _walk(cmd: Any, path: list[str]) -> Any:
    if hasattr(cmd, "commands"):
        for name, sub in sorted(cmd.commands.items()):
            yield from _walk(sub, [*path, name])
    else:
        yield path, cmd


HelpBound = tuple[list[str], str, int | None, int, str, list[str]]


def _help_bounds() -> list[HelpBound]:
    """(command path, option, low, high, unit, the command's required words) for every option whose --help names
    a bound: "(1 to N)", "at most N", "at most a day", "1 to 255 characters", "at most 64" (repeatable)."""
    import typer.main

    found: list[HelpBound] = []
    for path, cmd in _walk(typer.main.get_command(cli.build_app()), []):
        required: list[str] = []
        for p in cmd.params:
            if getattr(p, "param_type_name", "") == "argument" and p.required:
                required.append("/" if p.name == "path" else "kill-leader" if path[0] == "scenario" else "1")
            elif getattr(p, "param_type_name", "") == "option" and p.required:
                required += [p.opts[0], "1"]
        for p in cmd.params:
            text = " ".join((getattr(p, "help", None) or "").split())
            if getattr(p, "param_type_name", "") != "option" or not text:
                continue
            span = re.search(_NUM + r" to " + _NUM + r"( characters)?", text)
            most = re.search(r"at most " + _NUM, text)
            if "at most a day" in text:
                found.append((path, p.opts[0], None, int(validate.MAX_SECONDS), "seconds", required))
            elif most and p.multiple:
                found.append((path, p.opts[0], None, _number(most.group(1)), "repeats", required))
            elif span:
                unit = "characters" if span.group(3) else "number"
                found.append((path, p.opts[0], _number(span.group(1)), _number(span.group(2)), unit, required))
            elif most:
                found.append((path, p.opts[0], None, _number(most.group(1)), "number", required))
    return found


HELP_BOUNDS = _help_bounds()


def test_help_names_the_bounds_it_should() -> None:
    """The walk finds the bounds (a --help rewording that hid them would leave the generated test below empty)."""
    named = {(" ".join(p), o) for p, o, *_ in HELP_BOUNDS}
    assert len(HELP_BOUNDS) >= 40
    wanted = [("perf produce", "--num-records"), ("topic create", "--partitions"), ("consume", "--group"),
              ("perf produce", "--producer-prop"), ("chaos pause-broker", "--for"), ("zk tree", "--depth")]  # fmt: skip
    for want in wanted:
        assert want in named, want


@settings(FUZZ, max_examples=160)
@given(bound=st.sampled_from(HELP_BOUNDS), over=st.one_of(st.integers(1, 3), st.integers(4, 2**40)),
       side=st.sampled_from(["high", "low"]))  # fmt: skip
def test_every_bound_help_names_holds(
    bound: tuple[list[str], str, int | None, int, str, list[str]], over: int, side: str, tmp_path_factory: Any
) -> None:
    """Each option past the bound its --help names: exit 2, one line naming the bound, before any work (no
    cluster here: a bound checked after the spec or the network would be exit 3 or 4)."""
    path, option, low, high, unit, required = bound
    if side == "low" and (low is None or unit != "number"):
        side = "high"
    if unit == "characters":
        value: list[str] = [option, "g" * (high + min(over, 5000))]
    elif unit == "repeats":
        names = sorted(n for n in TABLE_NAMES)[: high + min(over, 3)]
        value = [x for n in names for x in (option, f"{n}=1")]
    elif side == "low":
        value = [option, str((low or 0) - over)]
    else:
        value = [option, str(high + over)]
    if side == "low" and (low or 0) - over == -1 and "-1" in option_help(path, option):
        return  # -1 is a documented special value there (the broker's default, unthrottled)
    net = ["-b", "127.0.0.1:1"] if has_option(path, "--bootstrap-server") else []
    net += ["--zookeeper", "127.0.0.1:1"] if has_option(path, "--zookeeper") else []
    args = [*path, *required, *value, *net]
    with CASES.case():
        code, err = run_cli(args)
        line = one_line(code, err, args[:6])
        shown_bound = {str(high), f"{high:,}", "2^63-1", "a day", "86400", str(low)}
        assert code == 2 and any(b in line for b in shown_bound), (args[:8], line)


@functools.cache
def _root() -> Any:
    import typer.main

    return typer.main.get_command(cli.build_app())


def _command(path: list[str]) -> Any:
    cmd: Any = _root()
    for name in path:
        cmd = cmd.commands[name]
    return cmd


def has_option(path: list[str], name: str) -> bool:
    return any(name in getattr(p, "opts", ()) for p in _command(path).params)


def option_help(path: list[str], option: str) -> str:
    return next(" ".join((p.help or "").split()) for p in _command(path).params if option in getattr(p, "opts", ()))


def _table_names() -> list[str]:
    from clusterctl.kafka import clientprops

    return sorted(clientprops.table())


TABLE_NAMES = _table_names()
