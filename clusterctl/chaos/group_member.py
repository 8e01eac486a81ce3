"""One member of a drill's consumer group, in a process of its own (drill_group.py starts it), so that a member's
crash is a SIGKILL of this process: no LeaveGroup, no last commit.

    python -m clusterctl.chaos.group_member --bootstrap B --topic T --group G --protocol consumer --member 2 --log F

It subscribes to the topic with group.protocol classic or consumer and appends to its log (JSON lines, each
flushed as it is written):

    {"t": 1718000000.1, "e": "start", "member": 2, "pid": 4711, "protocol": "consumer"}
    {"t": ..., "e": "assign", "p": [0, 2]}                 # partitions added (classic, eager: the whole assignment)
    {"t": ..., "e": "revoke", "p": [2]}                    # taken away; "lost" when the session had expired
    {"t": ..., "e": "read", "p": 0, "r": [[41, 97]], "ts": 1718000000093}
                                                           # the offsets one poll returned, as inclusive ranges,
                                                           # and the newest record timestamp (ms) among them
    {"t": ..., "e": "error", "error": "..."}
    {"t": ..., "e": "stop"}

Commits are at least once: an offset is stored for the next auto-commit (auto.commit.interval.ms) only after the
read line naming it is written, so no commit covers a record this log does not show. SIGTERM or SIGINT: it closes
(a last commit, LeaveGroup) and exits; it also exits when the process that started it is gone.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import sys
import time
from typing import IO, Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from clusterctl.chaos.group_timeline import ranges
from clusterctl.kafka.settings import consumer_config

BATCH = 500
POLL_S = 0.2


def member_config(args: argparse.Namespace) -> dict[str, Any]:
    """The member's consumer settings: auto-commit of stored offsets only, the protocol's session timing."""
    extra: dict[str, Any] = {
        "client.id": f"drill-member-{args.member}",
        "enable.auto.commit": True,
        "auto.commit.interval.ms": args.commit_interval_ms,
        "enable.auto.offset.store": False,
    }
    conf = consumer_config(args.bootstrap, args.group, group_protocol=args.protocol, **extra)
    if args.protocol == "classic":
        session = args.session_timeout_ms or 45000  # Kafka's default, as the consumer protocol's broker default
        conf["session.timeout.ms"] = session
        conf["heartbeat.interval.ms"] = min(3000, session // 3)  # Kafka's default, at most a third of the session
    return conf


class Member:
    def __init__(self, args: argparse.Namespace, log: IO[str]) -> None:
        self.args = args
        self.log = log
        self.stopping = False
        self.parent = os.getppid()

    def write(self, event: str, **fields: Any) -> None:
        self.log.write(json.dumps({"t": time.time(), "e": event, **fields}, separators=(",", ":")) + "\n")
        self.log.flush()

    def _assigned(self, _c: Consumer, tps: list[TopicPartition]) -> None:
        self.write("assign", p=sorted(tp.partition for tp in tps))

    def _revoked(self, _c: Consumer, tps: list[TopicPartition]) -> None:
        self.write("revoke", p=sorted(tp.partition for tp in tps))

    def _lost(self, _c: Consumer, tps: list[TopicPartition]) -> None:
        self.write("lost", p=sorted(tp.partition for tp in tps))

    def run(self) -> None:
        a = self.args
        c = Consumer(member_config(a))
        self.write("start", member=a.member, pid=os.getpid(), protocol=a.protocol)
        c.subscribe([a.topic], on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._lost)
        try:
            while not self.stopping and os.getppid() == self.parent:
                self._poll(c)
        finally:
            with contextlib.suppress(KafkaException, RuntimeError):
                c.close()
            self.write("stop")

    def _poll(self, c: Consumer) -> None:
        msgs = c.consume(num_messages=BATCH, timeout=POLL_S)
        now = time.time()
        by_partition: dict[int, list[int]] = {}
        newest: dict[int, int] = {}
        for m in msgs:
            err = m.error()
            if err is not None:
                if err.code() != KafkaError._PARTITION_EOF:
                    self.write("error", error=f"{err.name()}: {err.str()}")
                continue
            p = m.partition() or 0
            by_partition.setdefault(p, []).append(m.offset() or 0)
            newest[p] = max(newest.get(p, 0), m.timestamp()[1])
        for p, offsets in sorted(by_partition.items()):
            self.write("read", t=now, p=p, r=ranges(offsets), ts=newest[p])
        stored = [TopicPartition(self.args.topic, p, max(o) + 1) for p, o in by_partition.items()]
        if stored:
            with contextlib.suppress(KafkaException):  # a partition revoked meanwhile: its next owner reads it again
                c.store_offsets(offsets=stored)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m clusterctl.chaos.group_member")
    ap.add_argument("--bootstrap", required=True)
    ap.add_argument("--topic", required=True)
    ap.add_argument("--group", required=True)
    ap.add_argument("--protocol", choices=("classic", "consumer"), required=True)
    ap.add_argument("--member", type=int, required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--session-timeout-ms", type=int, default=None)
    ap.add_argument("--commit-interval-ms", type=int, default=1000)
    args = ap.parse_args(argv)
    with open(args.log, "a", encoding="utf-8") as log:
        member = Member(args, log)

        def stop(_sig: int, _frame: Any) -> None:
            member.stopping = True

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
        try:
            member.run()
        except KafkaException as exc:
            member.write("error", error=str(exc), fatal=True)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
