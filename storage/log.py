"""One partition's log: appends (offsets, epochs, producer state), truncation, log start and retention.

Mirrors Kafka's UnifiedLog over LocalLog (local_log: the segments on disk) and LogLoader (log_loader:
opening and recovery). All calls are synchronous and meant for the event loop thread, except `flush()`,
which only fsyncs files through fds of its own and may run in a worker.
"""

from __future__ import annotations

import bisect
import logging
import struct
from pathlib import Path
from typing import NamedTuple

from samsa.kproto.batch import (
    BATCH_HEADER_BYTES,
    CONTROL_BIT,
    LOG_OVERHEAD_BYTES,
    TIMESTAMP_TYPE_BIT,
    BatchHeader,
    CorruptBatchError,
    is_crc_valid,
    parse_header,
    stamp_batch,
)
from samsa.storage import log_loader
from samsa.storage.config import LogConfig
from samsa.storage.disk_guard import DiskSpaceGuard
from samsa.storage.errors import (
    CorruptRecordError,
    InconsistentOffsetsError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    StorageError,
)
from samsa.storage.file_io import Buffer, FileIO
from samsa.storage.handle_cache import HandleCache
from samsa.storage.invariants import (
    check_appended,
    check_high_watermark_advance,
    check_offsets,
    check_write_header,
)
from samsa.storage.local_log import DELETED_SUFFIX, FetchDataInfo, FileRegion, LocalLog
from samsa.storage.producer_state import ProducerStateEntry, ProducerStateManager
from samsa.storage.segment import MAX_RELATIVE_OFFSET, LogSegment

logger = logging.getLogger(__name__)

__all__ = ["DELETED_SUFFIX", "FetchDataInfo", "FileRegion", "Log", "LogAppendInfo"]

_COPY_THRESHOLD_BYTES = 128 << 10  # below this, copying `bytes` to rewrite in place beats pwritev
_HEADER = struct.Struct(">qiibIhiqqqhii")
# the header fields the append path needs without a producer id: batchLength, magic, attributes,
# lastOffsetDelta, maxTimestamp, producerId, recordsCount (fewer ints to build than _HEADER's 13)
_APPEND_FIELDS = struct.Struct(">8xi4xb4xhi8xqq6xi")
_PREFIX = struct.Struct(">qii")  # baseOffset, batchLength, partitionLeaderEpoch


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


_new_tuple = tuple.__new__  # LogAppendInfo/BatchHeader without the keyword-handling __new__ of a NamedTuple


class Log(LocalLog):
    """Kafka's UnifiedLog: what a partition's leader and followers call."""

    # =====================================================================================================
    # opening (recovery is log_loader's: Kafka's LogLoader)
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
        log_loader.load(log, names, config, now_ms, recovery_point, log_start_offset, high_watermark)
        return log

    # =====================================================================================================
    # epochs and producer state
    # =====================================================================================================

    def update_high_watermark(self, offset: int) -> None:
        """Set the high watermark, clamped to [log start, log end] (Kafka's UnifiedLog.updateHighWatermark).

        It may move back: the metadata driver sets it to its Raft core's, which starts from the log start
        after a restart while the checkpointed one may be ahead. A partition's leader and followers use
        advance_high_watermark, which refuses to.
        """
        self.high_watermark = hw = min(max(offset, self.log_start_offset), self.log_end_offset)
        check_offsets(self.directory, self.log_start_offset, hw, self.log_end_offset)

    def advance_high_watermark(self, offset: int) -> None:
        """Move the high watermark forward to `offset` (a partition leader's min over its ISR's log ends, or a
        follower's min of the leader's and its own log end). Raises StorageInvariantError, even under
        `python -O`, if it would move back or past the log end: only truncate_to and
        truncate_fully_and_start_at move it back (Kafka: maybeIncrementHighWatermark)."""
        hw = self.high_watermark
        leo = self.log_end_offset
        if not hw <= offset <= leo:
            check_high_watermark_advance(self.directory, hw, offset, leo)
        self.high_watermark = offset

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

    @property
    def producer_txn_version(self) -> int:
        """Changes whenever an open transaction may have begun or ended (see ProducerStateManager.txn_version)."""
        return self._producers.txn_version

    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest open transaction; None when none is open."""
        return self._producers.first_unstable_offset()

    # =====================================================================================================
    # append
    # =====================================================================================================

    def _parse_batches(self, view: memoryview, *, verify_crc: bool, leader: bool) -> list[tuple[int, BatchHeader]]:
        batches = []
        position, end = 0, len(view)
        try:
            while position < end:
                h = parse_header(view, position)
                size = h.batch_length + LOG_OVERHEAD_BYTES
                if position + size > end:
                    raise CorruptBatchError(f"batch at {position} runs past the end of the records")
                if verify_crc and not is_crc_valid(view, h, position):
                    raise CorruptBatchError(f"CRC mismatch in batch at position {position}")
                # only a producer's batch must be whole: one a leader's cleaner rewrote keeps its lastOffsetDelta
                # with fewer records (Kafka's filterTo), and a follower replicates it as it is
                if leader and h.records_count != h.last_offset_delta + 1 and not h.attributes & CONTROL_BIT:
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
        h: BatchHeader | None = None
        if producer_id >= 0:
            producers = self._producers
            h = _new_tuple(BatchHeader, _HEADER.unpack_from(records, 0))
            dup = producers.check_append(h, records)  # check_duplicate and validate in one
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
        if config.message_timestamp_type == "LogAppendTime":
            max_ts = append_time = now_ms
            stamp_batch(header, 0, first_offset, leader_epoch, now_ms, body)  # a CRC to recompute: a call is nothing
            attributes |= TIMESTAMP_TYPE_BIT  # as written (producer state then keeps no checksum, as on followers)
        else:
            # kproto.batch.stamp_batch inlined: a call costs ~40-70 ns of a ~2.9 us append (1.5-2.5%; measured
            # with timeit, 10-record batch on tmpfs), and this is the path every produce takes.
            _PREFIX.pack_into(header, 0, first_offset, batch_length, leader_epoch)  # baseOffset, batchLength, epoch
            append_time = -1
        if not seg.base_offset <= first_offset <= last_offset <= seg.base_offset + MAX_RELATIVE_OFFSET:
            check_write_header(self.directory, magic, first_offset, last_offset, seg.base_offset, seg.next_offset)
        try:
            position = seg.append_one(header, total, last_offset, max_ts, body)
        except OSError as e:
            raise self._write_failed(seg, e) from e
        if seg.next_offset != last_offset + 1:
            check_appended(self.directory, first_offset, last_offset, seg.next_offset)
        epochs = self._epochs
        if leader_epoch != epochs.latest_written:  # a new epoch, or one recorded without writing the file
            epochs.assign(leader_epoch, first_offset)
        if h is not None:
            # h with the offsets, epoch and max timestamp as written (h._replace, at a third of its cost)
            self._producers.update(_new_tuple(BatchHeader, (first_offset, batch_length, leader_epoch, magic, h[4],
                                                       attributes, delta, h[7], max_ts, producer_id, h[10], h[11],
                                                       count)))
        return _new_tuple(LogAppendInfo, (first_offset, last_offset, max_ts, position, append_time,
                                          self.log_start_offset, False))

    def _append_many_as_leader(self, records: bytes | bytearray, leader_epoch: int, now_ms: int) -> LogAppendInfo:
        view = memoryview(records)
        batches = self._parse_batches(view, verify_crc=False, leader=True)
        producers = self._producers
        has_producer = False
        for pos, h in batches:
            if h.producer_id >= 0:
                has_producer = True
                dup = producers.check_duplicate(h, view, pos)
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
        stamped: list[BatchHeader] = []
        offset = first_offset
        max_ts = -1
        for pos, h in batches:
            size = h.batch_length + LOG_OVERHEAD_BYTES
            header = buf if buf is not None else bytearray(view[pos : pos + BATCH_HEADER_BYTES])
            hpos = pos if buf is not None else 0
            batch_max_ts = now_ms if log_append_time else h.max_timestamp
            stamp_batch(header, hpos, offset, leader_epoch, now_ms if log_append_time else -1,
                        None if buf is not None else view[pos + BATCH_HEADER_BYTES : pos + size])
            if buf is None:
                buffers.append(header)
                buffers.append(view[pos + BATCH_HEADER_BYTES : pos + size])
            last = offset + h.last_offset_delta
            meta.append((size, last, batch_max_ts))
            if h.producer_id >= 0:
                stamped.append(h._replace(base_offset=offset, partition_leader_epoch=leader_epoch,
                                          max_timestamp=batch_max_ts, attributes=h.attributes | TIMESTAMP_TYPE_BIT
                                          if log_append_time else h.attributes))
            if batch_max_ts > max_ts:
                max_ts = batch_max_ts
            offset = last + 1
        if buf is not None:
            buffers = [buf]
        seg = self._segments[-1]
        check_write_header(self.directory, 2, first_offset, offset - 1, seg.base_offset, seg.next_offset)
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
        batches = self._parse_batches(view, verify_crc=True, leader=False)
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
        seg = self._segments[-1]
        check_write_header(self.directory, 2, first_offset, expected - 1, seg.base_offset, seg.next_offset)
        position = self._write([view], total, meta)
        for _, h in batches:
            if h.partition_leader_epoch >= 0:
                self._epochs.assign(h.partition_leader_epoch, h.base_offset)
            if h.producer_id >= 0:
                self._producers.update(h)
        check_appended(self.directory, first_offset, expected - 1, self.log_end_offset)
        max_ts = max(h.max_timestamp for _, h in batches)
        return LogAppendInfo(first_offset, expected - 1, max_ts, position, -1, self.log_start_offset)

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
        log_loader.rebuild_producer_state(self)
        self.high_watermark = min(self.high_watermark, leo)
        self.recovery_point = min(self.recovery_point, leo)
        if self._flush_upto is not None and self._flush_upto > leo:
            self._flush_upto = None
        check_offsets(self.directory, self.log_start_offset, self.high_watermark, leo)

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
        check_offsets(self.directory, offset, self.high_watermark, self.log_end_offset)
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
        reasons: dict[str, None] = {}  # why, in order: Kafka's "due to retention time/size/log start offset breach"
        for i, seg in enumerate(self._segments[:-1]):
            upper = self._segments[i + 1].base_offset
            if upper > self.high_watermark:
                break
            if upper <= self.log_start_offset:
                # wholly below the log start (DeleteRecords): delete
                reasons[f"log start offset {self.log_start_offset}"] = None
            elif config.retention_ms >= 0 and now_ms - seg.largest_timestamp_ms() > config.retention_ms:
                reasons[f"retention time {config.retention_ms}ms"] = None  # older than retention.ms: delete
            elif excess >= 0 and excess - seg.size_bytes >= 0:
                excess -= seg.size_bytes
                reasons[f"retention size {config.retention_bytes} bytes"] = None
            else:
                break
            count += 1
        if count == 0:
            return 0
        deleted_bytes = sum(seg.size_bytes for seg in self._segments[:count])
        self._read_hint = None
        doomed = self._segments[:count]
        del self._segments[:count]
        del self._bases[:count]
        self._delete_segment_files(doomed, now_ms=now_ms)
        self.log_start_offset = max(self.log_start_offset, self._segments[0].base_offset)
        self.recovery_point = max(self.recovery_point, self.log_start_offset)
        self._epochs.truncate_from_start(self.log_start_offset)
        ProducerStateManager.delete_snapshots_below(self._io, self.directory, self._segments[0].base_offset)
        # Kafka's UnifiedLog.deleteSegments: one INFO line per retention pass that deleted something.
        logger.info("%s: deleted %d segment(s), %d bytes, due to %s breach; log start offset is now %d",
                    self.directory.name, count, deleted_bytes, ", ".join(reasons), self.log_start_offset)
        return count
