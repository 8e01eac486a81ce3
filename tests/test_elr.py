"""KIP-966 without a cluster: DescribeTopicPartitions and UpdateFeatures on the wire, the spec knob, the drill's
models, the election rules a report names, and the topic views' ELR columns. Real Kafka 4.x: test_elr_kafka.py."""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import _fakebroker
import pytest
from jinja2 import Environment, FileSystemLoader, select_autoescape

from clusterctl.chaos import election_rules as er
from clusterctl.chaos.analysis import FaultMetrics, PartitionFailover
from clusterctl.chaos.bounds import explain
from clusterctl.chaos.scenario import parse_scenario
from clusterctl.chaos.timeline import ElrSample, PartitionSample, Timeline
from clusterctl.errors import SpecError
from clusterctl.kafka import features
from clusterctl.kafka import topicpartitions as tp
from clusterctl.kafka.protocol import uvarint
from clusterctl.spec import yamlfile
from clusterctl.spec.initfile import render_spec_text
from clusterctl.spec.model import parse_spec


def _str(s: str) -> bytes:
    return uvarint(len(s.encode()) + 1) + s.encode()


def _ints(xs: list[int] | None) -> bytes:
    if xs is None:
        return b"\x00"  # a null compact array
    return uvarint(len(xs) + 1) + b"".join(struct.pack(">i", x) for x in xs)


PartRow = tuple[int, int, int, list[int], list[int], list[int] | None, list[int] | None]


def response(cid: int, topics: list[tuple[str, int, list[PartRow]]], cursor: tuple[str, int] | None = None) -> bytes:
    """A DescribeTopicPartitions v0 answer as its schema lays it out (response header v1, compact arrays, tags);
    each partition row is (index, leader, epoch, replicas, isr, elr, last known elr)."""
    out = struct.pack(">i", cid) + b"\x00" + struct.pack(">i", 0) + uvarint(len(topics) + 1)
    for name, error, parts in topics:
        out += struct.pack(">h", error) + _str(name) + bytes(16) + b"\x00" + uvarint(len(parts) + 1)
        for index, leader, epoch, replicas, isr, elr, known in parts:
            out += struct.pack(">hiii", 0, index, leader, epoch) + _ints(replicas) + _ints(isr)
            out += _ints(elr) + _ints(known) + _ints([]) + b"\x00"
        out += struct.pack(">i", -2147483648) + b"\x00"
    if cursor is None:
        out += struct.pack(">b", -1)
    else:
        out += struct.pack(">b", 1) + _str(cursor[0]) + struct.pack(">i", cursor[1]) + b"\x00"
    return out + b"\x00"


def test_request_bytes_follow_the_schema() -> None:
    req = tp.encode_request(7, ["orders", "t"])
    assert struct.unpack(">i", req[:4])[0] == len(req) - 4
    body = req[4:]
    assert body[:8] == struct.pack(">hhi", 75, 0, 7)  # api key 75, version 0, correlation 7
    assert body[8:20] == b"\x00\x0aclusterctl" and body[20] == 0  # client id, header tags
    assert body[21:] == b"\x03" + _str("orders") + b"\x00" + _str("t") + b"\x00" + struct.pack(">i", 2000) + b"\xff\x00"
    paged = tp.encode_request(8, ["orders"], ("orders", 5))[4:]
    assert paged.endswith(struct.pack(">i", 2000) + b"\x01" + _str("orders") + struct.pack(">i", 5) + b"\x00\x00")


def test_decode_elr_last_known_and_nulls() -> None:
    rows: list[PartRow] = [(0, -1, 7, [1, 2, 3], [], [1, 3], [1]), (1, 2, 3, [2, 3, 1], [2, 3, 1], None, None)]
    parts, errors, cursor = tp.decode_response(response(5, [("orders", 0, rows), ("gone", 3, [])], ("t", 2)), 5)
    assert [(p.partition, p.leader, p.leader_epoch, p.isr, p.elr, p.last_known_elr) for p in parts] == [
        (0, -1, 7, [], [1, 3], [1]), (1, 2, 3, [2, 3, 1], None, None)]  # fmt: skip
    assert errors == {"gone": "UNKNOWN_TOPIC_OR_PARTITION"} and cursor == ("t", 2)
    with pytest.raises(ValueError, match="correlation id"):
        tp.decode_response(response(5, []), 6)
    with pytest.raises(ValueError, match="truncated"):
        tp.decode_response(response(5, [("orders", 0, rows)])[:-12], 5)


def _fake_broker(apis: dict[int, tuple[int, int]], pages: list[bytes]) -> Iterator[tuple[str, int]]:
    """A loopback broker: ApiVersions v0 with `apis`, then the DescribeTopicPartitions pages in turn."""
    left = list(pages)
    yield from _fakebroker.fake_broker(apis, lambda cid, _version: struct.pack(">i", cid) + left.pop(0)[4:])


def test_describe_follows_the_cursor_and_refuses_a_broker_without_the_api() -> None:
    first = response(0, [("a", 0, [(0, 1, 1, [1], [1], [], [])])], ("b", 0))
    second = response(0, [("b", 0, [(0, 2, 4, [2], [2], [], [])])])
    broker = _fake_broker({18: (0, 3), 75: (0, 0)}, [first, second])
    addr = next(broker)
    found = tp.describe_partitions([addr], ["a", "b"], timeout=2)
    assert found is not None and [(p.topic, p.leader) for p in found[0]] == [("a", 1), ("b", 2)]
    old = _fake_broker({18: (0, 3), 3: (0, 12)}, [])  # Kafka 3.x in ZooKeeper mode: no API 75
    assert tp.describe_partitions([next(old)], ["a"], timeout=2) is None
    with pytest.raises(tp.DescribePartitionsError, match="no broker answered DescribeTopicPartitions"):
        tp.describe_partitions([("127.0.0.1", 1)], ["a"], timeout=1)


def test_update_features_bytes_and_refusals() -> None:
    req = features.encode_update("eligible.leader.replicas.version", 0, features.SAFE_DOWNGRADE, 3)[4:]
    assert req[:8] == struct.pack(">hhi", 57, 1, 3)
    body = req[21:]
    assert body == struct.pack(">i", 30000) + b"\x02" + _str("eligible.leader.replicas.version") + (
        struct.pack(">hb", 0, 2) + b"\x00" + b"\x00" + b"\x00")  # fmt: skip
    ok = struct.pack(">i", 3) + b"\x00" + struct.pack(">ih", 0, 0) + b"\x00" + b"\x02" + _str("x")
    ok += struct.pack(">h", 0) + b"\x00" + b"\x00" + b"\x00"
    assert features.decode_update(ok, 3) is None
    top = struct.pack(">i", 3) + b"\x00" + struct.pack(">ih", 0, 42) + _str("Invalid update version 2") + b"\x01\x00"
    assert features.decode_update(top, 3) == "Invalid update version 2"


BASE = {"name": "lab", "profile": "offline", "kafka_manager": {"enabled": False}}


def _spec(kafka: dict[str, Any], kraft: dict[str, Any]) -> Any:
    return parse_spec({**BASE, "kafka": kafka, "kraft": kraft})


@pytest.mark.parametrize(
    ("kafka", "level", "message"),
    [
        (
            {"mode": "zookeeper", "version": "3.9.2"},
            1,
            "needs kafka.mode: kraft on Kafka 4.0+; this spec runs ZooKeeper",
        ),
        ({"mode": "kraft", "version": "3.9.2"}, 1, "needs Kafka 4.0+; image clusterctl/kafka:3.9.2 is Kafka 3.9"),
        ({"mode": "kraft", "version": "4.4.0"}, 2, "less than or equal to 1"),
        ({"mode": "kraft", "version": "4.4.0"}, -1, "greater than or equal to 0"),
    ],
)
def test_spec_knob_is_refused_in_one_line(kafka: dict[str, Any], level: int, message: str) -> None:
    with pytest.raises(SpecError) as err:
        _spec(kafka, {"eligible_leader_replicas_version": level})
    assert message in str(err.value) and "\n" not in str(err.value)


def test_spec_knob_round_trips_through_the_commented_template() -> None:
    for level in (None, 0, 1):
        spec = _spec({"mode": "kraft", "version": "4.4.0"}, {"eligible_leader_replicas_version": level})
        text = render_spec_text(spec, [])
        assert "eligible_leader_replicas_version:" in text
        assert parse_spec(yamlfile.load_text(text, "t")) == spec


SCENARIO = """name: x
mode: kraft
features: {eligible.leader.replicas.version: 1}
topic: {partitions: 1, replication_factor: 3, replica_assignment: [[1, 2, 3]]}
steps:
  - create_topic: {}
  - wait_for: {elr: {partition: 0, equals: [3], last_known_elr: [1]}}
  - assert: {leader: {partition: 0, equals: -1}}
"""


def test_scenario_features_assignment_and_elr_condition() -> None:
    sc = parse_scenario(SCENARIO)
    assert sc.features == {"eligible.leader.replicas.version": 1} and sc.topic.replica_assignment == [[1, 2, 3]]
    cond = sc.parsed_steps()[1].args
    assert cond.name == "elr" and cond.elr.equals == [3] and cond.elr.last_known_elr == [1]
    for old, new, message in [
        ("eligible.leader.replicas.version: 1}", "group.version: 1}", "'group.version' is not a feature a drill sets"),
        ("eligible.leader.replicas.version: 1}", "eligible.leader.replicas.version: 2}", "a level from 0 to 1, got 2"),
        ("mode: kraft\n", "", "need mode: kraft (got mode: any)"),
        ("[[1, 2, 3]]", "[[1, 2, 2]]", "replica_assignment[0] [1, 2, 2]: 3 distinct broker ids"),
        ("[[1, 2, 3]]", "[[1, 2, 3], [2, 3, 1]]", "replica_assignment has 2 partitions; topic.partitions is 1"),
    ]:
        with pytest.raises(SpecError) as err:
            parse_scenario(SCENARIO.replace(old, new, 1))
        assert message in str(err.value), err.value


def _tl(
    elr: list[tuple[float, int, list[int], list[int], list[int]]], md: list[tuple[float, int, list[int]]]
) -> Timeline:
    tl = Timeline(0.0, 100.0, ["t"])
    tl.elr = [ElrSample(t, "t", 0, leader, isr, e, k) for t, leader, isr, e, k in elr]
    tl.partitions = [PartitionSample(t, "t", 1, leader, [1, 2, 3], isr) for t, leader, isr in md]
    return tl


def test_election_rules_name_elr_last_known_unclean_and_isr() -> None:
    tl = _tl(
        [(1, 1, [1], [3], []), (10, -1, [], [1, 3], [1]), (18.5, 3, [3], [1], []), (30, 3, [1, 2, 3], [], []),
         (40, 1, [1, 2, 3], [], []), (50, -1, [], [], [1]), (60, 1, [1], [], [])],
        [(1, 2, [2]), (5, -1, [2]), (9, 3, [3]), (20, 2, [2, 3])],
    )  # fmt: skip
    got = [(e.partition, e.leader_before, e.leader, e.rule, e.leaderless_s) for e in er.elections(tl, 2)]
    assert got == [(1, -1, 3, "unclean", 4.0), (0, -1, 3, "elr", 8.5), (1, 3, 2, "isr", None),
                   (0, 3, 1, "isr", None), (0, -1, 1, "last-known-leader", 10.0)]  # fmt: skip
    elr = er.elections(tl, 2)[1]
    assert "elected from the ELR [1, 3] with the ISR empty" in elr.detail and "min.insync.replicas=2" in elr.detail


class _Verify:
    def __init__(self, lost: int, lossy: list[int]) -> None:
        self.lost_count = lost
        self.partitions = [type("P", (), {"topic": "t", "partition": p, "lost": 5})() for p in lossy]


def test_safety_says_which_rule_kept_or_lost_the_writes() -> None:
    kept = _tl([(1, -1, [], [1, 3], [1]), (5, 3, [3], [1], [])], [])
    line = er.safety(er.elections(kept, 2), _Verify(0, []), "no-loss")
    assert line is not None and line.startswith("0 lost, kept safe by ELR: broker 3 leads t-0 after 4.0s")
    assert line.endswith("; no unclean election")
    lost = _tl([(1, -1, [1], [], []), (5, 2, [2], [], [])], [])
    line = er.safety(er.elections(lost, 2), _Verify(7, [0]), "loss")
    assert line == "7 acknowledged lost by unclean election: broker 2 leads t-0 after 4.0s without a leader, in " \
                   "neither the ISR [1] nor the ELR []"  # fmt: skip
    assert er.safety([], _Verify(0, []), "no-loss") is None


def test_a_new_leader_from_the_elr_bounds_the_times_instead_of_the_session_timeout() -> None:
    row = PartitionFailover("t", 0, 1, True, 3, 17.4, 10.0, 3.2, 17.4, 19.2)
    fault = FaultMetrics("kill-broker", "broker 1", 0.5, 1, None, 2.2, "metadata", None, None, None, None, [row])
    er.mark_failovers([fault], er.elections(_tl([(1, -1, [], [1, 3], [1]), (18, 3, [3], [1], [])], []), 2))
    settings = {"broker.session.timeout.ms": 9000, "replica.lag.time.max.ms": 10000}
    assert row.elected_by == "the return of broker 3, an ELR member (KIP-966)"
    assert explain(17.4, "kill-broker", "new_leader", True, settings, row.elected_by) == f"17.4 ≈ {row.elected_by}"
    assert explain(10.0, "kill-broker", "isr_shrunk", True, settings, row.elected_by).endswith("timeout.ms 9000")


def _topic_fragment(elr: dict[int, Any] | None) -> str:
    here = Path(__file__).resolve().parent.parent / "clusterctl" / "console" / "templates"
    env = Environment(loader=FileSystemLoader(str(here)), autoescape=select_autoescape(default=True))
    part = type("P", (), {"partition": 0, "leader": -1, "replicas": [1, 2, 3], "isr": [], "offline": True,
                          "under_replicated": True})()  # fmt: skip
    t = type("T", (), {"name": "t", "partition_count": 1, "replication_factor": 3, "partitions": [part]})()
    ctx = {"t": t, "ends": None, "ends_error": None, "configs": {}, "elr": elr, "elr_error": None}
    return env.get_template("_topic.html").render(**ctx)


def test_console_topic_page_shows_elr_only_where_the_cluster_reports_it() -> None:
    on = _topic_fragment({0: tp.PartitionElr("t", 0, -1, 7, [1, 2, 3], [], [3, 1], [1], [])})
    assert "<th title" in on and '<td class="elr">3,1</td><td class="last-known-elr">1</td>' in on
    off = _topic_fragment(None)
    assert "Elr" not in off and "last-known-elr" not in off


def test_topic_describe_adds_the_elr_columns_when_reported(capsys: pytest.CaptureFixture[str]) -> None:
    from clusterctl.cli.topic import render_describe
    from clusterctl.kafka.admin import PartitionState, TopicDescription

    p = PartitionState("t", 0, -1, [1, 2, 3], [], True, True)
    render_describe([TopicDescription("t", 1, 3, False, [p])], as_json=False)
    assert "Elr" not in capsys.readouterr().out
    p.elr, p.last_known_elr = [1, 3], [1]
    render_describe([TopicDescription("t", 1, 3, False, [p])], as_json=False)
    out = capsys.readouterr().out
    assert "Elr" in out and "LastKnownElr" in out and "1,3" in out
