"""Metadata v12 on the wire (clusterctl.kafka.wiremeta): a broker's own answer decoded, and the agreement check
that keeps a drill from trusting a broker back from a network partition (it answers from its old metadata)."""

from __future__ import annotations

import struct

import pytest

from clusterctl.kafka import wiremeta
from clusterctl.kafka.protocol import Reader, compact_str, uvarint
from clusterctl.kafka.wiremeta import BrokerMetadata, PartitionState


def _i32s(values: tuple[int, ...]) -> bytes:
    return uvarint(len(values) + 1) + b"".join(struct.pack(">i", v) for v in values)


def _answer(cid: int, brokers: list[int], controller: int, topics: dict[str, list[PartitionState]]) -> bytes:
    """A Metadata v12 response as a broker sends it (without the size prefix)."""
    out = struct.pack(">i", cid) + uvarint(0) + struct.pack(">i", 0)
    out += uvarint(len(brokers) + 1)
    for b in brokers:
        out += struct.pack(">i", b) + compact_str(f"kafka{b}") + struct.pack(">i", 19092) + uvarint(0) + uvarint(0)
    out += compact_str("cluster-id") + struct.pack(">i", controller)
    out += uvarint(len(topics) + 2)
    for name, parts in topics.items():
        out += struct.pack(">h", 0) + compact_str(name) + bytes(16) + b"\x00" + uvarint(len(parts) + 1)
        for p in parts:
            out += struct.pack(">hiii", p.error, p.partition, p.leader, p.leader_epoch)
            out += _i32s(p.replicas) + _i32s(p.isr) + _i32s(()) + uvarint(0)
        out += struct.pack(">i", -2147483648) + uvarint(0)
    # an unknown topic: error 3, left out of the decoded answer
    out += struct.pack(">h", 3) + compact_str("gone") + bytes(16) + b"\x00" + uvarint(1) + struct.pack(">i", 0)
    out += uvarint(0)
    return out + uvarint(0)


P0 = PartitionState(0, 2, 0, (2, 3, 1), (2, 3, 1))


def test_request_names_the_topics_and_creates_none() -> None:
    req = wiremeta.encode_request(7, ["t1"])
    r = Reader(req[4:])
    assert struct.unpack(">i", req[:4])[0] == len(req) - 4
    assert (r.int16(), r.int16(), r.int32()) == (3, 12, 7)  # Metadata v12, correlation id
    r.take(r.int16())  # client id
    r.tags()
    assert r.array_len() == 1 and r.take(16) == bytes(16) and r.compact_str() == "t1"
    r.tags()
    assert (r.int8(), r.int8()) == (0, 0)  # no auto-creation, no authorized operations
    assert wiremeta.encode_request(7, None).endswith(b"\x00\x00\x00\x00")  # null topics: all of them


def test_answer_decoded_with_leader_epochs_and_unknown_topics_left_out() -> None:
    p1 = PartitionState(1, -1, 4, (1, 2, 3), (1,), error=5)
    md = wiremeta.decode_response(_answer(9, [1, 2, 3], 2, {"t": [p1, P0]}), 9, "127.0.0.1:9092")
    assert md.brokers == {1, 2, 3} and md.controller == 2
    assert md.topics == {"t": [P0, p1]}  # sorted by partition; "gone" (UNKNOWN_TOPIC_OR_PARTITION) absent
    with pytest.raises(ValueError, match="correlation id 9, expected 8"):
        wiremeta.decode_response(_answer(9, [1], 1, {}), 8, "a")
    with pytest.raises(ValueError, match="truncated"):
        wiremeta.decode_response(_answer(9, [1, 2], 1, {"t": [P0]})[:-20], 9, "a")


def _md(address: str, *parts: PartitionState) -> BrokerMetadata:
    return BrokerMetadata(address, {1, 2, 3}, 1, {"t": list(parts)})


def test_converged_needs_one_leader_and_epoch_per_partition_from_every_answer() -> None:
    fresh = PartitionState(0, 3, 1, (2, 3, 1), (3, 1))
    assert wiremeta.converged({"a": _md("a", fresh), "b": _md("b", fresh), "c": "TimeoutError: timed out"}, "t") is None
    # the broker back from a partition: itself leader at the old epoch, its old full ISR
    line = wiremeta.converged({"a": _md("a", fresh), "b": _md("b", P0)}, "t")
    assert line == "t-0: a says leader 3 (epoch 1), b says leader 2 (epoch 0)"
    same_leader_new_epoch = PartitionState(0, 3, 2, (2, 3, 1), (3, 1))
    assert wiremeta.converged({"a": _md("a", fresh), "b": _md("b", same_leader_new_epoch)}, "t") is not None
    assert wiremeta.converged({"a": "ConnectionRefusedError"}, "t") == "no broker answered metadata"
    unknown = BrokerMetadata("b", {1, 2, 3}, 1, {})
    assert wiremeta.converged({"a": _md("a", fresh), "b": unknown}, "t") == "b does not know topic t yet"
