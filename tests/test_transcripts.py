"""The tutorials' transcripts cannot drift (issue 48): what the pages show is what the commands print today.

The tansu pages (docs/tutorials/quickstart.md, data-plane.md) are run again here on a tansu broker of this module's
own (a process on loopback, empty at the start: `topic list` shows only the pages' topics, not the other tests') and
compared with what the pages recorded, normalized
(docs/transcripts.py: timings, dates, ports, ids and table padding). Two deliberate changes show that the
comparison fails when it should: a recorded output edited, and a command whose output changed. Every command of
every tutorial, the real-cluster pages' too, must parse with clusterctl's own command line parser.
"""

from __future__ import annotations

import importlib.util
import os
import stat
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from clusterctl.testing.tansu import TansuBroker, tansu

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.tansu


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("transcripts", ROOT / "docs" / "transcripts.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["transcripts"] = module  # dataclasses resolve their module's annotations through sys.modules
    spec.loader.exec_module(module)
    return module


T = _load()
Outputs = dict[Path, dict[int, list[str]]]


@pytest.fixture(scope="module")
def page_broker() -> Iterator[TansuBroker]:
    """A broker only the pages use: what they list is theirs alone, whatever other tests ran before."""
    with tansu() as broker:
        yield broker


@pytest.fixture(scope="module")
def rerun(page_broker: TansuBroker, tmp_path_factory: pytest.TempPathFactory) -> Outputs:
    """The tansu pages' commands run again now: {page: {block index: output of each command}}."""
    cwd = tmp_path_factory.mktemp("transcripts")
    return {page.path: T.run_tansu_page(page, page_broker.bootstrap, cwd) for page in T.pages("tansu")}


def test_cheap_transcripts_print_what_the_pages_show(rerun: Outputs) -> None:
    tansu_pages = T.pages("tansu")
    assert {p.path.name for p in tansu_pages} == {"quickstart.md", "data-plane.md"}
    blocks = [b for p in tansu_pages for b in p.blocks]
    assert sum(len(b.commands) for b in blocks) >= 35  # every block ran, none was skipped
    drift = [d for b in blocks for d in T.differences(b, rerun[b.page][b.index])]
    assert not drift, "a tutorial's output changed; rerun `python docs/transcripts.py --env tansu`:\n" + "\n\n".join(
        drift
    )


def _block(page_name: str, containing: str) -> tuple[Any, int]:
    """The first block of a tansu page whose recorded output holds `containing`, and that command's position."""
    for page in T.pages("tansu"):
        if page.path.name == page_name:
            for block in page.blocks:
                for i, recorded in enumerate(block.recorded):
                    if containing in recorded:
                        return block, i
    raise AssertionError(f"{containing!r} recorded nowhere on {page_name}")


def test_an_edited_recorded_output_is_caught(rerun: Outputs) -> None:
    """One integer changed in a page's recorded output (1000 delivered → 999): the block fails, with the diff."""
    block, i = _block("data-plane.md", "Delivered    1000")
    assert not T.differences(block, rerun[block.page][block.index])  # as recorded, it matches
    block.recorded[i] = block.recorded[i].replace("Delivered    1000", "Delivered    999 ")
    drift = T.differences(block, rerun[block.page][block.index])
    assert len(drift) == 1
    assert "$ seq 1 1000" in drift[0]
    assert "-Delivered 999" in drift[0] and "+Delivered 1000" in drift[0]


def test_a_command_whose_output_changed_is_caught(page_broker: TansuBroker, tmp_path: Path) -> None:
    """The quickstart's first block run by a clusterctl that prints one word differently ("Changed" →
    "Modified"): the block fails, on that line; run by the real clusterctl, it matches."""
    real = Path(sys.executable).parent / "clusterctl"
    fake_bin = tmp_path / "bin"
    fake_bin.mkdir()
    fake = fake_bin / "clusterctl"
    fake.write_text(f'#!/bin/bash\n"{real}" "$@" 2>&1 | sed "s/^Changed /Modified/"\nexit "${{PIPESTATUS[0]}}"\n')
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)

    page = next(p for p in T.pages("tansu") if p.path.name == "quickstart.md")
    block = page.blocks[0]
    assert block.commands == ["clusterctl topic create test --partitions 1 --replication-factor 1"]
    runner = T.Runner.make(tmp_path, CLUSTERCTL_BOOTSTRAP_SERVER=page_broker.bootstrap)
    changed = T.Runner.make(tmp_path, CLUSTERCTL_BOOTSTRAP_SERVER=page_broker.bootstrap)
    changed.env["PATH"] = f"{fake_bin}{os.pathsep}{changed.env['PATH']}"
    try:
        T.clean_page(page_broker.bootstrap, page)
        drift = T.differences(block, T.run_block(changed, block))
        T.clean_page(page_broker.bootstrap, page)
        assert not T.differences(block, T.run_block(runner, block))
    finally:
        T.clean_page(page_broker.bootstrap, page)
    assert len(drift) == 1
    assert "-Changed yes" in drift[0] and "+Modified yes" in drift[0]


def test_normalize_keeps_words_and_integers_only() -> None:
    a = "consumed 1000 messages from orders in 0.6s\n│ 111 │ 127.0.0.1:59691 │ -    │\nat 2026-11-27T12:00:01Z"
    b = "consumed 1000 messages from orders in 12.25s\n│ 111 │ 127.0.0.1:39092      │ - │\nat 2026-11-28T01:02:03Z"
    assert T.normalize(a) == T.normalize(b)
    assert T.normalize("Delivered 1000") != T.normalize("Delivered 999")
    assert T.normalize("Leader 1 Isr 1,2,3") != T.normalize("Leader 1 Isr 1,3")
    assert T.normalize("State STABLE") != T.normalize("State EMPTY")


def test_every_tutorial_command_parses_with_the_cli() -> None:
    """Nothing on a tutorial page is a command or an option clusterctl does not have (the real-cluster pages'
    commands included: they are not run in CI)."""
    found = T.pages()
    assert {p.env for p in found} == {"tansu", "kafka"} and len(found) >= 8
    invocations = [
        (b.name, args) for p in found for b in p.blocks for c in b.commands for args in T.clusterctl_invocations(c)
    ]
    assert len(invocations) >= 60
    wrong = [f"{name}: clusterctl {' '.join(args)}: {err}" for name, args in invocations if (err := T.cli_error(args))]
    assert not wrong, "\n".join(wrong)
    # and the parser does refuse what clusterctl does not have
    assert T.cli_error(["topic", "creat", "x"]) and T.cli_error(["topic", "create", "x", "--bogus"])


def test_every_transcript_block_was_recorded() -> None:
    """Each block holds the output of a run (a page whose commands were added but never run fails here)."""
    for page in T.pages():
        for block in page.blocks:
            assert len(block.recorded) == len(block.commands)
            assert any(out.strip() for out in block.recorded), f"{block.name}: no output recorded"
