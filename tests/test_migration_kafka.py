"""ZooKeeper → KRaft migration on real Kafka 3.7 (needs CLUSTERCTL_KAFKA_DIST): 3 ZooKeeper nodes + 3 brokers,
records written before, phases 1-2 and their done-check, then 3-5, and every record read back from the KRaft
cluster. Test-only spec: subnet 10.94.0.0/24, ZooKeeper 23181-23183, brokers 29392-29394. About 8 minutes here.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from _runtime_helpers import CLI, cli, render, up_json, write_spec

from clusterctl.images import build as images
from clusterctl.spec.model import load_spec

pytestmark = [pytest.mark.real_kafka, pytest.mark.docker]
RECORDS = 2000


@pytest.fixture(scope="module")
def zk_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    images.build_images(["kafka"], kafka_dist=Path(os.environ[images.KAFKA_DIST_ENV]))
    work = tmp_path_factory.mktemp("migration")
    spec_path = write_spec(work, f"ctlmig-{uuid.uuid4().hex[:6]}", "10.94.0.0/24", 23181, 29392, "kafka", 3)
    data = yaml.safe_load(spec_path.read_text())
    data["zookeeper"].pop("tick_time_ms")  # Kafka's own session timeouts, as a production cluster has
    spec_path.write_text(yaml.safe_dump(data, sort_keys=False))
    render(spec_path)
    try:
        up_json(spec_path, timeout=300)
        assert cli(spec_path, "topic", "create", "mig", "-p", "6", "-r", "3").returncode == 0
        lines = "".join(f"{i}\n" for i in range(RECORDS))
        produced = subprocess.run([CLI, "-s", str(spec_path), "produce", "mig"], input=lines, capture_output=True,
                                  text=True, cwd=spec_path.parent, timeout=120)  # fmt: skip
        assert produced.returncode == 0, produced.stderr
        yield spec_path
    finally:
        cli(spec_path, "down", "--volumes")


def _json(spec_path: Path, *args: str) -> Any:
    res = cli(spec_path, *args, "--json", timeout=900)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout)


def test_phases_1_and_2_then_the_rest(zk_cluster: Path) -> None:
    first = _json(zk_cluster, "migrate", "kraft", "--to", "2")
    ran = {r["name"]: r for r in first["ran"]}
    assert list(ran) == ["controllers", "migration-mode"]
    assert ran["controllers"]["restarted"] == ["controller1", "controller2", "controller3"]
    assert ran["migration-mode"]["restarted"] == ["kafka1", "kafka2", "kafka3"]
    assert "Completed migration of metadata from ZooKeeper to KRaft" in ran["migration-mode"]["detail"]
    print(f"\nphases 1-2: {json.dumps(first['ran'], indent=1)}")
    again = _json(zk_cluster, "migrate", "kraft", "--to", "2")
    assert again["ran"] == []  # done already: nothing restarts
    refused = cli(zk_cluster, "migrate", "kraft")
    assert refused.returncode == 2 and "point of no return" in refused.stderr

    rest = _json(zk_cluster, "migrate", "kraft", "--yes")
    print(f"phases 3-5: {json.dumps(rest['ran'], indent=1)}")
    assert [r["name"] for r in rest["ran"]] == ["kraft-brokers", "finalize", "remove-zookeeper"]
    spec = load_spec(zk_cluster)
    assert spec.kraft_mode and (zk_cluster.parent / "clusterctl.zookeeper.yaml").is_file()
    status = _json(zk_cluster, "status")
    voters = sorted(m["node_id"] for m in status["controllers"] if m["role"] != "observer")
    assert status["zookeeper"] == [] and voters == [101, 102, 103]
    left = subprocess.run(["docker", "ps", "-aq", "--filter", f"name=^{spec.name}-zk"], capture_output=True, text=True)
    assert left.returncode == 0 and left.stdout.strip() == ""  # the ZooKeeper containers are gone
    consumed = cli(zk_cluster, "consume", "mig", "--from-beginning", "-n", str(RECORDS), "--timeout", "30")
    assert consumed.returncode == 0, consumed.stderr
    values = [line.rpartition("value=")[2] for line in consumed.stdout.splitlines()]
    assert sorted(int(v) for v in values) == list(range(RECORDS))  # every record written in ZooKeeper mode
