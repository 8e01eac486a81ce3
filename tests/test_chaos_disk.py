"""`chaos fill-disk` and its heal on real containers, with bounded data volumes (`storage.bounded_mb`).

CI part (3 ZooKeeper nodes + tansu; test-only spec ctldisk-*, a free subnet and free
host ports): fill a ZooKeeper node's volumes, see writes in the container fail and df at 100%, heal, see the
space back, and `down --volumes` leave no mount, loop device or image behind. Bad input is one line and applies
nothing. Real-Kafka part (CLUSTERCTL_KAFKA_DIST): the `disk-full-broker` drill three times on its own 3 ZK + 3
broker cluster with bounded volumes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from _runtime_helpers import cli, cli_json, leftovers, render, running_cluster, write_spec

from clusterctl.images import build as images
from clusterctl.runtime import disks
from clusterctl.spec.model import load_spec

pytestmark = [
    pytest.mark.docker,
    pytest.mark.skipif(
        os.geteuid() != 0 or not all(shutil.which(t) for t in ("losetup", "mkfs.ext4", "debugfs")),
        reason="bounded volumes need root, util-linux and e2fsprogs",
    ),
]

SIZE_MB = 64


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    images.build_images(["zookeeper", "tansu"])
    name, bounded = f"ctldisk-{uuid.uuid4().hex[:6]}", {"storage": {"bounded_mb": SIZE_MB}}
    work = tmp_path_factory.mktemp("disk")
    with running_cluster(work, name, extra=bounded, heal=True) as spec_path:
        yield spec_path


def in_container(container: str, script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["docker", "exec", container, "sh", "-c", script], capture_output=True, text=True, timeout=60)


def on_volumes(container: str, script: str) -> subprocess.CompletedProcess[str]:
    """`script` in a throwaway container of the same image with `container`'s volumes: ZooKeeper may exit on the
    full disk and Docker restart it at any moment, which kills a `docker exec` (137) and says nothing of the disk."""
    image = subprocess.run(["docker", "inspect", "-f", "{{.Config.Image}}", container], capture_output=True,
                           text=True, check=True, timeout=30).stdout.strip()  # fmt: skip
    return subprocess.run(["docker", "run", "--rm", "--network", "none", "--volumes-from", container,
                           "--entrypoint", "sh", image, "-c", script], capture_output=True, text=True,
                          timeout=60)  # fmt: skip


def df_use(container: str, path: str) -> int:
    """Use% of the filesystem at `path`, as df sees it on the container's volumes."""
    out = on_volumes(container, f"df -P {path}").stdout.splitlines()[-1].split()
    return int(out[4].rstrip("%"))


def test_volumes_are_bounded_and_survive_a_restart(cluster: Path) -> None:
    spec = load_spec(cluster)
    zk1 = spec.topology.zk_container(1)
    size_kb = int(in_container(zk1, "df -P /datalog").stdout.splitlines()[-1].split()[1])
    assert 50 * 1024 < size_kb <= SIZE_MB * 1024, size_kb  # the image's size, not the host's disk
    assert in_container(zk1, "echo kept > /datalog/probe").returncode == 0
    subprocess.run(["docker", "restart", zk1], check=True, capture_output=True, timeout=120)
    assert in_container(zk1, "cat /datalog/probe && rm /datalog/probe").stdout.strip() == "kept"


def test_fill_disk_fills_and_heal_frees_and_restarts(cluster: Path) -> None:
    spec = load_spec(cluster)
    zk1 = spec.topology.zk_container(1)
    res = cli(cluster, "chaos", "fill-disk", "zk1", "--json")
    assert res.returncode == 0, res.stderr
    [fault] = json.loads(res.stdout)
    assert fault["action"] == "fill-disk" and fault["target"] == "zk1"
    assert "/data (" in fault["note"] and "/datalog (" in fault["note"] and fault["note"].count(", 0 B free") == 2
    assert df_use(zk1, "/data") == 100 and df_use(zk1, "/datalog") == 100
    write = on_volumes(zk1, "head -c 1048576 /dev/zero > /datalog/probe")
    assert write.returncode != 0 and "No space left on device" in write.stderr, write

    healed = cli_json(cluster, "chaos", "heal")
    frees = [r for r in healed["healed"] if r["action"] == "free-disk"]
    assert [r["target"] for r in frees] == ["zk1"] and f"MiB on /datalog ({spec.topology.project}_" in frees[0]["note"]
    assert df_use(zk1, "/datalog") < 50 and on_volumes(zk1, "rm -f /datalog/probe").returncode == 0
    assert 1 in healed["wait"]["zk_serving"]
    mounts = [d.mountpoint for d in disks.disks(spec, cluster.parent)]
    assert not any(os.path.exists(os.path.join(m, disks.FILL_NAME)) for m in mounts)


def test_bad_input_is_one_line_and_applies_nothing(cluster: Path) -> None:
    spec = load_spec(cluster)
    unknown = cli(cluster, "chaos", "fill-disk", "kafka9")
    assert unknown.returncode == 3 and unknown.stderr.strip().count("\n") == 0 and "unknown node" in unknown.stderr
    # tansu keeps no data volume: a fill would have to fill the host's disk
    tansu = cli(cluster, "chaos", "fill-disk", "kafka1")
    assert tansu.returncode == 2 and "no bounded data volume" in tansu.stderr, tansu.stderr
    stop = subprocess.run(["docker", "stop", spec.topology.zk_container(3)], capture_output=True, timeout=60)
    assert stop.returncode == 0
    try:
        stopped = cli(cluster, "chaos", "fill-disk", "zk3")
        assert stopped.returncode == 1 and "is exited, expected running" in stopped.stderr, stopped.stderr
        assert stopped.stderr.strip().startswith("error:") and stopped.stderr.strip().count("\n") <= 1
    finally:
        cli(cluster, "chaos", "heal")
    filled = [
        d for d in disks.disks(spec, cluster.parent) if os.path.exists(os.path.join(d.mountpoint, disks.FILL_NAME))
    ]
    assert filled == []


def test_down_leaves_no_mount_loop_device_or_image(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Its own short-lived cluster (one ZooKeeper node), so the module's cluster stays up for the others."""
    work = tmp_path_factory.mktemp("disk-down")
    spec_path = write_spec(work, f"ctldisk-{uuid.uuid4().hex[:6]}", zk_nodes=1)
    data = yaml.safe_load(spec_path.read_text())
    spec_path.write_text(yaml.safe_dump({**data, "storage": {"bounded_mb": SIZE_MB}}, sort_keys=False))
    render(spec_path)
    spec = load_spec(spec_path)
    try:
        assert cli(spec_path, "up", "--timeout", "120").returncode == 0
        found = disks.disks(spec, work)
        assert {d.volume for d in found} == {
            f"{spec.topology.project}_zk1-data",
            f"{spec.topology.project}_zk1-datalog",
        }
        assert all(d.mounted for d in found)
        zk1 = spec.topology.zk_container(1)
        assert in_container(zk1, "echo kept > /data/probe").returncode == 0
        down = cli_json(spec_path, "down")  # unmounted (the loop device goes with it); the images stay, like volumes
        assert sum(e.startswith("unmounted ") for e in down["disks_released"]) == 2, down
        assert not any(d.mounted for d in disks.disks(spec, work))
        assert cli(spec_path, "up", "--timeout", "120").returncode == 0
        assert in_container(zk1, "cat /data/probe").stdout.strip() == "kept"
    finally:
        down = cli_json(spec_path, "down", "--volumes")
    images_ = [d.image for d in found]
    assert all(not os.path.exists(i) for i in images_) and not disks.disk_dir(spec, work).exists()
    loops = subprocess.run(["losetup", "--list", "--noheadings", "--output", "BACK-FILE"], capture_output=True,
                           text=True).stdout  # fmt: skip
    assert not any(i in loops for i in images_), loops
    assert str(work) not in Path("/proc/self/mountinfo").read_text()
    assert leftovers(spec.topology.project) == {"containers": [], "networks": [], "volumes": []}
    assert sum(e.startswith("removed ") for e in down["disks_released"]) == 2, down


# ---------------------------------------------------------------- real Kafka: the disk-full-broker drill


@pytest.fixture(scope="module")
def bounded_kafka() -> Iterator[Path]:
    """A 3 ZK + 3 broker real-Kafka cluster whose log dirs are 512 MiB images (the plugin's KafkaCluster)."""
    from conftest import REAL_KAFKA_SPEC, kafka_dist

    from clusterctl.testing import KafkaCluster

    dist = kafka_dist()
    assert dist is not None  # real_kafka tests are skipped without it
    images.build_images(["zookeeper", "kafka"], kafka_dist=dist)
    kc = KafkaCluster({**REAL_KAFKA_SPEC, "storage": {"bounded_mb": 512}}, engine="kafka", timeout=300).start()
    try:
        yield kc.spec_file
    finally:
        kc.stop()
        assert kc.leftovers() == {}


@pytest.mark.real_kafka
def test_disk_full_broker_fails_over_and_loses_nothing(bounded_kafka: Path, tmp_path: Path) -> None:
    """The leader's log dir full: the broker halts (log dir offline), leadership moves, acks=all writes go on,
    0 lost; heal frees the disk and restarts it, and it rejoins every ISR. Three runs."""
    res = cli(bounded_kafka, "scenario", "run", "disk-full-broker", "--repeat", "3", "--report-dir", str(tmp_path),
              "--json", timeout=900)  # fmt: skip
    assert res.returncode == 0, f"{res.stdout[-3000:]} / {res.stderr[-3000:]}"
    data = json.loads(res.stdout)
    runs = data["runs"]
    assert data["passed"] == 3 and all(r["ok"] and r["lost"] == 0 and r["acked"] > 5000 for r in runs), runs
    gaps = [r["write_gap_s"] for r in runs]
    assert all(g is not None and g <= 30 for g in gaps), gaps
    reports = sorted(tmp_path.rglob("report.json"))
    assert len(reports) == 3
    for rep in reports:
        steps = json.loads(rep.read_text())["steps"]
        heal = next(s for s in steps if s["description"].startswith("heal"))
        assert "free-disk kafka" in heal["detail"] and "restarted" in heal["detail"], heal  # the recovery steps
    print(f"\ndisk-full-broker x3: acked {[r['acked'] for r in runs]}, lost 0, write gap {gaps} s")
