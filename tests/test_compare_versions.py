"""`scenario compare --versions`: argument handling, the derived clusters and the table (no container runs here;
tests/test_scenario_compare.py has the real run of 3.9.2 vs 4.4.0).

The refusals run the real `clusterctl` and must start nothing: no report directory, no results file, no render.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterctl.chaos import compare
from clusterctl.errors import UsageError
from clusterctl.spec.model import parse_spec

CLI = str(Path(sys.executable).parent / "clusterctl")  # the console script of the running environment


def _one_line(message: str) -> str:
    assert "\n" not in message
    return message


def test_compare_versions_arguments() -> None:
    assert compare.parse_versions("3.9.2, 4.4.0", ["3.9.2", "4.4.0"]) == ["3.9.2", "4.4.0"]
    assert compare.parse_versions("4.4.0,3.9.2", None) == ["4.4.0", "3.9.2"]  # None: not checked (summary only)
    bad = {
        "": "--versions takes exact Kafka versions",
        "3.9.2,3.9.2": "--versions takes exact Kafka versions",
        "3.9,4.4.0": "--versions takes exact Kafka versions",
        "3.9.2;4.4.0": "--versions takes exact Kafka versions",
        "3.2.0,4.4.0": "Kafka 3.2.0 has no production KRaft mode (3.3+)",
        "3.9.2,4.9.9": "image clusterctl/kafka:4.9.9 is not built here: "
        "`clusterctl images build kafka --kafka-version 4.9.9`",
    }
    for text, words in bad.items():
        with pytest.raises(UsageError) as err:
            compare.parse_versions(text, ["3.9.2", "4.4.0"])
        assert words in _one_line(str(err.value)) and err.value.exit_code == 2


def test_spec_for_version_derives_a_kraft_cluster_per_version() -> None:
    zk = parse_spec({"name": "lab", "profile": "offline", "network": {"subnet": "10.93.0.0/24"},
                     "kafka_manager": {"enabled": False}, "kafka": {"host_port": 41000}})  # fmt: skip
    three, four = (compare.spec_for_version(zk, v) for v in ("3.9.2", "4.4.0"))
    assert (three.name, three.kafka.mode, three.broker_image) == ("lab-v392", "kraft", "clusterctl/kafka:3.9.2")
    assert (four.name, four.kafka.mode, four.broker_image) == ("lab-v440", "kraft", "clusterctl/kafka:4.4.0")
    assert three.network.subnet == four.network.subnet == "10.93.0.0/24"
    assert three.kafka.host_port == four.kafka.host_port == 41000
    assert compare.bounding(three) == compare.bounding(four) == ("broker.session.timeout.ms", 9000)
    exact = parse_spec({"name": "lab", "profile": "offline", "kafka": {"mode": "kraft", "version": "4.4.0"}})
    assert compare.spec_for_version(exact, "4.4.0") is exact
    with pytest.raises(UsageError, match="--versions compares the offline images"):
        compare.spec_for_version(parse_spec({"name": "lab"}), "3.9.2")


def _row(version: str | None, by: str, detected: float, lost: int = 0, mode: str = "kraft") -> compare.CompareRun:
    return compare.CompareRun(mode, "c", "kill-leader", lost == 0, 0.0, detected, "metadata", detected, detected + 0.5,
                              lost, "broker.session.timeout.ms", 9000, kafka_version=version, by=by)  # fmt: skip


def test_compare_versions_table_keeps_the_two_kinds_of_series_apart(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    rows = [_row("3.9.2", "version", 8.0), _row("3.9.2", "version", 9.0), _row("4.4.0", "version", 7.0, lost=1),
            _row("3.9.2", "mode", 20.0), _row(None, "mode", 15.0, mode="zookeeper")]  # fmt: skip
    for r in rows:
        compare.append_run(path, r)
    runs = compare.load_runs(path, "kill-leader")
    by_version = compare.summarize(runs, versions=["3.9.2", "4.4.0"])
    assert [(s.kafka_version, s.runs, s.passed, s.lost_total) for s in by_version] == [
        ("3.9.2", 2, 2, 0),
        ("4.4.0", 1, 0, 1),
    ]
    assert by_version[0].detected_s.text() == "8.50 (8.00-9.00)"
    by_mode = compare.summarize(runs)
    assert [(s.mode, s.runs, s.kafka_version) for s in by_mode] == [("zookeeper", 1, None), ("kraft", 1, None)]
    labels, table = compare.side_by_side(by_version)
    assert labels == ["Kafka 3.9.2", "Kafka 4.4.0"]
    assert [r["metric"] for r in table] == ["runs (passed)", "acknowledged writes lost", "bounding setting",
                                            "detection s, median (min-max)", "new leader s", "write gap s"]  # fmt: skip
    assert table[0] == {"metric": "runs (passed)", "Kafka 3.9.2": "2 (2)", "Kafka 4.4.0": "1 (0)"}
    assert table[2]["Kafka 4.4.0"] == "broker.session.timeout.ms=9000"
    assert compare.side_by_side(by_mode)[0] == ["zookeeper", "kraft"]
    # a row written before versions were compared reads as a mode comparison
    legacy: dict[str, Any] = {
        k: v for k, v in vars(_row(None, "mode", 9.0)).items() if k not in ("kafka_version", "by")
    }
    path.write_text(json.dumps(legacy) + "\n")
    (old,) = compare.load_runs(path)
    assert (old.by, old.kafka_version) == ("mode", None)


def _compare_cli(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    spec = tmp_path / "clusterctl.yaml"
    spec.write_text(yaml.safe_dump({"name": "lab", "profile": "offline", "network": {"subnet": "10.93.1.0/24"},
                                    "kafka_manager": {"enabled": False}}))  # fmt: skip
    return subprocess.run([CLI, "-s", str(spec), "scenario", "compare", "kill-leader", *args, "--results",
                           str(tmp_path / "r.jsonl"), "--report-dir", str(tmp_path / "reports")],
                          capture_output=True, text=True, cwd=tmp_path, timeout=120)  # fmt: skip


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--versions", "3.9.2,4.4.0", "--modes", "kraft"], "--modes and --versions are mutually exclusive"),
        (["--modes", "kraft", "--versions", "3.9.2"], "--modes and --versions are mutually exclusive"),
        (
            ["--versions", "3.9.97,4.9.9"],
            "image clusterctl/kafka:3.9.97 is not built here: `clusterctl images build kafka --kafka-version 3.9.97`",
        ),
        (["--versions", "4.4"], "--versions takes exact Kafka versions"),
    ],
)
def test_compare_versions_refusals_through_the_cli(tmp_path: Path, args: list[str], words: str) -> None:
    proc = _compare_cli(tmp_path, *args, "--repeat", "1")
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and words in lines[0], lines
    assert not (tmp_path / "reports").exists() and not (tmp_path / "r.jsonl").exists()  # refused before any work
    assert not (tmp_path / "compose").exists()


def test_compare_versions_summary_only_prints_the_table(tmp_path: Path) -> None:
    results = tmp_path / "r.jsonl"
    for r in [_row("3.9.2", "version", 8.0), _row("4.4.0", "version", 7.0), _row("3.9.2", "mode", 20.0)]:
        compare.append_run(results, r)
    proc = _compare_cli(tmp_path, "--versions", "3.9.2,4.4.0", "--summary-only", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert [(v["kafka_version"], v["runs"]) for v in out["versions"]] == [("3.9.2", 1), ("4.4.0", 1)]
    assert [r["by"] for r in out["runs"]] == ["version", "version"]
    text = _compare_cli(tmp_path, "--versions", "3.9.2,4.4.0", "--summary-only")
    assert text.returncode == 0, text.stderr
    assert "kill-leader: Kafka 3.9.2 vs 4.4.0, KRaft" in text.stdout
    line = next(ln for ln in text.stdout.splitlines() if "detection s" in ln)
    assert "8.00 (8.00-8.00)" in line and "7.00 (7.00-7.00)" in line
