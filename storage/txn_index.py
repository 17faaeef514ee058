"""Aborted transactions of one partition log: Kafka's `.txnindex` files and the last stable offset.

Each abort marker appended to a log adds an entry to the `.txnindex` of the segment that holds the
marker (Kafka's TransactionIndex).  An entry is 34 bytes, big-endian, exactly Kafka's AbortedTxn:

    version i16 = 0 | producer_id i64 | first_offset i64 | last_offset i64 | last_stable_offset i64

first_offset is the transaction's first offset in this partition, last_offset the abort marker's,
last_stable_offset the partition's LSO right after the abort.  A read_committed fetch asks for the
entries that overlap the offsets it returns (`collect_aborted_transactions`), so the client drops those
producers' records until their abort marker.

The last stable offset is the first offset of the earliest transaction still open in the log (the
producer state keeps `current_txn_first_offset`), or the high watermark when none is open.

Entries are written (os.write, page cache) right after the marker is appended; `take_dirty` /
`fsync_files` let the broker fsync them off the event loop soon after (broker/txn's timer).  At
open the tail is rebuilt like Kafka's LogLoader does: from the newest producer-state snapshot at or
below the log end (it holds each producer's open-transaction first offset there), the batch headers
after it are replayed and every ABORT marker found gets its entry again; entries before the snapshot
come from the files, entries of segments that are gone are deleted.
"""

from __future__ import annotations

import bisect
import os
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from samsa.kproto.batch import CorruptBatchError
from samsa.kproto.records import ControlType, decode_batches, decode_control_record
from samsa.storage.producer_state import SNAPSHOT_SUFFIX, CorruptSnapshotError, ProducerStateEntry, ProducerStateManager
from samsa.storage.segment import LogSegment

TXN_INDEX_SUFFIX = ".txnindex"
_ENTRY = struct.Struct(">hqqqq")
ENTRY_BYTES = _ENTRY.size
assert ENTRY_BYTES == 34


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int

    def encode(self) -> bytes:
        return _ENTRY.pack(0, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset)


def txn_index_path(directory: Path, base_offset: int) -> Path:
    return directory / f"{base_offset:020d}{TXN_INDEX_SUFFIX}"


def decode_entries(data: bytes) -> list[AbortedTxn]:
    """Whole entries of a `.txnindex` file (a torn last entry is ignored)."""
    out = []
    for pos in range(0, len(data) - ENTRY_BYTES + 1, ENTRY_BYTES):
        version, pid, first, last, lso = _ENTRY.unpack_from(data, pos)
        if version != 0:
            break
        out.append(AbortedTxn(pid, first, last, lso))
    return out


def _is_abort(batch: bytes) -> bool:
    try:
        for _, records in decode_batches(batch, max_decompressed_bytes=1 << 16):
            return bool(records) and decode_control_record(records[0]).type == ControlType.ABORT
    except CorruptBatchError:
        pass
    return False


def _newest_snapshot(directory: Path, names: list[str], log_end_offset: int) -> tuple[int, dict[int, int]]:
    """(offset, producer id -> first offset of its open transaction) from the newest good snapshot."""
    offsets = sorted((int(n[: -len(SNAPSHOT_SUFFIX)]) for n in names
                      if n.endswith(SNAPSHOT_SUFFIX) and n[: -len(SNAPSHOT_SUFFIX)].isdigit()), reverse=True)
    for offset in offsets:
        if offset > log_end_offset:
            continue
        try:
            data = (directory / f"{offset:020d}{SNAPSHOT_SUFFIX}").read_bytes()
            snap_offset, producers = ProducerStateManager.decode_snapshot(data)
        except (OSError, CorruptSnapshotError):
            continue
        return snap_offset, {pid: e.current_txn_first_offset for pid, e in producers.items()
                             if e.current_txn_first_offset is not None}
    return 0, {}


def fsync_files(paths: Iterable[Path]) -> None:
    """fsync each file through a descriptor of its own (safe next to appends on the event loop)."""
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            continue  # its segment was deleted meanwhile
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def last_stable_offset(producers: Iterable[ProducerStateEntry], high_watermark: int) -> int:
    """The first offset of the earliest open transaction, capped at the high watermark."""
    lso = high_watermark
    for entry in producers:
        first = entry.current_txn_first_offset
        if first is not None and first < lso:
            lso = first
    return lso


class TransactionIndex:
    """All `.txnindex` files of one log directory, keyed by segment base offset."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._bases: list[int] = []
        self._entries: dict[int, list[AbortedTxn]] = {}
        self._dirty: set[int] = set()

    @classmethod
    def open(cls, directory: Path, segments: Sequence[LogSegment], log_end_offset: int) -> TransactionIndex:
        """Load the `.txnindex` files of `segments` and rebuild the entries after the newest snapshot."""
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            names = []
        start, open_first = _newest_snapshot(directory, names, log_end_offset)
        if segments:
            start = max(start, segments[0].base_offset)
        index = cls._load(directory, names, [s.base_offset for s in segments], start)
        index._replay(segments, start, open_first)
        return index

    @classmethod
    def _load(cls, directory: Path, names: list[str], segment_bases: Iterable[int],
              keep_below: int) -> TransactionIndex:
        """The entries of existing files below `keep_below`; files of segments not in `segment_bases` go."""
        index = cls(directory)
        live = set(segment_bases)
        for name in names:
            stem = name[: -len(TXN_INDEX_SUFFIX)]
            if not name.endswith(TXN_INDEX_SUFFIX) or not stem.isdigit():
                continue
            base = int(stem)
            path = directory / name
            if base not in live:
                path.unlink(missing_ok=True)
                continue
            entries = decode_entries(path.read_bytes())
            kept = [e for e in entries if e.last_offset < keep_below]
            if len(kept) != len(entries) or path.stat().st_size != len(entries) * ENTRY_BYTES:
                path.write_bytes(b"".join(e.encode() for e in kept))
            if kept:
                index._entries[base] = kept
                bisect.insort(index._bases, base)
        return index

    def _replay(self, segments: Sequence[LogSegment], start: int, open_first: dict[int, int]) -> None:
        """Kafka's LogLoader for the transaction index: re-derive the entries of ABORT markers at or after `start`."""
        for seg in segments:
            if seg.next_offset <= start:
                continue
            found = seg.translate_offset(start) if seg.base_offset < start else (0, None)
            if found is None:
                continue
            for position, h in seg.iter_headers(found[0]):
                if h.producer_id < 0 or not h.is_transactional or h.last_offset < start:
                    continue
                if not h.is_control:
                    open_first.setdefault(h.producer_id, h.base_offset)
                    continue
                first = open_first.pop(h.producer_id, None)
                if first is not None and _is_abort(seg.read_bytes(position, h.size_bytes)):
                    lso = min(open_first.values(), default=h.last_offset + 1)
                    self.append(seg.base_offset, AbortedTxn(h.producer_id, first, h.last_offset, lso))

    def append(self, segment_base: int, entry: AbortedTxn) -> None:
        if segment_base not in self._entries:
            self._entries[segment_base] = []
            bisect.insort(self._bases, segment_base)
        self._entries[segment_base].append(entry)
        self._dirty.add(segment_base)
        fd = os.open(txn_index_path(self.directory, segment_base), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, entry.encode())
        finally:
            os.close(fd)

    def take_dirty(self) -> list[Path]:
        """Files appended to since the last call (for `fsync_files`, which may run in a worker thread)."""
        dirty, self._dirty = self._dirty, set()
        return [txn_index_path(self.directory, base) for base in sorted(dirty)]

    def collect_aborted_transactions(self, start_offset: int, upper_offset: int) -> list[AbortedTxn]:
        """Aborted transactions overlapping [start_offset, upper_offset) (Kafka's collectAbortedTxns).

        An entry lives with its marker, so every segment from the one holding `start_offset` on is searched.
        """
        out: list[AbortedTxn] = []
        i = max(0, bisect.bisect_right(self._bases, start_offset) - 1)
        for base in self._bases[i:]:
            for e in self._entries[base]:
                if e.last_offset >= start_offset and e.first_offset < upper_offset:
                    out.append(e)
                if e.last_stable_offset >= upper_offset:
                    return out
        return out

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose marker is at or past `offset` (the log was truncated there)."""
        for base in list(self._bases):
            entries = self._entries[base]
            kept = [e for e in entries if e.last_offset < offset]
            if len(kept) != len(entries):
                txn_index_path(self.directory, base).write_bytes(b"".join(e.encode() for e in kept))
                self._entries[base] = kept

    def delete_below(self, segment_base: int) -> None:
        """Segments below `segment_base` were deleted (retention): forget their entries and files."""
        while self._bases and self._bases[0] < segment_base:
            base = self._bases.pop(0)
            del self._entries[base]
            txn_index_path(self.directory, base).unlink(missing_ok=True)
