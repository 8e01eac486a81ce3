"""Dynamic configs the brokers keep: a topic's own overrides, per-broker settings, a broker's protocol version.

What kafka-configs.sh reads and writes beside the topic commands (those live in clusterctl.kafka.admin):
`topic_overrides` (describe's Configs: column), `alter_broker_configs` (replication throttles of
clusterctl.kafka.reassign) and `kafka_version` (the console's broker table).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource

from clusterctl.kafka.connection import REQUEST_TIMEOUT_S, _result, admin, fetch_metadata
from clusterctl.kafka.retry import retrying


@dataclass
class ConfigValue:
    """One config entry as DescribeConfigs gives it; `source` is Kafka's ConfigSource name."""

    name: str
    value: str | None
    source: str
    is_default: bool
    read_only: bool
    sensitive: bool


def config_values(entries: dict[str, Any], include_defaults: bool = True) -> list[ConfigValue]:
    """DescribeConfigs entries as ConfigValues (sorted by name; a sensitive value is never carried)."""
    return [
        ConfigValue(
            key,
            None if e.is_sensitive else e.value,
            ConfigSource(e.source).name,
            e.is_default,
            e.is_read_only,
            e.is_sensitive,
        )
        for key, e in sorted(entries.items())
        if include_defaults or not e.is_default
    ]


def describe_broker_configs(bootstrap: str, broker_id: int) -> list[ConfigValue]:
    """Every config of one broker with its source (static from server.properties, dynamic, default)."""
    client = admin(bootstrap)  # held until the answer comes: a collected client cancels its requests
    fetch_metadata(bootstrap, client=client)  # an unreachable cluster is the usual one line
    res = ConfigResource(ConfigResource.Type.BROKER, str(broker_id))
    fut = next(iter(client.describe_configs([res], request_timeout=REQUEST_TIMEOUT_S).values()))
    return config_values(_result(fut, bootstrap))


def topic_overrides(client: AdminClient, names: list[str]) -> dict[str, dict[str, str]]:
    """Dynamic (per-topic) configs; empty where the broker cannot describe configs."""
    futures = client.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, n) for n in names])
    out: dict[str, dict[str, str]] = {}
    for res, fut in futures.items():
        try:
            entries = fut.result(timeout=REQUEST_TIMEOUT_S)
        except (KafkaException, TimeoutError):
            continue
        out[res.name] = {
            k: str(e.value)
            for k, e in sorted(entries.items())
            if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value and not e.is_sensitive
        }
    return out


def alter_broker_configs(
    bootstrap: str, brokers: list[int], set_configs: dict[str, str] | None = None, delete: list[str] | None = None
) -> None:
    """Incrementally set and/or delete dynamic per-broker configs (kafka-configs.sh --entity-type brokers)."""
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in (set_configs or {}).items()]
    entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in delete or []]
    if not entries or not brokers:
        return
    client = admin(bootstrap)

    def alter() -> None:
        for b in brokers:  # the AdminClient takes one BROKER resource per call
            res = ConfigResource(ConfigResource.Type.BROKER, str(b), incremental_configs=entries)
            for fut in client.incremental_alter_configs([res], request_timeout=REQUEST_TIMEOUT_S).values():
                _result(fut, bootstrap)

    retrying("alter broker configs", alter)


def kafka_version(bootstrap: str, broker_id: int, client: AdminClient | None = None) -> str | None:
    """A broker's inter.broker.protocol.version (its Kafka version unless pinned lower); None if it cannot say."""
    client = client or admin(bootstrap)
    res = ConfigResource(ConfigResource.Type.BROKER, str(broker_id))
    try:
        fut = next(iter(client.describe_configs([res], request_timeout=REQUEST_TIMEOUT_S).values()))
        entries = fut.result(timeout=REQUEST_TIMEOUT_S)
    except (KafkaException, TimeoutError, StopIteration):
        return None
    entry = entries.get("inter.broker.protocol.version")
    return str(entry.value) if entry is not None and entry.value else None


def group_configs(bootstrap: str, group: str) -> dict[str, str]:
    """A consumer group's configs (KIP-848 group configs: consumer.session.timeout.ms, ...), with their defaults."""
    client = admin(bootstrap)
    res = ConfigResource(ConfigResource.Type.GROUP, group)
    fut = next(iter(client.describe_configs([res], request_timeout=REQUEST_TIMEOUT_S).values()))
    return {k: str(e.value) for k, e in _result(fut, bootstrap).items() if e.value is not None}


def alter_group_configs(bootstrap: str, group: str, set_configs: dict[str, str]) -> None:
    """Set a group's dynamic configs (kafka-configs.sh --entity-type groups); Kafka checks each against the
    broker's bounds (consumer.session.timeout.ms within group.consumer.min/max.session.timeout.ms)."""
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in set_configs.items()]
    client = admin(bootstrap)
    res = ConfigResource(ConfigResource.Type.GROUP, group, incremental_configs=entries)
    for fut in client.incremental_alter_configs([res], request_timeout=REQUEST_TIMEOUT_S).values():
        _result(fut, bootstrap)
