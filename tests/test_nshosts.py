"""Namespace hosts (tests/_nshosts.py): extra Docker daemons in network namespaces form a swarm, run a
service pinned to each labelled host on an attachable overlay, answer on each host's own address, and tear
down leaving nothing behind.

NSHOSTS=3 (the default) runs three hosts joined as one swarm; NSHOSTS=1 a one-node swarm.
"""

from __future__ import annotations

import os
import shutil
import socket
from functools import partial

import pytest
from _nshosts import NsHosts

from clusterctl.wait import wait_until

pytestmark = [
    pytest.mark.docker,
    pytest.mark.skipif(os.geteuid() != 0, reason="namespace hosts need root (ip netns, dockerd)"),
    pytest.mark.skipif(not (shutil.which("dockerd") and shutil.which("nsenter")), reason="no dockerd/nsenter"),
]
BASE = "clusterctl/base:bookworm"
# the base image has netcat-openbsd and no python: a probe that listens until it is stopped (-d: stdin is closed)
PROBE = ["nc", "-dlk", "7000"]


def _answers(address: str) -> bool:
    try:
        with socket.create_connection((address, 7000), timeout=2):
            return True
    except OSError:
        return False


@pytest.mark.parametrize("n", [int(os.environ.get("NSHOSTS", "3"))])
def test_namespace_hosts_form_a_swarm_and_leave_nothing(n: int) -> None:
    hosts = NsHosts(n, images=[BASE])
    try:
        with hosts:
            nodes = hosts.nodes()
            assert sorted(node["Status"]["Addr"] for node in nodes) == sorted(h.ip for h in hosts.hosts)
            assert all(node["Status"]["State"] == "ready" for node in nodes)
            assert sum(1 for node in nodes if node["Spec"]["Role"] == "manager") == 1
            racks = hosts.label_racks()
            assert racks == {f"r{h.index}": h.ip for h in hosts.hosts}
            m = hosts.manager
            m.docker("network", "create", "-d", "overlay", "--attachable", "--subnet", hosts.free_subnet(), "probe")
            # one task per rack, each pinned by its label, answering on a host-mode port of its own host;
            # --no-resolve-image: no registry for these hosts, the manager waited ~20 s per service for the lookup
            for h in hosts.hosts:
                m.docker(
                    "service", "create", "-d", "--no-resolve-image", "--name", f"p{h.index}", "--network", "probe",
                    "--constraint", f"node.labels.clusterctl.rack==r{h.index}", "--restart-condition", "none",
                    "--publish", "mode=host,target=7000,published=7000", "--endpoint-mode", "dnsrr",
                    BASE, *PROBE,
                )  # fmt: skip
            names = [f"p{h.index}" for h in hosts.hosts]

            def states() -> dict[str, str]:
                fmt = "{{.Name}} {{.CurrentState}} {{.Node}} {{.Error}}"
                out = m.docker("service", "ps", "--format", fmt, *names)
                return {ln.split()[0]: ln for ln in out.splitlines()}

            # no restarts: a probe that exits shows as Failed/Complete here, not as a Running that comes and goes
            wait_until(states, timeout=120, what=f"{n} probe tasks running", seen=str,
                       done=lambda t: len(t) == n and all(" Running " in s for s in t.values()))  # fmt: skip
            for h in hosts.hosts:
                # each task's container runs on the host its rack names, and nowhere else
                ps = h.docker("ps", "--filter", "status=running", "--format", "{{.Names}}").split()
                assert [x.split(".")[0] for x in ps] == [f"p{h.index}"], (h.name, ps)
                # and answers on that host's own address (a host-mode published port)
                wait_until(partial(_answers, h.ip), timeout=30, what=f"probe port 7000 on {h.ip}")
            assert len(states()) == n and all(" Running " in s for s in states().values()), states()
    finally:
        left = hosts.leftovers()
    assert left == {}, left
