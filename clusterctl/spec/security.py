"""The `security:` section: how clients and brokers authenticate (TLS, SASL/SCRAM) and who may do what.

PLAINTEXT (the default) renders exactly what clusterctl rendered before the section existed. Anything else needs
Kafka's own brokers from the offline profile (KRaft or ZooKeeper mode), rendered for compose (the certificates,
keystores and SCRAM credentials are made by `clusterctl.compose.secrets`). ZooKeeper itself stays unsecured.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator

from clusterctl.spec.sections import _Model, matching
from clusterctl.spec.validate import MAX_SECURITY_USERS, MAX_USER_NAME_LENGTH

if TYPE_CHECKING:
    from clusterctl.spec.model import ClusterSpec

SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
SaslMechanism = Literal["SCRAM-SHA-512", "SCRAM-SHA-256"]
UserRole = Literal["admin", "producer", "consumer"]
INTER_BROKER_USER = "clusterctl-inter-broker"  # the nodes' own SCRAM user (a super user), never one of security.users

# SCRAM user names: also principals in super.users (';'-separated) and ACLs, and a value in the JAAS line
USER_NAME_RE = re.compile(rf"^[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_USER_NAME_LENGTH - 1}}}$")


class SecurityUser(_Model):
    """A SCRAM user; its password is generated once and kept in compose/<name>/secrets/."""

    name: str = Field(description=f"the SCRAM user name: 1-{MAX_USER_NAME_LENGTH} chars of letters, digits, . _ -")
    role: UserRole = Field(default="admin", description="admin (a super user), producer or consumer")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        rule = f"must be 1-{MAX_USER_NAME_LENGTH} chars of letters, digits, '.', '_' or '-', starting alphanumeric"
        return matching(v, USER_NAME_RE, "security.users name", rule, max_len=MAX_USER_NAME_LENGTH)


class SecuritySpec(_Model):
    protocol: SecurityProtocol = Field(
        default="PLAINTEXT", description="of the client (host) and inter-broker listeners: PLAINTEXT, SSL, "
        "SASL_PLAINTEXT or SASL_SSL"
    )  # fmt: skip
    sasl_mechanism: SaslMechanism = Field(default="SCRAM-SHA-512", description="SASL_*: SCRAM-SHA-512 or SCRAM-SHA-256")
    mtls: bool = Field(default=False, description="SSL, SASL_SSL: clients must present a certificate of the cluster CA")
    authorizer: bool = Field(default=False, description="StandardAuthorizer; the admin users are super users")
    users: list[SecurityUser] = Field(
        default_factory=list, max_length=MAX_SECURITY_USERS,
        description=f"SASL_*: SCRAM users (at most {MAX_SECURITY_USERS}); clusterctl's commands act as the first admin",
    )  # fmt: skip

    @property
    def enabled(self) -> bool:
        return self.protocol != "PLAINTEXT"

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")

    @property
    def tls(self) -> bool:
        return self.protocol.endswith("SSL")

    @property
    def admin(self) -> SecurityUser | None:
        """The user clusterctl's own clients authenticate as."""
        return next((u for u in self.users if u.role == "admin"), None)


def check_security(spec: ClusterSpec) -> None:
    """What the security section needs from the rest of the spec (ValueError with one line)."""
    sec = spec.security
    if not sec.enabled:
        if sec != SecuritySpec():
            raise ValueError("security settings need security.protocol other than PLAINTEXT")
        return
    what = f"security.protocol={sec.protocol}"
    if spec.kafka.engine != "kafka":
        raise ValueError(f"{what} needs kafka.engine kafka")
    if spec.profile != "offline" or spec.images.kafka is not None:
        raise ValueError(f"{what} needs profile offline (its clusterctl/kafka image starts on the rendered secrets)")
    if spec.swarm:
        raise ValueError(f"{what} needs deploy.target compose")
    if spec.kafka_manager.enabled or spec.spark.enabled:
        raise ValueError(f"{what}: the console and Spark do not authenticate yet; set kafka_manager.enabled and "
                         "spark.enabled to false")  # fmt: skip
    if spec.kraft.quorum == "dynamic" or spec.kraft.eligible_leader_replicas_version is not None:
        raise ValueError(f"{what} needs kraft.quorum static and no kraft.eligible_leader_replicas_version yet "
                         "(their tools run inside the containers without credentials)")  # fmt: skip
    names = [u.name for u in sec.users]
    if INTER_BROKER_USER in names:
        raise ValueError(f"security.users: {INTER_BROKER_USER!r} is the brokers' own user; choose another name")
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise ValueError(f"security.users: {dup!r} appears twice")
    if sec.sasl and sec.admin is None:
        raise ValueError(f"{what} needs a user with role admin in security.users (clusterctl's own clients use it)")
    if not sec.sasl and (sec.users or sec.sasl_mechanism != "SCRAM-SHA-512"):
        raise ValueError(f"{what} has no SASL: security.users and sasl_mechanism need SASL_PLAINTEXT or SASL_SSL")
    if sec.mtls and not sec.tls:
        raise ValueError(f"security.mtls needs TLS: protocol SSL or SASL_SSL, not {sec.protocol}")
    if sec.authorizer and not sec.sasl:
        raise ValueError("security.authorizer needs SASL_PLAINTEXT or SASL_SSL (users to authorize)")
