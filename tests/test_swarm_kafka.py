"""Real Apache Kafka on a 3-host swarm of namespace hosts (tests/_nshosts.py), one ZooKeeper node and one broker
per host/rack, RF 3, min.insync 2: a whole host lost under acks=all load (link down, its daemon, containerd and
every container SIGKILLed at once) loses no acknowledged write, leaders move to the surviving racks, and the
cluster heals when the host returns. Needs CLUSTERCTL_KAFKA_DIST (skipped in CI).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
from _nshosts import NsHosts

from clusterctl.chaos.load import DrillLoad, verify_drill
from clusterctl.compose.render import render
from clusterctl.kafka import admin
from clusterctl.runtime.cluster import Cluster
from clusterctl.spec.model import parse_spec
from clusterctl.wait import wait_until

pytestmark = [
    pytest.mark.docker,
    pytest.mark.real_kafka,
    pytest.mark.skipif(os.geteuid() != 0, reason="namespace hosts need root (ip netns, dockerd)"),
    pytest.mark.skipif(not (shutil.which("dockerd") and shutil.which("nsenter")), reason="no dockerd/nsenter"),
]
TOPIC = "drill"


def test_kill_node_on_three_hosts_loses_no_acknowledged_write(tmp_path: Path) -> None:
    hosts = NsHosts(3)
    try:
        with hosts:
            racks = hosts.label_racks()
            spec = parse_spec(
                {"name": f"sk{hosts.tag}", "profile": "offline", "network": {"subnet": hosts.free_subnet()},
                 "kafka_manager": {"enabled": False},
                 "deploy": {"target": "swarm", "endpoint": hosts.manager.endpoint, "rack_spread": "strict",
                            "racks": [{"name": r, "address": a, "endpoint": h.endpoint}
                                      for (r, a), h in zip(racks.items(), hosts.hosts, strict=True)]}}
            )  # fmt: skip
            t0 = time.monotonic()
            hosts.load_images([spec.zookeeper_image, spec.broker_image])
            print(f"images loaded into 3 hosts in {time.monotonic() - t0:.1f}s")
            render(spec, tmp_path / spec.topology.compose_dir)
            cluster = Cluster(spec, root=tmp_path)
            up = cluster.up(timeout=400)
            print(f"healthy after {up.seconds_to_healthy}s: zk {up.zk_serving}/3, brokers {up.brokers_registered}")
            rows = {s.service: s for s in cluster.status().services}
            for i in (1, 2, 3):
                assert (rows[f"kafka{i}"].state, rows[f"kafka{i}"].rack) == ("running", f"r{i}")
                assert (rows[f"zk{i}"].state, rows[f"zk{i}"].rack) == ("running", f"r{i}")
            boot = spec.topology.bootstrap_servers
            admin.create_topic(boot, TOPIC, 6, 3, configs={"min.insync.replicas": "2"})
            load = DrillLoad(boot, TOPIC, tmp_path / "ledger.jsonl", rate=300).start()
            time.sleep(5)
            victim = hosts.hosts[2]  # rack r3: zk3 and kafka3
            hosts.lose(victim)
            lost_at = time.monotonic()

            def leaders() -> list[int]:
                return [p.leader for p in admin.describe_topic(boot, TOPIC).partitions]

            moved = wait_until(
                leaders, timeout=90, what="leaders off the lost rack",
                done=lambda ls: all(x in (1, 2) for x in ls), seen=str, retry_on=lambda e: True,
            )  # fmt: skip
            print(f"leaders on surviving racks {moved} after {time.monotonic() - lost_at:.1f}s")
            time.sleep(5)
            hosts.restore(victim)
            back = time.monotonic()
            cluster.wait_healthy(300)

            def isr_full() -> bool:
                return all(len(p.isr) == 3 for p in admin.describe_topic(boot, TOPIC).partitions)

            wait_until(isr_full, timeout=180, what="every ISR full again", retry_on=lambda e: True)
            print(f"healed (healthy, every ISR full) {time.monotonic() - back:.1f}s after the host returned")
            summary = load.stop()
            result = verify_drill(boot, tmp_path / "ledger.jsonl")
            print(f"load: sent {summary.sent}, acked {summary.acked}, failed {summary.failed}; {result.summary()}")
            assert summary.acked > 0 and result.lost_count == 0 and result.ok, result.summary()
            rows = {s.service: s for s in cluster.status().services}
            assert (rows["kafka3"].state, rows["kafka3"].rack) == ("running", "r3")
            cluster.down(volumes=True)
            assert cluster.leftovers() == {}
    finally:
        left = hosts.leftovers()
    assert left == {}, left
