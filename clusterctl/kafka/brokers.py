"""Every broker on its own address: what each one's metadata answer says (a lagging or paused broker shows here).

`metadata_per_broker` is what the chaos observer and recovery checks use to see a split view of the cluster,
and what clusterctl.kafka.admin waits on until a new topic is served everywhere.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from clusterctl.kafka.connection import admin_config
from clusterctl.kafka.settings import LIBRDKAFKA_LOGGER


@dataclass
class BrokerView:
    """What one broker's metadata answer says: the brokers it knows and, optionally, a topic's leaders."""

    broker: int
    brokers: set[int]
    controller: int
    leaders: dict[int, int] | None = None  # partition -> leader (-1: none); None: the broker does not know the topic


def metadata_per_broker(
    addresses: dict[int, str], timeout: float = 2.0, topic: str | None = None
) -> dict[int, BrokerView | str]:
    """Ask every broker on its own address (one bounded metadata request each, in parallel).

    A value is the broker's view, or the one-line reason it gave none (a paused broker times out).
    """

    def one(item: tuple[int, str]) -> tuple[int, BrokerView | str]:
        broker, address = item
        client = AdminClient(admin_config(address, socket_timeout_ms=int(timeout * 1000)))
        try:
            md = client.list_topics(topic, timeout=timeout) if topic else client.list_topics(timeout=timeout)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            return broker, err.name() if isinstance(err, KafkaError) else str(exc)
        leaders = None
        t = md.topics.get(topic) if topic else None
        if t is not None and not unknown_topic(t) and t.partitions:
            leaders = {pid: (p.leader if p.leader is not None else -1) for pid, p in t.partitions.items()}
        return broker, BrokerView(broker, set(md.brokers), md.controller_id, leaders)

    if not addresses:
        return {}
    with ThreadPoolExecutor(max_workers=len(addresses)) as pool:
        return dict(pool.map(one, sorted(addresses.items())))


def metadata_gaps(addresses: dict[int, str], expected: set[int], timeout: float = 2.0) -> list[str]:
    """Each broker, asked on its own address, lists every broker of `expected`; what falls short, a line each.

    In ZooKeeper mode a broker knows the others only from the controller's UpdateMetadata: one just started (or
    back) can list itself alone while every registration is in ZooKeeper already.
    """
    out: list[str] = []
    for b, view in metadata_per_broker(addresses, timeout=timeout).items():
        if isinstance(view, str):
            out.append(f"broker {b} answering metadata ({view})")
        elif unknown := sorted(expected - view.brokers):
            out.append(f"broker(s) {','.join(map(str, unknown))} in broker {b}'s metadata")
    return out


def unknown_topic(t: Any) -> bool:
    """True when a metadata answer's topic entry says the topic does not exist."""
    return t.error is not None and t.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART


def metadata_brokers(bootstrap: str, timeout: float = 2.0) -> tuple[list[int] | None, str | None]:
    """(broker ids in a Metadata response, None) or (None, why): the metadata round trip `up` waits for."""
    conf: dict[str, Any] = {"bootstrap.servers": bootstrap, "socket.timeout.ms": int(timeout * 1000)}
    conf["logger"] = LIBRDKAFKA_LOGGER  # refused connections while a broker starts are expected, not news
    try:
        md = AdminClient(conf).list_topics(timeout=timeout)
    except KafkaException as exc:
        return None, str(exc.args[0]) if exc.args else "metadata request failed"
    return sorted(int(b) for b in md.brokers), None
