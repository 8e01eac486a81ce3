"""Spec validation: every bad spec is one line, exit code 2 and nothing written; odd input never crashes."""

from __future__ import annotations

import copy
import ipaddress
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from clusterctl.cli import main
from clusterctl.compose.render import render_compose
from clusterctl.errors import SpecError, UsageError
from clusterctl.spec import kafkadist, validate
from clusterctl.spec.model import ClusterSpec, load_spec, parse_spec

REPO = Path(__file__).resolve().parent.parent
CLI = str(Path(sys.executable).parent / "clusterctl")  # the console script of the running environment


def run_main(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """The real console entry point in-process: (exit code, stdout, stderr)."""
    monkeypatch.setattr(sys, "argv", ["clusterctl", *args])
    code = 0
    try:
        main()
    except SystemExit as exc:
        code = int(exc.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def deep_merge(base: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in patch.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = deep_merge(out[key], value)
        else:
            out[key] = value
    return out


BASE: dict[str, Any] = {"name": "lab", "profile": "default"}

# (id, YAML text or a patch of BASE, substring expected in the one-line error)
BAD_SPECS: list[tuple[str, str | dict[str, Any], str]] = [
    ("rf-above-brokers", {"kafka": {"brokers": 2, "defaults": {"replication_factor": 3}}}, "exceeds kafka.brokers=2"),
    ("min-isr-equals-rf", {"kafka": {"defaults": {"min_insync_replicas": 3}}}, "equals replication_factor=3"),
    (
        "min-isr-above-rf",
        {"kafka": {"defaults": {"replication_factor": 2, "min_insync_replicas": 3}}},
        "exceeds replication_factor=2",
    ),
    (
        "min-isr-above-internal-rf",
        {"kafka": {"brokers": 5, "defaults": {"replication_factor": 5, "min_insync_replicas": 4}}},
        "internal topics' replication factor 3",
    ),
    (
        "internal-rf-above-brokers",
        {
            "kafka": {
                "brokers": 1,
                "defaults": {
                    "replication_factor": 1,
                    "min_insync_replicas": 1,
                    "internal_topics_replication_factor": 2,
                },
            }
        },
        "internal_topics_replication_factor=2 exceeds",
    ),
    ("duplicate-ip", {"zookeeper": {"ips": ["10.77.0.11", "10.77.0.11", "10.77.0.13"]}}, "already used by"),
    (
        "duplicate-ip-across-roles",
        {"kafka": {"ips": ["10.77.0.21", "10.77.0.22", "10.77.0.11"]}},
        "10.77.0.11 is already used by zookeeper node 1",
    ),
    ("ip-outside-subnet", {"kafka": {"ips": ["10.77.1.21", "10.77.0.22", "10.77.0.23"]}}, "not a usable host"),
    ("ip-is-gateway", {"zookeeper": {"ips": ["10.77.0.1", "10.77.0.12", "10.77.0.13"]}}, "used by network.gateway"),
    ("ip-is-network", {"zookeeper": {"ips": ["10.77.0.0", "10.77.0.12", "10.77.0.13"]}}, "not a usable host"),
    ("ip-is-broadcast", {"kafka_manager": {"ip": "10.77.0.255"}}, "not a usable host"),
    ("ip-not-an-ip", {"kafka_manager": {"ip": "kafka-manager"}}, "is not an IPv4 address"),
    ("ip-count", {"zookeeper": {"ips": ["10.77.0.11"]}}, "zookeeper.ips has 1 entries for 3 nodes"),
    ("seed-public-subnet", {"network": {"subnet": "172.69.0.0/25"}}, "not private address space"),
    ("public-subnet", {"network": {"subnet": "8.8.8.0/24"}}, "not private address space"),
    ("subnet-host-bits", {"network": {"subnet": "10.77.0.5/24"}}, "is not a valid network"),
    ("subnet-garbage", {"network": {"subnet": "ten.0.0.0/8"}}, "is not a valid network"),
    ("subnet-ipv6", {"network": {"subnet": "fd00::/64"}}, "must be IPv4"),
    ("subnet-too-small", {"network": {"subnet": "10.77.0.0/29"}}, "too small"),
    ("default-layout-needs-27", {"network": {"subnet": "10.77.0.0/28"}}, "/27 or larger"),
    ("gateway-outside", {"network": {"gateway": "10.78.0.1"}}, "outside network.subnet"),
    ("gateway-broadcast", {"network": {"gateway": "10.77.0.255"}}, "network or broadcast address"),
    ("network-name", {"network": {"name": "my net!"}}, "network.name"),
    ("port-clash-manager", {"kafka_manager": {"port": 9093}}, "clashes with kafka broker 2"),
    ("port-clash-zk-broker", {"zookeeper": {"client_port": 9090}}, "host port 9092 clashes"),
    ("internal-vs-host-listener", {"kafka": {"internal_port": 9093}}, "clashes with kafka broker 2 host listener"),
    ("jmx-vs-host-listener", {"kafka": {"jmx_port": 9092}}, "kafka.jmx_port 9092 clashes"),
    ("jmx-vs-internal", {"kafka": {"jmx_port": 19092}}, "clashes with kafka.internal_port"),
    ("privileged-port", {"kafka": {"host_port": 80}}, "outside 1024-65535"),
    ("port-too-high", {"kafka": {"host_port": 65534}}, "outside 1024-65535"),
    ("bad-name-upper", {"name": "Kafka Lab"}, "name 'Kafka Lab' must be"),
    ("bad-name-dash", {"name": "-lab"}, "must be 1-40 chars"),
    ("bad-name-long", {"name": "x" * 41}, "must be 1-40 chars"),
    ("unknown-top-field", {"brokers": 3}, "unknown field 'brokers'"),
    ("unknown-nested-field", {"kafka": {"replicas": 3}}, "unknown field 'kafka.replicas'"),
    ("wrong-type-int", {"kafka": {"brokers": "three"}}, "kafka.brokers"),
    ("wrong-type-list", {"zookeeper": {"nodes": [3]}}, "zookeeper.nodes"),
    ("wrong-type-section", {"publish": "everywhere"}, "publish"),
    ("wrong-type-bool", {"kafka_manager": {"enabled": "maybe"}}, "kafka_manager.enabled"),
    ("wrong-type-ips", {"zookeeper": {"ips": [1, 2, 3]}}, "zookeeper.ips"),
    ("even-zk", {"zookeeper": {"nodes": 4}}, "zookeeper.nodes=4"),
    ("too-many-zk", {"zookeeper": {"nodes": 11}}, "zookeeper.nodes"),
    ("zero-brokers", {"kafka": {"brokers": 0}}, "kafka.brokers"),
    ("too-many-brokers", {"kafka": {"brokers": 10}}, "kafka.brokers"),
    ("bad-profile", {"profile": "latest"}, "profile"),
    ("bad-engine", {"kafka": {"engine": "redpanda"}}, "kafka.engine"),
    (
        "offline-with-cmak",
        {"profile": "offline", "kafka_manager": {"kind": "cmak"}},
        "profile offline has no kafka-manager (CMAK) image",
    ),
    ("bad-manager-kind", {"kafka_manager": {"kind": "akhq"}}, "kafka_manager.kind"),
    ("tansu-replicated", {"kafka": {"engine": "tansu"}, "kafka_manager": {"enabled": False}}, "tansu has no replic"),
    (
        "tansu-with-cmak",
        {"kafka": {"engine": "tansu", "brokers": 1, "defaults": {"replication_factor": 1, "min_insync_replicas": 1}}},
        "kafka_manager.kind=cmak needs kafka.engine=kafka",
    ),
    ("bind-not-ip", {"publish": {"bind_address": "localhost"}}, "publish.bind_address 'localhost'"),
    ("bind-ipv6", {"publish": {"bind_address": "::1"}}, "is not an IPv4 address"),
    ("heap", {"kafka": {"defaults": {"heap": "lots"}}}, "kafka.defaults.heap"),
    ("short-grace", {"kafka": {"stop_grace_seconds": 10}}, "kafka.stop_grace_seconds"),
    ("image-with-space", {"images": {"kafka": "my image"}}, "images.kafka"),
    ("spark-port-clash", {"spark": {"enabled": True, "ui_port": 9000}}, "spark.ui_port host port 9000 clashes"),
    ("spark-master-port-clash", {"spark": {"enabled": True, "master_port": 2181}}, "clashes with zookeeper node 1"),
    ("spark-ip-clash", {"spark": {"enabled": True, "master_ip": "10.77.0.30"}}, "already used by kafka_manager"),
    (
        "spark-ip-outside",
        {"spark": {"enabled": True, "worker_ips": ["10.77.1.41"]}},
        "spark worker 1 ip 10.77.1.41 is not a usable host",
    ),
    ("spark-default-layout", {"network": {"subnet": "10.77.0.0/27"}, "spark": {"enabled": True}}, "/26 or larger"),
    ("spark-worker-ips-count", {"spark": {"enabled": True, "workers": 2, "worker_ips": ["10.77.0.41"]}}, "1 entries"),
    ("spark-workers", {"spark": {"enabled": True, "workers": 0}}, "spark.workers"),
    ("spark-memory", {"spark": {"enabled": True, "worker_memory": "lots"}}, "spark.worker_memory"),
    ("spark-shared-dir", {"spark": {"shared_dir": "tmp/x"}}, "spark.shared_dir 'tmp/x' must be an absolute path"),
    ("spark-relay-port", {"kafka": {"host_port": 7078}, "spark": {"enabled": True}}, "clashes with a spark worker"),
    (
        "kafka-version-4-zookeeper-mode",
        {"profile": "offline", "kafka": {"version": "4.4.0"}},
        "image clusterctl/kafka:4.4.0 is Kafka 4.4, which has no ZooKeeper mode",
    ),
    ("kafka-version-registry-profile", {"kafka": {"version": "3.9.2"}}, "kafka.version picks the image's tag"),
    (
        "kafka-version-apache-before-its-images",
        {"profile": "apache", "kafka": {"mode": "kraft", "version": "3.6.2"}},
        "kafka.version 3.6.2: Apache publishes apache/kafka images from 3.7.0 on (KIP-975)",
    ),
    (
        "kafka-version-apache-4-zookeeper-mode",
        {"profile": "apache", "kafka": {"version": "4.1.0"}},
        "profile apache runs Apache's apache/kafka:4.1.0 in KRaft mode",
    ),
    (
        "kafka-version-with-images-kafka",
        {"profile": "offline", "kafka": {"version": "3.9.2"}, "images": {"kafka": "my/kafka:1"}},
        "it needs one of those profiles, engine kafka and no images.kafka",
    ),
    (
        "kafka-version-tansu",
        {
            "profile": "offline",
            "kafka": {
                "engine": "tansu",
                "brokers": 1,
                "version": "3.9.2",
                "defaults": {"replication_factor": 1, "min_insync_replicas": 1},
            },
        },
        "kafka.version picks the image's tag",
    ),
    ("kafka-version-not-exact", {"profile": "offline", "kafka": {"version": "3.9.x"}}, "kafka.version: "),
    ("bad-yaml", "name: [unclosed\n", "not valid YAML at line"),
    ("not-a-mapping", "- name\n- lab\n", "must be a YAML mapping, got list"),
    ("scalar-doc", "42\n", "must be a YAML mapping, got int"),
]


def _write(tmp_path: Path, spec: str | dict[str, Any]) -> Path:
    path = tmp_path / "clusterctl.yaml"
    text = spec if isinstance(spec, str) else yaml.safe_dump(deep_merge(BASE, spec), sort_keys=False)
    path.write_text(text)
    return path


def test_base_spec_is_valid() -> None:
    spec = parse_spec(BASE)
    assert spec.topology.bootstrap_servers == "127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094"
    assert spec.internal_topics_rf == 3 and spec.internal_topics_min_isr == 2


@pytest.mark.parametrize(("case", "spec", "expected"), BAD_SPECS, ids=[c[0] for c in BAD_SPECS])
def test_bad_spec_is_one_line_exit_2_nothing_written(
    case: str,
    spec: str | dict[str, Any],
    expected: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = _write(tmp_path, spec)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert "\n" not in str(info.value)
    assert expected in str(info.value), str(info.value)

    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    code, out, err = run_main(monkeypatch, capsys, "-s", str(path), "render")
    assert code == 2
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and expected in lines[0], err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no compose/ directory, no temp files


def test_missing_spec_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = run_main(monkeypatch, capsys, "-s", str(tmp_path / "nope.yaml"), "render")
    assert code == 3  # not found, like any missing thing
    assert err.count("\n") == 1 and "nope.yaml not found" in err and "clusterctl init" in err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kind", ["directory", "FIFO", "symlink loop"])
def test_spec_that_is_not_a_file_says_what_it_is(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "spec.yaml"
    if kind == "directory":
        path.mkdir()
    elif kind == "FIFO":
        os.mkfifo(path)  # reading it would block: it must be refused without opening it
    else:
        path.symlink_to(path)
    monkeypatch.chdir(tmp_path)
    for args in (["-s", str(path), "render"], ["-s", str(tmp_path / "none.yaml"), "scenario", "run", str(path)]):
        code, _, err = run_main(monkeypatch, capsys, *args)
        assert code == 2, err
        assert err.count("\n") == 1 and f"{path} is a {kind}" in err and "not found" not in err, err


def test_bad_spec_through_the_installed_console_script(tmp_path: Path) -> None:
    path = _write(tmp_path, {"network": {"subnet": "172.69.0.0/25"}})
    proc = subprocess.run([CLI, "-s", str(path), "render"], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "172.69.0.0/25 is not private address space" in proc.stderr
    assert not (tmp_path / "compose").exists()


# ---- init ----


def test_init_writes_commented_valid_spec(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "c.yaml"
    code, stdout, _ = run_main(
        monkeypatch, capsys, "init", "lab1", "--output", str(out), "--brokers", "4", "--profile", "default", "--json"
    )
    assert code == 0
    result = yaml.safe_load(stdout)
    spec = load_spec(out)
    assert result["spec"] == spec.model_dump(mode="json")
    assert (spec.name, spec.profile, spec.kafka.engine, spec.kafka.brokers) == ("lab1", "default", "kafka", 4)
    assert (spec.kafka.defaults.replication_factor, spec.kafka.defaults.min_insync_replicas) == (3, 2)
    assert spec.kafka_manager.enabled
    text = out.read_text()
    leaves = [ln for ln in text.splitlines() if re.match(r"^\s*\w+: \S", ln)]
    assert len(leaves) == len(_leaf_fields(ClusterSpec))
    assert [ln for ln in leaves if "  # " not in ln] == []  # every field explained
    for pitfall in ("172.69.0.0/25", "JMX_PORT", "letmein", "LEADER_NOT_AVAILABLE", "filled the disk"):
        assert pitfall in text
    # every leaf field is written explicitly
    data = yaml.safe_load(text)
    assert set(data) == set(ClusterSpec.model_fields)
    assert set(data["kafka"]["defaults"]) == set(type(spec.kafka.defaults).model_fields)


def _leaf_fields(model: type[BaseModel], prefix: str = "") -> list[str]:
    out: list[str] = []
    for name, info in model.model_fields.items():
        ann = info.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            out += _leaf_fields(ann, f"{prefix}{name}.")
        else:
            out.append(prefix + name)
    return out


def test_init_refuses_to_overwrite_without_force(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CLUSTERCTL_PROFILE", "offline")  # no registry probe
    monkeypatch.setattr(kafkadist, "built_versions", lambda: [])
    out = tmp_path / "c.yaml"
    out.write_text("# mine\n")
    code, _, err = run_main(monkeypatch, capsys, "init", "--output", str(out))
    assert code == 2 and err.count("\n") == 1 and "already exists" in err and "--force" in err
    assert out.read_text() == "# mine\n"
    code, _, _ = run_main(monkeypatch, capsys, "init", "--output", str(out), "--force")
    assert code == 0 and load_spec(out).name == "kafka-lab"


INIT_BAD_VALUES: list[tuple[list[str], str]] = [
    (["--subnet", "172.69.0.0/25"], "not private address space"),
    (["--zk-nodes", "4"], "zookeeper.nodes=4"),
    (["--brokers", "10"], "kafka.brokers"),
    (["--engine", "tansu", "--brokers", "3"], "tansu has no replication"),
    (["--profile", "nope"], "--profile must be one of"),
    (["--engine", "zk"], "--engine must be kafka or tansu"),
    (["Bad Name"], "must be 1-40 chars"),
    (["--mode", "both"], "--mode must be zookeeper or kraft, got 'both'"),
    (["--mode", "kraft", "--zk-nodes", "3"], "--zk-nodes is for ZooKeeper mode"),
    (["--kafka-version", "4.4.0"], "which has no ZooKeeper mode (Kafka 4.0 removed it): add --mode kraft; a ZooKeeper"),
    (["--kafka-version", "3.9.x"], "--kafka-version must be an exact version such as 3.9.2, got '3.9.x'"),
    (["--profile", "default", "--kafka-version", "3.9.2"], "--kafka-version picks the offline or apache profile's"),
    (
        ["--profile", "apache", "--kafka-version", "3.6.2"],
        "--kafka-version 3.6.2: Apache publishes apache/kafka images",
    ),
    (["--engine", "tansu", "--brokers", "1", "--kafka-version", "3.9.2"], "profile offline, engine tansu"),
]


@pytest.mark.parametrize("built", [[], ["3.9.2", "4.4.0"]], ids=["none-built", "built"])
@pytest.mark.parametrize(("args", "expected"), INIT_BAD_VALUES)
def test_init_bad_values_write_nothing(
    args: list[str],
    expected: str,
    built: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The same one line whatever Kafka images this machine has built (pinned both ways)."""
    monkeypatch.setenv("CLUSTERCTL_PROFILE", "offline")  # no registry probe
    monkeypatch.setattr(kafkadist, "built_versions", lambda: list(built))
    out = tmp_path / "c.yaml"
    code, _, err = run_main(monkeypatch, capsys, "init", "--output", str(out), *args)
    assert code == 2, err
    assert err.count("\n") == 1 and expected in err, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("built", "args", "mode", "version"),
    [
        ([], [], "zookeeper", None),
        (["3.9.2", "4.4.0"], [], "zookeeper", "3.9.2"),  # the newest built that runs ZooKeeper mode
        ([], ["--mode", "kraft"], "kraft", None),
        (["3.9.2", "4.4.0"], ["--mode", "kraft"], "kraft", "4.4.0"),  # the newest built: KRaft runs 4.x
    ],
    ids=["none-built", "built", "kraft-none-built", "kraft-built"],
)
def test_init_offline_without_flags_is_three_brokers_of_kafka(
    built: list[str],
    args: list[str],
    mode: str,
    version: str | None,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("CLUSTERCTL_PROFILE", "offline")
    monkeypatch.setattr(kafkadist, "built_versions", lambda: list(built))
    out = tmp_path / "c.yaml"
    code, stdout, err = run_main(monkeypatch, capsys, "init", "--output", str(out), *args, "--json")
    assert code == 0, err
    spec = load_spec(out)
    assert yaml.safe_load(stdout)["spec"] == spec.model_dump(mode="json")
    assert (spec.profile, spec.kafka.engine, spec.kafka.mode) == ("offline", "kafka", mode)
    assert spec.kafka.brokers == 3 and spec.topology.broker_ids == [1, 2, 3]
    assert (spec.kafka.defaults.replication_factor, spec.kafka.defaults.min_insync_replicas) == (3, 2)
    assert spec.kafka_manager.enabled and spec.manager_kind == "console"  # no CMAK offline: our console
    if mode == "zookeeper":
        assert spec.zookeeper.nodes == 3 and spec.topology.zk_ids == [1, 2, 3]
    else:
        assert spec.topology.zk_ids == [] and len(spec.topology.controller_ids) == 3
    assert spec.kafka.version == version
    lines = err.strip().splitlines()
    assert lines[0] == "profile offline: CLUSTERCTL_PROFILE=offline"
    if version is None:
        assert len(lines) == 2 and "no clusterctl/kafka image is built yet" in lines[1]
        assert "`clusterctl images build kafka`" in lines[1]
        assert "# NOTE: no clusterctl/kafka image is built yet" in out.read_text()
    else:
        assert lines[1:] == [f"Kafka {version}: the newest clusterctl/kafka image built here for {mode} mode"]
        assert spec.broker_image == f"clusterctl/kafka:{version}"  # pinned: no longer follows what is built


def test_init_offline_takes_a_requested_kafka_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CLUSTERCTL_PROFILE", "offline")
    monkeypatch.setattr(kafkadist, "built_versions", lambda: ["3.9.2"])
    out = tmp_path / "c.yaml"
    args = ("init", "--output", str(out), "--mode", "kraft", "--kafka-version", "4.4.0")
    code, _, err = run_main(monkeypatch, capsys, *args)
    assert code == 0, err
    spec = load_spec(out)
    assert (spec.kafka.mode, spec.kafka.version, spec.broker_image) == ("kraft", "4.4.0", "clusterctl/kafka:4.4.0")


def test_init_engine_tansu_only_when_asked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("CLUSTERCTL_PROFILE", "offline")
    monkeypatch.setattr(kafkadist, "built_versions", lambda: [])
    out = tmp_path / "c.yaml"
    code, _, err = run_main(monkeypatch, capsys, "init", "--output", str(out), "--engine", "tansu")
    assert code == 0, err
    spec = load_spec(out)
    assert (spec.kafka.engine, spec.kafka.brokers, spec.kafka.version) == ("tansu", 1, None)
    assert (spec.kafka.defaults.replication_factor, spec.kafka.defaults.min_insync_replicas) == (1, 1)


# ---- kafka.version ----


def test_kafka_version_pins_the_offline_image(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """kafka.version names the image; without it the offline image follows $CLUSTERCTL_KAFKA_DIST, else the
    newest built (both pinned here)."""
    dist = tmp_path / "kafka"
    (dist / "libs").mkdir(parents=True)
    (dist / "libs" / "kafka-clients-3.7.0.jar").write_bytes(b"")
    monkeypatch.setenv(kafkadist.KAFKA_DIST_ENV, str(dist))
    monkeypatch.setattr(kafkadist, "built_versions", lambda: ["3.8.1", "4.4.0"])
    offline: dict[str, Any] = {"name": "lab", "profile": "offline"}
    pinned = parse_spec({**offline, "kafka": {"version": "3.9.2"}})
    assert pinned.kafka.version == "3.9.2" and pinned.broker_image == "clusterctl/kafka:3.9.2"
    kraft = parse_spec({**offline, "kafka": {"mode": "kraft", "version": "4.4.0"}})
    assert kraft.broker_image == "clusterctl/kafka:4.4.0"  # 4.x is fine in KRaft mode
    assert parse_spec(offline).broker_image == "clusterctl/kafka:3.7.0"  # unpinned: the distribution's version
    monkeypatch.delenv(kafkadist.KAFKA_DIST_ENV)
    assert parse_spec(offline).broker_image == "clusterctl/kafka:3.8.1"  # else the newest built ZK mode runs
    assert parse_spec({**offline, "kafka": {"mode": "kraft"}}).broker_image == "clusterctl/kafka:4.4.0"


# ---- hypothesis: odd input never crashes with anything but SpecError ----

FIELDS = [
    "name",
    "profile",
    "network",
    "zookeeper",
    "kafka",
    "kafka_manager",
    "images",
    "publish",
    "subnet",
    "gateway",
    "nodes",
    "ips",
    "brokers",
    "engine",
    "host_port",
    "internal_port",
    "jmx_port",
    "defaults",
    "replication_factor",
    "min_insync_replicas",
    "port",
    "ip",
    "bind_address",
    "enabled",
    "client_port",
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True),
    st.text(max_size=30),
    st.sampled_from(["10.77.0.0/24", "172.69.0.0/25", "::1", "10.77.0.300", "0.0.0.0", "offline", "tansu", "9092"]),
    st.ip_addresses(v=4).map(str),
    st.dates(),
)
values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(FIELDS), st.text(max_size=8), st.integers()), children, max_size=5),
    ),
    max_leaves=12,
)

VALID: dict[str, Any] = {
    "name": "lab",
    "profile": "default",
    "network": {"subnet": "10.77.0.0/24"},
    "zookeeper": {"nodes": 3, "client_port": 2181},
    "kafka": {
        "brokers": 3,
        "host_port": 9092,
        "internal_port": 19092,
        "jmx_port": 9999,
        "defaults": {"replication_factor": 3, "min_insync_replicas": 2},
    },
    "kafka_manager": {"enabled": True, "port": 9000},
    "publish": {"bind_address": "127.0.0.1"},
}
PATHS = [
    ("name",),
    ("profile",),
    ("network",),
    ("network", "subnet"),
    ("network", "gateway"),
    ("zookeeper", "nodes"),
    ("zookeeper", "client_port"),
    ("zookeeper", "ips"),
    ("kafka", "brokers"),
    ("kafka", "engine"),
    ("kafka", "host_port"),
    ("kafka", "internal_port"),
    ("kafka", "jmx_port"),
    ("kafka", "ips"),
    ("kafka", "defaults", "replication_factor"),
    ("kafka", "defaults", "min_insync_replicas"),
    ("kafka_manager", "port"),
    ("kafka_manager", "ip"),
    ("kafka_manager", "enabled"),
    ("publish", "bind_address"),
]
mutation_values = st.one_of(
    values,
    st.integers(min_value=0, max_value=70000),
    st.ip_addresses(v=4).map(str),
    st.lists(st.ip_addresses(v=4).map(str), max_size=4),
    st.builds(lambda a, p: f"{a}/{p}", st.ip_addresses(v=4), st.integers(min_value=0, max_value=33)),
)


def _check(data: object) -> None:
    try:
        spec = parse_spec(data)
    except SpecError as exc:
        assert str(exc) and "\n" not in str(exc)
        assert exc.exit_code == 2
        return
    # a spec that validates must render and keep its invariants
    yaml.safe_load(render_compose(spec))
    ips = list(spec.topology.static_ips().values())
    assert len(set(ips)) == len(ips)
    net = spec.network.network
    assert all(ipaddress.IPv4Address(ip) in net for ip in ips)
    assert net.is_private
    assert spec.kafka.defaults.replication_factor <= spec.kafka.brokers


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values)
def test_random_documents_never_crash(data: object) -> None:
    _check(data)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(PATHS), mutation_values), min_size=1, max_size=4))
def test_mutated_valid_specs_never_crash(mutations: list[tuple[tuple[str, ...], Any]]) -> None:
    data = copy.deepcopy(VALID)
    for path, value in mutations:
        node = data
        for key in path[:-1]:
            if not isinstance(node.get(key), dict):
                node[key] = {}
            node = node[key]
        node[path[-1]] = value
    _check(data)


@settings(max_examples=100, deadline=None)
@given(st.text(max_size=200))
def test_random_yaml_text_never_crashes(tmp_path_factory: pytest.TempPathFactory, text: str) -> None:
    path = tmp_path_factory.mktemp("yaml") / "spec.yaml"
    path.write_text(text, encoding="utf-8")
    try:
        load_spec(path)
    except SpecError as exc:
        assert "\n" not in str(exc)


@pytest.mark.parametrize(
    ("value", "maximum", "refused"),
    [(4096, validate.MAX_PARTITIONS, False), (4097, validate.MAX_PARTITIONS, True),
     (100_000, validate.MAX_PARTITIONS, True), (2**31 - 1, validate.MAX_PARTITIONS, True),
     (16, validate.MAX_REPLICATION_FACTOR, False), (17, validate.MAX_REPLICATION_FACTOR, True),
     (32_768, validate.MAX_REPLICATION_FACTOR, True)],
)  # fmt: skip
def test_counts_above_the_bound_are_refused(value: int, maximum: int, refused: bool) -> None:
    """100000 partitions (librdkafka's own limit) were accepted and then stalled every later metadata call."""
    if refused:
        with pytest.raises(UsageError, match=rf"too large: {value} \(at most {maximum}\)"):
            validate.count(value, "--partitions", maximum=maximum)
    else:
        assert validate.count(value, "--partitions", maximum=maximum) == value
