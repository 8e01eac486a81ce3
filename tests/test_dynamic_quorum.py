"""Dynamic controller quorums (kraft.quorum: dynamic, KIP-853) offline: what the spec refuses, what render writes,
the directory ids, DescribeQuorum v2, the drill's step checks and its refusal on a static quorum (before any work),
the metadata-write probe's summary, the settings that bound its times, and the derived configs against Kafka's rules.
The same on real Kafka 4.x: tests/test_dynamic_quorum_kafka.py."""

from __future__ import annotations

import contextlib
import io
import re
import struct
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterctl import cli
from clusterctl.chaos import bounds
from clusterctl.chaos.metadata_probe import MetadataWrite, summarize
from clusterctl.chaos.runner import Runner
from clusterctl.chaos.scenario import load_scenario, parse_scenario
from clusterctl.compose.contracts import derive
from clusterctl.compose.kafkarules import check_cluster
from clusterctl.compose.render import render_compose
from clusterctl.compose.writer import RenderError
from clusterctl.errors import SpecError, UsageError
from clusterctl.kafka.kraft.describe_quorum import decode_response, uuid_text
from clusterctl.runtime.voters import tool_reason
from clusterctl.spec import validate
from clusterctl.spec.model import parse_spec

pytestmark = pytest.mark.usefixtures("built_kafka_3_7")

DYNAMIC: dict[str, Any] = {
    "name": "lab",
    "profile": "offline",
    "kafka": {"mode": "kraft", "version": "4.4.0"},
    "kraft": {"quorum": "dynamic"},
}
STATIC = {**DYNAMIC, "kraft": {"quorum": "static"}}
UUID_TEXT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{21}$")


def _with(**changes: Any) -> dict[str, Any]:
    data = yaml.safe_load(yaml.safe_dump(DYNAMIC))
    for section, value in changes.items():
        data[section] = {**data.get(section, {}), **value}
    return data


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (_with(kafka={"version": "3.8.1"}), "kraft.quorum=dynamic (KIP-853) needs Kafka 3.9 or later: image "
         "clusterctl/kafka:3.8.1 is Kafka 3.8; use kafka.version 3.9.x or 4.x, or kraft.quorum: static"),
        ({**_with(), "profile": "default", "kafka": {"mode": "kraft"}}, "it needs profile offline"),
        (_with(kraft={"combined": True}), "kraft.quorum=dynamic needs dedicated controllers here"),
        ({"name": "lab", "kraft": {"quorum": "dynamic"}}, "kraft settings need kafka.mode: kraft"),
        (_with(kraft={"quorum": "raft"}), "kraft.quorum"),
    ],
)  # fmt: skip
def test_spec_refuses_a_dynamic_quorum_it_cannot_run(data: dict[str, Any], expected: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_spec(data)
    assert expected in err.value.message and "\n" not in err.value.message


def test_render_refuses_an_offline_image_without_kip_853() -> None:
    """Without kafka.version the offline tag is resolved at render: here the built 3.7.0 (the fixture)."""
    spec = parse_spec({**DYNAMIC, "kafka": {"mode": "kraft"}})
    refusal = r"needs Kafka 3\.9 or later: image clusterctl/kafka:3\.7\.0 is Kafka 3\.7"
    with pytest.raises(RenderError, match=refusal) as err:
        render_compose(spec)
    assert err.value.exit_code == 2


def test_directory_ids_are_stable_distinct_and_kafka_uuids() -> None:
    topo = parse_spec(DYNAMIC).topology
    ids = [topo.controller_directory_id(n) for n in topo.controller_ids]
    assert ids == [parse_spec(DYNAMIC).topology.controller_directory_id(n) for n in (101, 102, 103)]  # re-render
    assert len(set(ids)) == 3 and all(UUID_TEXT.match(i) and validate.directory_id(i) == i for i in ids), ids
    other = parse_spec({**DYNAMIC, "name": "other"}).topology
    assert other.controller_directory_id(101) != ids[0]
    assert topo.initial_controllers == ",".join(
        f"{n}@controller{n - 100}:19093:{d}" for n, d in zip((101, 102, 103), ids, strict=True)
    )
    assert topo.controller_quorum_bootstrap_servers == "controller1:19093,controller2:19093,controller3:19093"


def test_render_names_bootstrap_servers_and_passes_kafkas_rules() -> None:
    text = render_compose(parse_spec(DYNAMIC))
    assert "CONTROLLER_QUORUM_VOTERS" not in text
    assert text.count('KAFKA_CONTROLLER_QUORUM_BOOTSTRAP_SERVERS: "controller1:19093,controller2:19093,') == 6
    nodes = derive(text)
    assert check_cluster(nodes) == []
    broken = [n for n in nodes if n.service != "kafka2"]
    for n in nodes:
        if n.service == "kafka2":
            n.properties["controller.quorum.bootstrap.servers"] = "kafka1:19093"
            broken.append(n)
    assert check_cluster(broken) == [
        "controller.quorum.bootstrap.servers differ or are missing: ['controller1:19093,controller2:19093,"
        "controller3:19093', 'kafka1:19093']",
        "bootstrap server kafka1:19093 is no controller's listener",
    ]


def _replica_v2(node: int, directory: bytes, leo: int) -> bytes:
    return struct.pack(">i", node) + directory + struct.pack(">qqq", leo, 1000, 1000) + b"\x00"


def test_describe_quorum_v2_decodes_directory_ids_and_endpoints() -> None:
    dirs = [bytes(range(i, i + 16)) for i in (1, 17)]
    body = struct.pack(">i", 9) + b"\x00" + struct.pack(">h", 0) + b"\x00"  # header, error, null message
    body += b"\x02\x13__cluster_metadata\x02" + struct.pack(">ih", 0, 0) + b"\x00" + struct.pack(">iiq", 101, 3, 50)
    body += b"\x03" + _replica_v2(101, dirs[0], 50) + _replica_v2(102, bytes(16), 49)  # a static voter: zero id
    body += b"\x02" + _replica_v2(1, dirs[1], 50) + b"\x00\x00"  # observers; partition and topic tags
    body += b"\x02" + struct.pack(">i", 101) + b"\x02\x0bCONTROLLER\x0cController1" + struct.pack(">H", 19093)
    body += b"\x00\x00\x00"  # listener tags, node tags, response tags
    error, info = decode_response(body, 9, version=2)
    assert error == 0 and info is not None
    assert [(r.node_id, r.directory_id, r.log_end_offset) for r in info.voters] == [
        (101, uuid_text(dirs[0]), 50),
        (102, None, 49),
    ]
    assert info.observers[0].directory_id == "ERITFBUWFxgZGhscHR4fIA"  # bytes 17..32 in base64url
    assert info.endpoints == {101: ["CONTROLLER://Controller1:19093"]}


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        ("- quorum: {action: add-controller}", "step 1 (quorum): no controller given and no wipe-controller fault"),
        ("- wait_for: {controller_caught_up: {}}", "no controller given and no wipe-controller fault before it"),
        ("- metadata_probe: {action: stop}", "no probe is running (action: start comes first)"),
        ("- metadata_probe: {action: start}\n- metadata_probe: {action: start}", "the probe is running already"),
        ("- fault: {action: wipe-controller, node: leader}", "wipe-controller takes controller: <voter node id>"),
        ("- quorum: {action: add-controller, controller: 101, directory_id: AAAAAAAAAAAAAAAAAAAAAQ}",
         "directory_id is for action: remove-controller"),
        ("- quorum: {action: remove-controller, controller: 101, directory_id: nope}", "is not a directory id"),
    ],
)  # fmt: skip
def test_quorum_steps_are_checked_before_anything_starts(steps: str, expected: str) -> None:
    with pytest.raises(SpecError) as err:
        parse_scenario(f"name: x\nmode: kraft\nsteps:\n{steps}\n", "<s>")
    assert expected in err.value.message


def test_quorum_steps_have_no_place_in_zookeeper_mode() -> None:
    with pytest.raises(SpecError, match="a controller-quorum step; this is for mode: zookeeper"):
        parse_scenario("name: x\nmode: zookeeper\nsteps:\n- quorum: {action: add-controller, controller: 101}\n")


STATIC_LINE = (
    "scenario replace-dead-controller replaces a controller voter, which needs a dynamic quorum (kraft.quorum: "
    "dynamic, KIP-853); cluster lab runs a static one (controller.quorum.voters, fixed at format time)"
)


def test_replace_dead_controller_refuses_a_static_quorum_before_any_work(tmp_path: Path, monkeypatch: Any) -> None:
    sc = load_scenario("replace-dead-controller")
    with pytest.raises(UsageError) as err:
        Runner(parse_spec(STATIC), sc, work_dir=tmp_path / "r").preflight()
    assert err.value.message == STATIC_LINE
    spec_path = tmp_path / "clusterctl.yaml"
    spec_path.write_text(yaml.safe_dump(STATIC))
    monkeypatch.chdir(tmp_path)
    out, errs = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(errs):
        code = cli.run(["-s", str(spec_path), "scenario", "run", "replace-dead-controller"])
    assert code == 2 and errs.getvalue().splitlines()[0] == f"error: {STATIC_LINE}", errs.getvalue()
    assert not (tmp_path / "reports").exists() and not (tmp_path / "compose").exists()  # nothing was started
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(errs := io.StringIO()):
        code = cli.run(["-s", str(spec_path), "quorum", "add-controller", "102"])
    assert code == 2 and "needs a dynamic quorum (kraft.quorum: dynamic, KIP-853)" in errs.getvalue()


def test_metadata_probe_gap_runs_between_committed_writes() -> None:
    t0 = 1000.0
    writes = [
        MetadataWrite(t0 + 0.5, "create", True, 100.0),
        MetadataWrite(t0 + 1.0, "delete", True, 50.0),  # ends at 1.05
        MetadataWrite(t0 + 1.5, "create", False, 30_000.0, "_TIMED_OUT: ..."),
        MetadataWrite(t0 + 31.5, "create", True, 200.0),  # ends at 31.7: the gap is 1.05 .. 31.7
        MetadataWrite(t0 + 32.0, "delete", True, 80.0),
    ]
    m = summarize("t-md", 0.5, writes, t0, t0 + 33.0, "p")
    assert (m.writes, m.failed, m.longest_gap_s) == (5, 1, pytest.approx(30.65))
    assert (m.gap_from, m.gap_to) == (pytest.approx(t0 + 1.05), pytest.approx(t0 + 31.7))
    assert (m.median_ms, m.max_ms) == (90.0, 200.0)
    none = summarize("t-md", 0.5, [MetadataWrite(t0 + 1, "create", False, 10.0, "x")], t0, t0 + 5, "p")
    assert none.longest_gap_s == 5.0 and none.median_ms is None  # nothing committed: the whole probe is the gap


def test_the_settings_that_bound_a_lost_controller() -> None:
    settings = bounds.settings_of(parse_spec(DYNAMIC))
    assert settings[bounds.FETCH_TIMEOUT] == 2000 and settings[bounds.ELECTION_TIMEOUT] == 500
    election = "controller.quorum.fetch.timeout.ms 2000 + controller.quorum.election.timeout.ms 500-1000"
    assert bounds.explain(1.8, "wipe-controller", "detected", False, settings) == f"1.8 ≈ {election}"
    assert bounds.bounding_setting("kill-controller", "detected", False, settings) == election
    assert bounds.metadata_gap_bound(settings, True).startswith("socket.connection.setup.timeout.ms 10000 ±20%")
    assert bounds.metadata_gap_bound(settings, False) == "one commit by a majority of the voters, which stayed up"
    assert bounds.bounding_setting("wipe-controller", "new_leader", True, settings) is None


def test_kafka_tool_failures_read_as_their_reason() -> None:
    out = """[2026-11-28] ERROR add-controller failed
java.util.concurrent.ExecutionException: org.apache.kafka.common.errors.DuplicateVoterException: The voter id
\tat org.apache.kafka.tools.MetadataQuorumCommand.main(MetadataQuorumCommand.java:78)
Caused by: org.apache.kafka.common.errors.DuplicateVoterException: The voter id for ReplicaKey(id=102) is already \
part of the set of voters."""
    assert tool_reason(out) == "The voter id for ReplicaKey(id=102) is already part of the set of voters."
    assert tool_reason("") == "(no output)"
