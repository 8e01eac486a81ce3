"""Pausing a partition's followers again and again while a perf load writes to their leader (real Apache Kafka).

A busy broker is exactly when users pause one: every pause must be applied (the engine's transient "unable to
freeze" retried, not given up), and every follower must be running again after each round. The freeze retries seen
are printed for the note (`-s`).
"""

from __future__ import annotations

import signal
import subprocess
import time
import uuid

import pytest
from _runtime_helpers import CLI
from conftest import RealKafka

from clusterctl.chaos import faults
from clusterctl.kafka.admin import create_topic
from clusterctl.runtime import docker as dk

pytestmark = [pytest.mark.real_kafka, pytest.mark.docker]
ROUNDS = 30


def test_pause_followers_under_load_is_always_applied(real_kafka: RealKafka) -> None:
    spec, topic = real_kafka.spec, f"freeze-{uuid.uuid4().hex[:6]}"
    create_topic(real_kafka.bootstrap, topic, 3, 3, {"retention.bytes": "50000000"})
    load = subprocess.Popen(
        [CLI, "-s", str(real_kafka.spec_path), "perf", "produce", topic, "-n", "600000", "--record-size", "2000",
         "--throughput", "5000", "--acks", "all", "--no-create-topic", "--reporting-interval", "5"],
        cwd=real_kafka.spec_path.parent, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    retries, slowest, before = [], 0.0, dict(dk.FREEZE_COUNTS)
    try:
        time.sleep(3)  # the load is in full swing
        for _ in range(ROUNDS):
            if load.poll() is not None:
                pytest.fail(f"the perf load stopped: {load.communicate()[0][-500:]}")
            t0 = time.monotonic()
            res = faults.pause_followers(spec, real_kafka.bootstrap, topic, 0, seconds=0.3)
            slowest = max(slowest, time.monotonic() - t0 - 0.3)
            pauses = [r for r in res if r.action == "pause-follower"]
            assert len(pauses) == 2 and {r.action for r in res} == {"pause-follower", "unpause"}
            retries.append(sum(r.retries for r in pauses))
            states = [faults.container_state(spec.topology.broker_container(b)) for b in spec.topology.broker_ids]
            assert states == ["running"] * len(states)
            time.sleep(0.5)  # the followers fetch again before the next round
    finally:
        load.send_signal(signal.SIGINT)
        out, _ = load.communicate(timeout=60)
    assert dk.FREEZE_COUNTS["failed"] == before["failed"]
    print(f"\n{ROUNDS} rounds, {2 * ROUNDS} pauses under load: {sum(retries)} freeze retries "
          f"(rounds with any: {sum(1 for r in retries if r)}, most in one round: {max(retries)}), "
          f"slowest pause+unpause {slowest:.2f}s; load: {' | '.join(out.strip().splitlines()[-3:])[:300]}")  # fmt: skip
