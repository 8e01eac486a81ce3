"""Failover metrics from constructed timelines (the observer's analysis, no cluster needed)."""

from __future__ import annotations

from clusterctl.chaos.observer import Event, Marker, PartitionSample, Timeline, analyze

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


def test_tansu_leader_note_keeps_the_metadata_id() -> None:
    """tansu reports node id 111; the note names it (and the spec's broker), samples carry 111."""
    tl = Timeline(T0 - 1, T0 + 5, ["t"])
    tl.markers = [Marker(T0, "kill-leader", "broker 1", note="leader of t-0 was broker 111 (the spec's broker 1)")]
    tl.partitions = [PartitionSample(T0 - 0.5, "t", 0, 111, [111], [111])]
    (m,) = analyze(tl)
    assert m.broker == 111 and m.partitions[0].led_by_target is True
