"""The observer's sampling threads: Kafka metadata, the KRaft quorum, and ZooKeeper Mode per node.

Each runs until the observer stops, records only changes, and never waits longer than one bounded request.
"""

from __future__ import annotations

import time
from typing import Any

from clusterctl.chaos.recorder import Recorder, ids_text
from clusterctl.chaos.timeline import ControllerSample, FencedSample, Gap, PartitionSample, ZkModeSample

POLL_TIMEOUT_S = 1.0  # one metadata request; a paused or cut-off broker never answers
BROKER_BACKOFF_S = 2.0  # a broker that did not answer is asked again after this long


class Samplers(Recorder):
    """Metadata (either mode), the controller quorum (KRaft) and ZooKeeper modes (ZooKeeper mode)."""

    # ------------------------------------------------------------ Kafka metadata

    def _addresses(self) -> dict[int, str]:
        """Each broker's own address (the spec's brokers), or the bootstrap list as one 'broker'."""
        assert self.bootstrap is not None
        spec = self.spec
        if spec is not None and self.bootstrap == spec.topology.bootstrap_servers:
            return spec.topology.broker_addresses()
        return {-1: self.bootstrap}

    def _metadata_loop(self) -> None:
        from confluent_kafka.admin import AdminClient

        from clusterctl.kafka.connection import admin_config

        addresses = self._addresses()
        clients: dict[int, Any] = {}
        backoff: dict[int, float] = {}  # broker -> monotonic time before which it is not asked
        preferred: int | None = None
        while not self._stop.is_set():
            t0 = time.monotonic()
            order = sorted(addresses, key=lambda b: (b != preferred, b))
            ready = [b for b in order if backoff.get(b, 0.0) <= t0]
            # paused brokers are asked only when no other is left (a lone broker's pause is seen this way)
            candidates = [b for b in ready if b not in self._paused] or ready
            md, why = None, "every broker paused or silent"
            for b in candidates[:2]:  # at most two bounded requests per poll
                if b not in clients:
                    clients[b] = AdminClient(
                        admin_config(addresses[b], socket_timeout_ms=int(POLL_TIMEOUT_S * 1000))
                    )  # fmt: skip
                try:
                    md = clients[b].list_topics(timeout=POLL_TIMEOUT_S)
                    preferred = b
                    break
                except Exception as exc:  # KafkaException: this broker did not answer in time
                    why = f"metadata request failed: {exc}"
                    clients.pop(b, None)  # its requests may be queued on a silent broker: start afresh
                    backoff[b] = time.monotonic() + BROKER_BACKOFF_S
            if md is None:
                self._open_gap(why)
            else:
                self._close_gap()
                self._record_metadata(md)
            self._stop.wait(max(0.0, self.interval - (time.monotonic() - t0)))

    def _open_gap(self, why: str) -> None:
        if self._gap_start is None:
            self._gap_start = (time.time(), why)
            self.event("metadata", "error", "metadata", why)
        self._metadata_ok = False

    def _close_gap(self) -> None:
        if self._gap_start is not None:
            t0, why = self._gap_start
            self._gap_start = None
            now = time.time()
            with self._lock:
                self.timeline.gaps.append(Gap(t0, now, "metadata", why))
            self.event("metadata", "recovered", "metadata", f"metadata answers again after {now - t0:.1f}s")
            # record every partition afresh (the gap hid when things changed), and still say what changed across it
            self._after_gap = True
        self._metadata_ok = True

    def _record_metadata(self, md: Any) -> None:
        now = time.time()
        bid = self._broker_id
        brokers = tuple(sorted({bid(b) for b in md.brokers}))
        if brokers != self._last_brokers:
            gone = sorted(set(self._last_brokers or ()) - set(brokers))
            back = sorted(set(brokers) - set(self._last_brokers or ()))
            detail = f"live brokers {','.join(map(str, brokers)) or '-'}"
            if self._last_brokers is not None:
                detail += f" (lost {gone})" if gone else f" (joined {back})"
            self.event("metadata", "brokers", "cluster", detail, list(brokers))
            self._last_brokers = brokers
        if self.kraft and self.spec is not None:
            fenced = tuple(b for b in self.spec.topology.broker_ids if b not in brokers)
            if fenced != self._last_fenced:
                with self._lock:
                    self.timeline.fenced.append(FencedSample(now, list(fenced)))
                detail = f"fenced brokers {ids_text(fenced)}" if fenced else "no broker fenced"
                self.event("metadata", "fenced", "cluster", detail, list(fenced))
                self._last_fenced = fenced
        controller = bid(md.controller_id)
        if not self.kraft and controller != self._last_controller:
            self.event("metadata", "controller", "cluster", f"controller {controller}", controller)
            self._last_controller = controller
        with self._lock:
            topics = list(self.topics)
        after_gap, self._after_gap = self._after_gap, False
        for name in topics:
            t = md.topics.get(name)
            if t is None or (t.error is not None and not t.partitions):
                continue
            for pid, p in sorted(t.partitions.items()):
                key = (name, pid)
                state = (bid(p.leader), tuple(map(bid, p.replicas)), tuple(sorted(map(bid, p.isrs))))
                prev = self._last_part.get(key)
                if state == prev and not after_gap:
                    continue
                self._last_part[key] = state
                with self._lock:
                    self.timeline.partitions.append(
                        PartitionSample(now, name, pid, state[0], list(state[1]), list(state[2]))
                    )
                subject = f"{name}-{pid}"
                if prev is None or after_gap:
                    self.event("metadata", "partition", subject, _describe(state), _state_dict(state))
                if prev is None:
                    continue
                if prev[0] != state[0]:
                    self.event("metadata", "leader", subject, f"leader {prev[0]} -> {state[0]}", state[0])
                if prev[2] != state[2]:
                    self.event(
                        "metadata", "isr", subject, f"isr {ids_text(prev[2])} -> {ids_text(state[2])}", list(state[2])
                    )

    # ------------------------------------------------------------ KRaft controller quorum

    def _quorum_loop(self) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            self._quorum_sample()
            self._stop.wait(max(0.0, self.quorum_interval - (time.monotonic() - t0)))

    def _quorum_sample(self) -> None:
        from clusterctl.errors import ClusterctlError
        from clusterctl.kafka.kraft import quorum as kraft

        assert self.spec is not None
        try:
            info = kraft.describe(self.spec, timeout=max(0.5, min(1.5, self.quorum_interval * 3)))
            state = (info.leader_id, info.leader_epoch)
            why = ""
        except ClusterctlError as exc:
            prev_epoch = self._last_quorum_leader[1] if self._last_quorum_leader else -1
            state, why = (-1, prev_epoch), exc.message
        if state == self._last_quorum_leader:
            return
        prev = self._last_quorum_leader
        self._last_quorum_leader = state
        now = time.time()
        with self._lock:
            self.timeline.controllers.append(ControllerSample(now, state[0], state[1]))
        if prev is None or prev[0] != state[0]:
            who = f"node {state[0]} (epoch {state[1]})" if state[0] >= 0 else "none"
            self.event(
                "quorum", "controller", "quorum", f"active controller {who}", state[0] if state[0] >= 0 else None
            )
        has_leader = state[0] >= 0
        if prev is None or (prev[0] >= 0) != has_leader:
            detail = (
                "controller quorum has a leader" if has_leader else f"controller quorum has no leader ({why[:120]})"
            )
            self.event("quorum", "quorum", "controller quorum", detail, has_leader)

    # ------------------------------------------------------------ ZooKeeper Mode per node

    def _zk_mode_loop(self) -> None:
        while not self._stop.is_set():
            t0 = time.monotonic()
            self._zk_mode_sample()
            self._stop.wait(max(0.0, self.zk_interval - (time.monotonic() - t0)))

    def _zk_mode_sample(self) -> None:
        from clusterctl.zookeeper import client as zk

        assert self.spec is not None
        statuses = zk.node_statuses(self.spec, timeout=min(1.0, self.zk_interval * 4))
        now = time.time()
        for s in statuses:
            if self._last_mode.get(s.id) != s.mode:
                prev = self._last_mode.get(s.id)
                self._last_mode[s.id] = s.mode
                with self._lock:
                    self.timeline.zk_modes.append(ZkModeSample(now, s.id, s.mode))
                detail = f"mode {prev or '?'} -> {s.mode}" + (f" ({s.error})" if s.error else "")
                self.event("zk-mode", "mode", f"zk{s.id}", detail, s.mode)
        q = zk.summarize(statuses)
        if q.has_quorum != self._last_quorum:
            self._last_quorum = q.has_quorum
            self.event("zk-mode", "quorum", "ensemble", q.summary, q.has_quorum)


def _describe(state: tuple[int, tuple[int, ...], tuple[int, ...]]) -> str:
    return f"leader {state[0]} replicas {ids_text(state[1])} isr {ids_text(state[2])}"


def _state_dict(state: tuple[int, tuple[int, ...], tuple[int, ...]]) -> dict[str, Any]:
    return {"leader": state[0], "replicas": list(state[1]), "isr": list(state[2])}
