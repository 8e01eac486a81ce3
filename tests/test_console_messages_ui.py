"""The message browser and config pages in a real headless Chromium against tansu, checked against the real CLI.

Browse and search a topic; a record produced by `clusterctl produce` reaches the open live tail within 2 s
(the delay is printed); a record produced from the page is what `clusterctl consume` reads; a config set from
the page is what `clusterctl topic configs` shows (on real Kafka: tests/test_console_kafka.py; tansu describes no
configs); a group's offsets reset from the page are what `clusterctl group describe` shows.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _console import cells, console, screenshot
from _dataplane import run
from confluent_kafka import Consumer

pytestmark = [pytest.mark.tansu, pytest.mark.browser]

TAIL_BUDGET_MS = 2000


@pytest.fixture(scope="module")
def ui(tansu_broker: Any) -> Iterator[str]:
    with console("--bootstrap-server", tansu_broker.bootstrap) as url:
        yield url


def _produce(bootstrap: str, topic: str, lines: str) -> None:
    res = run("produce", topic, "-k", ":", "-b", bootstrap, stdin=lines)
    assert res.returncode == 0, res.stderr


def _log_ends(bootstrap: str, group: str) -> list[int]:
    res = run("group", "describe", group, "-b", bootstrap, "--json")
    assert res.returncode == 0, res.stderr
    return [o["log_end"] for o in json.loads(res.stdout)["offsets"]]


def _ask_reset(page: Any, topic: str, to: str, at: str) -> None:
    """Fill in and submit the group page's reset form: its dry run."""
    page.click("#reset-offsets summary")
    page.fill("#reset-offsets input[name=topic]", topic)
    page.select_option("#reset-offsets select[name=to]", to)
    page.fill("#reset-offsets input[name=at]", at)
    page.click("#reset-offsets button[type=submit]")


def test_browse_search_and_tail(ui: str, page: Any, bootstrap: str, unique_name: str, tmp_path: Path) -> None:
    topic = unique_name
    assert run("topic", "create", topic, "-p", "2", "-r", "1", "-b", bootstrap).returncode == 0
    lines = "".join(f"order-{i}:" + json.dumps({"id": i, "item": f"w{i}"}) + "\n" for i in range(40))
    _produce(bootstrap, topic, lines)
    page.goto(f"{ui}/cluster")  # nothing raw: the metadata time is ISO 8601 with its age
    assert re.fullmatch(r"metadata at 20\d\d-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z \(\d+ s ago\)",
                        page.inner_text("#metadata-at"))  # fmt: skip
    page.goto(f"{ui}/topics/{topic}")
    page.click("#messages-link")
    page.wait_for_url(f"{ui}/topics/{topic}/messages")
    keys = cells(page, "#records tr.record td.key")
    assert len(keys) == 40 and set(keys) == {f"order-{i}" for i in range(40)}
    assert page.locator("#records tr.record td.value .kind-json").count() == 40  # pretty JSON
    page.fill("#filters input[name=q]", "W17")
    page.fill("#filters input[name=limit]", "10")
    page.click("#filters button[type=submit]")
    assert cells(page, "#records tr.record td.key") == ["order-17"]
    page.goto(f"{ui}/topics/{topic}/messages?limit=8")
    assert len(cells(page, "#records tr.record td.key")) == 8
    # newest first; a click on Offset sorts the table by it
    page.click("#records thead th:nth-child(2)")
    offsets = [int(o) for o in cells(page, "#records tr.record td:nth-child(2)")]
    assert offsets == sorted(offsets)
    assert page.locator("#records time.when + .age").count() == 8  # "(12 s ago)" beside each ISO time

    page.click("#tail-toggle")
    page.wait_for_function("document.getElementById('tail-state').innerText === 'on'")
    page.evaluate("""() => {
      window.__tailAt = null;
      new MutationObserver(() => { if (window.__tailAt === null) window.__tailAt = Date.now(); })
        .observe(document.getElementById('tail-rows'), {childList: true});
    }""")
    started_at = page.evaluate("Date.now()")
    _produce(bootstrap, topic, "tailed:<i>live</i> record\n")
    produced_at = page.evaluate("Date.now()")  # the CLI has exited: the record is acknowledged
    page.wait_for_function("window.__tailAt !== null", timeout=10_000)
    delay = page.evaluate("window.__tailAt") - produced_at
    print(f"tail: the CLI's record was on the page {delay} ms after `clusterctl produce` returned "
          f"({page.evaluate('window.__tailAt') - started_at} ms after it was started)")  # fmt: skip
    assert delay <= TAIL_BUDGET_MS
    assert cells(page, "#tail-rows tr.record td.key") == ["tailed"]
    assert cells(page, "#tail-rows tr.record td.value") == ["<i>live</i> record"]  # text, not markup
    assert page.locator("#tail-rows i").count() == 0
    screenshot(page, tmp_path, "messages")


def test_produce_in_the_ui_is_what_consume_reads(ui: str, page: Any, bootstrap: str, unique_name: str) -> None:
    topic = unique_name
    assert run("topic", "create", topic, "-p", "1", "-r", "1", "-b", bootstrap).returncode == 0
    page.goto(f"{ui}/topics/{topic}/messages")
    page.click("#produce summary")
    page.fill("#produce input[name=key]", "ui-key")
    page.fill("#produce textarea[name=value]", '{"from": "the console"}')
    page.fill("#produce textarea[name=headers]", "origin=ui")
    page.click("#produce button[type=submit]")
    page.wait_for_url(f"{ui}/topics/{topic}/messages?done=*")
    assert page.inner_text("p.done") == f"produced 1 record to {topic}: partition 0, offset 0"
    res = run("consume", topic, "--from-beginning", "-n", "1", "--timeout", "10", "-b", bootstrap, "--json")
    assert res.returncode == 0, res.stderr
    rec = json.loads(res.stdout.splitlines()[0])
    assert (rec["partition"], rec["offset"], rec["key"], rec["value"]) == (0, 0, "ui-key", '{"from": "the console"}')
    assert cells(page, "#records tr.record td.headers .hname") == ["origin"]


def test_group_reset_in_the_ui_matches_group_describe(
    ui: str, page: Any, bootstrap: str, unique_name: str, tmp_path: Path
) -> None:
    topic, group = unique_name, f"{unique_name}-g"
    assert run("topic", "create", topic, "-p", "2", "-r", "1", "-b", bootstrap).returncode == 0
    _produce(bootstrap, topic, "".join(f"k{i}:v{i}\n" for i in range(40)))
    assert run("consume", topic, "--group", group, "--from-beginning", "-n", "30", "-b", bootstrap).returncode == 0

    def committed() -> dict[int, int | None]:
        res = run("group", "describe", group, "-b", bootstrap, "--json")
        assert res.returncode == 0, res.stderr
        return {o["partition"]: o["committed"] for o in json.loads(res.stdout)["offsets"]}

    # tansu may answer ListOffsets with an old log end for a moment after a produce is acknowledged, and the plan
    # clamps offset 3 into [earliest, log end]: the plan is asked once every partition's end counts all 40 records
    deadline = time.monotonic() + 30
    while sum(ends := _log_ends(bootstrap, group)) != 40:
        assert time.monotonic() < deadline, f"the log ends never added up to the 40 records produced: {ends}"
        time.sleep(0.2)
    before = committed()
    page.goto(f"{ui}/groups/{group}")
    _ask_reset(page, topic, "offset", "3")
    # the dry run: the plan is shown, nothing is committed yet
    assert cells(page, "#reset-plan td.new") == ["3", "3"]
    # 30 of 40 records read: a partition may have given none of them, and has no committed offset ("-")
    assert cells(page, "#reset-plan td.current") == ["-" if before.get(p) is None else str(before[p]) for p in (0, 1)]
    assert committed() == before
    screenshot(page, tmp_path, "group-reset")
    page.click("#confirm")
    page.wait_for_url(f"{ui}/groups/{group}?done=*")
    assert page.inner_text("p.done") == f"group {group}: offsets of {topic} reset to offset 3 (2 partition(s))"
    assert committed() == {0: 3, 1: 3}
    page.wait_for_function("[...document.querySelectorAll('#offsets td.committed')].map(e => e.innerText).join() "
                           "=== '3,3'")  # fmt: skip

    # to the earliest timestamp: every partition back to 0
    _ask_reset(page, topic, "timestamp", "2000-01-01T00:00:00Z")
    assert cells(page, "#reset-plan td.new") == ["0", "0"]
    page.click("#confirm")
    page.wait_for_url(f"{ui}/groups/{group}?done=*")
    assert committed() == {0: 0, 1: 0}

    # refused while the group has a member: the dry run already says so, in the CLI's words
    member = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "session.timeout.ms": 6000,
                       "enable.auto.commit": False})  # fmt: skip
    try:
        member.subscribe([topic])
        deadline = time.monotonic() + 30
        while not member.assignment() and time.monotonic() < deadline:
            member.poll(0.2)
        cli = run("group", "reset", group, "--topic", topic, "--to-latest", "-b", bootstrap)
        assert cli.returncode == 1
        page.goto(f"{ui}/groups/{group}")
        page.click("#reset-offsets summary")
        page.fill("#reset-offsets input[name=topic]", topic)
        page.click("#reset-offsets button[type=submit]")
        assert page.inner_text("#action-error") == cli.stderr.strip().splitlines()[0]
    finally:
        member.close()
    assert committed() == {0: 0, 1: 0}

    # an empty group is deleted from the page
    page.goto(f"{ui}/groups/{group}")
    page.click("#delete-group button")
    assert page.inner_text("#confirm-question") == f"Delete consumer group '{group}' and its committed offsets?"
    page.click("#confirm")
    page.wait_for_url(f"{ui}/groups?done=*")
    assert run("group", "describe", group, "-b", bootstrap).returncode == 3
