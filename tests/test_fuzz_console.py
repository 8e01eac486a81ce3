"""Boundary fuzzing of the console's front door (design.md test layer 6), in-process against tansu.

Generated requests carry a foreign Host, a foreign Origin/Referer, a wrong Authorization, or oversized paths and
parameters; every POST otherwise holds a valid CSRF pair and asks to delete a canary topic or create one. Each
must be refused with its status (421, 403, 401, 400/414), and at the end the canary still exists and no topic was
created. The number of generated cases and the time they took are printed at the end of the module's run.
"""

from __future__ import annotations

import asyncio
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, urlencode

import pytest
from _asgi import call
from _fuzz import Tally, report_fixture
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clusterctl.console import bounds
from clusterctl.console.app import build_app
from clusterctl.console.data import ConsoleTarget
from clusterctl.console.guard import served
from clusterctl.kafka import admin, browse
from clusterctl.testing.tansu import TansuBroker

pytestmark = pytest.mark.tansu

CASES = Tally()
SCALE = float(os.environ.get("CLUSTERCTL_FUZZ_SCALE", "1"))
FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None,
                max_examples=int(150 * SCALE))  # fmt: skip
PORT = 9000
TOKEN = "t" * 40
GOOD_HOSTS = ("127.0.0.1:9000", "localhost:9000", "[::1]:9000")
CREATED = "fuzz-console-created"


@dataclass
class Site:
    app: Any
    token: str | None
    cookie: str
    csrf: str
    canary: str


report_count = report_fixture(CASES, "fuzz layer: {n} generated console requests in {seconds:.1f}s")


def _site(bootstrap: str, canary: str, token: str | None) -> Site:
    app = build_app(ConsoleTarget(bootstrap), served("127.0.0.1", PORT), token)
    auth = [("authorization", f"Bearer {token}")] if token else []
    page = call(app, "GET", f"/topics/{canary}", [("host", GOOD_HOSTS[0]), *auth])
    assert page.status == 200, page.text[:300]
    form = re.search(r'name="csrftoken" value="([^"]+)"', page.text)
    assert form is not None
    return Site(app, token, page.header("set-cookie")[0].split(";", 1)[0], form.group(1), canary)


@pytest.fixture(scope="module", params=["loopback", "token"])
def site(request: pytest.FixtureRequest, tansu_broker: TansuBroker) -> Iterator[Site]:
    canary = f"fuzz-console-canary-{request.param}"
    admin.create_topic(tansu_broker.bootstrap, canary, 1, 1, {})
    yield _site(tansu_broker.bootstrap, canary, TOKEN if request.param == "token" else None)
    names = {t.name for t in admin.describe_topics(tansu_broker.bootstrap)}
    assert canary in names and CREATED not in names  # nothing state-changing got through
    assert browse.read_window(tansu_broker.bootstrap, canary).records == []  # nothing produced
    admin.delete_topic(tansu_broker.bootstrap, canary)


name = st.from_regex(r"[a-z0-9][a-z0-9.-]{0,30}", fullmatch=True)
foreign_host = st.one_of(
    st.builds(
        lambda n, p: f"{n}:{p}", name.filter(lambda n: n not in ("localhost", "127.0.0.1")), st.integers(1, 65535)
    ),
    st.builds(
        lambda h, p: f"{h}:{p}",
        st.sampled_from(["127.0.0.1", "localhost", "[::1]"]),
        st.integers(1, 65535).filter(lambda p: p != PORT),
    ),
    st.sampled_from(
        [
            "localhost",
            "127.0.0.1",
            "127.0.0.2:9000",
            "0.0.0.0:9000",
            "localhost.:9000x",
            "127.0.0.1:9000@evil.test",
            "evil.test#127.0.0.1:9000",
            "127.0.0.1:9000/x",
            "",
        ]
    ),
    st.text(st.characters(min_codepoint=32, max_codepoint=255), max_size=60),
).filter(lambda h: h.lower().rstrip(".") not in GOOD_HOSTS and h.lower() != "localhost.:9000")
foreign_origin = st.one_of(
    st.builds(
        lambda s, h: f"{s}://{h}",
        st.sampled_from(["http", "https"]),
        foreign_host.filter(lambda h: re.split(r"[/?#\\]", h)[0].lower() not in GOOD_HOSTS),
    ),
    st.sampled_from(["null", "file://", "chrome-extension://abc", "http://127.0.0.1:9000.evil.test"]),
)
bad_auth = st.one_of(
    st.builds(
        lambda s, v: f"{s} {v}",
        st.sampled_from(["Bearer", "bearer", "Basic", "Token", ""]),
        st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=50),
    ),
    st.just(f"Bearer {TOKEN[:-1]}"),
    st.just(f"Bearer {TOKEN}x"),
)
action = st.sampled_from(["delete-topic", "create-topic", "add-partitions", "elect", "produce", "alter-config"])


def _post(site: Site, act: str, headers: list[tuple[str, str]]) -> Any:
    form = {"csrftoken": site.csrf, "confirmed": "yes", "partitions": "1", "replication_factor": "1",
            "topic": site.canary if act != "create-topic" else CREATED, "value": "fuzz",
            "name": "retention.ms"}  # fmt: skip
    headers = [*headers, ("cookie", site.cookie), ("content-type", "application/x-www-form-urlencoded")]
    return call(site.app, "POST", f"/actions/{act}", headers, urlencode(form).encode())


def _auth(site: Site) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {site.token}")] if site.token else []


@FUZZ
@given(host=foreign_host, act=action, method=st.sampled_from(["GET", "POST"]), with_auth=st.booleans())
def test_foreign_host_is_421(site: Site, host: str, act: str, method: str, with_auth: bool) -> None:
    with CASES.case():
        headers = [("host", host), *(_auth(site) if with_auth else [])]
        if method == "POST":
            reply = _post(site, act, [*headers, ("origin", f"http://{GOOD_HOSTS[0]}")])
        else:
            reply = call(site.app, "GET", f"/topics/{site.canary}", headers)
        assert reply.status == 421 and b"csrftoken" not in reply.body and not reply.header("set-cookie")


@FUZZ
@given(host=st.sampled_from(GOOD_HOSTS), auth=bad_auth, act=action)
def test_wrong_authorization_is_401(site: Site, host: str, auth: str, act: str) -> None:
    with CASES.case():
        reply = _post(site, act, [("host", host), ("authorization", auth)])
        assert reply.status == 401, (auth, reply.status, reply.text[:200])


@FUZZ
@given(host=st.sampled_from(GOOD_HOSTS), origin=foreign_origin, which=st.sampled_from(["origin", "referer"]),
       act=action)  # fmt: skip
def test_foreign_origin_or_referer_on_a_post_is_403(site: Site, host: str, origin: str, which: str, act: str) -> None:
    with CASES.case():
        value = origin if which == "origin" else f"{origin}/topics/{site.canary}"
        reply = _post(site, act, [("host", host), *_auth(site), (which, value)])
        assert reply.status == 403 and "cross-site" in reply.text, (value, reply.status, reply.text[:200])


@FUZZ
@given(parts=st.integers(bounds.MAX_ZK_DEPTH + 1, 20_000), part=st.text("abz_.-0", min_size=1, max_size=4),
       start=st.one_of(st.none(), st.text(max_size=20)))  # fmt: skip
def test_oversized_zk_paths_are_refused_small(site: Site, parts: int, part: str, start: str | None) -> None:
    with CASES.case():
        target = (
            "/zk?path=" + quote("/" + "/".join([part] * parts)) + ("" if start is None else f"&from={quote(start)}")
        )
        reply = call(site.app, "GET", target, [("host", GOOD_HOSTS[1]), *_auth(site)])
        expected = 414 if len(target) > bounds.MAX_TARGET_CHARS else 400
        assert reply.status == expected and len(reply.body) < 20_000, (len(target), reply.status)


@FUZZ
@given(size=st.integers(bounds.MAX_BODY_BYTES + 1, 10**12), act=action,
       extra=st.sampled_from([[], [("transfer-encoding", "chunked")]]))  # fmt: skip
def test_oversized_or_unframed_bodies_are_refused(site: Site, size: int, act: str, extra: list) -> None:
    with CASES.case():
        headers = [("host", GOOD_HOSTS[0]), *_auth(site), ("content-length", str(size)), *extra]
        reply = call(site.app, "POST", f"/actions/{act}", headers, b"topic=x")  # only the claimed length is large
        assert reply.status == (411 if extra else 413), (size, extra, reply.status)


# ---------------------------------------------------------------- issue 51: form bytes and concurrent tails

UTF8_TOPIC = "fuzz-console-utf8"


@pytest.fixture(scope="module")
def utf8_topic(tansu_broker: TansuBroker) -> Iterator[str]:
    admin.create_topic(tansu_broker.bootstrap, UTF8_TOPIC, 1, 1, {})
    yield UTF8_TOPIC
    admin.delete_topic(tansu_broker.bootstrap, UTF8_TOPIC)


def _valid_utf8(raw: bytes) -> bool:
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


@settings(FUZZ, max_examples=int(15 * SCALE))
@given(raw=st.one_of(st.binary(min_size=1, max_size=40), st.text(min_size=1, max_size=20).map(str.encode)),
       field=st.sampled_from(["value", "key"]))  # fmt: skip
def test_produce_action_takes_exactly_utf8(
    site: Site, tansu_broker: TansuBroker, utf8_topic: str, raw: bytes, field: str
) -> None:
    """Bytes that are not UTF-8 in a produce form are refused with one line (as the CLI refuses them on stdin),
    never stored as U+FFFD; UTF-8 is stored exactly."""
    valid = _valid_utf8(raw)
    topic = utf8_topic if valid else site.canary  # the canary must stay empty (the fixture checks it at the end)
    form = {"csrftoken": site.csrf, "topic": topic, "value": b"v", field: raw}
    headers = [("host", GOOD_HOSTS[0]), *_auth(site), ("cookie", site.cookie),
               ("content-type", "application/x-www-form-urlencoded")]  # fmt: skip
    with CASES.case():
        reply = call(site.app, "POST", "/actions/produce", headers, urlencode(form).encode())
    if not valid:
        assert reply.status == 400 and "is not UTF-8" in reply.text and "nothing was done" in reply.text, raw
        assert browse.read_window(tansu_broker.bootstrap, site.canary).records == []
        return
    assert reply.status == 303, (raw, reply.status, reply.text[:300])
    newest = browse.read_window(tansu_broker.bootstrap, utf8_topic, limit=1).records[0]
    stored = newest.value if field == "value" else newest.key
    text = stored.decode("utf-8") if isinstance(stored, bytes) else stored
    assert text == raw.decode("utf-8"), (raw, stored)  # exactly: no U+FFFD, nothing stripped


async def _open_tails(app: Any, n: int, headers: list[tuple[str, str]], path: str) -> list[bytes]:
    """n tail requests at once; each one's first body chunk, then every stream is closed (a disconnect)."""
    release = asyncio.Event()

    async def one() -> tuple[bytes, asyncio.Task[None]]:
        first = asyncio.Event()
        body = b""
        asked = False

        async def receive() -> dict[str, Any]:
            nonlocal asked
            if not asked:
                asked = True
                return {"type": "http.request", "body": b"", "more_body": False}
            await release.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            nonlocal body
            if message["type"] == "http.response.body" and message.get("body"):
                body += message["body"]
                first.set()

        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET",
                 "scheme": "http", "path": path, "raw_path": path.encode(), "query_string": b"", "root_path": "",
                 "headers": [(k.encode(), v.encode()) for k, v in headers], "client": ("127.0.0.1", 50000),
                 "server": ("127.0.0.1", PORT)}  # fmt: skip
        task = asyncio.ensure_future(app(scope, receive, send))
        await asyncio.wait_for(first.wait(), 30)
        return body, task

    opened = await asyncio.gather(*(one() for _ in range(n)))
    release.set()
    await asyncio.wait_for(asyncio.gather(*(task for _, task in opened)), 30)
    return [body for body, _ in opened]


@settings(FUZZ, max_examples=int(5 * SCALE))
@given(n=st.integers(1, bounds.MAX_TAILS + 6))
def test_live_tails_arriving_together_never_pass_the_bound(site: Site, n: int) -> None:
    """n tails at once: exactly min(n, 8) open, the rest are refused (10 and 12 opened before: each request
    passed the check while the others were still building their consumers); closed, all 8 are free again."""
    headers = [("host", GOOD_HOSTS[0]), *_auth(site), ("cookie", site.cookie)]
    path = f"/topics/{site.canary}/tail"
    with CASES.case():
        for _round in range(2):  # the second round: every slot came back when the streams closed
            bodies = asyncio.run(_open_tails(site.app, n, headers, path))
            opened = sum(b"tail open" in b for b in bodies)
            refused = sum(b"event: refused" in b for b in bodies)
            assert (opened, refused) == (min(n, bounds.MAX_TAILS), max(0, n - bounds.MAX_TAILS)), bodies
