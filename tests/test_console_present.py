"""How the console shows records, times and sizes, and how the messages page reads its URL (no cluster needed).

User data reaching a page is escaped: a record's key, value and headers rendered through the console's own
templates come out as text, whatever HTML or script they hold.
"""

from __future__ import annotations

import html
import json

import pytest

from clusterctl.console import actions, bounds, present
from clusterctl.console.app import Console
from clusterctl.console.data import ConsoleTarget
from clusterctl.console.messages import query, view
from clusterctl.errors import UsageError
from clusterctl.kafka.browse import Record

HOSTILE = "<script>alert(1)</script><img src=x onerror=alert(2)>\"'&"


def test_bytes_are_shown_as_text_json_or_hex() -> None:
    assert present.shown(None).kind == "null"
    assert present.shown(b"plain words\nsecond line") == present.Shown("text", "plain words\nsecond line", 23, 0)
    doc = present.shown(b'{"b":[1,2],"a":"x"}')
    assert doc.kind == "json" and json.loads(doc.text) == {"b": [1, 2], "a": "x"} and "\n  " in doc.text
    assert present.shown(b"{not json").kind == "text"
    binary = present.shown(bytes(range(20)))
    assert binary.kind == "hex" and binary.text.splitlines() == [
        "00000000  00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f  ................",
        "00000010  10 11 12 13                                      ....",
    ]
    assert present.shown("héllo wörld".encode()).text == "héllo wörld"
    assert present.shown(b"\x1b[31mred").kind == "hex"  # a terminal escape is not text


def test_a_cut_record_says_how_much_is_not_shown() -> None:
    big = b"A" * bounds.MAX_RECORD_CHARS
    s = present.shown(big, 10_000_000)
    assert (s.kind, len(s.text), s.size, s.cut) == ("text", len(big), 10_000_000, 10_000_000 - len(big))
    # a multi-byte character split by the cut is dropped, not turned into hex
    s = present.shown("é".encode() * 10 + "é".encode()[:1], 1000)
    assert (s.kind, s.text) == ("text", "é" * 10)
    # JSON cut short is shown as the text it is (it would not parse)
    assert present.shown(b'{"a": 1', 100).kind == "text"
    binary = present.shown(b"\x00" * 10_000, 10_000)
    assert binary.kind == "hex" and binary.cut == 10_000 - present.HEX_BYTES


def test_times_and_sizes() -> None:
    assert present.iso(1795452307) == "2026-11-23T16:45:07.000Z"
    assert present.iso(1795452307123) == "2026-11-23T16:45:07.123Z"  # milliseconds
    assert present.iso("junk") == present.iso(None) == "-"
    assert str(present.when(1795452307)) == (
        '<time datetime="2026-11-23T16:45:07.000Z" class="when">2026-11-23T16:45:07.000Z</time>'
    )
    assert [present.size(n) for n in (0, 1023, 1024, 10 * 1024 * 1024, 3 * 1024**4)] == [
        "0 B", "1023 B", "1.0 KiB", "10.0 MiB", "3.0 TiB"]  # fmt: skip


def test_config_values_read_as_durations_and_sizes() -> None:
    hints = {("retention.ms", "604800000"): "7 d", ("segment.ms", "3600000"): "1 h", ("flush.ms", "1500"): "1.5 s",
             ("retention.ms", "-1"): "unlimited", ("flush.ms", str(2**63 - 1)): "unlimited",
             ("local.retention.ms", "-2"): "", ("segment.bytes", "1073741824"): "1.0 GiB",
             ("max.message.bytes", "1048588"): "1.0 MiB", ("min.insync.replicas", "2"): "",
             ("cleanup.policy", "delete"): "", ("retention.ms", "999"): ""}  # fmt: skip
    assert {k: present.config_hint(*k) for k in hints} == hints


def test_record_rows_escape_keys_values_and_headers() -> None:
    console = Console(ConsoleTarget("127.0.0.1:1"))
    rec = Record(0, 7, 1795452307123, HOSTILE.encode(), ('{"x": "' + HOSTILE.replace('"', "'") + '"}').encode(),
                 len(HOSTILE), None, [(HOSTILE, HOSTILE.encode()), ("bin", b"\x00<b>")])  # fmt: skip
    rec.value_size = len(rec.value or b"")
    row = console.env.get_template("_record.html").render(r=view(rec))
    assert "<script>" not in row and "<img" not in row and "<b>" not in row
    assert row.count(html.escape(HOSTILE, quote=False).replace("'", "&#39;").replace('"', "&#34;")) >= 2
    assert 'data-offset="7"' in row and "2026-11-23T16:45:07.123Z" in row


def test_messages_query_bounds() -> None:
    q = query({"partition": "2", "from_offset": "10", "to_offset": "20", "q": "needle", "limit": "100"})
    assert (q.partition, q.offset_from, q.offset_to, q.q, q.limit) == (2, 10, 20, "needle", 100)
    assert query({}).limit == bounds.DEFAULT_RECORDS
    assert query({"from_time": "2026-11-23T16:45:07"}).window_args()["ts_from"] == 1795452307000
    assert query({"from_time": "2026-11-23T17:45:07+01:00"}).window_args()["ts_from"] == 1795452307000
    assert query({"to_time": "1795452307123"}).window_args()["ts_to"] == 1795452307123
    for bad in ({"limit": "501"}, {"limit": "0"}, {"limit": "-1"}, {"partition": "x"}, {"from_offset": "9" * 30},
                {"q": "x" * (bounds.MAX_SEARCH_CHARS + 1)}, {"from_time": "yesterday"}):  # fmt: skip
        with pytest.raises(UsageError):
            query(bad)


def test_action_forms() -> None:
    form = {"topic": "t", "headers": "a=1\n\n trace = x=y \n"}
    assert actions.headers(form) == [("a", b"1"), ("trace", b" x=y ")]
    with pytest.raises(UsageError, match="name=value"):
        actions.headers({"headers": "no-equals"})
    assert actions.describe("alter-config", {"topic": "t", "name": "retention.ms", "value": "5"}) == (
        "Set retention.ms=5 on topic 't'?"
    )
    assert "Delete the override" in actions.describe("alter-config", {"topic": "t", "name": "x", "delete": "yes"})
    assert actions.back("produce", {"topic": "a/b<x>"}) == "/topics/a%2Fb%3Cx%3E/messages"
    assert set(actions.UNCONFIRMED) <= set(actions.ACTIONS)


def test_group_ids_and_members_are_escaped_on_every_group_page() -> None:
    from types import SimpleNamespace

    from clusterctl.console.app import PAGES
    from clusterctl.console.data import GroupRow
    from clusterctl.kafka.groups import GroupDescription, GroupMember, OffsetReset, PartitionLag, ResetPlan

    console = Console(ConsoleTarget("127.0.0.1:1"))
    env = console.env
    member = GroupMember(HOSTILE, HOSTILE, HOSTILE, [f"{HOSTILE}-0"])
    desc = GroupDescription(HOSTILE, "STABLE", 1, HOSTILE, [member], [PartitionLag("t", 0, 3, 5, 2, HOSTILE, HOSTILE,
                            HOSTILE)], 2)  # fmt: skip
    page = {"request": SimpleNamespace(url=SimpleNamespace(path="/groups")), "target": console.target,
            "pages": PAGES, "csrftoken": "t", "done": HOSTILE}  # fmt: skip
    plan = ResetPlan(HOSTILE, "t", "earliest", False, [OffsetReset("t", 0, 1, 0)])
    confirm = {"title": "Confirm", "action": "reset-offsets", "summary": HOSTILE, "back": "/groups", "plan": plan}
    rendered = [
        env.get_template("_groups.html").render(groups=[GroupRow(HOSTILE, "EMPTY", 0, 0, 0)]),
        env.get_template("_groups.html").render(groups=[GroupRow(HOSTILE, "DEAD", None, None, None, HOSTILE)]),
        env.get_template("_group.html").render(group=desc),
        env.get_template("group.html").render(name=HOSTILE, title=HOSTILE, live="x", fragment="", **page),
        env.get_template("confirm.html").render(form={"group": HOSTILE, "topic": "t"}, **confirm, **page),
    ]
    for body in rendered:
        assert "<script>" not in body and "<img" not in body, body[:400]
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    # a link to the group quotes its id (no breaking out of the attribute)
    assert 'href="/groups/%3Cscript%3Ealert%281%29%3C/script%3E%3Cimg%20src%3Dx' in rendered[0]


def test_quorum_page_renders_a_constructed_view_and_escapes_it() -> None:
    from clusterctl.kafka.kraft.describe_quorum import QuorumInfo, ReplicaState
    from clusterctl.kafka.kraft.quorum import view_of

    now = 1_700_000_000_000
    info = QuorumInfo(2, 9, 500, [ReplicaState(1, 480, now - 1500), ReplicaState(2, 500)], [ReplicaState(7, -1)])
    info.answered_by = HOSTILE
    q = view_of(HOSTILE, info, lambda n: HOSTILE if n == 7 else f"controller{n}", [1, 2, 3], now)
    body = Console(ConsoleTarget("x:1", quorum=("x:1",))).env.get_template("_quorum.html").render(q=q, note=None)
    assert "<script>" not in body and "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    assert 'id="quorum-leader">node 2 (controller2)' in body
    assert 'data-sort="20">20</td>' in body and "1.5 s ago" in body  # voter 1: lag, last fetch
    assert "expected voters missing: 3" in body


def test_dashboard_series_and_write_gaps() -> None:
    from clusterctl.console.dashboard import build, write_gaps

    assert write_gaps([(0.0, 0.0), (0.5, 10.0), (1.0, 0.0), (1.5, 0.0), (2.0, 8.0), (2.5, 0.0)]) == [
        (1.0, 2.0),
        (2.5, 3.0),
    ]
    events = [
        {"t": 100.0, "source": "metadata", "kind": "partition", "subject": "d-0",
         "value": {"leader": 1, "replicas": [1, 2], "isr": [1, 2]}},
        {"t": 101.0, "source": "step", "kind": "step", "subject": "step 1", "detail": "kill-leader"},
        {"t": 101.5, "source": "metadata", "kind": "leader", "subject": "d-0", "value": -1},
        {"t": 102.0, "source": "metadata", "kind": "isr", "subject": "d-0", "value": [2]},
        {"t": 102.0, "source": "load", "kind": "interval", "subject": "d", "value": {"t": 101.0, "acked": 50}},
    ]  # fmt: skip
    d = build(events, running=True)
    assert d.leaders == {"d-0": [(0.0, 1), (1.5, -1)]} and d.isr == {"d-0": [(0.0, 2), (2.0, 1)]}
    assert d.acked == [(1.0, 100.0)] and d.end == 2.0
    assert [s.current for s in d.steps] == [True] and not build(events, running=False).steps[0].current
