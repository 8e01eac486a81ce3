"""What `up` does before the health clock starts (pull plan, pull failures, `--pull never`, data volumes made for
another profile), CMAK registration, the profile and the Kafka version `init` chooses.

No registry is reachable here: a real `docker pull` of an image on the reserved `.invalid` domain fails at once,
so the failure path runs for real. CMAK cannot run here either: its registration client is tested against a
small local HTTP server that implements exactly CMAK's documented contract (yahoo/CMAK conf/routes and
app/controllers/Cluster.scala: GET /api/status/clusters, GET /addCluster, POST /clusters with its form). That
tests our client against the real protocol's shape, not CMAK itself. Nothing here starts a container.
"""

from __future__ import annotations

import json
import os
import re
import socket
import threading
import time
import urllib.parse
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from _runtime_helpers import CLI, leftovers, render

from clusterctl.errors import ClusterctlError, NotFoundError, TimeoutError_, UnreachableError, UsageError
from clusterctl.runtime import cmak, volumes
from clusterctl.runtime import docker as dk
from clusterctl.runtime import pull as pulling
from clusterctl.runtime.cluster import Cluster
from clusterctl.spec.initfile import choose_kafka_version, choose_profile
from clusterctl.spec.model import load_spec, parse_spec

NOWHERE = "registry.invalid/clusterctl-test"  # RFC 2606: never resolves


# ---- the pull plan ----

IMAGES = ["zookeeper:3.8", "zookeeper:3.8", "confluentinc/cp-kafka:7.9.1", "clusterctl/console:0.1.0", "cmak:1"]


def test_pull_plan_order_and_policies() -> None:
    present = {"confluentinc/cp-kafka:7.9.1"}.__contains__
    # missing: the absent registry images, each once, in the compose file's order; ours are built, never pulled
    assert pulling.plan("default", IMAGES, "missing", present) == ["zookeeper:3.8", "cmak:1"]
    assert pulling.plan("default", IMAGES, "always", present) == [
        "zookeeper:3.8",
        "confluentinc/cp-kafka:7.9.1",
        "cmak:1",
    ]
    assert pulling.plan("default", IMAGES, "never", present) == []
    assert pulling.plan("offline", IMAGES, "always", present) == []  # the offline profile never pulls
    with pytest.raises(UsageError, match="--pull must be one of"):
        pulling.plan("default", IMAGES, "sometimes", present)


@pytest.mark.parametrize(
    ("said", "kind", "code"),
    [
        ("manifest for zookeeper:9.9 not found: manifest unknown", NotFoundError, 3),
        ("pull access denied for foo/bar, repository does not exist or may require 'docker login'", NotFoundError, 3),
        ('Get "https://registry-1.docker.io/v2/": dial tcp: lookup registry-1.docker.io: no such host',
         UnreachableError, 4),
        ("net/http: TLS handshake timeout", UnreachableError, 4),
    ],
)  # fmt: skip
def test_pull_errors_are_one_line_with_the_documented_code(said: str, kind: type, code: int) -> None:
    err = pulling.pull_error("x:1", RuntimeError(said + "\n  second line"))
    assert isinstance(err, kind) and err.exit_code == code
    assert "\n" not in str(err) and str(err).startswith("pulling x:1 failed: ")


@pytest.mark.docker
def test_a_real_failed_pull_is_fast_and_stops_the_rest() -> None:
    seen: list[str] = []
    t0 = time.monotonic()
    with pytest.raises(UnreachableError) as info:
        pulling.pull([f"{NOWHERE}/a:1", f"{NOWHERE}/b:1"], on_pull=lambda image, *_: seen.append(image))
    assert time.monotonic() - t0 < 10
    assert f"{NOWHERE}/a:1" in info.value.message and "/b:1" not in info.value.message
    assert "\n" not in str(info.value) and seen == []


@pytest.mark.docker
def test_probe_of_an_unreachable_registry_answers_fast() -> None:
    t0 = time.monotonic()
    answer = pulling.probe_registry(f"{NOWHERE}/zookeeper:3.8", timeout=3)
    assert answer.reachable is False and answer.reason and time.monotonic() - t0 < 5


# ---- up: pull first, nothing started when it fails ----


def _registry_spec(directory: Path, zookeeper: str) -> Path:
    data: dict[str, Any] = {
        "name": f"ctlpull-{uuid.uuid4().hex[:6]}",
        "profile": "default",
        "network": {"subnet": "10.79.3.0/24"},
        "zookeeper": {"nodes": 1, "client_port": 22291},
        "kafka": {"engine": "tansu", "brokers": 1, "host_port": 29293, "jmx_port": None,
                  "defaults": {"replication_factor": 1, "min_insync_replicas": 1}},
        "kafka_manager": {"enabled": False},
        "images": {"zookeeper": zookeeper, "kafka": f"{NOWHERE}/tansu:1"},
    }  # fmt: skip
    path = directory / "clusterctl.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.docker
@pytest.mark.parametrize(
    ("pull", "code", "words"),
    [("never", 3, "not present locally (--pull never); nothing was started"), ("missing", 4, "pulling")],
)
def test_up_pull_failure_is_one_line_and_starts_nothing(tmp_path: Path, pull: str, code: int, words: str) -> None:
    import subprocess

    spec_path = _registry_spec(tmp_path, f"{NOWHERE}/zookeeper:3.8")
    render(spec_path)
    project = load_spec(spec_path).topology.project
    t0 = time.monotonic()
    res = subprocess.run(
        [CLI, "-s", str(spec_path), "up", "--pull", pull, "--timeout", "1"],
        capture_output=True, text=True, cwd=spec_path.parent, timeout=60,
    )  # fmt: skip
    assert res.returncode == code, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and words in lines[0] and f"{NOWHERE}/zookeeper:3.8" in lines[0], res.stderr
    assert time.monotonic() - t0 < 20
    assert leftovers(project) == {"containers": [], "networks": [], "volumes": []}


# ---- volumes carry the profile and the image user ----


def test_image_users_follow_the_images() -> None:
    assert volumes.image_user("confluentinc/cp-kafka:7.9.1") == "appuser uid 1000"
    assert volumes.image_user("wurstmeister/kafka:2.13-2.8.1") == "root"
    assert volumes.image_user("apache/kafka:4.4.0") == "appuser"  # docker/jvm/Dockerfile: USER appuser
    assert volumes.image_user("zookeeper:3.8") == volumes.image_user("docker.io/library/zookeeper:3.8")
    assert volumes.image_user("clusterctl/kafka:3.7.0") == "kafka (chowns at start)"
    assert volumes.image_user("registry.local:5000/other:1") == "image default"


def test_volume_mismatch_by_profile_or_user() -> None:
    claim = volumes.VolumeClaim(
        "p_kafka1-data", "kafka1-data", "confluentinc/cp-kafka:7.9.1", "default", "appuser uid 1000"
    )
    same = {volumes.PROFILE_LABEL: "default", volumes.USER_LABEL: "appuser uid 1000"}
    assert volumes.mismatch(claim, same) is None
    assert volumes.mismatch(claim, {}) is None  # made before the labels existed: not checked
    why = volumes.mismatch(claim, {volumes.PROFILE_LABEL: "wurstmeister", volumes.USER_LABEL: "root"})
    assert why is not None and "profile wurstmeister as root" in why and "appuser uid 1000" in why
    other_user = volumes.mismatch(claim, {**same, volumes.USER_LABEL: "root"})
    assert other_user is not None and "as root" in other_user


@pytest.mark.docker
def test_up_refuses_volumes_of_another_profile_before_pulling(tmp_path: Path) -> None:
    import subprocess

    spec_path = _registry_spec(tmp_path, f"{NOWHERE}/zookeeper:3.8")
    render(spec_path)
    spec = load_spec(spec_path)
    claim = volumes.claims(spec, spec_path.parent)[0]
    made = volumes.VolumeClaim(claim.name, claim.key, "clusterctl/zookeeper:3.8.0", "offline", "zookeeper")
    dk.client().volumes.create(name=claim.name, labels=volumes.volume_labels(spec, made))
    try:
        res = subprocess.run(
            [CLI, "-s", str(spec_path), "up"], capture_output=True, text=True, cwd=spec_path.parent, timeout=60
        )
        assert res.returncode == 2, res.stderr
        lines = res.stderr.strip().splitlines()
        assert len(lines) == 1 and claim.name in lines[0] and "clusterctl down --volumes" in lines[0], res.stderr
        assert "pulling" not in lines[0]  # refused before any pull
        assert leftovers(spec.topology.project) == {"containers": [], "networks": [], "volumes": [claim.name]}
    finally:
        dk.client().volumes.get(claim.name).remove()


# ---- CMAK registration against CMAK's documented HTTP contract ----

CMAK_VERSIONS = ["0.8.2.2", "1.1.1", "2.0.0", "2.2.0", "2.4.0", "2.4.1"]  # the form's choices (model.scala)
FORM_REQUIRED = ("name", "kafkaVersion", "zkHosts", "securityProtocol")  # nonEmptyText in clusterConfigForm


class FakeCmak(BaseHTTPRequestHandler):
    clusters: list[dict[str, Any]]
    posts: list[dict[str, str]]

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, code: int, body: str, kind: str = "text/html") -> None:
        data = body.encode()
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/api/status/clusters":
            self._send(200, json.dumps({"clusters": {"active": self.clusters, "pending": []}}), "application/json")
        elif self.path == "/addCluster":
            options = "".join(f'<option value="{v}">{v}</option>' for v in CMAK_VERSIONS)
            self._send(200, f'<form><select id="kafkaVersion" name="kafkaVersion">{options}</select></form>')
        else:
            self._send(404, "not found")

    def do_POST(self) -> None:
        if self.path != "/clusters":
            return self._send(404, "not found")
        length = int(self.headers.get("Content-Length") or 0)
        fields = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
        self.posts.append(fields)
        bad = [f for f in FORM_REQUIRED if not fields.get(f)]
        if bad or fields["kafkaVersion"] not in CMAK_VERSIONS or not re.fullmatch(r"[A-Za-z0-9._-]+", fields["name"]):
            return self._send(400, f"<p>error: {bad or fields.get('kafkaVersion')}</p>")
        self.clusters.append({"name": fields["name"], "curatorConfig": {"zkConnect": fields["zkHosts"]}})
        self._send(200, "<html>Done!</html>")


@pytest.fixture
def fake_cmak() -> Iterator[tuple[str, type[FakeCmak]]]:
    handler = type("Cmak", (FakeCmak,), {"clusters": [], "posts": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler
    finally:
        server.shutdown()
        server.server_close()


def test_cmak_registration_adds_once(fake_cmak: tuple[str, type[FakeCmak]]) -> None:
    url, server = fake_cmak
    reg = cmak.register(url, "lab", "zk1:2181,zk2:2181", (3, 9), timeout=5)
    assert reg.added and reg.kafka_version == "2.4.1"  # the newest CMAK knows, not newer than the broker
    assert [c["name"] for c in server.clusters] == ["lab"]
    post = server.posts[0]
    assert (post["zkHosts"], post["securityProtocol"], post["pollConsumers"]) == (
        "zk1:2181,zk2:2181",
        "PLAINTEXT",
        "true",
    )
    again = cmak.register(url, "lab", "zk1:2181,zk2:2181", (3, 9), timeout=5)
    assert not again.added and len(server.posts) == 1  # idempotent: a listed cluster is left alone


def test_cmak_version_choice() -> None:
    assert cmak.pick_version(CMAK_VERSIONS, (2, 2)) == "2.2.0"
    assert cmak.pick_version(CMAK_VERSIONS, (0, 7)) == "2.4.1"  # none fits: the newest it knows
    assert cmak.pick_version([], (3, 9)) == cmak.FALLBACK_KAFKA_VERSION


def test_cmak_refusal_is_one_line(fake_cmak: tuple[str, type[FakeCmak]]) -> None:
    url, _ = fake_cmak
    with pytest.raises(ClusterctlError) as info:
        cmak.register(url, "bad name", "zk1:2181", (3, 9), timeout=5)
    assert "HTTP 400" in str(info.value) and "\n" not in str(info.value)


def _dead_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_cmak_not_answering_is_bounded() -> None:
    url = f"http://127.0.0.1:{_dead_port()}"
    t0 = time.monotonic()
    with pytest.raises(TimeoutError_, match=re.escape(f"CMAK at {url} to answer")):
        cmak.register(url, "lab", "zk1:2181", (3, 9), timeout=1.5)
    assert time.monotonic() - t0 < 8


def _cmak_spec(port: int, **kafka_manager: Any) -> Any:
    return parse_spec(
        {"name": "lab", "profile": "default", "kafka_manager": {"port": port, **kafka_manager}}, source="test"
    )


def test_cluster_registers_itself_and_names_the_manager(fake_cmak: tuple[str, type[FakeCmak]]) -> None:
    url, server = fake_cmak
    cluster = Cluster(_cmak_spec(int(url.rsplit(":", 1)[1])))
    assert cluster.manager_url == url
    line = cluster.register_manager(timeout=5)
    assert line is not None and "added to CMAK" in line and "zk1:2181,zk2:2181,zk3:2181" in line
    assert server.clusters[0]["curatorConfig"]["zkConnect"] == cluster.spec.topology.internal_zk_connect
    assert "already in CMAK" in (cluster.register_manager(timeout=5) or "")
    console = Cluster(_cmak_spec(9000, kind="console"))
    assert console.register_manager() is None and console.manager_url == "http://127.0.0.1:9000"
    dead = Cluster(_cmak_spec(_dead_port())).register_manager(timeout=1)
    assert dead is not None and dead.startswith("cluster lab not registered in CMAK: timed out")


# ---- the profile and the Kafka version init chooses ----


def test_profile_choice_branches() -> None:
    def answers(ok: bool) -> Any:
        return lambda image: (ok, f"asked about {image}")

    env = choose_profile("wurstmeister", answers(False))
    assert (env.profile, env.reason) == ("wurstmeister", "CLUSTERCTL_PROFILE=wurstmeister")
    with pytest.raises(UsageError, match="CLUSTERCTL_PROFILE must be one of"):
        choose_profile("nope", answers(True))
    up = choose_profile(None, answers(True))
    assert up.profile == "default" and "a registry serves zookeeper:3.8" in up.reason
    down = choose_profile("", answers(False))
    assert down.profile == "offline" and "asked about zookeeper:3.8" in down.reason


BUILT = ["3.7.0", "3.9.2", "4.4.0"]  # what kafkadist.built_versions() would list, oldest first


def test_kafka_version_offline_zookeeper_mode_picks_the_newest_zookeeper_capable_built() -> None:
    version, notes = choose_kafka_version("offline", "kafka", "zookeeper", None, BUILT)
    assert version == "3.9.2"  # 4.4.0 is newer but has no ZooKeeper mode
    assert notes == ["Kafka 3.9.2: the newest clusterctl/kafka image built here for zookeeper mode"]
    assert choose_kafka_version("offline", "kafka", "zookeeper", None, ["4.0.0", "4.4.0"])[0] is None


def test_kafka_version_kraft_picks_the_newest_built_including_4() -> None:
    version, notes = choose_kafka_version("offline", "kafka", "kraft", None, BUILT)
    assert version == "4.4.0" and len(notes) == 1 and "Kafka 4.4.0" in notes[0] and "kraft mode" in notes[0]
    assert choose_kafka_version("offline", "kafka", "kraft", None, ["3.9.2"])[0] == "3.9.2"


@pytest.mark.parametrize("mode", ["zookeeper", "kraft"])
def test_kafka_version_none_built_is_none_and_a_note_with_the_build_command(mode: str) -> None:
    version, notes = choose_kafka_version("offline", "kafka", mode, None, [])
    assert version is None
    assert len(notes) == 1 and "`clusterctl images build kafka`" in notes[0] and "\n" not in notes[0]


def test_kafka_version_requested_is_taken_as_given() -> None:
    # a requested version is not checked against what is built: `up` names the missing image and its build
    assert choose_kafka_version("offline", "kafka", "zookeeper", "3.8.1", []) == ("3.8.1", [])
    assert choose_kafka_version("offline", "kafka", "kraft", "4.4.0", ["3.9.2"]) == ("4.4.0", [])


def test_kafka_version_4_in_zookeeper_mode_is_one_usage_line() -> None:
    with pytest.raises(UsageError) as info:
        choose_kafka_version("offline", "kafka", "zookeeper", "4.4.0", BUILT)
    assert str(info.value) == (
        "--kafka-version 4.4.0 is Kafka 4.4, which has no ZooKeeper mode (Kafka 4.0 removed it): add --mode kraft; "
        "a ZooKeeper cluster gets to 4.x by `clusterctl migrate kraft` on Kafka 3.9 first"
    )
    assert info.value.exit_code == 2


@pytest.mark.parametrize(("profile", "engine"), [("default", "kafka"), ("wurstmeister", "kafka"), ("offline", "tansu")])
def test_kafka_version_is_for_the_offline_and_apache_images_only(profile: str, engine: str) -> None:
    assert choose_kafka_version(profile, engine, "zookeeper", None, BUILT) == (None, [])  # nothing to choose
    with pytest.raises(UsageError) as info:
        choose_kafka_version(profile, engine, "zookeeper", "3.9.2", BUILT)
    message = str(info.value)
    assert "\n" not in message and message.startswith(
        "--kafka-version picks the offline or apache profile's Kafka image"
    )
    assert f"profile {profile}, engine {engine}" in message


@pytest.mark.parametrize("bad", ["3.9", "3.9.x", "4.x", "v3.9.2", "3.9.2-rc1", "latest", ""])
def test_kafka_version_must_be_exact(bad: str) -> None:
    with pytest.raises(UsageError) as info:
        choose_kafka_version("offline", "kafka", "kraft", bad, BUILT)
    assert str(info.value) == f"--kafka-version must be an exact version such as 3.9.2, got {bad!r}"


@pytest.mark.docker
def test_init_without_profile_probes_and_says_why(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    env_free = subprocess.run(
        [CLI, "init", "lab", "-o", str(tmp_path / "a.yaml"), "--json"],
        capture_output=True, text=True, env={k: v for k, v in os.environ.items() if k != "CLUSTERCTL_PROFILE"},
    )  # fmt: skip
    result = json.loads(env_free.stdout)
    assert result["profile"] == "offline"  # no registry answers here
    assert result["profile_reason"].startswith("no registry serves zookeeper:3.8")
    assert env_free.stderr.splitlines()[0].startswith("profile offline: no registry serves zookeeper:3.8")
    monkeypatch.setenv("CLUSTERCTL_PROFILE", "wurstmeister")
    chosen = subprocess.run(
        [CLI, "init", "lab", "-o", str(tmp_path / "b.yaml"), "--json"], capture_output=True, text=True
    )
    assert (
        json.loads(chosen.stdout)["profile"] == "wurstmeister"
        and load_spec(tmp_path / "b.yaml").profile == "wurstmeister"
    )


def test_profile_apache_takes_the_kafka_version_as_its_image_tag() -> None:
    version, notes = choose_kafka_version("apache", "kafka", "kraft", "3.9.1", BUILT)
    assert version == "3.9.1" and notes == ["Kafka 3.9.1: apache/kafka:3.9.1 (pulled by `up`)"]
    assert choose_kafka_version("apache", "kafka", "kraft", None, BUILT) == (None, [])  # the profile's 4.4.0
    for bad, said in (("3.6.2", "from 3.7.0 on (KIP-975)"), ("4.x", "must be an exact version such as 4.4.0")):
        with pytest.raises(UsageError) as info:
            choose_kafka_version("apache", "kafka", "kraft", bad, BUILT)
        assert "\n" not in str(info.value) and said in str(info.value)
