"""KIP-966 on real Kafka 4.x (the newest built from Maven Central), one 3 controllers + 3 brokers cluster for the file.

The spec's kraft.eligible_leader_replicas_version is finalized by `up` (0 here: a 4.1+ cluster is formatted with
1); `topic describe` shows Elr and LastKnownElr from DescribeTopicPartitions once it is on; the three drills run
once each: `last-replica-standing` loses nothing and names the ELR election that kept it, its negative control
(ELR off, unclean election on) and `unclean-election-elr` (ELR on does not stop an unclean election) lose
acknowledged writes. Each drill finalizes its own ELR level and restores the cluster's afterwards.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _runtime_helpers import cli, cli_json, release, render, up_json, write_kraft_spec

from clusterctl.errors import ClusterctlError
from clusterctl.images import build as images
from clusterctl.images import kafka_maven
from clusterctl.kafka import features
from clusterctl.kafka.admin import wait_full_isr
from clusterctl.spec.model import load_spec

pytestmark = [pytest.mark.real_kafka, pytest.mark.docker]
ELR = "eligible.leader.replicas.version"


@pytest.fixture(scope="module")
def elr_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    built = {r.target: r for r in images.build_images(["kafka"], kafka_version=kafka_maven.NEWEST_KAFKA_LINE)}
    version = built["kafka"].image.rpartition(":")[2]
    assert version.split(".")[:2] >= ["4", "1"], version  # ELR on for new clusters from 4.1
    spec_path = write_kraft_spec(
        tmp_path_factory.mktemp("elr"), f"ctlelr-{uuid.uuid4().hex[:6]}", version, eligible_leader_replicas_version=0
    )
    render(spec_path)
    try:
        up = up_json(spec_path, timeout=300)
        # formatted with ELR on (4.1+), finalized off by `up` as the spec says
        assert up["features"] == {ELR: 0} and up["features_changed"] == [f"{ELR} 1 -> 0"], up
        yield spec_path
    finally:
        release(spec_path)


def _addresses(spec_path: Path) -> list[tuple[str, int]]:
    t = load_spec(spec_path).topology
    return [(t.host, t.broker_host_port(b)) for b in t.broker_ids]


def _elr_level(spec_path: Path) -> int:
    return features.describe_features(_addresses(spec_path)).finalized.get(ELR, 0)


def test_topic_describe_shows_the_elr_while_it_is_on(elr_cluster: Path) -> None:
    """ELR off: no Elr columns. On: a follower stopped while the ISR is below min.insync.replicas is in the ELR."""
    addresses, bootstrap = _addresses(elr_cluster), load_spec(elr_cluster).topology.bootstrap_servers
    assert _elr_level(elr_cluster) == 0
    with pytest.raises(ClusterctlError, match="only supports versions 0-1"):
        features.set_feature_level(addresses, ELR, 2)
    topic = f"elr-{uuid.uuid4().hex[:6]}"
    res = cli(elr_cluster, "topic", "create", topic, "-p", "2", "-r", "3", "-c", "min.insync.replicas=3")
    assert res.returncode == 0, res.stderr
    off = cli_json(elr_cluster, "topic", "describe", topic)
    assert [p["elr"] for p in off[0]["partitions"]] == [None, None]
    assert features.set_feature_level(addresses, ELR, 1) is None  # 0: not finalized
    try:
        assert cli(elr_cluster, "chaos", "stop-broker", "3").returncode == 0
        seen: list[Any] = []
        for _ in range(60):  # the controller moves broker 3 from the ISR [1,2,3] to the ELR: ISR 2 < min ISR 3
            seen = cli_json(elr_cluster, "topic", "describe", topic)[0]["partitions"]
            if all(p["elr"] == [3] and 3 not in p["isr"] for p in seen):
                break
        assert [(p["elr"], p["last_known_elr"]) for p in seen] == [([3], []), ([3], [])], seen
        table = cli(elr_cluster, "topic", "describe", topic).stdout
        assert "Elr" in table and "LastKnownElr" in table
    finally:
        cli(elr_cluster, "chaos", "heal")
        wait_full_isr(bootstrap, 120, topics=[topic])
        features.set_feature_level(addresses, ELR, 0)


def _drill(spec_path: Path, name: str) -> dict[str, Any]:
    res = cli(spec_path, "scenario", "run", name, "--report-dir", f"report-{name}", "--json", timeout=900)
    assert res.returncode == 0, res.stderr[-4000:]
    result: dict[str, Any] = json.loads(res.stdout)
    print(f"\n{name}: verify {result['verify']['lost_count']} lost; safety: {result['safety']}")
    assert _elr_level(spec_path) == 0  # the drill's own level undone: the cluster's (the spec's 0) again
    return result


def test_last_replica_standing_loses_nothing_and_names_the_elr_election(elr_cluster: Path) -> None:
    r = _drill(elr_cluster, "last-replica-standing")
    assert r["ok"] and r["bounds"][ELR] == "1" and r["verify"]["lost_count"] == 0 and r["verify"]["acked"] > 0
    details = {s["description"]: s["detail"] for s in r["steps"]}
    assert (
        "elr [1, 3] last known elr [1]" in details["wait_for elr {'equals': [1, 3], 'last_known_elr': [1]} within 30s"]
    )
    assert "leader -1" in details["assert leader {'equals': -1}"]  # broker 2, back first, was not elected
    elected = [(e["leader_before"], e["leader"], e["rule"], e["elr_before"]) for e in r["elections"]]
    assert (-1, 3, "elr", [1, 3]) in elected and not [e for e in elected if e[2] == "unclean"]
    assert r["safety"].startswith("0 lost, kept safe by ELR: broker 3 leads") and "no unclean election" in r["safety"]


def test_last_replica_standing_with_elr_off_and_unclean_election_loses_writes(elr_cluster: Path) -> None:
    r = _drill(elr_cluster, "last-replica-standing-unclean")
    assert r["ok"] and r["bounds"][ELR] == "0" and r["verify"]["lost_count"] > 0
    assert [(e["leader"], e["rule"]) for e in r["elections"] if e["rule"] == "unclean"] == [(2, "unclean")]
    assert "acknowledged lost by unclean election: broker 2 leads" in r["safety"]


def test_unclean_election_with_elr_on_still_loses_writes(elr_cluster: Path) -> None:
    r = _drill(elr_cluster, "unclean-election-elr")
    assert r["ok"] and r["bounds"][ELR] == "1" and r["verify"]["lost_count"] > 0
    assert any(e["rule"] == "unclean" and e["partition"] == 0 for e in r["elections"]), r["elections"]
    assert "acknowledged lost by unclean election" in r["safety"]
