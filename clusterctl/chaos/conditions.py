"""A scenario's conditions (`wait_for`, `assert`), evaluated against the live cluster.

`Conditions.check` returns what it saw when a condition holds and None when it does not; `last_seen` keeps what
the latest check saw, for timeout and assertion messages. The KRaft conditions (controller quorum, fencing) read
the quorum through kafka/kraft/. Partition metadata is read through the runner's live
bootstrap list, so a broker the run paused is never asked.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from clusterctl.chaos.scenario import KRAFT_CONDITIONS, Condition, PartitionRef, TopicRef
from clusterctl.errors import ClusterctlError, UsageError
from clusterctl.spec.model import ClusterSpec
from clusterctl.wait import wait_until

ASK_TIMEOUT_S = 1.5  # one broker's Metadata answer; a broker a fault cut off is left out after it


class Conditions:
    """Checks a run's conditions; remembers the leaders and the controller seen just before the latest fault."""

    def __init__(self, spec: ClusterSpec, bootstrap: str, topic: str, live_bootstrap: Callable[[], str]) -> None:
        self.spec = spec
        self.bootstrap = bootstrap
        self.topic = topic
        self._live_bootstrap = live_bootstrap
        self.last_seen = ""
        self.leaders_at_fault: dict[tuple[str, int], int] = {}
        self.controller_at_fault: int | None = None
        # per fault step: the leaders and controller just before it (a condition may name the fault it means)
        self.at_fault: dict[int, tuple[dict[tuple[str, int], int], int | None]] = {}
        self.step = 0  # the step running now (the Runner sets it)
        self.fault_refs: dict[int, int] = {}  # condition step → the fault step it compares with (scenario_checks)
        # the last committed micro-batch of a drill's Spark job (None: none yet); set by the runner's spark_job step
        self.spark_committed: Callable[[str], int | None] | None = None
        # the partitions no live member of the drill's group read since the latest fault; set by start_group
        self.group_waiting: Callable[[], tuple[list[int], str]] | None = None
        self.stopped: set[int] = set()  # brokers on a host the run stopped (kill_node); the Runner shares the set
        self.wiped: list[tuple[int, str | None]] = []  # (node id, its old directory id) per wipe-controller, in order

    def wait(self, check: Callable[[], str | None], timeout: float, what: str) -> str:
        t0 = time.monotonic()
        got = wait_until(
            check, timeout=timeout, what=what, interval=0.2, seen=lambda _g: f"last seen: {self.last_seen or 'nothing'}"
        )
        return f"{got} after {time.monotonic() - t0:.2f}s"

    def partitions(self, topic: str | None = None, quiet: bool = False) -> list[Any]:
        from clusterctl.kafka.admin import describe_topics

        try:
            desc = describe_topics(self._live_bootstrap(), [topic or self.topic], timeout=3.0)
        except ClusterctlError as exc:
            if quiet:
                return []
            self.last_seen = str(exc)
            return []
        return [p for t in desc for p in t.partitions]

    def partition(self, ref: PartitionRef) -> Any:
        for p in self.partitions(ref.topic):
            if p.partition == ref.partition:
                return p
        return None

    def _spark_committed(self, c: Condition) -> str | None:
        w = c.spark_committed
        assert w is not None
        if self.spark_committed is None:
            raise UsageError(f"spark_committed: no spark_job step started {w.job} before it")
        last = self.spark_committed(w.job)
        self.last_seen = f"spark job {w.job}: " + ("no batch committed" if last is None else f"batch {last} committed")
        return self.last_seen if last is not None and last + 1 >= w.batches else None

    def controller(self, given: int | None, what: str) -> int:
        """A step's controller: the one it names, else the one the latest wipe-controller fault hit."""
        if given is not None:
            return given
        if not self.wiped:
            raise UsageError(f"{what}: no controller given and no wipe-controller fault before it")
        return self.wiped[-1][0]

    def _caught_up(self, c: Condition) -> str | None:
        """The controller (on the directory it runs on now) fetches from the leader and has the high watermark."""
        from clusterctl.runtime import voters

        ref = c.controller_caught_up
        node = self.controller(ref.controller if ref else None, "controller_caught_up")
        try:
            directory = voters.directory_of(self.spec, node)
            info, why = voters.behind(self.spec, node, directory)
        except ClusterctlError as exc:
            self.last_seen = str(exc)
            return None
        self.last_seen = why or f"controller {node} ({directory}) at the high watermark {info.high_watermark}"
        return None if why else self.last_seen

    def check(self, c: Condition) -> str | None:
        from clusterctl.zookeeper import client as zk

        name = c.name
        if name == "controller_caught_up":
            return self._caught_up(c)
        if name in KRAFT_CONDITIONS or (name == "broker_registered" and self.spec.kraft_mode):
            live = self._live_bootstrap()
            got, self.last_seen = check_kraft_condition(self.spec, c, self._at_fault()[1], live, self.topic)
            return got
        if name == "spark_committed":
            return self._spark_committed(c)
        if name == "group_consuming":
            if self.group_waiting is None:
                raise UsageError("group_consuming: no start_group step started a group before it")
            waiting, since = self.group_waiting()
            self.last_seen = f"partitions {waiting}: no record written after {since} read yet" if waiting else ""
            return None if waiting else f"a live member read a record written after {since} on every partition"
        if name == "zk_quorum":
            # a node that answers within a broker's session read timeout (2/3 of the session) serves its clients,
            # however slowly: the quorum question is whether it answers, not how fast
            q = zk.quorum(self.spec, timeout=self.spec.kafka.defaults.zookeeper_session_timeout_ms * 2 / 3000)
            self.last_seen = q.summary
            if c.zk_quorum == "healthy":
                return q.summary if q.healthy else None
            return q.summary if q.has_quorum == (c.zk_quorum == "ok") else None
        if name == "zk_mode":
            m = c.zk_mode
            assert m is not None
            st = {s.id: s.mode for s in zk.node_statuses(self.spec, timeout=1.0)}
            self.last_seen = f"zk{m.id} mode {st.get(m.id)}"
            return self.last_seen if st.get(m.id) == m.mode else None
        if name == "broker_registered":
            b = c.broker_registered
            assert b is not None
            try:
                with zk.zk_client(self.spec.topology.zk_connect, timeout=3.0) as client:
                    ids = zk.registered_brokers(client)
            except ClusterctlError as exc:
                self.last_seen = str(exc)
                return None
            self.last_seen = f"registered brokers {ids}"
            return self.last_seen if (b.id in ids) == b.registered else None
        if name == "isr_full":
            got, self.last_seen = isr_full_everywhere(
                self._live_bootstrap(), (c.isr_full or TopicRef()).topic or self.topic
            )
            return got
        if name == "leaders_live":
            parts = self.partitions((c.leaders_live or TopicRef()).topic)
            bad = [f"{p.partition}: leader {p.leader}" for p in parts if p.leader < 0 or p.leader in self.stopped]
            self.last_seen = f"{len(bad)} of {len(parts)} partitions leaderless or led from a stopped host" + (
                f" ({bad[0]})" if bad else ""
            )
            gone = ",".join(map(str, sorted(self.stopped))) or "none"
            return f"all {len(parts)} partitions led by live brokers (stopped: {gone})" if parts and not bad else None
        if name == "preferred_leaders":
            parts = self.partitions((c.preferred_leaders or TopicRef()).topic)
            off = [
                f"{p.partition}: leader {p.leader}, preferred {p.replicas[0]}"
                for p in parts
                if p.replicas and p.leader != p.replicas[0]
            ]
            self.last_seen = f"{len(off)} partitions not led by their preferred replica" + (
                f" ({off[0]})" if off else ""
            )
            return f"all {len(parts)} partitions led by their preferred replica" if parts and not off else None
        ref: PartitionRef = getattr(c, name)
        p = self.partition(ref)
        if p is None:
            self.last_seen = self.last_seen or f"no partition {ref.partition}"
            return None
        self.last_seen = f"{p.topic}-{p.partition} leader {p.leader} isr {p.isr}"
        if name == "isr_size":
            return self.last_seen if len(p.isr) == c.isr_size.equals else None  # type: ignore[union-attr]
        if name == "leader":
            lc = c.leader
            assert lc is not None
            ok = (lc.equals is None or p.leader == lc.equals) and (lc.not_equals is None or p.leader != lc.not_equals)
            return self.last_seen if ok and (p.leader >= 0 or lc.equals == -1) else None  # -1: no leader, as Kafka says
        if name == "leader_changed":
            before = self._at_fault()[0].get((p.topic, p.partition))
            if before is None:
                raise UsageError("leader_changed needs a fault step before it")
            return f"{self.last_seen} (was {before})" if p.leader >= 0 and p.leader != before else None
        raise UsageError(f"unknown condition {name}")

    def all_led(self) -> str | None:
        parts = self.partitions()
        if parts and all(p.leader >= 0 for p in parts):
            return "ok"
        return None

    def _at_fault(self) -> tuple[dict[tuple[str, int], int], int | None]:
        """(leaders, controller) at the fault the running step's condition compares with: the one it names, by
        default the latest of its kind (scenario_checks.fault_refs); the latest fault's when none is known."""
        ref = self.fault_refs.get(self.step)
        if ref is not None and ref in self.at_fault:
            return self.at_fault[ref]
        return self.leaders_at_fault, self.controller_at_fault

    def snapshot_leaders(self) -> None:
        """Leaders before a fault (leader_changed compares with them); partitions not seen keep the last known."""
        with_topic = self.partitions(quiet=True)
        self.leaders_at_fault.update({(p.topic, p.partition): p.leader for p in with_topic if p.leader >= 0})
        from clusterctl.chaos.faults import active_controller

        try:
            self.controller_at_fault = active_controller(self.spec)
        except ClusterctlError:
            self.controller_at_fault = None
        self.at_fault[self.step] = (dict(self.leaders_at_fault), self.controller_at_fault)


def check_kraft_condition(
    spec: ClusterSpec, c: Any, controller_at_fault: int | None, bootstrap: str, topic: str = ""
) -> tuple[str | None, str]:
    """(what holds, or None; what was seen) for controller_quorum, controller_changed, broker_fenced,
    broker_registered (kraft: listed in metadata) and elr (KIP-966: DescribeTopicPartitions; `topic` by default)."""
    from clusterctl.chaos.faults import active_controller
    from clusterctl.kafka.kraft import quorum as kraft

    name = c.name
    if name == "elr":
        from clusterctl.chaos.elr_steps import check_elr
        from clusterctl.kafka.topicpartitions import parse_bootstrap

        return check_elr(parse_bootstrap(bootstrap), c.elr, topic)
    if name == "controller_changed":
        if controller_at_fault is None:
            raise UsageError("controller_changed needs a fault step before it (with a known active controller)")
        try:
            now = active_controller(spec)
        except ClusterctlError as exc:
            return None, str(exc)
        seen = f"active controller {now} (was {controller_at_fault})"
        return (seen if now != controller_at_fault else None), seen
    if name == "controller_quorum":
        if not spec.kraft_mode:
            raise UsageError(f"controller_quorum is a KRaft condition; cluster {spec.name} runs ZooKeeper mode")
        try:
            info = kraft.describe(spec, timeout=1.5)
        except ClusterctlError as exc:
            seen = f"no quorum answer ({exc.message})"
            return (seen if c.controller_quorum == "lost" else None), seen
        v = kraft.view(spec, info)
        voters = [m for m in v.members if m.role != "observer"]
        caught_up = [m for m in voters if m.lag == 0 and (m.role == "leader" or (m.last_fetch_ago_ms or 0) < 5000)]
        n = len(spec.topology.controller_ids)
        seen = f"leader {v.leader_id}, epoch {v.leader_epoch}, {len(caught_up)}/{n} voters caught up"
        if c.controller_quorum == "lost":
            return (seen if v.leader_id is None else None), seen
        if c.controller_quorum == "ok":
            return (seen if v.leader_id is not None else None), seen
        return (seen if v.leader_id is not None and len(caught_up) == n else None), seen
    b = c.broker_fenced if name == "broker_fenced" else c.broker_registered
    listed = listings(spec, bootstrap, b.id)
    if isinstance(listed, str):
        return None, listed
    seen = _listing_line(listed)
    if name == "broker_fenced":
        return (seen if all((b.id not in v) == b.fenced for v in listed.values()) else None), seen
    return (seen if all((b.id in v) == b.registered for v in listed.values()) else None), seen


def listings(spec: ClusterSpec, bootstrap: str, broker: int) -> dict[str, list[int]] | str:
    """address -> the unfenced brokers it lists, for every live broker asked on its own (clusterctl.kafka.wiremeta);
    or why none answered. `broker`'s own answer is left out: cut off from the controllers, a broker keeps listing
    itself and the others from its old metadata until it is back."""
    from clusterctl.kafka import wiremeta

    own = f"{spec.topology.host}:{spec.topology.broker_host_port(broker)}"
    others = [a for a in bootstrap.split(",") if a and a != own]
    answers = wiremeta.ask_each(others or [own], [], timeout=ASK_TIMEOUT_S)  # a lone broker: its own word
    lists = {a: sorted(m.brokers) for a, m in answers.items() if not isinstance(m, str)}
    return lists or _unanswered(answers)


def _unanswered(answers: dict[str, Any]) -> str:
    return f"metadata unanswered ({'; '.join(map(str, answers.values())) or 'no broker to ask'})"


def _listing_line(listed: dict[str, list[int]]) -> str:
    if len({tuple(v) for v in listed.values()}) == 1:
        return f"unfenced brokers {next(iter(listed.values()))}"
    return "unfenced brokers differ: " + ", ".join(f"{a} lists {v}" for a, v in sorted(listed.items()))


def isr_full_everywhere(bootstrap: str, topic: str) -> tuple[str | None, str]:
    """(what holds, or None; what was seen): every live broker, asked on its own, has every partition of `topic`
    led with its whole replica set in sync, and all of them name the same leader and leader epoch.

    Right after a healed partition the broker that was cut off still answers from its old metadata, a full ISR
    included (13 s on Kafka 4.4.0 here): a check asking any one broker could pass on that answer alone.
    """
    from clusterctl.kafka import wiremeta

    answers = wiremeta.ask_each(bootstrap.split(","), [topic], timeout=ASK_TIMEOUT_S)
    views = {a: m.topics.get(topic) for a, m in answers.items() if not isinstance(m, str)}
    if not views:
        return None, _unanswered(answers)
    behind = [
        f"{p.partition}: isr {list(p.isr)} replicas {list(p.replicas)} (as {a} says)"
        for a, parts in sorted(views.items())
        for p in parts or []
        if p.leader < 0 or set(p.isr) != set(p.replicas)
    ]
    count = max(len(parts or []) for parts in views.values())
    if behind:
        return None, f"{len(behind)} partition answers of {len(views)} brokers not fully in sync (e.g. {behind[0]})"
    if split := wiremeta.converged(answers, topic):
        return None, split
    return f"all {count} partitions in sync, as each of {len(views)} brokers says", f"all {count} partitions in sync"
