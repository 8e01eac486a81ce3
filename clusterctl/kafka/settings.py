"""Client settings for librdkafka: the one place they live (imports no Kafka client, so a command that talks to
librdkafka directly, as `perf produce`'s native engine does, starts without loading confluent-kafka).

librdkafka's own log lines are routed into a quiet Python logger (the CLI prints one error line, not a flood of
connection retries), timeouts are short enough for an operator's terminal, and idempotence is on whenever acks=all.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from clusterctl.errors import UsageError
from clusterctl.spec import validate

if TYPE_CHECKING:
    from clusterctl.spec.model import ClusterSpec

REQUEST_TIMEOUT_S = 15.0
# librdkafka logs every failed connection attempt; keep them out of the user's terminal unless asked.
LIBRDKAFKA_LOGGER = logging.getLogger("clusterctl.librdkafka")
LIBRDKAFKA_LOGGER.addHandler(logging.NullHandler())
LIBRDKAFKA_LOGGER.propagate = False

METADATA_TIMEOUT_S = 5.0
JOIN_TIMEOUT_S = 30.0
ADVERTISED_HINT = (
    "check the cluster is up, and that every broker advertises a listener reachable from this host "
    "(advertised.listeners)"
)

Acks = Literal["0", "1", "all"]

# A drill's load (chaos.load.DrillLoad) batches for up to 50 ms. At 500 records/s over 3 partitions librdkafka's
# 5 ms sends a request for every record or two: about a third of a core in librdkafka's threads (measured beside 3
# real brokers), a tenth with 50 ms, and fewer requests for the brokers too. An acknowledgement waits up to 50 ms
# longer, far below the seconds a failover takes.
DRILL_LINGER_MS = 50


# host:port of a secured cluster's listener -> its clients' settings (read from its secrets when first needed)
_SECURED: dict[str, Callable[[], dict[str, str]]] = {}
_RESOLVED: dict[str, dict[str, str]] = {}


def secure_clients_of(spec: ClusterSpec) -> None:
    """Clients of this spec's cluster, librdkafka's and the wire-protocol requests alike, connect with its security
    settings (clusterctl's first admin user, compose/<name>/secrets/); nothing changes for a PLAINTEXT spec."""
    if not spec.security.enabled:
        return
    from clusterctl.compose import secrets
    from clusterctl.kafka import protocol

    def settings() -> dict[str, str]:
        return secrets.client_settings(spec)

    for address in spec.topology.bootstrap_servers.split(","):
        _SECURED[address] = settings
        _RESOLVED.pop(address, None)  # read again: the spec (or its secrets) may have changed

    def wire(broker: bool) -> Callable[[], protocol.WireSecurity]:
        """A broker's host listener (security.protocol), or a controller's (always TLS, its certificate)."""

        def resolve() -> protocol.WireSecurity:
            cert, key = secrets.client_cert(spec, secrets.OPERATOR)
            conf = security_settings(spec.topology.bootstrap_servers) if broker else {}
            login = None
            if "sasl.username" in conf:
                login = (conf["sasl.mechanisms"], conf["sasl.username"], conf["sasl.password"])
            tls = spec.security.tls or not broker
            ca = str(secrets.secrets_dir(spec).absolute() / "ca.pem")
            return protocol.WireSecurity(ca if tls else None, cert, key, login)

        return resolve

    t = spec.topology
    protocol.use_security([(t.host, t.broker_host_port(b)) for b in t.broker_ids], wire(True))
    protocol.use_security([(t.controller_ip(c), spec.kraft.controller_port) for c in t.controller_ids], wire(False))


def security_settings(bootstrap: str) -> dict[str, str]:
    """The security settings of a secured cluster's clients at `bootstrap` ({} for any other cluster)."""
    first = bootstrap.split(",")[0].strip()
    if first not in _SECURED:
        return {}
    if first not in _RESOLVED:
        _RESOLVED[first] = _SECURED[first]()
    return _RESOLVED[first]


def _base(bootstrap: str) -> dict[str, Any]:
    validate.bootstrap_servers(bootstrap, "bootstrap servers")
    return {
        "bootstrap.servers": bootstrap,
        "logger": LIBRDKAFKA_LOGGER,
        "socket.connection.setup.timeout.ms": 5000,
        "reconnect.backoff.max.ms": 2000,
        **security_settings(bootstrap),
    }


def admin_config(bootstrap: str, **overrides: Any) -> dict[str, Any]:
    """AdminClient settings (dotted librdkafka keys may be passed with `_` for `.`)."""
    return {**_base(bootstrap), **_dotted(overrides)}


def producer_config(bootstrap: str, acks: Acks | str = "all", **overrides: Any) -> dict[str, Any]:
    """Producer settings: idempotent with acks=all, a 30 s delivery timeout, small linger."""
    acks = str(acks)
    if acks not in ("0", "1", "all", "-1"):
        raise UsageError(f"--acks must be 0, 1 or all, got {acks!r}")
    conf: dict[str, Any] = {
        **_base(bootstrap),
        "acks": acks,
        "enable.idempotence": acks in ("all", "-1"),
        "linger.ms": 5,
        "message.timeout.ms": 30000,
    }
    conf.update(_dotted(overrides))
    return conf


GROUP_PROTOCOLS = ("classic", "consumer")


def consumer_config(
    bootstrap: str,
    group: str | None = None,
    *,
    auto_offset_reset: str = "earliest",
    group_protocol: str = "classic",
    **overrides: Any,
) -> dict[str, Any]:
    """Consumer settings. Without `group`, a throwaway group.id that never commits (use assign()).

    classic: session.timeout.ms is 6 s (the broker's default minimum) so group joins finish quickly. consumer
    (KIP-848, Kafka 4.0+): the broker drives the group, and its session and heartbeat timing are the group's
    (group.consumer.session.timeout.ms, ...): librdkafka refuses them on the client.
    """
    if group_protocol not in GROUP_PROTOCOLS:
        raise UsageError(f"--group-protocol must be classic or consumer, got {group_protocol!r}")
    conf: dict[str, Any] = {
        **_base(bootstrap),
        "group.id": group or f"clusterctl-nogroup-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False,
        "auto.offset.reset": auto_offset_reset,
        "enable.partition.eof": False,
    }
    if group_protocol == "consumer":
        conf["group.protocol"] = "consumer"
    else:
        conf |= {"session.timeout.ms": 6000, "heartbeat.interval.ms": 1500}
    conf.update(_dotted(overrides))
    return conf


def _dotted(overrides: dict[str, Any]) -> dict[str, Any]:
    return {k.replace("_", "."): v for k, v in overrides.items()}
