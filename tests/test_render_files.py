"""Render owns its files and nothing else: the user's .env lines survive, secrets are kept across
manager toggles, a failed or interrupted render changes nothing and leaves no staging directory."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from clusterctl.compose import render as rendering
from clusterctl.compose.render import (
    COMPOSE_FILE,
    ENV_FILE,
    MANIFEST_FILE,
    RenderError,
    existing_cluster_id,
    existing_console_token,
    existing_secret,
    render,
)
from clusterctl.spec.model import parse_spec

ZK_NO_MANAGER: dict[str, Any] = {"name": "lab", "profile": "offline", "kafka_manager": {"enabled": False}}
CONSOLE: dict[str, Any] = {"name": "lab", "profile": "offline", "kafka_manager": {"enabled": True}}
USER_LINES = "# my own settings\nCOMPOSE_PROJECT_NAME=mine\nHTTP_PROXY=http://proxy:3128\n"


def _snapshot(d: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), stat.S_IMODE(p.stat().st_mode)) for p in d.iterdir()}


def _no_staging_left(tmp_path: Path) -> None:
    left = [p for p in tmp_path.rglob("*") if "staging" in p.name or "clusterctl-render-" in p.name]
    assert left == []


def test_render_without_secrets_keeps_the_users_env(tmp_path: Path) -> None:
    """ZooKeeper mode without a manager has nothing to put in .env: the user's .env must stay as it is."""
    out = tmp_path / "out"
    render(parse_spec(CONSOLE), out, validate=False)
    (out / ENV_FILE).write_text((out / ENV_FILE).read_text() + USER_LINES)
    render(parse_spec(ZK_NO_MANAGER), out, validate=False)
    text = (out / ENV_FILE).read_text()
    assert USER_LINES in text


def test_user_lines_in_env_survive_a_rerender(tmp_path: Path) -> None:
    out = tmp_path / "out"
    render(parse_spec(CONSOLE), out, validate=False)
    token = existing_console_token(out)
    (out / ENV_FILE).write_text(USER_LINES + (out / ENV_FILE).read_text() + "EXTRA=1\n")
    result = render(parse_spec(CONSOLE), out, validate=False)
    text = (out / ENV_FILE).read_text()
    assert text.startswith(USER_LINES) and text.endswith("EXTRA=1\n")
    assert result.secret == "kept" and existing_console_token(out) == token
    assert text.count(f"CLUSTERCTL_CONSOLE_TOKEN={token}") == 1
    assert stat.S_IMODE((out / ENV_FILE).stat().st_mode) == 0o600


def test_console_token_kept_when_the_manager_is_toggled(tmp_path: Path) -> None:
    out = tmp_path / "out"
    render(parse_spec(CONSOLE), out, validate=False)
    token = existing_console_token(out)
    assert token
    render(parse_spec(ZK_NO_MANAGER), out, validate=False)  # manager off
    again = render(parse_spec(CONSOLE), out, validate=False)  # and on again
    assert again.secret == "kept" and existing_console_token(out) == token


def test_cmak_secret_and_console_token_both_kept_across_kind_switch(tmp_path: Path) -> None:
    out = tmp_path / "out"
    cmak = {"name": "lab", "profile": "default", "kafka_manager": {"enabled": True, "kind": "cmak"}}
    render(parse_spec(cmak), out, validate=False)
    secret = existing_secret(out)
    render(parse_spec({**cmak, "kafka_manager": {"enabled": True, "kind": "console"}}), out, validate=False)
    token = existing_console_token(out)
    assert existing_secret(out) == secret and token
    assert render(parse_spec(cmak), out, validate=False).secret == "kept" and existing_secret(out) == secret
    assert existing_console_token(out) == token


def test_env_only_directory_is_rendered_into(tmp_path: Path) -> None:
    """A directory holding only the user's .env (made before the first render) is not someone else's."""
    out = tmp_path / "out"
    out.mkdir()
    (out / ENV_FILE).write_text(USER_LINES)
    render(parse_spec(CONSOLE), out, validate=False)
    assert (out / ENV_FILE).read_text().startswith(USER_LINES) and existing_console_token(out)


def test_failure_after_compose_would_be_written_changes_nothing(tmp_path: Path) -> None:
    """The manifest cannot be replaced (a directory is in its place): compose and .env must stay as they were."""
    out = tmp_path / "out"
    render(parse_spec(CONSOLE), out, validate=False)
    (out / MANIFEST_FILE).unlink()
    (out / MANIFEST_FILE).mkdir()
    compose_before = (out / COMPOSE_FILE).read_bytes()
    env_before = (out / ENV_FILE).read_bytes()
    bigger = {**CONSOLE, "kafka": {"brokers": 4}}
    with pytest.raises(RenderError):
        render(parse_spec(bigger), out, validate=False)
    assert (out / COMPOSE_FILE).read_bytes() == compose_before
    assert (out / ENV_FILE).read_bytes() == env_before
    _no_staging_left(tmp_path)


def test_interrupted_render_changes_nothing_and_removes_staging(tmp_path: Path, monkeypatch: Any) -> None:
    """Ctrl-C while the files are being moved into place: the earlier render is back, no staging dir anywhere."""
    out = tmp_path / "out"
    render(parse_spec(CONSOLE), out, validate=False)
    before = _snapshot(out)
    real_replace = os.replace
    calls = {"n": 0}

    def replace_then_interrupt(src: Any, dst: Any) -> None:
        real_replace(src, dst)
        calls["n"] += 1
        if calls["n"] == 2:
            raise KeyboardInterrupt

    monkeypatch.setattr(os, "replace", replace_then_interrupt)
    with pytest.raises(KeyboardInterrupt):
        render(parse_spec({**CONSOLE, "kafka": {"brokers": 4}}), out, validate=False)
    monkeypatch.setattr(os, "replace", real_replace)
    assert _snapshot(out) == before
    _no_staging_left(tmp_path)


def test_staging_is_private_and_beside_the_target(tmp_path: Path, monkeypatch: Any) -> None:
    """The staging directory (it holds the console token) is 0700, inside the target's directory, never in /tmp."""
    out = tmp_path / "out"
    seen: list[tuple[Path, int]] = []

    def check(compose_file: Path) -> bool:
        seen.append((compose_file.parent, stat.S_IMODE(compose_file.parent.stat().st_mode)))
        assert (compose_file.parent / ENV_FILE).is_file()
        return True

    monkeypatch.setattr(rendering, "compose_config_check", check)
    render(parse_spec(CONSOLE), out)
    [(staging, mode)] = seen
    assert staging.parent == out and mode == 0o700
    assert not staging.exists()
    _no_staging_left(tmp_path)


def test_kraft_cluster_id_kept_with_user_lines(tmp_path: Path) -> None:
    out = tmp_path / "out"
    kraft = {**ZK_NO_MANAGER, "kafka": {"mode": "kraft"}}
    render(parse_spec(kraft), out, validate=False)
    cid = existing_cluster_id(out)
    (out / ENV_FILE).write_text((out / ENV_FILE).read_text() + USER_LINES)
    assert render(parse_spec(kraft), out, validate=False).cluster_id == "kept"
    assert existing_cluster_id(out) == cid and USER_LINES in (out / ENV_FILE).read_text()


def test_env_that_is_not_a_file_is_refused_before_anything_changes(tmp_path: Path) -> None:
    out = tmp_path / "out"
    render(parse_spec(CONSOLE), out, validate=False)
    (out / ENV_FILE).unlink()
    (out / ENV_FILE).mkdir()
    compose_before = (out / COMPOSE_FILE).read_bytes()
    with pytest.raises(RenderError, match=r"\.env"):
        render(parse_spec({**CONSOLE, "kafka": {"brokers": 4}}), out, validate=False)
    assert (out / COMPOSE_FILE).read_bytes() == compose_before


def test_directory_compose_cannot_open_is_rendered_unvalidated(tmp_path: Path) -> None:
    """The check runs in the staging directory inside the target; compose cannot open a path with control
    characters, so such a render is written and reported as not validated (it used to be exit 70)."""
    out = tmp_path / "\x01odd"
    result = render(parse_spec(CONSOLE), out)
    assert not result.validated_by_compose and (out / COMPOSE_FILE).is_file()
    _no_staging_left(tmp_path)


def test_interrupt_during_the_compose_check_changes_nothing(tmp_path: Path, monkeypatch: Any) -> None:
    out = tmp_path / "out"
    render(parse_spec(CONSOLE), out, validate=False)
    before = _snapshot(out)

    def interrupted(compose_file: Path) -> bool:
        raise KeyboardInterrupt

    monkeypatch.setattr(rendering, "compose_config_check", interrupted)
    with pytest.raises(KeyboardInterrupt):
        render(parse_spec({**CONSOLE, "kafka": {"brokers": 4}}), out)
    assert _snapshot(out) == before
    _no_staging_left(tmp_path)


def test_invalid_spec_after_a_render_changes_nothing(tmp_path: Path) -> None:
    """Through the CLI: a spec broken after a good render is refused (exit 2) and the rendering stays."""
    spec = tmp_path / "clusterctl.yaml"
    spec.write_text("name: lab\nprofile: offline\n")
    cli = [str(Path(sys.executable).parent / "clusterctl"), "-s", str(spec), "render"]
    first = subprocess.run(cli, capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert first.returncode == 0, first.stderr
    out = tmp_path / "compose" / "lab"
    (out / ENV_FILE).write_text((out / ENV_FILE).read_text() + USER_LINES)
    before = _snapshot(out)
    for broken in ("name: lab\nprofile: offline\nkafka: {brokers: 99}\n", "name: lab\nprofile: [\n"):
        spec.write_text(broken)
        res = subprocess.run(cli, capture_output=True, text=True, cwd=tmp_path, timeout=120)
        assert res.returncode == 2 and res.stderr.count("error: ") == 1, res.stderr
        assert _snapshot(out) == before
    _no_staging_left(tmp_path)


def test_staging_left_by_a_killed_render_is_removed_by_the_next(tmp_path: Path) -> None:
    out = tmp_path / "out"
    render(parse_spec(CONSOLE), out, validate=False)
    left = out / ".clusterctl-staging-killed"
    left.mkdir(mode=0o700)
    (left / ENV_FILE).write_text("CLUSTERCTL_CONSOLE_TOKEN=" + "0" * 64 + "\n")
    render(parse_spec(CONSOLE), out, validate=False)
    assert not left.exists()
    _no_staging_left(tmp_path)
