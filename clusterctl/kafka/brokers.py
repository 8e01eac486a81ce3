"""Every broker on its own address: what each one's metadata answer says (a lagging or paused broker shows here).

`metadata_per_broker` is what the chaos observer and recovery checks use to see a split view of the cluster,
and what clusterctl.kafka.admin waits on until a new topic is served everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from clusterctl.kafka.settings import LIBRDKAFKA_LOGGER, security_settings


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
    """Ask every broker on its own address (one bounded Metadata request each, in parallel, answered by that broker
    itself: clusterctl.kafka.wiremeta; librdkafka may pass a request on to a broker it learnt from the first answer).

    A value is the broker's view, or the one-line reason it gave none (a paused broker times out).
    """
    from clusterctl.kafka import wiremeta

    by_address = {address: broker for broker, address in addresses.items()}
    answers = wiremeta.ask_each(list(by_address), [topic] if topic else [], timeout=timeout)
    out: dict[int, BrokerView | str] = {}
    for address, md in answers.items():
        broker = by_address[address]
        if isinstance(md, str):
            out[broker] = md
            continue
        parts = md.topics.get(topic) if topic else None
        leaders = {p.partition: p.leader for p in parts} if parts else None
        out[broker] = BrokerView(broker, md.brokers, md.controller, leaders)
    return dict(sorted(out.items()))


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
    conf |= security_settings(bootstrap)
    conf["logger"] = LIBRDKAFKA_LOGGER  # refused connections while a broker starts are expected, not news
    try:
        md = AdminClient(conf).list_topics(timeout=timeout)
    except KafkaException as exc:
        return None, str(exc.args[0]) if exc.args else "metadata request failed"
    return sorted(int(b) for b in md.brokers), None
