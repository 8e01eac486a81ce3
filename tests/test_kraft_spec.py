"""KRaft mode offline: spec validation (one-line errors, exit 2), rendering (goldens + `docker compose config`),
the cluster id kept in .env across renders, and the entrypoint's first-start-only format."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterctl.compose.environment import CLUSTER_ID_VAR, quorum_env
from clusterctl.compose.render import ENV_FILE, existing_cluster_id, render, render_compose
from clusterctl.errors import SpecError
from clusterctl.spec.model import ClusterSpec, parse_spec
from clusterctl.spec.profiles import CONSOLE_IMAGE

REPO = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden"
pytestmark = pytest.mark.usefixtures("built_kafka_3_7")
CLI = str(Path(sys.executable).parent / "clusterctl")  # the console script of the running environment

KRAFT: dict[str, Any] = {"name": "lab", "profile": "offline", "kafka": {"mode": "kraft"}}
CASES: dict[str, dict[str, Any]] = {
    "kraft-offline": KRAFT,
    "kraft-default-combined": {
        "name": "lab",
        "profile": "default",
        "kafka": {"mode": "kraft", "brokers": 3},
        "kraft": {"controllers": 3, "combined": True},
    },
    "kraft-single": {
        "name": "one",
        "profile": "offline",
        "network": {"subnet": "10.83.0.0/24"},
        "kafka": {"mode": "kraft", "brokers": 1, "defaults": {"replication_factor": 1, "min_insync_replicas": 1}},
        "kraft": {"controllers": 1},
    },
    "kraft-apache": {"name": "lab", "profile": "apache", "kafka": {"mode": "kraft"}},
    "kraft-dynamic": {
        "name": "lab",
        "profile": "offline",
        "kafka": {"mode": "kraft", "version": "4.4.0"},
        "kraft": {"quorum": "dynamic"},
    },
    "kraft-5-controllers": {
        "name": "big",
        "profile": "default",
        "network": {"subnet": "192.168.240.0/24"},
        "kafka": {"mode": "kraft", "brokers": 4},
        "kraft": {"controllers": 5, "broker_session_timeout_ms": 6000},
    },
}


def spec_of(case: str) -> ClusterSpec:
    return parse_spec(CASES[case], source=case)


@pytest.mark.parametrize("case", sorted(CASES))
def test_kraft_golden(case: str) -> None:
    text = render_compose(spec_of(case))
    golden = GOLDEN / f"{case}.docker-compose.yml"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.write_text(text)
    assert golden.is_file(), f"no golden file {golden.name}: run with UPDATE_GOLDEN=1"
    assert text == golden.read_text(), f"{case} differs from {golden.name} (UPDATE_GOLDEN=1 if intended)"


@pytest.mark.parametrize("case", sorted(CASES))
def test_kraft_rendering_passes_docker_compose_config(case: str, tmp_path: Path) -> None:
    spec = spec_of(case)
    result = render(spec, tmp_path / "out", validate=False)
    proc = subprocess.run(
        ["docker", "compose", "-f", result.compose_file, "config", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    model = json.loads(proc.stdout)
    svc = model["services"]
    assert not [s for s in svc if s.startswith("zk")], "kraft mode renders no ZooKeeper"
    # the console is kraft mode's kafka-manager (CMAK reads ZooKeeper): no ZooKeeper flag, nothing to wait for
    manager = svc["kafka-manager"]
    assert manager["image"] == CONSOLE_IMAGE and "depends_on" not in manager
    assert "--zookeeper" not in manager["command"] and "--bootstrap-server" in manager["command"]
    cluster_id = existing_cluster_id(tmp_path / "out")
    assert cluster_id is not None and len(cluster_id) == 22
    quorum = quorum_env(spec)  # static: the voters; dynamic: where to ask for them
    dynamic = spec.kraft.quorum == "dynamic"
    assert list(quorum) == [f"KAFKA_CONTROLLER_QUORUM_{'BOOTSTRAP_SERVERS' if dynamic else 'VOTERS'}"]
    controllers = [s for s in svc if s.startswith("controller")]
    assert len(controllers) == (0 if spec.kraft.combined else spec.kraft.controllers)
    for name in controllers:
        env = svc[name]["environment"]
        assert env["KAFKA_PROCESS_ROLES"] == "controller"
        assert env["CLUSTER_ID"] == cluster_id  # compose substituted it from .env
        assert {k: env.get(k) for k in quorum} == quorum
        assert ("KAFKA_CONTROLLER_QUORUM_VOTERS" in env) == (spec.kraft.quorum == "static")
        assert env["KAFKA_LISTENERS"] == f"CONTROLLER://0.0.0.0:{spec.kraft.controller_port}"
        assert "KAFKA_ADVERTISED_LISTENERS" not in env
        assert not svc[name].get("ports"), "the controller listener stays on the cluster network"
    for b in spec.topology.broker_ids:
        env = svc[f"kafka{b}"]["environment"]
        assert env["CLUSTER_ID"] == cluster_id and env["KAFKA_NODE_ID"] == str(b)
        assert "KAFKA_ZOOKEEPER_CONNECT" not in env and "KAFKA_BROKER_ID" not in env
        assert {k: env.get(k) for k in quorum} == quorum
        assert ("KAFKA_CONTROLLER_QUORUM_VOTERS" in env) == (spec.kraft.quorum == "static")
        # network + host listeners as in ZK mode; the controller listener is never advertised
        assert env["KAFKA_ADVERTISED_LISTENERS"] == spec.topology.broker_advertised_listeners(b)
        assert "CONTROLLER" not in env["KAFKA_ADVERTISED_LISTENERS"]
        combined = spec.kraft.combined and b <= spec.kraft.controllers
        assert env["KAFKA_PROCESS_ROLES"] == ("broker,controller" if combined else "broker")
        assert ("CONTROLLER://" in env["KAFKA_LISTENERS"]) == combined
        assert [p["published"] for p in svc[f"kafka{b}"]["ports"]] == [str(spec.topology.broker_host_port(b))]
        assert set(svc[f"kafka{b}"].get("depends_on", {})) == set(controllers)


def test_cluster_id_generated_once_and_kept(tmp_path: Path) -> None:
    spec = spec_of("kraft-offline")
    out = tmp_path / "compose"
    first = render(spec, out, validate=False)
    cid = existing_cluster_id(out)
    assert first.cluster_id == "created" and cid
    env = out / ENV_FILE
    assert oct(env.stat().st_mode & 0o777) == "0o600"
    assert f"{CLUSTER_ID_VAR}={cid}" in env.read_text()
    again = render(spec, out, validate=False)
    assert again.cluster_id == "kept" and existing_cluster_id(out) == cid
    other = render(spec, tmp_path / "elsewhere", validate=False)
    assert existing_cluster_id(tmp_path / "elsewhere") != cid and other.cluster_id == "created"


def test_zookeeper_mode_unchanged_by_kraft_fields() -> None:
    spec = parse_spec({"name": "lab"})
    assert spec.kafka.mode == "zookeeper" and spec.topology.controller_ids == [] and spec.topology.zk_ids == [1, 2, 3]
    assert "CLUSTER_ID" not in render_compose(spec)


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"kafka": {"mode": "kraft"}, "kraft": {"controllers": 2}}, "kraft.controllers=2: an even quorum"),
        ({"kafka": {"mode": "kraft"}, "kraft": {"controllers": 4}}, "kraft.controllers=4: an even quorum"),
        ({"kafka": {"mode": "kraft"}, "kraft": {"controllers": 7}}, "kraft.controllers=7: more than 5 voters"),
        ({"kafka": {"mode": "kraft"}, "zookeeper": {"nodes": 5}}, "kafka.mode=kraft has no ZooKeeper"),
        ({"kafka": {"mode": "kraft"}, "kafka_manager": {"kind": "cmak"}}, "kafka_manager.kind=cmak reads ZooKeeper"),
        (
            {"kafka": {"mode": "kraft", "defaults": {"zookeeper_session_timeout_ms": 9000}}},
            "zookeeper_session_timeout_ms is a ZooKeeper-mode setting",
        ),
        ({"kraft": {"controllers": 5}}, "kraft settings need kafka.mode: kraft"),
        ({"images": {"kafka": "apache/kafka:4.1.0"}}, "is Kafka 4.1, which has no ZooKeeper mode"),
        ({"images": {"kafka": "confluentinc/cp-kafka:8.0.0"}}, "is Kafka 4.0, which has no ZooKeeper mode"),
        ({"profile": "wurstmeister", "kafka": {"mode": "kraft"}}, "has no KRaft support"),
        ({"kafka": {"mode": "kraft"}, "images": {"kafka": "confluentinc/cp-kafka:7.2.0"}}, "KRaft needs Kafka 3.3+"),
        ({"kafka": {"mode": "kraft", "engine": "tansu", "brokers": 1}}, "needs kafka.engine=kafka"),
        (
            {
                "kafka": {
                    "mode": "kraft",
                    "brokers": 1,
                    "defaults": {"replication_factor": 1, "min_insync_replicas": 1},
                },
                "kraft": {"combined": True},
            },
            "needs at least that many brokers",
        ),
        ({"kafka": {"mode": "kraft"}, "kraft": {"controller_port": 19092}}, "clashes with kafka.internal_port"),
        ({"kafka": {"mode": "kraft"}, "kraft": {"ips": ["10.77.0.51"]}}, "kraft.ips has 1 entries for 3"),
        ({"kafka": {"mode": "kraft"}, "kraft": {"ips": ["10.77.0.21", "10.77.0.52", "10.77.0.53"]}}, "already used"),
        ({"kafka": {"mode": "kraft"}, "network": {"subnet": "10.77.0.0/27"}}, "/26 or larger"),
        ({"kafka": {"mode": "kraft"}, "kraft": {"broker_heartbeat_interval_ms": 9000}}, "must be below"),
    ],
)
def test_kraft_validation_one_line(data: dict[str, Any], expected: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_spec(data)
    assert expected in str(err.value)
    assert "\n" not in str(err.value)


def test_kafka4_accepted_in_kraft_mode_only() -> None:
    spec = parse_spec({"kafka": {"mode": "kraft"}, "images": {"kafka": "apache/kafka:4.1.0"}})
    assert spec.broker_image == "apache/kafka:4.1.0"
    # profile apache: kafka.version picks the apache/kafka tag, for controllers and brokers alike
    apache = parse_spec({"profile": "apache", "kafka": {"mode": "kraft", "version": "3.9.1"}})
    assert apache.broker_image == "apache/kafka:3.9.1"
    assert parse_spec({"profile": "apache", "kafka": {"mode": "kraft"}}).broker_image == "apache/kafka:4.4.0"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        ({"kafka": {"mode": "kraft"}, "kraft": {"controllers": 4}}, "even quorum"),
        ({"kafka": {"mode": "kraft"}, "kraft": {"controllers": 7}}, "more than 5 voters"),
        ({"kafka": {"mode": "kraft"}, "zookeeper": {"tick_time_ms": 500}}, "has no ZooKeeper"),
        ({"images": {"kafka": "apache/kafka:4.0.0"}}, "no ZooKeeper mode"),
    ],
)
def test_cli_render_refuses_with_one_line_and_exit_2(tmp_path: Path, data: dict[str, Any], expected: str) -> None:
    path = tmp_path / "clusterctl.yaml"
    path.write_text(yaml.safe_dump({"name": "lab", **data}))
    proc = subprocess.run([CLI, "-s", str(path), "render"], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert proc.returncode == 2
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and expected in lines[0], proc.stderr
    assert not (tmp_path / "compose").exists(), "nothing half-written"


def _stub_entrypoint(tmp_path: Path, log4j: str, start_line: str) -> tuple[Path, Path, Path, dict[str, str]]:
    """The image's entrypoint over stub Kafka scripts, in a layout with config/<log4j> (which names the Kafka line):
    (script, calls file, data dir, environment of a KRaft controller)."""
    entry = REPO / "templates" / "images" / "kafka" / "entrypoint.sh"
    bin_dir, data, calls = tmp_path / "bin", tmp_path / "data", tmp_path / "calls"
    bin_dir.mkdir()
    data.mkdir()
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / log4j).write_text("rootLogger.level = INFO\n")
    (bin_dir / "kafka-storage.sh").write_text(
        f'#!/bin/bash\necho "format $*" >>{calls}\necho "cluster.id=$4" >{data}/meta.properties\n'
    )
    (bin_dir / "kafka-server-start.sh").write_text(f'#!/bin/bash\necho "{start_line}" >>{calls}\n')
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    text = entry.read_text().replace("props=/etc/kafka/server.properties", f"props={tmp_path}/server.properties")
    text = text.replace('if [[ "$(id -u)" == "0" ]]; then', "if false; then")
    text = text.replace("/etc/kafka/log4j2.properties", f"{tmp_path}/log4j2-out.properties")
    script = tmp_path / "entrypoint.sh"
    script.write_text(text)
    script.chmod(0o755)
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "KAFKA_PROCESS_ROLES": "controller",
        "KAFKA_NODE_ID": "101",
        "KAFKA_LOG_DIRS": str(data),
        "CLUSTER_ID": "MkU3OEVBNTcwNTJENDM2Qg",
        "KAFKA_HOME": str(tmp_path),
    }
    return script, calls, data, env


def test_entrypoint_formats_on_first_start_only(tmp_path: Path) -> None:
    """The image's entrypoint with stub Kafka scripts (a Kafka 3.x layout: config/log4j.properties): the
    entrypoint writes meta.properties itself once, restarts skip it, an id it cannot write runs the tool."""
    script, calls, data, env = _stub_entrypoint(tmp_path, "log4j.properties", "start $1")
    for _ in range(2):
        proc = subprocess.run([str(script), "kafka-server"], env=env, capture_output=True, text=True, timeout=30)
        assert proc.returncode == 0, proc.stderr
    lines = calls.read_text().splitlines()
    assert lines == [f"start {tmp_path}/server.properties"] * 2, "written by the entrypoint, no formatting JVM"
    assert (data / "meta.properties").read_text() == "version=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qg\nnode.id=101\n"
    calls.unlink()
    (data / "meta.properties").unlink()
    odd = {**env, "CLUSTER_ID": "not-a-kafka-uuid"}  # not what the entrypoint can write itself: kafka-storage.sh
    proc = subprocess.run([str(script), "kafka-server"], env=odd, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    lines = calls.read_text().splitlines()
    assert [ln.split()[0] for ln in lines] == ["format", "start"] and "-t not-a-kafka-uuid" in lines[0]
    props = (tmp_path / "server.properties").read_text()
    assert "process.roles=controller" in props and "node.id=101" in props and "cluster.id" not in props
    missing = subprocess.run(
        [str(script), "kafka-server"],
        env={k: v for k, v in env.items() if k != "CLUSTER_ID"},
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert missing.returncode == 1 and "CLUSTER_ID is required" in missing.stderr  # bash's ${VAR:?} exits 1


def test_entrypoint_formats_kafka_4_with_its_tool(tmp_path: Path) -> None:
    """Kafka 4.x (config/log4j2.properties, no log4j.properties): kafka-storage.sh formats on first start, so the
    bootstrap checkpoint carries the feature levels; a restart does not format again; the root level is set."""
    script, calls, _, env = _stub_entrypoint(tmp_path, "log4j2.properties", "start $1 $KAFKA_LOG4J_OPTS")
    env["KAFKA_LOG4J_ROOT_LOGLEVEL"] = "WARN"
    for _ in range(2):
        proc = subprocess.run([str(script), "kafka-server"], env=env, capture_output=True, text=True, timeout=30)
        assert proc.returncode == 0, proc.stderr
    lines = calls.read_text().splitlines()
    assert [ln.split()[0] for ln in lines] == ["format", "start", "start"]
    assert "-t MkU3OEVBNTcwNTJENDM2Qg" in lines[0]
    assert lines[1].endswith(f"-Dlog4j2.configurationFile={tmp_path}/log4j2-out.properties")
    assert (tmp_path / "log4j2-out.properties").read_text() == "rootLogger.level = WARN\n"
