"""The message browser and config pages in-process against tansu: bounded reads, escaping, CSRF, a 10 MB record.

Reads are checked against what was produced; every page that shows user data (keys, values, headers, group ids)
is fetched with hostile HTML in that data and must carry it only escaped (group ids: tests/test_console_present.py,
as tansu stores a group id URL-encoded and cut); every POST route refuses a request
without its CSRF token, and produce is refused by a read-only console even with one.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
from _asgi import Reply, call
from confluent_kafka import Producer

from clusterctl.console import actions, bounds
from clusterctl.console.app import build_app
from clusterctl.console.data import ConsoleTarget
from clusterctl.console.guard import served
from clusterctl.kafka import admin, browse

pytestmark = pytest.mark.tansu

HOST = [("host", "127.0.0.1:9000")]
HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'
BIG = 10 * 1024 * 1024


def _producer(bootstrap: str) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, "message.max.bytes": BIG + 1_000_000, "linger.ms": 5})


@pytest.fixture(scope="module")
def topic(tansu_broker: Any) -> Iterator[str]:
    """3 partitions: 60 JSON records each (offsets 0..59), one hostile record and one binary one on partition 0."""
    name = "console-messages"
    bs = tansu_broker.bootstrap
    admin.create_topic(bs, name, 3, 1, {})
    p = _producer(bs)
    for i in range(180):
        p.produce(name, key=f"k{i}".encode(), value=json.dumps({"n": i}).encode(), partition=i % 3,
                  headers=[("seq", str(i).encode())], timestamp=1_700_000_000_000 + i * 1000)  # fmt: skip
    p.flush(30)
    p.produce(name, key=HOSTILE.encode(), value=HOSTILE.encode(), partition=0, headers=[(HOSTILE, HOSTILE.encode())])
    p.produce(name, key=b"\x00\xffbin", value=bytes(range(256)), partition=0)
    p.flush(30)
    yield name
    admin.delete_topic(bs, name)


def _app(bootstrap: str, read_only: bool = False) -> Any:
    return build_app(ConsoleTarget(bootstrap, read_only=read_only), served("127.0.0.1", 9000))


def _get(app: Any, target: str) -> Reply:
    return call(app, "GET", target, HOST)


def test_window_is_bounded_newest_first_and_filtered(bootstrap: str, topic: str) -> None:
    w = browse.read_window(bootstrap, topic, limit=10)
    assert len(w.records) == 10 and w.older
    stamps = [r.timestamp_ms or 0 for r in w.records]
    assert stamps == sorted(stamps, reverse=True)  # newest first across partitions
    assert w.scanned <= 3 * 10 and set(w.spans) == {0, 1, 2}
    # offsets of one partition, inclusive
    w = browse.read_window(bootstrap, topic, partition=1, offset_from=5, offset_to=9, limit=50)
    assert [(r.partition, r.offset) for r in w.records] == [(1, o) for o in (9, 8, 7, 6, 5)]
    assert [r.key for r in w.records] == [f"k{3 * o + 1}".encode() for o in (9, 8, 7, 6, 5)]
    # a timestamp range: records 10..14 (one second apart)
    w = browse.read_window(bootstrap, topic, ts_from=1_700_000_010_000, ts_to=1_700_000_014_000)
    assert sorted(r.key or b"" for r in w.records) == sorted(f"k{i}".encode() for i in range(10, 15))
    # a search over keys, values and headers, case-insensitive; only `limit` kept however many match
    w = browse.read_window(bootstrap, topic, search='"N": 17}', limit=50)
    assert [r.key for r in w.records] == [b"k17"]
    w = browse.read_window(bootstrap, topic, search="SCRIPT", limit=50)
    assert [r.offset for r in w.records] == [60] and w.records[0].headers == [(HOSTILE, HOSTILE.encode())]
    w = browse.read_window(bootstrap, topic, search="k1", limit=4)
    assert len(w.records) == 4 and w.scanned > 4


def test_messages_page_escapes_keys_values_and_headers(bootstrap: str, topic: str) -> None:
    app = _app(bootstrap)
    page = _get(app, f"/topics/{topic}/messages?partition=0&limit=5")
    assert page.status == 200, page.text[:500]
    assert "<script>" not in page.text and "<img src=x" not in page.text
    assert page.text.count("&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;") == 4  # key, value, header name and value
    assert "00000000  00 01 02 03" in page.text and 'class="tag">hex' in page.text  # the binary value
    assert 'data-offset="61"' in page.text and 'data-offset="56"' not in page.text  # 5 newest of partition 0
    assert 'id="older" href="?partition=0&amp;to_offset=56&amp;limit=5"' in page.text  # the next 5 back
    bad = _get(app, f"/topics/{topic}/messages?limit=100000")
    assert bad.status == 400 and "limit" in bad.text


def test_ten_megabyte_record_is_cut_for_display(bootstrap: str, unique_name: str) -> None:
    admin.create_topic(bootstrap, unique_name, 1, 1, {"max.message.bytes": str(BIG + 1_000_000)})
    p = _producer(bootstrap)
    p.produce(unique_name, key=b"big", value=b"{" + b"x" * (BIG - 1))
    p.produce(unique_name, key=b"small", value=b"after")
    assert p.flush(60) == 0
    app = _app(bootstrap)
    started = time.monotonic()
    page = _get(app, f"/topics/{unique_name}/messages")
    took = time.monotonic() - started
    assert page.status == 200, page.text[:500]
    assert len(page.body) < 4 * bounds.MAX_RECORD_CHARS, len(page.body)  # 64 KiB shown, not 10 MiB
    assert "9.9 MiB more of 10.0 MiB not shown" in page.text and "after" in page.text
    print(f"10 MiB record: page of {len(page.body)} bytes in {took:.2f}s")
    w = browse.read_window(bootstrap, unique_name)
    assert [(r.key, r.value_size, len(r.value or b"")) for r in w.records] == [
        (b"small", 5, 5), (b"big", BIG, browse.KEEP_BYTES)]  # fmt: skip


def _csrf(app: Any, page: str) -> tuple[str, str]:
    """(cookie header, form token) as `page` hands them to a browser."""
    reply = _get(app, page)
    cookie = reply.header("set-cookie")[0].split(";", 1)[0]
    found = re.search(r'name="csrftoken" value="([^"]+)"', reply.text)
    return cookie, found.group(1) if found else cookie.split("=", 1)[1]


def _post(app: Any, action: str, form: dict[str, str], cookie: str | None = None) -> Reply:
    headers = [*HOST, ("content-type", "application/x-www-form-urlencoded"), ("origin", "http://127.0.0.1:9000")]
    body = urlencode(form).encode()
    headers += [("content-length", str(len(body)))] + ([("cookie", cookie)] if cookie else [])
    return call(app, "POST", f"/actions/{action}", headers, body)


def test_every_post_needs_csrf_and_read_only_refuses_produce(bootstrap: str, unique_name: str) -> None:
    admin.create_topic(bootstrap, unique_name, 1, 1, {})
    app = _app(bootstrap)
    cookie, token = _csrf(app, f"/topics/{unique_name}/messages")
    form = {"topic": unique_name, "value": "v", "name": "retention.ms", "partitions": "2",
            "replication_factor": "1", "confirmed": "yes"}  # fmt: skip
    for action in actions.ACTIONS:
        assert _post(app, action, form).status == 403, action  # no cookie, no token
        assert _post(app, action, form, cookie).status == 403, action  # the cookie alone
        assert _post(app, action, form | {"csrftoken": "forged"}, cookie).status == 403, action
    assert browse.read_window(bootstrap, unique_name).records == []
    done = _post(app, "produce", {"csrftoken": token, "topic": unique_name, "key": "k", "value": " v\n",
                                  "headers": "h=1"}, cookie)  # fmt: skip
    assert done.status == 303, done.text[:300]
    assert done.header("location")[0].startswith(f"/topics/{unique_name}/messages?done=produced")
    (rec,) = browse.read_window(bootstrap, unique_name).records
    assert (rec.key, rec.value, rec.headers) == (b"k", b" v\n", [("h", b"1")])  # the value as typed
    ro = _app(bootstrap, read_only=True)
    cookie, token = _csrf(ro, "/topics")
    refused = _post(ro, "produce", {"csrftoken": token, "topic": unique_name, "value": "ro"}, cookie)
    assert refused.status == 403 and "read-only" in refused.text
    assert len(browse.read_window(bootstrap, unique_name).records) == 1
    page = _get(ro, f"/topics/{unique_name}/messages")
    assert page.status == 200 and 'action="/actions/produce"' not in page.text
