"""Namespace hosts (tests/_nshosts.py): extra Docker daemons in network namespaces form a swarm, run a
service on an attachable overlay, and tear down leaving nothing behind.

NSHOSTS=3 runs the multi-host case (CI runs one host: its 2 cores are shared).
"""

from __future__ import annotations

import os
import shutil

import pytest
from _nshosts import NsHosts

from clusterctl.wait import wait_until

pytestmark = [
    pytest.mark.docker,
    pytest.mark.skipif(os.geteuid() != 0, reason="namespace hosts need root (ip netns, dockerd)"),
    pytest.mark.skipif(not (shutil.which("dockerd") and shutil.which("nsenter")), reason="no dockerd/nsenter"),
]
BASE = "clusterctl/base:bookworm"


@pytest.mark.parametrize("n", [int(os.environ.get("NSHOSTS", "1"))])
def test_namespace_hosts_form_a_swarm_and_leave_nothing(n: int) -> None:
    hosts = NsHosts(n)
    try:
        with hosts:
            nodes = hosts.nodes()
            assert sorted(node["Status"]["Addr"] for node in nodes) == sorted(h.ip for h in hosts.hosts)
            assert all(node["Status"]["State"] == "ready" for node in nodes)
            assert sum(1 for node in nodes if node["Spec"]["Role"] == "manager") == 1
            racks = hosts.label_racks()
            assert racks == {f"r{h.index}": h.ip for h in hosts.hosts}
            hosts.load_images([BASE])
            m = hosts.manager
            m.docker("network", "create", "-d", "overlay", "--attachable", "--subnet", hosts.free_subnet(), "probe")
            # one task per rack, each pinned by its label, answering on a host-mode port of its own host
            for h in hosts.hosts:
                m.docker(
                    "service", "create", "-d", "--name", f"p{h.index}", "--network", "probe",
                    "--constraint", f"node.labels.clusterctl.rack==r{h.index}",
                    "--publish", "mode=host,target=7000,published=7000", "--endpoint-mode", "dnsrr",
                    BASE, "bash", "-c", "exec python3 -m http.server 7000 2>/dev/null || sleep infinity",
                )  # fmt: skip

            def running() -> dict[str, str]:
                names = [f"p{h.index}" for h in hosts.hosts]
                fmt = "{{.Name}} {{.CurrentState}} {{.Node}}"
                out = m.docker("service", "ps", "--filter", "desired-state=running", "--format", fmt, *names)
                return {ln.split()[0]: ln for ln in out.splitlines() if " Running " in ln}

            tasks = wait_until(running, timeout=120, what=f"{n} probe tasks running", done=lambda r: len(r) == n,
                               seen=str)  # fmt: skip
            assert len(tasks) == n
            # each task's container is on the host its rack names, not elsewhere
            for h in hosts.hosts:
                names = h.docker("ps", "--format", "{{.Names}}").split()
                assert [x for x in names if x.startswith("p")] and all(x.startswith(f"p{h.index}.") for x in names), (
                    h.name,
                    names,
                )
    finally:
        left = hosts.leftovers()
    assert left == {}, left
