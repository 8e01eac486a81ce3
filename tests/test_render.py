"""Rendering: golden files per profile, `docker compose config` on every output, safety properties, atomicity.

Regenerate the golden files after an intended template change with UPDATE_GOLDEN=1.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterctl.compose.render import (
    ENV_FILE,
    RenderError,
    existing_console_token,
    existing_secret,
    render,
    render_compose,
)
from clusterctl.errors import SpecError
from clusterctl.images import build as images
from clusterctl.spec import profiles
from clusterctl.spec.model import ClusterSpec, parse_spec

REPO = Path(__file__).resolve().parent.parent
GOLDEN = Path(__file__).resolve().parent / "golden"
CLI = str(Path(sys.executable).parent / "clusterctl")  # the console script of the running environment

TANSU: dict[str, Any] = {
    "name": "lab",
    "profile": "offline",
    "kafka": {
        "engine": "tansu",
        "brokers": 1,
        "jmx_port": None,
        "defaults": {"replication_factor": 1, "min_insync_replicas": 1},
    },
    "kafka_manager": {"enabled": False},
}
CASES: dict[str, dict[str, Any]] = {
    "offline": {"name": "lab", "profile": "offline", "kafka_manager": {"enabled": False}},
    "offline-tansu": TANSU,
    "offline-tansu-spark": {
        **TANSU,
        "spark": {"enabled": True, "workers": 2},
    },
    "default": {"name": "lab", "profile": "default"},
    "wurstmeister": {"name": "lab", "profile": "wurstmeister"},
    "zk5-brokers4": {
        "name": "big",
        "profile": "default",
        "network": {"subnet": "192.168.240.0/24"},
        "zookeeper": {"nodes": 5},
        "kafka": {"brokers": 4, "defaults": {"replication_factor": 3, "min_insync_replicas": 2}},
    },
}


pytestmark = pytest.mark.usefixtures("built_kafka_3_7")


def spec_of(case: str) -> ClusterSpec:
    return parse_spec(CASES[case], source=case)


def services(text: str) -> dict[str, Any]:
    return yaml.safe_load(text)["services"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_golden(case: str) -> None:
    text = render_compose(spec_of(case))
    golden = GOLDEN / f"{case}.docker-compose.yml"
    if os.environ.get("UPDATE_GOLDEN"):
        golden.parent.mkdir(exist_ok=True)
        golden.write_text(text)
    assert golden.is_file(), f"no golden file {golden.name}: run with UPDATE_GOLDEN=1"
    assert text == golden.read_text(), f"{case} differs from {golden.name} (UPDATE_GOLDEN=1 if intended)"


@pytest.mark.parametrize("case", sorted(CASES))
def test_docker_compose_config_accepts_every_rendering(case: str, tmp_path: Path) -> None:
    result = render(spec_of(case), tmp_path / "out", validate=False)
    proc = subprocess.run(
        ["docker", "compose", "-f", result.compose_file, "config", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    model = json.loads(proc.stdout)
    spec = spec_of(case)
    assert model["name"] == spec.topology.project
    assert sorted(model["services"]) == sorted(s.service for s in result.services)
    net = model["networks"]["cluster"]
    assert net["name"] == spec.topology.network_name
    assert net["ipam"]["config"] == [{"subnet": spec.network.subnet, "gateway": spec.network.gateway_ip}]
    for svc in result.services:
        m = model["services"][svc.service]
        assert m["container_name"] == svc.container and m["hostname"] == svc.service
        assert m["networks"]["cluster"]["ipv4_address"] == svc.ip
        assert m["restart"] == "unless-stopped"
        assert bool(m.get("ports")) == bool(svc.host_ports)  # spark workers publish nothing
        for port in m.get("ports", []):
            assert port["host_ip"] == "127.0.0.1"
            assert (
                port["published"] == port.get("published")
                and int(port["published"]) in spec.topology.host_ports().values()
            )
        for volume in m.get("volumes", []):
            assert "docker.sock" not in json.dumps(volume)
            if volume["type"] == "bind":  # only the spark workers' shared checkpoint dir, at the same path
                assert svc.role == "spark-worker"
                assert volume["source"] == volume["target"] == spec.topology.spark_shared_dir
            else:
                assert volume["type"] == "volume"
    if spec.kafka_manager.enabled:
        secret = model["services"]["kafka-manager"]["environment"]["APPLICATION_SECRET"]
        assert secret == existing_secret(tmp_path / "out") and len(secret) == 64


def test_render_validates_with_compose_itself(tmp_path: Path) -> None:
    result = render(spec_of("default"), tmp_path / "out")
    assert result.validated_by_compose


def test_listeners_and_kafka_env() -> None:
    svc = services(render_compose(spec_of("zk5-brokers4")))
    env = svc["kafka2"]["environment"]
    assert env["KAFKA_BROKER_ID"] == "2"
    assert env["KAFKA_LISTENERS"] == "INTERNAL://0.0.0.0:19092,EXTERNAL://0.0.0.0:9093"
    assert env["KAFKA_ADVERTISED_LISTENERS"] == "INTERNAL://kafka2:19092,EXTERNAL://127.0.0.1:9093"
    assert env["KAFKA_LISTENER_SECURITY_PROTOCOL_MAP"] == "INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT"
    assert env["KAFKA_INTER_BROKER_LISTENER_NAME"] == "INTERNAL"
    assert env["KAFKA_ZOOKEEPER_CONNECT"] == "zk1:2181,zk2:2181,zk3:2181,zk4:2181,zk5:2181"
    assert svc["kafka2"]["ports"] == ["127.0.0.1:9093:9093"]  # same port inside and out
    assert env["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"] == "3"
    assert env["KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"] == "2"
    assert env["KAFKA_AUTO_CREATE_TOPICS_ENABLE"] == "false"
    assert env["KAFKA_UNCLEAN_LEADER_ELECTION_ENABLE"] == "false"
    assert env["KAFKA_CONTROLLED_SHUTDOWN_ENABLE"] == "true"
    assert svc["kafka2"]["stop_grace_period"] == "90s"
    assert svc["kafka2"]["depends_on"] == {f"zk{i}": {"condition": "service_started"} for i in range(1, 6)}
    assert svc["kafka2"]["healthcheck"]["test"] == ["CMD", "bash", "-c", "exec 3<>/dev/tcp/kafka2/19092"]
    assert svc["kafka2"]["labels"] == {
        "io.clusterctl.cluster": "big",
        "io.clusterctl.role": "broker",
        "io.clusterctl.id": "2",
    }
    # a 1-broker cluster gets internal topics it can actually host
    one = parse_spec({"kafka": {"brokers": 1, "defaults": {"replication_factor": 1, "min_insync_replicas": 1}}})
    env1 = services(render_compose(one))["kafka1"]["environment"]
    assert env1["KAFKA_OFFSETS_TOPIC_REPLICATION_FACTOR"] == "1"
    assert env1["KAFKA_TRANSACTION_STATE_LOG_MIN_ISR"] == "1"


def test_zookeeper_ensemble_env() -> None:
    svc = services(render_compose(spec_of("zk5-brokers4")))
    servers = " ".join(f"server.{i}=zk{i}:2888:3888;2181" for i in range(1, 6))
    for i in range(1, 6):
        env = svc[f"zk{i}"]["environment"]
        assert env["ZOO_MY_ID"] == str(i)
        assert env["ZOO_SERVERS"] == servers
        assert env["ZOO_STANDALONE_ENABLED"] == "false" and env["ZOO_ADMINSERVER_ENABLED"] == "false"
        assert {"srvr", "mntr", "ruok", "stat", "conf", "cons"} <= set(env["ZOO_4LW_COMMANDS_WHITELIST"].split(","))
        assert svc[f"zk{i}"]["ports"] == [f"127.0.0.1:{2180 + i}:2181"]
        assert "ruok" in svc[f"zk{i}"]["healthcheck"]["test"][1] and "imok" in svc[f"zk{i}"]["healthcheck"]["test"][1]
    single = services(render_compose(parse_spec({"zookeeper": {"nodes": 1}})))
    assert single["zk1"]["environment"]["ZOO_STANDALONE_ENABLED"] == "true"
    assert single["zk1"]["environment"]["ZOO_SERVERS"] == "server.1=zk1:2888:3888;2181"


@pytest.mark.parametrize("case", sorted(CASES))
def test_safety_properties(case: str) -> None:
    text = render_compose(spec_of(case))
    assert "docker.sock" not in text
    assert "letmein" not in text
    svc = services(text)
    for name, s in svc.items():
        for port in s.get("ports", []):
            assert port.startswith("127.0.0.1:"), (name, port)
        env = s.get("environment", {})
        assert "JMX_PORT" not in env, f"{name}: a global JMX_PORT breaks CLI tools in the container"


def test_jmx_scoped_to_broker_process() -> None:
    cp = services(render_compose(spec_of("default")))["kafka1"]
    assert cp["environment"]["KAFKA_JMX_PORT"] == "9999" and "command" not in cp
    wm = services(render_compose(spec_of("wurstmeister")))["kafka1"]
    assert wm["command"] == ["bash", "-c", "JMX_PORT=9999 exec start-kafka.sh"]
    assert not any("JMX" in k for k in wm["environment"])
    assert wm["volumes"] == ["kafka1-data:/kafka"] and wm["environment"]["KAFKA_LOG_DIRS"] == "/kafka/kafka-logs"


def test_wurstmeister_renders_explicit_listeners_like_cp() -> None:
    """start-kafka.sh copies KAFKA_* verbatim (it adds no listener since 2018): the env carries both listeners."""
    svc = services(render_compose(spec_of("wurstmeister")))
    env, cp = svc["kafka2"]["environment"], services(render_compose(spec_of("default")))["kafka2"]["environment"]
    assert env["KAFKA_LISTENERS"] == cp["KAFKA_LISTENERS"] == "INTERNAL://0.0.0.0:19092,EXTERNAL://0.0.0.0:9093"
    assert env["KAFKA_ADVERTISED_LISTENERS"] == "INTERNAL://kafka2:19092,EXTERNAL://127.0.0.1:9093"
    assert env["KAFKA_INTER_BROKER_LISTENER_NAME"] == "INTERNAL"
    assert not {"KAFKA_PROTOCOL_NAME", "KAFKA_HOST_NAME", "KAFKA_PORT"} & set(env)
    # JMX: the script reads a global JMX_PORT, set inline for the broker process only
    assert svc["kafka2"]["command"] == ["bash", "-c", "JMX_PORT=9999 exec start-kafka.sh"]
    assert not any("JMX" in k for k in env)
    off = parse_spec({"kafka": {"jmx_port": None}})
    assert not any("JMX" in k for k in services(render_compose(off))["kafka1"]["environment"])


def test_tansu_broker() -> None:
    svc = services(render_compose(spec_of("offline-tansu")))
    k = svc["kafka1"]
    assert k["image"] == profiles.OFFLINE_TANSU_IMAGE
    assert k["environment"] == {
        "CLUSTER_ID": "lab",
        "LISTENER_URL": "tcp://0.0.0.0:9092",
        "ADVERTISED_LISTENER_URL": "tcp://127.0.0.1:9092",
        "STORAGE_ENGINE": "memory://tansu/",
    }
    assert "depends_on" not in k and "volumes" not in k
    assert "kafka-manager" not in svc


def test_bind_address_and_images_from_spec() -> None:
    spec = parse_spec(
        {
            "publish": {"bind_address": "0.0.0.0"},
            "images": {"kafka": "registry.local/kafka:1", "kafka_manager": "registry.local/cmak:2"},
            "profile": "offline",
        }
    )
    svc = services(render_compose(spec))
    assert svc["kafka1"]["ports"] == ["0.0.0.0:9092:9092"]
    assert svc["kafka1"]["image"] == "registry.local/kafka:1"
    assert svc["kafka-manager"]["image"] == "registry.local/cmak:2"
    assert svc["zk1"]["image"] == profiles.OFFLINE_ZOOKEEPER_IMAGE
    # clients on this host still reach 0.0.0.0-bound ports through loopback
    assert svc["kafka1"]["environment"]["KAFKA_ADVERTISED_LISTENERS"].endswith("EXTERNAL://127.0.0.1:9092")


def test_offline_image_names_match_the_image_builder() -> None:
    assert images.TARGETS["zookeeper"] == profiles.OFFLINE_ZOOKEEPER_IMAGE
    assert images.TARGETS["kafka"] == profiles.OFFLINE_KAFKA_IMAGE == "clusterctl/kafka"  # tag: the dist's version
    assert images.TARGETS["tansu"] == profiles.OFFLINE_TANSU_IMAGE
    assert images.TARGETS["spark"] == profiles.OFFLINE_SPARK_IMAGE


def test_spark_standalone_services() -> None:
    svc = services(render_compose(spec_of("offline-tansu-spark")))
    master, w1, w2 = svc["spark-master"], svc["spark-worker1"], svc["spark-worker2"]
    assert master["image"] == w1["image"] == profiles.OFFLINE_SPARK_IMAGE
    assert master["ports"] == ["127.0.0.1:7077:7077", "127.0.0.1:8080:8080"]
    assert "ports" not in w1 and "ports" not in w2
    assert master["networks"]["cluster"]["ipv4_address"] == "10.77.0.40"
    assert [w["networks"]["cluster"]["ipv4_address"] for w in (w1, w2)] == ["10.77.0.41", "10.77.0.42"]
    assert w1["command"][-1] == "spark://spark-master:7077" and w1["command"][1].endswith(".worker.Worker")
    assert w1["depends_on"] == {"spark-master": {"condition": "service_healthy"}}
    # executors reach tansu's advertised 127.0.0.1:9092 through the worker's relay to kafka1:9092
    assert w1["environment"]["KAFKA_LOOPBACK_RELAY"] == "127.0.0.1:9092=kafka1:9092"
    assert w1["volumes"] == ["/tmp/clusterctl-spark/lab:/tmp/clusterctl-spark/lab"]
    assert all(s["restart"] == "unless-stopped" and s["init"] is True and "healthcheck" in s for s in (master, w1))
    # off by default: nothing spark in the other renderings
    assert not any(name.startswith("spark") for name in services(render_compose(spec_of("offline-tansu"))))
    published = parse_spec({**CASES["default"], "spark": {"enabled": True, "master_port": 17077, "ui_port": 18080}})
    master = services(render_compose(published))["spark-master"]
    assert master["image"] == profiles.PUBLISHED_SPARK_IMAGE
    assert master["ports"] == ["127.0.0.1:17077:7077", "127.0.0.1:18080:8080"]
    # a non-loopback publish address is reachable from the workers as it is: no relay
    lan = parse_spec({**CASES["default"], "publish": {"bind_address": "192.168.5.5"}, "spark": {"enabled": True}})
    assert services(render_compose(lan))["spark-worker1"]["environment"]["KAFKA_LOOPBACK_RELAY"] == ""


def test_secret_random_per_cluster_stable_across_rerenders(tmp_path: Path) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    r1 = render(spec_of("default"), a, validate=False)
    assert r1.secret == "created"
    s1 = existing_secret(a)
    assert s1 and len(s1) == 64
    assert stat.S_IMODE((a / ENV_FILE).stat().st_mode) == 0o600
    r2 = render(spec_of("default"), a, validate=False)
    assert r2.secret == "kept" and existing_secret(a) == s1
    render(spec_of("default"), b, validate=False)
    assert existing_secret(b) != s1
    # deterministic apart from the secret: two clusters from one spec render identical compose files
    assert (a / "docker-compose.yml").read_text() == (b / "docker-compose.yml").read_text()
    assert s1 not in (a / "docker-compose.yml").read_text()


def _broken_templates(tmp_path: Path, body: str) -> Path:
    d = tmp_path / "templates"
    d.mkdir()
    (d / "docker-compose.yml.j2").write_text(body)
    return d


def test_failed_render_leaves_nothing_behind(tmp_path: Path) -> None:
    out = tmp_path / "compose" / "lab"
    broken = _broken_templates(tmp_path, "services:\n  {% for x in %}\n")
    with pytest.raises(RenderError, match=r"template docker-compose\.yml\.j2"):
        render(spec_of("default"), out, templates_dir=broken)
    assert not (tmp_path / "compose").exists()  # not even the parent directory


def test_compose_rejection_keeps_previous_rendering(tmp_path: Path) -> None:
    out = tmp_path / "compose" / "lab"
    render(spec_of("default"), out, validate=False)
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    bad = _broken_templates(tmp_path, "services:\n  zk1:\n    image: x\n    bogus_key: 1\n")
    with pytest.raises(RenderError, match="docker compose rejected"):
        render(spec_of("default"), out, templates_dir=bad)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in out.parent.iterdir()) == ["lab"]  # no temp or backup directories


def test_render_cli_json_and_table(tmp_path: Path) -> None:
    spec_path = tmp_path / "clusterctl.yaml"
    spec_path.write_text(yaml.safe_dump(CASES["offline-tansu"]))
    proc = subprocess.run(
        [CLI, "-s", str(spec_path), "render", "--json"], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["compose_file"] == "compose/lab/docker-compose.yml" and data["validated_by_compose"] is True
    assert [(s["service"], s["ip"], s["host_ports"]) for s in data["services"]] == [
        ("zk1", "10.77.0.11", ["127.0.0.1:2181"]),
        ("zk2", "10.77.0.12", ["127.0.0.1:2182"]),
        ("zk3", "10.77.0.13", ["127.0.0.1:2183"]),
        ("kafka1", "10.77.0.21", ["127.0.0.1:9092"]),
    ]
    assert (tmp_path / "compose" / "lab" / "docker-compose.yml").is_file()
    table = subprocess.run(
        [CLI, "-s", str(spec_path), "render", "--output-dir", "elsewhere"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert table.returncode == 0, table.stderr
    assert "kafka1" in table.stdout and "10.77.0.21" in table.stdout and "elsewhere/docker-compose.yml" in table.stderr
    shutil.rmtree(tmp_path / "elsewhere")


def test_kafka_manager_service() -> None:
    m = services(render_compose(spec_of("default")))["kafka-manager"]
    assert m["image"] == "hlebalbau/kafka-manager:stable"
    assert m["environment"]["ZK_HOSTS"] == "zk1:2181,zk2:2181,zk3:2181"
    assert m["environment"]["APPLICATION_SECRET"].startswith("${CMAK_APPLICATION_SECRET:?")  # from .env, never inline
    assert "-Dpidfile.path=/dev/null" in m["command"]
    assert m["ports"] == ["127.0.0.1:9000:9000"]
    assert m["labels"]["io.clusterctl.role"] == "manager"
    # the seed's sheepkiller/kafka-manager (1.3.1.8, 2016) knows Kafka up to 0.9: wurstmeister runs CMAK 3 too
    assert services(render_compose(spec_of("wurstmeister")))["kafka-manager"]["image"] == m["image"]


def test_console_service_offline_default(tmp_path: Path) -> None:
    """Offline, kafka_manager defaults to clusterctl's console: no pull, a healthcheck, a token from .env."""
    spec = parse_spec({"name": "lab", "profile": "offline"})
    assert spec.manager_kind == "console" and spec.kafka_manager_image == profiles.CONSOLE_IMAGE
    result = render(spec, tmp_path / "out")
    m = services((tmp_path / "out" / "docker-compose.yml").read_text())["kafka-manager"]
    assert m["image"] == "clusterctl/console:0.1.0"
    assert m["ports"] == ["127.0.0.1:9000:9000"]
    want = "${CLUSTERCTL_CONSOLE_TOKEN:?missing: run clusterctl render to create .env}"
    assert m["environment"] == {"CLUSTERCTL_CONSOLE_TOKEN": want}
    assert m["command"][:3] == ["python3", "-m", "clusterctl.console"]
    cmd = dict(zip(m["command"][3::2], m["command"][4::2], strict=True))
    assert cmd["--bootstrap-server"] == "kafka1:19092,kafka2:19092,kafka3:19092"
    assert cmd["--zookeeper"] == "zk1:2181,zk2:2181,zk3:2181" and cmd["--exposed-on"] == "127.0.0.1"
    assert "healthz" in m["healthcheck"]["test"][-1]
    assert result.secret == "created" and existing_secret(tmp_path / "out") is None
    token = existing_console_token(tmp_path / "out")
    assert token and len(token) == 64 and token not in json.dumps(m)
    assert stat.S_IMODE((tmp_path / "out" / ENV_FILE).stat().st_mode) == 0o600
    assert render(spec, tmp_path / "out").secret == "kept" and existing_console_token(tmp_path / "out") == token


def test_console_service_on_tansu_relays_the_advertised_address() -> None:
    lan = {"publish": {"bind_address": "0.0.0.0"}}
    names = ["myhost.lan", "console.example.com:443"]
    spec = parse_spec({**TANSU, "kafka_manager": {"enabled": True, "port": 9100, "public_names": names}, **lan})
    m = services(render_compose(spec))["kafka-manager"]
    pairs = list(zip(m["command"][3::2], m["command"][4::2], strict=True))
    cmd = dict(pairs)
    # tansu advertises only 127.0.0.1:9092 (the bind is 0.0.0.0): the container relays it to kafka1
    assert cmd["--bootstrap-server"] == "127.0.0.1:9092" and cmd["--exposed-on"] == "0.0.0.0"
    # the Host check inside the container knows the published port and the names browsers use
    assert cmd["--public-port"] == "9100" and [v for k, v in pairs if k == "--public-name"] == names
    for bad in ("evil/x", "a b", "x:70000", "a" * 300):
        with pytest.raises(SpecError, match="public_names"):
            parse_spec({**TANSU, "kafka_manager": {"enabled": True, "public_names": [bad]}})
    assert m["environment"]["KAFKA_LOOPBACK_RELAY"] == "127.0.0.1:9092=kafka1:9092"
    assert m["ports"] == ["0.0.0.0:9100:9000"]
    with pytest.raises(SpecError, match=r"kafka_manager\.kind=cmak needs kafka\.engine=kafka"):
        parse_spec({**TANSU, "kafka_manager": {"enabled": True, "kind": "cmak"}})
