"""The consumer-group drills on real Kafka 4.x from Maven Central (the newest built here), KRaft: one controller and
three brokers, shared by the module (a free subnet and free host ports).

- "group-member-crash" with the consumer protocol (KIP-848): a member SIGKILLed, its partitions stop until the group's
  consumer.session.timeout.ms (45 s) has passed, then move to the others while they keep theirs (no member loses a
  partition: no stop-the-world); every acknowledged record read at least once.
- "group-coordinator-loss" with both protocols (`scenario compare --group-protocols classic,consumer --repeat 1`): the
  coordinator's broker SIGKILLed; each run reads every acknowledged record and loses none. The partitions that broker
  led take no writes until their new leaders (broker.session.timeout.ms: the write gap); the consume gap counts only
  time with a record waiting, and stays below that session timeout.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _runtime_helpers import cli, release, render, up_json, write_kraft_spec

from clusterctl.images import build as images
from clusterctl.images import kafka_maven
from clusterctl.spec.model import load_spec

pytestmark = [pytest.mark.real_kafka, pytest.mark.docker]


@pytest.fixture(scope="module")
def kafka4(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    built = {r.target: r for r in images.build_images(["kafka"], kafka_version=kafka_maven.NEWEST_KAFKA_LINE)}
    version = built["kafka"].image.rpartition(":")[2]
    assert version.startswith("4."), version
    work = tmp_path_factory.mktemp("group-drills")
    spec_path = write_kraft_spec(work, f"ctlgrp-{uuid.uuid4().hex[:6]}", version, controllers=1)
    render(spec_path)
    try:
        up_json(spec_path, timeout=300)
        yield spec_path
    finally:
        release(spec_path)


def _compare(spec_path: Path, scenario: str, protocols: str) -> Any:
    results = spec_path.parent / f"{scenario}.jsonl"
    res = cli(spec_path, "scenario", "compare", scenario, "--group-protocols", protocols, "--repeat", "1",
              "--results", str(results), "--report-dir", str(spec_path.parent / "reports"), "--json",
              timeout=900)  # fmt: skip
    assert res.returncode == 0, f"{res.stdout[-3000:]} / {res.stderr[-3000:]}"
    return json.loads(res.stdout)


def _report(row: Any) -> Any:
    return json.loads(Path(str(row["report"])).with_suffix(".json").read_text())


def test_group_member_crash_with_the_consumer_protocol_moves_only_its_partitions(kafka4: Path) -> None:
    out = _compare(kafka4, "group-member-crash", "consumer")
    (row,) = out["runs"]
    assert row["ok"] and row["lost"] == 0 and row["unread"] == 0, row
    assert (row["bounding_setting"], row["bounding_ms"]) == ("consumer.session.timeout.ms", 45000)
    # the dead member's partitions wait for its session to expire on the broker, then move
    assert 40 <= row["consume_gap_s"] <= 45 + 20, row
    assert str(row["gap_bound"]).startswith("consumer.session.timeout.ms 45000"), row
    group = _report(row)["group"]
    (gap,) = group["gaps"]
    assert gap["members_revoked"] == 0, gap  # the survivors kept what they had: nothing stopped but member 1's
    assert gap["others_gap_s"] is not None and gap["others_gap_s"] < 5, gap
    assert gap["stalled_partitions"] == 2 and gap["member_before"] == 1, gap  # 6 partitions over 3 members
    print(f"\ngroup-member-crash, consumer protocol: consume gap {row['consume_gap_s']} s, others' gap "
          f"{gap['others_gap_s']} s, load {row['load1']}")  # fmt: skip


def test_group_coordinator_loss_with_both_protocols_reads_every_acknowledged_record(kafka4: Path) -> None:
    out = _compare(kafka4, "group-coordinator-loss", "classic,consumer")
    runs = out["runs"]
    assert [r["group_protocol"] for r in runs] == ["classic", "consumer"]
    session = load_spec(kafka4).kraft.broker_session_timeout_ms / 1000
    for row in runs:
        assert row["ok"] and row["lost"] == 0 and row["unread"] == 0 and row["error"] is None, row
        assert row["consume_gap_s"] is not None and row["consume_gap_s"] < session, row
        assert row["write_gap_s"] is not None and row["write_gap_s"] >= session - 2, row  # the new leaders' wait
        assert f"broker.session.timeout.ms {int(session * 1000)}, in the write gap" in str(row["gap_bound"]), row
        fault = _report(row)["faults"][0]
        assert fault["action"] == "kill-coordinator" and fault["broker"] is not None, fault
        print(f"\ngroup-coordinator-loss, {row['group_protocol']}: consume gap {row['consume_gap_s']} s, others' "
              f"gap {row['others_gap_s']} s, write gap {row['write_gap_s']} s, load {row['load1']}")  # fmt: skip
    table = {s["group_protocol"]: s for s in out["group_protocols"]}
    assert set(table) == {"classic", "consumer"} and all(s["unread_total"] == 0 for s in table.values())
