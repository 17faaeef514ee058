"""Sparse segment indexes in Kafka's file formats: `.index` (OffsetIndex) and `.timeindex` (TimeIndex).

OffsetIndex entries are (relative offset u32, position u32); TimeIndex entries are (timestamp i64,
relative offset u32), big-endian, like Kafka.  Unlike Kafka the files are not preallocated: the file
holds exactly the written entries, so a cold index costs no memory and one fd only while in use.
Entries the active segment adds are kept in a short in-memory tail and written in groups (indexes are
derived data; recovery rebuilds them for everything above the recovery point).  Lookups binary-search
with pread, so nothing of a cold index lives in memory.
"""

from __future__ import annotations

import struct
from itertools import starmap
from pathlib import Path

from samsa.storage.handle_cache import HandleCache

PENDING_FLUSH_COUNT = 256


class SparseIndex:
    ENTRY = struct.Struct(">II")

    __slots__ = ("_cache", "_disk_count", "_last", "base_offset", "max_entries", "path", "pending")

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int, cache: HandleCache) -> None:
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_bytes // self.ENTRY.size)
        self._cache = cache
        self._disk_count: int | None = None  # entries in the file; None until first needed
        # entries not written yet, after the file's; the owning segment may append to this list directly
        # (then calling flush_pending() once it holds PENDING_FLUSH_COUNT), everything else goes through
        # the methods.  The list object is never replaced.
        self.pending: list[tuple[int, int]] = []
        self._last: tuple[int, int] | None = None  # cached last entry of the file

    # -- size ---------------------------------------------------------------------------------------------

    def _disk(self) -> int:
        if self._disk_count is None:
            size = self._cache.file_io.size(self.path)
            self._disk_count = max(0, size) // self.ENTRY.size
        return self._disk_count

    def __len__(self) -> int:
        return self._disk() + len(self.pending)

    def file_is_sane(self) -> bool:
        """Kafka's sanityCheck: the size is a whole number of entries (missing counts as not sane)."""
        size = self._cache.file_io.size(self.path)
        if size < 0 or size % self.ENTRY.size:
            return False
        self._disk_count = size // self.ENTRY.size
        self.pending.clear()
        self._last = None
        return True

    # -- entries ------------------------------------------------------------------------------------------

    def entry(self, i: int) -> tuple[int, int]:
        disk = self._disk()
        if i >= disk:
            return self.pending[i - disk]
        fd = self._cache.get(self.path)
        raw = self._cache.file_io.pread(fd, self.ENTRY.size, i * self.ENTRY.size)
        if len(raw) < self.ENTRY.size:
            raise ValueError(f"index {self.path} shorter than expected")
        a, b = self.ENTRY.unpack(raw)
        return int(a), int(b)

    def search_window(self, field: int, target: int, lo: int, count: int) -> tuple[int, tuple[int, int] | None]:
        """The last entry among lo .. lo+count-1 whose `field` is <= target: (index, entry), or (lo - 1, None).

        One pread for the part of the window on disk, then a binary search in that buffer.
        """
        disk = self._disk()
        hi = min(lo + count, disk + len(self.pending))
        size = self.ENTRY.size
        best: tuple[int, tuple[int, int] | None] = (lo - 1, None)
        if lo < min(hi, disk):
            raw = self._cache.file_io.pread(self._cache.get(self.path), (min(hi, disk) - lo) * size, lo * size)
            a, b = 0, len(raw) // size - 1
            while a <= b:
                m = (a + b) // 2
                entry = self.ENTRY.unpack_from(raw, m * size)
                if entry[field] <= target:
                    best = (lo + m, (int(entry[0]), int(entry[1])))
                    a = m + 1
                else:
                    b = m - 1
            if best[0] < lo + len(raw) // size - 1 or hi <= disk:
                return best
        start = max(lo, disk)
        pending = self.pending
        a, b = start - disk, hi - disk - 1
        while a <= b:
            m = (a + b) // 2
            if pending[m][field] <= target:
                best = (disk + m, pending[m])
                a = m + 1
            else:
                b = m - 1
        return best

    def read_range(self, i: int, count: int) -> list[tuple[int, int]]:
        """Entries i .. i+count-1 (fewer at the end), with one pread for the part on disk."""
        disk = self._disk()
        out: list[tuple[int, int]] = []
        if i < disk and count > 0:
            n = min(count, disk - i)
            raw = self._cache.file_io.pread(self._cache.get(self.path), n * self.ENTRY.size, i * self.ENTRY.size)
            whole = len(raw) - len(raw) % self.ENTRY.size
            out = [(int(a), int(b)) for a, b in self.ENTRY.iter_unpack(raw[:whole])]
        if len(out) < count and self.pending:
            first = max(0, i + len(out) - disk)
            out.extend(self.pending[first : first + count - len(out)])
        return out

    def last_entry(self) -> tuple[int, int] | None:
        if self.pending:
            return self.pending[-1]
        if self._last is None:
            n = self._disk()
            if n:
                self._last = self.entry(n - 1)
        return self._last

    def append_raw(self, a: int, b: int) -> None:
        self.pending.append((a, b))
        if len(self.pending) >= PENDING_FLUSH_COUNT:
            self.flush_pending()

    def flush_pending(self) -> None:
        if not self.pending:
            return
        disk = self._disk()
        data = b"".join(starmap(self.ENTRY.pack, self.pending))
        fd = self._cache.get(self.path, write=True)
        self._cache.file_io.pwrite(fd, data, disk * self.ENTRY.size)
        self._disk_count = disk + len(self.pending)
        self._last = self.pending[-1]
        self.pending.clear()

    def search(self, field: int, target: int) -> int:
        """Index of the last entry whose `field` is <= target (fields are monotonic), -1 if none."""
        lo, hi = 0, len(self) - 1
        found = -1
        while lo <= hi:
            mid = (lo + hi) // 2
            if self.entry(mid)[field] <= target:
                found = mid
                lo = mid + 1
            else:
                hi = mid - 1
        return found

    def truncate_entries(self, count: int) -> None:
        disk = self._disk()
        if count >= disk:
            del self.pending[count - disk :]
        else:
            self.pending.clear()
            fd = self._cache.get(self.path, write=True)
            self._cache.file_io.ftruncate(fd, count * self.ENTRY.size)
            self._disk_count = count
        self._last = None

    def rewrite(self, entries: list[tuple[int, int]]) -> None:
        """Replace the whole file (used when rebuilding from the log)."""
        self.pending.clear()
        data = b"".join(self.ENTRY.pack(a, b) for a, b in entries)
        fd = self._cache.get(self.path, write=True)
        self._cache.file_io.ftruncate(fd, 0)
        if data:
            self._cache.file_io.pwrite(fd, data, 0)
        self._disk_count = len(entries)
        self._last = entries[-1] if entries else None

    def forget(self) -> None:
        """Drop cached state (after the file is renamed or deleted)."""
        self._disk_count = None
        self._last = None


class OffsetIndex(SparseIndex):
    """Entries (offset - base_offset, position of the batch whose last offset that is)."""

    ENTRY = struct.Struct(">II")
    __slots__ = ()

    def append(self, offset: int, position: int) -> None:
        self.append_raw(offset - self.base_offset, position)

    def lookup(self, target_offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry with offset <= target, else (base_offset, 0)."""
        i = self.search(0, target_offset - self.base_offset)
        if i < 0:
            return self.base_offset, 0
        rel, position = self.entry(i)
        return self.base_offset + rel, position

    def truncate_to(self, offset: int) -> None:
        """Remove entries with offset >= `offset`."""
        self.truncate_entries(self.search(0, offset - self.base_offset - 1) + 1)


class TimeIndex(SparseIndex):
    """Entries (max timestamp so far, offset - base_offset of the batch holding it)."""

    ENTRY = struct.Struct(">qI")
    __slots__ = ()

    def maybe_append(self, timestamp_ms: int, offset: int) -> None:
        last = self.last_entry()
        if last is None or timestamp_ms > last[0]:
            self.append_raw(timestamp_ms, offset - self.base_offset)

    def lookup(self, timestamp_ms: int) -> tuple[int, int]:
        """(timestamp, offset) of the last entry with timestamp <= target, else (-1, base_offset)."""
        i = self.search(0, timestamp_ms)
        if i < 0:
            return -1, self.base_offset
        ts, rel = self.entry(i)
        return ts, self.base_offset + rel

    def truncate_to(self, offset: int) -> None:
        """Remove entries whose offset is >= `offset` (offsets are monotonic in the time index too)."""
        rel = offset - self.base_offset
        lo, hi, keep = 0, len(self) - 1, 0
        while lo <= hi:
            mid = (lo + hi) // 2
            if self.entry(mid)[1] < rel:
                keep = mid + 1
                lo = mid + 1
            else:
                hi = mid - 1
        self.truncate_entries(keep)
