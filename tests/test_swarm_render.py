"""deploy.target swarm: the spec's racks, the stack file (goldens, `docker stack config`), one-line refusals.

Regenerate the golden files after an intended template change with UPDATE_GOLDEN=1.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterctl.compose.render import render, render_compose
from clusterctl.errors import SpecError
from clusterctl.spec.model import ClusterSpec, parse_spec

GOLDEN = Path(__file__).resolve().parent / "golden"
RACKS = [
    {"name": "r1", "address": "10.123.0.2", "endpoint": "unix:///run/clusterctl/h1.sock"},
    {"name": "r2", "address": "10.123.0.3"},
    {"name": "r3", "address": "kafka-host-3.example"},
]
SWARM_TANSU: dict[str, Any] = {
    "name": "lab",
    "profile": "offline",
    "kafka": {
        "engine": "tansu",
        "brokers": 1,
        "jmx_port": None,
        "defaults": {"replication_factor": 1, "min_insync_replicas": 1},
    },
    "zookeeper": {"nodes": 1},
    "kafka_manager": {"enabled": False},
    "deploy": {"target": "swarm", "racks": [RACKS[0]]},
}
CASES: dict[str, dict[str, Any]] = {
    "swarm-offline": {
        "name": "lab",
        "profile": "offline",
        "kafka_manager": {"enabled": False},
        "deploy": {"target": "swarm", "racks": RACKS, "rack_spread": "strict"},
    },
    "swarm-tansu": SWARM_TANSU,
    "swarm-kraft-encrypted": {
        "name": "kr",
        "profile": "default",
        "kafka": {"mode": "kraft", "brokers": 3},
        "kafka_manager": {"enabled": False},
        "deploy": {"target": "swarm", "racks": RACKS[:2], "encrypted": True},
    },
}

pytestmark = pytest.mark.usefixtures("built_kafka_3_7")


def spec_of(case: str) -> ClusterSpec:
    return parse_spec(CASES[case], source=case)


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(case: str) -> None:
    text = render_compose(spec_of(case))
    golden = GOLDEN / f"{case}.docker-stack.yml"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(text)
    assert golden.is_file(), f"no golden file {golden.name}: run with UPDATE_GOLDEN=1"
    assert text == golden.read_text(), f"{case} differs from {golden.name} (UPDATE_GOLDEN=1 if intended)"


@pytest.mark.skipif(not shutil.which("docker"), reason="no docker CLI")
@pytest.mark.parametrize("case", sorted(CASES))
def test_render_validated_by_docker_stack_config(case: str, tmp_path: Path) -> None:
    result = render(spec_of(case), tmp_path / "out")
    assert result.validated_by_compose, "docker stack config did not run"
    assert Path(result.compose_file).name == "docker-stack.yml"
    assert not (tmp_path / "out" / "docker-compose.yml").exists()
    env = dict(os.environ)
    if spec_of(case).kraft_mode:  # the cluster id reaches the stack file through the environment
        env["KAFKA_CLUSTER_ID"] = (tmp_path / "out" / ".env").read_text().split("KAFKA_CLUSTER_ID=")[1].split()[0]
    out = subprocess.run(
        ["docker", "stack", "config", "-c", result.compose_file], capture_output=True, text=True, env=env, check=True
    ).stdout
    resolved = yaml.safe_load(out)
    assert resolved["networks"]["cluster"]["driver"] == "overlay"
    assert resolved["networks"]["cluster"]["attachable"] is True


def test_every_service_pinned_to_its_rack_with_broker_rack_and_rack_address() -> None:
    data = yaml.safe_load(render_compose(spec_of("swarm-offline")))
    services = data["services"]
    assert sorted(services) == ["kafka1", "kafka2", "kafka3", "zk1", "zk2", "zk3"]
    for i, rack in enumerate(RACKS, start=1):
        broker = services[f"kafka{i}"]
        assert broker["hostname"] == f"kafka{i}"
        assert broker["deploy"]["placement"]["constraints"] == [f"node.labels.clusterctl.rack == {rack['name']}"]
        assert broker["environment"]["KAFKA_BROKER_RACK"] == rack["name"]
        port = 9091 + i
        assert f"EXTERNAL://{rack['address']}:{port}" in broker["environment"]["KAFKA_ADVERTISED_LISTENERS"]
        assert broker["ports"] == [{"target": port, "published": port, "protocol": "tcp", "mode": "host"}]
        assert broker["volumes"] == [f"kafka{i}-data:/var/lib/kafka/data"]
        assert broker["deploy"]["restart_policy"]["condition"] == "any"
        # the images' own health checks are off: the swarm would kill a task it finds unhealthy (a ZooKeeper node
        # waiting for its quorum, a partitioned one)
        assert broker["healthcheck"] == {"disable": True}
        zk = services[f"zk{i}"]
        assert zk["healthcheck"] == {"disable": True}
        assert zk["deploy"]["placement"]["constraints"] == [f"node.labels.clusterctl.rack == {rack['name']}"]
    spec = spec_of("swarm-offline")
    assert spec.topology.bootstrap_servers == "10.123.0.2:9092,10.123.0.3:9093,kafka-host-3.example:9094"
    assert spec.topology.zk_connect == "10.123.0.2:2181,10.123.0.3:2182,kafka-host-3.example:2183"


def test_round_robin_puts_more_brokers_than_racks_on_racks_in_turn() -> None:
    spec = parse_spec(
        {"name": "x", "kafka_manager": {"enabled": False}, "kafka": {"brokers": 5},
         "deploy": {"target": "swarm", "racks": RACKS[:2]}}
    )  # fmt: skip
    assert [spec.topology.broker_rack(i) for i in spec.topology.broker_ids] == ["r1", "r2", "r1", "r2", "r1"]
    assert [spec.topology.zk_rack(i) for i in spec.topology.zk_ids] == ["r1", "r2", "r1"]


def test_compose_target_unchanged_no_rack() -> None:
    spec = parse_spec({"name": "x"})
    assert spec.topology.broker_rack(1) is None
    assert "KAFKA_BROKER_RACK" not in render_compose(spec)
    assert spec.topology.compose_file.name == "docker-compose.yml"


@pytest.mark.parametrize(
    ("deploy", "extra", "message"),
    [
        ({"target": "swarm"}, {}, "deploy.target=swarm needs deploy.racks"),
        (
            {"target": "swarm", "rack_spread": "strict", "racks": RACKS[:2]},
            {},
            "deploy.rack_spread=strict: 3 brokers need 3 racks, deploy.racks has 2",
        ),
        ({"racks": RACKS}, {}, "are for deploy.target: swarm"),
        ({"target": "swarm", "racks": [RACKS[0], RACKS[0]]}, {}, "names a rack twice"),
        ({"target": "swarm", "racks": [{"name": "R 1", "address": "10.0.0.1"}]}, {}, "rack name"),
        ({"target": "swarm", "racks": [{"name": "a", "address": "a:1"}]}, {}, "not an IPv4 address or a host name"),
        ({"target": "swarm", "racks": RACKS, "endpoint": "http://x"}, {}, "is not a Docker endpoint"),
        ({"target": "swarm", "racks": RACKS}, {"kafka_manager": {"enabled": True}}, "runs no kafka-manager"),
        ({"target": "swarm", "racks": RACKS}, {"spark": {"enabled": True}}, "runs no spark services"),
        ({"target": "swarm", "racks": RACKS}, {"storage": {"bounded_mb": 128}}, "no bounded data volumes"),
    ],
)
def test_bad_deploy_is_one_line(deploy: dict[str, Any], extra: dict[str, Any], message: str) -> None:
    data = {"name": "x", "kafka_manager": {"enabled": False}, "deploy": deploy} | extra
    with pytest.raises(SpecError) as err:
        parse_spec(data, source="s.yaml")
    assert message in str(err.value)
    assert "\n" not in str(err.value)
    assert err.value.exit_code == 2
