"""The drill group's analysis without Kafka: each fault's consume gap, the at-least-once check, the group steps'
checks, the compare series per group protocol, and the consumer settings of each protocol."""

from __future__ import annotations

from pathlib import Path

import pytest

from clusterctl.chaos.group_timeline import (
    AssignmentChange,
    Read,
    consume_gap,
    held_at,
    normal_wait,
    ownership,
    ranges,
    unassigned,
    verify_reads,
    waits,
)


def _reads(partition: int, rows: list[tuple[float, int, int, int]]) -> list[Read]:
    """(t, member, first, last) → reads of one partition."""
    return [Read(t, m, partition, ((a, b),)) for t, m, a, b in rows]


def _acked(n: int, every: float = 0.1, start: float = 0.0) -> list[tuple[int, float]]:
    """Offsets 0..n-1 acknowledged `every` seconds apart."""
    return [(o, start + o * every) for o in range(n)]


def test_a_wait_runs_from_the_later_of_the_last_read_and_the_next_ack_to_the_next_new_read() -> None:
    acked = _acked(100)  # offset o acked at o/10 s
    reads = _reads(0, [(1.0, 1, 0, 9), (2.0, 1, 10, 19), (7.0, 2, 20, 69)])
    found = waits(0, reads, acked, 0.0, 10.0)
    # 1.0 → 2.0: offset 10 acked at 1.0, so it waited 1.0; 2.0 → 7.0: offset 20 acked at 2.0: 5.0; then offset 70
    # (acked at 7.0) was never read: open until 10.0
    assert [(w.t0, w.t1, w.member_before, w.member_after) for w in found] == [
        (0.0, 1.0, None, 1), (1.0, 2.0, 1, 1), (2.0, 7.0, 1, 2), (7.0, 10.0, 2, None)]  # fmt: skip


def test_nothing_to_read_is_no_wait_and_a_re_read_is_no_progress() -> None:
    # writes stopped between 2 and 6 s (a leader change): the partition had nothing to read, so no wait
    acked = [(0, 0.5), (1, 1.0), (2, 6.0), (3, 6.5)]
    reads = _reads(0, [(1.1, 1, 0, 1), (6.2, 1, 2, 2), (6.6, 1, 3, 3)])
    assert max(w.seconds for w in waits(0, reads, acked, 1.1, 7.0)) == pytest.approx(0.2)
    # after a rewind to the last commit, member 2 re-reads 0..1 at 4.0: the wait for offset 2 goes on until 8.0
    acked = [(0, 0.5), (1, 1.0), (2, 1.5)]
    reads = _reads(0, [(1.1, 1, 0, 1), (4.0, 2, 0, 1), (8.0, 2, 2, 2)])
    found = waits(0, reads, acked, 1.1, 9.0)
    assert [(w.t0, w.t1) for w in found] == [(1.5, 8.0)]


def test_the_consume_gap_of_a_killed_member_names_its_partition_and_the_time_no_one_held_it() -> None:
    acked = {p: _acked(300, start=0.0) for p in (0, 1)}
    changes = [
        AssignmentChange(0.0, 1, "assign", [0]), AssignmentChange(0.0, 2, "assign", [1]),
        AssignmentChange(15.0, 2, "assign", [0]),  # the dead member's partition handed over after 15 s
    ]  # fmt: skip
    reads = {
        0: _reads(0, [(t / 10, 1, t, t) for t in range(0, 50)] + [(15.5, 2, 50, 155)] +
                  [(15.5 + k / 10, 2, 155 + k, 155 + k) for k in range(1, 140)]),
        1: _reads(1, [(t / 10, 2, t, t) for t in range(0, 300)]),
    }  # fmt: skip
    deaths = {1: 5.0}
    gap = consume_gap("kill-member", "member 1", 5.0, 29.0, reads, acked, changes, deaths, 0.1,
                      taken=held_at(changes, 1, 5.0))  # fmt: skip
    assert gap.partition == 0 and gap.member_before == 1 and gap.member_after == 2
    assert gap.gap_s == pytest.approx(10.5, abs=0.01)  # from the fault (offset 50 acked then) to member 2's read
    assert gap.unassigned_s == pytest.approx(10.0, abs=0.01)  # member 1 dead at 5.0, member 2 holds it from 15.0
    assert gap.stalled_partitions == 1 and gap.members_revoked == 0 and gap.assignment_changes == 1
    assert gap.others_gap_s == 0.0  # partition 1 never waited: each record was read as it was acknowledged


def test_ownership_closes_at_a_revoke_or_a_death_and_unassigned_counts_the_holes() -> None:
    changes = [
        AssignmentChange(0.0, 1, "assign", [0, 1]), AssignmentChange(4.0, 1, "revoke", [0, 1]),
        AssignmentChange(6.0, 2, "assign", [0]), AssignmentChange(6.0, 1, "assign", [1]),
    ]  # fmt: skip
    held = ownership(changes, {1: 8.0}, 10.0)
    assert sorted(held[0]) == [(0.0, 4.0, 1), (6.0, 10.0, 2)]
    assert sorted(held[1]) == [(0.0, 4.0, 1), (6.0, 8.0, 1)]
    assert unassigned(held[0], 0.0, 10.0) == 2.0 and unassigned(held[1], 0.0, 10.0) == 4.0
    assert held_at(changes, 1, 5.0) == frozenset() and held_at(changes, 1, 7.0) == frozenset({1})


def test_the_normal_wait_ignores_a_wait_still_open_at_its_end() -> None:
    acked = {0: _acked(100)}
    reads = {0: _reads(0, [(t / 10 + 0.05, 1, t, t) for t in range(50)])}
    assert normal_wait(reads, acked, 0.0, 9.0) == pytest.approx(0.05, abs=0.001)


def test_every_acknowledged_record_read_at_least_once_re_reads_counted() -> None:
    acked = {0: _acked(10), 1: _acked(5)}
    reads = {0: _reads(0, [(1.0, 1, 0, 6), (2.0, 2, 5, 9)]), 1: _reads(1, [(1.0, 1, 0, 1), (2.0, 1, 4, 4)])}
    v = verify_reads(reads, acked)
    assert (v.acked, v.read, v.unread_count, v.duplicated, v.ok) == (15, 15, 2, 2, False)
    assert v.unread == ["p1: 2-3"]
    assert "2 unread (p1: 2-3), 2 read more than once" in v.summary()
    assert verify_reads({0: _reads(0, [(1.0, 1, 0, 9)])}, {0: _acked(10)}).ok


def test_ranges_of_offsets() -> None:
    assert ranges([5, 1, 2, 3, 3, 9]) == [[1, 3], [5, 5], [9, 9]]
    assert ranges([]) == []


# ---- the steps, their checks and the comparison per protocol

GROUP_DOC = """name: g
topic: {partitions: 2, replication_factor: 1, min_insync_replicas: 1}
steps:
  - create_topic: {}
  - start_load: {}
"""


@pytest.mark.parametrize(
    ("steps", "words"),
    [
        ("  - fault: {action: kill-member, member: 1}\n", "step 3 (fault): no start_group step comes before it"),
        ("  - verify_group: {}\n", "step 3 (verify_group): no start_group step comes before it"),
        ("  - wait_for: {group_consuming: {}}\n", "step 3 (wait_for): no start_group step comes before it"),
        ("  - fault: {action: kill-coordinator}\n", "step 3 (fault): no start_group step comes before it"),
        (
            "  - start_group: {members: 2}\n  - fault: {action: kill-member, member: 3}\n",
            "step 4 (fault): kill-member member: 1..2 (the group's members)",
        ),
        ("  - start_group: {}\n  - start_group: {}\n", "step 4 (start_group): the group started at step 3 runs"),
        ("  - start_group: {}\n  - fault: {action: kill-member}\n", "kill-member needs member:"),
        ("  - start_group: {protocol: cooperative}\n", "step 3 (start_group): protocol: Input should be"),
        ("  - start_group: {members: 33}\n", "step 3 (start_group): members: Input should be less than or equal to 32"),
        ("  - start_group: {session_timeout_ms: 10}\n", "session_timeout_ms: Input should be greater than or equal"),
    ],
)
def test_group_steps_are_checked_when_the_scenario_is_read(steps: str, words: str) -> None:
    from clusterctl.chaos.scenario import parse_scenario
    from clusterctl.errors import SpecError

    with pytest.raises(SpecError) as err:
        parse_scenario(GROUP_DOC + steps, "<s>")
    assert words in str(err.value) and "\n" not in str(err.value)


def test_the_shipped_group_drills_start_a_group_and_check_it() -> None:
    from clusterctl.chaos.scenario import load_scenario

    for name, fault in (("group-member-crash", "kill-member"), ("group-coordinator-loss", "kill-coordinator")):
        steps = load_scenario(name).parsed_steps()
        kinds = [s.kind for s in steps]
        start = next(s.args for s in steps if s.kind == "start_group")
        assert (start.members, start.session_timeout_ms) == (3, 45000)
        assert [s.args.action for s in steps if s.kind == "fault"] == [fault]
        assert kinds.index("start_group") < kinds.index("fault") < kinds.index("verify_group") < kinds.index("verify")


def test_scenario_for_protocol_changes_only_the_group_protocol() -> None:
    from clusterctl.chaos.compare_groups import parse_group_protocols, scenario_for_protocol
    from clusterctl.chaos.scenario import load_scenario
    from clusterctl.errors import UsageError

    sc = load_scenario("group-coordinator-loss")
    consumer = scenario_for_protocol(sc, "consumer")
    start = next(s.args for s in consumer.parsed_steps() if s.kind == "start_group")
    assert start.protocol == "consumer" and start.session_timeout_ms == 45000
    assert [s for s in consumer.steps if "start_group" not in s] == [s for s in sc.steps if "start_group" not in s]
    assert parse_group_protocols(" consumer,classic") == ["consumer", "classic"]
    for bad in ("", "classic,classic", "eager", "classic;consumer"):
        with pytest.raises(UsageError, match="--group-protocols takes classic and/or consumer"):
            parse_group_protocols(bad)
    with pytest.raises(UsageError, match="scenario kill-leader starts no consumer group"):
        scenario_for_protocol(load_scenario("kill-leader"), "consumer")


def test_compare_rows_per_protocol_side_by_side_with_the_load_average(tmp_path: Path) -> None:
    from clusterctl.chaos import compare

    def row(protocol: str, gap: float, others: float, load: float) -> compare.CompareRun:
        return compare.CompareRun(
            "kraft", "c", "group-coordinator-loss", True, 0.0, 9.1, "metadata", 9.3, 9.5, 0,
            "session.timeout.ms" if protocol == "classic" else "consumer.session.timeout.ms", 45000,
            by="group-protocol", group_protocol=protocol, consume_gap_s=gap, others_gap_s=others,
            gap_bound="broker.session.timeout.ms 9000 (a new coordinator and leaders)", unread=0,
            duplicated_reads=12, load1=load,
        )  # fmt: skip

    path = tmp_path / "r.jsonl"
    for r in (row("classic", 10.0, 2.0, 3.0), row("consumer", 9.8, 0.4, 3.5), row("classic", 12.0, 4.0, 5.0)):
        compare.append_run(path, r)
    runs = compare.load_runs(path, "group-coordinator-loss")
    summary = compare.summarize(runs, protocols=["classic", "consumer"])
    assert [(s.group_protocol, s.mode, s.runs, s.unread_total) for s in summary] == [
        ("classic", "kraft", 2, 0), ("consumer", "kraft", 1, 0)]  # fmt: skip
    labels, table = compare.side_by_side(summary)
    assert labels == ["classic", "consumer"]
    rows = {r["metric"]: r for r in table}
    assert rows["consume gap s"] == {"metric": "consume gap s", "classic": "11.00 (10.00-12.00)",
                                     "consumer": "9.80 (9.80-9.80)"}  # fmt: skip
    assert rows["dead member noticed after"]["consumer"] == "consumer.session.timeout.ms=45000"
    unread = rows["acknowledged records unread by the group"]
    assert (unread["classic"], unread["consumer"]) == (0, 0)
    assert rows["load average (1 min) at run end"]["classic"] == "4.00 (3.00-5.00)"
    assert compare.summarize(runs) == []  # group rows are not a mode comparison's


def test_consumer_settings_per_group_protocol() -> None:
    from clusterctl.errors import UsageError
    from clusterctl.kafka.settings import consumer_config

    classic = consumer_config("127.0.0.1:9092", "g")
    assert classic["session.timeout.ms"] == 6000 and "group.protocol" not in classic
    consumer = consumer_config("127.0.0.1:9092", "g", group_protocol="consumer")
    assert consumer["group.protocol"] == "consumer"
    assert not {"session.timeout.ms", "heartbeat.interval.ms"} & set(consumer)  # librdkafka refuses them there
    with pytest.raises(UsageError, match="--group-protocol must be classic or consumer"):
        consumer_config("127.0.0.1:9092", "g", group_protocol="eager")


def test_a_member_commits_only_what_it_logged() -> None:
    import argparse

    from clusterctl.chaos.group_member import member_config

    args = argparse.Namespace(bootstrap="127.0.0.1:9092", group="g", protocol="classic", member=2,
                              commit_interval_ms=500, session_timeout_ms=None)  # fmt: skip
    conf = member_config(args)
    assert (conf["enable.auto.commit"], conf["enable.auto.offset.store"]) == (True, False)
    assert (conf["session.timeout.ms"], conf["heartbeat.interval.ms"], conf["client.id"]) == (
        45000,
        3000,
        "drill-member-2",
    )
    args.protocol, args.session_timeout_ms = "consumer", 50000  # the group's setting, broker side
    conf = member_config(args)
    assert conf["group.protocol"] == "consumer" and "session.timeout.ms" not in conf


def test_the_consumer_protocol_is_refused_before_any_work_where_kafka_lacks_it() -> None:
    from clusterctl.chaos.compare_groups import scenario_for_protocol
    from clusterctl.chaos.runner import Runner
    from clusterctl.chaos.scenario import load_scenario
    from clusterctl.errors import UsageError
    from clusterctl.spec.model import parse_spec

    sc = scenario_for_protocol(load_scenario("group-member-crash"), "consumer")
    zk = parse_spec({"name": "lab", "profile": "offline", "kafka_manager": {"enabled": False}})
    with pytest.raises(UsageError, match=r"consumer protocol \(KIP-848\), generally available from Kafka 4.0 in KRaft"):
        Runner(zk, sc)._group_preflight(sc.parsed_steps())
    old = parse_spec({"name": "lab", "profile": "offline", "kafka": {"mode": "kraft", "version": "3.9.2"}})
    with pytest.raises(UsageError, match=r"Kafka 3\.9\.2"):
        Runner(old, sc)._group_preflight(sc.parsed_steps())
    four = parse_spec({"name": "lab", "profile": "offline", "kafka": {"mode": "kraft", "version": "4.4.0"}})
    Runner(four, sc)._group_preflight(sc.parsed_steps())  # nothing refused
    classic = load_scenario("group-member-crash")
    Runner(zk, classic)._group_preflight(classic.parsed_steps())  # the classic protocol runs anywhere


def test_each_gap_names_what_bounds_it() -> None:
    from types import SimpleNamespace

    from clusterctl.chaos.group_steps import StartGroup
    from clusterctl.chaos.runner import Runner
    from clusterctl.chaos.scenario import load_scenario
    from clusterctl.spec.model import parse_spec

    spec = parse_spec({"name": "lab", "profile": "offline", "kafka": {"mode": "kraft", "version": "4.4.0"}})
    runner = Runner(spec, load_scenario("group-coordinator-loss"))
    calm, gave_up = SimpleNamespace(members_revoked=0), SimpleNamespace(members_revoked=3)
    runner.group_args, runner.group_session = StartGroup(protocol="classic"), ("session.timeout.ms", 6000)
    assert runner._bound("kill-member", calm) == "session.timeout.ms 6000 (client) + a rebalance of every member"
    assert runner._bound("kill-coordinator", calm) == (
        "the client finding the new leaders (a metadata refresh); new leaders after broker.session.timeout.ms 9000, "
        "in the write gap"
    )
    assert str(runner._bound("kill-coordinator", gave_up)).startswith(
        "session.timeout.ms 6000: members gave up their partitions without a coordinator; the new one "
        "(broker.session.timeout.ms 9000)"
    )
    runner.group_args = StartGroup(protocol="consumer")
    runner.group_session = ("group.consumer.session.timeout.ms", 45000)
    assert runner._bound("kill-member", calm) == "group.consumer.session.timeout.ms 45000 (broker)"
    assert runner._bound("pause-broker", calm) is None
