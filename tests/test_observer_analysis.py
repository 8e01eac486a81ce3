"""Failover metrics from constructed timelines (the observer's analysis, no cluster needed)."""

from __future__ import annotations

from typing import Any

from clusterctl.chaos.analysis import analyze
from clusterctl.chaos.timeline import Event, Marker, PartitionSample, Timeline

T0 = 1_000.0


def _sample(dt: float, p: int, leader: int, isr: list[int]) -> PartitionSample:
    return PartitionSample(T0 + dt, "drill", p, leader, [1, 2, 3], isr)


def test_kill_leader_metrics() -> None:
    tl = Timeline(T0 - 5, T0 + 30, ["drill"])
    tl.markers = [
        Marker(T0, "kill-leader", "broker 2", note="leader of drill-0 was broker 2"),
        Marker(T0 + 20, "start-broker", "broker 2", heal=True),
    ]
    tl.partitions = [
        _sample(-1, 0, 2, [1, 2, 3]),  # led by the victim
        _sample(-1, 1, 3, [1, 2, 3]),  # only a follower there
        _sample(0.4, 0, -1, [1, 3]),  # Leader: -1 while the controller elects
        _sample(0.4, 1, 3, [1, 3]),
        _sample(1.2, 0, 1, [1, 3]),  # new leader
        _sample(22.5, 0, 1, [1, 3, 2]),  # back in the ISR after the restart
        _sample(23.0, 1, 3, [1, 3, 2]),
    ]
    tl.events = [
        Event(T0 + 0.3, "zk-watch", "brokers", "/brokers/ids", "ids 1,3", [1, 3]),
        Event(T0 + 0.35, "metadata", "controller", "cluster", "controller 1", 1),
    ]
    (m,) = analyze(tl)
    assert (m.broker, m.zk, m.detected_s, m.detected_by, m.controller_change_s) == (2, None, 0.3, "zk-watch", 0.35)
    assert m.heal_t == T0 + 20
    p0, p1 = m.partitions
    assert (p0.led_by_target, p0.new_leader, p0.time_to_new_leader_s, p0.unavailable_s) == (True, 1, 1.2, 1.2)
    assert (p0.isr_shrunk_s, p0.isr_full_s) == (0.4, 2.5)
    assert (p1.led_by_target, p1.new_leader, p1.time_to_new_leader_s) == (False, None, None)
    assert (p1.isr_shrunk_s, p1.isr_full_s) == (0.4, 3.0)


def test_tansu_metadata_ids_become_the_spec_broker() -> None:
    """tansu reports node id 111; the observer records the spec's broker id, so samples match fault targets."""
    from types import SimpleNamespace as NS

    from clusterctl.chaos.observer import Observer
    from clusterctl.spec.model import ClusterSpec

    spec = ClusterSpec.model_validate(
        {
            "name": "dev",
            "profile": "offline",
            "kafka": {"engine": "tansu", "brokers": 1, "defaults": {"replication_factor": 1, "min_insync_replicas": 1}},
            "kafka_manager": {"enabled": False},
        }
    )
    obs = Observer(spec, None, ["t"], watch_zk=False)
    part = NS(leader=111, replicas=[111], isrs=[111])
    leaderless = NS(leader=-1, replicas=[111], isrs=[])
    obs._record_metadata(NS(brokers={111: None}, controller_id=111, topics={"t": NS(error=None, partitions={0: part})}))
    obs._record_metadata(NS(brokers={}, controller_id=-1, topics={"t": NS(error=None, partitions={0: leaderless})}))
    samples = obs.timeline.partitions
    assert [(s.leader, s.replicas, s.isr) for s in samples] == [(1, [1], [1]), (-1, [1], [])]
    brokers = [e.value for e in obs.timeline.events if e.kind == "brokers"]
    controllers = [e.value for e in obs.timeline.events if e.kind == "controller"]
    assert brokers == [[1], []] and controllers == [1, -1]


def test_a_leader_change_across_a_metadata_gap_is_still_a_leader_event() -> None:
    """Metadata silent while a killed leader's partition got its new leader (a loaded machine stalls for seconds):
    after the gap every partition is recorded afresh, and the change across it is still a `leader` event, which
    the timeline, the console and the drills' leader checks read."""
    from types import SimpleNamespace as NS

    from clusterctl.chaos.observer import Observer
    from clusterctl.spec.model import ClusterSpec

    spec = ClusterSpec.model_validate({"name": "dev", "profile": "offline", "kafka_manager": {"enabled": False}})
    obs = Observer(spec, None, ["t"], watch_zk=False)

    def metadata(leader: int, isr: list[int]) -> Any:
        parts = {0: NS(leader=leader, replicas=[2, 1, 3], isrs=isr), 1: NS(leader=3, replicas=[3, 2, 1], isrs=isr)}
        return NS(brokers={1: None, 3: None}, controller_id=3, topics={"t": NS(error=None, partitions=parts)})

    obs._record_metadata(metadata(2, [1, 2, 3]))
    obs._record_metadata(metadata(-1, [1, 3]))
    obs._open_gap("metadata request failed")
    obs._close_gap()
    obs._record_metadata(metadata(1, [1, 3]))
    events = [(e.kind, e.subject, e.detail) for e in obs.timeline.events if e.kind in ("partition", "leader", "isr")]
    assert events[-3:] == [
        ("partition", "t-0", "leader 1 replicas 2,1,3 isr 1,3"),
        ("leader", "t-0", "leader -1 -> 1"),
        ("partition", "t-1", "leader 3 replicas 3,2,1 isr 1,3"),
    ], events
    assert ("leader", "t-0", "leader 2 -> -1") in events
    obs._record_metadata(metadata(1, [1, 3]))  # nothing new once recorded afresh
    assert len([e for e in obs.timeline.events if e.kind in ("partition", "leader", "isr")]) == len(events)


def test_write_gap_is_the_longest_wait_for_an_ack_after_the_fault() -> None:
    tl = Timeline(T0 - 5, T0 + 30, ["drill"])
    tl.markers = [Marker(T0, "pause-broker", "broker 1"), Marker(T0 + 5, "unpause", "broker 1", heal=True)]
    tl.partitions = [_sample(-1, 0, 1, [1, 2, 3]), _sample(-1, 1, 2, [1, 2, 3]), _sample(-1, 2, 3, [1, 2, 3])]
    acks = {
        ("drill", 0): [T0 - 0.3, T0 - 0.01, T0 + 5.2, T0 + 5.25],  # stalled: 5.2 s from the fault
        ("drill", 1): [T0 - 0.2, T0 + 0.1, T0 + 0.2, T0 + 0.9, T0 + 1.0],  # longest wait 0.7 s, after the fault
        # partition 2: no write acknowledged after the fault
        ("drill", 2): [T0 - 0.2],
    }
    tl.events = [Event(T0 + 1.05, "metadata", "error", "metadata", "metadata request failed: timed out")]
    (m,) = analyze(tl, acks)
    assert (m.detected_s, m.detected_by) == (1.05, "metadata (no answer)")
    assert [p.write_gap_s for p in m.partitions] == [5.2, 0.7, None]
    assert m.partitions[0].led_by_target and not m.partitions[1].led_by_target
    (m,) = analyze(tl)  # no ledger: no gaps
    assert [p.write_gap_s for p in m.partitions] == [None, None, None]
    # acks only after the fault (the load started later): not a gap the fault caused
    (m,) = analyze(tl, {("drill", 0): [T0 + 1.0, T0 + 1.1]})
    assert m.partitions[0].write_gap_s is None


def test_a_killed_controller_is_neither_a_broker_nor_a_zookeeper_node() -> None:
    """A KRaft voter's marker ('controller 3') carries no ZooKeeper id; its detection comes from the quorum."""
    tl = Timeline(T0 - 5, T0 + 10, ["drill"])
    tl.markers = [Marker(T0, "kill-controller", "controller 3")]
    tl.events = [Event(T0 + 1.5, "quorum", "controller", "quorum", "leader 1", 1)]
    (m,) = analyze(tl)
    assert (m.broker, m.zk, m.detected_s, m.detected_by) == (None, None, 1.5, "quorum")


def test_isr_shrink_seen_in_zookeeper_counts_when_metadata_lags() -> None:
    """A delayed follower that is also the controller holds back its own UpdateMetadata: ZooKeeper's state znode
    shows the shrink while every broker's metadata still lists the follower; the shrink time is ZooKeeper's."""
    tl = Timeline(T0 - 5, T0 + 30, ["drill"])
    tl.markers = [Marker(T0, "delay", "broker 2"), Marker(T0 + 16, "heal-network", "broker 2", heal=True)]
    tl.partitions = [_sample(-1, 0, 1, [1, 2, 3])]
    tl.events = [
        Event(T0 + 11.0, "zk-watch", "partition-state", "drill-0", "leader 1 isr 1,3", {"leader": 1, "isr": [1, 3]}),
        Event(
            T0 + 17.0, "zk-watch", "partition-state", "drill-0", "leader 1 isr 1,2,3", {"leader": 1, "isr": [1, 2, 3]}
        ),
        # another topic's znode never counts for this one
        Event(T0 + 5.0, "zk-watch", "partition-state", "drill-00", "leader 1 isr 1", {"leader": 1, "isr": [1]}),
    ]
    (m,) = analyze(tl)
    (p0,) = m.partitions
    assert p0.isr_shrunk_s == 11.0
    # metadata first, when it sees the shrink before ZooKeeper's watch fires
    tl.partitions.append(_sample(10.5, 0, 1, [1, 3]))
    (m,) = analyze(tl)
    assert m.partitions[0].isr_shrunk_s == 10.5


def test_a_zookeeper_fault_still_has_each_partitions_write_gap() -> None:
    """A fault on a ZooKeeper node names no broker: no leader or ISR times, but every partition's write gap."""
    tl = Timeline(T0 - 5, T0 + 30, ["drill"])
    tl.markers = [Marker(T0, "delay", "zk2"), Marker(T0 + 20, "heal-network", "zk2", heal=True)]
    tl.partitions = [_sample(-1, 0, 1, [1, 2, 3]), _sample(-1, 1, 2, [1, 2, 3])]
    acks = {("drill", 0): [T0 - 0.5, T0 + 0.2, T0 + 3.2], ("drill", 1): [T0 - 0.1, T0 + 0.1]}
    (m,) = analyze(tl, acks)
    assert (m.broker, m.zk) == (None, 2)
    p0, p1 = m.partitions
    assert (p0.led_by_target, p0.isr_shrunk_s, p0.new_leader) == (False, None, None)
    assert (p0.write_gap_s, p1.write_gap_s) == (3.0, 0.1)


def _overlapping(second_after: float) -> tuple[Timeline, dict[tuple[str, int], list[float]]]:
    """Issue 51's drill: broker 2 killed, broker 3 `second_after` s later (RF 3); partition 2 (led by 2) moves to 1
    after 6 s and partition 1 (led by 3) after 6.5 s; partition 2 waits 17 s for an ack; both healed at +30 s."""
    tl = Timeline(T0 - 5, T0 + 40, ["drill"])
    tl.markers = [
        Marker(T0, "kill-broker", "broker 2"),
        Marker(T0 + second_after, "kill-broker", "broker 3"),
        Marker(T0 + 30, "start-broker", "broker 2", heal=True),
        Marker(T0 + 30, "start-broker", "broker 3", heal=True),
    ]
    tl.partitions = [
        _sample(-1, 0, 1, [1, 2, 3]),
        _sample(-1, 1, 3, [1, 2, 3]),
        _sample(-1, 2, 2, [1, 2, 3]),
        _sample(6.0, 2, 1, [1]),
        _sample(second_after + 6.5, 1, 1, [1]),
    ]
    acks = {("drill", 2): [T0 - 1.0, T0 - 0.1, T0 + 17.0, T0 + 17.1], ("drill", 0): [T0 - 0.5, T0 + 0.2, T0 + 0.4]}
    return tl, acks


def test_overlapping_faults_each_see_the_changes_in_their_windows_and_say_who_else_could() -> None:
    tl, acks = _overlapping(0.6)
    first, second = analyze(tl, acks)
    p2 = next(p for p in first.partitions if p.partition == 2)
    assert (p2.leader_before, p2.led_by_target, p2.new_leader, p2.time_to_new_leader_s) == (2, True, 1, 6.0)
    assert p2.write_gap_s == 17.0 and p2.also == ["kill-broker broker 3"]
    p1 = next(p for p in second.partitions if p.partition == 1)
    assert (p1.leader_before, p1.led_by_target, p1.new_leader, p1.time_to_new_leader_s) == (3, True, 1, 6.5)
    p2b = next(p for p in second.partitions if p.partition == 2)
    assert (p2b.leader_before, p2b.led_by_target) == (2, False)  # broker 3 did not lead it, but its gap is there
    assert p2b.write_gap_s == 16.4 and p2b.also == ["kill-broker broker 2"]
    assert first.overlaps == ["kill-broker broker 3"] and second.overlaps == ["kill-broker broker 2"]
    assert first.window_end == second.window_end == tl.ended


def test_faults_one_after_the_other_keep_their_own_windows() -> None:
    tl = Timeline(T0 - 5, T0 + 60, ["drill"])
    tl.markers = [
        Marker(T0, "kill-broker", "broker 2"),
        Marker(T0 + 10, "start-broker", "broker 2", heal=True),
        Marker(T0 + 20, "kill-broker", "broker 3"),
        Marker(T0 + 30, "start-broker", "broker 3", heal=True),
    ]
    tl.partitions = [_sample(-1, 0, 2, [1, 2, 3]), _sample(2.0, 0, 1, [1, 3]), _sample(25.0, 0, 3, [1, 2, 3])]
    acks = {("drill", 0): [T0 - 1.0, T0 + 2.5, T0 + 19.0, T0 + 26.0]}
    first, second = analyze(tl, acks)
    assert first.window_end == T0 + 20 and first.overlaps == [] and second.overlaps == []
    (p,) = first.partitions
    assert (p.new_leader, p.time_to_new_leader_s, p.write_gap_s, p.also) == (1, 2.0, 16.5, [])
    (q,) = second.partitions
    assert (q.leader_before, q.led_by_target, q.write_gap_s, q.also) == (1, False, 6.0, [])
