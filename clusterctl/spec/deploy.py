"""Where the cluster runs: `deploy.target` compose (one engine, the default) or swarm (a Docker Swarm of hosts).

On a swarm every ZooKeeper node, controller and broker is pinned to a rack: the swarm nodes labelled
`clusterctl.rack=<name>`. A broker's rack is its `broker.rack` (KIP-36: replicas spread over racks).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Literal

from pydantic import Field, field_validator, model_validator

from clusterctl.spec.sections import _Model, is_host_name, is_ipv4, matching

if TYPE_CHECKING:
    from clusterctl.spec.model import ClusterSpec

RACK_LABEL = "clusterctl.rack"  # the swarm node label a rack is made of
RACK_NAME_RE = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,39}$")
ENDPOINT_RE = re.compile(r"^(unix:///[A-Za-z0-9._/-]+|tcp://[A-Za-z0-9.:\[\]-]+|ssh://[A-Za-z0-9._@:-]+)$")

DeployTarget = Literal["compose", "swarm"]
RackSpread = Literal["round_robin", "strict"]


def _endpoint(v: str | None, what: str) -> str | None:
    rule = "is not a Docker endpoint (unix:///PATH, tcp://HOST:PORT, ssh://HOST)"
    return None if v is None else matching(v, ENDPOINT_RE, what, rule, max_len=200)


class RackSpec(_Model):
    """One rack: the swarm host(s) labelled clusterctl.rack=<name>."""

    name: str = Field(description="the value of the node label clusterctl.rack")
    address: str = Field(description="where host-side clients reach this rack's host (its published ports)")
    endpoint: str | None = Field(
        default=None, description="this host's Docker endpoint (per-host verbs: volumes, kill-node); null = none"
    )
    stop_command: list[str] | None = Field(
        default=None,
        description="kill-node: a command run here (no shell) that stops this host's Docker daemon at once, "
        "e.g. [ssh, host1, sudo, systemctl, kill, -s, KILL, docker]; null = kill-node refuses this rack",
    )
    start_command: list[str] | None = Field(
        default=None, description="heal after kill-node: a command run here that starts this host's daemon again"
    )

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        return matching(v, RACK_NAME_RE, "rack name", "must be 1-40 chars of a-z, 0-9, '.', '_', '-'")

    @field_validator("address")
    @classmethod
    def _address(cls, v: str) -> str:
        if not (is_ipv4(v) or is_host_name(v)):
            raise ValueError(f"rack address {v[:80]!r} is not an IPv4 address or a host name")
        return v

    @field_validator("endpoint")
    @classmethod
    def _ep(cls, v: str | None) -> str | None:
        return _endpoint(v, "rack endpoint")

    @field_validator("stop_command", "start_command")
    @classmethod
    def _command(cls, v: list[str] | None) -> list[str] | None:
        if v is not None and not (0 < len(v) <= 64 and all(0 < len(a) <= 1000 and "\0" not in a for a in v)):
            raise ValueError("a rack's stop/start command is a list of 1-64 non-empty arguments")
        return v

    @model_validator(mode="after")
    def _both(self) -> RackSpec:
        if (self.stop_command is None) != (self.start_command is None):
            raise ValueError(f"rack {self.name}: give stop_command and start_command together (kill-node and its heal)")
        if self.stop_command is not None and self.endpoint is None:
            raise ValueError(f"rack {self.name}: kill-node needs the rack's endpoint (to see its daemon go and return)")
        return self


class DeploySpec(_Model):
    target: DeployTarget = Field(default="compose", description="compose (this engine) or swarm (docker stack)")
    endpoint: str | None = Field(
        default=None, description="swarm: a manager's Docker endpoint; null = DOCKER_HOST or the local engine"
    )
    racks: list[RackSpec] = Field(default_factory=list, max_length=64, description="swarm: the racks, in order")
    rack_spread: RackSpread = Field(
        default="round_robin",
        description="round_robin: node i goes to rack (i-1) mod racks; strict: no two brokers share a rack",
    )
    encrypted: bool = Field(default=False, description="swarm: encrypt the overlay network's traffic (IPsec)")

    @field_validator("endpoint")
    @classmethod
    def _ep(cls, v: str | None) -> str | None:
        return _endpoint(v, "deploy.endpoint")


def check_deploy(spec: ClusterSpec) -> None:
    """Cross-section checks of `deploy` (ValueError, one line)."""
    d = spec.deploy
    if d.target == "compose":
        if d != DeploySpec():
            raise ValueError("deploy.racks, endpoint, rack_spread and encrypted are for deploy.target: swarm")
        return
    if not d.racks:
        raise ValueError("deploy.target=swarm needs deploy.racks (each a name from node label clusterctl.rack)")
    names = [r.name for r in d.racks]
    if len(set(names)) != len(names):
        raise ValueError(f"deploy.racks names a rack twice: {', '.join(names)}")
    if spec.kafka_manager.enabled:
        raise ValueError("deploy.target=swarm runs no kafka-manager yet: set kafka_manager.enabled: false")
    if spec.spark.enabled:
        raise ValueError("deploy.target=swarm runs no spark services yet: set spark.enabled: false")
    if spec.storage.bounded_mb is not None:
        raise ValueError(
            "deploy.target=swarm has no bounded data volumes (loop-mounted on this host): set storage.bounded_mb: null"
        )
    brokers = spec.kafka.brokers
    if d.rack_spread == "strict" and brokers > len(d.racks):
        raise ValueError(
            f"deploy.rack_spread=strict: {brokers} brokers need {brokers} racks, deploy.racks has {len(d.racks)} "
            "(add racks or use round_robin)"
        )
