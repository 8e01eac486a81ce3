"""The migration drills on real Kafka 3.9 (the session's, from Maven Central): `scenario run zk-to-kraft`,
`zk-to-kraft-rollback` then `zk-to-kraft-rollback-from-kraft-brokers` (one cluster: a rolled-back migration starts
again), and `zk-to-kafka4` (on to the newest 4.x), each test on its own fresh 3 ZooKeeper + 3 broker cluster.
Test-only spec: a free subnet and free host ports.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _runtime_helpers import cli, leftovers, release, render, up_json, write_spec
from conftest import kafka_dist

from clusterctl.images import build as images
from clusterctl.images import kafka_maven
from clusterctl.spec.model import load_spec

pytestmark = [pytest.mark.real_kafka, pytest.mark.docker]
PHASES = ["1 controllers", "2 migration-mode", "3 kraft-brokers", "4 finalize", "5 remove-zookeeper"]


@pytest.fixture
def zk_cluster(tmp_path: Path) -> Iterator[Path]:
    images.build_images(["kafka"], kafka_dist=kafka_dist())
    spec_path = write_spec(tmp_path, f"ctldrill-{uuid.uuid4().hex[:6]}", engine="kafka", brokers=3, tick_time_ms=None)
    render(spec_path)
    try:
        up_json(spec_path, timeout=300)
        yield spec_path
    finally:
        release(spec_path)


def _run(spec_path: Path, scenario: str) -> Any:
    res = cli(spec_path, "scenario", "run", scenario, "--report-dir", "report", "--json", timeout=1800)
    assert res.returncode == 0, res.stderr[-4000:]
    result = json.loads(res.stdout)
    print(f"\n{scenario}: " + json.dumps(result["phases"], indent=1))
    assert result["verdict"] == "PASS" and result["verify"]["lost_count"] == 0
    assert (spec_path.parent / "report" / "report.html").is_file()
    return result


def test_zk_to_kraft_under_load_keeps_every_write(zk_cluster: Path) -> None:
    result = _run(zk_cluster, "zk-to-kraft")
    assert [(p["phase"], p["done"]) for p in result["phases"]] == [(p, True) for p in PHASES]
    assert all(p["write_gap_s"] is not None for p in result["phases"])
    assert [s["name"] for s in result["snapshots"]] == ["before", "after"]
    assert load_spec(zk_cluster).kraft_mode
    # `down` and `up` afterwards keep the data: every acknowledged write is still read back
    from clusterctl.chaos.load import verify_drill

    assert cli(zk_cluster, "down").returncode == 0
    up_json(zk_cluster, timeout=300)
    ledger = zk_cluster.parent / "report" / "ledger.jsonl"
    again = verify_drill(load_spec(zk_cluster).topology.bootstrap_servers, ledger)
    assert again.ok and again.lost_count == 0 and again.acked == result["verify"]["acked"]
    # `down --volumes` removes ZooKeeper's volumes too, though the migrated file no longer has ZooKeeper
    project = load_spec(zk_cluster).topology.project
    assert any("zk" in v for v in leftovers(project)["volumes"])
    down = cli(zk_cluster, "down", "--volumes", "--json")
    assert down.returncode == 0, down.stderr[-2000:]
    assert json.loads(down.stdout)["volumes_kept"] == []
    assert leftovers(project) == {"containers": [], "networks": [], "volumes": []}


def test_zk_to_kraft_rolled_back_from_dual_write_then_from_kraft_brokers(zk_cluster: Path) -> None:
    """Rollback from phase 2, then, on the same cluster (a rolled-back migration starts again from phase 1), from
    phase 3: the brokers back into ZooKeeper mode first (migration still on), then phase 2's revert."""
    result = _run(zk_cluster, "zk-to-kraft-rollback")
    assert [(p["phase"], p["done"]) for p in result["phases"]] == [(p, True) for p in [*PHASES[:2], "rollback"]]
    assert not load_spec(zk_cluster).kraft_mode
    status = json.loads(cli(zk_cluster, "migrate", "kraft", "--status", "--json").stdout)
    assert [p["state"] for p in status["phases"]][:2] == ["rolled back", "rolled back"]

    result = _run(zk_cluster, "zk-to-kraft-rollback-from-kraft-brokers")
    assert [(p["phase"], p["done"]) for p in result["phases"]] == [(p, True) for p in [*PHASES[:3], "rollback"]]
    assert not load_spec(zk_cluster).kraft_mode
    status = json.loads(cli(zk_cluster, "migrate", "kraft", "--status", "--json").stdout)
    assert [p["state"] for p in status["phases"]][:3] == ["rolled back"] * 3
    up = json.loads(cli(zk_cluster, "status", "--json").stdout)
    name = load_spec(zk_cluster).name
    assert up["migration"]["next"] == f"`migrate kraft` starts the migration of {name} again from phase 1"
    assert not any(s["role"] == "controller" for s in up["services"]), up["services"]
    assert up["quorum"]["has_quorum"] and up["brokers_missing"] == [], up


def test_zk_to_kafka4_the_whole_road_as_one_drill(zk_cluster: Path) -> None:
    """ZooKeeper 3.9 → KRaft 3.9 → the newest 4.x built here → finalized, under load: 0 lost, snapshots equal."""
    from clusterctl.kafka import upgrade_plan as plan

    images.build_images(["kafka"], kafka_version=kafka_maven.NEWEST_KAFKA_LINE)
    result = _run(zk_cluster, "zk-to-kafka4")
    newest = load_spec(zk_cluster).kafka.version
    assert newest is not None and newest.startswith("4."), newest
    phases = [p["phase"] for p in result["phases"] if p["done"]]
    assert phases[:5] == PHASES and all(p.endswith(f" to {newest}") for p in phases[5:]), phases
    assert len(phases[5:]) == 6, phases  # 3 controllers + 3 brokers, each rolled once
    assert [s["name"] for s in result["snapshots"]] == ["before", "kraft", "after"]
    state = plan.load_state(plan.state_path(zk_cluster))
    assert state is not None and state.finalized == plan.release(newest)
