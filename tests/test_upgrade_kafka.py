"""The rolling upgrade on real Kafka from Maven Central: a KRaft cluster on 3.9 (3 controllers + 3 brokers) rolled to
the newest 4.x built here. First the drill `upgrade-rollback` (part way up, a planted failure, all the way back);
then `clusterctl upgrade` is stopped with Ctrl-C in the middle of a broker's roll, says where it stopped, and the drill
`upgrade-to-kafka4` resumes it, restarts no node twice, finalizes the feature levels. Both drills run acks=all
idempotent load with a committing group and snapshots, and lose nothing. Test-only spec: a free subnet and ports.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _runtime_helpers import CLI, cli, release, render, up_json, write_kraft_spec

from clusterctl.images import build as images
from clusterctl.images import kafka_maven
from clusterctl.kafka import upgrade_plan as plan
from clusterctl.kafka.brokers import metadata_brokers
from clusterctl.spec.model import load_spec
from clusterctl.wait import wait_until

pytestmark = [pytest.mark.real_kafka, pytest.mark.docker]
FROM = "3.9.2"


@pytest.fixture
def kraft_39(tmp_path: Path) -> Iterator[tuple[Path, str]]:
    built = {r.target: r for r in images.build_images(["kafka"], kafka_version=FROM)}
    assert built["kafka"].image == f"clusterctl/kafka:{FROM}"
    newest = {r.target: r for r in images.build_images(["kafka"], kafka_version=kafka_maven.NEWEST_KAFKA_LINE)}
    to = newest["kafka"].image.rpartition(":")[2]
    assert to.startswith("4."), to
    spec_path = write_kraft_spec(tmp_path, f"ctlupg-{uuid.uuid4().hex[:6]}", FROM)
    render(spec_path)
    try:
        up_json(spec_path, timeout=300)
        yield spec_path, to
    finally:
        release(spec_path)


def _container_starts(spec_path: Path) -> dict[str, str]:
    spec = load_spec(spec_path)
    topo = spec.topology
    names = [topo.controller_container(c) for c in topo.controller_ids] + [
        topo.broker_container(b) for b in topo.broker_ids
    ]
    out = subprocess.run(["docker", "inspect", "-f", "{{.Name}} {{.Id}} {{.Config.Image}}", *names],
                         capture_output=True, text=True, timeout=60, check=True).stdout  # fmt: skip
    return {line.split()[0].lstrip("/"): " ".join(line.split()[1:]) for line in out.splitlines()}


class _Starts:
    """The container start events of `names`, read from `docker events` as they happen (the engine keeps only its
    last few hundred events for `--since`: on a busy machine the roll's early starts were gone from it)."""

    def __init__(self, names: set[str]) -> None:
        self.names = names
        self.proc = subprocess.Popen(["docker", "events", "--filter", "type=container", "--filter", "event=start",
                                      "--format", "{{.Actor.Attributes.name}}"],
                                     stdout=subprocess.PIPE, text=True)  # fmt: skip
        time.sleep(1.0)  # subscribed before the first start it must see

    def stop(self) -> list[str]:
        time.sleep(1.0)  # the last start delivered
        self.proc.terminate()
        out, _err = self.proc.communicate(timeout=30)
        return [n for n in out.split() if n in self.names]

    def __enter__(self) -> _Starts:
        return self

    def __exit__(self, *_exc: object) -> None:
        if self.proc.poll() is None:  # a failed assertion before stop(): no `docker events` left running
            self.proc.kill()
            self.proc.wait(timeout=30)


def test_rollback_then_an_interrupted_upgrade_resumed_under_load(kraft_39: tuple[Path, str]) -> None:
    spec_path, to = kraft_39
    state_path = plan.state_path(spec_path)

    # upgrade-rollback: controllers and two brokers to `to`, the third broker killed, all back to FROM
    res = cli(spec_path, "scenario", "run", "upgrade-rollback", "--report-dir", "report-rollback", "--json",
              timeout=1800)  # fmt: skip
    assert res.returncode == 0, res.stderr[-4000:]
    back: dict[str, Any] = json.loads(res.stdout)
    print("\nupgrade-rollback: " + json.dumps(back["phases"], indent=1))
    assert back["verdict"] == "PASS" and back["verify"]["lost_count"] == 0
    assert [s["name"] for s in back["snapshots"]] == ["before", "after"]
    rolled = [p["phase"] for p in back["phases"] if p["done"]]
    assert [p for p in rolled if p.endswith(f" to {to}")][-2:] == [f"kafka1 to {to}", f"kafka2 to {to}"], rolled
    assert len([p for p in rolled if p.endswith(f" to {FROM}")]) == 6, rolled
    assert load_spec(spec_path).kafka.version == FROM
    status = json.loads(cli(spec_path, "upgrade", "--status", "--json").stdout)
    assert (status["to_version"], status["finalized"], status["pending"]) == (FROM, None, [])

    before = _container_starts(spec_path)
    assert all(v.endswith(f"clusterctl/kafka:{FROM}") for v in before.values()), before
    with _Starts(set(before)) as starts:
        # Ctrl-C in the middle of a broker's roll: the controllers and kafka1 done, kafka2 begun
        proc = subprocess.Popen([CLI, "-s", str(spec_path), "upgrade", "--to", to], cwd=spec_path.parent,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline and proc.poll() is None:
            state = plan.load_state(state_path) if state_path.exists() else None
            if state is not None and len(state.done) == 4 and state.current is not None:
                break
            time.sleep(0.2)
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        _out, err = proc.communicate(timeout=120)
        assert proc.returncode == 130, err
        assert err.strip().splitlines()[-1] == "error: interrupted by SIGINT", err
        state = plan.load_state(state_path)
        assert state is not None and len(state.done) == 4 and state.current == "kafka2" and state.finalized is None

        status = json.loads(cli(spec_path, "upgrade", "--status", "--json").stdout)
        assert (status["from_version"], status["to_version"], status["done"]) == (FROM, to, state.done)
        assert status["current"] == state.current and status["finalized"] is None
        assert load_spec(spec_path).kafka.version == to  # the spec names the version the roll is going to

        # kafka2 may still be starting (its recreate finished before the signal was let through): a drill starts
        # on a whole cluster, as an operator would start it
        bootstrap = load_spec(spec_path).topology.bootstrap_servers
        wait_until(lambda: metadata_brokers(bootstrap)[0], timeout=120, what="every broker back", interval=1.0,
                   done=lambda ids: ids is not None and len(ids) == 3)  # fmt: skip
        res = cli(spec_path, "scenario", "run", "upgrade-to-kafka4", "--report-dir", "report", "--json", timeout=1800)
        assert res.returncode == 0, res.stderr[-4000:]
        result: dict[str, Any] = json.loads(res.stdout)
        print("\nupgrade-to-kafka4 (resumed): " + json.dumps(result["phases"], indent=1))
        assert result["verdict"] == "PASS" and result["verify"]["lost_count"] == 0
        assert [s["name"] for s in result["snapshots"]] == ["before", "after"]

        after = _container_starts(spec_path)
        assert all(v.endswith(f"clusterctl/kafka:{to}") for v in after.values()), after
        final = plan.load_state(state_path)
        assert final is not None and final.finalized == plan.release(to)
        # Docker's own record: each node's container started exactly once since the roll began, none twice
        assert sorted(starts.stop()) == sorted(before), final.history
        rolled_in_drill = [p["phase"] for p in result["phases"]]
        assert len(rolled_in_drill) == len(before) - 4, rolled_in_drill  # the four rolled before Ctrl-C are not again
        status = json.loads(cli(spec_path, "upgrade", "--status", "--json").stdout)
        assert status["finalized"] == plan.release(to) and status["pending"] == [] and status["metadata_level"] >= 33
