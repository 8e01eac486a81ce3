"""The Prometheus JMX exporter java agent (monitoring.enabled), resolved with Maven like Kafka's own artifacts.

`ensure_agent(version)` copies io.prometheus.jmx:jmx_prometheus_javaagent:<version> from the user's Maven
repository (~/.m2, filled from Maven Central once) to the path the compose file bind-mounts
(`spec.monitoring.agent_jar`); a second call finds it there and runs nothing.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path

from clusterctl.errors import ClusterctlError
from clusterctl.spec.monitoring import agent_jar

ARTIFACT = "io.prometheus.jmx:jmx_prometheus_javaagent"


def ensure_agent(version: str) -> Path:
    """The agent jar of `version`, fetched with Maven (online, then offline from ~/.m2) when not there yet."""
    target = agent_jar(version)
    if target.is_file():
        return target
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ClusterctlError(
            "Maven (mvn) not found: the JMX exporter agent comes from Maven Central",
            hint="apt-get install maven (scripts/setup.sh does)",
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    last_error = "?"
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        base = [mvn, "-B", "-q", "dependency:copy", f"-Dartifact={ARTIFACT}:{version}", f"-DoutputDirectory={tmp}"]
        for extra in ([], ["-o"]):
            proc = subprocess.run([*base, *extra], capture_output=True, text=True, check=False)
            copied = Path(tmp) / target.name
            if proc.returncode == 0 and copied.is_file():
                copied.replace(target)  # same directory: the jar appears whole or not at all
                return target
            errors = [ln.removeprefix("[ERROR]").strip() for ln in proc.stdout.splitlines() if ln.startswith("[ERROR]")]
            last_error = errors[0] if errors else last_error
    raise ClusterctlError(
        f"Maven could not resolve {ARTIFACT}:{version}: {last_error[:200]}",
        hint="Maven Central (or the mirror in ~/.m2/settings.xml) must be reachable once; set "
        "monitoring.exporter_version to a version it serves",
    )
