"""Feature levels (KIP-584): what a broker supports and what the cluster has finalized, from ApiVersions v3.

librdkafka's AdminClient has no DescribeFeatures, and `kafka-features.sh describe` through `docker exec` starts a
JVM per call; ApiVersions v3 (Kafka 2.7+) carries both in its tagged fields, so it is read here over a socket:
tag 0 SupportedFeatures (name, min, max), tag 1 FinalizedFeaturesEpoch, tag 2 FinalizedFeatures (name, max, min).
The response header of ApiVersions is always v0 (no tag section), even for a flexible request.

UpdateFeatures (API 57, v1: flexible, an upgrade type per feature) sets a finalized level, as `kafka-features.sh
upgrade|downgrade --feature NAME=LEVEL` does without a JVM: a broker forwards it to the active controller.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from clusterctl.errors import ClusterctlError, UnreachableError
from clusterctl.kafka.protocol import Reader, check_correlation, compact_str, exchange, frame, header, uvarint

API_KEY = 18
API_VERSION = 3
METADATA_VERSION = "metadata.version"
ELR_VERSION = "eligible.leader.replicas.version"  # KIP-966
UPDATE_KEY = 57
UPDATE_VERSION = 1
UPGRADE, SAFE_DOWNGRADE = 1, 2  # UpdateFeatures' upgrade types (3, an unsafe downgrade, is never sent)


@dataclass
class Features:
    """One broker's answer: feature name → (min, max) it supports, and the cluster's finalized levels."""

    supported: dict[str, tuple[int, int]] = field(default_factory=dict)
    finalized: dict[str, int] = field(default_factory=dict)  # name → finalized max version level
    finalized_epoch: int = -1
    answered_by: str = ""

    @property
    def metadata_level(self) -> int | None:
        """The finalized metadata.version feature level (None: the broker reported none)."""
        return self.finalized.get(METADATA_VERSION)


def encode_request(correlation_id: int = 1) -> bytes:
    body = compact_str("clusterctl") + compact_str("1") + b"\x00"
    return frame(header(API_KEY, API_VERSION, correlation_id, flexible=True) + body)


def decode_response(payload: bytes) -> Features:
    """The features of an ApiVersions v3 answer (ValueError when it is malformed or an error)."""
    r = Reader(payload, "ApiVersions response")
    r.int32()  # correlation id: response header v0
    error = r.int16()
    if error:
        raise ValueError(f"ApiVersions error code {error}")
    for _ in range(r.array_len()):
        r.int16(), r.int16(), r.int16()
        r.tags()
    r.int32()  # throttle time
    out = Features()
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        data = Reader(r.take(size), f"ApiVersions tag {tag}")
        if tag == 0:
            for _ in range(data.array_len()):
                name = data.compact_str()
                out.supported[name] = (data.int16(), data.int16())
                data.tags()
        elif tag == 1:
            out.finalized_epoch = data.int64()
        elif tag == 2:
            for _ in range(data.array_len()):
                name = data.compact_str()
                out.finalized[name] = data.int16()
                data.int16()  # min version level
                data.tags()
    return out


def describe_features(addresses: list[tuple[str, int]], timeout: float = 3.0) -> Features:
    """Ask each address in turn; the first answer. UnreachableError (exit 4) when none answers."""
    errors: list[str] = []
    for host, port in addresses:
        try:
            found = decode_response(exchange(host, port, encode_request(), timeout))
        except (OSError, ValueError, struct.error) as exc:
            errors.append(f"{host}:{port}: {exc}")
            continue
        found.answered_by = f"{host}:{port}"
        return found
    raise UnreachableError("no broker answered ApiVersions: " + "; ".join(errors[:3]))


def encode_update(name: str, level: int, upgrade_type: int, correlation_id: int = 1, timeout_ms: int = 30000) -> bytes:
    """UpdateFeatures v1 for one feature (header v2; not validate-only)."""
    body = struct.pack(">i", timeout_ms) + uvarint(2) + compact_str(name)
    body += struct.pack(">hb", level, upgrade_type) + uvarint(0) + b"\x00" + uvarint(0)
    return frame(header(UPDATE_KEY, UPDATE_VERSION, correlation_id, flexible=True) + body)


def decode_update(payload: bytes, correlation_id: int = 1) -> str | None:
    """None when the update was applied, else the controller's error (the top-level one, else the feature's)."""
    r = Reader(payload, "UpdateFeatures response")
    check_correlation(r.int32(), correlation_id)
    r.tags()  # response header v1
    r.int32()  # throttle time
    error, message = r.int16(), r.compact_str()
    if error:
        return message or f"error {error}"
    for _ in range(r.array_len()):
        name, code, text = r.compact_str(), r.int16(), r.compact_str()
        r.tags()
        if code:
            return f"{name}: {text or f'error {code}'}"
    return None


def set_feature_level(addresses: list[tuple[str, int]], name: str, level: int, timeout: float = 30.0) -> int | None:
    """Finalize `name` at `level` (an upgrade, or a safe downgrade) through the first broker that answers; the
    level it had before (None: not finalized). Nothing is sent when it is at `level` already.

    ClusterctlError with the controller's own words when it refuses; UnreachableError when no broker answers."""
    before = describe_features(addresses).finalized.get(name)
    if (before or 0) == level:
        return before
    kind = UPGRADE if level > (before or 0) else SAFE_DOWNGRADE
    errors: list[str] = []
    for host, port in addresses:
        try:
            refused = decode_update(exchange(host, port, encode_update(name, level, kind), timeout))
        except (OSError, ValueError, struct.error) as exc:
            errors.append(f"{host}:{port}: {exc}")
            continue
        if refused:
            raise ClusterctlError(f"the controller refused {name}={level} (finalized: {before}): {refused}")
        return before
    raise UnreachableError("no broker answered UpdateFeatures: " + "; ".join(errors[:3]))
