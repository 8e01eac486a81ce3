"""A secured cluster's secrets (security.protocol other than PLAINTEXT), made once and kept in compose/<name>/secrets/.

- `ca.pem` / `ca.key`: the cluster CA (EC P-256, `cryptography`); every node certificate is signed by it.
- `<service>/`: per Kafka node, `keystore.p12` (PKCS12: its key and its certificate, whose SANs are its service and
  container names, its static IP, localhost and 127.0.0.1 and the publish address, so clients on the host and on the
  cluster network both verify the host name), `truststore.pem` (the CA, Kafka's PEM truststore) and `secret.env`
  (the keystore password, the JAAS lines and the `--add-scram` arguments the node's start script reads).
- `users.json`: each SCRAM user's generated password; `clients/<user>.pem|.key`: client certificates (mTLS).
- `kafka-secure-start.sh`: the start script mounted into every node (templates/secure).

The directory is 0700 and every file 0600; nothing of it reaches the compose file, output or logs. Files already
there are kept (a CA once made signs every later certificate; passwords stay what the storage was formatted with).
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import secrets
import shlex
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.serialization import pkcs12
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from clusterctl import TEMPLATES_DIR
from clusterctl.errors import ClusterctlError
from clusterctl.spec.model import ClusterSpec
from clusterctl.spec.security import INTER_BROKER_USER

SECRETS_DIR = "secrets"
START_SCRIPT = "kafka-secure-start.sh"
USERS_FILE = "users.json"
NODE_MOUNT = "/run/clusterctl-secrets"  # a node's own secrets directory, read-only
START_MOUNT = "/run/clusterctl-start.sh"
NODE_SECRETS = "/etc/kafka/secrets"  # where the start script copies them (the image's entrypoint chowns /etc/kafka)
VALID_DAYS = 825
JAAS = "org.apache.kafka.common.security.scram.ScramLoginModule required"
OPERATOR = "clusterctl-operator"  # clusterctl's own certificate: its wire-protocol requests to the controllers


class SecretsError(ClusterctlError):
    """The secrets directory could not be made or read."""


@dataclass(frozen=True)
class NodeIdentity:
    service: str
    container: str
    ip: str


def secrets_dir(spec: ClusterSpec, out_dir: Path | None = None) -> Path:
    return (out_dir or spec.topology.compose_dir) / SECRETS_DIR


def node_identities(spec: ClusterSpec) -> list[NodeIdentity]:
    """Every Kafka node (dedicated controllers, then brokers) a certificate is made for."""
    t = spec.topology
    out = [NodeIdentity(t.controller_service(n), t.controller_container(n), t.controller_ip(n))
           for n in t.dedicated_controller_ids]  # fmt: skip
    out += [NodeIdentity(t.broker_service(b), t.broker_container(b), t.broker_ip(b)) for b in t.broker_ids]
    return out


def node_principal(service: str) -> str:
    """A node's TLS principal on the controller listener (its certificate's subject as Kafka names it)."""
    return f"User:CN={service}"


def _write(path: Path, data: bytes) -> None:
    """A new 0600 file (never group or world readable, not even for a moment)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        os.write(fd, data)
    finally:
        os.close(fd)


def _mkdir(path: Path) -> None:
    path.mkdir(mode=0o700, parents=False, exist_ok=True)
    path.chmod(0o700)


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _new_ca(cluster: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(f"clusterctl CA {cluster}"))
        .issuer_name(_name(f"clusterctl CA {cluster}"))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(x509.KeyUsage(False, False, False, False, False, True, True, False, False), critical=True)
        .sign(key, hashes.SHA256())
    )
    return key, cert


def _leaf(
    ca_key: ec.EllipticCurvePrivateKey, ca: x509.Certificate, cn: str, dns: list[str], ips: list[str]
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    sans: list[x509.GeneralName] = [x509.DNSName(d) for d in dict.fromkeys(dns)]
    sans += [x509.IPAddress(ipaddress.ip_address(i)) for i in dict.fromkeys(ips)]
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(cn))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(min(now + datetime.timedelta(days=VALID_DAYS), ca.not_valid_after_utc))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH, ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False
        )
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return key, builder.sign(ca_key, hashes.SHA256())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())


def _pem_cert(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _ca(root: Path, cluster: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """The cluster CA: made once, read back on every later render."""
    cert_path, key_path = root / "ca.pem", root / "ca.key"
    if cert_path.exists() and key_path.exists():
        try:
            key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
            cert = x509.load_pem_x509_certificate(cert_path.read_bytes())
        except (OSError, ValueError) as exc:
            raise SecretsError(f"cannot read the cluster CA in {root}: {exc}") from None
        if not isinstance(key, ec.EllipticCurvePrivateKey):
            raise SecretsError(f"{key_path} is not the EC key clusterctl made")
        return key, cert
    key, cert = _new_ca(cluster)
    _write(key_path, _pem_key(key))
    _write(cert_path, _pem_cert(cert))
    return key, cert


def _passwords(root: Path, spec: ClusterSpec) -> dict[str, str]:
    """Every SCRAM user's password (and the inter-broker user's): kept once generated."""
    path = root / USERS_FILE
    try:
        known: dict[str, str] = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    except (OSError, ValueError) as exc:
        raise SecretsError(f"cannot read {path}: {exc}") from None
    wanted = [INTER_BROKER_USER, *(u.name for u in spec.security.users)] if spec.security.sasl else []
    changed = False
    for name in wanted:
        if name not in known:
            known[name] = secrets.token_urlsafe(24)
            changed = True
    if changed or not path.exists():
        _write(path, (json.dumps(known, indent=2, sort_keys=True) + "\n").encode())
    return known


def keep_password(spec: ClusterSpec, user: str, password: str | None) -> str:
    """Set (a new random one when None) or forget (`password` "") `user`'s password in users.json; the password."""
    path = secrets_dir(spec) / USERS_FILE
    try:
        known = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise SecretsError(f"no SCRAM passwords in {path}", hint="run `clusterctl render` first") from None
    if password == "":
        known.pop(user, None)
    else:
        password = password or secrets.token_urlsafe(24)
        known[user] = password
    _write(path, (json.dumps(known, indent=2, sort_keys=True) + "\n").encode())
    return password


def user_password(spec: ClusterSpec, user: str) -> str:
    """A SCRAM user's password from compose/<name>/secrets/users.json (one line when it is not there)."""
    path = secrets_dir(spec) / USERS_FILE
    try:
        known = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise SecretsError(
            f"no SCRAM passwords in {path}", hint="run `clusterctl render` (it makes the cluster's secrets)"
        ) from None
    if user not in known:
        raise SecretsError(f"user {user!r} has no password in {path}", hint="add it to security.users and re-render")
    return str(known[user])


def _node_env(spec: ClusterSpec, keystore_password: str, passwords: dict[str, str]) -> str:
    """secret.env: what the start script exports (KAFKA_* become server.properties) and its --add-scram arguments."""
    sec = spec.security
    lines = [f"export KAFKA_SSL_KEYSTORE_PASSWORD={shlex.quote(keystore_password)}",
             f"export KAFKA_SSL_KEY_PASSWORD={shlex.quote(keystore_password)}"]  # fmt: skip
    scram: list[str] = []
    zk_users: list[str] = []
    if sec.sasl:
        mech = sec.sasl_mechanism.replace("-", "___")
        inter = passwords[INTER_BROKER_USER]
        internal = f'{JAAS} username="{INTER_BROKER_USER}" password="{inter}";'
        lines.append(f"export KAFKA_LISTENER_NAME_INTERNAL_{mech}_SASL_JAAS_CONFIG={shlex.quote(internal)}")
        lines.append(f"export KAFKA_LISTENER_NAME_EXTERNAL_{mech}_SASL_JAAS_CONFIG={shlex.quote(JAAS + ';')}")
        for name in [INTER_BROKER_USER, *(u.name for u in sec.users)]:
            scram += ["--add-scram", shlex.quote(f"{sec.sasl_mechanism}=[name={name},password={passwords[name]}]")]
            zk_users += [name, shlex.quote(f"{sec.sasl_mechanism}=[password={passwords[name]}]")]
    lines.append(f"SCRAM_ARGS=({' '.join(scram)})")  # KRaft: kafka-storage format
    lines.append(f"SCRAM_USERS=({' '.join(zk_users)})")  # ZooKeeper mode: name, credential, name, ...
    return "\n".join(lines) + "\n"


def _node_secrets(spec: ClusterSpec, root: Path, ca: tuple[ec.EllipticCurvePrivateKey, x509.Certificate],
                  node: NodeIdentity, passwords: dict[str, str]) -> None:  # fmt: skip
    """A node's keystore (made again at every render: its SANs follow the spec), truststore and secret.env."""
    ca_key, ca_cert = ca
    bind = spec.publish.bind_address
    dns = [node.service, node.container, "localhost"]
    ips = [node.ip, "127.0.0.1", bind]
    key, cert = _leaf(ca_key, ca_cert, node.service, dns, ips)
    password = secrets.token_urlsafe(24)
    encryption = serialization.BestAvailableEncryption(password.encode())
    keystore = pkcs12.serialize_key_and_certificates(node.service.encode(), key, cert, [ca_cert], encryption)
    directory = root / node.service
    _mkdir(directory)
    _write(directory / "keystore.p12", keystore)
    _write(directory / "truststore.pem", _pem_cert(ca_cert))
    _write(directory / "secret.env", _node_env(spec, password, passwords).encode())


def _client_certs(spec: ClusterSpec, root: Path, ca: tuple[ec.EllipticCurvePrivateKey, x509.Certificate]) -> None:
    """clusterctl's own certificate (CN=clusterctl-operator) and, with security.mtls, one per user (CN = its name;
    "clusterctl" without SASL)."""
    clients = root / "clients"
    _mkdir(clients)
    users = ([u.name for u in spec.security.users] or ["clusterctl"]) if spec.security.mtls else []
    for user in [OPERATOR, *users]:
        if (clients / f"{user}.pem").exists() and (clients / f"{user}.key").exists():
            continue
        key, cert = _leaf(*ca, user, [], [])
        _write(clients / f"{user}.key", _pem_key(key))
        _write(clients / f"{user}.pem", _pem_cert(cert))


def ensure_secrets(spec: ClusterSpec, out_dir: Path) -> str:
    """Make what the secured cluster's nodes and clients need under `out_dir`/secrets: "created" when the CA is
    new, "kept" when an earlier render made it, "none" for a PLAINTEXT spec (nothing is touched)."""
    if not spec.security.enabled:
        return "none"
    root = out_dir / SECRETS_DIR
    state = "kept" if (root / "ca.pem").exists() else "created"
    try:
        _mkdir(root)
        ca = _ca(root, spec.name)
        passwords = _passwords(root, spec)
        for node in node_identities(spec):
            _node_secrets(spec, root, ca, node, passwords)
        _client_certs(spec, root, ca)
        _write(root / START_SCRIPT, (TEMPLATES_DIR / "secure" / START_SCRIPT).read_bytes())
    except OSError as exc:
        raise SecretsError(f"cannot write the cluster's secrets in {root}: {exc.strerror or exc}") from None
    return state


def client_cert(spec: ClusterSpec, user: str) -> tuple[str, str]:
    """(certificate, key) paths of a client certificate made by `ensure_secrets`."""
    base = secrets_dir(spec).absolute() / "clients"
    return str(base / f"{user}.pem"), str(base / f"{user}.key")


def client_settings(spec: ClusterSpec, user: str | None = None) -> dict[str, str]:
    """librdkafka settings of a client of the spec's secured cluster, as `user` (default: the first admin);
    {} for PLAINTEXT."""
    sec = spec.security
    if not sec.enabled:
        return {}
    root = secrets_dir(spec).absolute()  # librdkafka may open them after a change of directory
    conf: dict[str, str] = {"security.protocol": sec.protocol}
    if sec.tls:
        conf |= {"ssl.ca.location": str(root / "ca.pem"), "ssl.endpoint.identification.algorithm": "https"}
    name = user or (sec.admin.name if sec.admin else "clusterctl")
    if sec.sasl:
        conf |= {"sasl.mechanisms": sec.sasl_mechanism, "sasl.username": name,
                 "sasl.password": user_password(spec, name)}  # fmt: skip
    if sec.mtls:
        cert, key = client_cert(spec, name)
        conf |= {"ssl.certificate.location": cert, "ssl.key.location": key}
    return conf


def java_client_properties(spec: ClusterSpec, user: str | None = None) -> str:
    """A client.properties for Kafka's own tools (`--command-config`) as `user` (default: the first admin): the
    host bootstrap servers, the protocol, the SCRAM login and the CA as a PEM truststore. It holds the password."""
    sec = spec.security
    conf = client_settings(spec, user)
    if sec.mtls:
        raise SecretsError(
            "a Java client's certificate (security.mtls) needs a keystore clusterctl does not make yet",
            hint="--format librdkafka names the PEM certificate and key",
        )
    lines = [f"bootstrap.servers={spec.topology.bootstrap_servers}", f"security.protocol={sec.protocol}"]
    if sec.tls:
        lines += ["ssl.truststore.type=PEM", f"ssl.truststore.location={conf['ssl.ca.location']}"]
    if sec.sasl:
        login = f'{JAAS} username="{conf["sasl.username"]}" password="{conf["sasl.password"]}";'
        lines += [f"sasl.mechanism={sec.sasl_mechanism}", f"sasl.jaas.config={login}"]
    return "\n".join(lines) + "\n"


def write_private(path: Path, text: str) -> None:
    """A new file only its owner reads (0600); an existing or unwritable path is bad input (exit 2)."""
    from clusterctl.compose.writer import OutputPathError

    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise OutputPathError(f"{path} exists; choose another path (clusterctl does not overwrite it)") from None
    except OSError as exc:
        raise OutputPathError(f"cannot write {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
