"""SCRAM users of a secured cluster (security.protocol SASL_*), on confluent-kafka's admin API: list, set a password,
delete. Passwords are never printed; clusterctl keeps the ones it sets in compose/<name>/secrets/users.json."""

from __future__ import annotations

from dataclasses import dataclass, field

from confluent_kafka.admin import (
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)

from clusterctl.errors import NotFoundError, UsageError
from clusterctl.kafka.acls import Acl
from clusterctl.kafka.connection import REQUEST_TIMEOUT_S, _result, admin
from clusterctl.spec.model import ClusterSpec
from clusterctl.spec.security import INTER_BROKER_USER, SecuritySpec

ITERATIONS = 4096  # Kafka's kafka-configs.sh default (and the minimum for SCRAM-SHA-512)


@dataclass
class ScramUser:
    user: str
    mechanisms: list[str] = field(default_factory=list)  # e.g. ["SCRAM-SHA-512 (4096 iterations)"]


def _mechanism(name: str) -> ScramMechanism:
    return ScramMechanism[name.replace("-", "_")]


def list_users(bootstrap: str) -> list[ScramUser]:
    """Every user with a SCRAM credential, and its mechanisms."""
    client = admin(bootstrap)  # kept until its answer is in: a client destroyed fails its futures (_DESTROY)
    found = _result(client.describe_user_scram_credentials(request_timeout=REQUEST_TIMEOUT_S), bootstrap)
    out = []
    for name, description in sorted(found.items()):
        infos = description.scram_credential_infos
        mechs = [f"{i.mechanism.name.replace('_', '-')} ({i.iterations} iterations)" for i in infos]
        out.append(ScramUser(name, mechs))
    return out


def set_password(bootstrap: str, user: str, mechanism: str, password: str) -> None:
    """Create `user`'s credential for `mechanism`, or replace its password."""
    info = ScramCredentialInfo(_mechanism(mechanism), ITERATIONS)
    change = UserScramCredentialUpsertion(user, info, password.encode())
    client = admin(bootstrap)
    for future in client.alter_user_scram_credentials([change], request_timeout=REQUEST_TIMEOUT_S).values():
        _result(future, bootstrap)


def delete_user(bootstrap: str, user: str, mechanism: str) -> None:
    """Remove `user`'s credential for `mechanism` (it can no longer log in with it)."""
    change = UserScramCredentialDeletion(user, _mechanism(mechanism))
    client = admin(bootstrap)
    for future in client.alter_user_scram_credentials([change], request_timeout=REQUEST_TIMEOUT_S).values():
        _result(future, bootstrap)


@dataclass
class UserChange:
    """What `user create|delete` did: the user, its role's ACLs, and where its password is kept (never shown)."""

    user: str
    role: str | None
    mechanism: str
    acls: list[str]
    password_file: str


def create_user(spec: ClusterSpec, user: str, role: str) -> UserChange:
    """A new SCRAM user of the spec's cluster with a generated password (kept in secrets/users.json) and its role's
    ACLs (security.authorizer)."""
    from clusterctl.compose import secrets
    from clusterctl.kafka import acls

    sec = _secured(spec)
    if user == INTER_BROKER_USER or user in {u.name for u in sec.users}:
        raise UsageError(f"user {user!r} is in the spec (security.users) or is the brokers' own: not created again")
    bootstrap = spec.topology.bootstrap_servers
    password = secrets.keep_password(spec, user, None)
    set_password(bootstrap, user, sec.sasl_mechanism, password)
    granted = acls.create_acls(bootstrap, acls.role_acls(user, role)) if sec.authorizer else []
    path = str(secrets.secrets_dir(spec) / secrets.USERS_FILE)
    return UserChange(user, role, sec.sasl_mechanism, [_acl_line(a) for a in granted], path)


def drop_user(spec: ClusterSpec, user: str) -> UserChange:
    """Delete a user `user create` made: its credential, every ACL naming it, its kept password."""
    from clusterctl.compose import secrets
    from clusterctl.kafka import acls

    sec = _secured(spec)
    if user == INTER_BROKER_USER or user in {u.name for u in sec.users}:
        raise UsageError(f"user {user!r} is in the spec (security.users) or is the brokers' own: remove it there")
    bootstrap = spec.topology.bootstrap_servers
    if user not in {u.user for u in list_users(bootstrap)}:
        raise NotFoundError(f"no SCRAM user {user!r} on cluster {spec.name}", hint="clusterctl user list")
    delete_user(bootstrap, user, sec.sasl_mechanism)
    removed = []
    if sec.authorizer:
        for acl in acls.list_acls(bootstrap, f"User:{user}"):
            removed += acls.delete_acls(bootstrap, acl)
    secrets.keep_password(spec, user, "")
    path = str(secrets.secrets_dir(spec) / secrets.USERS_FILE)
    return UserChange(user, None, sec.sasl_mechanism, [_acl_line(a) for a in removed], path)


def _secured(spec: ClusterSpec) -> SecuritySpec:
    if not spec.security.sasl:
        raise UsageError(
            f"cluster {spec.name} has no SASL (security.protocol {spec.security.protocol}): no SCRAM users"
        )
    return spec.security


def _acl_line(acl: Acl) -> str:
    return f"{acl.permission} {acl.operation} on {acl.resource_type} {acl.resource_name} ({acl.pattern})"
