"""`scenario compare kill-leader --modes zookeeper,kraft --repeat 2` on real Apache Kafka (the session's Kafka).

Its own spec (a free subnet and free host ports): compare renders and starts the ZooKeeper-mode cluster, runs the
drill twice, removes it, then does the same with the derived KRaft-mode cluster. Every run loses nothing, and its
new-leader time stays within the setting that bounds it in that mode (+ 5 s).
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
        res = cli(spec_path, "scenario", "compare", "kill-leader", "--modes", "zookeeper,kraft", "--repeat", "2",
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
    assert [r["mode"] for r in runs] == ["zookeeper", "zookeeper", "kraft", "kraft"]
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
    assert all(m["runs"] == 2 and m["passed"] == 2 and m["lost_total"] == 0 for m in modes.values())
    assert [json.loads(line)["mode"] for line in results.read_text().splitlines()] == [r["mode"] for r in runs]
    assert leftovers(name) == leftovers(f"{name}-kraft") == {"containers": [], "networks": [], "volumes": []}
    for r in runs:
        print(f"\n{r['mode']}: detected {r['detected_s']} s by {r['detected_by']}, new leader {r['new_leader_s']} s, "
              f"write gap {r['write_gap_s']} s, lost {r['lost']} "
              f"({r['bounding_setting']}={r['bounding_ms']})")  # fmt: skip
