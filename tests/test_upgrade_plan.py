"""The rolling upgrade offline: its one-line refusals, the order of the roll, the state file, the spec edit that
records the new version in the user's own file, ApiVersions' feature fields, and the scenario checks of `upgrade`.

The roll itself runs on real Kafka in tests/test_upgrade_kafka.py.
"""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from clusterctl.chaos.scenario import parse_scenario
from clusterctl.errors import ClusterctlError, SpecError
from clusterctl.kafka import features
from clusterctl.kafka import upgrade_plan as plan
from clusterctl.kafka.protocol import compact_str, uvarint
from clusterctl.spec import edit
from clusterctl.spec.model import load_spec, parse_spec

CLI = str(Path(sys.executable).parent / "clusterctl")
KRAFT: dict[str, Any] = {
    "name": "upg",
    "profile": "offline",
    "network": {"subnet": "10.92.0.0/24"},
    "kafka": {"mode": "kraft", "version": "3.9.2"},
}
BUILT = ["3.9.2", "4.4.0"]


def spec(**changes: Any) -> Any:
    data = yaml.safe_load(yaml.safe_dump(KRAFT))
    for dotted, value in changes.items():
        section, key = dotted.split("__")
        data.setdefault(section, {})[key] = value
    return parse_spec(data)


@pytest.mark.parametrize(
    ("changes", "running", "to", "kwargs", "expected"),
    [
        ({}, "3.9.2", "4.4", {}, "--to takes an exact Kafka release such as 4.4.0, got '4.4'"),
        ({"kafka__engine": "tansu", "kafka__mode": "zookeeper", "kafka__version": None, "kafka__brokers": 1,
          "kafka__defaults": {"replication_factor": 1, "min_insync_replicas": 1}},
         "3.9.2", "4.4.0", {}, "runs tansu, not Apache Kafka"),
        ({"profile__": None}, "3.9.2", "4.4.0", {}, "runs confluentinc/cp-kafka:7.9.1 from a registry"),
        ({"deploy__target": "swarm", "deploy__racks": [{"name": "r1", "address": "127.0.0.1"}],
          "kafka_manager__enabled": False}, "3.9.2", "4.4.0", {},
         "runs on a swarm (deploy.target swarm): `upgrade` rolls compose clusters"),
        ({"kafka__mode": "zookeeper"}, "3.9.2", "4.4.0", {},
         "runs ZooKeeper mode: `upgrade` rolls KRaft clusters (Kafka 4.0+ has no ZooKeeper mode); migrate first with "
         "`clusterctl migrate kraft` on 3.9, then upgrade"),
        ({}, "3.9.2", "4.5.0", {}, "clusterctl/kafka:4.5.0 is not built here: "
         "`clusterctl images build kafka --kafka-version 4.5.0`"),
        ({}, "3.2.3", "4.4.0", {}, "Kafka 4.4.0 upgrades from KRaft 3.3 or newer, not from 3.2.3: upgrade to 3.9.x"),
        ({}, "4.4.0", "3.9.2", {"finalized": "4.4"}, "metadata.version is finalized at 4.4: Kafka 3.9.2 cannot read"),
        ({}, "4.4.0", "3.9.2", {"metadata_level": 27, "from_metadata_level": 21},
         "metadata.version is finalized at level 27"),
    ],
)  # fmt: skip
def test_each_refusal_is_one_line(
    changes: dict[str, Any], running: str, to: str, kwargs: dict[str, Any], expected: str
) -> None:
    if "profile__" in changes:
        s = parse_spec({**KRAFT, "profile": "default", "kafka": {"mode": "kraft"}})
    else:
        s = spec(**changes)
    with pytest.raises(plan.UpgradeRefused) as err:
        plan.check_upgrade(s, running, to, [*BUILT, "3.2.3"] if running == "3.2.3" else BUILT, **kwargs)
    assert expected in err.value.message and "\n" not in err.value.message
    assert err.value.exit_code == 2


@pytest.mark.parametrize(
    ("running", "to", "kwargs"),
    [
        ("3.9.2", "4.4.0", {}),
        ("4.4.0", "4.4.0", {}),  # the roll done, finalize left
        ("4.4.0", "3.9.2", {"metadata_level": 21, "from_metadata_level": 21}),  # back before finalize
        ("4.4.0", "3.9.2", {}),
    ],
)
def test_what_is_allowed(running: str, to: str, kwargs: dict[str, Any]) -> None:
    plan.check_upgrade(spec(), running, to, BUILT, **kwargs)


def test_controllers_first_the_active_one_last_then_brokers() -> None:
    assert plan.roll_order(spec(), active_controller=101) == [
        "controller2", "controller3", "controller1", "kafka1", "kafka2", "kafka3",
    ]  # fmt: skip
    assert plan.roll_order(spec(), active_controller=None)[:3] == ["controller1", "controller2", "controller3"]
    combined = spec(kraft__combined=True)
    assert plan.roll_order(combined, active_controller=2) == ["kafka1", "kafka3", "kafka2"]


def test_a_combined_node_is_rolled_as_a_broker() -> None:
    """A combined node (kafkaN, a voter too) gets the broker's waits (back unfenced, every ISR full) as well as
    the voter's; a dedicated controller the voter's only."""
    from clusterctl.runtime.upgrade import _node_id

    assert [_node_id(spec(kraft__combined=True), s) for s in ("kafka1", "kafka3")] == [("broker", 1), ("broker", 3)]
    assert [_node_id(spec(), s) for s in ("controller2", "kafka2")] == [("controller", 102), ("broker", 2)]
    with pytest.raises(ClusterctlError, match="zk1 is not a node of cluster upg"):
        _node_id(spec(), "zk1")


def test_state_round_trip_and_unreadable_state_refused(tmp_path: Path) -> None:
    path = plan.state_path(tmp_path / "clusterctl.yaml")
    assert path.name == "clusterctl.yaml.upgrade.json" and plan.load_state(path) is None
    state = plan.UpgradeState("upg", "3.9.2", "4.4.0", 21)
    state.started("controller1")
    plan.save_state(path, state)
    state.completed("controller1", restarted=True)
    plan.save_state(path, state)
    back = plan.load_state(path)
    assert back is not None and back.done == ["controller1"] and back.current is None
    assert back.history[0].restarted and back.history[0].finished is not None
    status = plan.status_of(back, plan.roll_order(spec(), None), path, "upg")
    assert status.pending == ["controller2", "controller3", "kafka1", "kafka2", "kafka3"]
    path.write_text('{"version": 1, "cluster": "x"}', encoding="utf-8")
    with pytest.raises(plan.UpgradeRefused, match="not an upgrade state file"):
        plan.load_state(path)
    path.write_text("{", encoding="utf-8")
    with pytest.raises(plan.UpgradeRefused, match="cannot read the upgrade state"):
        plan.load_state(path)


SPEC_TEXT = """\
# a user's spec
name: "upg"  # the cluster
profile: "offline"
network:
  subnet: "10.92.0.0/24"
kafka:
  engine: "kafka"  # kafka | tansu
  mode: "kraft"
  version: "3.9.2"  # e.g. 3.9.2 or 4.4.0
  brokers: 3
"""


def test_the_version_is_set_in_place_comments_kept(tmp_path: Path) -> None:
    path = tmp_path / "clusterctl.yaml"
    path.write_text(SPEC_TEXT, encoding="utf-8")
    edit.write_value(path, "kafka", "version", "4.4.0")
    assert path.read_text(encoding="utf-8") == SPEC_TEXT.replace('"3.9.2"  #', '"4.4.0"  #')
    assert load_spec(path).kafka.version == "4.4.0"
    # null, unquoted, absent: each becomes the quoted version, the rest of the line kept
    assert edit.set_value(SPEC_TEXT.replace('"3.9.2"', "null"), "kafka", "version", "4.4.0") == SPEC_TEXT.replace(
        '"3.9.2"', '"4.4.0"'
    )
    absent = SPEC_TEXT.replace('  version: "3.9.2"  # e.g. 3.9.2 or 4.4.0\n', "")
    added = edit.set_value(absent, "kafka", "version", "4.4.0")
    assert added == absent.replace("kafka:\n", 'kafka:\n  version: "4.4.0"\n')


def test_an_edit_that_would_not_load_leaves_the_file_untouched(tmp_path: Path) -> None:
    path = tmp_path / "clusterctl.yaml"
    path.write_text(SPEC_TEXT, encoding="utf-8")
    with pytest.raises(SpecError):
        edit.write_value(path, "kafka", "version", "four")
    assert path.read_text(encoding="utf-8") == SPEC_TEXT
    assert [p.name for p in tmp_path.iterdir()] == ["clusterctl.yaml"]
    with pytest.raises(SpecError, match="no zookeeper section"):
        edit.set_value(SPEC_TEXT, "zookeeper", "nodes", "3")


def _api_versions_v3(supported: dict[str, tuple[int, int]], finalized: dict[str, int], epoch: int) -> bytes:
    """An ApiVersions v3 answer as Kafka's message schema lays it out (ApiVersionsResponse.json)."""

    def features_array(items: list[bytes]) -> bytes:
        return uvarint(len(items) + 1) + b"".join(items)

    sup = features_array([compact_str(n) + struct.pack(">hh", lo, hi) + b"\x00" for n, (lo, hi) in supported.items()])
    fin = features_array([compact_str(n) + struct.pack(">hh", lvl, lvl) + b"\x00" for n, lvl in finalized.items()])
    tags = [(0, sup), (1, struct.pack(">q", epoch)), (2, fin)]
    body = struct.pack(">ih", 7, 0) + uvarint(2) + struct.pack(">hhh", 18, 0, 4) + b"\x00" + struct.pack(">i", 0)
    body += uvarint(len(tags)) + b"".join(uvarint(t) + uvarint(len(d)) + d for t, d in tags)
    return body


def test_api_versions_features_are_read() -> None:
    answer = _api_versions_v3({"metadata.version": (7, 27), "kraft.version": (0, 1)},
                              {"metadata.version": 21}, 42)  # fmt: skip
    got = features.decode_response(answer)
    assert got.supported == {"metadata.version": (7, 27), "kraft.version": (0, 1)}
    assert (got.finalized, got.finalized_epoch, got.metadata_level) == ({"metadata.version": 21}, 42, 21)
    with pytest.raises(ValueError, match="truncated"):
        features.decode_response(answer[:-3])
    with pytest.raises(ValueError, match="error code 35"):
        features.decode_response(struct.pack(">ih", 7, 35) + b"\x01" + b"\x00" * 5)


def test_upgrade_steps_only_on_kraft_or_after_a_whole_migration() -> None:
    base = "name: u\nrequires: kafka\nmode: {mode}\nsteps:\n{steps}"
    ok = parse_scenario(base.format(mode="zookeeper", steps="  - migrate: {to: kraft}\n  - upgrade: {to: newest}\n"))
    assert [s.kind for s in ok.parsed_steps()] == ["migrate", "upgrade"]
    with pytest.raises(SpecError, match=r"step 2 \(upgrade\): an upgrade drill needs requires: kafka and mode: kraft"):
        parse_scenario(base.format(mode="zookeeper", steps="  - migrate: {to: kraft, until_phase: 2}\n"
                                                           "  - upgrade: {to: newest}\n"))  # fmt: skip
    with pytest.raises(SpecError, match=r"step 1 \(upgrade\): to: String should match"):
        parse_scenario(base.format(mode="kraft", steps="  - upgrade: {to: latest}\n"))


def test_cli_refusals_before_any_work(tmp_path: Path) -> None:
    path = tmp_path / "clusterctl.yaml"
    path.write_text(SPEC_TEXT.replace('mode: "kraft"', 'mode: "zookeeper"'), encoding="utf-8")
    for args, line in [
        (["upgrade"], "error: missing --to VERSION (or --status)"),
        (["upgrade", "--status", "--yes"], "error: --status changes nothing: give it without --to, --until or --yes"),
        (["upgrade", "--to", "4.4.0"], "error: cluster upg runs ZooKeeper mode: `upgrade` rolls KRaft clusters"),
    ]:
        res = subprocess.run([CLI, "-s", str(path), *args], capture_output=True, text=True, timeout=60)
        assert res.returncode == 2, res
        assert res.stderr.strip().splitlines()[-1].startswith(line), res.stderr
        assert len(res.stderr.strip().splitlines()) == 1, res.stderr
    assert not plan.state_path(path).exists()
