"""How render touches the disk: the keys it owns in .env, a private staging directory, all-or-nothing moves.

Every file is first written into a 0700 staging directory inside the target directory (it holds the
console token, so never in /tmp), checked there, and only then renamed into place one by one. A failure
or an interrupt at any point, even halfway through the renames, puts back what was there before and
removes the staging directory. In .env only the keys render owns are set; every other line stays.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from clusterctl.errors import ClusterctlError

ENV_FILE = ".env"
STAGING_PREFIX = ".clusterctl-staging-"
_ASSIGNMENT = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=")


class RenderError(ClusterctlError):
    """The rendered output could not be produced, was rejected or could not be written; nothing was changed."""


class OutputPathError(RenderError):
    """The output location is unusable (not a directory, not ours, unreadable, unwritable): bad input, as for `init -o`."""

    exit_code = 2


def read_env(out_dir: Path) -> str | None:
    """The existing .env text (None when absent); one that cannot be read is refused, never overwritten."""
    path = out_dir / ENV_FILE
    try:
        if not stat.S_ISREG(path.lstat().st_mode):
            raise OutputPathError(f"{path} is not a regular file; render writes only its own files")
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise OutputPathError(f"{path} is not UTF-8 text; render will not rewrite it") from None
    except OSError as exc:
        raise OutputPathError(f"cannot read {path}: {exc.strerror or exc}") from None


def merge_env(existing: str | None, values: dict[str, tuple[str, str]]) -> str | None:
    """`existing` with each owned KEY set to its value (in place, duplicates dropped); missing keys are
    appended under their comment. Every other line is kept as it is. `values`: KEY -> (value, comment)."""
    if existing is None and not values:
        return None
    lines = (existing or "").splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    out, placed = [], set()
    for line in lines:
        m = _ASSIGNMENT.match(line)
        key = m.group(1) if m else None
        if key in values:
            if key not in placed:
                out.append(f"{key}={values[key][0]}\n")
                placed.add(key)
            continue
        out.append(line)
    for key, (value, comment) in values.items():
        if key not in placed:
            out.append(f"# {comment}\n{key}={value}\n")
    return "".join(out)


def _refuse_foreign(out_dir: Path, names: Iterable[str]) -> None:
    """A target that is a directory, a symlink or a device is not render's to replace."""
    for name in names:
        with contextlib.suppress(FileNotFoundError):
            if not stat.S_ISREG((out_dir / name).lstat().st_mode):
                raise OutputPathError(f"{out_dir / name} is not a regular file; render writes only its own files")


def _write_new(path: Path, text: str, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.chmod(path, mode)  # umask must not widen or narrow what we asked for


def _keep_copy(target: Path, backup: Path) -> None:
    try:
        os.link(target, backup)
    except OSError:
        shutil.copy2(target, backup)


def _commit(staging: Path, out_dir: Path, names: list[str], remove: list[str]) -> None:
    """Rename each staged file over its target and drop `remove`; on any failure put every old file back."""
    backup = staging / "previous"
    backup.mkdir()
    done: list[tuple[str, bool]] = []  # (name, an old file was there)
    try:
        for name in names:
            target = out_dir / name
            had = target.exists()
            if had:
                _keep_copy(target, backup / name)
            done.append((name, had))
            os.replace(staging / name, target)
        for name in remove:
            target = out_dir / name
            if target.is_file():
                done.append((name, True))
                os.replace(target, backup / name)
    except BaseException:
        for name, had in reversed(done):
            with contextlib.suppress(OSError):
                if had:
                    os.replace(backup / name, out_dir / name)
                else:
                    (out_dir / name).unlink(missing_ok=True)
        raise


def _sweep_leftovers(out_dir: Path) -> None:
    """Staging directories a killed render (SIGKILL, power loss) left behind: they may hold a secret."""
    with contextlib.suppress(OSError):
        for p in out_dir.glob(f"{STAGING_PREFIX}*"):
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)


def write_all(
    out_dir: Path, files: dict[str, tuple[str, int]], remove: list[str], check: Callable[[Path], bool]
) -> bool:
    """Stage `files` (name -> (text, mode)), let `check(staging)` judge them, then move them into `out_dir`
    and drop `remove`. All or nothing; directories this call created are removed again on failure."""
    _refuse_foreign(out_dir, [*files, *remove])
    _sweep_leftovers(out_dir)
    created = [p for p in [out_dir, *out_dir.parents] if not p.exists()]  # innermost first
    staging: Path | None = None
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=STAGING_PREFIX, dir=out_dir))  # mode 0700
        for name, (text, mode) in files.items():
            _write_new(staging / name, text, mode)
        checked = check(staging)
        _commit(staging, out_dir, list(files), remove)
        return checked
    except BaseException as exc:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
            staging = None
        for p in created:
            with contextlib.suppress(OSError):
                p.rmdir()
        if isinstance(exc, OSError):
            raise OutputPathError(f"cannot write to {out_dir}: {exc.strerror or exc}") from None
        raise
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)
