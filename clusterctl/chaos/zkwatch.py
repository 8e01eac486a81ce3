"""The observer's ZooKeeper watches (kazoo): /controller, /brokers/ids and each partition's state znode."""

from __future__ import annotations

import contextlib
import json
import math
from typing import Any

from clusterctl.chaos.recorder import Recorder, ids_text
from clusterctl.wait import wait_until


class ZkWatcher(Recorder):
    """Registers the watches once the session exists; kazoo calls them back on its own thread."""

    def _start_zk_watches(self) -> None:
        from kazoo.client import KazooClient

        from clusterctl.zookeeper.client import _KAZOO_LOG

        client = KazooClient(hosts=self.zk_connect, timeout=10.0, logger=_KAZOO_LOG, connection_retry={"max_tries": -1})
        client.add_listener(lambda state: self.event("zk-watch", "session", "observer", f"session {state}", state))
        self._zk = client
        # watches are registered once the session exists; start_async so a lost quorum does not block us
        client.start_async()
        self._spawn(self._register_watches, "observe-zk-watch")

    def _register_watches(self) -> None:
        client = self._zk
        # no bound: the session comes when the quorum does, or the observer stops first
        wait_until(
            lambda: self._stop.is_set() or client.connected,
            timeout=math.inf,
            interval=0.2,
            what="the observer's ZooKeeper session",
        )
        if self._stop.is_set():
            return

        def on_controller(data: bytes | None, stat: Any) -> None:
            value = _decode(data)
            cid = value.get("brokerid") if isinstance(value, dict) else None
            if cid != self._last_zk_controller:
                self._last_zk_controller = cid
                self.event(
                    "zk-watch", "controller", "/controller", f"controller {cid if cid is not None else '-'}", cid
                )

        def on_brokers(children: list[str]) -> None:
            ids = tuple(sorted(int(c) for c in children if c.isdigit()))
            if ids != self._last_zk_brokers:
                gone = sorted(set(self._last_zk_brokers or ()) - set(ids))
                detail = f"registered {ids_text(ids)}" + (f" (lost {gone})" if gone and self._last_zk_brokers else "")
                self._last_zk_brokers = ids
                self.event("zk-watch", "brokers", "/brokers/ids", detail, list(ids))

        with contextlib.suppress(Exception):
            client.DataWatch("/controller", on_controller)
            self._watch_when_created("/brokers/ids", on_brokers)
        with self._lock:
            topics = list(self.topics)
        for topic in topics:
            self._watch_topic_states(topic)

    def _watch_when_created(self, path: str, fn: Any) -> None:
        """ChildrenWatch needs the node; wait for it with an exists-watch (a ZK-only ensemble has none)."""
        client = self._zk

        def on_exists(data: bytes | None, stat: Any) -> bool | None:
            if stat is not None:
                client.ChildrenWatch(path, fn, allow_session_lost=True)
                return False  # stop this DataWatch
            return None

        client.DataWatch(path, on_exists)

    def _watch_topic_states(self, topic: str) -> None:
        client = self._zk
        base = f"/brokers/topics/{topic}/partitions"

        def watch_partition(pid: int) -> None:
            path = f"{base}/{pid}/state"

            def on_state(data: bytes | None, stat: Any) -> None:
                value = _decode(data)
                if not isinstance(value, dict):
                    return
                state = (int(value.get("leader", -1)), tuple(sorted(value.get("isr", []))))
                key = (topic, pid)
                prev = self._last_zk_part.get(key)
                if state == prev:
                    return
                self._last_zk_part[key] = state
                self.event(
                    "zk-watch",
                    "partition-state",
                    f"{topic}-{pid}",
                    f"leader {state[0]} isr {ids_text(state[1])} (epoch {value.get('leader_epoch')})",
                    {"leader": state[0], "isr": list(state[1])},
                )

            client.DataWatch(path, on_state)

        watched: set[int] = set()

        def on_partitions(children: list[str]) -> None:
            for c in children:
                if c.isdigit() and int(c) not in watched:
                    watched.add(int(c))
                    watch_partition(int(c))

        with contextlib.suppress(Exception):
            self._watch_when_created(base, on_partitions)


def _decode(data: bytes | None) -> Any:
    if not data:
        return None
    try:
        return json.loads(data)
    except ValueError:
        return data.decode("utf-8", "replace")
