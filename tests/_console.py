"""Helpers for console tests: the real `clusterctl ui` process and Debian's chromium driven by Playwright."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from _dataplane import CLUSTERCTL

from clusterctl.testing.tansu import free_port, wait_for_port

REPO = Path(__file__).resolve().parent.parent
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip
SCREENSHOTS_ENV = "CLUSTERCTL_SCREENSHOTS"  # a directory (docs/console) to copy the pages' screenshots into


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium (the system's, never a downloaded build) through Playwright."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


@contextlib.contextmanager
def console(
    *args: str, env: dict[str, str] | None = None, cwd: Path | None = None, output: Path | None = None
) -> Iterator[str]:
    """`clusterctl ui ARGS --port <free>` until the block ends; yields its base URL (stdout+stderr kept in `output`)."""
    port = free_port()
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("CLUSTERCTL_")} | (env or {})
    # stderr to a file, not a pipe nobody reads: a full pipe would block the console mid-request
    with output.open("w+", encoding="utf-8") if output else tempfile.TemporaryFile(mode="w+", encoding="utf-8") as log:
        proc = subprocess.Popen(
            [str(CLUSTERCTL), "ui", *args, "--port", str(port)],
            stdout=log if output else subprocess.DEVNULL,
            stderr=log,
            text=True,
            env=full_env,
            cwd=cwd,
        )
        try:
            try:
                wait_for_port("127.0.0.1", port, 30)
            except Exception:
                proc.kill()
                proc.wait(timeout=10)
                log.seek(0)
                raise AssertionError(f"clusterctl ui did not start: {log.read()[-2000:]}") from None
            try:
                yield f"http://127.0.0.1:{port}"
            except BaseException:
                log.seek(0)
                sys.stderr.write(f"--- clusterctl ui stderr ---\n{log.read()[-4000:]}\n")  # shown with the failure
                raise
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)


def screenshot(page: Any, tmp_path: Path, name: str, full_page: bool = True) -> Path:
    """A screenshot (the full page, or the viewport for a long one); also copied to $CLUSTERCTL_SCREENSHOTS
    (docs/console) when set."""
    shot = tmp_path / f"{name}.png"
    page.screenshot(path=str(shot), full_page=full_page)
    assert shot.stat().st_size > 10_000, f"{name}: blank screenshot?"
    target = os.environ.get(SCREENSHOTS_ENV)
    if target:
        dest = Path(target) if Path(target).is_absolute() else REPO / target
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy2(shot, dest / shot.name)
    return shot


def cells(page: Any, selector: str) -> list[str]:
    return [t.strip() for t in page.locator(selector).all_inner_texts()]
