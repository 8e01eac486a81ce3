"""Repeat statistics, bounding settings, negative-control verdicts and report details, on constructed data."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace as NS
from typing import Any

import pytest

from clusterctl.chaos import stats
from clusterctl.chaos.analysis import FaultMetrics, PartitionFailover
from clusterctl.chaos.bounds import bounding_setting, explain, settings_of
from clusterctl.chaos.ledger import LedgerEntry, encode_value, offset_ranges, verify
from clusterctl.chaos.report import render_html, timeline_svg, write_summary_html
from clusterctl.chaos.results import ScenarioResult, StepResult
from clusterctl.chaos.scenario import parse_scenario
from clusterctl.chaos.timeline import Gap, Marker, PartitionSample, Timeline
from clusterctl.errors import SpecError
from clusterctl.spec.model import parse_spec

T0 = 1_000.0
KAFKA = parse_spec({"name": "lab", "profile": "offline", "kafka_manager": {"enabled": False}})
SETTINGS = settings_of(KAFKA)


def _fault(new_leader: float | None, gap: float | None, detected: float | None = 6.1) -> FaultMetrics:
    parts = [
        PartitionFailover("t", 0, 2, True, 1 if new_leader else None, new_leader, 6.0, 3.0, new_leader, gap),
        PartitionFailover("t", 1, 3, False, None, None, 6.0, 3.0, None, None if gap is None else gap - 1),
    ]
    return FaultMetrics("kill-leader", "broker 2", T0, 2, None, detected, "zk-watch", 6.2, None, None, T0 + 20, parts)


def _result(ok: bool, lost: int, new_leader: float | None, gap: float | None, report: str) -> Any:
    v = NS(acked=1000, lost_count=lost, duplicated_count=3)
    return NS(ok=ok, verify=v, faults=[_fault(new_leader, gap)], report_html=report, error=None)


def test_percentiles_and_summary_name_the_bounding_setting(tmp_path: Path) -> None:
    assert stats.percentile([1.0], 95) == 1.0
    assert stats.percentile([1.0, 2.0, 3.0, 4.0, 5.0], 50) == 3.0
    assert stats.percentile(list(map(float, range(1, 21))), 95) == pytest.approx(19.05)
    results = [_result(True, 0, 6.0 + i / 10, 7.0 + i / 10, str(tmp_path / f"run-{i:02d}" / "report.html"))
               for i in range(1, 11)]  # fmt: skip
    results.append(_result(False, 0, None, None, str(tmp_path / "run-11" / "report.html")))
    scenario = parse_scenario(Path("scenarios/kill-leader.yaml").read_text(), "kill-leader")
    rep = stats.repeat(lambda i, d: results[i - 1], 11, tmp_path, scenario, SETTINGS)
    assert (len(rep.runs), rep.passed, rep.ok, rep.expect) == (11, 10, False, "no-loss")
    by = {s.metric: s for s in rep.summary}
    assert (by["new_leader_s"].n, by["new_leader_s"].median, by["new_leader_s"].max) == (10, 6.55, 7.0)
    assert by["new_leader_s"].p95 == pytest.approx(6.955)
    assert by["write_gap_s"].max == 8.0 and by["acked"].median == 1000 and by["lost"].max == 0
    assert by["new_leader_s"].bound == "zookeeper.session.timeout.ms 6000"
    assert by["detected_s"].bound == "zookeeper.session.timeout.ms 6000"
    assert rep.runs[-1].new_leader_s is None and rep.runs[0].fault == "kill-leader broker 2"
    page = write_summary_html(rep, tmp_path / "summary.html").read_text()
    assert "10/11 passed" in page and "zookeeper.session.timeout.ms 6000" in page
    assert page.count("<a href='run-") == 11 and "href='run-03/report.html'" in page

    # Ctrl-C stops after the current run: the runs so far are summarized and marked
    def interrupt(i: int, d: Path) -> Any:
        if i == 3:
            raise KeyboardInterrupt
        return results[i - 1]

    rep = stats.repeat(interrupt, 5, tmp_path, scenario, SETTINGS)
    assert rep.interrupted and len(rep.runs) == 2 and not rep.ok


def test_a_run_the_signal_interrupted_ends_the_series_and_is_not_a_failure(tmp_path: Path) -> None:
    """Issue 51: the runner heals and returns an interrupted result (it does not raise): the series stops there,
    the run is INTERRUPTED (not FAIL) and its partial numbers stay out of the statistics."""
    scenario = parse_scenario(Path("scenarios/kill-leader.yaml").read_text(), "kill-leader")
    calls: list[int] = []

    def run_once(i: int, d: Path) -> Any:
        calls.append(i)
        r = _result(i != 2, 0, 6.0 + i, 7.0 + i, str(d / "report.html"))
        r.interrupted = i == 2
        return r

    shown: list[str] = []
    rep = stats.repeat(run_once, 3, tmp_path, scenario, SETTINGS, on_run=lambda r: shown.append(r.verdict))
    assert calls == [1, 2] and shown == ["PASS", "INTERRUPTED"]
    assert rep.interrupted and not rep.ok and rep.passed == 1 and [r.interrupted for r in rep.runs] == [False, True]
    by = {s.metric: s for s in rep.summary}
    assert (by["new_leader_s"].n, by["new_leader_s"].max) == (1, 7.0)  # run 2's 8.0 is not counted
    page = write_summary_html(rep, tmp_path / "summary.html").read_text()
    assert "INTERRUPTED" in page and "FAIL" not in page


def test_main_fault_is_the_one_that_moved_a_leader() -> None:
    """acks1-leader-isolated: the paused follower leads another partition but nothing moves; the kill does."""
    pause = FaultMetrics("pause-follower", "broker 1", T0, 1, None, None, None, None, None, None, T0 + 4,
                         [PartitionFailover("t", 1, 1, True, None, None, 6.0, 3.0, None, 0.02)])  # fmt: skip
    kill = _fault(7.3, 8.9)
    result = NS(ok=True, verify=NS(acked=1000, lost_count=445, duplicated_count=0), faults=[pause, kill],
                report_html="r.html", error=None)  # fmt: skip
    assert stats.main_fault(result) is kill
    row = stats.run_stats(1, result)
    assert (row.fault, row.detected_s, row.new_leader_s, row.write_gap_s) == ("kill-leader broker 2", 6.1, 7.3, 8.9)
    assert stats.main_fault(NS(faults=[pause])) is pause and stats.main_fault(NS(faults=[])) is None
    # unclean-election: the long pause moved the paused broker's own partition, the kill came after it
    long_pause = FaultMetrics("pause-follower", "broker 1", T0, 1, None, 4.9, "zk-watch", None, None, None, T0 + 9,
                              [PartitionFailover("t", 1, 1, True, 3, 5.7, 6.0, 3.0, 5.7, None)])  # fmt: skip
    assert stats.main_fault(NS(faults=[long_pause, kill])) is kill


def test_bounding_settings_per_fault_and_metric() -> None:
    assert SETTINGS == {"zookeeper.session.timeout.ms": 6000, "replica.lag.time.max.ms": 10000}
    default = parse_spec({"name": "lab", "kafka": {"defaults": {"zookeeper_session_timeout_ms": 18000,
                                                                "replica_lag_time_max_ms": 30000}}})  # fmt: skip
    assert explain(15.8, "kill-leader", "new_leader", True, settings_of(default)) == (
        "15.8 ≈ zookeeper.session.timeout.ms 18000"
    )
    # a follower's ISR shrink: whichever of the two comes first
    fast_lag = {"zookeeper.session.timeout.ms": 18000, "replica.lag.time.max.ms": 10000}
    assert bounding_setting("pause-follower", "isr_shrunk", False, fast_lag) == "replica.lag.time.max.ms 10000"
    assert bounding_setting("kill-broker", "write_gap", False, SETTINGS) == "zookeeper.session.timeout.ms 6000"
    assert (
        bounding_setting("stop-broker", "new_leader", True, SETTINGS) == "controlled shutdown (leadership moves first)"
    )
    assert bounding_setting("kill-zk", "detected", False, SETTINGS) is None
    assert settings_of(parse_spec({"name": "t", "profile": "offline", "kafka": {"engine": "tansu", "brokers": 1,
                      "defaults": {"replication_factor": 1, "min_insync_replicas": 1}},
                      "kafka_manager": {"enabled": False}})) == {}  # fmt: skip
    assert explain(None, "kill-leader", "new_leader", True, SETTINGS) == "-"


def test_session_timeout_must_be_what_zookeeper_grants() -> None:
    with pytest.raises(SpecError, match=r"zookeeper_session_timeout_ms=18000 is outside .* \(1000-10000\)"):
        parse_spec({"name": "lab", "zookeeper": {"tick_time_ms": 500},
                    "kafka": {"defaults": {"zookeeper_session_timeout_ms": 18000}}})  # fmt: skip


def test_negative_control_models_and_the_settings_that_allow_loss() -> None:
    acks1 = parse_scenario(Path("scenarios/acks1-leader-isolated.yaml").read_text(), "a")
    unclean = parse_scenario(Path("scenarios/unclean-election.yaml").read_text(), "u")
    assert acks1.expect == unclean.expect == "loss"
    assert [s for s in acks1.loss_settings() if s.startswith("acks=1")]
    assert unclean.topic.configs() == {"min.insync.replicas": "1", "unclean.leader.election.enable": "true"}
    assert [s.split(" ")[0] for s in unclean.loss_settings()] == [
        "unclean.leader.election.enable=true",
        "min.insync.replicas=1",
    ]
    kill = parse_scenario(Path("scenarios/kill-leader.yaml").read_text(), "k")
    assert kill.expect == "no-loss" and kill.loss_settings() == []
    load = next(s.args for s in acks1.parsed_steps() if s.kind == "start_load")
    assert (load.acks, load.idempotent) == ("1", False)
    with pytest.raises(SpecError, match="idempotence needs acks: all"):
        parse_scenario("name: x\nsteps:\n  - start_load: {acks: 1, idempotence: true}\n", "x")
    with pytest.raises(SpecError, match="expect: Input should be 'no-loss' or 'loss'"):
        parse_scenario("name: x\nexpect: maybe\nsteps:\n  - sleep: 1\n", "x")
    heal = parse_scenario("name: x\nsteps:\n  - heal: {wait: false, timeout: 5}\n", "x").parsed_steps()[0].args
    assert (heal.wait, heal.timeout) == (False, 5)


def test_lost_offsets_per_partition() -> None:
    assert offset_ranges([3, 4, 5, 9, 11, 12]) == "3-5,9,11-12" and offset_ranges([]) == ""
    assert offset_ranges([-1, 3, 4]) == "3-4,1 acked without an offset"

    acked = [LedgerEntry("t", 0, o, "p0", encode_value(o), o, T0) for o in range(10)]
    consumed = [NS(topic="t", partition=0, offset=o, key="p0", value=encode_value(o)) for o in (0, 1, 2, 3, 7)]
    v = verify(acked, consumed)
    assert v.lost_count == 5 and v.partitions[0].lost_offsets == "4-6,8-9"


def _timeline(with_errors: bool) -> Timeline:
    tl = Timeline(T0, T0 + 30, ["t"])
    for p in range(3):  # three partitions with the same leader and ISR: their lines coincide
        tl.partitions.append(PartitionSample(T0 + 0.5, "t", p, 1, [1, 2, 3], [1, 2, 3]))
        tl.partitions.append(PartitionSample(T0 + 20, "t", p, 2, [1, 2, 3], [2, 3]))
    tl.gaps = [Gap(T0 + 8, T0 + 14, "metadata", "metadata request failed: timed out")]
    tl.markers = [Marker(T0 + 5, "pause-follower", "broker 2")]
    tl.load = [NS(t=T0 + i / 2, acked=200, errors=3 if with_errors and i == 10 else 0) for i in range(60)]
    return tl


def test_report_plot_polish() -> None:
    quiet = timeline_svg(_timeline(with_errors=False))
    assert "no produce errors" in quiet and "produce errors</" not in quiet
    assert "no answer" in quiet  # the gap is shaded and labelled, not bridged
    noisy = timeline_svg(_timeline(with_errors=True))
    assert "no produce errors" not in noisy
    # every tick label is a whole number (broker ids, ISR sizes, seconds, records/s): no ±0.04 steps
    for svg in (quiet, noisy):
        labels = set(re.findall(r"<!-- ([^<>]*?) -->", svg))
        assert {"1", "2", "3"} <= labels
        assert not [x for x in labels if re.fullmatch(r"[\u2212-]?\d+\.\d+", x)], labels


def test_report_names_the_loss_and_the_setting_that_allowed_it(tmp_path: Path) -> None:

    acked = [LedgerEntry("t", 0, o, "p0", encode_value(o), o, T0) for o in range(6)]
    v = verify(acked, [NS(topic="t", partition=0, offset=o, key="p0", value=encode_value(o)) for o in (0, 1, 2)])
    result = ScenarioResult(
        "unclean-election", None, "lab", "t", True, T0, T0 + 30,
        [StepResult(1, "verify", "verify", True, T0, 1.0, "loss expected and found")],
        faults=[_fault(6.0, 7.0)], verify=v, expect="loss",
        loss_settings=["unclean.leader.election.enable=true (an out-of-sync replica may become leader)"],
        bounds={k: str(x) for k, x in SETTINGS.items()}, timeline=_timeline(False),
    )  # fmt: skip
    page = render_html(result)
    assert "loss expected and found" in page and "3-5" in page
    assert "allowed by: unclean.leader.election.enable=true" in page
    assert "6.0 ≈ zookeeper.session.timeout.ms 6000" in page  # new leader, bounded by the session timeout


def test_an_ack_without_offset_is_read_not_malformed(tmp_path: Path) -> None:
    """An idempotent retry answered as a duplicate is acknowledged with no offset: the ledger keeps it as -1."""
    import json

    from clusterctl.chaos.ledger import read_ledger

    path = tmp_path / "ledger.jsonl"
    rows = [
        {"ledger": 1, "topic": "t", "started": T0},
        {"topic": "t", "partition": 0, "offset": 7, "key": "p0", "value": encode_value(0), "seq": 0, "ts": T0},
        {"topic": "t", "partition": 0, "offset": None, "key": "p0", "value": encode_value(3), "seq": 3, "ts": T0},
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))  # fmt: skip
    entries = read_ledger(path).entries
    assert [e.offset for e in entries] == [7, -1]
    v = verify(entries, [NS(topic="t", partition=0, offset=8, key="p0", value=encode_value(3))])
    assert v.lost_count == 1 and v.moved_count == 0 and v.partitions[0].lost_offsets == "7"


def test_report_says_fault_not_applied_apart_from_a_failure() -> None:
    """A fault the engine refused is its own verdict, with the freeze retries seen; not a failed drill."""
    from clusterctl.chaos.results import verdict_of

    assert [verdict_of(False, False, True), verdict_of(False, False, False), verdict_of(False, True, True)] == [
        "FAULT NOT APPLIED", "FAIL", "INTERRUPTED",
    ]  # fmt: skip
    error = "step 3 (fault pause-followers) fault not applied: pause broker 3 (kafka3) not applied: unable to freeze"
    result = ScenarioResult(
        "acks1-leader-isolated", None, "lab", "t", False, T0, T0 + 30,
        [StepResult(3, "fault", "fault pause-followers", False, T0, 15.0, error)],
        error=error, timeline=_timeline(False), fault_not_applied=True, freeze_retries=7, verdict="FAULT NOT APPLIED",
    )  # fmt: skip
    page = render_html(result)
    assert '<span class="FAULT-NOT-APPLIED">FAULT NOT APPLIED</span>' in page and ">FAIL<" not in page
    assert "freeze retries: 7" in page and "nothing was tested" in page


def test_grey_network_faults_are_bounded_by_the_replica_lag() -> None:
    """A delayed or lossy broker stays registered: only the replica lag bounds a follower's ISR shrink and the write
    gap of a partition it follows; the write gap of a partition it leads has no bounding setting."""
    lag = "replica.lag.time.max.ms 10000"
    for action in ("delay", "rate", "loss"):
        assert bounding_setting(action, "isr_shrunk", False, SETTINGS) == lag
        assert bounding_setting(action, "write_gap", False, SETTINGS) == lag
        assert bounding_setting(action, "write_gap", True, SETTINGS) is None
        assert bounding_setting(action, "new_leader", True, SETTINGS) is None
    assert explain(13.2, "delay", "isr_shrunk", False, SETTINGS) == f"13.2 ≈ {lag}"


def test_run_stats_give_the_first_isr_shrink_of_the_target() -> None:
    parts = [
        PartitionFailover("t", 0, 1, False, None, None, 14.1, 2.0, None, 13.9),
        PartitionFailover("t", 1, 2, True, None, None, None, None, None, 0.4),
        PartitionFailover("t", 2, 1, False, None, None, 12.6, 2.0, None, 12.0),
    ]
    delay = FaultMetrics("delay", "broker 3", T0, 3, None, None, None, None, None, None, T0 + 20, parts)
    row = stats.run_stats(1, NS(ok=True, verify=NS(acked=9000, lost_count=0, duplicated_count=0), faults=[delay],
                                report_html=None, error=None))  # fmt: skip
    assert (row.fault, row.isr_shrunk_s, row.write_gap_s, row.new_leader_s) == ("delay broker 3", 12.6, 13.9, None)
    scenario = parse_scenario(Path("scenarios/slow-follower.yaml").read_text(), "slow-follower")
    rep = stats.repeat(lambda i, d: NS(ok=True, verify=None, faults=[delay], report_html=None, error=None), 2,
                       Path("."), scenario, SETTINGS)  # fmt: skip
    by = {s.metric: s for s in rep.summary}
    assert (by["isr_shrunk_s"].n, by["isr_shrunk_s"].max, by["isr_shrunk_s"].bound) == (
        2,
        12.6,
        "replica.lag.time.max.ms 10000",
    )
