"""The HTML report from a real observed run (tansu broker, drill load, a marker) rendered in headless Chromium."""

from __future__ import annotations

import subprocess
import tempfile
import time
from pathlib import Path

from clusterctl.chaos.load import DrillLoad, verify_drill
from clusterctl.chaos.observer import Observer
from clusterctl.chaos.report import write_reports
from clusterctl.chaos.results import ScenarioResult, StepResult
from clusterctl.kafka.admin import create_topic

CHROMIUM = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--no-first-run"]  # fmt: skip


def test_report_renders_with_timeline_plot(bootstrap: str, unique_name: str, tmp_path: Path) -> None:
    create_topic(bootstrap, unique_name, 3, 1)
    obs = Observer(None, bootstrap, [unique_name], watch_zk=False).start()
    load = DrillLoad(bootstrap, unique_name, tmp_path / "ledger.jsonl", rate=1000).start()
    time.sleep(1.5)
    obs.mark("pause-broker", "broker 1")  # markers only: tansu cannot fail over
    time.sleep(1.0)
    obs.mark("unpause", "broker 1")
    summary = load.stop()
    tl = obs.stop(summary.intervals)
    verdict = verify_drill(bootstrap, summary.ledger)
    assert verdict.ok and verdict.acked == summary.acked > 1000
    assert {(s.topic, s.partition) for s in tl.partitions} == {(unique_name, p) for p in range(3)}
    result = ScenarioResult("report-test", None, "tansu", unique_name, True, tl.started, tl.ended,
                            [StepResult(1, "sleep", "sleep 1", True, tl.started, 1.0)], verify=verdict,
                            load=summary, timeline=tl)  # fmt: skip
    json_path, html_path = write_reports(result, tmp_path / "report")
    assert json_path.is_file()
    with tempfile.TemporaryDirectory() as profile:
        dom = subprocess.run([*CHROMIUM, f"--user-data-dir={profile}", "--dump-dom", html_path.as_uri()],
                             capture_output=True, text=True, timeout=90)  # fmt: skip
        shot = tmp_path / "report.png"
        subprocess.run([*CHROMIUM, f"--user-data-dir={profile}", "--window-size=1200,1400", f"--screenshot={shot}",
                        html_path.as_uri()], capture_output=True, timeout=90, cwd=tmp_path)  # fmt: skip
    assert dom.returncode == 0
    assert "Scenario report-test" in dom.stdout and "PASS" in dom.stdout
    assert '<div class="plot" id="timeline"><svg' in dom.stdout
    assert "pause-broker broker 1" in dom.stdout  # the fault marker's label in the SVG
    assert shot.stat().st_size > 20_000  # a real page, not a blank screenshot
