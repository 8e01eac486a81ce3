"""Output into a pipe or a log (stdout not a terminal) keeps every value whole: no `…` in any table cell,
no line of a value wrapped away, error lines in one piece; `--json` unchanged. Against tansu."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from clusterctl.kafka import admin, clients

pytestmark = pytest.mark.tansu

CLUSTERCTL = Path(sys.executable).parent / "clusterctl"


def piped(*args: str, columns: str | None = "80") -> subprocess.CompletedProcess[str]:
    """The real CLI with stdout and stderr into pipes, as in `clusterctl ... | cat` or a CI log."""
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "CLUSTERCTL_BOOTSTRAP_SERVER")}
    if columns is not None:
        env["COLUMNS"] = columns
    return subprocess.run([str(CLUSTERCTL), *args], capture_output=True, text=True, timeout=90, env=env)


def table_rows(text: str) -> list[list[str]]:
    lines = [line.replace("┃", "│") for line in text.splitlines()]
    return [[c.strip() for c in line.strip("│ ").split("│")] for line in lines if "│" in line]


def assert_whole(text: str) -> None:
    assert "…" not in text, f"truncated output:\n{text}"


@pytest.mark.parametrize("columns", ["80", "40", None])
def test_topic_and_group_describe_keep_long_values(bootstrap: str, unique_name: str, columns: str | None) -> None:
    topic = f"{unique_name}-" + "orders-eu-west-1-" * 6  # ~140 characters: wider than any default terminal
    group = f"{unique_name}-reporting-pipeline-" + "stage-" * 8
    admin.create_topic(bootstrap, topic, 3, 1, {"retention.ms": "3600000"})
    clients.produce(bootstrap, topic, [(f"k{i}", f"v{i}") for i in range(30)])
    got = list(clients.consume(bootstrap, topic, start="beginning", group=group, max_messages=30, timeout=20))
    assert len(got) == 30

    desc = piped("topic", "describe", topic, "-b", bootstrap, columns=columns)
    assert desc.returncode == 0, desc.stderr
    assert_whole(desc.stdout)
    assert desc.stdout.splitlines()[0].startswith(f"Topic: {topic}  PartitionCount: 3")
    rows = table_rows(desc.stdout)
    assert ["Partition", "Leader", "Replicas", "Isr", "Status"] in rows
    assert sorted(r[0] for r in rows[1:]) == ["0", "1", "2"] and all(r[4] == "ok" for r in rows[1:])

    grp = piped("group", "describe", group, "-b", bootstrap, columns=columns)
    assert grp.returncode == 0, grp.stderr
    assert_whole(grp.stdout)
    lines = grp.stdout.splitlines()
    assert any(line.split() == ["Group", group] for line in lines)  # the key/value part: one line, whole value
    offsets = [r for r in table_rows(grp.stdout) if r[0] == topic]
    assert sorted(r[1] for r in offsets) == ["0", "1", "2"]  # the topic cell whole, in every row
    assert sum(int(r[2]) for r in offsets) == 30

    # --json is the machine format, untouched by the width
    doc = json.loads(piped("group", "describe", group, "-b", bootstrap, "--json", columns=columns).stdout)
    assert doc["group"] == group and {o["topic"] for o in doc["offsets"]} == {topic}


def test_long_error_line_is_one_whole_line(bootstrap: str, unique_name: str) -> None:
    missing = f"{unique_name}-" + "no-such-topic-" * 10
    res = piped("topic", "describe", missing, "-b", bootstrap)
    assert res.returncode == 3, res.stderr  # not found
    assert res.stdout == ""
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and missing in lines[0], res.stderr
