"""The observer's ELR sampler (KRaft, KIP-966): DescribeTopicPartitions every ELR_INTERVAL_S.

Metadata (samplers.py) gives leader, replicas and ISR; only DescribeTopicPartitions gives each partition's
eligible leader replicas and last known leader, which say by which rule a leaderless partition got its next
leader (election_rules.py). A change of leader, ISR, ELR or last known ELR is recorded as an ElrSample; a change
of ELR or last known ELR (or a first answer with either) also as an event. Each poll asks one broker at a time
(not one the drill paused), each request bounded; the broker that answered last is asked first, and an answer
with an older leader epoch than one recorded (a broker just unpaused, its metadata not caught up) is dropped. No
answer from any broker records nothing (metadata's gap shows that time). A cluster whose brokers lack API 75
(3.x before KRaft's DescribeTopicPartitions) ends the sampler at once.
"""

from __future__ import annotations

import struct
import time
from typing import TYPE_CHECKING

from clusterctl.chaos.recorder import Recorder, ids_text
from clusterctl.chaos.timeline import ElrSample

if TYPE_CHECKING:
    from clusterctl.kafka.topicpartitions import PartitionElr

ELR_INTERVAL_S = 0.5
ELR_TIMEOUT_S = 1.0


class ElrWatch(Recorder):
    """Start `_elr_loop` on its own thread (Observer.start does when the run watches ELR)."""

    _last_elr: dict[tuple[str, int], tuple[int, tuple[int, ...], tuple[int, ...], tuple[int, ...]]]
    _epochs: dict[tuple[str, int], int]

    def _elr_loop(self) -> None:
        from clusterctl.kafka import topicpartitions as tp

        assert self.spec is not None
        self._last_elr, self._epochs = {}, {}
        preferred: int | None = None
        t = self.spec.topology
        addresses = {b: (t.broker_host(b), t.broker_host_port(b)) for b in t.broker_ids}
        checked: set[int] = set()
        while not self._stop.is_set():
            t0 = time.monotonic()
            with self._lock:
                topics = list(self.topics)
            for b in sorted(addresses, key=lambda b: (b in self._paused, b != preferred)):
                host, port = addresses[b]
                try:
                    if b not in checked and not tp.supported(host, port, ELR_TIMEOUT_S):
                        return  # a broker without API 75: nothing to watch on this cluster
                    checked.add(b)
                    parts, _errors = tp.describe_on(host, port, topics, ELR_TIMEOUT_S)
                except (OSError, ValueError, struct.error):
                    continue
                self._record_elr(parts)
                preferred = b
                break
            self._stop.wait(max(0.0, ELR_INTERVAL_S - (time.monotonic() - t0)))

    def _record_elr(self, parts: list[PartitionElr]) -> None:
        now = time.time()
        for p in parts:
            key = (p.topic, p.partition)
            if p.leader_epoch < self._epochs.get(key, -1):
                continue  # a stale answer
            self._epochs[key] = p.leader_epoch
            elr = tuple(sorted(p.elr or ()))
            known = tuple(sorted(p.last_known_elr or ()))
            state = (p.leader, tuple(sorted(p.isr)), elr, known)
            prev = self._last_elr.get(key)
            if state == prev:
                continue
            self._last_elr[key] = state
            with self._lock:
                self.timeline.elr.append(
                    ElrSample(now, key[0], key[1], state[0], list(state[1]), list(elr), list(known), p.leader_epoch)
                )
            if (prev is None and (elr or known)) or (prev is not None and prev[2:] != state[2:]):
                detail = f"elr {ids_text(elr)} last known elr {ids_text(known)} (isr {ids_text(state[1])})"
                self.event(
                    "elr", "elr", f"{key[0]}-{key[1]}", detail, {"elr": list(elr), "last_known_elr": list(known)}
                )
