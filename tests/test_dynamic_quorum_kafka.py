"""A dynamic controller quorum (kraft.quorum: dynamic, KIP-853) on real Kafka 4.x from Maven Central: 3 controllers +
3 brokers of clusterctl/kafka:<newest 4.x>, on a free subnet and free host ports.

`up` formats the controllers with `--initial-controllers` and the directory ids the topology chose; `quorum --json`
shows them. The drill `replace-dead-controller` wipes a voter under acks=all load, provisions a replacement on a fresh
disk, removes the dead entry and adds the replacement: nothing acknowledged is lost, every metadata write of the
probe commits, and the final quorum has 3 voters, the replaced one with a new directory id. Then `chaos
wipe-controller` and `chaos heal`: the heal does the same replacement by itself.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _runtime_helpers import cli, cli_json, release, render, up_json, write_kraft_spec

from clusterctl.images import build as images
from clusterctl.images import kafka_maven
from clusterctl.spec.model import load_spec

pytestmark = [pytest.mark.real_kafka, pytest.mark.docker]


@pytest.fixture(scope="module")
def dynamic_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    built = {r.target: r for r in images.build_images(["kafka"], kafka_version=kafka_maven.NEWEST_KAFKA_LINE)}
    version = built["kafka"].image.rpartition(":")[2]
    assert version.startswith("4."), version
    spec_path = write_kraft_spec(
        tmp_path_factory.mktemp("dynamic-quorum"), f"ctldq-{uuid.uuid4().hex[:6]}", version, quorum="dynamic"
    )
    render(spec_path)
    try:
        up = up_json(spec_path, timeout=300)
        assert [(f["service"], f["flag"]) for f in up["formatted"]] == [
            (f"controller{i}", "--initial-controllers") for i in (1, 2, 3)
        ], up["formatted"]
        yield spec_path
    finally:
        release(spec_path)


def _voters(spec_path: Path) -> dict[int, str]:
    q = cli_json(spec_path, "quorum")
    return {m["node_id"]: m["directory_id"] for m in q["members"] if m["role"] != "observer"}


def test_up_formats_the_voters_with_the_directory_ids_of_the_topology(dynamic_cluster: Path) -> None:
    topo = load_spec(dynamic_cluster).topology
    assert _voters(dynamic_cluster) == {n: topo.controller_directory_id(n) for n in (101, 102, 103)}
    table = cli(dynamic_cluster, "quorum")
    assert table.returncode == 0 and "(dynamic)" in table.stdout and topo.controller_directory_id(101) in table.stdout


def test_replace_dead_controller_loses_nothing(dynamic_cluster: Path) -> None:
    before = _voters(dynamic_cluster)
    report_dir = dynamic_cluster.parent / "replace-dead-controller"
    res = cli(dynamic_cluster, "scenario", "run", "replace-dead-controller", "--json", "--report-dir",
              str(report_dir), timeout=900)  # fmt: skip
    out: dict[str, Any] = json.loads(res.stdout)
    assert res.returncode == 0, f"{out.get('error')} / {res.stderr[-2000:]}"
    v, m = out["verify"], out["metadata_writes"]
    assert out["ok"] and v["lost_count"] == 0 and v["acked"] > 1000, v
    # the quorum stayed writable: every metadata write committed, none waited past the scenario's max_gap
    assert m["writes"] > 20 and m["failed"] == 0 and m["longest_gap_s"] <= 10, m
    wiped = next(f for f in out["faults"] if f["action"] == "wipe-controller")
    node = int(wiped["target"].split()[1])
    removed, added = out["quorum_changes"]
    assert (removed["action"], removed["node_id"], removed["directory_id"]) == ("remove-controller", node, before[node])
    assert added["action"] == "add-controller" and added["node_id"] == node and added["directory_id"] != before[node]
    after = _voters(dynamic_cluster)
    assert after == {**before, node: added["directory_id"]} and len(after) == 3, (before, after)
    report = json.loads((report_dir / "report.json").read_text())
    assert "controller-quorum" in (report_dir / "report.html").read_text()
    steps = [f"{s['description']} {s['took_s']}s" for s in report["steps"] if s["kind"] in ("quorum", "wait_for")]
    print(
        f"\nreplace-dead-controller: wiped {node}, {v['acked']} acked, 0 lost; longest metadata-write gap "
        f"{m['longest_gap_s']}s ({m['bound']}), load {m['load_average']}; steps {', '.join(steps)}"
    )


def test_chaos_heal_replaces_a_wiped_controller(dynamic_cluster: Path) -> None:
    before = _voters(dynamic_cluster)
    wiped = cli_json(dynamic_cluster, "chaos", "wipe-controller", "101")
    assert [(w["action"], w["target"], w["after"]) for w in wiped] == [("wipe-controller", "controller 101", "removed")]
    healed = cli_json(dynamic_cluster, "chaos", "heal")
    actions = [(h["action"], h["target"]) for h in healed["healed"]]
    assert actions == [("provision-controller", "controller 101"), ("remove-controller", "controller 101"),
                           ("add-controller", "controller 101")], actions  # fmt: skip
    after = _voters(dynamic_cluster)
    assert set(after) == {101, 102, 103} and after[101] != before[101] and after[102] == before[102], (before, after)
