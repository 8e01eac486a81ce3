"""The Jinja2 environment of the text templates (compose file, spec file): strict, no autoescape, whitespace kept."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import jinja2


def text_environment(templates_dir: Path, filters: dict[str, Callable[..., Any]]) -> jinja2.Environment:
    """An environment whose templates fail on an undefined name and keep their newlines as written."""
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(templates_dir)),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters.update(filters)
    return env
