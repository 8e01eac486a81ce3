"""Issue 51's acceptance on real Apache Kafka: SIGTERM to `scenario run kill-leader --repeat 3` during run 2 ends the
whole series within 30 s (exit 143), run 2 healed and reported interrupted, nothing paused or partitioned afterwards.

The scenario is a short kill-leader written here (the shipped one's waits for a full ISR take a minute a run): the
leader of partition 0 killed under acks=all load, the new leader awaited, healed, then a broker paused; run 2 is
interrupted while that broker is paused. Runs on the session's shared cluster (the real_kafka fixture).
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import docker
import pytest
from _runtime_helpers import CLI
from conftest import RealKafka

pytestmark = [pytest.mark.real_kafka, pytest.mark.docker]

SCENARIO = """\
name: kill-leader
description: a short kill-leader (issue 51's signal test), then a paused broker
requires: kafka
topic: {partitions: 3, replication_factor: 3, min_insync_replicas: 2}
steps:
  - create_topic: {}
  - start_load: {rate: 200}
  - sleep: 1
  - fault: {action: kill-leader, partition: 0}
  - wait_for: {leader_changed: {partition: 0}, timeout: 60}
  - heal: {}
  - fault: {action: pause-broker, broker: 1, for: 5}
  - sleep: 5
  - stop_load: {}
  - verify: {}
"""


def test_sigterm_in_run_2_of_3_ends_the_series_healed(real_kafka: RealKafka, tmp_path: Path) -> None:
    scenario = tmp_path / "kill-leader.yaml"
    scenario.write_text(SCENARIO)
    reports = tmp_path / "reports"
    engine = docker.from_env()
    names = [real_kafka.spec.topology.broker_container(b) for b in real_kafka.spec.topology.broker_ids]
    names += [real_kafka.spec.topology.zk_container(z) for z in real_kafka.spec.topology.zk_ids]
    broker1 = engine.containers.get(names[0])
    proc = subprocess.Popen(
        [CLI, "-s", str(real_kafka.spec_path), "scenario", "run", str(scenario), "--repeat", "3",
         "--report-dir", str(reports)],
        cwd=real_kafka.spec_path.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    seen: list[str] = []
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 240
        for needle in ("run 2/3", "step 7/10"):  # run 2's pause step
            while not seen or needle not in seen[-1]:
                line = proc.stderr.readline()
                assert line and time.monotonic() < deadline, "".join(seen)
                seen.append(line)
        while True:  # the pause of run 2 has taken
            broker1.reload()
            if broker1.status == "paused":
                break
            assert time.monotonic() < deadline, "".join(seen)
            time.sleep(0.05)
        t0 = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        _out, err = proc.communicate(timeout=60)
        took = time.monotonic() - t0
        err = "".join(seen) + err
        assert proc.returncode == 143, err
        assert took < 30, f"{took:.1f}s: {err}"
        print(f"\nSIGTERM in run 2 of 3: exit 143 after {took:.1f}s")
        assert [ln for ln in err.splitlines() if ln.startswith("error: ")] == ["error: interrupted by SIGTERM"], err
        assert "run 1/3: PASS" in err and "run 2/3: INTERRUPTED" in err and "run 3/3" not in err, err
        run2 = json.loads((reports / "run-02" / "report.json").read_text())
        assert run2["interrupted"] is True and run2["verdict"] == "INTERRUPTED"
        assert not (reports / "run-03").exists() and "INTERRUPTED" in (reports / "summary.html").read_text()
        for name in names:  # nothing paused, stopped or cut off
            c = engine.containers.get(name)
            assert c.status == "running", (name, c.status)
            assert real_kafka.spec.topology.network_name in c.attrs["NetworkSettings"]["Networks"], name
        assert not list((real_kafka.spec_path.parent / "compose").glob("*/.clusterctl-faults/*.json"))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
