"""Writing a cleaned segment and swapping it in for the segments it replaces (Kafka's LocalLog.replaceSegments).

The protocol, in steps a crash may interrupt anywhere (log_loader.finish_swaps recovers each):

    CLEANED  `<base>.log.cleaned`, `.index.cleaned`, `.timeindex.cleaned`, `.txnindex.cleaned` written and
             fsynced.  A crash here: recovery deletes the `.cleaned` files, the old segments are intact.
    SWAP     the indexes renamed `.cleaned` -> `.swap`, then the log (the commit point), directory fsynced.
             From here recovery completes the swap: it deletes every old segment whose base lies in the
             swap segment's offset range and renames the `.swap` files to their final names.
    DELETED  the old segments' files renamed to `.deleted` (unlinked at once or after file.delete.delay.ms;
             recovery deletes `.deleted` files) and removed from the log's segment list.
    DONE     the `.swap` files renamed to their final names, directory fsynced; the new segment is in the
             log's segment list.

Readers: a fetch holds the old segment's descriptor (the handle cache detaches it, FileRecords holds a dup),
and POSIX keeps an unlinked file's bytes readable through open descriptors, so a fetch in flight finishes
on the old file; the next fetch finds the new segment (same offsets, fewer batches).
"""

from __future__ import annotations

import enum
import struct
from pathlib import Path

from samsa.kproto.batch import BatchHeader
from samsa.storage.errors import KafkaStorageError
from samsa.storage.file_io import FileIO
from samsa.storage.log import DELETED_SUFFIX, Log
from samsa.storage.segment import LogSegment, segment_stem
from samsa.storage.txn_index import TXN_INDEX_SUFFIX, AbortedTxn

CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
_OFFSET_ENTRY = struct.Struct(">II")
_TIME_ENTRY = struct.Struct(">qI")
_NATIVE_ENTRY = struct.Struct("=qqq")


class LogCleaningAbortedError(Exception):
    """The log changed under the cleaner (truncated, closed, segments deleted): this pass is dropped."""


class SwapStep(enum.IntEnum):
    CLEANED = 1
    SWAP = 2
    DELETED = 3
    DONE = 4


def segment_file_names(base_offset: int) -> tuple[str, str, str, str]:
    """The log, offset index, time index and txn index names of the segment at `base_offset`."""
    stem = segment_stem(base_offset)
    return f"{stem}.log", f"{stem}.index", f"{stem}.timeindex", f"{stem}{TXN_INDEX_SUFFIX}"


class CleanedSegmentWriter:
    """`<base>.*.cleaned`: batches appended in offset order, indexes built like LogSegment.recover builds them."""

    def __init__(self, io: FileIO, directory: Path, base_offset: int, index_interval_bytes: int) -> None:
        self._io = io
        self.directory = directory
        self.base_offset = base_offset
        self._interval = index_interval_bytes
        self.aborted: list[AbortedTxn] = []  # the txn index of the cleaned segment (kept aborted transactions)
        self.source_sizes: list[int] = []  # the size of each segment read, in order (a truncation shows there)
        self.size_bytes = 0
        self.next_offset = base_offset
        self._offset_entries: list[tuple[int, int]] = []
        self._time_entries: list[tuple[int, int]] = []
        self._since_index = 0
        self._max_ts = -1
        self._offset_of_max = base_offset
        self._fd = io.open(self.path(0, CLEANED_SUFFIX), write=True)
        io.ftruncate(self._fd, 0)

    def path(self, which: int, suffix: str = "") -> Path:
        return self.directory / (segment_file_names(self.base_offset)[which] + suffix)

    def append(self, h: BatchHeader, data: bytes) -> None:
        """Append one batch (`h` is the original header: the rewritten batch keeps its offsets)."""
        self._io.pwrite(self._fd, data, self.size_bytes)
        self._indexed(h.last_offset, int.from_bytes(data[35:43], "big", signed=True), len(data))

    def append_batches(self, data: bytes, index: bytes) -> None:
        """Append batches lying back to back in `data`; `index` holds one (last offset, max timestamp, size)
        triple of native int64s per batch (the cleaner's native walk writes them)."""
        self._io.pwrite(self._fd, data, self.size_bytes)
        for last_offset, max_ts, size in _NATIVE_ENTRY.iter_unpack(index):
            self._indexed(last_offset, max_ts, size)

    def _indexed(self, last_offset: int, max_ts: int, size: int) -> None:
        if max_ts > self._max_ts:
            self._max_ts, self._offset_of_max = max_ts, last_offset
        if self._since_index > self._interval:
            self._offset_entries.append((last_offset - self.base_offset, self.size_bytes))
            if not self._time_entries or self._max_ts > self._time_entries[-1][0]:
                self._time_entries.append((self._max_ts, self._offset_of_max - self.base_offset))
            self._since_index = 0
        self._since_index += size
        self.size_bytes += size
        self.next_offset = last_offset + 1

    def finish(self) -> None:
        """Write the indexes and fsync every file (Kafka's onBecomeInactiveSegment + flush)."""
        if self._max_ts >= 0 and (not self._time_entries or self._max_ts > self._time_entries[-1][0]):
            self._time_entries.append((self._max_ts, self._offset_of_max - self.base_offset))
        io = self._io
        io.fsync(self._fd)
        io.close(self._fd)
        self._fd = -1
        contents = (
            (1, b"".join(_OFFSET_ENTRY.pack(*e) for e in self._offset_entries)),
            (2, b"".join(_TIME_ENTRY.pack(*e) for e in self._time_entries)),
            (3, b"".join(t.encode() for t in self.aborted)),
        )
        for which, data in contents:
            if which == 3 and not data:
                continue
            fd = io.open(self.path(which, CLEANED_SUFFIX), write=True)
            try:
                io.ftruncate(fd, 0)
                if data:
                    io.pwrite(fd, data, 0)
                io.fsync(fd)
            finally:
                io.close(fd)
        # the .cleaned names made durable here, off the event loop: the swap's own directory fsyncs, which
        # run on the loop, then commit only its renames
        io.fsync_dir(self.directory)

    def discard(self) -> None:
        if self._fd >= 0:
            self._io.close(self._fd)
            self._fd = -1
        for which in range(4):
            self._io.unlink(self.path(which, CLEANED_SUFFIX))


def replace_segments(log: Log, cleaned: CleanedSegmentWriter, old: list[LogSegment], *, now_ms: int,
                     stop_after: SwapStep | None = None, sync_done: bool = True) -> LogSegment | None:
    """Swap `cleaned` in for `old` (consecutive segments of `log`, the first with cleaned's base offset).

    Meant for the thread that owns the log (the event loop).  Returns the new segment, or None when
    `stop_after` stopped the protocol early (crash tests: then the log object is to be dropped, not used).
    `sync_done=False` leaves the last directory fsync (after DONE's renames) to the caller, who may run it
    off the event loop: a crash before it finds `.swap` files and completes the swap, as after SWAP.
    """
    io = log._io
    directory = log.directory
    segs = log._segments
    try:
        i = next(k for k, s in enumerate(segs) if s is old[0])
    except StopIteration:
        i = -1
    # Kafka aborts a cleaning when the log is truncated or segments are deleted under it; here the swap
    # checks that the very segments read, at the sizes read, are still there
    if (i < 0 or segs[i : i + len(old)] != old or i + len(old) >= len(segs) or log.closed
            or [s.size_bytes for s in old] != cleaned.source_sizes):
        cleaned.discard()
        raise LogCleaningAbortedError(f"{directory.name}: segments changed during cleaning")
    if stop_after == SwapStep.CLEANED:
        return None
    try:
        # SWAP: indexes first, the log last: a `.log.swap` is the commit point
        for which in (1, 2, 3, 0):
            src = cleaned.path(which, CLEANED_SUFFIX)
            if which == 0 or io.size(src) >= 0:
                io.rename(src, cleaned.path(which, SWAP_SUFFIX))
        io.fsync_dir(directory)
        if stop_after == SwapStep.SWAP:
            return None
        # DELETED: the old segments leave the directory and the segment list
        log._read_hint = None
        del segs[i : i + len(old)]
        del log._bases[i : i + len(old)]
        for seg in old:
            txn = directory / segment_file_names(seg.base_offset)[3]
            if io.size(txn) >= 0:
                io.rename(txn, txn.with_name(txn.name + DELETED_SUFFIX))
                io.unlink(txn.with_name(txn.name + DELETED_SUFFIX))
        log._delete_segment_files(old, now_ms=now_ms)
        io.fsync_dir(directory)
        if stop_after == SwapStep.DELETED:
            return None
        # DONE
        for which in (1, 2, 3, 0):
            src = cleaned.path(which, SWAP_SUFFIX)
            if io.size(src) >= 0:
                io.rename(src, cleaned.path(which))
        if sync_done:
            io.fsync_dir(directory)
    except OSError as e:
        log._go_offline(f"swapping in cleaned segment {cleaned.path(0)} failed: {e}")
        raise KafkaStorageError(f"cleaner swap in {directory} failed: {e}") from e
    seg = LogSegment(directory, cleaned.base_offset, log._cache, log.config, created_ms=old[0].created_ms,
                     size_bytes=cleaned.size_bytes)
    seg.load_tail()
    segs.insert(i, seg)
    log._bases.insert(i, seg.base_offset)
    return seg
