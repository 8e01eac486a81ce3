"""Start-up stays light: what `--help`, `--version`, completion and a light command import, and the option
conversion that keeps pydantic out of them (clusterctl/cli/fastparams.py) agrees with typer's own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer.core
import typer.main

from clusterctl import __version__
from clusterctl.cli import app, fastparams

REPO = Path(__file__).resolve().parent.parent
HEAVY = ("pydantic", "confluent_kafka", "docker", "kazoo", "numpy", "yaml", "jinja2", "hdrh", "pyspark", "requests")

PROBE = """
import json, sys
sys.argv = ["clusterctl", *json.loads(sys.argv[1])]
from clusterctl.cli import main
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted({m.split(".")[0] for m in sys.modules} | {m for m in sys.modules if m.startswith("rich.")})),
      file=sys.stderr)
"""


def loaded_after(*args: str, env: dict[str, str] | None = None) -> tuple[set[str], str]:
    """Top-level packages (and rich submodules) imported by one real run of `clusterctl ARGS`."""
    import os

    proc = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(list(args))],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )
    *_, last = proc.stderr.strip().splitlines()
    return set(json.loads(last)), proc.stdout


@pytest.mark.parametrize(
    "args",
    [["--help"], ["topic", "--help"], ["perf", "produce", "--help"], ["up", "--help"], ["zk", "get", "--help"]],
)
def test_help_imports_nothing_heavy(args: list[str]) -> None:
    mods, out = loaded_after(*args)
    assert "Usage: clusterctl" in out
    assert not mods & set(HEAVY), f"clusterctl {' '.join(args)} imported {sorted(mods & set(HEAVY))}"
    assert not {m for m in mods if m.startswith("rich.")}  # plain help: no console, markup, text or tables
    assert "tarfile" not in mods


def test_completion_imports_nothing_heavy() -> None:
    env = {"_CLUSTERCTL_COMPLETE": "complete_bash", "COMP_WORDS": "clusterctl topic ", "COMP_CWORD": "2"}
    mods, out = loaded_after(env=env)
    assert set(out.split()) >= {"create", "list", "describe", "delete", "alter", "configs"}
    assert not mods & set(HEAVY)


def test_version_names_clusterctl_client_library_and_python() -> None:
    mods, out = loaded_after("--version")
    import confluent_kafka

    lines = out.splitlines()
    assert lines[0] == f"clusterctl {__version__}"
    assert lines[1] == f"confluent-kafka {confluent_kafka.version()} (librdkafka {confluent_kafka.libversion()[0]})"
    assert lines[2].startswith(f"Python {sys.version_info.major}.{sys.version_info.minor}.")
    assert not mods & {"pydantic", "docker", "kazoo", "numpy", "yaml", "jinja2"}


def test_topic_list_loads_the_kafka_client_only(bootstrap: str, unique_name: str) -> None:
    from clusterctl.kafka.admin import create_topic

    create_topic(bootstrap, unique_name, 1, 1)
    mods, out = loaded_after("topic", "list", "-b", bootstrap)
    assert unique_name in out
    assert "confluent_kafka" in mods
    assert not mods & {"pydantic", "docker", "kazoo", "numpy", "yaml", "jinja2", "hdrh"}


# ---------------------------------------------------------------- option conversion vs typer's own

SAMPLES: dict[Any, list[Any]] = {
    str: ["abc", "", " spaced ", "-", "1"],
    int: ["12", "-3", "+4", "007", " 5", "5 ", "1e3", "1.0", "1_000", "abc", "", 3, -1],
    float: ["1", "2.5", "-1", "+.5", "5.", "1e3", "1E-3", " 2", "inf", "nan", "abc", "", 3, -1, 2.5],
    bool: [True, False, "true", "no", "1", ""],
    Path: ["a/b", "/nonexistent/x", ".", "", Path("x")],
}


def _outcome(runtime: Any, value: Any, param: Any, ctx: Any) -> Any:
    try:
        got = runtime.coerce(value, param=param, ctx=ctx)
        return ("ok", type(got).__name__, repr(got))  # repr: nan == nan
    except Exception as exc:
        return ("error", type(exc).__name__, str(exc))


def test_fast_option_conversion_matches_typer_for_every_option() -> None:
    fastparams.install()
    from typer._coercion import build_runtime_param as typer_build

    assert typer.core.build_runtime_param is not typer_build, "fastparams.install() did not take effect"
    root = typer.main.get_command(app)
    ctx = root.make_context("clusterctl", ["--help"], resilient_parsing=True)
    checked = 0
    stack: list[Any] = [root]
    while stack:
        cmd = stack.pop()
        stack.extend(getattr(cmd, "commands", {}).values())
        for param in cmd.params:
            desc = getattr(param, "type_descriptor", None)
            if desc is None:
                continue
            fast, slow = typer.core.build_runtime_param(desc), typer_build(desc)
            kind = desc.annotation
            if getattr(kind, "__origin__", None) is list:
                kind = kind.__args__[0]
            values = SAMPLES.get(kind, [])
            if desc.is_list or param.multiple:
                values = [tuple(v for v in values if isinstance(v, str))[:3], ()]
            for value in values:
                got, want = _outcome(fast, value, param, ctx), _outcome(slow, value, param, ctx)
                assert got == want, f"{cmd.name} {param.name} {value!r}: fast {got} != typer {want}"
                checked += 1
    assert checked > 300


# ---------------------------------------------------------------- one module per command line


def _top_level(app: Any) -> set[str]:
    return set(typer.main.get_command(app).commands)  # type: ignore[attr-defined]


def test_each_command_is_registered_by_the_module_main_imports_for_it() -> None:
    from clusterctl.cli import COMMAND_MODULE, NOUN_MODULES, build_app

    for module in NOUN_MODULES:
        mapped = {cmd for cmd, mod in COMMAND_MODULE.items() if mod == module}
        assert _top_level(build_app([module])) == mapped, module


def test_app_for_builds_only_the_named_command_module() -> None:
    from clusterctl.cli import app_for

    assert _top_level(app_for(["-s", "x.yaml", "--local-time", "topic", "list"])) == {"topic", "produce", "consume"}
    assert _top_level(app_for(["--spec", "status", "zk", "status"])) == {"zk"}  # `status` is the option's value
    everything = _top_level(app)
    for argv in (["--help"], [], ["--version"], ["no-such-command"]):
        assert _top_level(app_for(argv)) == everything


def test_root_options_taking_a_value_are_known() -> None:
    from clusterctl.cli import ROOT_OPTIONS_WITH_VALUE

    root = typer.main.get_command(app)
    with_value = {o for p in root.params if not getattr(p, "is_flag", False) for o in p.opts}
    assert set(ROOT_OPTIONS_WITH_VALUE) == with_value
