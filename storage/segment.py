"""One log segment: `<base>.log` with its `.index` and `.timeindex` (Kafka's LogSegment)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

from samsa.kproto.batch import BATCH_HEADER_BYTES, BatchHeader, CorruptBatchError, is_crc_valid, parse_header
from samsa.storage.config import LogConfig
from samsa.storage.file_io import Buffer, raw_pwrite
from samsa.storage.handle_cache import HandleCache
from samsa.storage.index import PENDING_FLUSH_COUNT, OffsetIndex, TimeIndex

RECOVERY_CHUNK_BYTES = 4 << 20
MAX_RELATIVE_OFFSET = 0x7FFFFFFF
NO_TIMESTAMP = -1


class CorruptIndexError(CorruptBatchError):
    """An index entry that does not match the log (indexes are derived data: rebuild and retry)."""


def segment_stem(base_offset: int) -> str:
    return f"{base_offset:020d}"


class LogSegment:
    __slots__ = (
        "_bytes_since_index",
        "_cache",
        "_index_room",
        "_io",
        "_raw_pwrite",
        "_rolling_timestamp_ms",
        "_time_index_last_ts",
        "_write_fd",
        "_write_fd_stamp",
        "base_offset",
        "created_ms",
        "index_full",
        "index_interval_bytes",
        "log_path",
        "max_timestamp_ms",
        "next_offset",
        "offset_index",
        "offset_of_max_timestamp",
        "roll_deadline_ms",
        "size_bytes",
        "tail_loaded",
        "time_index",
    )

    def __init__(self, directory: Path, base_offset: int, cache: HandleCache, config: LogConfig,
                 *, created_ms: int, size_bytes: int = 0) -> None:
        stem = segment_stem(base_offset)
        self.base_offset = base_offset
        self.log_path = directory / f"{stem}.log"
        self._write_fd = -1  # from the handle cache, still open while its `releases` equals the stamp
        self._write_fd_stamp = -1
        self.offset_index = OffsetIndex(directory / f"{stem}.index", base_offset, config.segment_index_bytes, cache)
        self.time_index = TimeIndex(directory / f"{stem}.timeindex", base_offset, config.segment_index_bytes, cache)
        self._cache = cache
        self._io = cache.file_io
        self._raw_pwrite = raw_pwrite(self._io)
        self.index_interval_bytes = config.index_interval_bytes
        self.created_ms = created_ms
        self.size_bytes = size_bytes
        self.next_offset = base_offset  # meaningful once tail_loaded
        self.tail_loaded = size_bytes == 0
        self.max_timestamp_ms = NO_TIMESTAMP
        self.offset_of_max_timestamp = base_offset
        self._rolling_timestamp_ms: int | None = None
        self._bytes_since_index = 0
        self.index_full = False  # refreshed whenever index entries are added or reloaded
        self._index_room = 0  # index entries that still fit (conservative: every entry counted for both)
        self._time_index_last_ts: int | None = None  # cached timestamp of the last time index entry
        self.roll_deadline_ms: int | None = None  # rolling timestamp + segment.ms, computed on demand

    @classmethod
    def create(cls, directory: Path, base_offset: int, cache: HandleCache, config: LogConfig,
               *, created_ms: int) -> LogSegment:
        seg = cls(directory, base_offset, cache, config, created_ms=created_ms)
        io = cache.file_io
        for path in (seg.offset_index.path, seg.time_index.path):
            fd = io.open(path, write=True)
            io.ftruncate(fd, 0)
            io.close(fd)
        fd = cache.get(seg.log_path, write=True)
        io.ftruncate(fd, 0)
        seg.offset_index.forget()
        seg.time_index.forget()
        return seg

    def update_config(self, config: LogConfig) -> None:
        self.index_interval_bytes = config.index_interval_bytes
        self.offset_index.max_entries = max(1, config.segment_index_bytes // 8)
        self.time_index.max_entries = max(1, config.segment_index_bytes // 12)
        self.roll_deadline_ms = None
        self._refresh_index_full()

    def _refresh_index_full(self) -> None:
        self._index_room = min(self.offset_index.max_entries - len(self.offset_index),
                               self.time_index.max_entries - len(self.time_index))
        self.index_full = self._index_room <= 0

    @property
    def paths(self) -> tuple[Path, Path, Path]:
        return self.log_path, self.offset_index.path, self.time_index.path

    def fd(self) -> int:
        return self._cache.get(self.log_path)

    # -- append -------------------------------------------------------------------------------------------

    def append(self, buffers: Sequence[Buffer], total_bytes: int, batches: Sequence[tuple[int, int, int]]) -> int:
        """Write `buffers` (whole batches) at the end; `batches` is (size, last_offset, max_timestamp) each.

        Returns the position the first batch landed at.  On an OSError the file is cut back and the
        segment is unchanged.
        """
        position = self.size_bytes
        fd = self._cache.get(self.log_path, write=True)
        try:
            if len(buffers) == 1:
                self._io.pwrite(fd, buffers[0], position)
            else:
                self._io.pwritev(fd, buffers, position)
        except OSError:
            try:
                self._io.ftruncate(fd, position)
            except OSError:
                pass
            raise
        if position == 0:
            self._rolling_timestamp_ms = batches[0][2]
            self.roll_deadline_ms = None
        pos = position
        last_offset = self.next_offset - 1
        for size, last_offset, max_ts in batches:
            if max_ts > self.max_timestamp_ms:
                self.max_timestamp_ms = max_ts
                self.offset_of_max_timestamp = last_offset
            if self._bytes_since_index > self.index_interval_bytes:
                self._add_index_entry(last_offset, pos)
            self._bytes_since_index += size
            pos += size
        self.size_bytes = pos
        self.next_offset = last_offset + 1
        return position

    def _add_index_entry(self, last_offset: int, position: int) -> None:
        self.offset_index.append_raw(last_offset - self.base_offset, position)
        last_ts = self._time_index_last_ts
        if last_ts is None:
            entry = self.time_index.last_entry()
            last_ts = entry[0] if entry is not None else -(1 << 63)
        if self.max_timestamp_ms > last_ts:
            self.time_index.append_raw(self.max_timestamp_ms, self.offset_of_max_timestamp - self.base_offset)
            last_ts = self.max_timestamp_ms
        self._time_index_last_ts = last_ts
        self._bytes_since_index = 0
        self._index_room -= 1
        if self._index_room <= 0:
            self._refresh_index_full()

    def append_one(self, data: Buffer, size: int, last_offset: int, max_ts: int, body: Buffer | None = None) -> int:
        """append() for the common case of a single batch of `size` bytes, with less bookkeeping per call.

        The batch is `data`, or `data` (its header) followed by `body` when the caller avoided a copy.
        """
        position = self.size_bytes
        cache = self._cache
        if cache.releases == self._write_fd_stamp:
            fd = self._write_fd  # no fd has left the cache since we got it: still open
        else:
            fd = self._write_fd = cache.get(self.log_path, write=True)
            self._write_fd_stamp = cache.releases
        pwrite = self._raw_pwrite
        try:
            if pwrite is not None and body is None:
                written = pwrite(fd, data, position)
                if written != size:  # short write (signal, nearly full disk): finish it piecewise
                    self._io.pwrite(fd, memoryview(data)[written:], position + written)
            elif body is None:
                self._io.pwrite(fd, data, position)
            else:
                self._io.pwritev(fd, (data, body), position)
        except OSError:
            try:
                self._io.ftruncate(fd, position)
            except OSError:
                pass
            raise
        if position == 0:
            self._rolling_timestamp_ms = max_ts
            self.roll_deadline_ms = None
        if max_ts > self.max_timestamp_ms:
            self.max_timestamp_ms = max_ts
            self.offset_of_max_timestamp = last_offset
        if self._bytes_since_index > self.index_interval_bytes:
            # _add_index_entry, inline: with batches over index.interval.bytes this runs on every append
            pending = self.offset_index.pending  # offset_index.append_raw, inline
            pending.append((last_offset - self.base_offset, position))
            if len(pending) >= PENDING_FLUSH_COUNT:
                self.offset_index.flush_pending()
            last_ts = self._time_index_last_ts
            if last_ts is None:
                entry = self.time_index.last_entry()
                last_ts = self._time_index_last_ts = entry[0] if entry is not None else -(1 << 63)
            if self.max_timestamp_ms > last_ts:
                last_ts = self._time_index_last_ts = self.max_timestamp_ms
                self.time_index.append_raw(last_ts, self.offset_of_max_timestamp - self.base_offset)
            self._bytes_since_index = size
            room = self._index_room = self._index_room - 1
            if room <= 0:
                self._refresh_index_full()
        else:
            self._bytes_since_index += size
        self.size_bytes = position + size
        self.next_offset = last_offset + 1
        return position

    def needs_roll(self, now_ms: int, incoming_bytes: int, last_offset: int, config: LogConfig) -> bool:
        if self.size_bytes == 0:
            return False
        deadline = self.roll_deadline_ms
        if deadline is None:
            deadline = self.roll_deadline_ms = self.rolling_timestamp_ms() + config.segment_ms
        return (
            self.size_bytes > config.segment_bytes - incoming_bytes
            or self.index_full
            or now_ms > deadline
            or last_offset - self.base_offset > MAX_RELATIVE_OFFSET
        )

    def rolling_timestamp_ms(self) -> int:
        """Kafka's rollingBasedTimestamp: the first batch's max timestamp, else the creation time."""
        if self._rolling_timestamp_ms is None and self.size_bytes > 0:
            try:
                header = self.read_header(0)
            except CorruptBatchError:
                header = None
            if header is not None:
                self._rolling_timestamp_ms = header.max_timestamp
        if self._rolling_timestamp_ms is None or self._rolling_timestamp_ms < 0:
            return self.created_ms
        return self._rolling_timestamp_ms

    def on_become_inactive(self) -> None:
        """At roll: make sure the time index ends with the segment's max timestamp, write index tails."""
        self._time_index_last_ts = None
        if self.max_timestamp_ms >= 0:
            self.time_index.maybe_append(self.max_timestamp_ms, self.offset_of_max_timestamp)
        self.offset_index.flush_pending()
        self.time_index.flush_pending()

    # -- reading ------------------------------------------------------------------------------------------

    def read_header(self, position: int) -> BatchHeader | None:
        """Header of the batch at `position`, None at or past the end; CorruptBatchError if it is damaged."""
        if position >= self.size_bytes:
            return None
        raw = self._io.pread(self.fd(), BATCH_HEADER_BYTES, position)
        header = parse_header(raw)
        if position + header.size_bytes > self.size_bytes:
            raise CorruptBatchError(f"{self.log_path}: batch at {position} runs past the end of the segment")
        return header

    def iter_headers(self, start_position: int = 0) -> Iterator[tuple[int, BatchHeader]]:
        position = start_position
        while True:
            header = self.read_header(position)
            if header is None:
                return
            yield position, header
            position += header.size_bytes

    def translate_offset(self, offset: int) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset is >= `offset` (the batch holding it).

        Raises CorruptIndexError if the index entry used does not point at the batch it names.
        """
        found = self.locate(offset)
        return None if found is None else (found[1], found[2])

    def locate(self, offset: int) -> tuple[int, int, BatchHeader] | None:
        """(offset index entry at or before it, position, header) of the batch holding `offset`."""
        i = self.offset_index.search(0, offset - self.base_offset)
        if i >= 0:
            rel, position = self.offset_index.entry(i)
            entry_offset = self.base_offset + rel
        else:
            entry_offset, position = self.base_offset, 0
        check = i >= 0
        for pos, header in self.iter_headers(position):
            if check:
                if header.last_offset != entry_offset:
                    raise CorruptIndexError(f"{self.offset_index.path}: entry ({entry_offset}, {position}) points "
                                            f"at a batch ending at {header.last_offset}")
                check = False
            if header.last_offset >= offset:
                return i, pos, header
        if check and position != 0:
            raise CorruptIndexError(f"{self.offset_index.path}: entry points past the end of the segment")
        return None

    def read_end(self, i: int, start: int, end_target: int) -> tuple[int, int, BatchHeader | None]:
        """The largest batch boundary <= end_target, for a read starting at the boundary `start`.

        `i` is an offset index entry at or before `start` (-1: none).  Index entries are more than
        index.interval.bytes apart, so the entries that can matter are read with one pread.  Returns
        (end position, index entry at or before it, header of the batch at the end if it was read).
        """
        count = min((end_target - start) // max(1, self.index_interval_bytes) + 2, 1 << 16)
        best_i, position = i, start
        found_i, entry = self.offset_index.search_window(1, end_target, i + 1, count)
        if entry is not None and entry[1] >= start:
            best_i, position = found_i, entry[1]
        while position < end_target:
            header = self.read_header(position)
            if header is None:
                return position, best_i, None
            if position + header.size_bytes > end_target:
                return position, best_i, header
            position += header.size_bytes
        return position, best_i, None

    def read_bytes(self, position: int, size: int) -> bytes:
        return self._io.pread(self.fd(), size, position)

    def largest_timestamp_ms(self) -> int:
        """Max timestamp in the segment (for retention), the file mtime if it has none."""
        ts = self.max_timestamp_ms
        if not self.tail_loaded:
            last = self.time_index.last_entry()
            ts = last[0] if last is not None else NO_TIMESTAMP
        if ts <= 0:
            try:
                return self._io.mtime_ms(self.log_path)
            except OSError:
                return NO_TIMESTAMP
        return ts

    def max_timestamp_and_offset(self) -> tuple[int, int]:
        if self.tail_loaded:
            return self.max_timestamp_ms, self.offset_of_max_timestamp
        last = self.time_index.last_entry()
        return (last[0], self.base_offset + last[1]) if last is not None else (NO_TIMESTAMP, self.base_offset)

    # -- loading and recovery -----------------------------------------------------------------------------

    def indexes_sane(self) -> bool:
        """Kafka's sanity check: whole entries, last offset entry inside the segment and the log."""
        if not (self.offset_index.file_is_sane() and self.time_index.file_is_sane()):
            return False
        try:
            last = self.offset_index.last_entry()
            last_time = self.time_index.last_entry()
        except (ValueError, OSError):
            return False
        if last is not None:
            if last[1] >= self.size_bytes:
                return False
            try:
                header = self.read_header(last[1])
            except (CorruptBatchError, OSError):
                return False
            if header is None or header.last_offset != self.base_offset + last[0]:
                return False
        return last_time is None or last_time[1] <= MAX_RELATIVE_OFFSET

    def load_tail(self) -> None:
        """Find next_offset and the max timestamp of a trusted segment from its indexes plus a short walk."""
        last_time = self.time_index.last_entry()
        if last_time is not None:
            self.max_timestamp_ms, self.offset_of_max_timestamp = last_time[0], self.base_offset + last_time[1]
        else:
            self.max_timestamp_ms, self.offset_of_max_timestamp = NO_TIMESTAMP, self.base_offset
        last = self.offset_index.last_entry()
        position = last[1] if last is not None else 0
        self.next_offset = self.base_offset
        self._bytes_since_index = 0
        for pos, header in self.iter_headers(position):
            self.next_offset = header.next_offset
            if header.max_timestamp > self.max_timestamp_ms:
                self.max_timestamp_ms = header.max_timestamp
                self.offset_of_max_timestamp = header.last_offset
            if pos > position:
                self._bytes_since_index += header.size_bytes
        self.tail_loaded = True
        self.roll_deadline_ms = None
        self._refresh_index_full()

    def recover(self) -> tuple[int, str | None]:
        """Validate every batch (size, magic, CRC32C, offsets) and rebuild both indexes from what is valid.

        Returns (valid_bytes, reason the rest is invalid or None).  Does not truncate: the caller decides.
        """
        io = self._io
        fd = self.fd()
        file_size = io.fsize(fd)
        offset_entries: list[tuple[int, int]] = []
        time_entries: list[tuple[int, int]] = []
        pos = 0
        expected = self.base_offset
        max_ts, offset_of_max = NO_TIMESTAMP, self.base_offset
        since_index = 0
        error: str | None = None
        buf = b""
        buf_start = 0
        while pos < file_size:
            rel = pos - buf_start
            if len(buf) - rel < BATCH_HEADER_BYTES:
                buf = io.pread(fd, min(RECOVERY_CHUNK_BYTES, file_size - pos), pos)
                buf_start, rel = pos, 0
                if len(buf) < BATCH_HEADER_BYTES:
                    error = f"torn batch header at position {pos}"
                    break
            try:
                header = parse_header(buf, rel)
            except CorruptBatchError as e:
                error = f"bad batch at position {pos}: {e}"
                break
            size = header.size_bytes
            if pos + size > file_size:
                error = f"torn batch at position {pos} ({size} bytes claimed, {file_size - pos} present)"
                break
            if len(buf) - rel < size:
                buf = io.pread(fd, max(min(RECOVERY_CHUNK_BYTES, file_size - pos), size), pos)
                buf_start, rel = pos, 0
            if not is_crc_valid(buf, header, rel):
                error = f"CRC mismatch in batch at position {pos}"
                break
            if header.base_offset < expected or header.last_offset - self.base_offset > MAX_RELATIVE_OFFSET:
                error = f"batch at position {pos} has offset {header.base_offset}, expected >= {expected}"
                break
            if header.max_timestamp > max_ts:
                max_ts, offset_of_max = header.max_timestamp, header.last_offset
            if since_index > self.index_interval_bytes:
                offset_entries.append((header.last_offset - self.base_offset, pos))
                if not time_entries or max_ts > time_entries[-1][0]:
                    time_entries.append((max_ts, offset_of_max - self.base_offset))
                since_index = 0
            since_index += size
            expected = header.next_offset
            pos += size
        if max_ts >= 0 and (not time_entries or max_ts > time_entries[-1][0]):
            # like on_become_inactive: the last time index entry is the segment's max timestamp, so a
            # later open can trust it without scanning
            time_entries.append((max_ts, offset_of_max - self.base_offset))
        self.offset_index.rewrite(offset_entries)
        self.time_index.rewrite(time_entries)
        self._time_index_last_ts = None
        self.size_bytes = pos if error is not None else file_size
        self.next_offset = expected
        self.max_timestamp_ms, self.offset_of_max_timestamp = max_ts, offset_of_max
        self._bytes_since_index = since_index
        self._rolling_timestamp_ms = None
        self.roll_deadline_ms = None
        self.tail_loaded = True
        self._refresh_index_full()
        return pos, error

    # -- truncation ---------------------------------------------------------------------------------------

    def truncate_to_position(self, position: int) -> None:
        fd = self._cache.get(self.log_path, write=True)
        self._io.ftruncate(fd, position)
        self.size_bytes = position

    def truncate_to(self, offset: int) -> None:
        """Remove every batch whose last offset is >= `offset` (the batch holding `offset` goes too)."""
        found = self.translate_offset(offset)
        if found is None:
            return
        position, header = found
        self.offset_index.truncate_to(header.base_offset)
        self.time_index.truncate_to(header.base_offset)
        self._time_index_last_ts = None
        self.truncate_to_position(position)
        if position == 0:
            self._rolling_timestamp_ms = None
        self.load_tail()

    def flush_index_tails(self) -> None:
        self.offset_index.flush_pending()
        self.time_index.flush_pending()

    def fsync(self) -> None:
        """fsync the three files through fds of our own (safe from a worker thread)."""
        for path in self.paths:
            try:
                fd = self._io.open(path, write=False)
            except FileNotFoundError:
                continue
            try:
                self._io.fsync(fd)
            finally:
                self._io.close(fd)
