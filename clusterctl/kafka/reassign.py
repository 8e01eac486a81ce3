"""Partition reassignment like kafka-reassign-partitions.sh: plans, validation, throttles, execution.

Moves are started through ZooKeeper (`alter_partition_reassignments`). A replication throttle is
set the way the Kafka tool sets it: per-broker `leader/follower.replication.throttled.rate` on every
broker taking part, and per-topic `leader.replication.throttled.replicas` (the current replicas of each
moving partition) and `follower.replication.throttled.replicas` (the replicas being added). Throttles are
removed once every move finished (`verify`), as `kafka-reassign-partitions.sh --verify` does.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clusterctl.errors import ClusterctlError, UsageError
from clusterctl.kafka import admin, configs
from clusterctl.wait import wait_until

Moves = dict[tuple[str, int], list[int]]

RATE_KEYS = ("leader.replication.throttled.rate", "follower.replication.throttled.rate")
LEADER_REPLICAS_KEY = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS_KEY = "follower.replication.throttled.replicas"


@dataclass
class Reassignment:
    topic: str
    partition: int
    replicas: list[int]


REASSIGN_ZNODE = "/admin/reassign_partitions"


def alter_partition_reassignments(zk_connect: str, moves: Moves, timeout: float = 10.0) -> list[Reassignment]:
    """Start moving replicas (Kafka in ZooKeeper mode): write /admin/reassign_partitions.

    confluent-kafka 2.16 has no AlterPartitionReassignments API, so this uses the ZooKeeper path
    that kafka-reassign-partitions.sh --zookeeper used and Kafka 3.x's ZK-mode controller still
    honours. The controller deletes the znode once every move completed.
    """
    from kazoo.exceptions import NodeExistsError

    if not moves:
        raise UsageError("no partition moves given")
    body = {
        "version": 1,
        "partitions": [{"topic": t, "partition": p, "replicas": r} for (t, p), r in sorted(moves.items())],
    }
    zk = _zk(zk_connect, timeout)
    try:
        zk.create(REASSIGN_ZNODE, json.dumps(body).encode(), makepath=True)
    except NodeExistsError:
        raise ClusterctlError(
            "a partition reassignment is already in progress", hint="wait for it (list_partition_reassignments)"
        ) from None
    finally:
        zk.stop()
        zk.close()
    return [Reassignment(t, p, r) for (t, p), r in sorted(moves.items())]


def list_partition_reassignments(zk_connect: str, timeout: float = 10.0) -> list[Reassignment]:
    """Moves still in progress (the /admin/reassign_partitions znode; empty when none)."""
    from kazoo.exceptions import NoNodeError

    zk = _zk(zk_connect, timeout)
    try:
        data, _ = zk.get(REASSIGN_ZNODE)
    except NoNodeError:
        return []
    finally:
        zk.stop()
        zk.close()
    doc = json.loads(data or b"{}")
    return [Reassignment(e["topic"], int(e["partition"]), list(e["replicas"])) for e in doc.get("partitions", [])]


def _zk(zk_connect: str, timeout: float) -> Any:
    from kazoo.client import KazooClient
    from kazoo.handlers.threading import KazooTimeoutError

    from clusterctl.errors import UnreachableError

    zk = KazooClient(hosts=zk_connect, timeout=timeout)
    try:
        zk.start(timeout=timeout)
    except KazooTimeoutError:
        zk.close()
        raise UnreachableError(f"no ZooKeeper answered at {zk_connect} within {timeout:.0f}s") from None
    return zk


@dataclass
class Throttle:
    """What a throttled reassignment sets (and later removes)."""

    rate: int
    brokers: list[int]
    topic_configs: dict[str, dict[str, str]]


@dataclass
class ReassignResult:
    topic: str
    moved: int
    seconds: float
    throttle: int | None
    throttle_removed: bool
    plan: dict[str, Any]


def plan_doc(moves: Moves) -> dict[str, Any]:
    """The kafka-reassign-partitions.sh JSON shape."""
    return {
        "version": 1,
        "partitions": [{"topic": t, "partition": p, "replicas": r} for (t, p), r in sorted(moves.items())],
    }


def read_plan(path: Path) -> Moves:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        return {(str(e["topic"]), int(e["partition"])): [int(r) for r in e["replicas"]] for e in doc["partitions"]}
    except FileNotFoundError:
        raise UsageError(f"plan file {path} does not exist") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"plan file {path} is not a reassignment plan ({type(exc).__name__}: {exc})") from None


def generate(bootstrap: str, topic: str, brokers: list[int]) -> Moves:
    """Spread the topic's replicas round-robin over `brokers` (same RF)."""
    desc = admin.describe_topic(bootstrap, topic)
    _check_brokers(bootstrap, brokers, "--brokers")
    rf = desc.replication_factor
    if rf > len(brokers):
        raise UsageError(f"topic {topic!r} has RF {rf} but --brokers names only {len(brokers)} brokers")
    return {
        (topic, p.partition): [brokers[(p.partition + i) % len(brokers)] for i in range(rf)] for p in desc.partitions
    }


def validate(bootstrap: str, topic: str, moves: Moves) -> dict[tuple[str, int], list[int]]:
    """Check a plan against the live cluster; returns the current replicas of every partition in it."""
    if not moves:
        raise UsageError("the plan moves no partitions")
    if any(t != topic for t, _ in moves):
        raise UsageError(f"the plan moves topics other than {topic!r}")
    desc = admin.describe_topic(bootstrap, topic)
    current = {(topic, p.partition): list(p.replicas) for p in desc.partitions}
    for (t, p), replicas in sorted(moves.items()):
        if (t, p) not in current:
            raise UsageError(f"the plan names partition {t}-{p}, but {t!r} has {desc.partition_count} partitions")
        if not replicas:
            raise UsageError(f"the plan gives partition {t}-{p} no replicas")
        if len(set(replicas)) != len(replicas):
            raise UsageError(f"the plan repeats a broker in the replicas of {t}-{p}: {replicas}")
    _check_brokers(bootstrap, sorted({b for r in moves.values() for b in r}), "the plan")
    return {tp: current[tp] for tp in moves}


def _check_brokers(bootstrap: str, brokers: list[int], where: str) -> None:
    live = {b.id for b in admin.cluster_info(bootstrap).brokers}
    unknown = sorted(set(brokers) - live)
    if unknown:
        listed = ",".join(str(b) for b in sorted(live))
        raise UsageError(f"{where} names broker(s) {','.join(map(str, unknown))} not in the cluster (live: {listed})")


def throttle_for(current: Moves, moves: Moves, rate: int) -> Throttle:
    """The configs kafka-reassign-partitions.sh --throttle sets for these moves (pure)."""
    if rate <= 0:
        raise UsageError(f"--throttle must be a positive rate in bytes/s, got {rate}")
    leaders: dict[str, list[str]] = {}
    followers: dict[str, list[str]] = {}
    brokers: set[int] = set()
    for (topic, p), target in sorted(moves.items()):
        before = current[(topic, p)]
        if before == target:
            continue
        brokers.update(before)
        brokers.update(target)
        leaders.setdefault(topic, []).extend(f"{p}:{b}" for b in before)
        followers.setdefault(topic, []).extend(f"{p}:{b}" for b in target if b not in before)
    topic_configs = {
        t: {LEADER_REPLICAS_KEY: ",".join(leaders[t]), FOLLOWER_REPLICAS_KEY: ",".join(followers.get(t, []))}
        for t in leaders
    }
    return Throttle(rate, sorted(brokers), topic_configs)


def set_throttle(bootstrap: str, throttle: Throttle) -> None:
    configs.alter_broker_configs(bootstrap, throttle.brokers, {k: str(throttle.rate) for k in RATE_KEYS})
    for topic, cfg in throttle.topic_configs.items():
        admin.alter_topic_configs(bootstrap, topic, set_configs={k: v for k, v in cfg.items() if v})


def clear_throttle(bootstrap: str, topic: str, brokers: list[int]) -> None:
    """Remove throttle configs from the topic and the given brokers (absent keys are fine)."""
    if brokers:
        configs.alter_broker_configs(bootstrap, brokers, delete=list(RATE_KEYS))
    admin.alter_topic_configs(bootstrap, topic, delete=[LEADER_REPLICAS_KEY, FOLLOWER_REPLICAS_KEY])


def execute(
    bootstrap: str,
    zk_connect: str,
    topic: str,
    moves: Moves,
    throttle: int | None = None,
    timeout: float = 600.0,
    on_progress: Callable[[int, int], None] | None = None,
) -> ReassignResult:
    """Start the moves (throttled if asked), wait until the controller finished them, remove the throttle."""
    current = validate(bootstrap, topic, moves)
    plan = throttle_for(current, moves, throttle) if throttle is not None else None
    if list_partition_reassignments(zk_connect):
        raise ClusterctlError(
            "a partition reassignment is already in progress", hint="wait for it: clusterctl reassign TOPIC --verify"
        )
    if plan is not None:
        set_throttle(bootstrap, plan)
    try:
        alter_partition_reassignments(zk_connect, moves)
    except BaseException:
        if plan is not None:
            clear_throttle(bootstrap, topic, plan.brokers)
        raise
    seconds = wait(bootstrap, zk_connect, topic, len(moves), timeout, on_progress, plan.brokers if plan else None)
    return ReassignResult(topic, len(moves), seconds, throttle, plan is not None, plan_doc(moves))


def wait(
    bootstrap: str,
    zk_connect: str,
    topic: str,
    total: int,
    timeout: float,
    on_progress: Callable[[int, int], None] | None = None,
    throttled_brokers: list[int] | None = None,
) -> float:
    """Poll until no move is pending; then remove throttles (None: leave broker rates alone)."""
    started = time.monotonic()
    throttle_note = "the throttle stays set until they finish; " if throttled_brokers else ""
    wait_until(
        lambda: list_partition_reassignments(zk_connect),
        timeout=timeout,
        what=f"the partition moves of topic {topic!r} to finish",
        interval=1.0,
        done=lambda pending: not pending,
        seen=lambda pending: f"{len(pending)} partition moves still running",
        on_poll=None if on_progress is None else lambda pending, _: on_progress(total - len(pending), total),
        started=started,
        hint=f"{throttle_note}run `clusterctl reassign {topic} --verify` to wait for them",
    )
    if throttled_brokers is not None:
        clear_throttle(bootstrap, topic, throttled_brokers)
    return round(time.monotonic() - started, 1)


def verify(bootstrap: str, zk_connect: str, topic: str, timeout: float = 600.0) -> float:
    """Wait for running moves, then remove every throttle (kafka-reassign-partitions.sh --verify)."""
    pending = len(list_partition_reassignments(zk_connect))
    brokers = [b.id for b in admin.cluster_info(bootstrap).brokers]
    return wait(bootstrap, zk_connect, topic, max(pending, 1), timeout, None, brokers)
