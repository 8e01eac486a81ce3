"""A secured KRaft cluster on real Kafka 4.4.0 (1 controller + 3 brokers): SASL_SSL with SCRAM-SHA-512 on the client
and inter-broker listeners, TLS with node certificates on the controller listener, StandardAuthorizer.

`up` waits for it through the secure listener; the CLI's topic, produce and consume commands work unchanged (as the
first admin user); a PLAINTEXT client and an anonymous TLS client are refused on every published port; a wrong
password is one line with exit 9; no password or private key shows in the compose file, `--json` output or `logs`.
ZooKeeper mode (Kafka 3.9.2) once, on its own cluster, with the same checks in short.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import stat
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from _runtime_helpers import CLI, cli, cli_json, free_addresses, release, render, up_json
from confluent_kafka import Consumer, KafkaException, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from clusterctl.images import build as images
from clusterctl.images import kafka_maven
from clusterctl.kafka import protocol
from clusterctl.kafka.settings import LIBRDKAFKA_LOGGER
from clusterctl.spec.model import load_spec

pytestmark = [pytest.mark.real_kafka, pytest.mark.docker]

RECORDS = 50


ZK_VERSION = "3.9.2"  # the last Kafka line with ZooKeeper mode


def secure_spec(work: Path, mode: str) -> Path:
    """SASL_SSL + SCRAM-SHA-512 + authorizer, 3 brokers: KRaft on the newest Kafka line (4.4.0 here) with 1
    controller, or ZooKeeper mode on 3.9.2 with 1 ZooKeeper node; the image built if missing, a free subnet and free
    host ports."""
    wanted = kafka_maven.NEWEST_KAFKA_LINE if mode == "kraft" else ZK_VERSION
    built = {r.target: r for r in images.build_images(["kafka"], kafka_version=wanted)}
    version = built["kafka"].image.rpartition(":")[2]
    subnet, base = free_addresses(4)
    spec: dict[str, Any] = {
        "name": f"ctlsec-{uuid.uuid4().hex[:6]}",
        "profile": "offline",
        "network": {"subnet": subnet},
        "kafka": {"mode": mode, "version": version, "brokers": 3, "host_port": base,
                  "defaults": {"replication_factor": 3, "min_insync_replicas": 2, "heap": "384m"}},
        "kafka_manager": {"enabled": False},
        "security": {"protocol": "SASL_SSL", "sasl_mechanism": "SCRAM-SHA-512", "authorizer": True,
                     "users": [{"name": "admin", "role": "admin"}, {"name": "app", "role": "producer"}]},
    }  # fmt: skip
    spec |= {"kraft": {"controllers": 1}} if mode == "kraft" else {"zookeeper": {"nodes": 1, "client_port": base + 3}}
    spec_path = work / "clusterctl.yaml"
    spec_path.write_text(yaml.safe_dump(spec, sort_keys=False))
    return spec_path


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, Any]]]:
    spec_path = secure_spec(tmp_path_factory.mktemp("secure-cluster"), "kraft")
    render(spec_path)
    try:
        up = up_json(spec_path, timeout=180)
        print(f"\nsecured KRaft cluster healthy after {up['seconds_to_healthy']}s")
        yield spec_path, up
    finally:
        release(spec_path)


def _secrets(spec_path: Path) -> Path:
    return spec_path.parent / "compose" / load_spec(spec_path).name / "secrets"


def _ports(spec_path: Path) -> list[int]:
    t = load_spec(spec_path).topology
    return [t.broker_host_port(b) for b in t.broker_ids]


def test_zookeeper_mode_secured_the_same_way(tmp_path: Path) -> None:
    """ZooKeeper mode (1 ZooKeeper + 3 brokers, Kafka 3.9.2): the SCRAM users in ZooKeeper before the brokers start,
    AclAuthorizer with the roles' ACLs; `up` healthy through SASL_SSL, the CLI's round trip as the admin, the
    producer role's limits, a PLAINTEXT client refused. First in the module: its own cluster, up and down
    before the KRaft cluster (module-scoped) starts, so the two never run at once."""
    spec_path = secure_spec(tmp_path, "zookeeper")
    render(spec_path)
    try:
        up = up_json(spec_path, timeout=180)
        print(f"\nsecured ZooKeeper-mode cluster healthy after {up['seconds_to_healthy']}s")
        assert up["brokers_registered"] == [1, 2, 3]
        assert cli(spec_path, "topic", "create", "zk-orders", "-p", "3", "-r", "3").returncode == 0
        produced = subprocess.run([CLI, "-s", str(spec_path), "produce", "zk-orders"], input="a\nb\nc\n",
                                  capture_output=True, text=True, timeout=120, cwd=spec_path.parent)  # fmt: skip
        assert produced.returncode == 0, produced.stderr
        consumed = cli(spec_path, "consume", "zk-orders", "--from-beginning", "--max-messages", "3", "--timeout", "60")
        assert sorted(re.findall(r"value=(\S+)", consumed.stdout)) == ["a", "b", "c"], consumed.stderr
        _producer_writes_only(spec_path, "zk-orders")
        address = f"127.0.0.1:{_ports(spec_path)[0]}"
        assert _refused({"bootstrap.servers": address}) == "_TRANSPORT"
    finally:
        release(spec_path)


def test_up_is_healthy_through_the_secure_listener(secure: tuple[Path, dict[str, Any]]) -> None:
    spec_path, up = secure
    assert up["quorum_voters"] == [101] and up["brokers_registered"] == [1, 2, 3]
    status = cli(spec_path, "status")
    assert status.returncode == 0, status.stderr
    assert "brokers unfenced: 1,2,3 of 3" in status.stdout


def test_topic_produce_consume_round_trip_as_the_admin(secure: tuple[Path, dict[str, Any]]) -> None:
    spec_path, _ = secure
    created = cli(spec_path, "topic", "create", "orders", "-p", "3", "-r", "3")
    assert created.returncode == 0, created.stderr
    listed = cli_json(spec_path, "topic", "list")
    assert "orders" in json.dumps(listed)
    described = cli(spec_path, "topic", "describe", "orders")
    assert described.returncode == 0 and described.stdout.count(" ok ") == 3, described.stdout + described.stderr
    values = [f"v{i}" for i in range(RECORDS)]
    produced = subprocess.run([CLI, "-s", str(spec_path), "produce", "orders"], input="\n".join(values) + "\n",
                              capture_output=True, text=True, timeout=120, cwd=spec_path.parent)  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    consumed = cli(spec_path, "consume", "orders", "--from-beginning", "-g", "readers",
                   "--max-messages", str(RECORDS), "--timeout", "60")  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr
    got = re.findall(r"value=(\S+)", consumed.stdout)
    assert sorted(got) == sorted(values)


def _refused(conf: dict[str, Any]) -> str:
    quiet: dict[str, Any] = {**conf, "socket.connection.setup.timeout.ms": 3000, "logger": LIBRDKAFKA_LOGGER}
    try:
        md = AdminClient(quiet).list_topics(timeout=4)
    except KafkaException as exc:
        return str(exc.args[0].name())
    raise AssertionError(f"{conf['bootstrap.servers']} answered {conf.get('security.protocol')}: {list(md.topics)}")


def test_plaintext_and_anonymous_tls_are_refused_on_every_published_port(
    secure: tuple[Path, dict[str, Any]],
) -> None:
    spec_path, _ = secure
    ca = str(_secrets(spec_path) / "ca.pem")
    for port in _ports(spec_path):
        address = f"127.0.0.1:{port}"
        assert _refused({"bootstrap.servers": address}) == "_TRANSPORT"
        assert (
            _refused({"bootstrap.servers": address, "security.protocol": "SSL", "ssl.ca.location": ca}) == "_TRANSPORT"
        )
        # Kafka's own framing, no TLS: the broker answers with a TLS alert record (0x15) or closes, never with Kafka
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(protocol.encode_api_versions(7))
            sock.settimeout(5)
            try:
                answer = sock.recv(4)
            except ConnectionResetError:
                answer = b""
            assert answer == b"" or answer[:2] == b"\x15\x03", answer


def test_a_wrong_password_is_one_line_exit_9(secure: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    spec_path, _ = secure
    name = load_spec(spec_path).name
    shutil.copy(spec_path, tmp_path / "clusterctl.yaml")
    shutil.copytree(spec_path.parent / "compose" / name, tmp_path / "compose" / name)
    users = tmp_path / "compose" / name / "secrets" / "users.json"
    users.write_text(json.dumps({**json.loads(users.read_text()), "admin": "not-the-password"}))
    res = subprocess.run([CLI, "-s", str(tmp_path / "clusterctl.yaml"), "topic", "list"],
                         capture_output=True, text=True, timeout=120, cwd=tmp_path)  # fmt: skip
    assert res.returncode == 9, res.stderr
    first = res.stderr.strip().splitlines()[0]
    assert "authentication failed for user admin (SCRAM-SHA-512)" in first, res.stderr
    assert "not-the-password" not in res.stderr + res.stdout


def _secret_values(root: Path) -> list[str]:
    """Every password and every private key's base64 body (its lines) clusterctl made."""
    out = list(json.loads((root / "users.json").read_text()).values())
    for env in root.glob("*/secret.env"):
        out += re.findall(r"KEYSTORE_PASSWORD=(\S+)", env.read_text())
    for key in [root / "ca.key", *root.glob("clients/*.key")]:
        out += [ln for ln in key.read_text().splitlines() if ln and not ln.startswith("-----")]
    return out


def test_secrets_are_private_and_never_shown(secure: tuple[Path, dict[str, Any]]) -> None:
    spec_path, up = secure
    root = _secrets(spec_path)
    for path in [root, *root.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode == (0o700 if path.is_dir() else 0o600), (path, oct(mode))
    secrets = _secret_values(root)
    assert len(secrets) >= 3 + 4
    written = [p for p in root.parent.rglob("*") if p.is_file() and root not in p.parents]
    assert {p.name for p in written} >= {"docker-compose.yml", ".env"}
    shown = {
        **{f"{p.relative_to(root.parent)} (written by render)": p.read_text(errors="replace") for p in written},
        "up --json": json.dumps(up),
        "status --json": json.dumps(cli_json(spec_path, "status")),
        "topic list --json": json.dumps(cli_json(spec_path, "topic", "list")),
        "logs": (lambda r: r.stdout + r.stderr)(cli(spec_path, "logs", "--tail", "5000")),
    }
    assert len(shown["logs"]) > 10_000  # the brokers' own startup lines (their configuration) are in it
    for where, text in shown.items():
        leaked = [s[:4] + "..." for s in secrets if s in text]
        assert not leaked, f"{where} shows secrets: {leaked}"


def test_a_producer_writes_but_cannot_create_or_read_and_users_and_acls_are_managed(
    secure: tuple[Path, dict[str, Any]],
) -> None:
    """The producer role's ACLs (granted by `up`): write and describe topics, nothing else; a refusal translated is
    one line, exit 10. `user create|list|delete` and `acl create|list|delete` on the admin API, as the admin."""
    spec_path, _ = secure
    assert cli(spec_path, "topic", "create", "payments", "-p", "1", "-r", "3").returncode == 0
    acl_rows = cli_json(spec_path, "acl", "list", "--principal", "User:app")
    assert {(a["operation"], a["resource_type"], a["resource_name"]) for a in acl_rows} == {
        ("WRITE", "TOPIC", "*"), ("DESCRIBE", "TOPIC", "*")}  # fmt: skip
    _producer_writes_only(spec_path, "payments")
    created = cli_json(spec_path, "user", "create", "reader", "--role", "consumer")
    assert created["user"] == "reader" and len(created["acls"]) == 4
    assert "reader" in {u["user"] for u in cli_json(spec_path, "user", "list")}
    grant = ["--principal", "User:reader", "--operation", "read", "--resource-type", "group", "--resource-name", "r-"]
    assert cli_json(spec_path, "acl", "create", *grant, "--pattern", "prefixed")[0]["pattern"] == "PREFIXED"
    assert len(cli_json(spec_path, "acl", "delete", *grant, "--pattern", "PREFIXED")) == 1
    gone = cli(spec_path, "acl", "delete", *grant, "--pattern", "PREFIXED")
    assert gone.returncode == 3 and gone.stderr.count("\n") == 1, gone.stderr
    cli_json(spec_path, "user", "delete", "reader")
    assert "reader" not in {u["user"] for u in cli_json(spec_path, "user", "list")}
    assert cli_json(spec_path, "acl", "list", "--principal", "User:reader") == []


def test_client_config_works_with_kafkas_own_tools(secure: tuple[Path, dict[str, Any]]) -> None:
    """`client-config` for the admin: Kafka's own kafka-topics.sh (in the broker image, on the host's network,
    the secrets directory at the same path) lists the topics with it; the password is in the file only."""
    spec_path, _ = secure
    spec = load_spec(spec_path)
    props = spec_path.parent / "admin.properties"
    written = cli(spec_path, "client-config", "-o", str(props))
    assert written.returncode == 0, written.stderr
    assert cli(spec_path, "topic", "create", "via-tools", "-p", "1", "-r", "3").returncode == 0
    root = _secrets(spec_path).absolute()
    listed = subprocess.run(
        ["docker", "run", "--rm", "--network", "host", "--entrypoint", "kafka-topics.sh",
         "-v", f"{root}:{root}:ro", "-v", f"{props}:/client.properties:ro", spec.broker_image,
         "--bootstrap-server", spec.topology.bootstrap_servers, "--command-config", "/client.properties", "--list"],
        capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert listed.returncode == 0 and "via-tools" in listed.stdout.split(), listed.stderr[-2000:]
    password = json.loads((root / "users.json").read_text())["admin"]
    assert password in props.read_text() and password not in written.stdout + written.stderr


def _producer_writes_only(spec_path: Path, topic: str) -> None:
    """As the producer-role user `app`: creating a topic is refused (one line, exit 10), writing works, reading is
    refused."""
    from clusterctl.compose import secrets as cluster_secrets
    from clusterctl.kafka.connection import kafka_error

    spec = load_spec(spec_path)
    bootstrap = spec.topology.bootstrap_servers
    with _in(spec_path.parent):
        app: dict[str, Any] = {**cluster_secrets.client_settings(spec, "app"), "bootstrap.servers": bootstrap,
                               "logger": LIBRDKAFKA_LOGGER}  # fmt: skip
    client = AdminClient(app)
    with pytest.raises(KafkaException) as denied:
        client.create_topics([NewTopic("not-allowed", 1, 3)])["not-allowed"].result(timeout=30)
    error = kafka_error(denied.value, bootstrap)
    assert error.exit_code == 10 and "TOPIC_AUTHORIZATION_FAILED" in error.message and "\n" not in error.message
    producer, delivered = Producer({**app, "acks": "all"}), []
    producer.produce(topic, b"paid", on_delivery=lambda err, _msg: delivered.append(err))
    producer.flush(30)
    assert delivered == [None]
    consumer = Consumer({**app, "group.id": "app-reads", "auto.offset.reset": "earliest"})
    try:
        consumer.subscribe([topic])
        msg = consumer.poll(15)
        refusal = msg.error() if msg is not None else None
        assert refusal is not None and "AUTHORIZATION_FAILED" in refusal.name(), refusal
    finally:
        consumer.close()


@contextmanager
def _in(directory: Path) -> Iterator[None]:
    """compose/<name>/ is found from the working directory (as the CLI run from the spec's directory)."""
    before = Path.cwd()
    os.chdir(directory)
    try:
        yield
    finally:
        os.chdir(before)
