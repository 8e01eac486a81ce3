"""Generated cases for issue 51's classes (part B), each against an independent oracle written here:

- strict loaders: a key given twice anywhere in a spec or scenario document, and a boolean, a numeric string or a
  float where an integer is expected, are refused with the key's path (exit 2 through `scenario validate`);
- check before work: random step sequences (topic, load, Spark jobs, faults, conditions about "the fault",
  `fault: N` references, mode-bound conditions) are accepted exactly when the oracle says every reference holds, and
  refused with one line naming the first step that breaks one;
- overlapping faults: two kills at random offsets and heals; each leader change is found under the fault whose
  target led the partition, and `also` names the other fault exactly when the change lies in its window;
- signals across --repeat: a stop at a random run (raised, or a healed run reported interrupted) ends the series
  there, the interrupted run kept and never counted as passed or in the statistics;
- output paths checked up front: `--report-dir` shapes (a file, under a file, missing parents, unwritable).

The number of generated cases and their time are printed at the end of the module's run.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from types import SimpleNamespace as NS
from typing import Any

import pytest
import yaml
from _fuzz import Tally, report_fixture
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from clusterctl import cli
from clusterctl.chaos import stats
from clusterctl.chaos.analysis import analyze
from clusterctl.chaos.scenario import parse_scenario
from clusterctl.chaos.timeline import Marker, PartitionSample, Timeline
from clusterctl.errors import SpecError, UsageError
from clusterctl.spark.runner import job_names
from clusterctl.spec import validate, yamlfile
from clusterctl.spec.model import parse_spec

CASES = Tally()
FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)

report_count = report_fixture(CASES, "fuzz scenarios (issue 51): {n} generated cases in {seconds:.1f}s")

JOBS = job_names()
BASE_SPEC = yaml.safe_load(
    "name: lab\nprofile: offline\nkafka: {brokers: 3, defaults: {replication_factor: 3}}\n"
    "zookeeper: {nodes: 3}\nkafka_manager: {enabled: false}\n"
)


def run_cli(args: list[str]) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = cli.run(args)
    return code, err.getvalue()


# ---------------------------------------------------------------- strict loaders: duplicate keys


def _paths(doc: Any, prefix: str = "") -> list[str]:
    """Every mapping key's path in `doc` (a.b, steps[2].fault.broker)."""
    out = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            p = f"{prefix}.{k}" if prefix else str(k)
            out.append(p)
            out += _paths(v, p)
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, f"{prefix}[{i}]")
    return out


def _dump_with_duplicate(doc: Any, target: str, prefix: str = "") -> str:
    """`doc` as flow YAML, with the key at path `target` written twice (its second value the same)."""
    if isinstance(doc, dict):
        parts = []
        for k, v in doc.items():
            p = f"{prefix}.{k}" if prefix else str(k)
            item = f"{json.dumps(k)}: {_dump_with_duplicate(v, target, p)}"
            parts.append(item)
            if p == target:
                parts.append(item)
        return "{" + ", ".join(parts) + "}"
    if isinstance(doc, list):
        return "[" + ", ".join(_dump_with_duplicate(v, target, f"{prefix}[{i}]") for i, v in enumerate(doc)) + "]"
    return json.dumps(doc)  # JSON's scalars are YAML's


SHIPPED = sorted(Path("scenarios").glob("*.yaml"))


@FUZZ
@given(which=st.integers(0, len(SHIPPED)), pick=st.integers(0, 10_000))
def test_a_key_given_twice_is_refused_with_its_path(which: int, pick: int) -> None:
    with CASES.case():
        doc = BASE_SPEC if which == len(SHIPPED) else yaml.safe_load(SHIPPED[which].read_text())
        paths = _paths(doc)
        target = paths[pick % len(paths)]
        text = _dump_with_duplicate(doc, target)
        with pytest.raises(SpecError) as exc:
            yamlfile.load_text(text, "doc.yaml")
        assert exc.value.message.startswith(f"doc.yaml: YAML has the key {target!r} twice"), exc.value.message
        assert yamlfile.load_text(_dump_with_duplicate(doc, "-none-"), "doc.yaml") == doc  # once each: as before


# ---------------------------------------------------------------- strict loaders: loose scalars

NUMBER_FIELDS = [  # (path in a scenario, a valid value)
    (("topic", "partitions"), 3),
    (("topic", "replication_factor"), 3),
    (("steps", 1, "start_load", "rate"), 100),
    (("steps", 1, "start_load", "value_size"), 64),
    (("steps", 2, "fault", "broker"), 2),
    (("steps", 3, "wait_for", "timeout"), 30),
    (("steps", 3, "wait_for", "leader_changed", "partition"), 0),
]
LOOSE = [True, False, "3", "2.5", 3.5, "yes", "on", None]


def _scenario_doc() -> dict[str, Any]:
    return {
        "name": "loose",
        "topic": {"partitions": 3, "replication_factor": 3},
        "steps": [
            {"create_topic": {}},
            {"start_load": {"rate": 100, "value_size": 64}},
            {"fault": {"action": "kill-broker", "broker": 2}},
            {"wait_for": {"leader_changed": {"partition": 0}, "timeout": 30}},
            {"stop_load": {}},
        ],
    }


@FUZZ
@given(field=st.sampled_from(NUMBER_FIELDS), value=st.sampled_from(LOOSE))
def test_a_loose_scalar_where_a_number_belongs_is_refused_with_its_path(field: Any, value: Any) -> None:
    with CASES.case():
        path, good = field
        doc = _scenario_doc()
        node = doc
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = good
        parse_scenario(yaml.safe_dump(doc), "s.yaml")  # the valid value passes
        if isinstance(good, int) and isinstance(value, float) and path[-1] in ("rate", "timeout"):
            value = "2.5"  # a float is a number there: the loose spelling is the string
        node[path[-1]] = value
        with pytest.raises(SpecError) as exc:
            parse_scenario(yaml.safe_dump(doc), "s.yaml")
        leaf = path[-1]
        assert exc.value.message.startswith("s.yaml: ") and leaf in exc.value.message, exc.value.message
        assert "\n" not in exc.value.message


SPEC_NUMBERS = [("kafka", "brokers"), ("zookeeper", "nodes"), ("kafka", "defaults", "replication_factor")]


@FUZZ
@given(field=st.sampled_from(SPEC_NUMBERS), value=st.sampled_from([True, False, "3", 3.0]))
def test_the_spec_takes_no_boolean_string_or_float_for_a_count(field: tuple[str, ...], value: Any) -> None:
    with CASES.case():
        doc = yaml.safe_load(yaml.safe_dump(BASE_SPEC))
        node = doc
        for key in field[:-1]:
            node = node[key]
        node[field[-1]] = value
        with pytest.raises(SpecError) as exc:
            parse_spec(doc, "c.yaml")
        assert ".".join(field) in exc.value.message, exc.value.message


# ---------------------------------------------------------------- check before work


STEP_POOL: list[tuple[str, Any]] = [
    ("create_topic", {}),
    ("start_load", {"rate": 100}),
    ("stop_load", {}),
    ("verify", {}),
    ("fault", {"action": "kill-leader", "partition": 0}),
    ("fault", {"action": "kill-controller"}),
    ("fault", {"action": "start-broker", "broker": 1}),
    ("fault", {"action": "kill-broker", "broker": 2}),
    ("wait_for", {"leader_changed": {"partition": 0}}),
    ("wait_for", {"controller_changed": {}}),
    ("wait_for", {"isr_full": {}}),
    ("wait_for", {"zk_quorum": "ok"}),
    ("wait_for", {"controller_quorum": "ok"}),
    ("heal", {}),
    ("sleep", 1),
    ("spark_job", {"job": JOBS[0] if JOBS else "key_counts"}),
    ("spark_job", {"job": JOBS[0] if JOBS else "key_counts", "action": "stop"}),
    ("spark_job", {"job": "no_such_job"}),
    ("verify_spark", {"job": JOBS[0] if JOBS else "key_counts"}),
    ("wait_for", {"spark_committed": {"job": JOBS[0] if JOBS else "key_counts"}}),
]


def oracle(steps: list[tuple[str, Any]], mode: str, named_topic: bool) -> int | None:
    """The first step (1-based) whose references do not hold, or None: written apart from scenario_checks."""
    topic = named_topic
    load = ran = False
    spark: set[str] = set()
    started: set[str] = set()
    faults: list[tuple[int, str]] = []
    for i, (kind, a) in enumerate(steps, 1):
        if kind == "create_topic":
            topic = True
        uses = kind == "start_load" or (kind == "spark_job" and a.get("action", "start") == "start")
        uses |= kind == "fault" and a["action"] == "kill-leader"
        uses |= kind == "wait_for" and any(k in a for k in ("leader_changed", "isr_full"))
        if uses and not topic:
            return i
        if kind == "start_load":
            if load:
                return i
            load = ran = True
        if kind == "stop_load":
            if not load:
                return i
            load = False
        if kind == "verify" and not ran:
            return i
        if kind == "spark_job":
            if a["job"] not in JOBS:
                return i
            if a.get("action", "start") == "start":
                if a["job"] in spark:
                    return i
                spark.add(a["job"])
                started.add(a["job"])
            elif a["job"] not in spark:
                return i
            else:
                spark.discard(a["job"])
        if kind == "verify_spark" and a["job"] not in started:
            return i
        if kind == "wait_for":
            cond = next(k for k in a if k != "timeout")
            if cond == "controller_quorum" and mode == "zookeeper":
                return i
            if cond == "zk_quorum" and mode == "kraft":
                return i
            if cond == "spark_committed" and a[cond]["job"] not in spark:
                return i
            if cond in ("leader_changed", "controller_changed"):
                n = a[cond].get("fault")
                if n is None and not faults:
                    return i
                if n is not None and (n >= i or all(n != j or act.startswith("start-") for j, act in faults)):
                    return i
        if kind == "fault":
            faults.append((i, a["action"]))
    return None


@st.composite
def step_sequences(draw: st.DrawFn) -> tuple[list[tuple[str, Any]], str, bool]:
    n = draw(st.integers(1, 9))
    steps = [draw(st.sampled_from(STEP_POOL)) for _ in range(n)]
    steps = [(k, dict(a) if isinstance(a, dict) else a) for k, a in steps]
    for kind, a in steps:  # some conditions name their fault: any step number, right or wrong
        names_fault = kind == "wait_for" and any(k in a for k in ("leader_changed", "controller_changed"))
        if names_fault and draw(st.booleans()):
            cond = next(iter(a))
            a[cond] = {**a[cond], "fault": draw(st.integers(1, max(1, n)))}
    return steps, draw(st.sampled_from(["any", "zookeeper", "kraft"])), draw(st.booleans())


@settings(FUZZ, max_examples=300)
@given(case=step_sequences())
def test_scenario_references_are_checked_before_any_work(case: Any, tmp_path_factory: Any) -> None:
    with CASES.case():
        steps, mode, named = case
        doc = {"name": "gen", "requires": "kafka", "mode": mode, "topic": {"name": "t1"} if named else {},
               "steps": [{k: a} for k, a in steps]}  # fmt: skip
        bad = oracle(steps, mode, named)
        if bad is None:
            parse_scenario(yaml.safe_dump(doc), "g.yaml")
            return
        with pytest.raises(SpecError) as exc:
            parse_scenario(yaml.safe_dump(doc), "g.yaml")
        assert exc.value.message.startswith(f"g.yaml: step {bad} ("), (exc.value.message, steps)
        path = tmp_path_factory.mktemp("gen") / "g.yaml"
        path.write_text(yaml.safe_dump(doc))
        code, err = run_cli(["scenario", "validate", str(path)])
        lines = [ln for ln in err.splitlines() if ln.startswith("error: ")]
        assert code == 2 and len(lines) == 1 and f"step {bad} (" in lines[0], (code, err)


# ---------------------------------------------------------------- overlapping faults

T0 = 1_000.0


@FUZZ
@given(
    offset=st.floats(0.05, 30.0),
    move2=st.floats(0.1, 25.0),
    move3=st.floats(0.1, 25.0),
    heal1=st.floats(0.5, 40.0),
    heal2=st.floats(0.5, 40.0),
)
def test_each_leader_change_is_attributed_to_every_fault_whose_window_holds_it(
    offset: float, move2: float, move3: float, heal1: float, heal2: float
) -> None:
    with CASES.case():
        t2, t3 = T0, T0 + offset
        h2, h3 = t2 + heal1, t3 + heal2
        end = max(h2, h3) + 50
        tl = Timeline(T0 - 5, end, ["d"])
        tl.markers = sorted(
            [Marker(t2, "kill-broker", "broker 2"), Marker(t3, "kill-broker", "broker 3"),
             Marker(h2, "start-broker", "broker 2", heal=True), Marker(h3, "start-broker", "broker 3", heal=True)],
            key=lambda m: m.t,
        )  # fmt: skip
        c2, c3 = t2 + move2, t3 + move3  # partition 0 (led by 2) and 1 (led by 3) move to broker 1
        tl.partitions = sorted(
            [PartitionSample(T0 - 1, "d", 0, 2, [1, 2, 3], [1, 2, 3]),
             PartitionSample(T0 - 1, "d", 1, 3, [1, 2, 3], [1, 2, 3]),
             PartitionSample(c2, "d", 0, 1, [1, 2, 3], [1]), PartitionSample(c3, "d", 1, 1, [1, 2, 3], [1])],
            key=lambda s: s.t,
        )  # fmt: skip
        f2, f3 = analyze(tl)

        def window(t: float, heal: float, other_t: float) -> float:  # until the first fault after the heal
            return other_t if other_t > t and other_t > heal else end

        w2, w3 = window(t2, h2, t3), window(t3, h3, t2)
        # a change within a millisecond of a window's edge is a tie the report's rounding may put on either side
        assume(all(abs(c - edge) > 0.01 for c in (c2, c3) for edge in (t2, t3, w2, w3)))
        p0 = next(p for p in f2.partitions if p.partition == 0)
        if c2 <= w2:
            assert (p0.led_by_target, p0.new_leader) == (True, 1) and p0.time_to_new_leader_s == pytest.approx(
                move2, abs=1e-3
            )
            assert p0.also == (["kill-broker broker 3"] if t3 < c2 < w3 else [])
        else:
            assert p0.new_leader is None
        p1 = next(p for p in f3.partitions if p.partition == 1)
        assert p1.led_by_target and p1.leader_before == 3
        if c3 <= w3:
            assert p1.new_leader == 1 and p1.also == (["kill-broker broker 2"] if t2 < c3 < w2 else [])
        assert not next(p for p in f3.partitions if p.partition == 0).led_by_target


# ---------------------------------------------------------------- signals across --repeat


@FUZZ
@given(n=st.integers(1, 8), stop_at=st.integers(1, 9), how=st.sampled_from(["raised", "reported"]))
def test_one_stop_ends_the_series_there(n: int, stop_at: int, how: str, tmp_path_factory: Any) -> None:
    with CASES.case():
        scenario = NS(name="s", expect="no-loss", loss_settings=lambda: [])
        calls: list[int] = []

        def run_once(i: int, d: Path) -> Any:
            calls.append(i)
            if i == stop_at and how == "raised":
                raise KeyboardInterrupt
            return NS(ok=i != stop_at, verify=None, faults=[], report_html=None, error=None, interrupted=i == stop_at)

        rep = stats.repeat(run_once, n, tmp_path_factory.getbasetemp(), scenario, {})
        stopped = stop_at <= n
        assert calls == list(range(1, min(n, stop_at) + 1))
        assert rep.interrupted == stopped and rep.ok == (not stopped)
        kept = stop_at - (how == "raised") if stopped else n
        assert len(rep.runs) == kept and rep.passed == (stop_at - 1 if stopped else n)
        assert [r.verdict for r in rep.runs].count("INTERRUPTED") == (1 if stopped and how == "reported" else 0)


# ---------------------------------------------------------------- output paths up front


@FUZZ
@given(shape=st.lists(st.sampled_from(["dir", "file", "missing", "ro"]), min_size=1, max_size=4))
def test_report_dir_is_checked_before_any_work(shape: list[str], tmp_path_factory: Any) -> None:
    """Accepted exactly when the directory can then be made and written into (the oracle does just that)."""
    with CASES.case():
        base = tmp_path_factory.mktemp("out")
        p, made = base, True
        for i, kind in enumerate(shape):
            p = p / f"p{i}"
            if not made:
                continue
            if kind == "missing":
                made = False
            elif kind == "file":
                p.write_text("x")
                made = False
            else:
                p.mkdir()
                if kind == "ro":
                    p.chmod(0o555)
        try:
            validate.output_dir(p, "--report-dir")
            accepted = True
        except UsageError as exc:
            accepted = False
            assert exc.message.startswith(f"--report-dir {p} ") and "\n" not in exc.message
        try:
            p.mkdir(parents=True, exist_ok=True)
            (p / "report.json").write_text("{}")
            works = True
        except OSError:
            works = False
        assert accepted == works, (shape, accepted, works)
        for q in [base, *base.rglob("*")]:
            if q.is_dir():
                q.chmod(0o755)


# ---------------------------------------------------------------- ids the spec lacks, found by `scenario validate`

ID_FAULTS = [("pause-broker", "broker", {"for": 1}), ("kill-broker", "broker", {}), ("kill-zk", "zk", {}),
             ("partition-node", "node", {"for": 1})]  # fmt: skip


@FUZZ
@given(fault=st.sampled_from(ID_FAULTS), ident=st.integers(-3, 12), brokers=st.integers(1, 5),
       zk=st.sampled_from([1, 3, 5]), with_spec=st.booleans())  # fmt: skip
def test_validate_refuses_an_id_the_spec_lacks(
    fault: tuple[str, str, dict[str, Any]], ident: int, brokers: int, zk: int, with_spec: bool, tmp_path_factory: Any
) -> None:
    """With a spec at hand, `scenario validate` refuses a broker, ZooKeeper node or node the spec lacks (exit 2, the
    step named), as `scenario run` does when it starts; without one it checks the file alone. The adversarial tour
    of issue 51 found `validate` accepting `broker: 99` beside a 3-broker spec."""
    with CASES.case():
        action, key, extra = fault
        d = tmp_path_factory.mktemp("ids")
        rf = min(3, brokers)
        spec = {**BASE_SPEC, "kafka": {"brokers": brokers, "defaults": {"replication_factor": rf,
                                                                        "min_insync_replicas": max(1, rf - 1)}},
                "zookeeper": {"nodes": zk}}  # fmt: skip
        parse_spec(spec, "clusterctl.yaml")  # a valid spec: only the scenario's id is wrong
        (d / "clusterctl.yaml").write_text(yaml.safe_dump(spec))
        value: Any = f"kafka{ident}" if key == "node" else ident
        doc = {"name": "ids", "requires": "kafka", "topic": {"replication_factor": 1},
               "steps": [{"create_topic": {}}, {"fault": {"action": action, key: value, **extra}}]}  # fmt: skip
        (d / "s.yaml").write_text(yaml.safe_dump(doc))
        known = range(1, (zk if key == "zk" else brokers) + 1)
        args = ["-s", str(d / "clusterctl.yaml")] if with_spec else ["-s", str(d / "none.yaml")]
        code, err = run_cli([*args, "scenario", "validate", str(d / "s.yaml")])
        lines = [ln for ln in err.splitlines() if ln.strip()]
        if not with_spec:  # the file alone: an id is judged only against a spec
            assert code in (0, 2) and len(lines) == (code != 0), (code, err)
        elif ident in known:
            assert code == 0, (code, err)
        else:
            assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (code, err)
            assert (ident < 1 and key != "node") or "step 2 (" in lines[0], lines


@FUZZ
@given(
    root=st.sampled_from(["/sys", "/proc", "/sys/kernel", "/proc/sys"]),
    parts=st.lists(st.text(alphabet="abcxyz-_", min_size=1, max_size=12), min_size=1, max_size=3),
    what=st.sampled_from(["--report-dir", "--results"]),
)
def test_an_output_path_nothing_can_be_written_to_is_refused_up_front(root: str, parts: list[str], what: str) -> None:
    """On /sys and /proc nothing can be made, though os.access says yes to root (the adversarial tour of issue 51:
    `--results /sys/x` passed the check): refused up front with one line, as for any user."""
    with CASES.case():
        p = Path(root, *parts)
        with pytest.raises(UsageError) as exc:
            validate.output_file(p, what) if what == "--results" else validate.output_dir(p, what)
        target = p.parent if what == "--results" else p  # a file's check names the directory it goes in
        assert exc.value.message.startswith(f"{what} {target}") and "\n" not in exc.value.message
        assert not p.exists()


@FUZZ
@given(n=st.integers(256, 5000), where=st.sampled_from(["leaf", "middle"]), what=st.sampled_from(["init", "render"]))
def test_a_name_too_long_for_the_filesystem_is_one_line_exit_2(
    n: int, where: str, what: str, tmp_path_factory: Any
) -> None:
    """ENAMETOOLONG from an output path: one line, exit 2, nothing written (was exit 70, an unexpected OSError
    from Path.exists, for `init -o` and `render --output-dir`)."""
    with CASES.case():
        d = tmp_path_factory.mktemp("long")
        spec = d / "clusterctl.yaml"
        spec.write_text(yaml.safe_dump(BASE_SPEC))
        long = d / ("n" * n) if where == "leaf" else d / ("n" * n) / "x"
        before = sorted(p.name for p in d.iterdir())
        if what == "init":
            args = ["init", "--profile", "offline", "-o", str(long)]
        else:
            args = ["-s", str(spec), "render", "--output-dir", str(long)]
        code, err = run_cli(args)
        lines = [ln for ln in err.splitlines() if ln.startswith("error: ")]
        assert code == 2 and len(lines) == 1 and "too long" in lines[0], (code, err)
        assert sorted(p.name for p in d.iterdir()) == before
