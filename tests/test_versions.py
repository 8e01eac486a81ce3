"""What a Kafka version supports (spec/capabilities), the refusal of ZooKeeper mode on 4.x, and `clusterctl versions`.

The domain functions take what is built, assembled and resolved as parameters, so their rows are asserted for
images present and absent whatever this machine holds. The CLI tests run the real `clusterctl` against the real
engine: `versions` after building the 3.9.x and 4.x images (a no-op when their inputs are unchanged), its rows
checked against `docker image inspect`.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from clusterctl.errors import UsageError
from clusterctl.images.versions import list_versions
from clusterctl.spec import capabilities, kafkadist
from clusterctl.spec.initfile import choose_kafka_version
from clusterctl.spec.model import parse_spec

CLI = str(Path(sys.executable).parent / "clusterctl")  # the console script of the running environment
MIGRATE_WAY = "by `clusterctl migrate kraft` on Kafka 3.9 first"

# release line -> (zookeeper_mode, kraft, zk_migration, dynamic_quorum, elr, group_protocol, java)
TABLE = {
    "3.3.2": ("yes", "yes", "no", "no", "no", "no", "8+"),
    "3.4.1": ("yes", "yes", "early access", "no", "no", "no", "8+"),
    "3.5.2": ("yes", "yes", "preview", "no", "no", "no", "8+"),
    "3.6.2": ("yes", "yes", "yes (clusterctl: 3.7+)", "no", "no", "no", "8+"),
    "3.7.0": ("yes", "yes", "yes", "no", "no", "early access", "8+"),
    "3.8.1": ("yes", "yes", "yes", "no", "no", "preview", "8+"),
    "3.9.2": ("yes", "yes", "yes", "yes", "no", "preview", "8+"),
    "4.0.0": ("no", "yes", "no", "yes", "yes, off by default", "yes", "17+"),
    "4.1.1": ("no", "yes", "no", "yes", "yes, on for new clusters", "yes", "17+"),
    "4.4.0": ("no", "yes", "no", "yes", "yes, on for new clusters", "yes", "17+"),
    "3.2.3": ("yes", "early access", "no", "no", "no", "no", "8+"),
}


@pytest.mark.parametrize("version", list(TABLE))
def test_capability_table(version: str) -> None:
    assert tuple(capabilities.capabilities(version).values()) == TABLE[version]
    assert list(capabilities.capabilities(version)) == list(capabilities.FEATURE_NAMES)
    assert capabilities.zookeeper_capable(version) == (TABLE[version][0] == "yes")
    assert kafkadist.zookeeper_capable(version) == capabilities.zookeeper_capable(version)  # one rule, re-exported
    assert capabilities.kraft_ready(version) == (TABLE[version][1] == "yes")


def test_migrate_kraft_starts_where_the_table_says() -> None:
    from clusterctl.kafka.kraft import migration

    assert migration.MIN_VERSION == capabilities.MIGRATE_KRAFT_FROM == (3, 7)


def _one_line(message: str) -> str:
    assert "\n" not in message
    return message


def test_zookeeper_mode_on_4x_is_refused_naming_the_migration() -> None:
    # the spec: an image of Kafka 4.x in ZooKeeper mode
    with pytest.raises(Exception) as spec_err:
        parse_spec({"name": "lab", "images": {"kafka": "apache/kafka:4.1.0"}})
    assert "is Kafka 4.1, which has no ZooKeeper mode" in str(spec_err.value)
    assert MIGRATE_WAY in str(spec_err.value)
    # init --kafka-version 4.x without --mode kraft
    with pytest.raises(UsageError) as init_err:
        choose_kafka_version("offline", "kafka", "zookeeper", "4.4.0", [])
    assert _one_line(str(init_err.value)) == (
        "--kafka-version 4.4.0 is Kafka 4.4, which has no ZooKeeper mode (Kafka 4.0 removed it): add --mode kraft; "
        "a ZooKeeper cluster gets to 4.x by `clusterctl migrate kraft` on Kafka 3.9 first"
    )
    # a 4.x distribution named by $CLUSTERCTL_KAFKA_DIST (or kafka.version) in ZooKeeper mode
    with pytest.raises(UsageError) as dist_err:
        kafkadist.check_zookeeper_mode("4.4.0", "kafka.version")
    assert _one_line(str(dist_err.value)).startswith("kafka.version is Kafka 4.4.0, which has no ZooKeeper mode")
    assert MIGRATE_WAY in str(dist_err.value)


def test_zookeeper_mode_on_4x_through_the_cli_is_one_line_exit_2(tmp_path: Path) -> None:
    spec = tmp_path / "clusterctl.yaml"
    spec.write_text(yaml.safe_dump({"name": "lab", "images": {"kafka": "apache/kafka:4.1.0"}}))
    proc = subprocess.run([CLI, "-s", str(spec), "render"], capture_output=True, text=True, cwd=tmp_path, timeout=60)
    assert proc.returncode == 2, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "no ZooKeeper mode" in lines[0] and MIGRATE_WAY in lines[0], lines


def test_rows_for_images_present_and_absent() -> None:
    rows = list_versions(
        built=["3.9.2"], assembled=["3.9.2", "4.4.0"], lines={"3.9.x": "3.9.2", "4.x": "4.4.0"}, known=False
    )
    assert [(r.version, r.built, r.assembled, r.served_as, r.build) for r in rows] == [
        ("3.9.2", True, True, ["3.9.x (default)"], None),
        ("4.4.0", False, True, ["4.x (newest)"], "clusterctl images build kafka --kafka-version 4.4.0"),
    ]
    assert rows[0].image == "clusterctl/kafka:3.9.2"
    assert (rows[0].zookeeper_mode, rows[0].dynamic_quorum, rows[0].elr, rows[0].java) == ("yes", "yes", "no", "8+")
    assert (rows[1].zookeeper_mode, rows[1].elr, rows[1].group_protocol, rows[1].java) == (
        "no", "yes, on for new clusters", "yes", "17+")  # fmt: skip


def test_rows_on_a_machine_with_nothing_built() -> None:
    rows = list_versions(built=[], assembled=[], lines={"3.9.x": None, "4.x": None})
    assert [(r.version, r.built, r.served_as, r.build) for r in rows] == [
        ("3.9.x", False, ["3.9.x (default)"], "clusterctl images build kafka --kafka-version 3.9.x"),
        ("4.x", False, ["4.x (newest)"], "clusterctl images build kafka --kafka-version 4.x"),
    ]
    assert rows[0].zookeeper_mode == "yes" and rows[1].zookeeper_mode == "no"
    assert rows[1].elr == capabilities.supports("4.4", "elr")  # 4.x: the newest line the table knows


def test_known_adds_every_release_line_not_listed() -> None:
    rows = list_versions(built=["3.9.2", "4.0.0"], assembled=[], lines={}, known=True)
    versions = [r.version for r in rows]
    assert versions == ["3.3.x", "3.4.x", "3.5.x", "3.6.x", "3.7.x", "3.8.x", "3.9.2", "4.0.0", "4.1.x", "4.2.x",
                        "4.3.x", "4.4.x"]  # fmt: skip
    built = {r.version for r in rows if r.built}
    assert built == {"3.9.2", "4.0.0"}
    assert next(r for r in rows if r.version == "3.4.x").zk_migration == "early access"


# ---- the CLI against this machine's real images ----


@pytest.fixture(scope="module")
def built_here() -> list[str]:
    """The 3.9.x (the session's installation) and the newest 4.x images, built (a no-op when unchanged)."""
    from conftest import kafka_dist

    from clusterctl.images import build as images
    from clusterctl.images import kafka_maven

    out = []
    for built in (images.build_images(["kafka"], kafka_dist=kafka_dist()),
                  images.build_images(["kafka"], kafka_version=kafka_maven.NEWEST_KAFKA_LINE)):  # fmt: skip
        out.append(next(r.image for r in built if r.target == "kafka").rpartition(":")[2])
    assert out[0].startswith("3.") and out[1].startswith("4."), out
    return out


def _image_present(image: str) -> bool:
    return subprocess.run(["docker", "image", "inspect", image], capture_output=True, timeout=60).returncode == 0


@pytest.mark.docker
def test_versions_cli_json_matches_the_engine(built_here: list[str]) -> None:
    proc = subprocess.run([CLI, "versions", "--all", "--json"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    rows = {r["version"]: r for r in json.loads(proc.stdout)}
    for version in built_here:
        assert rows[version]["built"] is True and rows[version]["build"] is None
        expected = capabilities.capabilities(version)
        assert {k: rows[version][k] for k in expected} == expected
    assert rows[built_here[0]]["zookeeper_mode"] == "yes" and rows[built_here[1]]["zookeeper_mode"] == "no"
    for version, row in rows.items():  # present or absent: what the engine says, nothing else
        if row["image"] == kafkadist.offline_image(version):
            assert row["built"] is _image_present(row["image"]), row
        else:  # a release line with no exact version here: nothing to inspect, never built
            assert row["built"] is False and row["build"] == f"clusterctl images build kafka --kafka-version {version}"
    assert {f"{a}.{b}" for a, b in capabilities.KNOWN_LINES} <= {".".join(v.split(".")[:2]) for v in rows}


@pytest.mark.docker
def test_versions_cli_text(built_here: list[str]) -> None:
    proc = subprocess.run([CLI, "versions"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    header = next(ln for ln in proc.stdout.splitlines() if "Version" in ln)
    for title in ("Built", "ZooKeeper mode", "KRaft", "ZK→KRaft migration", "Dynamic quorum (KIP-853)",
                  "ELR (KIP-966)", "Group protocol (KIP-848)", "Java"):  # fmt: skip
        assert title in header
    cells = {}
    for line in proc.stdout.splitlines():
        parts = [p.strip() for p in line.strip("│ ").split("│")]
        if parts and parts[0] in built_here:
            cells[parts[0]] = parts
    three, four = cells[built_here[0]], cells[built_here[1]]
    assert three[1:10] == ["yes", "yes", "yes", "yes", "yes", "no", "preview", "8+", "3.9.x (default)"]
    assert four[1:10] == ["yes", "no", "yes", "no", "yes", "yes, on for new clusters", "yes", "17+", "4.x (newest)"]
