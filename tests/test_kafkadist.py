"""The Kafka image tag follows the distribution's real version (its jars). Kafka 4.x builds an image like any
other Kafka (it runs KRaft), but a ZooKeeper-mode spec refuses it in one line."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from clusterctl.errors import UsageError
from clusterctl.images import build as images
from clusterctl.spec import kafkadist, profiles
from clusterctl.spec.model import parse_spec


def fake_dist(root: Path, top: str, version: str, tarball: bool = True) -> Path:
    """The files of a Kafka binary release that clusterctl reads (empty jars are enough)."""
    d = root / top
    (d / "bin").mkdir(parents=True)
    (d / "bin" / "kafka-server-start.sh").write_text("#!/bin/sh\n")
    (d / "config").mkdir()
    (d / "libs").mkdir()
    for jar in (f"kafka-clients-{version}.jar", f"kafka_2.13-{version}.jar", "zookeeper-3.8.4.jar"):
        (d / "libs" / jar).write_bytes(b"")
    if not tarball:
        return d
    tgz = root / f"{top}.tgz"
    with tarfile.open(tgz, "w:gz") as tar:
        tar.add(d, arcname=top)
    return tgz


@pytest.mark.parametrize("tarball", [True, False])
def test_version_comes_from_the_jars_not_the_file_name(tmp_path: Path, tarball: bool) -> None:
    dist = fake_dist(tmp_path, "kafka_2.13-3.9.0", "3.7.0", tarball)  # a misleading name
    assert kafkadist.dist_version(dist) == "3.7.0"
    assert kafkadist.offline_image(kafkadist.dist_version(dist)) == "clusterctl/kafka:3.7.0"
    assert images.kafka_dist_root(dist) == ("kafka_2.13-3.9.0" if tarball else "")


def test_offline_spec_finds_the_image_of_the_dist_or_the_newest_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = parse_spec({"name": "lab", "profile": "offline", "kafka_manager": {"enabled": False}})
    monkeypatch.setenv(kafkadist.KAFKA_DIST_ENV, str(fake_dist(tmp_path, "kafka_2.13-3.7.0", "3.7.0")))
    monkeypatch.setattr(kafkadist, "built_versions", lambda: ["3.6.2", "3.8.1"])
    assert spec.broker_image == "clusterctl/kafka:3.7.0"  # the distribution the user points at wins
    monkeypatch.delenv(kafkadist.KAFKA_DIST_ENV)
    assert spec.broker_image == "clusterctl/kafka:3.8.1"  # else the newest built here
    monkeypatch.setattr(kafkadist, "built_versions", lambda: ["3.8.1", "4.0.0"])
    assert spec.broker_image == "clusterctl/kafka:3.8.1"  # 4.x has no ZooKeeper mode
    kraft = parse_spec({"name": "lab", "profile": "offline", "kafka": {"mode": "kraft"}})
    assert kraft.broker_image == "clusterctl/kafka:4.0.0"  # KRaft runs the newest, 4.x included
    monkeypatch.setattr(kafkadist, "built_versions", lambda: ["4.0.0"])
    assert spec.broker_image == "clusterctl/kafka:unbuilt"  # nothing built that ZooKeeper mode runs
    monkeypatch.setattr(kafkadist, "built_versions", lambda: [])
    assert spec.broker_image == "clusterctl/kafka:unbuilt"
    assert profiles.ours("clusterctl/kafka:unbuilt")
    assert profiles.build_hint(["clusterctl/kafka:unbuilt"]).startswith("clusterctl images build kafka")
    # explicit images.kafka and the published profiles are left alone
    pinned = parse_spec({**spec.model_dump(), "images": {"kafka": "my/kafka:1"}})
    assert pinned.broker_image == "my/kafka:1"
    assert parse_spec({"name": "lab"}).broker_image == "confluentinc/cp-kafka:7.9.1"


@pytest.mark.parametrize("tarball", [True, False])
def test_kafka_4_distribution_is_a_valid_image_input(tmp_path: Path, tarball: bool) -> None:
    """`images build kafka --kafka-dist` takes a 4.x distribution: its image is for KRaft clusters."""
    dist = fake_dist(tmp_path, "kafka_2.13-4.0.0", "4.0.0", tarball)
    assert images.kafka_dist_root(dist) == ("kafka_2.13-4.0.0" if tarball else "")
    assert images.resolve_targets(["kafka"], dist) == ["kafka"]
    assert kafkadist.offline_image(kafkadist.dist_version(dist)) == "clusterctl/kafka:4.0.0"


def test_kafka_4_dist_is_refused_in_zookeeper_mode_in_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dist = fake_dist(tmp_path, "kafka_2.13-4.0.0", "4.0.0")
    monkeypatch.setenv(kafkadist.KAFKA_DIST_ENV, str(dist))
    monkeypatch.setattr(kafkadist, "built_versions", lambda: ["3.9.2"])  # the distribution wins even so
    with pytest.raises(UsageError) as info:
        kafkadist.resolve_offline_image()
    message = str(info.value)
    assert "\n" not in message and info.value.exit_code == 2
    assert message.startswith(f"{kafkadist.KAFKA_DIST_ENV}={dist} is Kafka 4.0.0, which has no ZooKeeper mode")
    assert "--kafka-version 3.9.x" in message  # and how to build a Kafka that has one
    assert kafkadist.resolve_offline_image(kraft=True) == "clusterctl/kafka:4.0.0"
    # a ZooKeeper-mode spec resolves its image at use (validation does not read the machine): refused there
    zk_spec = parse_spec({"name": "lab", "profile": "offline", "kafka_manager": {"enabled": False}})
    with pytest.raises(UsageError, match="which has no ZooKeeper mode"):
        _ = zk_spec.broker_image
    kraft = parse_spec({"name": "lab", "profile": "offline", "kafka": {"mode": "kraft"}})
    assert kraft.broker_image == "clusterctl/kafka:4.0.0"


def test_zookeeper_capability_by_version() -> None:
    assert [kafkadist.zookeeper_capable(v) for v in ("3.7.0", "3.9.2", "4.0.0", "4.4.0")] == [True, True, False, False]
    assert kafkadist.check_zookeeper_mode("3.9.2", "x") == "3.9.2"
    with pytest.raises(UsageError, match=r"^kafka\.version is Kafka 4\.4\.0, which has no ZooKeeper mode"):
        kafkadist.check_zookeeper_mode("4.4.0", "kafka.version")


def test_not_a_distribution(tmp_path: Path) -> None:
    bogus = tmp_path / "kafka.tgz"
    bogus.write_bytes(b"not a tarball")
    with pytest.raises(UsageError, match="not a readable tar archive"):
        kafkadist.dist_version(bogus)
    empty = tmp_path / "somedir"
    (empty / "libs").mkdir(parents=True)
    with pytest.raises(UsageError, match="version is unknown"):
        kafkadist.dist_version(empty)
