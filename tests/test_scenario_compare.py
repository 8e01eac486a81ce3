"""`scenario compare kill-leader` on real Apache Kafka: `--modes zookeeper,kraft --repeat 1` (the session's Kafka), and
`--versions <3.9.x>,<newest 4.x> --repeat 1` (both in KRaft mode).

Each test has its own spec (a free subnet and free host ports): compare renders and starts the first cluster (the
ZooKeeper-mode one; the 3.9.x one), runs the drill, removes it, then does the same with the second (the derived
KRaft-mode one; the 4.x one). Every run loses nothing, and its new-leader time stays within the setting that bounds
it (+ 5 s).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import yaml
from _runtime_helpers import cli, leftovers

from clusterctl.chaos.compare import spec_for_mode
from clusterctl.images import build as images
from clusterctl.runtime import allocate
from clusterctl.runtime.cluster import Cluster
from clusterctl.spec.model import load_spec

pytestmark = [pytest.mark.real_kafka, pytest.mark.docker]


def test_compare_kill_leader_zookeeper_vs_kraft(tmp_path: Path) -> None:
    from conftest import kafka_dist

    dist = kafka_dist()
    assert dist is not None
    images.build_images(["zookeeper", "kafka"], kafka_dist=dist)
    base = allocate.free_port_block(6)
    name = f"ctlcmp-{uuid.uuid4().hex[:6]}"
    spec_path = tmp_path / "clusterctl.yaml"
    data = {
        "name": name,
        "profile": "offline",
        "network": {"subnet": allocate.free_subnet()},
        "zookeeper": {"nodes": 3, "client_port": base, "tick_time_ms": 500},
        "kafka": {"engine": "kafka", "brokers": 3, "host_port": base + 3,
                  "defaults": {"replication_factor": 3, "min_insync_replicas": 2, "heap": "384m"}},
        "kafka_manager": {"enabled": False},
    }  # fmt: skip
    spec_path.write_text(yaml.safe_dump(data, sort_keys=False))
    spec = load_spec(spec_path)
    results = tmp_path / "compare.jsonl"
    try:
        res = cli(spec_path, "scenario", "compare", "kill-leader", "--modes", "zookeeper,kraft", "--repeat", "1",
                  "--results", str(results), "--report-dir", str(tmp_path / "reports"), "--json",
                  timeout=1500)  # fmt: skip
        assert res.returncode == 0, f"{res.stdout[-2000:]} / {res.stderr[-3000:]}"
    finally:
        # compare removes each cluster it started; make sure, whatever happened
        for mode in ("zookeeper", "kraft"):
            mode_spec = spec_for_mode(spec, mode)
            if any(leftovers(mode_spec.topology.project).values()):
                Cluster(mode_spec).down(volumes=True)
    out = json.loads(res.stdout)
    assert out["scenario"] == "kill-leader"
    runs = out["runs"]
    assert [r["mode"] for r in runs] == ["zookeeper", "kraft"]
    failed = [{k: r[k] for k in ("mode", "ok", "lost", "error", "detected_s", "new_leader_s", "report")}
              for r in runs if not (r["ok"] and r["lost"] == 0 and r["error"] is None)]  # fmt: skip
    assert not failed, failed
    bounds = {
        "zookeeper": ("zookeeper.session.timeout.ms", spec.kafka.defaults.zookeeper_session_timeout_ms),
        "kraft": ("broker.session.timeout.ms", spec.kraft.broker_session_timeout_ms),
    }
    for r in runs:
        setting, ms = bounds[r["mode"]]
        assert (r["bounding_setting"], r["bounding_ms"]) == (setting, ms)
        assert r["detected_s"] is not None and r["new_leader_s"] is not None, r
        assert 0 <= r["new_leader_s"] <= ms / 1000 + 5, r
    modes = {m["mode"]: m for m in out["modes"]}
    assert set(modes) == {"zookeeper", "kraft"}
    assert all(m["runs"] == 1 and m["passed"] == 1 and m["lost_total"] == 0 for m in modes.values())
    assert [json.loads(line)["mode"] for line in results.read_text().splitlines()] == [r["mode"] for r in runs]
    assert leftovers(name) == leftovers(f"{name}-kraft") == {"containers": [], "networks": [], "volumes": []}
    for r in runs:
        print(f"\n{r['mode']}: detected {r['detected_s']} s by {r['detected_by']}, new leader {r['new_leader_s']} s, "
              f"write gap {r['write_gap_s']} s, lost {r['lost']} "
              f"({r['bounding_setting']}={r['bounding_ms']})")  # fmt: skip


def test_compare_kill_leader_two_kafka_versions(tmp_path: Path) -> None:
    """`scenario compare kill-leader --versions <3.9.x>,<newest 4.x> --repeat 1`: both in KRaft mode (3 controllers
    + 3 brokers), each cluster started, drilled once and removed; nothing lost, detection bounded by the same
    broker.session.timeout.ms on both."""
    from conftest import kafka_dist

    from clusterctl.chaos.compare import spec_for_version
    from clusterctl.images import kafka_maven

    versions = []
    for built in (images.build_images(["kafka"], kafka_dist=kafka_dist()),
                  images.build_images(["kafka"], kafka_version=kafka_maven.NEWEST_KAFKA_LINE)):  # fmt: skip
        versions.append(next(r.image for r in built if r.target == "kafka").rpartition(":")[2])
    assert versions[0].startswith("3.9.") and versions[1].startswith("4."), versions
    base = allocate.free_port_block(6)
    name = f"ctlcmv-{uuid.uuid4().hex[:6]}"
    spec_path = tmp_path / "clusterctl.yaml"
    data = {
        "name": name,
        "profile": "offline",
        "network": {"subnet": allocate.free_subnet()},
        "kafka": {"engine": "kafka", "mode": "kraft", "brokers": 3, "host_port": base,
                  "defaults": {"replication_factor": 3, "min_insync_replicas": 2, "heap": "384m"}},
        "kraft": {"controllers": 3},
        "kafka_manager": {"enabled": False},
    }  # fmt: skip
    spec_path.write_text(yaml.safe_dump(data, sort_keys=False))
    spec = load_spec(spec_path)
    results = tmp_path / "compare.jsonl"
    try:
        res = cli(spec_path, "scenario", "compare", "kill-leader", "--versions", ",".join(versions), "--repeat", "1",
                  "--results", str(results), "--report-dir", str(tmp_path / "reports"), "--json",
                  timeout=1500)  # fmt: skip
        assert res.returncode == 0, f"{res.stdout[-2000:]} / {res.stderr[-3000:]}"
    finally:
        for version in versions:  # compare removes each cluster it started; make sure, whatever happened
            version_spec = spec_for_version(spec, version)
            if any(leftovers(version_spec.topology.project).values()):
                Cluster(version_spec).down(volumes=True)
    out = json.loads(res.stdout)
    assert out["scenario"] == "kill-leader"
    runs = out["runs"]
    assert [(r["kafka_version"], r["mode"], r["by"]) for r in runs] == [(v, "kraft", "version") for v in versions]
    failed = [{k: r[k] for k in ("kafka_version", "ok", "lost", "error", "detected_s", "new_leader_s", "report")}
              for r in runs if not (r["ok"] and r["lost"] == 0 and r["error"] is None)]  # fmt: skip
    assert not failed, failed
    ms = spec.kraft.broker_session_timeout_ms
    for r in runs:
        assert (r["bounding_setting"], r["bounding_ms"]) == ("broker.session.timeout.ms", ms)
        assert r["detected_s"] is not None and r["new_leader_s"] is not None, r
        assert 0 <= r["new_leader_s"] <= ms / 1000 + 5, r
    assert [(v["kafka_version"], v["runs"], v["passed"], v["lost_total"]) for v in out["versions"]] == [
        (v, 1, 1, 0) for v in versions
    ]
    assert [json.loads(line)["kafka_version"] for line in results.read_text().splitlines()] == versions
    for version in versions:
        project = spec_for_version(spec, version).topology.project
        assert leftovers(project) == {"containers": [], "networks": [], "volumes": []}
    for r in runs:
        print(f"\nKafka {r['kafka_version']}: detected {r['detected_s']} s by {r['detected_by']}, new leader "
              f"{r['new_leader_s']} s, write gap {r['write_gap_s']} s, lost {r['lost']}")  # fmt: skip
