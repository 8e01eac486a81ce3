"""Swarm operations for real, on a swarm of two namespace hosts (tests/_nshosts.py): h1 (rack r1, the manager)
runs ZooKeeper + tansu, h2 (rack r2) runs nothing of the stack. `swarm nodes` / `swarm label` show and set the
racks, refusing bad input with one line and nothing changed; `chaos kill/stop/pause` reach a task's container
on its host and `chaos heal` waits for the swarm's new task; `chaos drain-node` stops the rack's tasks until heal,
and is refused when another node has the same rack label. One harness and one cluster for the module.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from _nshosts import NsHosts
from _runtime_helpers import cli

pytestmark = [
    pytest.mark.docker,
    pytest.mark.skipif(os.geteuid() != 0, reason="namespace hosts need root (ip netns, dockerd)"),
    pytest.mark.skipif(not (shutil.which("dockerd") and shutil.which("nsenter")), reason="no dockerd/nsenter"),
]
IMAGES = ["clusterctl/zookeeper:3.8.0", "clusterctl/tansu:0.6.0"]


@dataclass
class Swarm:
    hosts: NsHosts
    spec_path: Path
    name: str

    @property
    def h1(self) -> Any:
        return self.hosts.hosts[0]

    @property
    def h2(self) -> Any:
        return self.hosts.hosts[1]

    def run(self, *args: str, code: int = 0) -> subprocess.CompletedProcess[str]:
        res = cli(self.spec_path, *args)
        assert res.returncode == code, (args, res.returncode, res.stdout[-2000:], res.stderr[-2000:])
        return res

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "--json").stdout)

    def nodes(self) -> dict[str, dict[str, Any]]:
        """`swarm nodes --json` by node address."""
        return {row["address"]: row for row in self.json("swarm", "nodes")}


def _spec(hosts: NsHosts, name: str) -> dict[str, Any]:
    h1, h2 = hosts.hosts
    return {
        "name": name,
        "profile": "offline",
        "network": {"subnet": hosts.free_subnet()},
        "zookeeper": {"nodes": 1, "tick_time_ms": 500},
        "kafka": {
            "engine": "tansu", "brokers": 1, "jmx_port": None,
            "defaults": {"replication_factor": 1, "min_insync_replicas": 1},
        },
        "kafka_manager": {"enabled": False},
        "deploy": {
            "target": "swarm", "endpoint": h1.endpoint,
            # r2 has no endpoint: nothing of the stack runs there (zk1 and kafka1 go to r1), so no images either
            "racks": [{"name": "r1", "address": h1.ip, "endpoint": h1.endpoint}, {"name": "r2", "address": h2.ip}],
        },
    }  # fmt: skip


@pytest.fixture(scope="module")
def sw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Swarm]:
    hosts = NsHosts(2)
    try:
        with hosts:
            hosts.label_racks()  # r1, r2
            hosts.load_images(IMAGES, hosts=hosts.hosts[:1])  # h1 only (r2 runs nothing of the stack)
            directory = tmp_path_factory.mktemp("swops")
            name = f"so{hosts.tag}"
            spec_path = directory / "clusterctl.yaml"
            spec_path.write_text(yaml.safe_dump(_spec(hosts, name), sort_keys=False))
            s = Swarm(hosts, spec_path, name)
            s.run("render")
            try:
                s.run("up", "--timeout", "240")
                yield s
            finally:
                down = cli(spec_path, "down", "--volumes")
                assert down.returncode == 0, down.stderr
    finally:
        left_hosts = hosts.leftovers()
    assert left_hosts == {}, left_hosts


def test_nodes_show_each_node_its_rack_and_the_stacks_tasks(sw: Swarm) -> None:
    nodes = sw.nodes()
    assert sorted(nodes) == sorted([sw.h1.ip, sw.h2.ip])
    n1, n2 = nodes[sw.h1.ip], nodes[sw.h2.ip]
    assert (n1["role"], n1["state"], n1["availability"]) == ("manager", "ready", "active")
    assert (n1["label"], n1["rack"], n1["tasks"]) == ("r1", "r1", ["kafka1", "zk1"])
    assert (n2["role"], n2["label"], n2["rack"], n2["tasks"]) == ("worker", "r2", "r2", [])
    table = sw.run("swarm", "nodes").stdout
    assert "kafka1,zk1" in table and sw.h2.ip in table


@pytest.mark.parametrize(
    ("args", "code", "says"),
    [
        (("{h2}", "r9"), 2, "rack 'r9' is not in deploy.racks (r1, r2); nothing was changed"),
        (("{h2}", "r1"), 2, "rack r1 is on node"),
        (("{h1}", "--remove"), 2, "runs kafka1, zk1 of stack {name}, pinned to rack r1: changing its label would "
                                  "stop them; nothing was changed"),
        (("nosuchnode", "r2"), 3, "no swarm node 'nosuchnode'; nodes:"),
        (("{hostname}", "r2"), 2, "names 2 swarm nodes"),  # namespace hosts share this machine's hostname
        (("{h2}", "r2", "--remove"), 2, "give a RACK or --remove"),
    ],
)  # fmt: skip
def test_label_bad_input_is_one_line_and_changes_nothing(
    sw: Swarm, args: tuple[str, ...], code: int, says: str
) -> None:
    before = sw.nodes()
    hostname = before[sw.h1.ip]["hostname"]
    fill = {"h1": sw.h1.ip, "h2": sw.h2.ip, "hostname": hostname, "name": sw.name}
    res = sw.run("swarm", "label", *(a.format(**fill) for a in args), code=code)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and says.format(**fill) in lines[0], res.stderr
    res = sw.run("swarm", "label", *(a.format(**fill) for a in args), "--json", code=code)
    assert json.loads(res.stdout)["exit_code"] == code
    assert sw.nodes() == before


def test_label_remove_and_set_again(sw: Swarm) -> None:
    removed = sw.json("swarm", "label", sw.h2.ip, "--remove")
    assert (removed["before"], removed["after"], removed["changed"]) == ("r2", None, True)
    assert (sw.nodes()[sw.h2.ip]["label"], sw.nodes()[sw.h2.ip]["rack"]) == (None, None)
    set_ = sw.json("swarm", "label", sw.h2.ip, "r2")
    assert (set_["before"], set_["after"], set_["changed"]) == (None, "r2", True)
    again = sw.json("swarm", "label", sw.h2.ip, "r2")
    assert again["changed"] is False
    assert sw.nodes()[sw.h2.ip]["rack"] == "r2"


def test_not_a_swarm_and_a_compose_spec_are_refused(sw: Swarm, tmp_path: Path) -> None:
    data = _spec(sw.hosts, "noswarm")
    data["deploy"]["endpoint"] = None  # the local engine, which is no swarm here
    path = tmp_path / "clusterctl.yaml"
    path.write_text(yaml.safe_dump(data))
    res = cli(path, "swarm", "label", sw.h2.ip, "r2")
    assert res.returncode == 2 and "is not in a swarm" in res.stderr and "nothing was changed" in res.stderr
    del data["deploy"]
    path.write_text(yaml.safe_dump(data))
    res = cli(path, "swarm", "nodes")
    assert res.returncode == 2 and "deploy.target compose" in res.stderr, res.stderr
    res = cli(path, "chaos", "drain-node", sw.h2.ip)
    assert res.returncode == 2 and "deploy.target compose" in res.stderr, res.stderr


def _healed(sw: Swarm) -> dict[str, Any]:
    healed = sw.json("chaos", "heal", "--timeout", "180")
    assert healed["wait"]["brokers"] == [1] and healed["wait"]["zk_serving"] == [1], healed
    status = sw.json("status")
    assert {s["service"]: s["state"] for s in status["services"]} == {"zk1": "running", "kafka1": "running"}
    assert status["broker_reachable"] is True
    return dict(healed)


def test_kill_a_broker_and_a_zookeeper_task_then_heal(sw: Swarm) -> None:
    killed = sw.json("chaos", "kill", "kafka1")
    assert len(killed) == 1
    k = killed[0]
    assert (k["action"], k["target"], k["before"], k["after"]) == ("kill", "broker 1", "running", "exited")
    assert k["container"].startswith(f"{sw.name}_kafka1.1.")
    assert "restart delay" in k["note"]
    zk = sw.json("chaos", "kill-zk", "1")[0]
    assert (zk["target"], zk["after"]) == ("zk 1", "exited") and zk["container"].startswith(f"{sw.name}_zk1.1.")
    healed = _healed(sw)
    # heal reports a task it found not running; the swarm may already have restarted one (its 10 s restart delay
    # can pass before heal looks on a loaded machine), so the new tasks are checked in `status` as well
    started = {r["target"]: r for r in healed["healed"] if r["action"] == "start"}
    assert set(started) <= {"broker 1", "zk 1"} and all(r["after"] == "running" for r in started.values()), healed
    for target, service, old in (("broker 1", "kafka1", k["container"]), ("zk 1", "zk1", zk["container"])):
        running = sw.hosts.manager.docker(
            "service",
            "ps",
            "--no-trunc",
            f"{sw.name}_{service}",
            "--filter",
            "desired-state=running",
            "--format",
            "{{.ID}}",
        ).split()
        assert len(running) == 1 and not old.endswith(running[0]), (service, running, old)  # the swarm's new task
        if target in started:
            assert started[target]["container"].endswith(running[0]), healed


def test_pause_and_stop_reach_the_task_then_heal(sw: Swarm) -> None:
    paused = sw.json("chaos", "pause", "zk1", "--for", "1")
    assert [(r["action"], r["before"], r["after"]) for r in paused] == [
        ("pause", "running", "paused"),
        ("unpause", "paused", "running"),
    ]
    stopped = sw.json("chaos", "stop-broker", "1")[0]
    assert (stopped["action"], stopped["before"], stopped["after"]) == ("stop-broker", "running", "exited")
    res = sw.run("chaos", "start-broker", "1", code=2)
    assert "the service starts its task again by itself" in res.stderr
    _healed(sw)


def test_drain_refused_when_another_node_has_the_rack(sw: Swarm) -> None:
    """A second node labelled r1 (by hand: `swarm label` refuses it) could take r1's tasks without their volumes."""
    sw.hosts.manager.docker("node", "update", "--label-add", "clusterctl.rack=r1", sw.hosts.node_id(sw.h2))
    try:
        before = sw.nodes()
        res = sw.run("chaos", "drain-node", sw.h1.ip, code=2)
        assert len(res.stderr.strip().splitlines()) == 1
        assert "would move kafka1, zk1 to" in res.stderr and "without their volumes; refused" in res.stderr
        assert sw.nodes() == before  # still active, the tasks still on h1
    finally:
        sw.hosts.manager.docker("node", "update", "--label-add", "clusterctl.rack=r2", sw.hosts.node_id(sw.h2))


def test_drain_stops_the_racks_tasks_until_heal(sw: Swarm) -> None:
    drained = sw.json("chaos", "drain-node", sw.h1.ip)
    node = drained[0]
    assert (node["action"], node["before"], node["after"]) == ("drain-node", "active", "drain")
    assert "pinned to rack r1, pending until `chaos heal`" in node["note"]
    assert sorted(r["target"] for r in drained[1:]) == ["broker 1", "zk 1"]
    assert all(r["after"] != "running" for r in drained[1:])
    now = sw.nodes()[sw.h1.ip]
    assert (now["availability"], now["tasks"]) == ("drain", [])
    assert sw.nodes()[sw.h2.ip]["tasks"] == []  # pinned: nothing moved to the other rack
    res = sw.run("chaos", "drain-node", sw.h1.ip, code=2)
    assert "is drained already" in res.stderr
    healed = _healed(sw)
    assert healed["healed"][0]["action"] == "activate-node"
    assert sorted(r["target"] for r in healed["healed"] if r["action"] == "start") == ["broker 1", "zk 1"]
    assert sw.nodes()[sw.h1.ip]["tasks"] == ["kafka1", "zk1"]
