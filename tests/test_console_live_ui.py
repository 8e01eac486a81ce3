"""The broker page, the KRaft console, the live drill dashboard and the bound on live tails, in a real headless
Chromium against a console over tansu (a loopback process; no Docker).

The dashboard is fed the way a running scenario feeds it: events written by the observer's own Recorder into
<reports>/<run>/events.jsonl (scenarios need a cluster in Docker). The KRaft console is started with a quorum
address that does not answer (no KRaft cluster runs here): every page must still work and say so; the quorum
table itself is rendered from a constructed QuorumView (tests/test_console_present.py checks its escaping).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _console import cells, console, screenshot
from _dataplane import run

from clusterctl.chaos.recorder import Recorder
from clusterctl.testing.tansu import free_port

pytestmark = [pytest.mark.tansu, pytest.mark.browser]

LEADER_BUDGET_MS = 2000
HOSTILE = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("reports")


@pytest.fixture(scope="module")
def ui(tansu_broker: Any, reports: Path) -> Iterator[str]:
    with console("--bootstrap-server", tansu_broker.bootstrap, "--reports-dir", str(reports)) as url:
        yield url


def test_broker_page_lists_its_partitions_and_configs(
    ui: str, page: Any, bootstrap: str, unique_name: str, tmp_path: Path
) -> None:
    assert run("topic", "create", unique_name, "-p", "3", "-r", "1", "-b", bootstrap).returncode == 0
    page.goto(f"{ui}/brokers")
    page.click("#brokers a.broker-link")
    page.wait_for_url(f"{ui}/brokers/*")
    broker = page.url.rsplit("/", 1)[1]
    rows = page.locator("#broker-partitions tr.replica", has_text=unique_name)
    assert rows.count() == 3
    assert cells(page, f"#broker-partitions tr.replica:has-text('{unique_name}') td.role") == ["leader"] * 3
    assert cells(page, f"#broker-partitions tr.replica:has-text('{unique_name}') td.in-isr") == ["yes"] * 3
    assert int(page.inner_text("#broker-led")) >= 3
    from clusterctl.console.brokers import NOT_SUPPORTED

    assert page.inner_text("#log-dirs-note") == NOT_SUPPORTED  # tansu lists no DescribeLogDirs: said, not failed
    assert page.locator("#log-dirs").count() == 0
    assert page.locator("#configs tbody tr").count() >= 1  # tansu's answer, or the one line saying there is none
    page.click("#broker-partitions thead th:nth-child(2)")  # sortable
    assert page.locator("#broker-partitions th[data-sorted=asc]").count() == 1
    screenshot(page, tmp_path, "broker")
    page.goto(f"{ui}/brokers/{int(broker) + 1000}")
    assert "no broker" in page.inner_text("#live p.error")


def test_kraft_console_pages_work_without_zookeeper(tansu_broker: Any, page: Any, tmp_path: Path) -> None:
    from clusterctl.console.app import Console
    from clusterctl.console.data import ConsoleTarget
    from clusterctl.kafka.kraft.describe_quorum import QuorumInfo, ReplicaState
    from clusterctl.kafka.kraft.quorum import view_of

    silent = f"127.0.0.1:{free_port()}"
    with console("--bootstrap-server", tansu_broker.bootstrap, "--kraft-quorum", silent) as url:
        for path in ("/cluster", "/brokers", "/topics", "/groups", "/drills", "/quorum", "/zk"):
            reply = page.goto(f"{url}{path}")
            assert reply.status == 200, path
        assert page.inner_text("#mode-note").startswith("this cluster runs in KRaft mode")
        nav = [a.strip() for a in page.locator("header nav a").all_inner_texts()]
        assert "Quorum" in nav and "ZooKeeper" not in nav
        page.goto(f"{url}/quorum")
        assert page.inner_text("#quorum-note").startswith("error: no controller quorum answer")
        # the quorum table from a constructed view (what DescribeQuorum decodes into), for the screenshot
        now = 1_700_000_000_000
        voters = [ReplicaState(1, 4212), ReplicaState(2, 4210, now), ReplicaState(3, 4100, now - 10_000)]
        info = QuorumInfo(1, 7, 4212, voters, [ReplicaState(4, 4212, now)])
        q = view_of("lab", info, lambda n: f"controller{n}" if n < 4 else f"kafka{n}", [1, 2, 3], now + 500)
        body = Console(ConsoleTarget("x:1", quorum=(silent,))).env.get_template("_quorum.html").render(q=q, note=None)
        # a new #live in place of the streamed one: the page's open stream keeps writing into the old, detached one
        page.evaluate("html => { const live = document.createElement('div'); live.id = 'live'; live.innerHTML = html;"
                      " document.getElementById('live').replaceWith(live); }", body)  # fmt: skip
        assert cells(page, "#quorum-members td.role") == ["leader", "follower", "follower", "observer"]
        assert cells(page, "#quorum-members td.lag") == ["0", "2", "112", "0"]
        screenshot(page, tmp_path, "quorum")


def _feed(reports: Path, run_name: str) -> Recorder:
    rec = Recorder(None, None, live_path=reports / run_name / "events.jsonl")
    (reports / run_name).mkdir()
    for p in range(2):
        state = {"leader": 1 + p, "replicas": [1, 2, 3], "isr": [1, 2, 3]}
        rec.event("metadata", "partition", f"drill-{p}", f"leader {1 + p}", state)
    rec.event("metadata", "controller", "cluster", "controller 1", 1)
    rec.event("step", "step", "step 1", "start_load rate=200")
    t = time.time()
    for i in range(6):
        rec.live("load", "interval", "drill", "acked", {"t": t + 0.5 * i, "acked": 0 if i in (3, 4) else 100,
                                                        "errors": 0})  # fmt: skip
    rec.event("step", "step", "step 2", f"kill-leader {HOSTILE}")
    rec.mark("kill", "broker 1")
    return rec


def test_live_drill_dashboard_follows_the_events(ui: str, page: Any, reports: Path, tmp_path: Path) -> None:
    rec = _feed(reports, "kill-leader-live")
    page.goto(f"{ui}/drills/kill-leader-live")
    page.wait_for_selector("#drill-charts svg#panel-load")
    assert page.locator("#panel-leader path.series").count() == 2
    assert page.locator("#panel-isr path.series").count() == 2
    assert page.locator("#panel-load rect.bar").count() == 6
    assert page.locator("#panel-load rect.gap").count() == 1  # the two intervals with nothing acked
    assert page.locator("#panel-leader line.fault").count() == 1
    assert page.locator("#steps li.current").count() == 1 and page.locator("#steps li").count() == 2
    assert page.inner_text("#steps li.current").endswith(f"kill-leader {HOSTILE}")  # text, not markup
    assert page.locator("#steps script").count() == 0
    assert page.inner_text("#drill-state") == "running"
    assert page.locator("#timeline tbody tr").count() >= 5  # the event table stays below
    legend = "[...document.querySelectorAll('#panel-leader text.legend')].map(e => e.textContent).join()"
    assert page.evaluate(legend) == "drill-0: 1,drill-1: 2"
    sent = time.time()
    rec.event("metadata", "leader", "drill-0", "leader 1 -> 2", 2)
    page.wait_for_function(f"{legend} === 'drill-0: 2,drill-1: 2'", timeout=10_000)
    delay_ms = (time.time() - sent) * 1000
    print(f"dashboard: the leader panel showed the new leader {delay_ms:.0f} ms after the event was written")
    assert delay_ms <= LEADER_BUDGET_MS
    screenshot(page, tmp_path, "drill-live")


def test_the_ninth_live_tail_is_refused_with_a_clear_line(ui: str, browser: Any, bootstrap: str,
                                                          unique_name: str) -> None:  # fmt: skip
    from clusterctl.console.bounds import MAX_TAILS

    assert run("topic", "create", unique_name, "-p", "1", "-r", "1", "-b", bootstrap).returncode == 0
    # a context each: Chromium opens at most 6 connections per host within one (each tail holds one)
    contexts = [browser.new_context() for _ in range(MAX_TAILS + 1)]
    try:
        pages = [c.new_page() for c in contexts]
        for p in pages[:MAX_TAILS]:
            p.goto(f"{ui}/topics/{unique_name}/messages")
            p.click("#tail-toggle")
            p.wait_for_function("document.getElementById('tail-state').innerText === 'on'")
        ninth = pages[MAX_TAILS]
        ninth.goto(f"{ui}/topics/{unique_name}/messages")
        ninth.click("#tail-toggle")
        ninth.wait_for_function("document.getElementById('tail-state').innerText.startsWith('error')")
        assert ninth.inner_text("#tail-state") == (f"error: {MAX_TAILS} live tails are open already (the most this "
                                                   "console serves at once): close one and try again")  # fmt: skip
        assert ninth.inner_text("#tail-toggle") == "Live tail"
        pages[0].click("#tail-toggle")  # one closes: the ninth page gets its tail
        ninth.click("#tail-toggle")
        ninth.wait_for_function("document.getElementById('tail-state').innerText === 'on'")
    finally:
        for c in contexts:
            c.close()
