"""The pause fault retries runc's transient "unable to freeze" (seen once in 5 real-Kafka drills under load).

runc's freeze failure cannot be provoked on demand, so a stand-in container plays the engine's part here; every
other pause path runs against real containers in test_chaos_zk.py and test_chaos_kafka.py.
"""

from __future__ import annotations

from typing import Any

import pytest
from docker.errors import APIError

from clusterctl.chaos import faults
from clusterctl.errors import ClusterctlError
from clusterctl.runtime import docker as dk

FREEZE_ERROR = "Cannot pause container abc: OCI runtime pause failed: unable to freeze: unknown"


class FlakyFreezer:
    name = "lab-kafka1"

    def __init__(self, failures: int, message: str = FREEZE_ERROR) -> None:
        self.failures, self.message, self.calls = failures, message, 0
        self.attrs: dict[str, Any] = {"State": {"Status": "running"}}

    def reload(self) -> None:
        pass

    def pause(self) -> None:
        self.calls += 1
        if self.calls <= self.failures:
            raise APIError(self.message)
        self.attrs["State"]["Status"] = "paused"


def test_transient_freeze_failure_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    c = FlakyFreezer(failures=2)
    monkeypatch.setattr(faults, "_container", lambda _name: c)
    res = faults.pause("broker 1", c.name)
    assert (c.calls, res.before, res.after) == (3, "running", "paused")


def test_persistent_freeze_failure_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    c = FlakyFreezer(failures=99)
    monkeypatch.setattr(faults, "_container", lambda _name: c)
    with pytest.raises(ClusterctlError, match=r"^pause broker 1 \(lab-kafka1\) failed: .*unable to freeze"):
        faults.pause("broker 1", c.name)
    assert c.calls == dk.FREEZE_ATTEMPTS


def test_other_pause_errors_are_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    c = FlakyFreezer(failures=1, message="Container abc is not running")
    monkeypatch.setattr(faults, "_container", lambda _name: c)
    with pytest.raises(ClusterctlError, match="is not running"):
        faults.pause("broker 1", c.name)
    assert c.calls == 1
