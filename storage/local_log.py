"""One partition's segments on disk: write at the end, read, roll, flush, delete files, close (Kafka's LocalLog).

The state every part of a Log shares lives here (segments, bounds, the epoch cache and the producer state
whose snapshots roll and flush write); log.Log adds appends, truncation and retention, log_loader opens it.
"""

from __future__ import annotations

import bisect
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from samsa.kproto.batch import BatchHeader, CorruptBatchError
from samsa.storage.config import LogConfig
from samsa.storage.disk_guard import DiskSpaceGuard
from samsa.storage.epoch_cache import LeaderEpochCache
from samsa.storage.errors import KafkaStorageError, OffsetOutOfRangeError
from samsa.storage.file_io import Buffer, FileIO
from samsa.storage.handle_cache import HandleCache
from samsa.storage.invariants import check_read_header
from samsa.storage.producer_state import ProducerStateManager
from samsa.storage.records_scan import record_timestamps
from samsa.storage.segment import CorruptIndexError, LogSegment

logger = logging.getLogger(__name__)

DELETED_SUFFIX = ".deleted"


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


class LocalLog:
    """The segments on disk: writing at the end, reading, rolling, flushing, deleting files, closing."""

    # set in __init__, then by log_loader.load when Log.open runs; declared here for mypy
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
    # segments and health
    # =====================================================================================================

    def _add_segment(self, seg: LogSegment) -> None:
        self._segments.append(seg)
        self._bases.append(seg.base_offset)

    def _iter_headers_from(self, offset: int) -> Iterator[tuple[LogSegment, BatchHeader]]:
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

    def _translate(self, seg: LogSegment, offset: int) -> tuple[int, BatchHeader] | None:
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
            found: tuple[int, int, BatchHeader] | None = None
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
            if header.magic != 2 or header.last_offset < fetch_offset:
                check_read_header(self.directory, header.magic, header.base_offset, header.last_offset,
                                  fetch_offset)
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
    # deleting segment files
    # =====================================================================================================

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
