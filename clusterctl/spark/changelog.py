"""A keyed aggregate's output topic read as a changelog: the newest batch's value per key.

An update-mode job (word_count, key_counts) writes, in each micro-batch, one record per key it saw with the
key's new running total, and every record carries the batch id in the `clusterctl.batch` header. A batch
replayed after a driver restart or a task retry writes the same `(key, batch, total)` again; a lost executor
still writing an older batch late would write an older total after a newer one. So the reader keeps, per key,
the record with the highest batch id (the latest offset among equal ones), not simply the last record:
that view is what a compacted topic or a table upsert keyed on (key, batch) converges to.

No PySpark here: the drill's verifier reads outputs with this module in the scenario runner's process.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

BATCH_HEADER = "clusterctl.batch"


@dataclass(frozen=True)
class ChangeRecord:
    """One record of a topic as read back: where it is, its key and value, and its batch id (header)."""

    partition: int
    offset: int
    key: str | None
    value: str | None
    batch: int | None = None


@dataclass
class Compacted:
    """The newest value per key of a changelog, and what the log held besides."""

    values: dict[str, str | None] = field(default_factory=dict)
    batches: dict[str, int] = field(default_factory=dict)
    records: int = 0
    #: records with the same key and batch id as an earlier one: a replayed batch's re-writes
    rewritten: int = 0
    #: records without a batch id (written by an older sink, or by something else)
    unbatched: int = 0
    #: records older (lower batch id) than a record of their key already read: a late writer's, ignored
    stale: int = 0

    @property
    def last_batch(self) -> int | None:
        return max(self.batches.values()) if self.batches else None


def batch_of(headers: Iterable[tuple[str, bytes | None]] | None) -> int | None:
    """The batch id in a record's headers (the last `clusterctl.batch` one), or None."""
    found = None
    for name, raw in headers or ():
        if name == BATCH_HEADER and raw is not None:
            text = raw.decode("ascii", "replace")
            found = int(text) if text.isdigit() else None
    return found


def compact(records: Iterable[ChangeRecord], *, by_batch: bool = True) -> Compacted:
    """Per key, the value of the highest batch id (ties: the later record); `by_batch=False` keeps the last
    record per key whatever its batch (what a plain compacted topic shows)."""
    out = Compacted()
    seen: set[tuple[str, int]] = set()
    for r in sorted(records, key=lambda r: (r.partition, r.offset)):
        out.records += 1
        key = "" if r.key is None else r.key
        if r.batch is None:
            out.unbatched += 1
        elif (key, r.batch) in seen:
            out.rewritten += 1
        else:
            seen.add((key, r.batch))
        batch = -1 if r.batch is None else r.batch
        if by_batch and key in out.batches and batch < out.batches[key]:
            out.stale += 1
            continue
        out.values[key] = r.value
        out.batches[key] = batch
    return out


def read_topic(bootstrap: str, topic: str, timeout: float = 120.0) -> list[ChangeRecord]:
    """Every record of `topic` from the beginning up to the end offsets taken now, with batch ids."""
    from clusterctl.kafka.readback import read_to_end

    return read_to_end(bootstrap, topic, _change_record, timeout)


def _change_record(msg: Any) -> ChangeRecord:
    key, value = msg.key(), msg.value()
    return ChangeRecord(
        msg.partition(),
        msg.offset(),
        None if key is None else key.decode("utf-8", "replace"),
        None if value is None else value.decode("utf-8", "replace"),
        batch_of(msg.headers()),
    )
