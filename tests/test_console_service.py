"""The offline cluster's kafka-manager service (clusterctl's console) and the Drills page, on Docker.

Test-only spec: a free subnet and free host ports, the console on a free port of 127.0.0.1.
`up` starts the console with the cluster and waits for its healthcheck; a browser reads ZooKeeper's Mode per
node and a CLI topic through it. A host `clusterctl ui` then shows a tansu scenario's timeline while it runs.
"""

from __future__ import annotations

import json
import stat
import subprocess
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from _console import CLUSTERCTL, cells, console, screenshot
from _runtime_helpers import cli, running_cluster, wait_for

from clusterctl.compose.render import ENV_FILE, existing_console_token
from clusterctl.images import build as images
from clusterctl.runtime import allocate
from clusterctl.runtime import docker as dk
from clusterctl.spec.model import load_spec

pytestmark = [pytest.mark.docker, pytest.mark.browser]
# the console's host port, free (9000, the default, is where a user's own cluster has its console)
CONSOLE_PORT = allocate.free_port_block(1)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    images.build_images(["zookeeper", "tansu", "console"])
    work = tmp_path_factory.mktemp("console-svc")
    manager = {"kafka_manager": {"enabled": True, "port": CONSOLE_PORT}}  # kind: the offline profile's (console)
    name = f"ctlui-{uuid.uuid4().hex[:6]}"
    with running_cluster(work, name, extra=manager, up_timeout=180) as spec_path:
        yield spec_path


def test_kafka_manager_service_starts_with_up_and_answers(cluster: Path, browser: Any, tmp_path: Path) -> None:
    name = yaml.safe_load(cluster.read_text())["name"]
    env_file = cluster.parent / "compose" / name / ENV_FILE
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600 and existing_console_token(env_file.parent)
    container = dk.get_container(f"{name}-kafka-manager")
    container.reload()
    assert container.attrs["State"]["Health"]["Status"] == "healthy"  # `up` waited for the healthcheck
    assert container.attrs["Config"]["Image"] == "clusterctl/console:0.1.0"
    with urllib.request.urlopen(f"http://127.0.0.1:{CONSOLE_PORT}/healthz", timeout=10) as resp:
        assert resp.read() == b"ok"
    # published on loopback: no token needed, and --print-url says so
    res = cli(cluster, "ui", "--print-url")
    assert res.returncode == 0 and res.stdout == f"http://127.0.0.1:{CONSOLE_PORT}/\n"

    topic = f"svc-{uuid.uuid4().hex[:6]}"
    assert cli(cluster, "topic", "create", topic, "--partitions", "2").returncode == 0
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    try:
        base = f"http://127.0.0.1:{CONSOLE_PORT}"
        page.goto(f"{base}/cluster")
        modes = cells(page, "tr.zk-node td.mode")
        assert sorted(m.split(" ")[0] for m in modes) == ["follower", "follower", "leader"], modes
        assert page.inner_text("#quorum").startswith("quorum ok: 3/3")
        screenshot(page, tmp_path, "cluster-zk")
        page.goto(f"{base}/topics")  # through the container's relay to tansu's advertised address
        page.locator(f'#topics tr[data-topic="{topic}"]').wait_for()
        page.goto(f"{base}/zk?path=/zookeeper")
        assert "config" in cells(page, "#children li")
        page.goto(f"{base}/zk?path=/zookeeper/config")
        assert "server.1=zk1" in page.inner_text("#znode-data")
        screenshot(page, tmp_path, "zookeeper")
    finally:
        page.close()


def _status(url: str, host: str) -> int:
    req = urllib.request.Request(url, headers={"Host": host})
    try:
        with urllib.request.urlopen(req, timeout=15) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_containerised_console_checks_host_and_bounds_znodes(cluster: Path) -> None:
    from kazoo.client import KazooClient

    base = f"http://127.0.0.1:{CONSOLE_PORT}"
    # the published address by either loopback name; a re-pointed name (DNS rebinding) is refused
    assert _status(f"{base}/topics", f"127.0.0.1:{CONSOLE_PORT}") == 200
    assert _status(f"{base}/topics", f"localhost:{CONSOLE_PORT}") == 200
    assert _status(f"{base}/topics", f"rebind.attacker.test:{CONSOLE_PORT}") == 421
    root = f"/ctlui-{uuid.uuid4().hex[:6]}"
    zk = KazooClient(hosts=load_spec(cluster).topology.zk_connect)
    zk.start(timeout=15)
    try:
        zk.create(root, b"x" * 900_000)  # near ZooKeeper's 1 MB record limit
        tx = zk.transaction()
        for i in range(1200):
            tx.create(f"{root}/c{i:04d}")
        tx.commit()
        with urllib.request.urlopen(f"{base}/zk?path={root}", timeout=30) as resp:
            body = resp.read().decode()
        assert body.count('<li><a href="/zk?path=') == 500 and "700 more" in body
        assert "showing the first 65,536 of 900,000 characters" in body and len(body) < 200_000
        with urllib.request.urlopen(f"{base}/zk?path={root}&from=1000", timeout=30) as resp:
            assert resp.read().decode().count('<li><a href="/zk?path=') == 200
    finally:
        zk.delete(root, recursive=True)
        zk.stop()


def test_drill_timeline_updates_while_the_scenario_runs(cluster: Path, browser: Any, tmp_path: Path) -> None:
    reports = tmp_path / "reports"
    run_dir = reports / "short-pause-live"
    with console("--reports-dir", str(reports), "--read-only", cwd=cluster.parent) as url:
        drill = subprocess.Popen(
            [str(CLUSTERCTL), "-s", str(cluster), "scenario", "run", "short-pause", "--report-dir", str(run_dir),
             "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cluster.parent,
        )  # fmt: skip
        try:
            wait_for(lambda: (run_dir / "events.jsonl").is_file(), 60, "the scenario's live events file")
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto(f"{url}/drills")
            assert cells(page, '#drills tr[data-run="short-pause-live"] td.live') == ["running"]
            page.goto(f"{url}/drills/short-pause-live")
            page.evaluate("window.__notReloaded = true")
            # the fault is injected a few seconds into the run: its row arrives on the open page
            page.locator("#timeline tr.ev-fault").first.wait_for(timeout=60_000)
            page.locator("#timeline tr.ev-heal").first.wait_for(timeout=60_000)
            assert page.evaluate("window.__notReloaded") is True
            screenshot(page, tmp_path, "drill")
            out, err = drill.communicate(timeout=300)
        finally:
            if drill.poll() is None:
                drill.kill()
        assert drill.returncode == 0, err
        assert json.loads(out)["ok"]
        page.goto(f"{url}/drills")
        page.locator('#drills tr[data-run="short-pause-live"] td.ok').wait_for(timeout=10_000)
        assert page.locator('#drills tr[data-run="short-pause-live"] a[href$="report.html"]').count() == 1
        page.close()
