"""Run the real `clusterctl` console script (as a user would) for data-plane tests."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

CLUSTERCTL = Path(sys.executable).parent / "clusterctl"


def run(*args: str, stdin: str | None = None, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "CLUSTERCTL_BOOTSTRAP_SERVER"}
    env["COLUMNS"] = "200"
    return subprocess.run(
        [str(CLUSTERCTL), *args], input=stdin, capture_output=True, text=True, timeout=timeout, env=env
    )
