"""The state file of a long, resumable command (`migrate kraft`, `upgrade`) beside the spec: versioned JSON,
written atomically, refused in one line when it cannot be read or is not one this clusterctl wrote (never
replaced: it records what was done to a cluster)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any, TypeVar

from clusterctl.errors import ClusterctlError

T = TypeVar("T")


def read_state(
    path: Path, version: int, build: Callable[[dict[str, Any]], T], refuse: type[ClusterctlError], what: str
) -> T | None:
    """`build(fields)` of the state at `path` (its version checked and removed), or None when there is none;
    `refuse` (one line) when it cannot be read or `build` rejects it. `what` names it: "migration", "upgrade"."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise refuse(f"{path}: cannot read the {what} state ({exc})") from None
    article = "an" if what[:1] in "aeiou" else "a"
    try:
        if data.pop("version") != version:
            raise ValueError("another state version")
        return build(data)
    except (KeyError, TypeError, ValueError, AttributeError, ClusterctlError) as exc:
        raise refuse(f"{path}: not {article} {what} state file this clusterctl wrote ({exc})") from None


def write_state(path: Path, version: int, state: Any) -> None:
    """Write the dataclass `state` atomically (a crash leaves the old or the new one, never half)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"version": version, **asdict(state)}, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
