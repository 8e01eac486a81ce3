"""Profile contracts: the config each image's entrypoint writes from our rendered environment, checked with
Kafka's own start-up rules (no Docker), and booted on real Kafka (real_kafka, tests/_profile_proof.py)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterctl.compose import contracts as c
from clusterctl.compose.kafkarules import check_cluster
from clusterctl.compose.render import render_compose
from clusterctl.errors import SpecError
from clusterctl.spec.model import parse_spec
from clusterctl.spec.profiles import CONSOLE_IMAGE, PROFILES

pytestmark = pytest.mark.usefixtures("built_kafka_3_7")
PROOF_DIST = os.environ.get("CLUSTERCTL_KAFKA_DIST")  # read before built_kafka_3_7 hides it from the renders

CASES: dict[str, tuple[dict[str, Any], str, int]] = {  # spec, broker contract, nodes with a config file
    "default-zk": ({"profile": "default"}, "cp-kafka", 6),
    "default-kraft": ({"profile": "default", "kafka": {"mode": "kraft"}}, "cp-kafka", 6),
    "default-kraft-combined": (
        {"profile": "default", "kafka": {"mode": "kraft"}, "kraft": {"combined": True}},
        "cp-kafka",
        3,
    ),
    "wurstmeister": ({"profile": "wurstmeister"}, "wurstmeister", 6),
    "offline-zk": ({"profile": "offline"}, "clusterctl-kafka", 6),
    "offline-kraft": ({"profile": "offline", "kafka": {"mode": "kraft"}}, "clusterctl-kafka", 6),
    "default-zk5-brokers4": ({"zookeeper": {"nodes": 5}, "kafka": {"brokers": 4}}, "cp-kafka", 9),
}


def derived(case: str) -> list[c.NodeConfig]:
    data, _, _ = CASES[case]
    return c.derive(render_compose(parse_spec({"name": "lab", **data})))


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_profile_derives_a_config_kafka_accepts(case: str) -> None:
    """Fails on the old wurstmeister render: INTERNAL was never advertised (start-kafka.sh adds no listener)."""
    nodes = derived(case)
    _, contract, count = CASES[case]
    assert len(nodes) == count
    assert {n.contract for n in nodes if n.role != "zookeeper"} == {contract}
    assert check_cluster(nodes) == []


def test_wurstmeister_server_properties_exactly() -> None:
    broker = next(n for n in derived("wurstmeister") if n.service == "kafka2")
    p = broker.properties
    assert p["listeners"] == "INTERNAL://0.0.0.0:19092,EXTERNAL://0.0.0.0:9093"
    assert p["advertised.listeners"] == "INTERNAL://kafka2:19092,EXTERNAL://127.0.0.1:9093"
    assert (p["inter.broker.listener.name"], p["broker.id"], p["log.dirs"]) == ("INTERNAL", "2", "/kafka/kafka-logs")
    assert p["port"] == "9092"  # its KAFKA_PORT default, written verbatim (ignored: listeners are set)
    assert p["num.network.threads"] == "3" and "heap.opts" not in p  # the distribution's file, edited
    # edited in place: the commented "#listeners=" line became the listeners line
    assert broker.text.splitlines()[1].startswith("listeners=INTERNAL://")


def test_wurstmeister_copy_is_verbatim() -> None:
    text = c.wurstmeister_properties(
        {"KAFKA_ZOOKEEPER_CONNECT": "zk1:2181", "KAFKA_LISTENERS": "PLAINTEXT://:9092", "KAFKA_FOO__BAR": "1",
         "KAFKA_HOME": "/opt/kafka", "KAFKA_HEAP_OPTS": "-Xmx1g", "KAFKA_CREATE_TOPICS": "t:1:1"},
        hostname="kafka1",
    )  # fmt: skip
    p = c.parse_properties(text)
    assert p["foo..bar"] == "1" and p["broker.id"] == "-1" and p["log.dirs"] == "/kafka/kafka-logs-kafka1"
    assert not {"home", "heap.opts", "create.topics"} & set(p)
    with pytest.raises(c.EntrypointRefusal, match="KAFKA_ZOOKEEPER_CONNECT"):
        c.wurstmeister_properties({"KAFKA_LISTENERS": "PLAINTEXT://:9092"}, "k")
    with pytest.raises(c.EntrypointRefusal, match="'@'"):  # its sed uses @ as the delimiter
        c.wurstmeister_properties({"KAFKA_ZOOKEEPER_CONNECT": "a@b:2181", "KAFKA_LISTENERS": "P://:1"}, "k")


def test_cp_kafka_mapping_and_its_exclusions() -> None:
    assert c.cp_key("KAFKA_LOG_RETENTION_HOURS") == "log.retention.hours"
    assert c.cp_key("KAFKA_CONFLUENT__X") == "confluent_x" and c.cp_key("KAFKA_A___B_C") == "a-b.c"
    env = {"KAFKA_ZOOKEEPER_CONNECT": "zk1:2181", "KAFKA_ADVERTISED_LISTENERS": "PLAINTEXT://kafka1:9092",
           "KAFKA_HEAP_OPTS": "-Xmx1g", "KAFKA_OPTS": "-Dx", "KAFKA_JMX_PORT": "9999",
           "KAFKA_ZOOKEEPER_CLIENT_CNXN_SOCKET": "org.Netty"}  # fmt: skip
    cp = c.parse_properties(c.cp_kafka_properties(env))
    assert cp["listeners"] == "PLAINTEXT://0.0.0.0:9092" and cp["log.dirs"] == "/var/lib/kafka/data"
    assert cp["heap.opts"] == "-Xmx1g" and cp["jmx.port"] == "9999"  # upstream's missing comma; unknown keys
    assert "opts" not in cp and cp["zookeeper.clientCnxnSocket"] == "org.Netty"
    ours = c.parse_properties(c.cp_kafka_properties(env, c.CLUSTERCTL_KAFKA_EXCLUDED))
    assert not {"heap.opts", "jmx.port"} & set(ours)
    with pytest.raises(c.EntrypointRefusal, match="KAFKA_PORT is deprecated"):
        c.cp_kafka_properties({**env, "KAFKA_PORT": "9092"})
    with pytest.raises(c.EntrypointRefusal, match="not supported on a KRaft controller"):
        c.cp_kafka_properties({"KAFKA_PROCESS_ROLES": "controller", "CLUSTER_ID": "x", **env})


def test_zoo_cfg_exactly() -> None:
    zk2 = next(n for n in derived("default-zk") if n.service == "zk2")
    assert zk2.myid == "2"
    assert zk2.text.splitlines() == [
        "dataDir=/data", "dataLogDir=/datalog", "tickTime=2000", "initLimit=10", "syncLimit=5",
        "autopurge.snapRetainCount=3", "autopurge.purgeInterval=1", "maxClientCnxns=60",
        "standaloneEnabled=false", "admin.enableServer=false",
        "server.1=zk1:2888:3888;2181", "server.2=zk2:2888:3888;2181", "server.3=zk3:2888:3888;2181",
        "4lw.commands.whitelist=srvr,mntr,ruok,stat,conf,cons,isro,envi,wchs",
    ]  # fmt: skip


def _mutate(case: str, service: str, **props: str | None) -> list[str]:
    nodes = derived(case)
    for n in nodes:
        if n.service == service:
            dotted = {k.replace("_", "."): v for k, v in props.items()}
            lines = [ln for ln in n.text.splitlines() if ln.partition("=")[0] not in dotted]
            n.text = "\n".join(lines + [f"{k}={v}" for k, v in dotted.items() if v is not None])
            n.__post_init__()
    return check_cluster(nodes)


@pytest.mark.parametrize(
    ("case", "service", "props", "expected"),
    [
        # the old wurstmeister render: only EXTERNAL listened on and advertised
        (
            "wurstmeister",
            "kafka1",
            {"listeners": "EXTERNAL://0.0.0.0:9092", "advertised_listeners": "EXTERNAL://127.0.0.1:9092"},
            "inter.broker.listener.name INTERNAL is not an advertised listener",
        ),
        (
            "default-zk",
            "kafka1",
            {"advertised_listeners": "INTERNAL://127.0.0.1:19092,EXTERNAL://127.0.0.1:9092"},
            "which other containers cannot reach",
        ),
        (
            "default-zk",
            "kafka2",
            {"advertised_listeners": "INTERNAL://kafka2:19092,OTHER://127.0.0.1:9093"},
            "advertised listener OTHER is not a listener",
        ),
        ("default-zk", "kafka1", {"listener_security_protocol_map": "INTERNAL:PLAINTEXT"}, "EXTERNAL has no security"),
        ("default-zk", "kafka3", {"broker_id": "1"}, "broker.id 1 is used twice"),
        ("default-zk", "kafka1", {"zookeeper_connect": "zookeeper:2181"}, "is not the ensemble's"),
        ("default-zk", "kafka1", {"listeners": "INTERNAL://0.0.0.0:9092,EXTERNAL://0.0.0.0:9092"}, "port 9092"),
        ("default-zk", "zk3", {"server_3": "zk1:2888:3888;2181"}, "server lists differ"),
        (
            "default-kraft",
            "kafka1",
            {"advertised_listeners": "INTERNAL://kafka1:19092,CONTROLLER://kafka1:19093"},
            "advertises controller listener CONTROLLER",
        ),
        ("default-kraft", "controller2", {"node_id": "101"}, "node.id 101 is used twice"),
        ("default-kraft", "controller3", {"controller_quorum_voters": "101@controller1:19093"}, "voters differ"),
        ("default-kraft", "controller1", {"listeners": "PLAINTEXT://0.0.0.0:19093"}, "CONTROLLER is not in listen"),
        ("default-kraft", "kafka2", {"controller_listener_names": None}, "controller.listener.names is not set"),
        ("default-kraft-combined", "kafka1", {"process_roles": "broker"}, "node 1 is not a controller"),
    ],
)
def test_each_start_up_rule_can_fail(case: str, service: str, props: dict[str, str | None], expected: str) -> None:
    problems = _mutate(case, service, **props)
    assert any(expected in p for p in problems), problems


@pytest.mark.parametrize("profile", ["default", "offline"])
def test_kraft_runs_the_console_as_kafka_manager(profile: str) -> None:
    """Fails on the old spec: kraft mode turned kafka_manager off and refused it."""
    kraft = {"name": "lab", "profile": profile, "kafka": {"mode": "kraft"}}
    spec = parse_spec(kraft)
    assert spec.kafka_manager.enabled and spec.manager_kind == "console"
    manager = yaml.safe_load(render_compose(spec))["services"]["kafka-manager"]
    assert manager["image"] == CONSOLE_IMAGE and "depends_on" not in manager
    bootstrap = manager["command"][manager["command"].index("--bootstrap-server") + 1]
    assert bootstrap == spec.topology.internal_bootstrap_servers
    assert "--zookeeper" not in manager["command"]
    off = parse_spec({**kraft, "kafka_manager": {"enabled": False}})
    assert "kafka-manager" not in yaml.safe_load(render_compose(off))["services"]
    with pytest.raises(SpecError, match="kind=cmak reads ZooKeeper"):
        parse_spec({**kraft, "kafka_manager": {"kind": "cmak"}})


def test_zookeeper_mode_keeps_the_profiles_manager() -> None:
    for name in ("default", "wurstmeister"):
        spec = parse_spec({"name": "lab", "profile": name})
        assert spec.manager_kind == "cmak" and spec.kafka_manager_image == PROFILES["default"].kafka_manager
    console = yaml.safe_load(render_compose(parse_spec({"name": "lab", "profile": "offline"})))["services"]
    assert "--zookeeper" in console["kafka-manager"]["command"]


# real Kafka: each registry profile's derived configs boot 3 brokers that survive kill-leader (test-only spec:
# a unique name, a free subnet and free host ports: ZooKeeper at the block's start, brokers 3 above)
PROOF_BASE: dict[str, Any] = {
    "kafka": {"brokers": 3, "defaults": {"heap": "384m"}},
    "kafka_manager": {"enabled": False},
}
PROOF: dict[str, dict[str, Any]] = {
    "default-zk": {"profile": "default", "zookeeper": {}},
    "default-kraft": {"profile": "default", "kafka": {"mode": "kraft"}},
    "wurstmeister": {"profile": "wurstmeister", "zookeeper": {}},
}


@pytest.mark.real_kafka
@pytest.mark.docker
@pytest.mark.parametrize("case", sorted(PROOF))
def test_derived_configs_run_real_kafka_and_survive_kill_leader(case: str, tmp_path: Path) -> None:
    import json
    import uuid

    from _profile_proof import SUBSTITUTIONS, boot, down
    from _runtime_helpers import cli, free_addresses, own, render

    from clusterctl.images import build as images
    from clusterctl.spec import kafkadist

    assert PROOF_DIST is not None  # conftest pins the session's Kafka
    dist = Path(PROOF_DIST)
    images.build_images(["zookeeper", "kafka"], kafka_dist=dist)
    subnet, base = free_addresses(6)
    data = {"name": f"proof-{case}-{uuid.uuid4().hex[:6]}", "network": {"subnet": subnet}, **PROOF_BASE, **PROOF[case]}
    data["kafka"] = {**PROOF_BASE["kafka"], **PROOF[case].get("kafka", {}), "host_port": base + 3}
    if "zookeeper" in data:
        data["zookeeper"] = {**data["zookeeper"], "client_port": base}
    spec_path = tmp_path / "clusterctl.yaml"
    spec_path.write_text(yaml.safe_dump(data, sort_keys=False))
    compose_file = render(spec_path)
    own(spec_path)  # started by the proof's own compose file, same project
    spec = parse_spec(data)
    kafka_image = kafkadist.offline_image(kafkadist.dist_version(dist))  # built_kafka_3_7 hides the env
    proof, nodes, healthy_s = boot(compose_file, kafka_image, spec.kafka.jmx_port)
    try:
        assert {n.contract for n in nodes if n.role != "zookeeper"} == {CASES[case][1]}
        res = cli(spec_path, "scenario", "run", "kill-leader", "--json", "--report-dir", str(tmp_path / "drill"),
                  timeout=600)  # fmt: skip
        out = json.loads(res.stdout)
        assert res.returncode == 0 and out["ok"], f"{out.get('error')} / {res.stderr[-2000:]}"
        v, fault = out["verify"], out["faults"][0]
        assert v["lost_count"] == 0 and v["acked"] > 1000
        assert fault["detected_s"] is not None
        print(f"\n{case}: {len(nodes)} nodes from derived configs healthy after {healthy_s}s; kill-leader: "
              f"new leader after {fault['detected_s']}s ({fault['detected_by']}), {v['acked']} acked, 0 lost; "
              f"substituted: {'; '.join(SUBSTITUTIONS)}")  # fmt: skip
    finally:
        down(proof)
