"""The console's front door (issue 32): Host/Origin, Authorization, the token in logs, bounded pages.

The attacks run against the real `clusterctl ui` process on loopback (raw HTTP, so Host and the other headers
are exactly what a hostile page's browser would send); the bounds are checked in-process where no cluster is needed.
"""

from __future__ import annotations

import asyncio
import http.client
import re
import secrets
import threading
import time
from pathlib import Path
from urllib.parse import urlencode, urlsplit

import pytest
from _console import console
from _dataplane import run

from clusterctl.console import bounds
from clusterctl.console.app import Console, _pretty
from clusterctl.console.data import ConsoleTarget
from clusterctl.console.guard import served
from clusterctl.console.server import TOKEN_ENV, Listen
from clusterctl.errors import TimeoutError_
from clusterctl.zookeeper.client import Znode

REBIND = "rebind.attacker.test"


def _http(url: str, method: str, target: str, headers: dict[str, str], body: str = "") -> tuple[int, dict, str]:
    """One raw request to the console at `url`, with exactly these headers (Host included)."""
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=20)
    try:
        conn.putrequest(method, target, skip_host=True, skip_accept_encoding=True)
        for k, v in headers.items():
            conn.putheader(k, v)
        data = body.encode()
        if method == "POST":
            conn.putheader("Content-Type", "application/x-www-form-urlencoded")
            conn.putheader("Content-Length", str(len(data)))
        conn.endheaders(data if method == "POST" else None)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read().decode("utf-8", "replace")
    finally:
        conn.close()


def _csrf(url: str, host: str, topic: str) -> tuple[str, str]:
    """(cookie header, form token) as the topic page hands them to a browser that names `host`."""
    status, headers, body = _http(url, "GET", f"/topics/{topic}", {"Host": host})
    assert status == 200, body[:300]
    cookie = headers["set-cookie"].split(";", 1)[0]
    form = re.search(r'name="csrftoken" value="([^"]+)"', body)
    assert form is not None
    return cookie, form.group(1)


def _topic_exists(topic: str, bootstrap: str) -> bool:
    res = run("topic", "describe", topic, "-b", bootstrap)
    assert res.returncode in (0, 3), res.stderr
    return res.returncode == 0


@pytest.mark.tansu
def test_dns_rebinding_page_gets_no_csrf_token_and_deletes_nothing(bootstrap: str, unique_name: str) -> None:
    assert run("topic", "create", unique_name, "-p", "1", "-r", "1", "-b", bootstrap).returncode == 0
    with console("--bootstrap-server", bootstrap) as url:
        port = urlsplit(url).port
        # the hostile page, re-pointed at 127.0.0.1, reads a page: the browser names the attacker's host
        status, headers, body = _http(url, "GET", f"/topics/{unique_name}", {"Host": f"{REBIND}:{port}"})
        assert status == 421 and "set-cookie" not in headers and "csrftoken" not in body
        # even holding a valid CSRF pair (here: taken legitimately), a post naming that host does nothing
        cookie, token = _csrf(url, f"127.0.0.1:{port}", unique_name)
        form = urlencode({"csrftoken": token, "topic": unique_name, "confirmed": "yes"})
        headers = {"Host": f"{REBIND}:{port}", "Cookie": cookie, "Origin": f"http://{REBIND}:{port}"}
        assert _http(url, "POST", "/actions/delete-topic", headers, form)[0] == 421
        # the right Host but a foreign Origin or Referer: refused as cross-site
        for foreign in ({"Origin": f"http://{REBIND}:{port}"}, {"Referer": f"http://{REBIND}:{port}/x"}):
            status, _, body = _http(url, "POST", "/actions/delete-topic",
                                    {"Host": f"127.0.0.1:{port}", "Cookie": cookie, **foreign}, form)  # fmt: skip
            assert status == 403 and "cross-site" in body
        assert _topic_exists(unique_name, bootstrap)
        # the console's own pages still work, by either loopback name
        assert _http(url, "GET", "/topics", {"Host": f"localhost:{port}"})[0] == 200
        status, _, _ = _http(url, "POST", "/actions/delete-topic",
                             {"Host": f"localhost:{port}", "Cookie": cookie, "Origin": f"http://localhost:{port}"},
                             form)  # fmt: skip
        assert status == 303 and not _topic_exists(unique_name, bootstrap)


@pytest.mark.tansu
def test_junk_bearer_token_is_401_not_a_csrf_bypass(bootstrap: str, unique_name: str) -> None:
    assert run("topic", "create", unique_name, "-p", "1", "-r", "1", "-b", bootstrap).returncode == 0
    form = urlencode({"topic": unique_name, "confirmed": "yes"})
    with console("--bootstrap-server", bootstrap) as url:
        host = urlsplit(url).netloc
        for auth in ("Bearer junk", "Bearer ", "Basic dXNlcjpwYXNz"):
            status, _, body = _http(url, "POST", "/actions/delete-topic", {"Host": host, "Authorization": auth}, form)
            assert status == 401 and "Authorization" in body, (auth, status, body[:200])
        # a real 200 kB form post is refused before anyone reads it
        status, _, _ = _http(url, "POST", "/actions/delete-topic", {"Host": host}, form + "&x=" + "y" * 200_000)
        assert status == 413
    assert _topic_exists(unique_name, bootstrap)
    token = secrets.token_hex(32)
    with console("--bootstrap-server", bootstrap, "--host", "0.0.0.0", env={TOKEN_ENV: token}) as url:
        host = urlsplit(url).netloc
        wrong = token[:-1] + ("0" if token[-1] != "0" else "1")
        assert _http(url, "GET", "/topics", {"Host": host, "Authorization": f"Bearer {wrong}"})[0] == 401
        assert _http(url, "GET", "/topics", {"Host": host, "Authorization": f"Bearer {token}"})[0] == 200


@pytest.mark.tansu
def test_token_is_in_no_printed_url_and_no_request_log(bootstrap: str, tmp_path: Path) -> None:
    token = secrets.token_hex(32)
    log = tmp_path / "console.log"
    env = {TOKEN_ENV: token, "CLUSTERCTL_CONSOLE_LOG": "info"}  # info: uvicorn's request log on
    with console("--bootstrap-server", bootstrap, "--host", "0.0.0.0", env=env, output=log) as url:
        host = urlsplit(url).netloc
        status, headers, _ = _http(url, "GET", f"/topics?token={token}&x=1", {"Host": host})
        assert status == 303 and headers["location"] == "/topics?x=1"
        assert _http(url, "GET", "/brokers", {"Host": host, "Authorization": f"Bearer {token}"})[0] == 200
        deadline = time.monotonic() + 10
        while "GET /brokers" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
    text = log.read_text()
    assert "GET /topics?token=REDACTED&x=1" in text and "GET /brokers" in text  # the request log is on
    assert token not in text
    assert f"at http://127.0.0.1:{urlsplit(url).port}/;" in text and "clusterctl ui --print-url" in text


@pytest.mark.tansu
def test_zk_path_bounds_answer_small_and_fast(bootstrap: str) -> None:
    with console("--bootstrap-server", bootstrap, "--zookeeper", "127.0.0.1:1") as url:
        host = urlsplit(url).netloc
        started = time.monotonic()
        status, _, body = _http(url, "GET", "/zk?path=" + "/a" * 15_000, {"Host": host})  # the 15,000 parts
        assert status == 414 and len(body) < 1000
        status, _, body = _http(url, "GET", "/zk?path=" + "/a" * 100, {"Host": host})
        assert status == 400 and "too deep (100 levels" in body and len(body) < 20_000
        status, _, body = _http(url, "GET", "/zk?path=/" + "b" * 2000, {"Host": host})
        assert status == 400 and "too long (2001 chars" in body
        assert time.monotonic() - started < 5


def test_a_10_mb_record_is_cut_with_a_note() -> None:
    con = Console(ConsoleTarget("127.0.0.1:1"))
    node = Znode("/big", {"blob": "x" * 10_000_000}, 3, 0, None, 0.0)
    data = bounds.shown(_pretty(node.data))
    body = con.env.get_template("zk.html").render(
        title="ZooKeeper", pages=[], path="/big", node=node, children=[], start=0, total=0, next=None, data=data,
        error=None, csrftoken="x", target=con.target, live=None, done=None,
    )  # fmt: skip
    assert len(body) < 2 * bounds.MAX_RECORD_CHARS
    assert "showing the first 65,536 of 10,000,0" in body and "not shown" in body


def test_blocking_work_times_out_and_does_not_hold_up_others() -> None:
    release = threading.Event()

    async def both() -> tuple[float, str]:
        slow = asyncio.create_task(bounds.off_loop(release.wait, 30, timeout=0.5))
        started = time.monotonic()
        quick = await bounds.off_loop(lambda: "answered")
        with pytest.raises(TimeoutError_, match=r"no answer from the cluster within 0\.5s"):
            await slow
        return time.monotonic() - started, quick

    try:
        took, quick = asyncio.run(both())
    finally:
        release.set()
    assert quick == "answered" and took < 2


def test_served_names_for_loopback_wildcard_container_and_proxy() -> None:
    loop = served("127.0.0.1", 9000)
    assert all(loop.allows(h) for h in ("127.0.0.1:9000", "localhost:9000", "LOCALHOST:9000", "[::1]:9000"))
    assert not any(loop.allows(h) for h in (f"{REBIND}:9000", "127.0.0.1:9001", "127.0.0.1", "10.0.0.5:9000", "",
                                            "127.0.0.1:9000@evil", "127.0.0.1:x", "a" * 300))  # fmt: skip
    # the container: listens on 9000, published on the host's 127.0.0.1:9100
    box = Listen("0.0.0.0", 9000, None, exposed_on="127.0.0.1", public_port=9100).served()
    assert box.allows("127.0.0.1:9100") and box.allows("localhost:9100") and box.allows("127.0.0.1:9000")
    assert not box.allows("10.0.0.5:9100") and not box.allows(f"{REBIND}:9100")
    # a wildcard bind answers to any IP literal (no DNS to re-point), never to a foreign name
    wild = served("0.0.0.0", 9000)
    assert wild.allows("192.168.1.5:9000") and not wild.allows(f"{REBIND}:9000")
    proxy = served("127.0.0.1", 9000, public_names=["console.example.com:443"])
    assert proxy.allows_origin("https://console.example.com") and not proxy.allows_origin("https://example.com")
    assert not loop.allows_origin("null") and not loop.allows_origin("file:///x")
