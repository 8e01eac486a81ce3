"""Watch a cluster while a fault runs and turn what happened into a timeline and failover times.

Sources (each on its own thread, all optional):
- Kafka metadata polled every `interval` (default 200 ms): per partition leader / replicas / ISR,
  the controller id and the live broker list. Every poll is bounded (1 s), asks one broker on its own
  address, never a broker the drill paused, and moves on to the next broker when one does not answer.
  When no broker answers, the time without an answer is recorded as a gap (the report shades it rather
  than stretching the last answer over it), and the first answer after it re-records every partition.
- ZooKeeper watches (kazoo): /controller, /brokers/ids and each observed partition's state znode,
  plus the session state of the watching client.
- ZK Mode per node from `srvr` (four-letter word) every `zk_interval`, and the quorum it implies.
- KRaft mode instead of the two ZooKeeper sources: DescribeQuorum every `quorum_interval` (the active
  controller, its epoch, whether the quorum has a leader), and the fenced brokers (spec brokers that metadata
  does not list: KRaft brokers report only unfenced ones). Metadata's controller id is not recorded there:
  a KRaft broker reports a random live broker in that field.
- KRaft with ELR on (`watch_elr`): DescribeTopicPartitions every 0.5 s, each partition's eligible leader replicas
  and last known leader (elrwatch.py).
- The drill producer's per-interval acks and errors (attached at the end).

Only changes are stored (plus one sample at start and end), so a long drill stays small. Failover times
are computed from the timeline in analysis.py.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from clusterctl.chaos.elrwatch import ElrWatch
from clusterctl.chaos.samplers import Samplers
from clusterctl.chaos.timeline import (
    ControllerSample,
    FencedSample,
    Gap,
    PartitionSample,
    Timeline,
    ZkModeSample,
)
from clusterctl.chaos.zkwatch import ZkWatcher


class Observer(Samplers, ZkWatcher, ElrWatch):
    """Start with `start()`, mark faults with `mark()`, stop with `stop()` → Timeline."""

    def add_topic(self, topic: str) -> None:
        with self._lock:
            if topic not in self.topics:
                self.topics.append(topic)
        if self._zk is not None:
            self._watch_topic_states(topic)

    # ------------------------------------------------------------ lifecycle

    def start(self) -> Observer:
        if self.poll_metadata:
            self._spawn(self._metadata_loop, "observe-metadata")
        if self.spec is not None and self.kraft:
            self._spawn(self._quorum_loop, "observe-quorum")
            if self.watch_elr:
                self._spawn(self._elr_loop, "observe-elr")
        elif self.spec is not None:
            self._spawn(self._zk_mode_loop, "observe-zk-mode")
        if self.watch_zk:
            self._start_zk_watches()
        return self

    def stop(self, load_intervals: list[Any] | None = None) -> Timeline:
        self._stop.set()
        for t in self._threads:
            t.join(timeout=10)
        if self.spec is not None:
            # a scenario may end the instant its own check passes, before the loop's next sample: take it now
            with contextlib.suppress(Exception):
                self._quorum_sample() if self.kraft else self._zk_mode_sample()
        if self._zk is not None:
            with contextlib.suppress(Exception):
                self._zk.stop()
                self._zk.close()
        with self._lock:
            self.timeline.ended = time.time()
            if self._gap_start is not None:
                self.timeline.gaps.append(Gap(self._gap_start[0], self.timeline.ended, "metadata", self._gap_start[1]))
                self._gap_start = None
            if load_intervals is not None:
                self.timeline.load = list(load_intervals)
            # a closing sample per partition so step plots reach the end
            for (topic, p), (leader, replicas, isr) in self._last_part.items():
                self.timeline.partitions.append(
                    PartitionSample(self.timeline.ended, topic, p, leader, list(replicas), list(isr))
                )
            for zk_id, mode in self._last_mode.items():
                self.timeline.zk_modes.append(ZkModeSample(self.timeline.ended, zk_id, mode))
            if self._last_quorum_leader is not None:
                leader, epoch = self._last_quorum_leader
                self.timeline.controllers.append(ControllerSample(self.timeline.ended, leader, epoch))
            if self._last_fenced is not None:
                self.timeline.fenced.append(FencedSample(self.timeline.ended, list(self._last_fenced)))
            for band in self.timeline.phases:  # a phase that failed or was interrupted ends with the run
                if band.t1 is None:
                    band.t1 = self.timeline.ended
        return self.timeline

    def __enter__(self) -> Observer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        if not self._stop.is_set():
            self.stop()
