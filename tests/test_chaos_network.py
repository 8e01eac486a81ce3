"""Grey network faults (delay, loss, rate, duplicate, corrupt) on a real cluster: 3 ZooKeeper nodes + tansu.

Test-only spec: name ctlnet-*, a free subnet and free host ports. The effects are
measured from the host (TCP connect round trips, ICMP echo counts) or from a peer's namespace; `heal` must leave
no rule, qdisc or handler behind. The kernel here has no netem, so this runs the userspace path for real; the
netem path is checked by the commands it would run.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import statistics
import struct
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from _runtime_helpers import CLI, cli, cli_json, running_cluster, wait_for

from clusterctl.chaos import degrade, faults, netns
from clusterctl.chaos.handlers import handler_pids
from clusterctl.images import build as images
from clusterctl.spec.model import ClusterSpec, load_spec
from clusterctl.zookeeper import client as zk

pytestmark = pytest.mark.docker

# ---------------------------------------------------------------- the netem path, by the commands it runs


def test_netem_commands_name_the_setting_and_the_peers() -> None:
    f = degrade.NetFault("delay", 200, 50)
    assert degrade.netem_commands(f, "eth0", []) == [
        ["tc", "qdisc", "add", "dev", "eth0", "root", "netem", "delay", "200ms", "50ms"]
    ]
    cmds = degrade.netem_commands(degrade.NetFault("loss", 10, to=["kafka2"]), "eth1", ["10.0.0.3", "10.0.0.4"])
    assert cmds[0] == ["tc", "qdisc", "add", "dev", "eth1", "root", "handle", "1:", "prio", "bands", "4"]
    assert cmds[1] == ["tc", "qdisc", "add", "dev", "eth1", "parent", "1:4", "netem", "loss", "10%"]
    assert [c[-5:] for c in cmds[2:]] == [
        ["ip", "dst", "10.0.0.3/32", "flowid", "1:4"],
        ["ip", "dst", "10.0.0.4/32", "flowid", "1:4"],
    ]
    assert degrade.netem_commands(degrade.NetFault("rate", 1000), "eth0", [])[0][-3:] == ["netem", "rate", "1000kbit"]
    assert degrade.netem_commands(degrade.NetFault("corrupt", 5), "eth0", [])[0][-2:] == ["corrupt", "5%"]


def test_userspace_commands() -> None:
    loss = degrade.userspace_commands(degrade.NetFault("loss", 10, to=["zk2"]), "eth0", ["10.9.0.2"])
    assert loss == [["iptables", "-w", "-I", "CLUSTERCTL", "-d", "10.9.0.2", "-m", "statistic", "--mode", "random",
                     "--probability", "0.1000", "-j", "DROP"]]  # fmt: skip
    queue = degrade.userspace_commands(degrade.NetFault("delay", 100), "eth0", [])[0]
    assert queue[:4] == ["iptables", "-w", "-A", "CLUSTERCTL"]
    assert queue[-5:] == ["-j", "NFQUEUE", "--queue-num", "1826", "--queue-bypass"]
    assert queue[4:8] == ["-m", "mark", "!", "--mark"]
    assert degrade.userspace_commands(degrade.NetFault("rate", 800), "eth0", [])[0][5:8] == ["root", "tbf", "rate"]
    htb = degrade.userspace_commands(degrade.NetFault("rate", 800, to=["zk2"]), "eth0", ["10.9.0.2"])
    assert "htb" in htb[0] and htb[-1][-3:] == ["10.9.0.2/32", "flowid", "1:2"]


@pytest.mark.parametrize(
    ("kind", "value", "jitter"),
    [("delay", -5, 0), ("delay", 0, 0), ("delay", 10**7, 0), ("delay", 100, 150), ("loss", 0, 0),
     ("loss", 150, 0), ("rate", 1, 0), ("corrupt", float("nan"), 0), ("loss", 10, 5), ("jam", 1, 0)],
)  # fmt: skip
def test_absurd_settings_are_refused(kind: str, value: float, jitter: float) -> None:
    with pytest.raises(degrade.UsageError):
        degrade.check(degrade.NetFault(kind, value, jitter))


# ---------------------------------------------------------------- real containers


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    images.build_images(["zookeeper", "tansu"])
    work = tmp_path_factory.mktemp("net")
    with running_cluster(work, f"ctlnet-{uuid.uuid4().hex[:6]}", heal=True) as spec_path:
        yield spec_path


def connect_ms(ip: str, port: int = 2181, n: int = 9) -> float:
    """Median TCP connect time to ip:port, ms (the SYN-ACK is what the node sends)."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        with socket.create_connection((ip, port), timeout=10):
            times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times)


def echo_replies(ip: str, count: int = 400) -> int:
    """ICMP echo requests sent to `ip` (1 ms apart) and the intact replies counted, duplicates included."""
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    ident = os.getpid() & 0xFFFF
    replies = 0

    def drain(timeout: float) -> int:
        n = 0
        s.settimeout(timeout)
        while True:
            try:
                data, (src, _) = s.recvfrom(1024)
            except (TimeoutError, BlockingIOError):
                return n
            icmp = data[(data[0] & 0x0F) * 4 :]
            ok = len(icmp) % 2 == 0 and _checksum(icmp) == 0  # raw sockets see packets before ICMP checks them
            if ok and src == ip and icmp[0] == 0 and struct.unpack("!H", icmp[4:6])[0] == ident:
                n += 1
            s.settimeout(timeout)

    try:
        for seq in range(count):
            hdr = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
            s.sendto(struct.pack("!BBHHH", 8, 0, _checksum(hdr), ident, seq), (ip, 0))
            replies += drain(0.001)
        replies += drain(0.5)
    finally:
        s.close()
    return replies


def _checksum(b: bytes) -> int:
    total = sum(struct.unpack(f"!{len(b) // 2}H", b))
    total = (total >> 16) + (total & 0xFFFF)
    return ~(total + (total >> 16)) & 0xFFFF


def leftovers(spec: ClusterSpec, name: str) -> list[str]:
    """Our iptables chain, a non-default root qdisc or a handler process still on node `name`."""
    node = netns.net_node(spec, name)
    out = [f"handler {p}" for p in handler_pids(node.container)]
    rules = netns.run(node.pid, ["iptables", "-w", "-S"]).stdout
    out += [line for line in rules.splitlines() if "CLUSTERCTL" in line]
    qdiscs = netns.run(node.pid, ["tc", "qdisc", "show", "dev", node.iface]).stdout
    out += [line for line in qdiscs.splitlines() if line.split()[1] in ("netem", "tbf", "htb", "prio")]
    return out


def heal(spec_path: Path) -> None:
    res = cli(spec_path, "chaos", "heal", "--no-wait")
    assert res.returncode == 0, res.stderr


def test_delay_is_the_round_trip_and_heal_leaves_nothing(cluster: Path) -> None:
    spec = load_spec(cluster)
    ip = netns.container_ip(spec, "zk1")
    base = connect_ms(ip)
    out = cli_json(cluster, "chaos", "delay", "zk1", "--ms", "200")
    assert out[0]["action"] == "delay" and out[0]["after"] == "degraded"
    assert "delay 200ms via nfqueue (userspace path)" in out[0]["note"]
    try:
        assert handler_pids(spec.topology.zk_container(1))
        delayed = connect_ms(ip)
        assert 0.8 * 200 <= delayed - base <= 1.2 * 200, (base, delayed)
        assert zk.quorum(spec, timeout=3.0).has_quorum  # the ensemble still serves through the delay
    finally:
        heal(cluster)
    assert leftovers(spec, "zk1") == []
    assert connect_ms(ip) < base + 20


def test_jitter_spreads_the_delay(cluster: Path) -> None:
    spec = load_spec(cluster)
    ip = netns.container_ip(spec, "zk2")
    base = connect_ms(ip)
    out = cli_json(cluster, "chaos", "delay", "zk2", "--ms", "100", "--jitter", "60")
    assert out[0]["note"] == "delay 100ms ±60ms via nfqueue (userspace path)"
    try:
        times = []
        for _ in range(60):
            t0 = time.perf_counter()
            socket.create_connection((ip, 2181), timeout=10).close()
            times.append((time.perf_counter() - t0) * 1000 - base)
    finally:
        heal(cluster)
    assert 80 <= statistics.mean(times) <= 120, times  # uniform ±60: the mean's standard error is ~4.5 ms
    # spread both ways, and bounded by ±60 ms: at most 3 of 60 samples outside it, since a connect timed from
    # the host also carries the host's own stalls (230 ms once, beside two real-Kafka clusters)
    assert min(times) < 75 and max(times) > 125 and sum(not 30 <= t <= 175 for t in times) <= 3, times
    assert leftovers(spec, "zk2") == []


def test_delay_towards_a_peer_only(cluster: Path) -> None:
    spec = load_spec(cluster)
    ip1 = netns.container_ip(spec, "zk1")
    cli_json(cluster, "chaos", "delay", "zk1", "--ms", "150", "--to", "zk2")
    try:
        assert connect_ms(ip1) < 50  # the host is not zk2
        zk2 = netns.net_node(spec, "zk2")
        code = f"import statistics,socket,time\nt=[]\nfor _ in range(7):\n t0=time.perf_counter();socket.create_connection(('{ip1}',2181),5).close();t.append(time.perf_counter()-t0)\nprint(statistics.median(t)*1000)"  # noqa: E501
        res = subprocess.run(["nsenter", "-t", str(zk2.pid), "-n", sys.executable, "-c", code],
                             capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
        assert 120 <= float(res.stdout) <= 180, res.stdout
    finally:
        heal(cluster)
    assert leftovers(spec, "zk1") == []


def test_loss_rate_is_measured(cluster: Path) -> None:
    spec = load_spec(cluster)
    ip = netns.container_ip(spec, "zk2")
    assert echo_replies(ip, 100) == 100
    out = cli_json(cluster, "chaos", "loss", "zk2", "--percent", "30")
    assert "via iptables statistic" in out[0]["note"]
    try:
        got = echo_replies(ip, 600)
    finally:
        heal(cluster)
    assert 0.22 <= 1 - got / 600 <= 0.38, got
    assert leftovers(spec, "zk2") == []


def test_duplicate_corrupt_and_rate(cluster: Path) -> None:
    spec = load_spec(cluster)
    ip = netns.container_ip(spec, "zk3")
    cli_json(cluster, "chaos", "duplicate", "zk3", "--percent", "50")
    try:
        got = echo_replies(ip, 300)
        assert 1.35 <= got / 300 <= 1.65, got
    finally:
        heal(cluster)
    cli_json(cluster, "chaos", "corrupt", "zk3", "--percent", "40")
    try:
        got = echo_replies(ip, 300)  # a corrupted echo reply fails its checksum: not counted as one
        assert 0.3 <= 1 - got / 300 <= 0.5, got
    finally:
        heal(cluster)
    out = cli_json(cluster, "chaos", "rate", "zk3", "--kbit", "800")
    assert "via tc tbf" in out[0]["note"]
    try:
        assert any("tbf" in x and "800Kbit" in x for x in leftovers(spec, "zk3"))
    finally:
        heal(cluster)
    assert leftovers(spec, "zk3") == []


def test_for_expires_and_ctrl_c_heals(cluster: Path) -> None:
    spec = load_spec(cluster)
    out = cli_json(cluster, "chaos", "delay", "zk1", "--ms", "50", "--for", "1")
    assert [r["action"] for r in out] == ["delay", "heal-network"]
    assert leftovers(spec, "zk1") == []
    proc = subprocess.Popen([CLI, "-s", str(cluster), "chaos", "loss", "zk1", "--percent", "5", "--for", "60"],
                            cwd=cluster.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
    node = netns.net_node(spec, "zk1")
    wait_for(lambda: "CLUSTERCTL" in netns.run(node.pid, ["iptables", "-w", "-S"]).stdout, 30, "the loss rule")
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 130
    assert leftovers(spec, "zk1") == []


def test_bad_input_is_one_line_and_applies_nothing(cluster: Path) -> None:
    spec = load_spec(cluster)
    cases = [
        (["delay", "zk9", "--ms", "100"], 3),
        (["delay", "zk1", "--ms", "-5"], 2),
        (["delay", "zk1", "--ms", "100", "--jitter", "500"], 2),
        (["loss", "zk1", "--percent", "1000"], 2),
        (["rate", "zk1", "--kbit", "0"], 2),
        (["delay", "zk1", "--ms", "100", "--to", "kafka9"], 3),
        (["delay", "zk1", "--ms", "100", "--for", "-1"], 2),
    ]
    for args, code in cases:
        res = cli(cluster, "chaos", *args)
        assert res.returncode == code, (args, res.returncode, res.stderr)
        assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert leftovers(spec, "zk1") == []
    faults.stop_zk(spec, 3)
    try:
        res = cli(cluster, "chaos", "delay", "zk3", "--ms", "100")
        assert res.returncode == 1 and "is exited, expected running" in res.stderr, res.stderr
        assert handler_pids(spec.topology.zk_container(3)) == []
    finally:
        faults.start_zk(spec, 3)


def test_lossy_slow_broker_drill_loses_nothing_and_marks_the_settings(cluster: Path, tmp_path: Path) -> None:
    """A drill step degrades tansu's link (10 % loss + 100 ms delay for 5 s) under idempotent acks=all load:
    retries, nothing lost, duplicated or reordered; the timeline carries each fault with its setting."""
    scenario = tmp_path / "lossy-tansu.yaml"
    scenario.write_text(
        "name: lossy-tansu\nrequires: any\n"
        "topic: {partitions: 3, replication_factor: 1, min_insync_replicas: 1}\n"
        "steps:\n  - create_topic: {}\n  - start_load: {rate: 300}\n  - sleep: 2\n"
        "  - fault: {action: loss, node: kafka1, percent: 10, for: 5}\n"
        "  - fault: {action: delay, node: leader, ms: 100, jitter: 20, for: 5}\n"
        "  - sleep: 6\n  - stop_load: {}\n  - verify: {}\n"
    )
    wait_for(lambda: cli(cluster, "topic", "list").returncode == 0, 30, "broker answers", interval=0.5)
    report = tmp_path / "r"
    res = cli(cluster, "scenario", "run", str(scenario), "--report-dir", str(report), "--json", timeout=240)
    assert res.returncode == 0, res.stderr
    data = json.loads(res.stdout)
    load, v = data["load"], data["verify"]
    assert load["failed"] == 0 and load["acked"] == load["sent"] > 1500
    assert (v["lost_count"], v["duplicated_count"], v["reordered_count"]) == (0, 0, 0)
    marks = json.loads((report / "report.json").read_text())["timeline"]["markers"]
    notes = {(m["action"], m["target"]): m["note"] for m in marks}
    assert notes[("loss", "kafka1")] == "loss 10% via iptables statistic (userspace path)"
    assert notes[("delay", "kafka1")] == "delay 100ms ±20ms via nfqueue (userspace path)"
    assert any(m["action"] == "heal-network" and m["heal"] for m in marks)
    assert leftovers(load_spec(cluster), "kafka1") == []


def test_a_fault_that_cannot_apply_leaves_the_others_and_heal_heals_all(cluster: Path) -> None:
    """Issue 51: a second grey fault on a node that has one either composes (the userspace path: the loss rule and
    the delay handler side by side) or is refused with one line saying nothing was changed (netem: one root qdisc);
    either way the first fault stays, a timed second one takes back only itself, and `chaos heal` removes all."""
    spec = load_spec(cluster)
    node = netns.net_node(spec, "zk1")
    res = cli(cluster, "chaos", "loss", "zk1", "--percent", "5")
    assert res.returncode == 0, res.stderr
    first = leftovers(spec, "zk1")
    assert first, "the loss left no trace"
    try:
        second = cli(cluster, "chaos", "delay", "zk1", "--ms", "50")
        if netns.fault_path(node.pid) == "netem":
            assert second.returncode == 1, second.stderr
            assert [ln for ln in second.stderr.splitlines() if ln.startswith("error: ")] == [
                "error: zk1 already has a netem qdisc on eth0 (another network fault); nothing was changed "
                "(`chaos heal` first to replace it)"
            ], second.stderr
            assert leftovers(spec, "zk1") == first
        else:
            assert second.returncode == 0, second.stderr
            assert set(first) < set(leftovers(spec, "zk1"))
            third = cli(cluster, "chaos", "duplicate", "zk1", "--percent", "5")  # a second handler: refused
            assert third.returncode == 1 and "nothing was changed" in third.stderr, third.stderr
            heal(cluster)
            assert cli(cluster, "chaos", "loss", "zk1", "--percent", "5").returncode == 0
            timed = cli_json(cluster, "chaos", "delay", "zk1", "--ms", "50", "--for", "1")
            assert [r["action"] for r in timed] == ["delay", "heal-network"]
            assert leftovers(spec, "zk1") == first  # the delay took back only itself
    finally:
        heal(cluster)
    assert leftovers(spec, "zk1") == []
