"""Runs the consumer-group steps of a drill (group_steps.py has their models): `start_group`, the faults kill-member
and kill-coordinator, the condition group_consuming, `verify_group`, and the group's part of the result.

`GroupSteps` is a part of the Runner (runner.py): each assignment change goes on the observer's timeline as the
member logged it, each fault is marked there, and at the end every fault's consume gap is computed from the
members' logs and the drill ledger (group_timeline.py), with the setting that bounds it.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from clusterctl.chaos.fault_steps import FaultSteps
from clusterctl.chaos.group_steps import StartGroup, VerifyGroup
from clusterctl.chaos.group_timeline import (
    AssignmentChange,
    GroupReport,
    consume_gap,
    held_at,
    normal_wait,
    verify_reads,
)
from clusterctl.chaos.results import StepFailed
from clusterctl.chaos.scenario import Fault
from clusterctl.errors import ClusterctlError, UsageError, VerificationError
from clusterctl.wait import wait_until

KAFKA_SESSION_MS = 45000  # Kafka's session.timeout.ms (client) and group.consumer.session.timeout.ms (broker)
BROKER_GONE = ("kill-coordinator", "kill-broker", "kill-leader")


class GroupSteps(FaultSteps):
    """The group steps; the Runner supplies the state declared here."""

    sc: Any
    run_id: str
    work_dir: Path
    load: Any
    created_partitions: int | None
    drill_group: Any = None  # drill_group.DrillGroup once start_group ran
    group_args: StartGroup | None = None
    group_session: tuple[str, int] | None = None
    group_verify: Any = None

    def _group_preflight(self, steps: list[Any]) -> None:
        """The consumer protocol needs Apache Kafka 4.0+ (KRaft): refused before any work elsewhere."""
        from clusterctl.spec.capabilities import YES, supports

        if not any(s.kind == "start_group" and s.args.protocol == "consumer" for s in steps):
            return
        spec, version = self.spec, self.spec.kafka.version
        too_old = bool(version) and supports(version or "", "group_protocol") != YES
        if spec.kafka.engine != "kafka" or not spec.kraft_mode or too_old:
            runs = f"kafka.engine={spec.kafka.engine}, mode={spec.kafka.mode}"
            runs += f", Kafka {version}" if version else ""
            raise UsageError(
                f"scenario {self.sc.name} runs a group with the consumer protocol (KIP-848), generally available from "
                f"Kafka 4.0 in KRaft mode; cluster {spec.name} runs {runs}",
                hint="protocol: classic, or a KRaft cluster on Kafka 4.x (clusterctl init --kafka-version 4.4.0)",
            )

    def _step_start_group(self, a: StartGroup) -> str:
        from clusterctl.chaos.drill_group import DrillGroup
        from clusterctl.kafka.connection import check_topic

        name = a.group or f"drill-{self.sc.name}-{self.run_id}"
        self.group_session = self._session_setting(a, name)
        partitions = self.created_partitions or check_topic(self.bootstrap, self.topic)
        self.drill_group = DrillGroup(
            self.bootstrap, self.topic, name, a.protocol, a.members, self.work_dir,
            session_timeout_ms=a.session_timeout_ms, commit_interval_ms=a.commit_interval_ms,
            on_change=self._on_assignment,
        )  # fmt: skip
        self.group_args = a
        self.cond.group_waiting = self._group_waiting
        took = self.drill_group.start(partitions, a.timeout)
        setting, ms = self.group_session
        return (
            f"group {name}: {a.members} members, {a.protocol} protocol ({setting}={ms}), every partition assigned "
            f"after {took:.1f}s; logs in {self.work_dir / 'group'}"
        )

    def _session_setting(self, a: StartGroup, group: str) -> tuple[str, int]:
        """What bounds noticing a dead member, and its value; the consumer protocol's is set on the group first."""
        if a.protocol == "classic":
            return "session.timeout.ms", a.session_timeout_ms or KAFKA_SESSION_MS
        from clusterctl.kafka.configs import alter_group_configs, describe_broker_configs

        if a.session_timeout_ms is not None:
            try:
                alter_group_configs(self.bootstrap, group, {"consumer.session.timeout.ms": str(a.session_timeout_ms)})
            except ClusterctlError as exc:
                raise StepFailed(f"group {group}: consumer.session.timeout.ms refused: {exc.message}") from None
            return "consumer.session.timeout.ms", a.session_timeout_ms
        broker = self.spec.topology.broker_ids[0]
        found = {c.name: c.value for c in describe_broker_configs(self.bootstrap, broker)}
        return "group.consumer.session.timeout.ms", int(found.get("group.consumer.session.timeout.ms") or 45000)

    def _on_assignment(self, c: AssignmentChange) -> None:
        verb = {"assign": "assigned", "revoke": "revoked", "lost": "lost"}[c.kind]
        parts = ",".join(f"p{p}" for p in c.partitions) or "nothing"
        self.observer.event("group", "assignment", f"member {c.member}", f"{verb} {parts}", c.partitions, t=c.t)

    def _group_waiting(self) -> tuple[list[int], str]:
        group = self._group()
        faults = [m.t for m in self.observer.timeline.markers if not m.heal]
        since = max([group.started or 0.0, *faults])
        return group.not_read_since(since), f"{time.strftime('%H:%M:%S', time.localtime(since))}"

    def _group(self) -> Any:
        if self.drill_group is None:
            raise UsageError("no start_group step started a group before this step")
        return self.drill_group

    def _group_fault(self, f: Fault) -> str:
        from clusterctl.chaos import faults

        group = self._group()
        if f.action == "kill-member":
            t, pid = group.kill(f.member or 0)
            self.observer.mark("kill-member", f"member {f.member}", heal=False, note=f"pid {pid}", t=t)
            return f"kill-member member {f.member}: SIGKILL pid {pid}"
        r = faults.kill_coordinator(self.spec, self._live_bootstrap(), group.group)
        self._mark(r, heal=False)
        return f"{r.action} {r.target} ({r.container}): {r.before} -> {r.after}; {r.note}"

    def _step_verify_group(self, v: VerifyGroup) -> str:
        """Wait until the group read every acknowledged record (or `timeout`), stop it, check it read each."""
        group = self._group()
        if self.load is None:
            raise UsageError("verify_group: no load ran in this scenario (add start_load before it)")
        acked = self._acked(resolve=True)
        with contextlib.suppress(ClusterctlError):  # the check below names what stayed unread
            wait_until(
                lambda: verify_reads(group.snapshot().reads, acked).unread_count,
                timeout=v.timeout,
                what=f"group {group.group} to read every acknowledged record",
                interval=1.0,
                done=lambda n: n == 0,
                seen=lambda n: f"{n} acknowledged records unread",
            )
        group.stop()
        self.group_verify = verify_reads(group.snapshot().reads, acked)
        if not self.group_verify.ok:
            raise VerificationError(f"group {group.group}: {self.group_verify.summary()}")
        return self.group_verify.summary() + self._gap_bound(v)

    def _gap_bound(self, v: VerifyGroup) -> str:
        if v.max_consume_gap is None:
            return ""
        report = self._group_report(replace(self.observer.timeline, ended=time.time()), None)
        gaps = [g for g in (report.gaps if report else []) if g.gap_s is not None]
        worst = max(gaps, key=lambda g: g.gap_s or 0.0, default=None)
        if worst is not None and (worst.gap_s or 0.0) > v.max_consume_gap:
            raise VerificationError(
                f"consume gap {worst.gap_s:.1f}s after {worst.action} {worst.target} (at most {v.max_consume_gap:g}s)"
            )
        return "" if worst is None else f"; longest consume gap {worst.gap_s:.1f}s (at most {v.max_consume_gap:g}s)"

    def _acked(self, resolve: bool = False) -> dict[int, list[tuple[int, float]]]:
        """Per partition, (offset, ack time) of every acknowledged write, sorted by offset; an ack that carried no
        offset (an idempotent retry's) is found by its seq in the topic with `resolve`, else left out."""
        from clusterctl.chaos.ledger import read_ledger

        entries = read_ledger(self.load.ledger_path).entries
        where: dict[tuple[str, int], int] = {}
        if resolve and any(e.offset < 0 for e in entries):
            from clusterctl.chaos.load import consume_all

            where = {(r.key or "", _seq(r.value)): r.offset for r in consume_all(self.bootstrap, self.topic)}
        out: dict[int, list[tuple[int, float]]] = {}
        for e in entries:
            offset = e.offset if e.offset >= 0 else where.get((e.key, e.seq), -1)
            if offset >= 0:
                out.setdefault(e.partition, []).append((offset, e.ts))
        return {p: sorted(v) for p, v in out.items()}

    def _close_group(self) -> str | None:
        if self.drill_group is None:
            return None
        try:
            self.drill_group.stop()
        except (OSError, ClusterctlError) as exc:
            return f"stopping group {self.drill_group.group}: {exc}"
        return None

    def _group_report(self, timeline: Any, faults: list[Any] | None) -> GroupReport | None:
        """Each fault's consume gap (window: analysis.analyze's, cut where the group stopped) and the check."""
        from clusterctl.chaos.analysis import analyze

        group = self.drill_group
        if group is None or self.group_args is None or self.group_session is None or self.load is None:
            return None
        log = group.snapshot()
        try:
            acked = self._acked()
        except ClusterctlError:
            return None
        end = group.stopping or timeline.ended
        settled = group.settled or end
        marks = [f for f in (faults if faults is not None else analyze(timeline)) if settled <= f.t < end]
        normal = normal_wait(log.reads, acked, settled, marks[0].t if marks else end)
        gaps = []
        for f in marks:
            gap = consume_gap(f.action, f.target, f.t, min(f.window_end or end, end), log.reads, acked, log.changes,
                              group.deaths, normal, self._taken(f, log.changes))  # fmt: skip
            gap.bound = self._bound(f.action, gap)
            gaps.append(gap)
        setting, ms = self.group_session
        a = self.group_args
        return GroupReport(group.group, a.protocol, a.members, setting, ms, normal, gaps, log.changes, group.deaths,
                           self.group_verify, log.errors[:10])  # fmt: skip

    def _taken(self, f: Any, changes: list[AssignmentChange]) -> frozenset[int]:
        """The partitions a fault took away itself: the killed member's, or those the killed broker led."""
        if f.action == "kill-member" and f.target.split()[-1].isdigit():
            return held_at(changes, int(f.target.split()[-1]), f.t)
        return frozenset(p.partition for p in f.partitions if p.led_by_target and p.topic == self.topic)

    def _bound(self, action: str, gap: Any) -> str | None:
        """The setting that bounds a fault's consume gap on this cluster (`gap`: what the group did meanwhile)."""
        from clusterctl.chaos.bounds import KRAFT_SESSION, SESSION, settings_of

        assert self.group_session is not None and self.group_args is not None
        setting, ms = self.group_session
        classic = self.group_args.protocol == "classic"
        if action == "kill-member":
            return f"{setting} {ms} ({'client' if classic else 'broker'})" + (
                " + a rebalance of every member" if classic else ""
            )
        if action not in BROKER_GONE:
            return None
        found = settings_of(self.spec)
        name = KRAFT_SESSION if KRAFT_SESSION in found else SESSION
        broker = f"{name} {found[name]}" if name in found else "a new leader"
        if gap.members_revoked:  # members gave their partitions up (classic: no coordinator for session.timeout.ms)
            return (
                f"{setting} {ms}: members gave up their partitions without a coordinator; the new one ({broker}) "
                "gave them back once the old members' sessions expired"
            )
        # the dead broker's partitions took no writes until their new leaders, so nothing waited to be read: that
        # wait is in the write gap; what the consume gap holds is the client finding them
        return f"the client finding the new leaders (a metadata refresh); new leaders after {broker}, in the write gap"


def _seq(value: str | None) -> int:
    from clusterctl.chaos.ledger import parse_seq

    seq = parse_seq(value)
    return -1 if seq is None else seq
