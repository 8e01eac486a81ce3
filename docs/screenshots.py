"""The tutorials' pictures, taken by `python docs/transcripts.py --env kafka --screenshots` while its cluster runs.

After the page named in SHOTS has run, its pictures are taken with Debian's chromium through Playwright (as the
console tests do, tests/_console.py) and written to docs/tutorials/img/:

- compose-stack.md: the console the spec's kafka_manager service runs (`clusterctl ui --print-url`), its Cluster
  page: ZooKeeper Mode per node, the brokers and the controller.
- drill-report.md: the kill-leader run's report.html (the file the drill wrote), its top.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

IMG = Path(__file__).resolve().parent / "tutorials" / "img"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip


def _shoot(url: str, dest: Path, wait_for: str, height: int = 1000) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": height})
            page.goto(url, wait_until="load", timeout=60_000)
            page.wait_for_selector(wait_for, timeout=60_000)
            page.wait_for_timeout(1500)  # charts and live panels draw after load
            dest.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(dest), full_page=False)
        finally:
            browser.close()
    if dest.stat().st_size < 10_000:
        raise RuntimeError(f"{dest}: blank screenshot?")
    print(f"  picture {dest.relative_to(IMG.parent.parent.parent)}", file=sys.stderr)


def console_cluster(workdir: Path, env: dict[str, str]) -> None:
    url = subprocess.run(
        ["clusterctl", "ui", "--print-url"], cwd=workdir, env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    _shoot(url.rstrip("/") + "/cluster", IMG / "console-cluster.png", "table")


def drill_report(workdir: Path, env: dict[str, str]) -> None:
    report = workdir / "reports" / "kill-leader" / "report.html"
    _shoot(report.as_uri(), IMG / "report-kill-leader.png", "svg", height=1400)


SHOTS = {"compose-stack.md": console_cluster, "drill-report.md": drill_report}


def take(page: Path, workdir: Path, env: dict[str, str]) -> None:
    """The pictures of `page`, when it has any (a failure is reported, and the transcripts go on)."""
    shot = SHOTS.get(page.name)
    if shot is None:
        return
    try:
        shot(workdir, env)
    except Exception as exc:  # a picture is not worth losing the run's transcripts
        print(f"  picture of {page.name} failed: {exc}", file=sys.stderr)
