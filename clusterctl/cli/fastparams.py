"""Option values without pydantic: plain scalars converted directly, everything else left to typer.

typer (0.2x) converts every option value through a pydantic TypeAdapter. Importing pydantic and building
one adapter per option costs 0.1-0.2 s on each run, as much as the rest of `clusterctl topic list` together
(bench/cli_startup.py). Here str, int, float, bool and Path values, alone or in lists, in their canonical
spelling, are converted as typer would convert them; any other type, any option with constraints (min/max,
a custom parser, choices) and any value not in canonical form (e.g. ` 12`, `1e3` for an int, `inf`) goes to
typer's own pydantic path, so results and error messages stay typer's. If typer's internals move, `install`
leaves typer alone.
"""

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args, get_origin

_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?")
_SCALARS = (str, bool, int, float, Path)
_MISS = object()  # not a canonical value: typer converts it
_installed = False


def _handled(annotation: Any, info: Any) -> bool:
    """Whether values of this type, with these option settings, are converted here."""
    if annotation not in _SCALARS or info.parser is not None or getattr(info, "click_type", None) is not None:
        return False
    if annotation in (int, float) and (info.min is not None or info.max is not None or info.clamp):
        return False
    return not (annotation is Path and info.path_type is not None)


def _convert(kind: type, v: Any) -> Any:
    if kind is str or kind is bool:
        return v if isinstance(v, kind) else _MISS
    if kind is int:
        if type(v) is int:
            return v
        return int(v) if isinstance(v, str) and _INT.fullmatch(v) else _MISS
    if kind is float:
        if type(v) in (int, float):
            return float(v)
        return float(v) if isinstance(v, str) and _FLOAT.fullmatch(v) else _MISS
    return Path(v) if isinstance(v, str | Path) else _MISS


def install() -> None:
    """Route plain-scalar options of every typer command past pydantic (idempotent)."""
    global _installed
    if _installed:
        return
    try:
        import typer.core as core
        from typer._coercion import RuntimeParam
        from typer._param_types import coerce_cli_path
    except ImportError:
        return
    typer_build: Any = getattr(core, "build_runtime_param", None)
    if typer_build is None or not hasattr(core._TyperParameter, "get_runtime_param"):
        return

    @dataclass(frozen=True)
    class ScalarRuntimeParam(RuntimeParam):
        """Converts canonical values directly; hands anything else to typer's pydantic converter."""

        descriptor: Any
        kind: type
        many: bool

        def _coerce_value(self, value: Any, param: Any, ctx: Any) -> Any:
            items = list(value) if self.many and isinstance(value, list | tuple) else [value]
            done = [_convert(self.kind, v) for v in items]
            if any(d is _MISS for d in done):
                return typer_build(self.descriptor)._coerce_value(value, param=param, ctx=ctx)
            if self.kind is Path:  # typer's own checks (exists, readable, ...) on a value that is already a Path
                info = self.parameter_info
                done = [coerce_cli_path(d, info, path_type=Path, param=param, ctx=ctx) for d in done]
            return done if self.many else done[0]

    def build(descriptor: Any) -> Any:
        annotation, many = descriptor.annotation, False
        if get_origin(annotation) is list and len(get_args(annotation)) == 1:
            annotation, many = get_args(annotation)[0], True
        if (
            descriptor.file_annotation is None
            and not descriptor.is_choice
            and _handled(annotation, descriptor.parameter_info)
        ):
            info = descriptor.parameter_info
            return ScalarRuntimeParam(info, descriptor.annotation, descriptor, annotation, many)
        return typer_build(descriptor)

    core.build_runtime_param = build
    _installed = True
