"""One partition's log: a list of segments plus its bounds, leader epoch cache and producer state.

Mirrors Kafka's UnifiedLog/LocalLog/LogLoader.  All calls are synchronous and meant for the event
loop thread, except `flush()`, which only fsyncs files through fds of its own and may run in a worker.
"""

from __future__ import annotations

import bisect
import logging
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from samsa.kproto.batch import (
    BATCH_HEADER_BYTES,
    CONTROL_BIT,
    LOG_OVERHEAD_BYTES,
    TIMESTAMP_TYPE_BIT,
    CorruptBatchError,
)
from samsa.storage.batch_header import Header, is_crc_valid, read_header
from samsa.storage.checkpoint import LEADER_EPOCH_CHECKPOINT, CorruptCheckpointError, read_epoch_checkpoint
from samsa.storage.config import LogConfig
from samsa.storage.disk_guard import DiskSpaceGuard
from samsa.storage.epoch_cache import LeaderEpochCache
from samsa.storage.errors import (
    CorruptRecordError,
    InconsistentOffsetsError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    StorageError,
)
from samsa.storage.file_io import Buffer, FileIO
from samsa.storage.handle_cache import HandleCache
from samsa.storage.producer_state import SNAPSHOT_SUFFIX, ProducerStateEntry, ProducerStateManager
from samsa.storage.records_scan import crc_with_header, record_timestamps
from samsa.storage.segment import MAX_RELATIVE_OFFSET, CorruptIndexError, LogSegment

logger = logging.getLogger(__name__)

DELETED_SUFFIX = ".deleted"
_COPY_THRESHOLD_BYTES = 128 << 10  # below this, copying `bytes` to rewrite in place beats pwritev
_HEADER = struct.Struct(">qiibIhiqqqhii")
# the header fields the append path needs without a producer id: batchLength, magic, attributes,
# lastOffsetDelta, maxTimestamp, producerId, recordsCount (fewer ints to build than _HEADER's 13)
_APPEND_FIELDS = struct.Struct(">8xi4xb4xhi8xqq6xi")
_PREFIX = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch
_BASE_OFFSET = struct.Struct(">q")
_LEADER_EPOCH = struct.Struct(">i")
_ATTRIBUTES = struct.Struct(">h")
_TIMESTAMP = struct.Struct(">q")
_CRC = struct.Struct(">I")


class LogAppendInfo(NamedTuple):
    """What an append did.  Immutable; a NamedTuple rather than a frozen dataclass because it is built
    on every append, and a frozen dataclass costs ~1 us there (its __init__ goes through object.__setattr__).
    """

    first_offset: int
    last_offset: int
    max_timestamp_ms: int
    position_bytes: int
    log_append_time_ms: int  # -1 unless LogAppendTime
    log_start_offset: int
    duplicate: bool = False  # an idempotent retry: offsets are the original ones, nothing appended


_new_tuple = tuple.__new__  # LogAppendInfo/Header without the keyword-handling __new__ of a NamedTuple


@dataclass(frozen=True, slots=True)
class FileRegion:
    fd: int  # valid only until the next call into storage
    position: int
    size_bytes: int


@dataclass(frozen=True, slots=True)
class FetchDataInfo:
    regions: tuple[FileRegion, ...]
    first_offset: int  # base offset of the first returned batch, or the fetch offset if empty

    def read_bytes(self) -> bytes:
        parts = []
        for r in self.regions:
            data = os.pread(r.fd, r.size_bytes, r.position)
            while len(data) < r.size_bytes:
                more = os.pread(r.fd, r.size_bytes - len(data), r.position + len(data))
                if not more:
                    raise KafkaStorageError("segment shorter than the region read from it")
                data += more
            parts.append(data)
        return b"".join(parts)

    @property
    def size_bytes(self) -> int:
        return sum(r.size_bytes for r in self.regions)


class Log:
    # set in open(); declared here for mypy
    directory: Path
    config: LogConfig
    log_start_offset: int
    high_watermark: int
    recovery_point: int

    def __init__(self, directory: Path, config: LogConfig, file_io: FileIO, cache: HandleCache,
                 disk_guard: DiskSpaceGuard) -> None:
        self.directory = directory
        self.config = config
        self._io = file_io
        self._cache = cache
        self._disk_guard = disk_guard
        self._segments: list[LogSegment] = []
        self._bases: list[int] = []
        self._epochs = LeaderEpochCache(file_io, directory)
        self._producers = ProducerStateManager()
        self._offline_reason: str | None = None
        self._pending_deletes: list[tuple[int, list[Path], list[int]]] = []
        self._flush_upto: int | None = None  # a roll asked for the old segments to be flushed
        self._last_flush_ms = 0
        self._read_hint: tuple[LogSegment, int, int, int] | None = None  # (segment, offset, position, index entry)
        self._closed = False
        self.log_start_offset = 0
        self.high_watermark = 0
        self.recovery_point = 0

    # =====================================================================================================
    # opening and recovery (Kafka's LogLoader)
    # =====================================================================================================

    @classmethod
    def open(cls, directory: Path, config: LogConfig, *, now_ms: int, file_io: FileIO | None = None,
             handle_cache: HandleCache | None = None, recovery_point: int | None = None,
             log_start_offset: int | None = None, high_watermark: int | None = None,
             disk_guard: DiskSpaceGuard | None = None) -> Log:
        """Open (or create) the log in `directory`, recovering everything at or above `recovery_point`.

        recovery_point None means unknown: every segment is scanned.  log_start_offset and
        high_watermark come from the data-dir checkpoints when a LogManager opens the log.
        """
        if handle_cache is None:
            handle_cache = HandleCache(file_io)
        io = file_io if file_io is not None else handle_cache.file_io
        if disk_guard is None:
            disk_guard = DiskSpaceGuard(io, directory)
        log = cls(directory, config, io, handle_cache, disk_guard)
        log._last_flush_ms = now_ms
        try:
            names = io.listdir(directory)
        except FileNotFoundError:
            io.mkdir(directory)
            names = []
        log._load(names, config, now_ms, recovery_point, log_start_offset, high_watermark)
        return log

    def _load(self, names: list[str], config: LogConfig, now_ms: int, recovery_point: int | None,
              log_start_offset: int | None, high_watermark: int | None) -> None:
        io = self._io
        log_bases: set[int] = set()
        for name in names:
            if name.endswith((DELETED_SUFFIX, ".tmp", ".cleaned", ".swap")):
                io.unlink(self.directory / name)
            elif name.endswith(".log") and name[:-4].isdigit():
                log_bases.add(int(name[:-4]))
        for name in names:  # index files whose segment is gone
            stem, _, ext = name.partition(".")
            if ext in ("index", "timeindex") and stem.isdigit() and int(stem) not in log_bases:
                io.unlink(self.directory / name)

        rp = recovery_point if recovery_point is not None else -1
        if not log_bases:
            base = log_start_offset if log_start_offset is not None else 0
            self._add_segment(LogSegment.create(self.directory, base, self._cache, config, created_ms=now_ms))
        else:
            for base in sorted(log_bases):
                seg = LogSegment(self.directory, base, self._cache, config, created_ms=now_ms, size_bytes=-1)
                seg.size_bytes = io.size(seg.log_path)
                seg.tail_loaded = seg.size_bytes == 0
                self._add_segment(seg)
            self._recover_segments(rp)

        leo = self.log_end_offset
        first_base = self._segments[0].base_offset
        start = max(log_start_offset if log_start_offset is not None else first_base, first_base)
        self.log_start_offset = min(start, leo)
        self.recovery_point = max(min(rp, leo), self.log_start_offset) if rp >= 0 else self.log_start_offset
        hw = high_watermark if high_watermark is not None else self.log_start_offset
        self.high_watermark = min(max(hw, self.log_start_offset), leo)
        if self._offline_reason is not None:
            return
        self._load_epoch_cache(LEADER_EPOCH_CHECKPOINT in names)
        self._load_producer_state(names if any(name.endswith(SNAPSHOT_SUFFIX) for name in names) else [])

    def _add_segment(self, seg: LogSegment) -> None:
        self._segments.append(seg)
        self._bases.append(seg.base_offset)

    def _recover_segments(self, rp: int) -> None:
        """Kafka's recoverLog: trust what is below the recovery point, scan everything after it.

        Damage in data below the recovery point (which was fsynced) takes the partition offline.
        Damage above it (a crash cut the tail) is truncated away, with every later segment.
        """
        segs = self._segments
        first_unflushed = max(0, bisect.bisect_right(self._bases, rp) - 1) if rp >= 0 else 0
        for seg in segs[:first_unflushed]:
            if not seg.indexes_sane():
                logger.warning("%s: rebuilding damaged index files", seg.log_path)
                _, error = seg.recover()
                if error is not None:
                    self._go_offline(f"corrupt closed segment {seg.log_path}: {error}")
                    return
        for i in range(first_unflushed, len(segs)):
            seg = segs[i]
            if rp >= 0 and seg.indexes_sane():
                try:
                    seg.load_tail()
                    if seg.next_offset <= rp:
                        continue  # fully flushed; no scan needed
                except (CorruptBatchError, ValueError, OSError):
                    pass
            valid_bytes, error = seg.recover()
            if error is None:
                continue
            if seg.next_offset < rp:
                self._go_offline(f"corrupt segment {seg.log_path} below the recovery point {rp}: {error}")
                return
            dropped = segs[i + 1 :]
            logger.warning("%s: truncating to %d bytes after a crash (%s); dropping %d later segments",
                           seg.log_path, valid_bytes, error, len(dropped))
            seg.truncate_to_position(valid_bytes)
            for later in dropped:
                for path in later.paths:
                    self._cache.close_path(path)
                    self._io.unlink(path)
            del segs[i + 1 :]
            del self._bases[i + 1 :]
            break
        last = segs[-1]
        if not last.tail_loaded:
            last.load_tail()

    def _load_epoch_cache(self, exists: bool = True) -> None:
        path = self._epochs._path
        try:
            entries = read_epoch_checkpoint(self._io, path) if exists else None
        except CorruptCheckpointError as e:
            logger.warning("%s is corrupt (%s): rebuilding it from the log", path, e)
            entries = None
        if entries is None:
            self._epochs.reset([])
            for _, header in self._iter_headers_from(self._segments[0].base_offset):
                self._epochs.assign(header.partition_leader_epoch, header.base_offset, flush=False)
            if exists or self._epochs.entries:  # a new, empty log needs no file (and no fsync) yet
                self._epochs.flush()
        else:
            self._epochs.reset(entries)
            self._epochs.truncate_from_end(self.log_end_offset)
        self._epochs.truncate_from_start(self.log_start_offset)

    def _load_producer_state(self, names: list[str] | None = None) -> None:
        """Newest good snapshot at or below the log end, then replay the batches after it.

        `names`: the directory listing if the caller has one ([] when it holds no snapshot).
        """
        leo = self.log_end_offset
        snap = self._producers.load_latest_snapshot(self._io, self.directory, leo, names)
        start = snap if snap is not None else self._segments[0].base_offset
        for _, header in self._iter_headers_from(start):
            self._producers.update(header)

    def _iter_headers_from(self, offset: int) -> Iterator[tuple[LogSegment, Header]]:
        i = max(0, bisect.bisect_right(self._bases, offset) - 1)
        for seg in self._segments[i:]:
            found = self._translate(seg, offset)
            if found is None:
                continue
            for _, header in seg.iter_headers(found[0]):
                yield seg, header

    def _go_offline(self, reason: str) -> None:
        logger.error("%s offline: %s", self.directory, reason)
        self._offline_reason = reason

    @property
    def offline_reason(self) -> str | None:
        return self._offline_reason

    def _check_online(self) -> None:
        if self._offline_reason is not None:
            raise KafkaStorageError(f"{self.directory} is offline: {self._offline_reason}")
        if self._closed:
            raise KafkaStorageError(f"{self.directory} is closed")

    # =====================================================================================================
    # bounds and config
    # =====================================================================================================

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._segments)

    @property
    def size_bytes(self) -> int:
        return sum(s.size_bytes for s in self._segments)

    def update_config(self, config: LogConfig) -> None:
        self.config = config
        for seg in self._segments:
            seg.update_config(config)

    def update_high_watermark(self, offset: int) -> None:
        self.high_watermark = min(max(offset, self.log_start_offset), self.log_end_offset)

    def latest_epoch(self) -> int | None:
        return self._epochs.latest_epoch()

    def assign_epoch_start_offset(self, epoch: int) -> None:
        """A new leader records that `epoch` starts at the log end (Kafka's maybeAssignEpochStartOffset),
        so OffsetForLeaderEpoch answers for it before its first append. Not fsynced here: until a
        batch of that epoch exists, recovery has nothing to lose by not knowing it."""
        self._check_online()
        self._epochs.assign(epoch, self.log_end_offset, flush=False)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self._epochs.end_offset_for_epoch(epoch, self.log_end_offset)

    @property
    def epoch_entries(self) -> list[tuple[int, int]]:
        return self._epochs.entries

    def producer_state(self, producer_id: int) -> ProducerStateEntry | None:
        return self._producers.producers.get(producer_id)

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> int:
        """Drop producer state idle longer than producer.id.expiration.ms (see ProducerStateManager)."""
        return self._producers.remove_expired(now_ms, expiration_ms)

    @property
    def producer_states(self) -> dict[int, ProducerStateEntry]:
        return self._producers.producers

    # =====================================================================================================
    # append
    # =====================================================================================================

    def _parse_batches(self, view: memoryview, *, verify_crc: bool) -> list[tuple[int, Header]]:
        batches = []
        position, end = 0, len(view)
        try:
            while position < end:
                h = read_header(view, position)
                size = h.batch_length + LOG_OVERHEAD_BYTES
                if position + size > end:
                    raise CorruptBatchError(f"batch at {position} runs past the end of the records")
                if verify_crc and not is_crc_valid(view, h, position):
                    raise CorruptBatchError(f"CRC mismatch in batch at position {position}")
                if h.records_count != h.last_offset_delta + 1 and not h.attributes & CONTROL_BIT:
                    raise CorruptBatchError(
                        f"batch has {h.records_count} records but lastOffsetDelta {h.last_offset_delta}"
                    )
                batches.append((position, h))
                position += size
        except CorruptBatchError as e:
            raise CorruptRecordError(str(e)) from e
        if not batches:
            raise CorruptRecordError("no record batches in the append")
        return batches

    def append_as_leader(self, records: bytes | bytearray, *, leader_epoch: int, now_ms: int) -> LogAppendInfo:
        """Assign offsets, stamp the leader epoch (and LogAppendTime), check producer state, write.

        Framing is checked here (each batch's length and magic v2, and lastOffsetDelta against the record
        count except in control batches), so offsets and indexes stay right whatever the caller passes; the
        CRC and the records themselves are not: that is the caller's job (the produce handler validates
        client batches before calling, coordinators append batches they encoded).  The bytes are handed to
        the OS (written) before this returns.

        Only batch headers are touched: a bytearray is rewritten in place; small `bytes` are copied once
        into a bytearray, large ones are written with pwritev (new header + the caller's body, no copy).
        """
        if self._offline_reason is not None or self._closed:
            self._check_online()
        total = len(records)
        if total < BATCH_HEADER_BYTES:
            return self._append_many_as_leader(records, leader_epoch, now_ms)
        batch_length, magic, attributes, delta, max_ts, producer_id, count = _APPEND_FIELDS.unpack_from(records, 0)
        if (batch_length + LOG_OVERHEAD_BYTES != total or magic != 2 or batch_length < 49 or delta < 0
                or count != delta + 1):
            return self._append_many_as_leader(records, leader_epoch, now_ms)

        # The common case, one batch per partition per request, inline and with as little Python as possible
        # (each attribute load or call here costs tens of ns, and 16 KiB appends take ~10 us of syscall).
        h: Header | None = None
        if producer_id >= 0:
            producers = self._producers
            h = _new_tuple(Header, _HEADER.unpack_from(records, 0))
            dup = producers.check_append(h)  # check_duplicate and validate in one
            if dup is not None:
                return LogAppendInfo(dup.first_offset, dup.last_offset, dup.timestamp_ms, -1, -1,
                                     self.log_start_offset, duplicate=True)
        config = self.config
        if config.min_free_disk_bytes > 0 or self._disk_guard.min_free_bytes > 0:
            self._disk_guard.check(total, now_ms, config.min_free_disk_bytes)
        seg = self._segments[-1]
        first_offset = seg.next_offset
        last_offset = first_offset + delta
        size = seg.size_bytes
        if size:
            deadline = seg.roll_deadline_ms
            if (size > config.segment_bytes - total or seg.index_full or deadline is None or now_ms > deadline
                    or last_offset - seg.base_offset > MAX_RELATIVE_OFFSET):
                if seg.needs_roll(now_ms, total, last_offset, config):
                    self._roll(now_ms)
                    seg = self._segments[-1]
        body: memoryview | None = None
        if type(records) is bytearray:  # (a subclass is copied like bytes)
            header = records
        elif total <= _COPY_THRESHOLD_BYTES:
            header = bytearray(records)
        else:
            header = bytearray(records[:BATCH_HEADER_BYTES])
            body = memoryview(records)[BATCH_HEADER_BYTES:]
        _PREFIX.pack_into(header, 0, first_offset, batch_length, leader_epoch)  # baseOffset, batchLength, epoch
        if config.message_timestamp_type == "LogAppendTime":
            max_ts = append_time = now_ms
            _ATTRIBUTES.pack_into(header, 21, attributes | TIMESTAMP_TYPE_BIT)
            _TIMESTAMP.pack_into(header, 35, now_ms)
            crc = crc_with_header(memoryview(header)[:BATCH_HEADER_BYTES],
                                  memoryview(records)[BATCH_HEADER_BYTES:])
            _CRC.pack_into(header, 17, crc)
        else:
            append_time = -1
        try:
            position = seg.append_one(header, total, last_offset, max_ts, body)
        except OSError as e:
            raise self._write_failed(seg, e) from e
        epochs = self._epochs
        if leader_epoch != epochs.latest_written:  # a new epoch, or one recorded without writing the file
            epochs.assign(leader_epoch, first_offset)
        if h is not None:
            # h with the offsets, epoch and max timestamp as written (h._replace, at a third of its cost)
            self._producers.update(_new_tuple(Header, (first_offset, batch_length, leader_epoch, magic, h[4],
                                                       attributes, delta, h[7], max_ts, producer_id, h[10], h[11],
                                                       count)))
        return _new_tuple(LogAppendInfo, (first_offset, last_offset, max_ts, position, append_time,
                                          self.log_start_offset, False))

    def _append_many_as_leader(self, records: bytes | bytearray, leader_epoch: int, now_ms: int) -> LogAppendInfo:
        view = memoryview(records)
        batches = self._parse_batches(view, verify_crc=False)
        producers = self._producers
        has_producer = False
        for _, h in batches:
            if h.producer_id >= 0:
                has_producer = True
                dup = producers.check_duplicate(h)
                if dup is not None:
                    return LogAppendInfo(dup.first_offset, dup.last_offset, dup.timestamp_ms, -1, -1,
                                         self.log_start_offset, duplicate=True)
        if has_producer:
            producers.validate(h for _, h in batches)
        total = len(view)
        config = self.config
        if config.min_free_disk_bytes > 0 or self._disk_guard.min_free_bytes > 0:
            self._disk_guard.check(total, now_ms, config.min_free_disk_bytes)

        first_offset = self._segments[-1].next_offset
        if len(batches) == 1:
            count = batches[0][1].last_offset_delta + 1
        else:
            count = sum(h.last_offset_delta + 1 for _, h in batches)
        self._maybe_roll_for(now_ms, total, first_offset + count - 1)

        log_append_time = config.message_timestamp_type == "LogAppendTime"
        buf: bytearray | None
        if isinstance(records, bytearray):
            buf = records
        elif total <= _COPY_THRESHOLD_BYTES:
            buf = bytearray(records)
            view = memoryview(buf)
        else:
            buf = None
        buffers: list[Buffer] = []
        meta: list[tuple[int, int, int]] = []
        stamped: list[Header] = []
        offset = first_offset
        max_ts = -1
        for pos, h in batches:
            size = h.batch_length + LOG_OVERHEAD_BYTES
            header = buf if buf is not None else bytearray(view[pos : pos + BATCH_HEADER_BYTES])
            hpos = pos if buf is not None else 0
            _BASE_OFFSET.pack_into(header, hpos, offset)
            _LEADER_EPOCH.pack_into(header, hpos + 12, leader_epoch)
            batch_max_ts = h.max_timestamp
            if log_append_time:
                batch_max_ts = now_ms
                _ATTRIBUTES.pack_into(header, hpos + 21, h.attributes | TIMESTAMP_TYPE_BIT)
                _TIMESTAMP.pack_into(header, hpos + 35, now_ms)
                crc = crc_with_header(memoryview(header)[hpos : hpos + BATCH_HEADER_BYTES],
                                      view[pos + BATCH_HEADER_BYTES : pos + size])
                _CRC.pack_into(header, hpos + 17, crc)
            if buf is None:
                buffers.append(header)
                buffers.append(view[pos + BATCH_HEADER_BYTES : pos + size])
            last = offset + h.last_offset_delta
            meta.append((size, last, batch_max_ts))
            if h.producer_id >= 0:
                stamped.append(h._replace(base_offset=offset, partition_leader_epoch=leader_epoch,
                                          max_timestamp=batch_max_ts))
            if batch_max_ts > max_ts:
                max_ts = batch_max_ts
            offset = last + 1
        if buf is not None:
            buffers = [buf]
        position = self._write(buffers, total, meta)
        if leader_epoch != self._epochs.latest_written:
            self._epochs.assign(leader_epoch, first_offset)
        for h in stamped:
            producers.update(h)
        return LogAppendInfo(first_offset, offset - 1, max_ts, position, now_ms if log_append_time else -1,
                             self.log_start_offset)

    def append_as_follower(self, records: bytes | bytearray, *, now_ms: int) -> LogAppendInfo:
        """Append batches that already carry the leader's offsets and epochs (CRC-checked here).

        The first batch must start at the log end offset and batches must be contiguous; a gap is
        accepted only for compacted topics (where the leader's log legitimately has holes).
        """
        self._check_online()
        view = memoryview(records)
        batches = self._parse_batches(view, verify_crc=True)
        expected = self.log_end_offset
        allow_gaps = self.config.compact
        for _, h in batches:
            if h.base_offset < expected or (h.base_offset > expected and not allow_gaps):
                raise InconsistentOffsetsError(
                    f"follower append at offset {h.base_offset}, expected {expected} (log end "
                    f"{self.log_end_offset})"
                )
            expected = h.next_offset
        total = len(view)
        self._disk_guard.check(total, now_ms, self.config.min_free_disk_bytes)
        first_offset = batches[0][1].base_offset
        self._maybe_roll_for(now_ms, total, expected - 1)
        meta = [(h.size_bytes, h.last_offset, h.max_timestamp) for _, h in batches]
        position = self._write([view], total, meta)
        for _, h in batches:
            if h.partition_leader_epoch >= 0:
                self._epochs.assign(h.partition_leader_epoch, h.base_offset)
            if h.producer_id >= 0:
                self._producers.update(h)
        max_ts = max(h.max_timestamp for _, h in batches)
        return LogAppendInfo(first_offset, expected - 1, max_ts, position, -1, self.log_start_offset)

    def _write(self, buffers: list[Buffer], total: int, meta: list[tuple[int, int, int]]) -> int:
        seg = self._segments[-1]
        try:
            return seg.append(buffers, total, meta)
        except OSError as e:
            raise self._write_failed(seg, e) from e

    def _write_failed(self, seg: LogSegment, e: OSError) -> KafkaStorageError:
        if seg.size_bytes != self._io.size(seg.log_path):
            self._go_offline(f"write to {seg.log_path} failed and could not be undone: {e}")
        return KafkaStorageError(f"write to {seg.log_path} failed: {e}")

    # =====================================================================================================
    # roll and flush
    # =====================================================================================================

    def _maybe_roll_for(self, now_ms: int, incoming_bytes: int, last_offset: int) -> None:
        if self._segments[-1].needs_roll(now_ms, incoming_bytes, last_offset, self.config):
            self._roll(now_ms)

    def maybe_roll(self, now_ms: int) -> bool:
        self._check_online()
        if self._segments[-1].needs_roll(now_ms, 0, self.log_end_offset, self.config):
            self._roll(now_ms)
            return True
        return False

    def roll(self, now_ms: int) -> None:
        """Start a new segment at the log end (no-op if the active segment is empty)."""
        self._check_online()
        if self._segments[-1].size_bytes:
            self._roll(now_ms)

    def _roll(self, now_ms: int) -> None:
        old = self._segments[-1]
        new_base = self.log_end_offset
        try:
            old.on_become_inactive()
            self._producers.write_snapshot(self._io, self.directory, new_base)
            seg = LogSegment.create(self.directory, new_base, self._cache, self.config, created_ms=now_ms)
        except OSError as e:
            raise KafkaStorageError(f"cannot roll {self.directory}: {e}") from e
        self._add_segment(seg)
        self._flush_upto = new_base

    def flush(self, upto: int | None = None) -> None:
        """fsync everything below `upto` (default: the log end) and advance the recovery point.

        Safe to call from a worker thread: it only reads the segment list and opens its own fds.
        """
        end = self.log_end_offset if upto is None else upto
        if end <= self.recovery_point:
            return
        segments = list(self._segments)
        bases = [s.base_offset for s in segments]
        first = max(0, bisect.bisect_right(bases, self.recovery_point) - 1)
        try:
            for seg in segments[first:]:
                if seg.base_offset >= end and seg is not segments[-1]:
                    break
                seg.fsync()
            for snap in self._producers.list_snapshots(self._io, self.directory):
                if snap > self.recovery_point:
                    try:
                        fd = self._io.open(self.directory / f"{snap:020d}.snapshot", write=False)
                    except FileNotFoundError:
                        continue  # removed meanwhile by truncation or retention
                    try:
                        self._io.fsync(fd)
                    finally:
                        self._io.close(fd)
            self._io.fsync_dir(self.directory)
        except OSError as e:
            self._go_offline(f"fsync failed: {e}")
            raise KafkaStorageError(f"fsync of {self.directory} failed: {e}") from e
        self.recovery_point = max(self.recovery_point, min(end, self.log_end_offset))
        if self._flush_upto is not None and self._flush_upto <= self.recovery_point:
            self._flush_upto = None

    def needs_flush(self, now_ms: int) -> bool:
        unflushed = self.log_end_offset - self.recovery_point
        if unflushed <= 0:
            return False
        return (
            self._flush_upto is not None
            or unflushed >= self.config.flush_messages
            or now_ms - self._last_flush_ms >= self.config.flush_ms
        )

    def maybe_flush(self, now_ms: int) -> None:
        """Honour flush.messages / flush.ms, and flush segments a roll left behind (Kafka does that async)."""
        if self._offline_reason is not None or self._closed:
            return
        unflushed = self.log_end_offset - self.recovery_point
        if unflushed >= self.config.flush_messages or (
            unflushed > 0 and now_ms - self._last_flush_ms >= self.config.flush_ms
        ):
            self.flush()
            self._last_flush_ms = now_ms
        elif self._flush_upto is not None:
            self.flush(self._flush_upto)

    # =====================================================================================================
    # read and lookups
    # =====================================================================================================

    def _translate(self, seg: LogSegment, offset: int) -> tuple[int, Header] | None:
        """seg.translate_offset, rebuilding a damaged index once (indexes are derived data)."""
        try:
            return seg.translate_offset(offset)
        except CorruptIndexError as e:
            logger.warning("%s: rebuilding index (%s)", seg.log_path, e)
            self._read_hint = None
            was_size = seg.size_bytes
            _, error = seg.recover()
            if error is not None or seg.size_bytes != was_size:
                raise CorruptBatchError(f"{seg.log_path}: {error}") from e
            return seg.translate_offset(offset)

    def _segment_for(self, offset: int) -> int:
        return max(0, bisect.bisect_right(self._bases, offset) - 1)

    def read(self, fetch_offset: int, *, max_bytes: int, max_offset: int | None,
             min_one_batch: bool = True) -> FetchDataInfo:
        """Whole batches from the one holding `fetch_offset`, below `max_offset`, up to `max_bytes`.

        At least one batch is returned (if any is below max_offset) when min_one_batch, even past
        max_bytes.  Data comes from one segment per call, like Kafka.
        """
        self._check_online()
        leo = self.log_end_offset
        if fetch_offset < self.log_start_offset or fetch_offset > leo:
            raise OffsetOutOfRangeError(
                f"offset {fetch_offset} is outside [{self.log_start_offset}, {leo}] of {self.directory.name}"
            )
        limit = leo if max_offset is None else min(max_offset, leo)
        empty = FetchDataInfo((), fetch_offset)
        if fetch_offset >= limit:
            return empty
        try:
            return self._read(fetch_offset, limit, max_bytes, min_one_batch)
        except CorruptBatchError as e:
            self._read_hint = None
            seg = self._segments[self._segment_for(fetch_offset)]
            logger.warning("%s: %s; rescanning the segment", seg.log_path, e)
            try:
                was_size = seg.size_bytes
                _, error = seg.recover()  # a damaged index is rebuilt; damaged data takes us offline
                if error is None and seg.size_bytes == was_size:
                    return self._read(fetch_offset, limit, max_bytes, min_one_batch)
                reason = f"corrupt batch in {seg.log_path}: {error}"
            except (CorruptBatchError, OSError) as e2:
                reason = f"corrupt batch found while reading: {e2}"
            self._go_offline(reason)
            raise KafkaStorageError(reason) from e
        except OSError as e:
            raise KafkaStorageError(f"read from {self.directory} failed: {e}") from e

    def _read(self, fetch_offset: int, limit: int, max_bytes: int, min_one_batch: bool) -> FetchDataInfo:
        segments = self._segments
        for i in range(self._segment_for(fetch_offset), len(segments)):
            seg = segments[i]
            if seg.base_offset >= limit:
                break
            found: tuple[int, int, Header] | None = None
            hint = self._read_hint
            if hint is not None and hint[0] is seg and hint[1] == fetch_offset:
                # a consumer continuing where its last fetch ended: no index search needed
                header = seg.read_header(hint[2])
                if header is not None and header.base_offset == fetch_offset:
                    found = (hint[3], hint[2], header)
            if found is None:
                found = seg.locate(fetch_offset)
                if found is None:
                    continue
            index_entry, start, header = found
            if header.last_offset >= limit:
                break
            # a closed segment's tail may not be loaded: bound it by the next segment's base instead
            seg_end = seg.next_offset if i == len(segments) - 1 else segments[i + 1].base_offset
            if limit >= seg_end:
                limit_position = seg.size_bytes
            else:
                at_limit = seg.translate_offset(limit)
                limit_position = at_limit[0] if at_limit is not None else seg.size_bytes
            end_target = min(limit_position, start + max(max_bytes, 0))
            end, end_entry, next_header = seg.read_end(index_entry, start, end_target)
            if end == start:
                if not min_one_batch:
                    return FetchDataInfo((), header.base_offset)
                end = start + header.size_bytes
                next_header = None
            self._read_hint = (seg, next_header.base_offset, end, end_entry) if next_header is not None else None
            return FetchDataInfo((FileRegion(seg.fd(), start, end - start),), header.base_offset)
        return FetchDataInfo((), fetch_offset)

    def fetch_offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int, int] | None:
        """(offset, timestamp, leader epoch) of the first record with timestamp >= timestamp_ms, else None."""
        self._check_online()
        start_offset = self.log_start_offset
        for seg in self._segments:
            if seg.next_offset <= start_offset and seg.tail_loaded:
                continue
            if seg.max_timestamp_and_offset()[0] < timestamp_ms:
                continue
            _, indexed_offset = seg.time_index.lookup(timestamp_ms)
            found = self._translate(seg, max(indexed_offset, start_offset, seg.base_offset))
            if found is None:
                continue
            for pos, h in seg.iter_headers(found[0]):
                if h.max_timestamp < timestamp_ms or h.last_offset < start_offset:
                    continue
                data = seg.read_bytes(pos, h.size_bytes)
                try:
                    for offset, ts in record_timestamps(data, h):
                        if ts >= timestamp_ms and offset >= start_offset:
                            return offset, ts, h.partition_leader_epoch
                except (ValueError, IndexError):
                    return max(h.base_offset, start_offset), h.max_timestamp, h.partition_leader_epoch
        return None

    def max_timestamp_offset(self) -> tuple[int, int, int]:
        """(offset, timestamp, leader epoch) of the record with the largest timestamp (ListOffsets -3).

        (-1, -1, -1) when the log has no timestamped record.
        """
        self._check_online()
        best_ts, best_offset, best_seg = -1, -1, None
        for seg in self._segments:
            ts, offset = seg.max_timestamp_and_offset()
            if ts > best_ts:
                best_ts, best_offset, best_seg = ts, offset, seg
        if best_seg is None:
            return -1, -1, -1
        found = self._translate(best_seg, best_offset)
        if found is None:
            return best_offset, best_ts, -1
        pos, h = found
        try:
            for offset, ts in record_timestamps(best_seg.read_bytes(pos, h.size_bytes), h):
                if ts == best_ts:
                    return offset, ts, h.partition_leader_epoch
        except (ValueError, IndexError):
            pass
        return h.last_offset, best_ts, h.partition_leader_epoch

    # =====================================================================================================
    # truncation, log start, retention
    # =====================================================================================================

    def truncate_to(self, offset: int) -> None:
        """Remove everything at and after `offset` (the whole batch holding it), for follower reconciliation."""
        self._check_online()
        self._read_hint = None
        if offset < 0:
            raise StorageError(f"cannot truncate to negative offset {offset}")
        if offset >= self.log_end_offset:
            # Nothing to cut, but an epoch entry at the log end goes (Kafka does the same): a broker
            # that led briefly recorded its epoch's start and was deposed before appending; kept, it
            # would be this follower's last fetched epoch and its leader would see divergence forever.
            self._epochs.truncate_from_end(self.log_end_offset)
            return
        if offset < self.log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return
        keep = max(1, bisect.bisect_left(self._bases, offset))
        doomed = self._segments[keep:]
        del self._segments[keep:]
        del self._bases[keep:]
        self._delete_segment_files(doomed, now_ms=None)
        try:
            last = self._segments[-1]
            self._translate(last, offset)  # heals a damaged index before truncating by it
            if not last.tail_loaded:
                last.load_tail()
            last.truncate_to(offset)
        except (OSError, CorruptBatchError) as e:
            self._go_offline(f"truncation failed: {e}")
            raise KafkaStorageError(str(e)) from e
        leo = self.log_end_offset
        # the batch holding `offset` went whole; if DeleteRecords had moved the start inside it, follow
        self.log_start_offset = min(self.log_start_offset, leo)
        self._epochs.truncate_from_end(leo)
        ProducerStateManager.delete_snapshots_above(self._io, self.directory, leo)
        self._load_producer_state()
        self.high_watermark = min(self.high_watermark, leo)
        self.recovery_point = min(self.recovery_point, leo)
        if self._flush_upto is not None and self._flush_upto > leo:
            self._flush_upto = None

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Delete every segment and start an empty log at `offset` (follower far behind the leader)."""
        self._check_online()
        self._read_hint = None
        doomed = list(self._segments)
        self._segments.clear()
        self._bases.clear()
        self._delete_segment_files(doomed, now_ms=None)
        self._add_segment(LogSegment.create(self.directory, offset, self._cache, self.config,
                                            created_ms=self._last_flush_ms))
        self.log_start_offset = offset
        self.high_watermark = offset
        self.recovery_point = offset
        self._flush_upto = None
        self._epochs.clear()
        self._producers.clear()
        ProducerStateManager.delete_snapshots_above(self._io, self.directory, -1)

    def maybe_increment_log_start_offset(self, offset: int) -> bool:
        """DeleteRecords: move the log start forward (never past the high watermark)."""
        self._check_online()
        if offset > self.high_watermark:
            raise OffsetOutOfRangeError(
                f"cannot move the log start offset to {offset}: above the high watermark {self.high_watermark}"
            )
        if offset <= self.log_start_offset:
            return False
        self.log_start_offset = offset
        self.recovery_point = max(self.recovery_point, offset)
        self._epochs.truncate_from_start(offset)
        return True

    def delete_old_segments(self, now_ms: int) -> int:
        """Retention: delete closed segments past retention.ms / retention.bytes or below the log start.

        Never deletes the active segment or a segment holding data at or above the high watermark.
        """
        self._purge_deleted(now_ms)
        if self._offline_reason is not None or self._closed:
            return 0
        config = self.config
        excess = self.size_bytes - config.retention_bytes if config.retention_bytes >= 0 else -1
        count = 0
        for i, seg in enumerate(self._segments[:-1]):
            upper = self._segments[i + 1].base_offset
            if upper > self.high_watermark:
                break
            if upper <= self.log_start_offset:
                pass  # wholly below the log start (DeleteRecords): delete
            elif config.retention_ms >= 0 and now_ms - seg.largest_timestamp_ms() > config.retention_ms:
                pass  # older than retention.ms: delete
            elif excess >= 0 and excess - seg.size_bytes >= 0:
                excess -= seg.size_bytes
            else:
                break
            count += 1
        if count == 0:
            return 0
        self._read_hint = None
        doomed = self._segments[:count]
        del self._segments[:count]
        del self._bases[:count]
        self._delete_segment_files(doomed, now_ms=now_ms)
        self.log_start_offset = max(self.log_start_offset, self._segments[0].base_offset)
        self.recovery_point = max(self.recovery_point, self.log_start_offset)
        self._epochs.truncate_from_start(self.log_start_offset)
        ProducerStateManager.delete_snapshots_below(self._io, self.directory, self._segments[0].base_offset)
        return count

    def _delete_segment_files(self, doomed: list[LogSegment], *, now_ms: int | None) -> None:
        """Rename to `.deleted` now (readers of the old name get out-of-range), unlink after the delay."""
        paths: list[Path] = []
        fds: list[int] = []
        for seg in doomed:
            for path in seg.paths:
                fd = self._cache.detach(path)  # kept open until the unlink, for readers still sending
                if fd is not None:
                    fds.append(fd)
                target = path.with_name(path.name + DELETED_SUFFIX)
                try:
                    self._io.rename(path, target)
                    paths.append(target)
                except FileNotFoundError:
                    pass
            seg.offset_index.forget()
            seg.time_index.forget()
        if now_ms is None or self.config.file_delete_delay_ms <= 0:
            for path in paths:
                self._io.unlink(path)
            for fd in fds:
                self._io.close(fd)
        else:
            self._pending_deletes.append((now_ms + self.config.file_delete_delay_ms, paths, fds))

    def _purge_deleted(self, now_ms: int | None) -> None:
        keep = []
        for due_ms, paths, fds in self._pending_deletes:
            if now_ms is None or now_ms >= due_ms:
                for path in paths:
                    self._io.unlink(path)
                for fd in fds:
                    self._io.close(fd)
            else:
                keep.append((due_ms, paths, fds))
        self._pending_deletes = keep

    # =====================================================================================================
    # shutdown
    # =====================================================================================================

    def close(self) -> None:
        """Clean shutdown: index tails, a producer snapshot at the log end, fsync, release fds."""
        if self._closed:
            return
        try:
            if self._offline_reason is None:
                for seg in self._segments:
                    seg.flush_index_tails()
                self._producers.write_snapshot(self._io, self.directory, self.log_end_offset)
                self.flush()
        finally:
            self._purge_deleted(None)
            for seg in self._segments:
                for path in seg.paths:
                    self._cache.close_path(path)
            self._closed = True

    def close_for_delete(self) -> None:
        """Release fds without flushing: the log is about to be deleted."""
        for _, _, fds in self._pending_deletes:
            for fd in fds:
                self._io.close(fd)
        self._pending_deletes.clear()
        self._cache.close_under(self.directory)
        self._closed = True

    @property
    def closed(self) -> bool:
        return self._closed
