"""The controller quorum's kind (`kraft.quorum`): static or dynamic (KIP-853), what a dynamic one needs, and the
directory ids its voters are formatted with.

A static quorum names its voters in `controller.quorum.voters`; the voter set is fixed when the storage is formatted,
so a voter whose disk is gone can only come back with an empty log under its old identity. A dynamic quorum
(`kraft.version` 1, Kafka 3.9+) names `controller.quorum.bootstrap.servers`; its first voters are written into the
metadata log by `kafka-storage format --initial-controllers id@host:port:directory-id,...`, and voters are added and
removed by their (node id, directory id) while the quorum runs.

The initial directory ids are chosen here (Kafka's `--initial-controllers` needs them before the first start): a
name-based UUID of the cluster's name and the node id, so every render of a spec names the same ones. A replacement
formatted with `--no-initial-controllers` gets a random one from Kafka.
"""

from __future__ import annotations

import base64
import uuid
from typing import TYPE_CHECKING

from clusterctl.spec.capabilities import YES, line_of, supports

if TYPE_CHECKING:
    from clusterctl.spec.model import ClusterSpec

DYNAMIC = "dynamic"
# any fixed namespace: the ids only have to be stable per (cluster, node) and distinct between nodes
_NAMESPACE = uuid.UUID("6b61666b-612d-6b72-6166-742d64697273")


def directory_id(cluster: str, node_id: int) -> str:
    """The directory id node `node_id` of `cluster` is formatted with: 16 bytes, base64url without padding, as
    Kafka's Uuid prints them. The first byte's top bit is cleared so the text never starts with '-' or '_' (Kafka's
    own ids avoid a leading '-', which a command line would read as an option)."""
    raw = bytearray(uuid.uuid5(_NAMESPACE, f"{cluster}/{node_id}").bytes)
    raw[0] &= 0x7F
    return base64.urlsafe_b64encode(bytes(raw)).decode().rstrip("=")


def version_refusal(version: tuple[int, int] | None, subject: str) -> str | None:
    """The one line that refuses a dynamic quorum on a Kafka without KIP-853 (None: it has it, or is unknown)."""
    if version is None or supports(line_of(version), "dynamic_quorum") == YES:
        return None
    return (
        f"kraft.quorum=dynamic (KIP-853) needs Kafka 3.9 or later: {subject} is Kafka {version[0]}.{version[1]}; "
        "use kafka.version 3.9.x or 4.x, or kraft.quorum: static"
    )


def check_quorum(spec: ClusterSpec, image: str | None) -> None:
    """kraft.quorum=dynamic's own needs (ValueError, one line): the offline image (its entrypoint leaves a
    pre-formatted log dir alone and takes a root-owned one), dedicated controllers on compose, Kafka 3.9+."""
    from clusterctl.spec.profiles import is_kafka_image, kafka_version_of

    if spec.kraft.quorum != DYNAMIC:
        return
    if spec.profile != "offline" or (spec.images.kafka and not is_kafka_image(spec.images.kafka)):
        raise ValueError(
            "kraft.quorum=dynamic formats the controllers' storage with clusterctl/kafka's tools: it needs profile "
            "offline (no other images.kafka)"
        )
    if spec.kraft.combined:
        raise ValueError("kraft.quorum=dynamic needs dedicated controllers here (kraft.combined: false)")
    if spec.swarm:
        raise ValueError("kraft.quorum=dynamic runs on deploy.target compose (its storage is formatted on this host)")
    refusal = version_refusal(kafka_version_of(image) if image else None, f"image {image}")
    if refusal:
        raise ValueError(refusal)
