"""The web console (`clusterctl ui`) in a real headless Chromium against tansu, checked against the real CLI."""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _console import cells, console, screenshot
from _dataplane import CLUSTERCTL, run

from clusterctl.console.server import TOKEN_ENV

pytestmark = [pytest.mark.tansu, pytest.mark.browser]


@pytest.fixture(scope="module")
def ui(tansu_broker: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    reports = tmp_path_factory.mktemp("reports")
    with console("--bootstrap-server", tansu_broker.bootstrap, "--reports-dir", str(reports)) as url:
        yield url


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str]:
    req = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(req, timeout=15) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_topic_list_shows_cli_topics_live(ui: str, page: Any, bootstrap: str, unique_name: str, tmp_path: Path) -> None:
    first, second = f"{unique_name}-a", f"{unique_name}-b"
    assert run("topic", "create", first, "-p", "3", "-r", "1", "-b", bootstrap).returncode == 0
    page.goto(f"{ui}/topics")
    row = page.locator(f'#topics tr[data-topic="{first}"]')
    assert cells(page, f'#topics tr[data-topic="{first}"] td')[:5] == [first, "3", "1", "0", "0"]
    assert row.locator("a").get_attribute("href") == f"/topics/{first}"
    page.evaluate("window.__notReloaded = true")
    # created while the page is open: it appears without a reload (server-sent events)
    assert run("topic", "create", second, "-p", "1", "-r", "1", "-b", bootstrap).returncode == 0
    page.locator(f'#topics tr[data-topic="{second}"]').wait_for(timeout=5_000)
    assert page.evaluate("window.__notReloaded") is True
    screenshot(page, tmp_path, "topics")


def test_create_topic_in_the_ui_is_what_the_cli_describes(
    ui: str, page: Any, bootstrap: str, unique_name: str, tmp_path: Path
) -> None:
    page.goto(f"{ui}/topics")
    page.click("#create-topic summary")
    page.fill("#create-topic input[name=topic]", unique_name)
    page.fill("#create-topic input[name=partitions]", "2")
    page.fill("#create-topic input[name=configs]", "retention.ms=3600000")
    page.click("#create-topic button[type=submit]")
    # the confirmation step: nothing exists yet
    assert "Create topic" in page.inner_text("#confirm-question")
    assert run("topic", "describe", unique_name, "-b", bootstrap).returncode == 3  # not found
    page.click("#confirm")
    page.wait_for_url(f"{ui}/topics/{unique_name}?done=*")
    assert page.inner_text("p.done") == f"created topic {unique_name}"

    res = run("topic", "describe", unique_name, "-b", bootstrap, "--json")
    assert res.returncode == 0, res.stderr
    (desc,) = json.loads(res.stdout)
    assert (desc["name"], desc["partition_count"], desc["replication_factor"]) == (unique_name, 2, 1)
    assert cells(page, "#partitions tr[data-partition] td.num:first-child") == ["0", "1"]
    screenshot(page, tmp_path, "topic")

    # the same error line the CLI prints for the same request
    cli = run("topic", "create", unique_name, "-p", "2", "-r", "1", "-b", bootstrap)
    assert cli.returncode == 1, cli.stderr  # the broker refused: the topic exists
    page.goto(f"{ui}/topics")
    page.click("#create-topic summary")
    page.fill("#create-topic input[name=topic]", unique_name)
    page.fill("#create-topic input[name=partitions]", "2")
    page.click("#create-topic button[type=submit]")
    page.click("#confirm")
    assert page.inner_text("#action-error") == cli.stderr.strip()

    # delete, confirmed in the page; the CLI no longer finds it
    page.goto(f"{ui}/topics/{unique_name}")
    page.click("button.danger")
    assert "Delete topic" in page.inner_text("#confirm-question")
    page.click("#confirm")
    page.wait_for_url(f"{ui}/topics?done=*")
    assert run("topic", "describe", unique_name, "-b", bootstrap).returncode == 3


def test_group_lag_matches_cli_and_updates_live(
    ui: str, page: Any, bootstrap: str, unique_name: str, tmp_path: Path
) -> None:
    topic, group = unique_name, f"{unique_name}-g"
    assert run("topic", "create", topic, "-p", "3", "-r", "1", "-b", bootstrap).returncode == 0
    lines = "".join(f"k{i}:v{i}\n" for i in range(90))
    assert run("produce", topic, "-k", ":", "-b", bootstrap, stdin=lines).returncode == 0
    assert run("consume", topic, "--group", group, "--from-beginning", "-n", "40", "-b", bootstrap).returncode == 0

    def cli_lag() -> dict[str, Any]:
        res = run("group", "describe", group, "-b", bootstrap, "--json")
        assert res.returncode == 0, res.stderr
        d = json.loads(res.stdout)
        return {f"{o['topic']}-{o['partition']}": o["lag"] for o in d["offsets"]} | {"total": d["total_lag"]}

    def page_lag() -> dict[str, Any]:
        rows = page.locator("#offsets tr[data-tp]")
        out: dict[str, Any] = {}
        for i in range(rows.count()):
            lag = rows.nth(i).locator("td.lag").inner_text().strip()
            out[str(rows.nth(i).get_attribute("data-tp"))] = None if lag == "-" else int(lag)
        return out | {"total": int(page.inner_text("#total-lag"))}

    expected = cli_lag()
    assert 0 < expected["total"] < 90
    page.goto(f"{ui}/groups")
    assert cells(page, f'#groups tr[data-group="{group}"] td.lag') == [str(expected["total"])]
    page.goto(f"{ui}/groups/{group}")
    assert page_lag() == expected
    screenshot(page, tmp_path, "group")

    # more messages: the lag on the open page follows without a reload, and still matches the CLI
    page.evaluate("window.__notReloaded = true")
    # to a partition the group has committed on: a partition without a committed offset has no lag (None) to grow,
    # and unkeyed records may all land on one partition
    committed = next(k for k, v in expected.items() if k != "total" and v is not None).rpartition("-")[2]
    assert run("produce", topic, "-p", committed, "-b", bootstrap, stdin="x\n" * 30).returncode == 0
    # tansu may answer ListOffsets with an old end for a moment after the produce is acknowledged, partition by
    # partition: the CLI's answer and the page's (it polls on its own) are compared until they agree on a grown lag
    last: dict[str, Any] = {}

    def agreed() -> bool:
        last.update(cli=cli_lag(), page=page_lag())
        return bool(last["cli"]["total"] > expected["total"] and last["page"] == last["cli"])

    deadline = time.monotonic() + 30
    while not agreed():
        assert time.monotonic() < deadline, f"the open page never showed the CLI's grown lag: {last}"
        time.sleep(0.5)
    assert page.evaluate("window.__notReloaded") is True


def test_pages_render_and_unknown_topic_is_the_cli_error(ui: str, page: Any, bootstrap: str, tmp_path: Path) -> None:
    page.goto(f"{ui}/cluster")
    assert page.inner_text("#brokers-live") != "-"
    screenshot(page, tmp_path, "cluster")
    page.goto(f"{ui}/brokers")
    assert page.locator("#brokers tr[data-broker]").count() == 1
    page.goto(f"{ui}/drills")
    assert "no drill reports yet" in page.inner_text("#drills")
    # nothing is fetched from anywhere but the console itself
    foreign: list[str] = []
    page.on("request", lambda r: foreign.append(r.url) if not r.url.startswith(ui) else None)
    page.goto(f"{ui}/topics/no-such-topic-here")
    cli = run("topic", "describe", "no-such-topic-here", "-b", bootstrap)
    assert page.inner_text("#live p.error") == cli.stderr.strip()
    assert foreign == []


def test_token_required_off_loopback_and_csrf_on_actions(tansu_broker: Any, browser: Any, bootstrap: str) -> None:
    token = secrets.token_hex(32)
    args = ("--bootstrap-server", bootstrap, "--host", "0.0.0.0")
    # no token anywhere: refused with one line before anything listens
    res = run("ui", *args, "--port", "1")
    assert res.returncode == 2 and res.stderr.count("\n") == 1 and "needs a token" in res.stderr
    with console(*args, env={"CLUSTERCTL_CONSOLE_TOKEN": token}) as url:
        assert _get(f"{url}/topics")[0] == 401
        assert _get(f"{url}/live/topics")[0] == 401
        assert _get(f"{url}/topics?token=wrong")[0] == 401
        assert _get(f"{url}/healthz") == (200, "ok")
        assert _get(f"{url}/topics", {"Authorization": f"Bearer {token}"})[0] == 200
        ctx = browser.new_context()
        try:
            page = ctx.new_page()
            page.goto(f"{url}/topics?token={token}")  # the --print-url address: the token moves into a cookie
            assert page.url == f"{url}/topics"
            page.goto(f"{url}/brokers")
            assert page.locator("#brokers tr[data-broker]").count() == 1
            # a POST carrying the token cookie but no CSRF token is refused
            resp = page.request.post(f"{url}/actions/create-topic", form={"topic": "csrf-x", "partitions": "1"})
            assert resp.status == 403
        finally:
            ctx.close()
    assert run("topic", "describe", "csrf-x", "-b", bootstrap).returncode == 3


def test_print_url_and_read_only(browser: Any, bootstrap: str) -> None:
    args = ("ui", "--bootstrap-server", bootstrap, "--host", "10.1.2.3", "--port", "9123", "--print-url")
    res = run(*args)
    assert res.returncode == 2 and "needs a token" in res.stderr
    token = secrets.token_hex(32)
    env = {k: v for k, v in os.environ.items() if k != "CLUSTERCTL_BOOTSTRAP_SERVER"} | {TOKEN_ENV: token}
    res = subprocess.run([str(CLUSTERCTL), *args], capture_output=True, text=True, env=env, timeout=60)
    assert res.returncode == 0 and res.stdout == f"http://10.1.2.3:9123/?token={token}\n"
    assert run("ui", "--bootstrap-server", bootstrap, "--print-url").stdout == "http://127.0.0.1:9000/\n"
    with console("--bootstrap-server", bootstrap, "--read-only") as url:
        ctx = browser.new_context()
        try:
            page = ctx.new_page()
            page.goto(f"{url}/topics")
            assert page.locator("form[action^='/actions/']").count() == 0
            assert page.inner_text("header .badge") == "read-only"
            csrf = next(c["value"] for c in ctx.cookies() if c["name"] == "csrftoken")
            resp = page.request.post(f"{url}/actions/create-topic", form={"csrftoken": csrf, "topic": "ro-x"})
            assert resp.status == 403 and "read-only" in resp.text()
        finally:
            ctx.close()


def test_token_rules_and_zk_nodes() -> None:
    from clusterctl.console.data import ConsoleTarget
    from clusterctl.console.server import Listen, check_token, is_loopback
    from clusterctl.errors import UsageError

    assert is_loopback("127.0.0.1") and is_loopback("127.8.0.1") and is_loopback("::1") and is_loopback("localhost")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.5")
    assert check_token("127.0.0.1", None) is None and check_token("127.0.0.1", "x" * 64) is None
    with pytest.raises(UsageError, match="needs a token"):
        check_token("0.0.0.0", None)
    with pytest.raises(UsageError, match="too short"):
        check_token("0.0.0.0", "short")
    assert Listen("0.0.0.0", 9000, "t" * 32).url == f"http://127.0.0.1:9000/?token={'t' * 32}"
    target = ConsoleTarget("b:9092", "zk1:2181,zk2:2182,127.0.0.1/chroot")
    assert target.zk_nodes == [(1, "zk1", 2181), (2, "zk2", 2182), (3, "127.0.0.1", 2181)]
