"""ACLs of a cluster with an authorizer (security.authorizer: StandardAuthorizer), on confluent-kafka's admin API:
list, create and delete, and the ACLs each `security.users` role stands for.

A role is a set of ACLs on every topic and group (`*`): producer writes and describes topics, consumer reads and
describes topics and groups; admin users are super users and need none.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from clusterctl.errors import UsageError
from clusterctl.kafka.connection import REQUEST_TIMEOUT_S, _result, admin
from clusterctl.spec.validate import MAX_ACL_RESOURCE_NAME, MAX_PRINCIPAL_NAME

RESOURCE_TYPES = ("TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID")
OPERATIONS = ("ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS",
              "ALTER_CONFIGS", "IDEMPOTENT_WRITE")  # fmt: skip
PATTERNS = ("LITERAL", "PREFIXED")
PERMISSIONS = ("ALLOW", "DENY")
PRINCIPAL_RE = re.compile(rf"^User:[A-Za-z0-9][A-Za-z0-9._=,-]{{0,{MAX_PRINCIPAL_NAME - 1}}}$")
_HOST_RE = re.compile(r"^(\*|[0-9a-fA-F.:]{2,45})$")

ROLE_ACLS: dict[str, list[tuple[str, str]]] = {
    "producer": [("TOPIC", "WRITE"), ("TOPIC", "DESCRIBE")],
    "consumer": [("TOPIC", "READ"), ("TOPIC", "DESCRIBE"), ("GROUP", "READ"), ("GROUP", "DESCRIBE")],
    "admin": [],  # a super user (super.users)
}


@dataclass(frozen=True)
class Acl:
    """One ACL: `principal` may (ALLOW) or may not (DENY) do `operation` on a resource, from `host`."""

    principal: str
    operation: str
    resource_type: str
    resource_name: str
    pattern: str = "LITERAL"
    permission: str = "ALLOW"
    host: str = "*"


def _one_of(value: str, allowed: tuple[str, ...], what: str) -> str:
    upper = value.upper().replace("-", "_")
    if upper not in allowed:
        raise UsageError(f"{what} must be one of {', '.join(allowed)}, got {value[:40]!r}")
    return upper


def checked(acl: Acl) -> Acl:
    """`acl` with its names in Kafka's spelling; one line (exit 2) for what Kafka would refuse."""
    name = acl.resource_name
    if not name or len(name) > MAX_ACL_RESOURCE_NAME or not name.isprintable():
        raise UsageError(f"--resource-name must be 1 to {MAX_ACL_RESOURCE_NAME} printable characters, got {len(name)}")
    principal(acl.principal)
    if not _HOST_RE.match(acl.host):
        raise UsageError(f"--host {acl.host[:60]!r} is not * or an IP address")
    kind = _one_of(acl.resource_type, RESOURCE_TYPES, "--resource-type")
    if kind == "CLUSTER" and acl.resource_name != "kafka-cluster":
        raise UsageError("a CLUSTER ACL's resource name is kafka-cluster")
    return Acl(
        acl.principal, _one_of(acl.operation, OPERATIONS, "--operation"), kind, acl.resource_name,
        _one_of(acl.pattern, PATTERNS, "--pattern"), _one_of(acl.permission, PERMISSIONS, "--permission"), acl.host,
    )  # fmt: skip


def principal(value: str) -> str:
    """User:NAME, NAME 1 to MAX_PRINCIPAL_NAME characters of letters, digits and . _ = , - (one line, exit 2)."""
    if len(value) > len("User:") + MAX_PRINCIPAL_NAME or not PRINCIPAL_RE.match(value):
        raise UsageError(f"--principal {value[:80]!r} is not User:NAME with NAME 1 to {MAX_PRINCIPAL_NAME} characters")
    return value


def role_acls(user: str, role: str) -> list[Acl]:
    """The ACLs a `security.users` role stands for (on every topic and group)."""
    return [Acl(f"User:{user}", op, kind, "*") for kind, op in ROLE_ACLS[role]]


def _binding(acl: Acl) -> AclBinding:
    return AclBinding(
        ResourceType[acl.resource_type], acl.resource_name, ResourcePatternType[acl.pattern], acl.principal,
        acl.host, AclOperation[acl.operation], AclPermissionType[acl.permission],
    )  # fmt: skip


def _acl(b: Any) -> Acl:
    return Acl(b.principal, b.operation.name, b.restype.name, b.name, b.resource_pattern_type.name,
               b.permission_type.name, b.host)  # fmt: skip


def list_acls(bootstrap: str, principal: str | None = None) -> list[Acl]:
    """Every ACL (or `principal`'s), sorted."""
    # None matches any name, principal and host (confluent-kafka's stubs say str)
    anything: Any = None
    match = AclBindingFilter(ResourceType.ANY, anything, ResourcePatternType.ANY, principal or anything, anything,
                             AclOperation.ANY, AclPermissionType.ANY)  # fmt: skip
    client = admin(bootstrap)  # kept until its answer is in: a client destroyed fails its futures (_DESTROY)
    found = _result(client.describe_acls(match, request_timeout=REQUEST_TIMEOUT_S), bootstrap)
    return sorted((_acl(b) for b in found), key=lambda a: (a.principal, a.resource_type, a.resource_name, a.operation))


def create_acls(bootstrap: str, acls: list[Acl]) -> list[Acl]:
    """Create `acls` (an ACL that exists already is kept as it is); the ACLs as created."""
    if not acls:
        return []
    client = admin(bootstrap)
    for future in client.create_acls([_binding(a) for a in acls], request_timeout=REQUEST_TIMEOUT_S).values():
        _result(future, bootstrap)
    return acls


def delete_acls(bootstrap: str, acl: Acl) -> list[Acl]:
    """Delete the ACLs matching `acl` exactly; the ACLs deleted (none: nothing matched)."""
    f = AclBindingFilter(
        ResourceType[acl.resource_type], acl.resource_name, ResourcePatternType[acl.pattern], acl.principal, acl.host,
        AclOperation[acl.operation], AclPermissionType[acl.permission],
    )  # fmt: skip
    client = admin(bootstrap)
    futures = client.delete_acls([f], request_timeout=REQUEST_TIMEOUT_S)
    return [_acl(b) for future in futures.values() for b in _result(future, bootstrap)]
