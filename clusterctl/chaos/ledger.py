"""The drill ledger: every acknowledged write, and the check that none of them was lost.

File format (JSON Lines, UTF-8), written by `LedgerWriter`, read by `read_ledger`:

    line 1 (header): {"ledger": 1, "topic": "drill", "started": 1718000000.123, ...extra metadata}
    line 2..n:       {"topic": "drill", "partition": 0, "offset": 41, "key": "p0", "value": "seq=17|...",
                      "seq": 17, "ts": 1718000001.5}

One entry line per write the broker ACKNOWLEDGED (delivery report without error, acks=all), in
acknowledgement order. `seq` is unique per drill; `ts` is the epoch time of the acknowledgement.
A record's identity is (key, seq); consumers recover `seq` from the value with `parse_seq`
(values are written by `encode_value` as "seq=<n>|<padding>").

`verify(acked, consumed)` is pure (no Kafka, no I/O), so the Spark verifier can reuse it: it takes
ledger entries and consumed records (anything with topic, partition, offset, key, value) and
reports lost (acked, never consumed: a failure), duplicated (consumed more than once: counted,
allowed), unacked-but-present (consumed but never acknowledged: allowed, e.g. the ack was lost in a
failover), reordered (per partition, acked seqs not increasing in log order: a failure) and acked
records found at a different offset than the ack reported.
"""

from __future__ import annotations

import itertools
import json
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from clusterctl.errors import NotFoundError, VerificationError

LEDGER_VERSION = 1
SAMPLE_LIMIT = 20  # how many examples of each violation a result keeps


@dataclass(frozen=True)
class LedgerEntry:
    """One acknowledged write."""

    topic: str
    partition: int
    offset: int
    key: str
    value: str
    seq: int
    ts: float


@dataclass
class Ledger:
    """A ledger file: its header fields and the acknowledged writes in ack order."""

    topic: str
    started: float
    entries: list[LedgerEntry]
    meta: dict[str, Any] = field(default_factory=dict)

    def ack_times(self) -> dict[tuple[str, int], list[float]]:
        """Per (topic, partition), the sorted times its writes were acknowledged."""
        out: dict[tuple[str, int], list[float]] = defaultdict(list)
        for e in self.entries:
            out[(e.topic, e.partition)].append(e.ts)
        for times in out.values():
            times.sort()
        return dict(out)

    def longest_ack_gap(self) -> tuple[str, int, float] | None:
        """(topic, partition, seconds): the longest wait between two acknowledged writes of one partition."""
        gaps = [
            (topic, partition, max(b - a for a, b in itertools.pairwise(times)))
            for (topic, partition), times in self.ack_times().items()
            if len(times) > 1
        ]
        return max(gaps, key=lambda g: g[2]) if gaps else None


class ConsumedLike(Protocol):
    """What `verify` needs from a consumed record (clients.ConsumedRecord fits, so does a Spark Row)."""

    @property
    def topic(self) -> str: ...
    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def key(self) -> str | None: ...
    @property
    def value(self) -> str | None: ...


def encode_value(seq: int, size: int = 0) -> str:
    """The drill's record value: 'seq=<n>|' padded with 'x' to `size` characters (if larger)."""
    head = f"seq={seq}|"
    return head + "x" * max(0, size - len(head))


def parse_seq(value: str | None) -> int | None:
    """The seq in a drill value, or None when the value is not a drill record."""
    if not value or not value.startswith("seq="):
        return None
    end = value.find("|", 4)
    digits = value[4:] if end < 0 else value[4:end]
    return int(digits) if digits.isdigit() else None


class LedgerWriter:
    """Appends acknowledged writes to a ledger file; use as a context manager."""

    def __init__(self, path: str | Path, topic: str, **meta: Any) -> None:
        self.path = Path(path)
        self.topic = topic
        self.count = 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fh: IO[str] = self.path.open("w", encoding="utf-8")
        header = {"ledger": LEDGER_VERSION, "topic": topic, "started": time.time(), **meta}
        self._fh.write(json.dumps(header, separators=(",", ":")) + "\n")

    def append(self, entry: LedgerEntry) -> None:
        self._fh.write(json.dumps(asdict(entry), separators=(",", ":")) + "\n")
        self.count += 1

    def flush(self) -> None:
        self._fh.flush()

    def close(self) -> None:
        if not self._fh.closed:
            self._fh.close()

    def __enter__(self) -> LedgerWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_ledger(path: str | Path) -> Ledger:
    """Parse a ledger file. A missing file or a malformed line raises a one-line error."""
    p = Path(path)
    if not p.is_file():
        raise NotFoundError(f"ledger {p} does not exist")
    entries: list[LedgerEntry] = []
    header: dict[str, Any] | None = None
    with p.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                if lineno == 1 and "ledger" in obj:
                    header = obj
                    continue
                entries.append(
                    LedgerEntry(
                        topic=str(obj["topic"]),
                        partition=int(obj["partition"]),
                        offset=-1 if obj["offset"] is None else int(obj["offset"]),  # -1: acked, offset unknown
                        key=str(obj["key"]),
                        value=str(obj["value"]),
                        seq=int(obj["seq"]),
                        ts=float(obj["ts"]),
                    )
                )
            except (ValueError, KeyError, TypeError) as exc:
                # A torn last line (the writer was killed mid-write) is not an acknowledged write.
                if not line.endswith("\n"):
                    break
                raise VerificationError(f"ledger {p} line {lineno} is malformed: {exc}") from None
    if header is None:
        raise VerificationError(f"ledger {p} has no header line (expected {{'ledger': {LEDGER_VERSION}, ...}})")
    meta = {k: v for k, v in header.items() if k not in ("ledger", "topic", "started")}
    return Ledger(topic=str(header["topic"]), started=float(header["started"]), entries=entries, meta=meta)


@dataclass(frozen=True)
class Reorder:
    """Acked seq `seq` appears in the log (at `offset`) after a later acked seq `after_seq`."""

    topic: str
    partition: int
    offset: int
    seq: int
    after_seq: int


@dataclass(frozen=True)
class Moved:
    """An acked record found in the log, but not at the offset its acknowledgement reported."""

    topic: str
    partition: int
    seq: int
    acked_offset: int
    found_offset: int


@dataclass
class PartitionVerdict:
    topic: str
    partition: int
    acked: int
    consumed: int
    lost: int
    duplicated: int
    unacked_present: int
    reordered: int
    lost_offsets: str = ""  # the acknowledged offsets that were lost, as ranges: "1200-1530,1533"


@dataclass
class VerifyResult:
    """The outcome of `verify`; `ok` is False on any loss or reorder. Lists hold samples only."""

    ok: bool
    acked: int
    consumed: int
    lost_count: int
    duplicated_count: int
    unacked_present_count: int
    reordered_count: int
    moved_count: int
    foreign_count: int  # consumed records without a drill seq (not ours; ignored)
    lost: list[LedgerEntry]
    duplicated: list[tuple[str, int]]  # (key, seq) consumed more than once
    unacked_present: list[tuple[str, int]]
    reordered: list[Reorder]
    moved: list[Moved]
    partitions: list[PartitionVerdict]
    # a first read back that came up short (end offsets taken right after a failover), before the re-read that
    # this result is: the acknowledged records it missed, and where (e.g. "drill-x-2: 853-2702"); 0 when none
    first_read_missing: int = 0
    first_read_where: str = ""
    # before reading: how long the brokers took to agree on the topic's leaders, and the disagreement seen first
    # (a broker back from a network partition answers from its old metadata for a while); "" when they agreed
    metadata_wait: str = ""

    def summary(self) -> str:
        again = (
            f" (a first read back missed {self.first_read_missing} ({self.first_read_where}); read again, complete)"
            if self.first_read_missing and not self.lost_count
            else ""
        )
        waited = f"; read after {self.metadata_wait}" if self.metadata_wait else ""
        return (
            f"acked {self.acked}, consumed {self.consumed}, lost {self.lost_count}, "
            f"duplicated {self.duplicated_count}, unacked-but-present {self.unacked_present_count}, "
            f"reordered {self.reordered_count}{again}{waited}"
        )

    def raise_on_failure(self) -> None:
        """VerificationError (exit 6) when an acknowledged write was lost or reordered."""
        if self.ok:
            return
        first = (
            f"; first lost: {self.lost[0].topic}-{self.lost[0].partition} seq {self.lost[0].seq}" if self.lost else ""
        )
        raise VerificationError(f"drill verification failed: {self.summary()}{first}")


@dataclass
class _Consumed:
    """What was read back, indexed: copies per record identity (key, seq), where each first sits, per partition."""

    seen: Counter[tuple[str, int]] = field(default_factory=Counter)
    first_at: dict[tuple[str, int], tuple[str, int, int]] = field(default_factory=dict)  # -> (topic, partition, offset)
    by_partition: dict[tuple[str, int], list[tuple[int, tuple[str, int]]]] = field(
        default_factory=lambda: defaultdict(list)
    )
    per_tp: Counter[tuple[str, int]] = field(default_factory=Counter)
    count: int = 0
    foreign: int = 0


def _index(consumed: Iterable[ConsumedLike]) -> _Consumed:
    c = _Consumed()
    for rec in consumed:
        c.count += 1
        seq = parse_seq(rec.value)
        if seq is None:
            c.foreign += 1
            continue
        ident = (rec.key or "", seq)
        tp = (rec.topic, rec.partition)
        c.per_tp[tp] += 1
        c.seen[ident] += 1
        if ident not in c.first_at or rec.offset < c.first_at[ident][2]:
            c.first_at[ident] = (rec.topic, rec.partition, rec.offset)
        c.by_partition[tp].append((rec.offset, ident))
    return c


def _reorders(c: _Consumed, acked_ids: Mapping[tuple[str, int], LedgerEntry]) -> list[Reorder]:
    """Acked records read back with a lower seq than one before them in the same partition."""
    reorders: list[Reorder] = []
    for tp, recs in c.by_partition.items():
        recs.sort()
        high: int | None = None
        counted: set[tuple[str, int]] = set()
        for offset, ident in recs:
            if ident not in acked_ids or ident in counted:
                continue  # only the first copy of an acked record takes part in the order check
            counted.add(ident)
            seq = ident[1]
            if high is not None and seq < high:
                reorders.append(Reorder(tp[0], tp[1], offset, seq, high))
            else:
                high = seq
    return reorders


def _partition_verdicts(
    acked_list: list[LedgerEntry],
    c: _Consumed,
    acked_ids: Mapping[tuple[str, int], LedgerEntry],
    lost: list[LedgerEntry],
    reorders: list[Reorder],
) -> list[PartitionVerdict]:
    lost_per_tp = Counter((e.topic, e.partition) for e in lost)
    acked_per_tp = Counter((e.topic, e.partition) for e in acked_list)
    reorder_per_tp = Counter((r.topic, r.partition) for r in reorders)
    dup_per_tp: Counter[tuple[str, int]] = Counter()
    unacked_per_tp: Counter[tuple[str, int]] = Counter()
    for ident, n in c.seen.items():
        t, p, _ = c.first_at[ident]
        if n > 1:
            dup_per_tp[(t, p)] += n - 1
        if ident not in acked_ids:
            unacked_per_tp[(t, p)] += 1
    return [
        PartitionVerdict(
            topic=t,
            partition=p,
            acked=acked_per_tp[(t, p)],
            consumed=c.per_tp[(t, p)],
            lost=lost_per_tp[(t, p)],
            duplicated=dup_per_tp[(t, p)],
            unacked_present=unacked_per_tp[(t, p)],
            reordered=reorder_per_tp[(t, p)],
            lost_offsets=offset_ranges(sorted(e.offset for e in lost if (e.topic, e.partition) == (t, p))),
        )
        for t, p in sorted(set(acked_per_tp) | set(c.per_tp))
    ]


def verify(acked: Iterable[LedgerEntry], consumed: Iterable[ConsumedLike]) -> VerifyResult:
    """Check acked ⊆ consumed and per-partition order of acked seqs; count duplicates and extras."""
    acked_list = list(acked)
    acked_ids: dict[tuple[str, int], LedgerEntry] = {(e.key, e.seq): e for e in acked_list}
    c = _index(consumed)
    lost = [e for e in acked_list if (e.key, e.seq) not in c.seen]
    dup_ids = sorted(i for i, n in c.seen.items() if n > 1)
    unacked = sorted(i for i in c.seen if i not in acked_ids)
    moved: list[Moved] = []
    for e in acked_list:
        where = c.first_at.get((e.key, e.seq))
        if e.offset >= 0 and where is not None and (where[0], where[1], where[2]) != (e.topic, e.partition, e.offset):
            moved.append(Moved(e.topic, e.partition, e.seq, e.offset, where[2]))
    reorders = _reorders(c, acked_ids)
    return VerifyResult(
        ok=not lost and not reorders,
        acked=len(acked_list),
        consumed=c.count,
        lost_count=len(lost),
        duplicated_count=sum(n - 1 for n in c.seen.values() if n > 1),
        unacked_present_count=len(unacked),
        reordered_count=len(reorders),
        moved_count=len(moved),
        foreign_count=c.foreign,
        lost=lost[:SAMPLE_LIMIT],
        duplicated=dup_ids[:SAMPLE_LIMIT],
        unacked_present=unacked[:SAMPLE_LIMIT],
        reordered=reorders[:SAMPLE_LIMIT],
        moved=moved[:SAMPLE_LIMIT],
        partitions=_partition_verdicts(acked_list, c, acked_ids, lost, reorders),
    )


def offset_ranges(offsets: list[int]) -> str:
    """[3, 4, 5, 9] -> '3-5,9' (sorted input); unknown offsets (-1) are counted at the end."""
    out = []
    known = [o for o in offsets if o >= 0]
    for _, run in itertools.groupby(enumerate(known), key=lambda io: io[1] - io[0]):
        group = [o for _, o in run]
        out.append(f"{group[0]}-{group[-1]}" if len(group) > 1 else str(group[0]))
    if len(known) < len(offsets):
        out.append(f"{len(offsets) - len(known)} acked without an offset")
    return ",".join(out)
