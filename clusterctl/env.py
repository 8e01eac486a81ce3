"""Names a user sets from outside (environment variables, default paths), in a module with no imports worth the
name: the CLI reads these while it builds its options, before any command imports what it needs."""

from __future__ import annotations

from pathlib import Path

DEFAULT_SPEC_PATH = Path("clusterctl.yaml")
SPEC_ENV = "CLUSTERCTL_SPEC"
KAFKA_DIST_ENV = "CLUSTERCTL_KAFKA_DIST"
