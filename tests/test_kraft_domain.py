"""KRaft domain logic offline: the DescribeQuorum wire format, quorum view and fencing, failover analysis of
controller faults, scenario fields, the mode comparison's spec derivation and statistics, one-line refusals."""

from __future__ import annotations

import socket
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterctl.chaos import compare
from clusterctl.chaos.analysis import analyze
from clusterctl.chaos.scenario import load_scenario, parse_scenario
from clusterctl.chaos.timeline import Event, Marker, Timeline
from clusterctl.errors import SpecError
from clusterctl.kafka.kraft import quorum as kraft
from clusterctl.kafka.kraft.describe_quorum import (
    QuorumError,
    QuorumInfo,
    ReplicaState,
    decode_response,
    describe_one,
    describe_quorum,
    encode_request,
)
from clusterctl.spec.model import parse_spec

REPO = Path(__file__).resolve().parent.parent
CLI = str(Path(sys.executable).parent / "clusterctl")  # the console script of the running environment
KRAFT = parse_spec({"name": "lab", "profile": "offline", "kafka": {"mode": "kraft"}})


def test_request_bytes() -> None:
    req = encode_request(7)
    size = struct.unpack(">i", req[:4])[0]
    assert size == len(req) - 4
    body = req[4:]
    # api key 55, version 1, correlation 7, client id "clusterctl", no header tags
    assert body[:8] == struct.pack(">hhi", 55, 1, 7)
    assert body[8:20] == b"\x00\x0aclusterctl" and body[20] == 0
    # one topic "__cluster_metadata" (compact: length+1), one partition 0, three empty tag sections
    assert body[21:] == b"\x02\x13__cluster_metadata\x02\x00\x00\x00\x00\x00\x00\x00"


def _replica(node: int, leo: int, fetch: int = -1) -> bytes:
    return struct.pack(">iqqq", node, leo, fetch, -1) + b"\x00"


def response_bytes(cid: int, leader: int, voters: list[tuple[int, int]], observers: list[tuple[int, int]]) -> bytes:
    """A DescribeQuorum v1 response as Kafka writes it (header v1 + flexible body)."""
    out = struct.pack(">i", cid) + b"\x00" + struct.pack(">h", 0)
    out += b"\x02" + b"\x13__cluster_metadata" + b"\x02"
    out += struct.pack(">ihiiq", 0, 0, leader, 7, 1234)
    out += bytes([len(voters) + 1]) + b"".join(_replica(n, leo, 1000) for n, leo in voters)
    out += bytes([len(observers) + 1]) + b"".join(_replica(n, leo, 1000) for n, leo in observers)
    return out + b"\x00\x00\x00"


def test_decode_response() -> None:
    payload = response_bytes(9, 102, [(101, 1230), (102, 1234), (103, -1)], [(1, 1234), (2, 1200)])
    err, info = decode_response(payload, 9)
    assert err == 0 and info is not None
    assert (info.leader_id, info.leader_epoch, info.high_watermark) == (102, 7, 1234)
    assert [(r.node_id, r.log_end_offset) for r in info.voters] == [(101, 1230), (102, 1234), (103, -1)]
    assert [r.node_id for r in info.observers] == [1, 2] and info.voters[0].last_fetch_ms == 1000
    with pytest.raises(ValueError, match="correlation id"):
        decode_response(payload, 10)
    with pytest.raises(ValueError, match="truncated"):
        decode_response(payload[:-9], 9)


def test_decode_not_leader_error() -> None:
    payload = struct.pack(">i", 1) + b"\x00" + struct.pack(">h", 0) + b"\x02\x13__cluster_metadata\x02"
    payload += struct.pack(">ihiiq", 0, 6, -1, -1, -1) + b"\x01\x01\x00\x00\x00"
    err, info = decode_response(payload, 1)
    assert err == 6 and info is None


@pytest.fixture
def fake_controller() -> Iterator[tuple[str, int]]:
    """A loopback TCP server answering one DescribeQuorum request the way a leading controller does."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            size = struct.unpack(">i", conn.recv(4))[0]
            req = b""
            while len(req) < size:
                req += conn.recv(size - len(req))
            api, version, cid = struct.unpack(">hhi", req[:8])
            assert (api, version) == (55, 1)
            body = response_bytes(cid, 101, [(101, 50), (102, 50), (103, 49)], [(1, 50), (2, 50), (3, 50)])
            conn.sendall(struct.pack(">i", len(body)) + body)

    t = threading.Thread(target=serve, daemon=True)
    t.start()
    yield server.getsockname()
    server.close()


def test_describe_over_a_socket_first_full_answer_wins(fake_controller: tuple[str, int]) -> None:
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    dead = closed.getsockname()
    closed.close()  # nothing listens: connection refused
    info = describe_quorum([dead, fake_controller], timeout=2)
    assert info.leader_id == 101 and info.answered_by == f"{fake_controller[0]}:{fake_controller[1]}"
    with pytest.raises(QuorumError, match="no controller quorum answer") as err:
        describe_quorum([dead], timeout=1)
    assert err.value.exit_code == 4
    with pytest.raises(QuorumError):
        describe_one(dead[0], dead[1], timeout=1)


def test_view_roles_lag_and_fencing() -> None:
    info = QuorumInfo(
        102, 4, 500, [ReplicaState(101, 490, 9_000), ReplicaState(102, 500), ReplicaState(103, -1)],
        [ReplicaState(1, 500, 9_500), ReplicaState(2, 500, 9_900)],
    )  # fmt: skip
    v = kraft.view(KRAFT, info, now_ms=10_000)
    rows = [(m.node_id, m.role, m.service, m.lag) for m in v.members]
    assert rows == [
        (102, "leader", "controller2", 0),
        (101, "follower", "controller1", 10),
        (103, "follower", "controller3", None),
        (1, "observer", "kafka1", 0),
        (2, "observer", "kafka2", 0),
    ]
    assert v.members[1].last_fetch_ago_ms == 1000 and v.leader_service == "controller2"
    fenced = kraft.fencing(KRAFT, info, live=[1])
    assert [(f.broker, f.state) for f in fenced] == [(1, "unfenced"), (2, "fenced"), (3, "not registered")]
    assert [f.state for f in kraft.fencing(KRAFT, None, None)] == ["unknown"] * 3


def test_quorum_addresses_brokers_then_voters() -> None:
    assert kraft.quorum_addresses(KRAFT) == [
        ("127.0.0.1", 9092), ("127.0.0.1", 9093), ("127.0.0.1", 9094),
        ("10.77.0.51", 19093), ("10.77.0.52", 19093), ("10.77.0.53", 19093),
    ]  # fmt: skip
    combined = parse_spec({"kafka": {"mode": "kraft"}, "kraft": {"combined": True}})
    assert combined.topology.controller_ids == [1, 2, 3] and combined.topology.dedicated_controller_ids == []
    assert kraft.quorum_addresses(combined)[3:] == [("10.77.0.21", 19093), ("10.77.0.22", 19093), ("10.77.0.23", 19093)]


def test_controller_fault_analysis() -> None:
    t = 1000.0
    tl = Timeline(t, t + 30, [], mode="kraft")
    tl.events = [
        Event(t + 1, "quorum", "controller", "quorum", "active controller node 101", 101),
        Event(t + 5.4, "quorum", "controller", "quorum", "active controller none", None),
        Event(t + 6.2, "quorum", "controller", "quorum", "active controller node 103", 103),
    ]
    tl.markers = [Marker(t + 5, "kill-controller", "controller 101"), Marker(t + 20, "start", "controller 101", True)]
    (m,) = analyze(tl)
    assert m.detected_s == pytest.approx(0.4) and m.detected_by == "quorum"
    assert m.controller_change_s == pytest.approx(0.4) and m.partitions == []


def test_scenario_fields() -> None:
    sc = load_scenario("kill-controller")
    assert (sc.mode, sc.requires) == ("kraft", "kafka")
    assert [s.kind for s in sc.parsed_steps()][4:6] == ["fault", "wait_for"]
    assert load_scenario("zk-node-loss").mode == "zookeeper"
    assert load_scenario("kill-leader").mode == "any"
    with pytest.raises(SpecError, match="start-controller needs controller"):
        parse_scenario("name: x\nsteps: [{fault: {action: start-controller}}]")
    with pytest.raises(SpecError, match="mode"):
        parse_scenario("name: x\nmode: raft\nsteps: [{sleep: 1}]")
    steps = "[{wait_for: {controller_quorum: healthy}}, {assert: {broker_fenced: {id: 2}}}]"
    ok = parse_scenario(f"name: x\nsteps: {steps}")
    assert [s.args.name for s in ok.parsed_steps()] == ["controller_quorum", "broker_fenced"]


def test_spec_for_mode_derives_the_other_cluster() -> None:
    zk = parse_spec({"name": "lab", "profile": "offline", "network": {"subnet": "10.83.0.0/24"},
                     "kafka_manager": {"enabled": False}, "zookeeper": {"tick_time_ms": 500}})  # fmt: skip
    assert compare.spec_for_mode(zk, "zookeeper") is zk
    k = compare.spec_for_mode(zk, "kraft")
    assert (k.name, k.kafka.mode, k.topology.zk_ids, k.network.subnet) == ("lab-kraft", "kraft", [], "10.83.0.0/24")
    # the web UI the user turned off stays off (its default host port 9000 may be another cluster's)
    assert k.kafka_manager.enabled is False
    on = parse_spec({"name": "lab", "profile": "offline", "network": {"subnet": "10.83.0.0/24"},
                     "kafka_manager": {"port": 29000}})  # fmt: skip
    k_on = compare.spec_for_mode(on, "kraft")
    assert (k_on.kafka_manager.enabled, k_on.kafka_manager.port, k_on.manager_kind) == (True, 29000, "console")
    back = compare.spec_for_mode(KRAFT, "zookeeper")
    assert (back.name, back.kafka.mode, back.topology.controller_ids) == ("lab-zk", "zookeeper", [])
    assert compare.bounding(k) == ("broker.session.timeout.ms", 9000)
    assert compare.bounding(back) == ("zookeeper.session.timeout.ms", 6000)  # the lab default
    # Kafka's default session timeout on the ZooKeeper side; the KRaft twin keeps its own fencing timeout
    zk18 = parse_spec({"name": "lab", "profile": "offline", "network": {"subnet": "10.83.0.0/24"},
                       "kafka_manager": {"enabled": False}, "zookeeper": {"tick_time_ms": 2000},
                       "kafka": {"defaults": {"zookeeper_session_timeout_ms": 18000}}})  # fmt: skip
    assert compare.bounding(zk18) == ("zookeeper.session.timeout.ms", 18000)
    assert compare.bounding(compare.spec_for_mode(zk18, "kraft")) == ("broker.session.timeout.ms", 9000)


def _run(mode: str, detected: float | None, gap: float | None, lost: int = 0) -> compare.CompareRun:
    setting, ms = ("broker.session.timeout.ms", 9000) if mode == "kraft" else ("zookeeper.session.timeout.ms", 18000)
    return compare.CompareRun(mode, "c", "kill-leader", lost == 0, 0.0, detected, "metadata", detected, gap, lost,
                              setting, ms)  # fmt: skip


def test_compare_summary_and_results_file(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    for r in [_run("zookeeper", 18.2, 18.9), _run("zookeeper", 19.0, None), _run("kraft", 9.5, 10.1),
              _run("kraft", 8.9, 9.7), _run("kraft", 10.0, 11.0, lost=1)]:  # fmt: skip
        compare.append_run(path, r)
    runs = compare.load_runs(path, "kill-leader")
    assert len(runs) == 5 and compare.load_runs(path, "other") == []
    zk, kr = compare.summarize(runs)
    assert (zk.mode, zk.runs, zk.passed, zk.detected_s.median, zk.write_gap_s.n) == ("zookeeper", 2, 2, 18.6, 1)
    assert (kr.runs, kr.passed, kr.lost_total, kr.detected_s.text()) == (3, 2, 1, "9.50 (8.90-10.00)")
    assert kr.bounding_setting == "broker.session.timeout.ms"
    path.write_text("not json\n")
    with pytest.raises(Exception, match="not a compare result row"):
        compare.load_runs(path)


def _cli(tmp_path: Path, spec: dict[str, Any], *args: str) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "clusterctl.yaml"
    path.write_text(yaml.safe_dump(spec))
    return subprocess.run([CLI, "-s", str(path), *args], capture_output=True, text=True, cwd=tmp_path, timeout=60)


@pytest.mark.parametrize(
    "args",
    [("zk", "status"), ("zk", "ls", "/"), ("zk", "tree"), ("zk", "get", "/controller"), ("chaos", "kill-zk", "1")],
)
def test_zk_commands_refuse_in_kraft_mode(tmp_path: Path, args: tuple[str, ...]) -> None:
    proc = _cli(tmp_path, {"name": "lab", "kafka": {"mode": "kraft"}}, *args)
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "KRaft mode" in lines[0] and "no ZooKeeper" in lines[0]


@pytest.mark.parametrize("args", [("quorum",), ("cluster", "quorum"), ("chaos", "kill-controller-quorum")])
def test_quorum_commands_refuse_in_zookeeper_mode(tmp_path: Path, args: tuple[str, ...]) -> None:
    proc = _cli(tmp_path, {"name": "lab"}, *args)
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "ZooKeeper mode" in lines[0]


def test_compare_rejects_bad_modes(tmp_path: Path) -> None:
    proc = _cli(tmp_path, {"name": "lab"}, "scenario", "compare", "kill-leader", "--modes", "zookeeper,raft")
    assert proc.returncode == 2 and "--modes takes zookeeper and/or kraft" in proc.stderr
    proc = _cli(tmp_path, {"name": "lab"}, "scenario", "compare", "kill-controller", "--repeat", "1")
    assert proc.returncode == 2 and "for kafka.mode=kraft only" in proc.stderr


def test_unanswered_metadata_is_not_detection_when_other_brokers_live() -> None:
    t = 1000.0
    tl = Timeline(t, t + 30, [])
    tl.events = [
        Event(t + 1, "metadata", "brokers", "cluster", "live brokers 1,2,3", [1, 2, 3]),
        Event(t + 5.5, "metadata", "error", "metadata", "metadata request failed: timed out"),
        Event(t + 14.2, "metadata", "brokers", "cluster", "live brokers 1,3 (lost [2])", [1, 3]),
    ]
    tl.markers = [Marker(t + 5, "kill-leader", "broker 2")]
    (m,) = analyze(tl)
    assert (m.detected_s, m.detected_by) == (pytest.approx(9.2), "metadata")
    tl.events[0] = Event(t + 1, "metadata", "brokers", "cluster", "live brokers 2", [2])
    (lone,) = analyze(tl)
    assert (lone.detected_s, lone.detected_by) == (pytest.approx(0.5), "metadata (no answer)")


def test_the_console_service_names_each_quorum_node_by_its_spec_service(fake_controller: tuple[str, int]) -> None:
    """The kafka-manager service's command carries the topology's node.id -> service map to the Quorum page."""
    from clusterctl.compose.context import _console_context
    from clusterctl.console import quorum as console_quorum
    from clusterctl.console.data import ConsoleTarget

    command = _console_context(KRAFT, [])["command"]
    raw = command[command.index("--kraft-nodes") + 1]
    assert raw == "1=kafka1,2=kafka2,3=kafka3,101=controller1,102=controller2,103=controller3"
    nodes = console_quorum.node_services(raw)
    target = ConsoleTarget("x:1", quorum=(f"{fake_controller[0]}:{fake_controller[1]}",), nodes=nodes)
    q = console_quorum.source(target).get()
    assert [(m.node_id, m.service) for m in q.members] == [
        (101, "controller1"), (102, "controller2"), (103, "controller3"), (1, "kafka1"), (2, "kafka2"), (3, "kafka3")
    ]  # fmt: skip
    assert q.leader_service == "controller1"
    from clusterctl.errors import UsageError

    with pytest.raises(UsageError, match="--kraft-nodes expects"):
        console_quorum.node_services("101=controller1,oops")
