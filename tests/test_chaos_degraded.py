"""Grey network faults as drills on the shared real 3-broker Apache Kafka cluster (the session's Kafka).

`slow-follower`, `lossy-leader` and `slow-zookeeper` run as a series through the real CLI
(`scenario run NAME --repeat N`, N = $DEGRADED_RUNS, 1 in `make test`, where they run in its serial phase and every
CI run adds one to the series): every run loses nothing, and the numbers a user reads (ISR shrink time next to
replica.lag.time.max.ms, the write gap, duplicates) stay where Kafka's settings put them.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
from _runtime_helpers import cli
from conftest import RealKafka

pytestmark = [pytest.mark.real_kafka, pytest.mark.docker]

RUNS = int(os.environ.get("DEGRADED_RUNS", "1"))
DELAY_S = 12.0  # scenarios/slow-follower.yaml


def run_repeated(real_kafka: RealKafka, report_dir: Path, scenario: str) -> dict[str, Any]:
    """`scenario run NAME --repeat RUNS --json`: exit 0, every run passed, nothing acknowledged lost."""
    res = cli(real_kafka.spec_path, "scenario", "run", scenario, "--repeat", str(RUNS), "--report-dir",
              str(report_dir), "--json", timeout=900)  # fmt: skip
    assert res.returncode == 0, f"{scenario}: {res.stdout[-3000:]} / {res.stderr[-3000:]}"
    data: dict[str, Any] = json.loads(res.stdout)
    assert data["scenario"] == scenario and data["passed"] == RUNS and len(data["runs"]) == RUNS, data
    assert all(r["ok"] and r["lost"] == 0 and r["acked"] > 5000 for r in data["runs"]), data["runs"]
    return data


def test_slow_follower_leaves_the_isr_after_the_replica_lag(real_kafka: RealKafka, tmp_path: Path) -> None:
    """A follower whose fetches reach its leader 12 s late leaves the ISR once replica.lag.time.max.ms has passed
    (the leader checks every half of it); acks=all writes wait for its fetches until then, go on without it after,
    and none is lost."""
    lag_s = real_kafka.spec.kafka.defaults.replica_lag_time_max_ms / 1000
    data = run_repeated(real_kafka, tmp_path, "slow-follower")
    shrunk = [r["isr_shrunk_s"] for r in data["runs"]]
    gaps = [r["write_gap_s"] for r in data["runs"]]
    assert all(re.fullmatch(r"delay kafka[123]", r["fault"]) for r in data["runs"]), data["runs"]
    # not before the lag has passed, and within the scenario's own wait (45 s). Not sooner in theory (one delayed
    # fetch after the lag plus the next check, ~29 s): the queue that holds the follower's fetches 12 s also holds
    # its TCP acknowledgements, so the leader's side of the connection backs off its retransmissions and fetches
    # come further apart; measured here 11.4-44.5 s over nine runs
    assert all(s is not None and lag_s * 0.95 <= s <= 45 for s in shrunk), shrunk
    summary = {s["metric"]: s for s in data["summary"]}
    assert summary["isr_shrunk_s"]["bound"] == f"replica.lag.time.max.ms {int(lag_s * 1000)}"
    # acks=all did wait on the slow follower (its next fetch, 12 s late) and never longer than the scenario's bound:
    # one delayed round trip most runs (10.2-16.5 s), 38.8 s once in CI when the leader's answer took several
    assert all(g is not None and 0.8 * DELAY_S <= g <= 60 for g in gaps), gaps
    print(f"\nslow-follower x{RUNS}: acked {[r['acked'] for r in data['runs']]}, lost 0, ISR shrunk after {shrunk} s "
          f"(replica.lag.time.max.ms {lag_s * 1000:.0f}), write gap {gaps} s")  # fmt: skip


def test_lossy_leader_loses_duplicates_and_reorders_nothing(real_kafka: RealKafka, tmp_path: Path) -> None:
    """8 % of the leader's packets dropped for 30 s under idempotent acks=all load: 0 lost, 0 duplicated, 0 reordered
    (a run passes only with no reorder; the scenario's verify allows no duplicate)."""
    data = run_repeated(real_kafka, tmp_path, "lossy-leader")
    runs = data["runs"]
    assert all(r["duplicated"] == 0 and re.fullmatch(r"loss kafka[123]", r["fault"]) for r in runs), runs
    gaps = [r["write_gap_s"] for r in data["runs"]]
    assert all(g is not None and g <= 30 for g in gaps), gaps
    print(f"\nlossy-leader x{RUNS}: acked {[r['acked'] for r in data['runs']]}, lost 0, duplicated 0, reordered 0, "
          f"write gap {gaps} s")  # fmt: skip


def test_slow_zookeeper_keeps_sessions_and_loses_nothing(real_kafka: RealKafka, tmp_path: Path) -> None:
    """The ZooKeeper leader's packets 1.5 s late for 30 s: no session expires (every broker stays registered), the
    quorum holds, produce traffic never waits on ZooKeeper: 0 lost."""
    data = run_repeated(real_kafka, tmp_path, "slow-zookeeper")
    runs = data["runs"]
    assert all(re.fullmatch(r"delay zk[123]", r["fault"]) for r in runs), runs
    gaps = [r["write_gap_s"] for r in runs]
    assert all(g is not None and g <= 30 for g in gaps), gaps
    print(f"\nslow-zookeeper x{RUNS}: acked {[r['acked'] for r in runs]}, lost 0, write gap {gaps} s")
