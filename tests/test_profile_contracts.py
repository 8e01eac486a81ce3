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
    "apache-kraft": ({"profile": "apache", "kafka": {"mode": "kraft"}}, "apache-kafka", 6),
    "apache-kraft-combined": (
        {"profile": "apache", "kafka": {"mode": "kraft"}, "kraft": {"combined": True}},
        "apache-kafka",
        3,
    ),
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


APACHE_KAFKA2 = [  # KafkaDockerWrapper: a newline, then one line per variable (sorted here: sys.env's order)
    "",
    "advertised.listeners=INTERNAL://kafka2:19092,EXTERNAL://127.0.0.1:9093",
    "auto.create.topics.enable=false",
    "broker.heartbeat.interval.ms=500",
    "broker.session.timeout.ms=9000",
    "controlled.shutdown.enable=true",
    "controller.listener.names=CONTROLLER",
    "controller.quorum.election.timeout.ms=500",
    "controller.quorum.voters=101@controller1:19093,102@controller2:19093,103@controller3:19093",
    "default.replication.factor=3",
    "group.initial.rebalance.delay.ms=0",
    "inter.broker.listener.name=INTERNAL",
    "jmx.port=9999",  # KAFKA_JMX_PORT is not excluded: an unknown key Kafka only warns about
    "listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT",
    "listeners=INTERNAL://0.0.0.0:19092,EXTERNAL://0.0.0.0:9093",
    "log.dirs=/var/lib/kafka/data",
    "log.retention.bytes=1073741824",
    "log.retention.hours=168",
    "log.segment.bytes=268435456",
    "min.insync.replicas=2",
    "node.id=2",
    "num.partitions=3",
    "offsets.topic.replication.factor=3",
    "process.roles=broker",
    "replica.lag.time.max.ms=10000",
    "transaction.state.log.min.isr=2",
    "transaction.state.log.replication.factor=3",
    "unclean.leader.election.enable=false",
]


def test_apache_server_properties_exactly() -> None:
    """Nothing of the packaged default survives: KAFKA_* variables replace it entirely; the JVM's variables
    (KAFKA_HEAP_OPTS, KAFKA_JVM_PERFORMANCE_OPTS, KAFKA_LOG4J_ROOT_LOGLEVEL, KAFKA_JMX_HOSTNAME) stay out."""
    from clusterctl.compose.environment import cluster_id_ref

    nodes = {n.service: n for n in derived("apache-kraft")}
    assert nodes["kafka2"].text.split("\n") == APACHE_KAFKA2
    assert nodes["controller1"].text.split("\n") == [
        "",
        "broker.heartbeat.interval.ms=500",
        "broker.session.timeout.ms=9000",
        "controller.listener.names=CONTROLLER",
        "controller.quorum.election.timeout.ms=500",
        "controller.quorum.voters=101@controller1:19093,102@controller2:19093,103@controller3:19093",
        "listener.security.protocol.map=CONTROLLER:PLAINTEXT",
        "listeners=CONTROLLER://0.0.0.0:19093",
        "log.dirs=/var/lib/kafka/data",
        "node.id=101",
        "process.roles=controller",
    ]  # fmt: skip
    # every node formats with the one CLUSTER_ID of .env (compose resolves it; the real boot checks the value)
    assert {n.cluster_id for n in nodes.values()} == {cluster_id_ref()}
    packaged = c.parse_properties(c.APACHE_PACKAGED_SERVER_PROPERTIES)
    assert not {"num.network.threads", "socket.send.buffer.bytes", "share.coordinator.state.topic.min.isr"} & set(
        nodes["kafka2"].properties
    ) and {"num.network.threads", "share.coordinator.state.topic.min.isr"} <= set(packaged)


@pytest.mark.parametrize(
    "key",
    ["log.retention.hours", "confluent_x", "a-b.c", "listener.name.internal.ssl.key-store_type", "x_y-z.w"],
)
def test_apache_naming_rule_round_trip(key: str) -> None:
    """`.` -> `_`, `_` -> `__`, `-` -> `___` names the variable; KafkaDockerWrapper maps it back."""
    name = c.apache_env_name(key)
    assert c.apache_key(name) == key
    assert c.parse_properties(c.apache_kafka({name: "v"})[0]) == {key: "v"}


@pytest.mark.parametrize(("key", "reads_back"), [("x.__y", "x-_y"), ("a_.b", "a-b"), ("a.kafka.b", "a.b")])
def test_apache_naming_rule_has_no_variable_for(key: str, reads_back: str) -> None:
    with pytest.raises(ValueError, match=f"reads back as {reads_back}$"):
        c.apache_env_name(key)


def test_apache_naming_rule_and_cp_kafkas() -> None:
    assert c.apache_env_name("a-b.c_d") == "KAFKA_A___B_C__D"
    assert c.apache_key("KAFKA_A___B_C__D") == c.cp_key("KAFKA_A___B_C__D") == "a-b.c_d"
    # it removes every "KAFKA_", not only the prefix (String.replace); cp-kafka keeps the inner one
    assert c.apache_key("KAFKA_SASL_KAFKA_SERVER_X") == "sasl.server.x"
    assert c.cp_key("KAFKA_SASL_KAFKA_SERVER_X") == "sasl.kafka.server.x"


def test_apache_entrypoint_rules() -> None:
    """run -> configureDefaults -> configure -> launch -> KafkaDockerWrapper setup, as apache/kafka docker/ has them."""
    packaged, cluster_id = c.apache_kafka({})
    assert packaged == c.APACHE_PACKAGED_SERVER_PROPERTIES and cluster_id == c.APACHE_DEFAULT_CLUSTER_ID
    assert c.apache_kafka({"CLUSTER_ID": ""})[1] == c.APACHE_DEFAULT_CLUSTER_ID  # empty counts as unset
    # one variable replaces the packaged file entirely; the excluded ones configure nothing
    env = {"KAFKA_NUM_PARTITIONS": "3", "KAFKA_HEAP_OPTS": "-Xmx1g", "KAFKA_OPTS": "-Dx", "KAFKA_VERSION": "4.4.0",
           "KAFKA_LOG4J_ROOT_LOGLEVEL": "WARN", "KAFKA_JMX_OPTS": "-Dy", "KAFKA_JMX_HOSTNAME": "h",
           "KAFKA_JVM_PERFORMANCE_OPTS": "-XX:+UseSerialGC", "KAFKA_GC_LOG_OPTS": "",
           "KAFKA_LOG4J_LOGGERS": "a=INFO", "KAFKA_TOOLS_LOG4J_LOGLEVEL": "ERROR", "KAFKA_LOG4J_OPTS": "-Dz",
           "CLUSTER_ID": "abc", "PATH": "/bin"}  # fmt: skip
    text, cluster_id = c.apache_kafka(env)
    assert (text, cluster_id) == ("\nnum.partitions=3", "abc")
    # a file mounted at /mnt/shared/config comes first, the variables are appended (the last line wins)
    mounted = "num.partitions=1\nlog.dirs=/data\n"
    assert c.apache_kafka(env, mounted=mounted)[0] == mounted + "\nnum.partitions=3"
    assert c.parse_properties(c.apache_kafka(env, mounted=mounted)[0]) == {"num.partitions": "3", "log.dirs": "/data"}
    assert c.apache_kafka({}, mounted="  \n")[0] == c.APACHE_PACKAGED_SERVER_PROPERTIES  # blank: the default
    # listeners default to the advertised ones on 0.0.0.0, except on a controller
    adv = {"KAFKA_PROCESS_ROLES": "broker", "KAFKA_ADVERTISED_LISTENERS": "A://kafka1:1,B://127.0.0.1:2"}
    assert c.parse_properties(c.apache_kafka(adv)[0])["listeners"] == "A://0.0.0.0:1,B://0.0.0.0:2"
    with pytest.raises(c.EntrypointRefusal, match="not supported on a KRaft controller"):
        c.apache_kafka({**adv, "KAFKA_PROCESS_ROLES": "controller"})
    assert "advertised.listeners" not in c.apache_kafka({**adv, "KAFKA_PROCESS_ROLES": "controller",
                                                         "KAFKA_ADVERTISED_LISTENERS": ""})[0]  # fmt: skip
    with pytest.raises(c.EntrypointRefusal, match="KAFKA_OPTS environment variable not set"):
        c.apache_kafka({"KAFKA_ADVERTISED_LISTENERS": "SASL_PLAINTEXT://k:1"})
    with pytest.raises(c.EntrypointRefusal, match=r"two variables set a\.b"):
        c.apache_kafka({"KAFKA_A_B": "1", "KAFKA_A_KAFKA_B": "2"})


def test_apache_ssl_secrets() -> None:
    """configure reads the keystore and its credentials from /etc/kafka/secrets."""
    ssl = {"KAFKA_ADVERTISED_LISTENERS": "SSL://kafka1:9093", "KAFKA_SSL_KEYSTORE_FILENAME": "k.jks",
           "KAFKA_SSL_KEY_CREDENTIALS": "key_creds", "KAFKA_SSL_KEYSTORE_CREDENTIALS": "ks_creds"}  # fmt: skip
    secrets = {"k.jks": "<binary>", "key_creds": "pw1", "ks_creds": "pw2"}
    p = c.parse_properties(c.apache_kafka(ssl, secrets=secrets)[0])
    assert p["ssl.keystore.location"] == "/etc/kafka/secrets/k.jks"
    assert (p["ssl.key.password"], p["ssl.keystore.password"]) == ("pw1", "pw2")
    assert p["ssl.keystore.filename"] == "k.jks"  # not excluded: written, an unknown key
    with pytest.raises(c.EntrypointRefusal, match="/etc/kafka/secrets/ks_creds file does not exist"):
        c.apache_kafka(ssl, secrets={"k.jks": "", "key_creds": ""})
    with pytest.raises(c.EntrypointRefusal, match="KAFKA_SSL_KEYSTORE_FILENAME environment variable not set"):
        c.apache_kafka({"KAFKA_ADVERTISED_LISTENERS": "SSL://kafka1:9093"})
    with pytest.raises(c.EntrypointRefusal, match="KAFKA_SSL_TRUSTSTORE_FILENAME"):
        c.apache_kafka({**ssl, "KAFKA_SSL_CLIENT_AUTH": "required"}, secrets=secrets)


def test_apache_profile_refuses_zookeeper_mode() -> None:
    for data in ({"profile": "apache"}, {"profile": "apache", "kafka": {"engine": "tansu", "brokers": 1,
                 "defaults": {"replication_factor": 1, "min_insync_replicas": 1}}}):  # fmt: skip
        with pytest.raises(SpecError) as err:
            parse_spec({"name": "lab", **data})
        assert err.value.exit_code == 2 and "\n" not in err.value.message
        assert "profile apache runs Apache's apache/kafka:4.4.0 in KRaft mode, which has no ZooKeeper mode" in str(
            err.value
        )
    assert parse_spec({"name": "lab", "profile": "apache", "kafka": {"mode": "kraft"}}).broker_image == (
        "apache/kafka:4.4.0"
    )


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
        # apache/kafka: the same rules on what its KafkaDockerWrapper writes
        (
            "apache-kraft",
            "kafka1",
            {"advertised_listeners": "INTERNAL://127.0.0.1:19092,EXTERNAL://127.0.0.1:9092"},
            "which other containers cannot reach",
        ),
        (
            "apache-kraft",
            "kafka2",
            {"advertised_listeners": "INTERNAL://kafka2:19092,OTHER://127.0.0.1:9093"},
            "advertised listener OTHER is not a listener",
        ),
        (
            "apache-kraft",
            "kafka3",
            {"advertised_listeners": "INTERNAL://kafka3:19092,EXTERNAL://0.0.0.0:9094"},
            "non-routable 0.0.0.0",
        ),
        (
            "apache-kraft",
            "kafka1",
            {"listener_security_protocol_map": "INTERNAL:PLAINTEXT,CONTROLLER:PLAINTEXT"},
            "EXTERNAL has no security",
        ),
        ("apache-kraft", "kafka1", {"listeners": "INTERNAL://0.0.0.0:9092,EXTERNAL://0.0.0.0:9092"}, "port 9092"),
        ("apache-kraft", "kafka2", {"listeners": "INTERNAL://0.0.0.0:x,EXTERNAL://0.0.0.0:9093"}, "no valid port"),
        ("apache-kraft", "kafka2", {"inter_broker_listener_name": "EXTERNAL"}, "advertises EXTERNAL as '127.0.0.1'"),
        (
            "apache-kraft",
            "kafka1",
            {
                "advertised_listeners": "INTERNAL://kafka1:19092,CONTROLLER://kafka1:19093",
                "listeners": "INTERNAL://0.0.0.0:19092,CONTROLLER://0.0.0.0:19093",
            },
            "advertises controller listener CONTROLLER",
        ),
        (
            "apache-kraft",
            "kafka1",
            {"listeners": "INTERNAL://0.0.0.0:19092,EXTERNAL://0.0.0.0:9092,CONTROLLER://0.0.0.0:19093"},
            "a broker-only node listens on controller listener",
        ),
        ("apache-kraft", "kafka3", {"node_id": "1"}, "node.id 1 is used twice"),
        ("apache-kraft", "controller2", {"node_id": "101"}, "node.id 101 is used twice"),
        ("apache-kraft", "controller3", {"controller_quorum_voters": "101@controller1:19093"}, "voters differ"),
        ("apache-kraft", "kafka2", {"controller_quorum_voters": None}, "voters differ or are missing"),
        ("apache-kraft", "controller1", {"listeners": "PLAINTEXT://0.0.0.0:19093"}, "CONTROLLER is not in listen"),
        ("apache-kraft", "kafka2", {"controller_listener_names": None}, "controller.listener.names is not set"),
        ("apache-kraft", "kafka3", {"process_roles": "zookeeper"}, "is not broker and/or controller"),
        ("apache-kraft", "kafka1", {"zookeeper_connect": "zk1:2181"}, "KRaft node with zookeeper.connect"),
        (
            "apache-kraft",
            "controller1",
            {"listener_security_protocol_map": "PLAINTEXT:PLAINTEXT"},
            "controller listener CONTROLLER has no security protocol",
        ),
        ("apache-kraft-combined", "kafka1", {"process_roles": "broker"}, "node 1 is not a controller"),
    ],
)
def test_each_start_up_rule_can_fail(case: str, service: str, props: dict[str, str | None], expected: str) -> None:
    problems = _mutate(case, service, **props)
    assert any(expected in p for p in problems), problems


@pytest.mark.parametrize("profile", ["default", "offline", "apache"])
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
    "apache-kraft": {"profile": "apache", "kafka": {"mode": "kraft"}},
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
    apache = PROFILES[PROOF[case]["profile"]].broker_flavor == "apache"
    if apache:  # the Kafka of the profile's tag (apache/kafka:4.4.0 -> clusterctl/kafka:4.4.0, Maven Central)
        version = PROFILES["apache"].kafka.rpartition(":")[2]
        built = {r.target: r.image for r in images.build_images(["kafka"], kafka_version=version)}
        kafka_image = built["kafka"]
        assert kafka_image == kafkadist.offline_image(version)
    else:
        images.build_images(["zookeeper", "kafka"], kafka_dist=dist)
        kafka_image = kafkadist.offline_image(kafkadist.dist_version(dist))  # built_kafka_3_7 hides the env
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
    proof, nodes, healthy_s = boot(compose_file, kafka_image, spec.kafka.jmx_port)
    try:
        assert {n.contract for n in nodes if n.role != "zookeeper"} == {CASES[case][1]}
        if apache:  # every node formatted with the cluster id of the rendered .env, resolved by compose
            from clusterctl.compose.render import existing_cluster_id

            assert {n.cluster_id for n in nodes} == {existing_cluster_id(compose_file.parent)} != {None}
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


def test_init_profile_apache_writes_a_kraft_spec(tmp_path: Path) -> None:
    from clusterctl.spec.initfile import init_spec

    result = init_spec(tmp_path / "clusterctl.yaml", profile="apache")
    assert (result.spec["profile"], result.spec["kafka"]["mode"]) == ("apache", "kraft")
    assert result.spec["kafka_manager"]["enabled"] and 'profile: "apache"' in (tmp_path / "clusterctl.yaml").read_text()
    with pytest.raises(SpecError, match="which has no ZooKeeper mode"):
        init_spec(tmp_path / "zk.yaml", profile="apache", mode="zookeeper")
    assert not (tmp_path / "zk.yaml").exists()
