"""The log cleaner: one compaction pass over one log, synchronous (Kafka's Cleaner, storage/internals/log).

A pass, as in Kafka's Cleaner.doClean:
1. the transactions of the log are found by a scan of its batch headers (and of its markers' control
   records): which (producer, first offset .. marker) spans were aborted.  Kafka reads them from the
   `.txnindex` files; we derive them from the data itself, so a txn index a crash left short cannot
   make aborted records look committed (the class of bug of KAFKA-8351 and KAFKA-13727);
2. an offset map key -> latest offset is built over the dirty range [first dirty, first uncleanable),
   skipping aborted batches; a map that fills stops there and this pass cleans only up to the last
   offset it mapped (`OffsetMap.latest_offset`), the next pass goes on from there;
3. every segment from the log start up to that offset is recopied, in groups of consecutive segments
   merged up to segment.bytes (and the offset index's 2^31 relative offsets), keeping per batch what
   Kafka's LogCleaner filter keeps (see `_BatchFilter`), each group into one `<base>.log.cleaned`
   (with its indexes) that replaces the group through `cleaner_swap.replace_segments`.

Tombstones follow KIP-534: a batch holding one gets a delete horizon (now + delete.retention.ms) the first
time a cleaning rewrites it, and its tombstones go in the first cleaning after the horizon.  Transaction
markers are deleted only once no batch of their transaction is left, after the same delay.

The cleaner reads segments through descriptors of its own (never the handle cache), so steps 1-3 may run
in a worker thread while the event loop appends to the active segment; only `replace_segments` touches
the log's segment list.

Each walk has a native twin (storage/_cleaner_native.c: whole chunks of a segment, without the GIL) that
takes the common batches -- not control, transactional or compressed, not a producer's last, not ending
the round -- and leaves every other batch, and anything malformed, to the Python code here, which stays
the reference (tests/storage/test_cleaner_native.py holds both to the same bytes); of those, a compressed
or committed transactional batch's records still go through C (map_section / filter_section) once this
code has decompressed them.  With it the scan of
step 1 reads batch headers only, and each batch's CRC is checked once per pass: by the map walk for the
dirty segments, by the recopy for the others (closed segments do not change meanwhile).
"""

from __future__ import annotations

import bisect
import contextlib
import logging
import time
from array import array
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

from samsa.kproto.batch import BATCH_HEADER_BYTES, BatchHeader, CorruptBatchError
from samsa.storage.cleaner_records import (
    RawRecord,
    SegmentReader,
    delete_horizon_ms,
    empty_batch,
    iter_raw_records,
    pack_batch,
    rebuild_batch,
    records_section,
)
from samsa.storage.cleaner_swap import CleanedSegmentWriter, LogCleaningAbortedError, SwapStep, replace_segments
from samsa.storage.file_io import FileIO
from samsa.storage.log import Log
from samsa.storage.offset_map import OffsetMap
from samsa.storage.segment import MAX_RELATIVE_OFFSET, LogSegment
from samsa.storage.txn_index import AbortedTxn

try:
    from samsa.storage import _cleaner_native as native
except ImportError:  # built without a C compiler: the Python walks alone
    native = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

__all__ = ["CleanResult", "Cleaner", "CleanerStats", "CleaningPass", "LogCleaningAbortedError", "UncleanableLogError"]

DEFAULT_IO_BUFFER_BYTES = 524288  # log.cleaner.io.buffer.size: half for reads, half for writes (Kafka's split)
MAX_DECOMPRESSED_BATCH_BYTES = 64 << 20  # a stored batch decompressing past this is treated as corrupt
_ABORT, _COMMIT = 0, 1


class UncleanableLogError(Exception):
    """The cleaner met data it cannot read (a corrupt batch): the log is marked uncleanable."""


@dataclass(slots=True)
class CleanerStats:
    """What a pass did (Kafka's CleanerStats): the figures for the cleaner's log line and metrics."""

    map_bytes_read: int = 0
    map_messages_read: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    messages_read: int = 0
    messages_written: int = 0
    segments_cleaned: int = 0
    buffer_utilization: float = 0.0
    elapsed_s: float = 0.0


@dataclass(frozen=True, slots=True)
class CleanResult:
    end_offset: int  # the first offset not cleaned: the next pass's first dirty offset
    stats: CleanerStats = field(default_factory=CleanerStats)


def _control_type(data: bytes, h: BatchHeader) -> int | None:
    """ABORT (0), COMMIT (1), another control type, or None for a control batch with no record left."""
    for r in iter_raw_records(records_section(data, h, MAX_DECOMPRESSED_BATCH_BYTES), h):
        if r.key is None or len(r.key) < 4:
            raise CorruptBatchError(f"control record at {r.offset} has no control key")
        return int.from_bytes(r.key[2:4], "big", signed=True)
    return None


class _TxnTracker:
    """Kafka's CleanedTransactionMetadata: which batches belong to aborted transactions, and when a marker
    may go, as the cleaner walks the log in offset order."""

    def __init__(self, aborted: Sequence[AbortedTxn]) -> None:
        self._pending = sorted(aborted, key=lambda t: t.first_offset)
        self._next = 0
        self._ongoing_aborted: dict[int, tuple[AbortedTxn, list[int]]] = {}  # pid -> (txn, observed batch offsets)
        self._ongoing_committed: set[int] = set()
        self.cleaned_index: list[AbortedTxn] | None = None  # where kept aborted txns go (the group's txn index)

    def _consume_upto(self, offset: int) -> None:
        pending = self._pending
        while self._next < len(pending) and pending[self._next].first_offset <= offset:
            txn = pending[self._next]
            self._next += 1
            self._ongoing_aborted.setdefault(txn.producer_id, (txn, []))

    def on_batch(self, h: BatchHeader) -> bool:
        """A data batch: True if it belongs to an aborted transaction (then it may be discarded)."""
        self._consume_upto(h.last_offset)
        if not h.is_transactional:
            return False
        ongoing = self._ongoing_aborted.get(h.producer_id)
        if ongoing is not None:
            ongoing[1].append(h.last_offset)
            return True
        self._ongoing_committed.add(h.producer_id)
        return False

    def on_control(self, h: BatchHeader, control_type: int | None) -> bool:
        """A control batch: True if the marker may be discarded (no batch of its transaction is left)."""
        self._consume_upto(h.last_offset)
        if control_type is None:
            return True  # an empty control batch: a marker a previous cleaning already emptied
        if control_type == _ABORT:
            ongoing = self._ongoing_aborted.pop(h.producer_id, None)
            if ongoing is not None and ongoing[1]:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(ongoing[0])
                return False
            return True
        if control_type == _COMMIT:
            if h.producer_id in self._ongoing_committed:
                self._ongoing_committed.discard(h.producer_id)
                return False
            return True
        return False


@dataclass(slots=True)
class CleaningPass:
    """One pass over one log, between Cleaner.begin and Cleaner.finish."""

    log: Log
    segments: list[LogSegment]  # the segment list when the pass began
    first_dirty_offset: int
    first_uncleanable_offset: int
    now_ms: int
    last_batches: dict[int, tuple[int | None, int]]  # producer id -> (last data batch's last offset, epoch)
    started: float
    stats: CleanerStats = field(default_factory=CleanerStats)
    aborted: list[AbortedTxn] = field(default_factory=list)
    end_offset: int = -1
    groups: list[list[LogSegment]] = field(default_factory=list)
    tracker: _TxnTracker = field(default_factory=lambda: _TxnTracker(()))


@contextlib.contextmanager
def _errors(log: Log) -> Iterator[None]:
    """A corrupt batch or an unreadable file makes the log uncleanable; a segment deleted meanwhile (retention,
    truncation) only aborts the pass."""
    try:
        yield
    except FileNotFoundError as e:
        raise LogCleaningAbortedError(f"{log.directory.name}: a segment went away during cleaning: {e}") from e
    except (CorruptBatchError, ValueError, IndexError, OSError) as e:
        raise UncleanableLogError(f"{log.directory.name}: corrupt batch met by the log cleaner: {e}") from e


class Cleaner:
    """Cleans one log at a time with an offset map of `map_memory_bytes` (log.cleaner.dedupe.buffer.size
    divided by log.cleaner.threads)."""

    def __init__(self, map_memory_bytes: int, *, load_factor: float = 0.9,
                 throttle: Callable[[int], None] | None = None,
                 check_done: Callable[[], None] | None = None,
                 io_buffer_bytes: int = DEFAULT_IO_BUFFER_BYTES, native: bool | None = None) -> None:
        """`io_buffer_bytes`: this thread's share of log.cleaner.io.buffer.size, half of it the read chunk.
        `native`: use the C walks (default: when built and SAMSA_PURE_PYTHON is unset); False: Python only."""
        self.offset_map = OffsetMap(map_memory_bytes, load_factor, native=native)
        self._read_chunk_bytes = max(BATCH_HEADER_BYTES, io_buffer_bytes // 2)
        # the segments whose every batch this pass's map walk read and CRC-checked: closed segments do not
        # change, so the recopy need not check them again (one CRC per batch per pass)
        self._crc_checked: set[int] = set()
        self._throttle = throttle  # called with each chunk of bytes read or written (the I/O throttler)
        self._check_done = check_done  # raises LogCleaningAbortedError when the pass must stop

    # =====================================================================================================
    # the pass
    # =====================================================================================================

    def clean(self, log: Log, first_dirty_offset: int, first_uncleanable_offset: int, now_ms: int,
              *, stop_after: SwapStep | None = None) -> CleanResult:
        """Clean `log` from its start up to at most `first_uncleanable_offset` (a segment base, at most the
        active segment's, the high watermark and the last stable offset; see cleaner_manager), all in this
        thread: begin, plan, then clean_group and replace_segments for each group.

        `stop_after` stops the pass after that step of the first group's swap (crash tests).
        Raises UncleanableLogError on a corrupt batch, LogCleaningAbortedError if the log changed.
        """
        p = self.begin(log, first_dirty_offset, first_uncleanable_offset, now_ms)
        self.plan(p)
        for group in p.groups:
            cleaned = self.clean_group(p, group)
            replace_segments(log, cleaned, group, now_ms=now_ms, stop_after=stop_after)
            p.stats.segments_cleaned += len(group)
            if stop_after is not None:
                break
        return self.finish(p)

    def begin(self, log: Log, first_dirty_offset: int, first_uncleanable_offset: int, now_ms: int) -> CleaningPass:
        """What a pass needs from the log's in-memory state, taken on the thread that owns the log."""
        last_batches = {pid: (e.last_offset if e.batches else None, e.producer_epoch)
                        for pid, e in log.producer_states.items()}
        return CleaningPass(log, list(log.segments), first_dirty_offset, first_uncleanable_offset, now_ms,
                            last_batches, time.monotonic())

    def plan(self, p: CleaningPass) -> None:
        """Steps 1 and 2 (may run in a worker thread): the aborted transactions, the offset map, the groups."""
        with _errors(p.log):
            io = p.log._io
            p.aborted = self._scan_transactions(io, p.segments, p.first_uncleanable_offset)
            p.end_offset = self._build_offset_map(io, p.segments, p.first_dirty_offset, p.first_uncleanable_offset,
                                                  p.aborted, p.stats)
            if p.end_offset <= p.first_dirty_offset:
                p.end_offset = p.first_dirty_offset
                return
            p.tracker = _TxnTracker(p.aborted)
            p.groups = group_segments_by_size(
                [s for s in p.segments[:-1] if s.base_offset < p.end_offset], p.log.config.segment_bytes,
                p.log.config.segment_index_bytes, p.first_uncleanable_offset)

    def clean_group(self, p: CleaningPass, group: list[LogSegment]) -> CleanedSegmentWriter:
        """Step 3 for one group (may run in a worker thread; groups in order): its `.cleaned` segment."""
        with _errors(p.log):
            return self._clean_group(p.log, group, p.tracker, p.last_batches, p.first_uncleanable_offset, p.now_ms,
                                     p.stats)

    def finish(self, p: CleaningPass) -> CleanResult:
        p.stats.buffer_utilization = self.offset_map.utilization
        p.stats.elapsed_s = time.monotonic() - p.started
        return CleanResult(p.end_offset, p.stats)

    def _check(self) -> None:
        if self._check_done is not None:
            self._check_done()

    # =====================================================================================================
    # 1. transactions
    # =====================================================================================================

    def _scan_transactions(self, io: FileIO, segments: Sequence[LogSegment], upto: int) -> list[AbortedTxn]:
        """The aborted transactions with data below `upto`, from the batch headers and markers, scanning on
        past `upto` only as long as a transaction begun below it has no marker yet."""
        open_first: dict[int, int] = {}  # producer id -> first offset of its transaction in progress
        aborted: list[AbortedTxn] = []
        for i, seg in enumerate(segments):
            if seg.base_offset >= upto and not any(f < upto for f in open_first.values()):
                break
            self._check()
            last = i == len(segments) - 1
            fd = io.open(seg.log_path, write=False)
            try:
                reader = self._reader(io, fd, seg)
                while not reader.done:
                    if self.offset_map.table is not None:  # past the batches that are not transactional
                        rel, status = native.scan_txn_batches(reader.buf, reader.rel, upto,
                                                              reader.size - reader.buf_start)
                        reader.advance(rel)
                        if reader.done:
                            break
                        if status == native.NEED_MORE and reader.refill_header():
                            continue
                    h, data = reader.next_batch()
                    if h.base_offset >= upto and not any(f < upto for f in open_first.values()):
                        break
                    if h.producer_id < 0 or not h.is_transactional:
                        continue
                    if not h.is_control:
                        open_first.setdefault(h.producer_id, h.base_offset)
                        continue
                    first = open_first.pop(h.producer_id, None)
                    if first is not None and _control_type(data, h) == _ABORT:
                        lso = min(open_first.values(), default=h.last_offset + 1)
                        aborted.append(AbortedTxn(h.producer_id, first, h.last_offset, lso))
            except CorruptBatchError:
                if not last:
                    raise
                # the active segment's tail may be an append in progress: the scan ends there
            finally:
                io.close(fd)
        return aborted

    def _reader(self, io: FileIO, fd: int, seg: LogSegment) -> SegmentReader:
        return SegmentReader(io, fd, seg.size_bytes, self._read_chunk_bytes, throttle=self._throttle)

    # =====================================================================================================
    # 2. the offset map
    # =====================================================================================================

    def _build_offset_map(self, io: FileIO, segments: Sequence[LogSegment], start: int, end: int,
                          aborted: Sequence[AbortedTxn], stats: CleanerStats) -> int:
        """Map each key of the dirty range [start, end) to its latest offset (Kafka's buildOffsetMap).

        Returns the first offset not mapped: `end`, or where the map filled.  Unlike Kafka, which stops at
        the last whole batch, the map may stop inside a batch (records past `latest_offset` are kept by
        the recopy), so even a map smaller than one batch's keys makes progress.
        """
        m = self.offset_map
        m.clear()
        self._crc_checked.clear()
        m.update_latest_offset(start - 1)
        bases = [s.base_offset for s in segments]
        first = max(0, bisect.bisect_right(bases, start) - 1)
        # only transactions not over before the first segment read: the markers of the others are not met
        tracker = _TxnTracker([t for t in aborted if t.last_offset >= bases[first]])
        for i in range(first, len(segments) - 1):
            seg = segments[i]
            if seg.base_offset >= end:
                break
            self._check()
            fd = io.open(seg.log_path, write=False)
            try:
                if self._map_segment(self._reader(io, fd, seg), tracker, start, stats):
                    return m.latest_offset + 1
            finally:
                io.close(fd)
            self._crc_checked.add(seg.base_offset)
            m.update_latest_offset(segments[i + 1].base_offset - 1)  # a gap at the segment's end
        return min(m.latest_offset + 1, end)

    def _map_segment(self, reader: SegmentReader, tracker: _TxnTracker, start: int, stats: CleanerStats) -> bool:
        """One segment into the map; True if the map filled.  The plain batches (not control, transactional or
        compressed) go through the native walk when there is one (the tracker needs only the other batches:
        it catches up on the next one it sees), every other batch through the Python walk below."""
        m = self.offset_map
        table = m.table
        while not reader.done:
            if table is not None:
                rel, status, m.latest_offset, n_bytes, n_messages = native.map_batches(
                    table, reader.buf, reader.rel, start, m.latest_offset, True)
                reader.advance(rel)
                stats.map_bytes_read += n_bytes
                stats.map_messages_read += n_messages
                if status == native.FULL:
                    return True
                if reader.done:
                    break
                if status == native.NEED_MORE and reader.refill():
                    continue
            h, data = reader.next_batch()
            stats.map_bytes_read += len(data)
            if h.is_control:
                tracker.on_control(h, _control_type(data, h))
            elif not tracker.on_batch(h) and h.last_offset >= start:
                section = records_section(data, h, MAX_DECOMPRESSED_BATCH_BYTES)
                if table is not None:  # a compressed or transactional batch's records, natively if they parse
                    status, latest, n_messages = native.map_section(table, data, section, start, m.latest_offset)
                    if status != native.SPECIAL:
                        m.latest_offset = latest
                        stats.map_messages_read += n_messages
                        if status == native.FULL:
                            return True
                        m.update_latest_offset(h.last_offset)
                        continue
                for r in iter_raw_records(section, h):
                    stats.map_messages_read += 1
                    if r.offset < start or r.key is None:
                        continue
                    if not m.put(r.key, r.offset):
                        return True
                    m.update_latest_offset(r.offset)
            if h.last_offset >= start:
                m.update_latest_offset(h.last_offset)
        return False

    # =====================================================================================================
    # 3. recopy
    # =====================================================================================================

    def _clean_group(self, log: Log, group: Sequence[LogSegment],
                     tracker: _TxnTracker, last_batches: dict[int, tuple[int | None, int]],
                     upper_bound: int, now_ms: int, stats: CleanerStats) -> CleanedSegmentWriter:
        """Kafka's cleanSegments: recopy `group` into one `.cleaned` segment named after its first base."""
        writer = CleanedSegmentWriter(log._io, log.directory, group[0].base_offset, log.config.index_interval_bytes)
        tracker.cleaned_index = writer.aborted
        # the batches the native walk leaves to _filter_batch: the producers' last batches (is_last_of_producer)
        special = array("q", sorted({last for last, _ in last_batches.values() if last is not None}))
        try:
            for seg in group:
                self._check()
                writer.source_sizes.append(seg.size_bytes)
                fd = log._io.open(seg.log_path, write=False)
                try:
                    self._recopy_segment(self._reader(log._io, fd, seg), writer, tracker, last_batches, special,
                                         upper_bound, log.config.delete_retention_ms, now_ms, stats,
                                         verify_crc=seg.base_offset not in self._crc_checked)
                finally:
                    log._io.close(fd)
            writer.finish()
        except BaseException:
            writer.discard()
            raise
        return writer

    def _recopy_segment(self, reader: SegmentReader, writer: CleanedSegmentWriter, tracker: _TxnTracker,
                        last_batches: dict[int, tuple[int | None, int]], special: array[int], upper_bound: int,
                        delete_retention_ms: int, now_ms: int, stats: CleanerStats, *, verify_crc: bool) -> None:
        """One segment through the filter into `writer`: the plain batches (not control, transactional or
        compressed, not a producer's last, not ending the round) through the native walk when there is one,
        which decides them as _filter_batch does; the others through _filter_batch."""
        table = self.offset_map.table
        while not reader.done:
            if table is not None:
                rel, status, out, index, n_read, m_read, m_written = native.filter_batches(
                    table, reader.buf, reader.rel, self.offset_map.latest_offset, special, upper_bound, now_ms,
                    delete_retention_ms, verify_crc)
                reader.advance(rel)
                stats.bytes_read += n_read
                stats.messages_read += m_read
                stats.messages_written += m_written
                if out:
                    stats.bytes_written += len(out)
                    writer.append_batches(out, index)
                    if self._throttle is not None:
                        self._throttle(len(out))
                if reader.done:
                    break
                if status == native.NEED_MORE and reader.refill():
                    continue
            h, data = reader.next_batch()
            stats.bytes_read += len(data)
            batch, read, kept = self._filter_batch(h, data, tracker, last_batches, upper_bound, delete_retention_ms,
                                                   now_ms)
            stats.messages_read += read
            if batch is not None:
                stats.messages_written += kept
                stats.bytes_written += len(batch)
                writer.append(h, batch)
                if self._throttle is not None:
                    self._throttle(len(batch))

    def _filter_batch(self, h: BatchHeader, data: bytes, tracker: _TxnTracker,
                      last_batches: dict[int, tuple[int | None, int]], upper_bound: int,
                      delete_retention_ms: int, now_ms: int) -> tuple[bytes | None, int, int]:
        """Kafka's LogCleaner record filter over one batch: (the batch to write or None, records read, kept).

        The batch goes whole when it belongs to an aborted transaction or is a marker whose transaction
        left no batch and whose delete horizon passed, except that these batches stay (emptied if need be):
        the last batch of an active producer (its sequence and epoch rebuild producer state) and the batch
        ending the cleaning round (its last offset).  Otherwise each record stays if it is past the map, or
        the latest for its key and not a tombstone whose batch's delete horizon passed.
        """
        horizon = delete_horizon_ms(h)
        if h.is_control:
            control_type = _control_type(data, h)
            can_discard = tracker.on_control(h, control_type)
            discard_records = can_discard and horizon is not None and horizon <= now_ms
        else:
            can_discard = discard_records = tracker.on_batch(h)
        last = last_batches.get(h.producer_id) if h.producer_id >= 0 else None
        is_last_of_producer = last is not None and (
            h.last_offset == last[0] if last[0] is not None else h.is_control and h.producer_epoch == last[1])
        retain_empty = is_last_of_producer or h.next_offset == upper_bound
        if discard_records and not retain_empty:
            return None, h.records_count, 0
        section = records_section(data, h, MAX_DECOMPRESSED_BATCH_BYTES)
        m = self.offset_map
        if m.table is not None and not h.is_control and not discard_records:  # (a compressed batch's) records
            decided = native.filter_section(m.table, data, section, m.latest_offset, now_ms, delete_retention_ms)
            if decided is not None:
                n_kept, body, base_ts, max_ts, horizon_bit = decided
                if body is None and n_kept == h.records_count:
                    return data, n_kept, n_kept
                if body is None:
                    return (empty_batch(h) if retain_empty else None), h.records_count, 0
                return pack_batch(h, body, n_kept, base_ts, max_ts, horizon_bit), h.records_count, n_kept
        records = list(iter_raw_records(section, h))
        kept: list[RawRecord] = []
        tombstones = False
        for r in records:
            if discard_records:
                keep = False
            elif h.is_control or r.offset > m.latest_offset:
                keep = True
            elif r.key is None:
                keep = False  # Kafka drops keyless records from a compacted log
            else:
                keep = r.offset >= m.get(r.key) and (r.has_value or horizon is None or now_ms < horizon)
            if keep:
                kept.append(r)
                tombstones = tombstones or not r.has_value
        needs_horizon = horizon is None and ((tombstones and not h.is_control) or (can_discard and h.is_control))
        if len(kept) == len(records) and not needs_horizon:
            return data, len(records), len(kept)
        if not kept and not retain_empty:
            return None, len(records), 0
        new_horizon = now_ms + delete_retention_ms if needs_horizon else horizon
        return rebuild_batch(h, section, kept, new_horizon), len(records), len(kept)


def group_segments_by_size(segments: Sequence[LogSegment], max_bytes: int, max_index_bytes: int,
                           first_uncleanable_offset: int) -> list[list[LogSegment]]:
    """Kafka's groupSegmentsBySize: consecutive segments whose log bytes fit in segment.bytes, whose index
    bytes fit in segment.index.bytes, and whose offsets stay within 2^31 of the group's base (the offset
    index stores 32-bit relative offsets); a segment's last offset is bounded by the next one's base."""
    groups: list[list[LogSegment]] = []
    i = 0
    while i < len(segments):
        group = [segments[i]]
        log_bytes = segments[i].size_bytes
        index_bytes = len(segments[i].offset_index) * 8
        time_bytes = len(segments[i].time_index) * 12
        i += 1
        while i < len(segments):
            seg = segments[i]
            last_offset = (segments[i + 1].base_offset if i + 1 < len(segments) else first_uncleanable_offset) - 1
            if (log_bytes + seg.size_bytes > max_bytes
                    or index_bytes + len(seg.offset_index) * 8 > max_index_bytes
                    or time_bytes + len(seg.time_index) * 12 > max_index_bytes
                    or (seg.size_bytes > 0 and last_offset - group[0].base_offset > MAX_RELATIVE_OFFSET)):
                break
            group.append(seg)
            log_bytes += seg.size_bytes
            index_bytes += len(seg.offset_index) * 8
            time_bytes += len(seg.time_index) * 12
            i += 1
        groups.append(group)
    return groups

