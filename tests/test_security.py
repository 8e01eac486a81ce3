"""The `security:` section without Docker: its checks (one line, exit 2), what `render` makes of it (compose file,
secrets with their modes, certificates and keystores) and the client settings clusterctl's commands use.

The real cluster (SASL_SSL + SCRAM-SHA-512 + authorizer on Kafka 4.4.0) is tests/test_security_kafka.py.
"""

from __future__ import annotations

import ipaddress
import json
import re
import stat
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import pkcs12

from clusterctl.compose import secrets
from clusterctl.compose.render import render
from clusterctl.errors import SpecError
from clusterctl.spec.model import ClusterSpec, parse_spec

SECURE: dict[str, Any] = {
    "protocol": "SASL_SSL",
    "sasl_mechanism": "SCRAM-SHA-512",
    "authorizer": True,
    "users": [{"name": "admin", "role": "admin"}, {"name": "app", "role": "producer"}],
}


def secure_spec(**security: Any) -> ClusterSpec:
    return parse_spec(
        {
            "name": "seclab",
            "profile": "offline",
            "network": {"subnet": "10.231.0.0/24"},
            "kafka": {"mode": "kraft", "version": "4.4.0", "brokers": 3},
            "kraft": {"controllers": 1},
            "kafka_manager": {"enabled": False},
            "security": {**SECURE, **security},
        }
    )


def test_plaintext_is_the_default_and_renders_no_secrets(tmp_path: Path) -> None:
    spec = parse_spec({"name": "plain", "profile": "offline", "kafka": {"mode": "kraft", "version": "4.4.0"},
                       "kafka_manager": {"enabled": False}})  # fmt: skip
    assert spec.security.protocol == "PLAINTEXT" and not spec.security.enabled
    result = render(spec, tmp_path / "out", validate=False)
    assert result.secrets == "none" and not (tmp_path / "out" / "secrets").exists()
    assert "SSL" not in Path(result.compose_file).read_text().replace("PLAINTEXT", "")


BAD: list[tuple[dict[str, Any], str]] = [
    ({"security": {"protocol": "TLS"}}, "security.protocol"),
    ({"security": {"mtls": True}}, "need security.protocol other than PLAINTEXT"),
    ({"security": {**SECURE, "users": [{"name": "app", "role": "producer"}]}}, "needs a user with role admin"),
    ({"security": {**SECURE, "users": [{"name": "admin"}, {"name": "admin"}]}}, "'admin' appears twice"),
    ({"security": {**SECURE, "users": [{"name": "a b"}]}}, "security.users name"),
    ({"security": {**SECURE, "users": [{"name": "x" * 65}]}}, "security.users name"),
    ({"security": {**SECURE, "users": [{"name": "clusterctl-inter-broker"}]}}, "the brokers' own user"),
    ({"security": {**SECURE, "users": [{"name": "a", "role": "root"}]}}, "role"),
    ({"security": {"protocol": "SASL_PLAINTEXT", "mtls": True, "users": [{"name": "a"}]}}, "security.mtls needs TLS"),
    ({"security": {"protocol": "SSL", "authorizer": True}}, "security.authorizer needs SASL"),
    ({"security": {"protocol": "SSL", "users": [{"name": "a"}]}}, "has no SASL"),
    (
        {
            "kafka": {"engine": "tansu", "brokers": 1, "defaults": {"replication_factor": 1, "min_insync_replicas": 1}},
            "kraft": {},
        },
        "needs kafka.engine kafka",
    ),
    ({"kafka_manager": {"enabled": True}}, "the console and Spark do not authenticate yet"),
    ({"kraft": {"controllers": 1, "quorum": "dynamic"}}, "needs kraft.quorum static"),
    ({"profile": "apache"}, "needs profile offline"),
]


@pytest.mark.parametrize(("change", "says"), BAD, ids=[s for _, s in BAD])
def test_bad_security_is_one_line_exit_2(change: dict[str, Any], says: str) -> None:
    data: dict[str, Any] = {
        "name": "seclab", "profile": "offline", "kafka": {"mode": "kraft", "version": "4.4.0"},
        "kraft": {"controllers": 1}, "kafka_manager": {"enabled": False}, "security": SECURE,
    }  # fmt: skip
    data.update(change)
    with pytest.raises(SpecError) as exc:
        parse_spec(data)
    assert says in exc.value.message and "\n" not in exc.value.message and exc.value.exit_code == 2


def _modes(root: Path) -> dict[str, int]:
    return {str(p.relative_to(root)): stat.S_IMODE(p.stat().st_mode) for p in [root, *root.rglob("*")]}


def test_render_makes_secrets_with_private_modes_and_keeps_them(tmp_path: Path) -> None:
    spec = secure_spec(mtls=True)
    out = tmp_path / "out"
    assert render(spec, out, validate=False).secrets == "created"
    root = out / "secrets"
    modes = _modes(root)
    assert {m for p, m in modes.items() if (root / p).is_dir()} == {0o700}
    assert {m for p, m in modes.items() if (root / p).is_file()} == {0o600}
    passwords = json.loads((root / "users.json").read_text())
    assert set(passwords) == {"admin", "app", "clusterctl-inter-broker"}
    ca = (root / "ca.pem").read_bytes()
    assert render(spec, out, validate=False).secrets == "kept"
    assert json.loads((root / "users.json").read_text()) == passwords and (root / "ca.pem").read_bytes() == ca
    compose = (out / "docker-compose.yml").read_text()
    for secret in [*passwords.values(), "PRIVATE KEY"]:
        assert secret not in compose
    assert (root / "clients" / "admin.pem").is_file() and (root / "clients" / "app.key").is_file()


def test_node_keystore_opens_with_its_password_and_names_every_address(tmp_path: Path) -> None:
    spec = secure_spec()
    render(spec, tmp_path / "out", validate=False)
    node = tmp_path / "out" / "secrets" / "kafka2"
    env = (node / "secret.env").read_text()
    password = re.search(r"^export KAFKA_SSL_KEYSTORE_PASSWORD=(\S+)$", env, re.M)
    assert password is not None
    key, cert, chain = pkcs12.load_key_and_certificates((node / "keystore.p12").read_bytes(), password[1].encode())
    assert key is not None and cert is not None and len(chain) == 1
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {"kafka2", "seclab-kafka2", "localhost"} <= set(sans.get_values_for_type(x509.DNSName))
    ips = {str(i) for i in sans.get_values_for_type(x509.IPAddress)}
    assert {spec.topology.broker_ip(2), "127.0.0.1"} <= ips and all(ipaddress.ip_address(i) for i in ips)
    assert cert.issuer == chain[0].subject
    assert "--add-scram" in env and "SCRAM-SHA-512=[name=admin,password=" in env


def test_compose_file_runs_secured_nodes_on_their_mounted_secrets(tmp_path: Path) -> None:
    spec = secure_spec()
    text = Path(render(spec, tmp_path / "out", validate=False).compose_file).read_text()
    assert (
        text.count('entrypoint: ["bash", "/run/clusterctl-start.sh", "kafka-server"]') == 4
    )  # 1 controller, 3 brokers
    assert '"./secrets/kafka1:/run/clusterctl-secrets:ro"' in text
    assert "INTERNAL:SASL_SSL,EXTERNAL:SASL_SSL,CONTROLLER:SSL" in text
    assert "org.apache.kafka.metadata.authorizer.StandardAuthorizer" in text
    assert '"User:clusterctl-inter-broker;User:admin;User:CN=controller1;' in text
    assert "User:app" not in text  # a producer is no super user
    assert "PASSWORD" not in text and "JAAS" not in text


def test_client_settings_are_the_first_admin_and_the_ca(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # compose/<name>/ under the working directory
    spec = secure_spec()
    render(spec, validate=False)
    conf = secrets.client_settings(spec)
    password = json.loads((tmp_path / "compose" / "seclab" / "secrets" / "users.json").read_text())["admin"]
    assert conf == {
        "security.protocol": "SASL_SSL",
        "ssl.ca.location": str(tmp_path / "compose/seclab/secrets/ca.pem"),
        "ssl.endpoint.identification.algorithm": "https",
        "sasl.mechanisms": "SCRAM-SHA-512",
        "sasl.username": "admin",
        "sasl.password": password,
    }
    assert secrets.client_settings(spec, "app")["sasl.username"] == "app"


def test_client_settings_before_render_are_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(secrets.SecretsError) as exc:
        secrets.client_settings(secure_spec())
    assert "no SCRAM passwords" in exc.value.message and "clusterctl render" in (exc.value.hint or "")


@pytest.mark.parametrize(("protocol_", "tls"), [("SASL_PLAINTEXT", False), ("SASL_SSL", True)])
def test_wire_requests_use_tls_where_the_listener_has_it(
    protocol_: str, tls: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """DescribeQuorum and Metadata over clusterctl's own wire protocol: a broker's host listener as
    security.protocol says (SCRAM as the first admin, TLS only for *_SSL), a controller's always TLS with
    clusterctl's certificate and no SASL (found on SASL_PLAINTEXT: every request was wrapped in TLS)."""
    from clusterctl.kafka import protocol, settings

    monkeypatch.chdir(tmp_path)
    for module in (protocol, settings):
        monkeypatch.setattr(module, "_SECURED", {})
    monkeypatch.setattr(settings, "_RESOLVED", {})
    spec = secure_spec(protocol=protocol_)
    render(spec, validate=False)
    settings.secure_clients_of(spec)
    broker = protocol._SECURED[("127.0.0.1", spec.topology.broker_host_port(1))]()
    controller = protocol._SECURED[(spec.topology.controller_ip(101), spec.kraft.controller_port)]()
    assert (broker.ca is not None) == tls and broker.sasl is not None and broker.sasl[:2] == ("SCRAM-SHA-512", "admin")
    assert controller.ca is not None and controller.sasl is None
    assert controller.cert is not None and controller.cert.endswith("clusterctl-operator.pem")
    assert settings.security_settings(spec.topology.bootstrap_servers)["security.protocol"] == protocol_


def test_zookeeper_mode_renders_acl_authorizer_and_scram_users_for_zookeeper(tmp_path: Path) -> None:
    """ZooKeeper mode (Kafka 3.9.2): AclAuthorizer, no controller listener, and the start script's SCRAM_USERS
    (name, credential pairs) that `kafka-configs --zookeeper` writes before the broker starts."""
    spec = parse_spec({"name": "seczk", "profile": "offline", "network": {"subnet": "10.231.0.0/24"},
                       "zookeeper": {"nodes": 1}, "kafka": {"mode": "zookeeper", "version": "3.9.2", "brokers": 3},
                       "kafka_manager": {"enabled": False}, "security": SECURE})  # fmt: skip
    text = Path(render(spec, tmp_path / "out", validate=False).compose_file).read_text()
    assert "INTERNAL:SASL_SSL,EXTERNAL:SASL_SSL" in text and "CONTROLLER" not in text
    assert '"kafka.security.authorizer.AclAuthorizer"' in text
    assert text.count('entrypoint: ["bash", "/run/clusterctl-start.sh", "kafka-server"]') == 3  # brokers, not zk1
    env = (tmp_path / "out" / "secrets" / "kafka1" / "secret.env").read_text()
    users = re.search(r"^SCRAM_USERS=\((.*)\)$", env, re.M)
    assert users is not None and users[1].startswith("clusterctl-inter-broker 'SCRAM-SHA-512=[password=")


def test_client_config_exports_a_private_file_and_never_prints_the_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import subprocess
    import sys

    monkeypatch.chdir(tmp_path)
    spec = secure_spec()
    render(spec, validate=False)
    (tmp_path / "clusterctl.yaml").write_text(json.dumps(spec.model_dump(mode="json")))
    cli = [str(Path(sys.executable).parent / "clusterctl"), "-s", "clusterctl.yaml", "client-config"]
    res = subprocess.run([*cli, "--user", "app", "-o", "app.properties", "--json"], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    password = json.loads((tmp_path / "compose/seclab/secrets/users.json").read_text())["app"]
    assert json.loads(res.stdout) == {"user": "app", "format": "properties", "path": "app.properties"}
    assert password not in res.stdout + res.stderr
    text = (tmp_path / "app.properties").read_text()
    assert stat.S_IMODE((tmp_path / "app.properties").stat().st_mode) == 0o600
    assert f'username="app" password="{password}";' in text and "sasl.mechanism=SCRAM-SHA-512" in text
    assert f"ssl.truststore.location={tmp_path / 'compose/seclab/secrets/ca.pem'}" in text
    again = subprocess.run([*cli, "-o", "app.properties"], capture_output=True, text=True)
    assert again.returncode == 2 and "exists" in again.stderr and again.stderr.count("\n") == 1
    res = subprocess.run([*cli, "--format", "librdkafka", "-o", "admin.json"], capture_output=True, text=True)
    conf = json.loads((tmp_path / "admin.json").read_text())
    assert res.returncode == 0 and conf["sasl.username"] == "admin" and conf["bootstrap.servers"]
