"""Packaging truth: the declared dependency ranges match what the code uses, and optional extras stay optional."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from packaging.requirements import Requirement
from packaging.version import Version

if sys.version_info >= (3, 11):
    import tomllib
else:  # pytest itself depends on tomli before 3.11
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent


def _project() -> dict:
    return dict(tomllib.loads((REPO / "pyproject.toml").read_text())["project"])


def _requirements() -> list[tuple[str, Requirement]]:
    project = _project()
    out = [("dependencies", Requirement(r)) for r in project["dependencies"]]
    for extra, reqs in project["optional-dependencies"].items():
        out += [(extra, Requirement(r)) for r in reqs]
    return out


def test_typer_range_matches_the_private_internals_the_cli_uses() -> None:
    """cli/__init__.py needs typer._click (typer >= 0.26), cli/fastparams.py typer's runtime-param hooks (>= 0.29);
    both are private, so the range ends at the next minor version, and the installed typer is inside it."""
    (typer_req,) = [r for _, r in _requirements() if r.name == "typer"]
    bounds = {s.operator: Version(s.version) for s in typer_req.specifier}
    assert set(bounds) == {">=", "<"}, typer_req
    assert bounds[">="] >= Version("0.29") and bounds["<"] <= Version(f"0.{bounds['>='].minor + 1}"), typer_req
    installed = metadata.version("typer")
    assert typer_req.specifier.contains(installed), (installed, typer_req)

    import typer._click.exceptions as click_exc
    import typer.core as core
    from typer._coercion import RuntimeParam
    from typer._param_types import coerce_cli_path

    assert issubclass(click_exc.NoArgsIsHelpError, click_exc.ClickException)
    assert isinstance(RuntimeParam, type) and callable(coerce_cli_path)
    assert callable(core.build_runtime_param) and hasattr(core._TyperParameter, "get_runtime_param")


def test_each_dependency_is_listed_once() -> None:
    names = [(where, re.sub(r"[-_.]+", "-", r.name.lower())) for where, r in _requirements()]
    seen: dict[str, list[str]] = {}
    for where, name in names:
        seen.setdefault(name, []).append(where)
    assert {n: w for n, w in seen.items() if len(w) > 1} == {}


def test_spark_tests_skip_without_the_spark_extra(tmp_path: Path) -> None:
    """Without pyspark/pyarrow (hidden here by a shim that fails their import), collecting the spark tests skips
    them with the reason instead of aborting the whole run."""
    for name in ("pyspark", "pyarrow"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "__init__.py").write_text(
            f"raise ModuleNotFoundError({f'No module named {name} (hidden)'!r}, name={name!r})\n"
        )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(REPO)])}
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "tests/test_spark.py",
         "tests/test_packaging.py::test_each_dependency_is_listed_once"],
        capture_output=True, text=True, timeout=120, cwd=REPO, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    # the rest of the run goes on: the other test passes, the spark module is one skip with its reason
    assert "1 passed, 1 skipped" in proc.stdout and "needs the spark extra" in proc.stdout, proc.stdout[-3000:]
