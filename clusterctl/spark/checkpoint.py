"""Which job and topics a streaming checkpoint belongs to, checked before Spark starts.

Spark's checkpoint holds the source's offsets (`{"topic": {"partition": offset}}`) and the job's state, not
what produced them: a job started on another job's checkpoint, or one written for other topics, would read
the wrong topics from the wrong offsets and mix its state with theirs. A job restarted on a checkpoint that
is gone would start over from startingOffsets and write every result again. So each checkpoint records its
owner (job, input and output topics, connector) in `clusterctl-job.json`; a run whose owner differs, whose
checkpoint's offsets name other topics, or which asks to resume a checkpoint that is not there, stops with
one line (CheckpointError, exit 8) before anything is read or written.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from clusterctl.errors import CheckpointError

MARKER = "clusterctl-job.json"


@dataclass(frozen=True)
class CheckpointOwner:
    """What a checkpoint was written for."""

    job: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    connector: str

    def describe(self) -> str:
        return f"job {self.job} reading {', '.join(self.inputs) or '-'} writing {', '.join(self.outputs) or '-'}"


def owner_of(name: str, job: Any, options: dict[str, str], connector: str) -> CheckpointOwner:
    """The owner a run of job module `job` with `options` would record."""

    def topics(opts: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(sorted({t.strip() for o in opts for t in options[o].split(",") if t.strip()}))

    return CheckpointOwner(name, topics(job.INPUT_TOPICS), topics(job.OUTPUT_TOPICS), connector)


def _batch_ids(log: Path) -> list[int]:
    return sorted(int(p.name) for p in log.glob("[0-9]*") if p.name.isdigit()) if log.is_dir() else []


def batch_offsets(path: Path, batch_id: int) -> dict[str, dict[str, int]]:
    """The end offsets of batch `batch_id` in the checkpoint's offset log: {topic: {partition: offset}}."""
    entry = path / "offsets" / str(batch_id)
    out: dict[str, dict[str, int]] = {}
    for line in entry.read_text().splitlines()[2:]:  # "v1", the batch metadata, then one offset JSON per source
        try:
            offsets = json.loads(line)
        except ValueError:
            raise CheckpointError(f"checkpoint {path}: unreadable offsets in {entry}") from None
        if isinstance(offsets, dict):
            for topic, parts in offsets.items():
                if isinstance(parts, dict):
                    out.setdefault(str(topic), {}).update({str(p): int(o) for p, o in parts.items()})
    return out


def offset_topics(path: Path) -> set[str] | None:
    """The topics in the checkpoint's latest offset log entry; None when no batch was ever planned."""
    ids = _batch_ids(path / "offsets")
    return set(batch_offsets(path, ids[-1])) if ids else None


def last_committed(path: Path) -> tuple[int, dict[str, dict[str, int]]] | None:
    """The last batch the checkpoint's commit log holds and its end offsets; None before the first commit."""
    ids = _batch_ids(path / "commits")
    return (ids[-1], batch_offsets(path, ids[-1])) if ids else None


def check(path: Path, owner: CheckpointOwner, *, resume: bool) -> None:
    """Refuse a checkpoint that is not this run's (one line, exit 8); nothing is written."""
    present = path.is_dir() and any(path.iterdir())
    if path.exists() and not path.is_dir():
        raise CheckpointError(f"checkpoint {path} is not a directory")
    if not present:
        if resume:
            raise CheckpointError(
                f"no checkpoint to resume at {path} (missing or empty): starting over would write every result again",
                hint="check the path, or run without --resume to start a new checkpoint there",
            )
        return
    marker = path / MARKER
    if marker.is_file():
        try:
            raw = json.loads(marker.read_text())
            connector = str(raw["connector"])
            # the names of earlier releases: python is clusterctl's connector, builtin Spark's own
            connector = {"python": "clusterctl", "builtin": "kafka"}.get(connector, connector)
            recorded = CheckpointOwner(str(raw["job"]), tuple(raw["inputs"]), tuple(raw["outputs"]), connector)
        except (ValueError, KeyError, TypeError):
            raise CheckpointError(f"checkpoint {path}: unreadable {MARKER}") from None
        if recorded != owner:
            raise CheckpointError(
                f"checkpoint {path} belongs to {recorded.describe()} ({recorded.connector} connector), "
                f"not to {owner.describe()} ({owner.connector} connector)",
                hint="give each job and topic set its own --checkpoint",
            )
    found = offset_topics(path)
    if found is not None and not found <= set(owner.inputs):
        raise CheckpointError(
            f"checkpoint {path} holds offsets of {', '.join(sorted(found))}, not of this run's input "
            f"{', '.join(owner.inputs)}",
            hint="give each job and topic set its own --checkpoint",
        )


def record(path: Path, owner: CheckpointOwner) -> None:
    """Write the owner into the checkpoint (created if needed)."""
    path.mkdir(parents=True, exist_ok=True)
    data = {k: list(v) if isinstance(v, tuple) else v for k, v in asdict(owner).items()}
    (path / MARKER).write_text(json.dumps(data, indent=1) + "\n")
