"""Consumer lag of one committed offset against one local partition log: records, bytes, time, retention.

Read at scrape time from the log's segments (nothing is added to the produce or fetch path):

- lag in records: high watermark minus the committed offset (what kafka-consumer-groups.sh shows as
  LAG: LOG-END-OFFSET, which is the high watermark a read_uncommitted ListOffsets returns, minus
  CURRENT-OFFSET), never below 0;
- lag in bytes: the segment bytes from the batch holding the committed offset up to the high
  watermark's position (whole batches, as they lie on disk);
- lag in time: how old the next unconsumed record is (now minus its timestamp), 0 when caught up;
- retention headroom: when retention.ms will let the segment holding the oldest unread record go
  (Kafka's LocalLog deletes a closed segment once now - its largest timestamp > retention.ms), and how
  many more bytes may be appended before retention.bytes deletes it. Infinite when nothing is unread
  or the limit is off; 0 when the unread data is already gone (committed offset below the log start).

`now_ms` is a parameter, so the time figures are testable with a fake clock.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

from samsa.storage.log import Log
from samsa.storage.records_scan import record_timestamps
from samsa.storage.segment import LogSegment


@dataclass(frozen=True, slots=True)
class PartitionLag:
    lag_records: int
    lag_bytes: int
    lag_ms: int  # age of the next unconsumed record; 0 when caught up
    retention_remaining_ms: float  # math.inf: nothing unread, or retention.ms unlimited
    retention_remaining_bytes: float  # math.inf: nothing unread, or retention.bytes unlimited


CAUGHT_UP = PartitionLag(0, 0, 0, math.inf, math.inf)


def _segment_index(bases: list[int], offset: int) -> int:
    return max(0, bisect.bisect_right(bases, offset) - 1)


def _position(segments: tuple[LogSegment, ...], bases: list[int], offset: int) -> tuple[int, int]:
    """(segment index, byte position in it) of the batch holding `offset`; the end of the last segment
    when no batch holds it (at or past the log end)."""
    if offset >= segments[-1].next_offset and segments[-1].tail_loaded:
        return len(segments) - 1, segments[-1].size_bytes  # the log end (the usual high watermark): no read
    i = _segment_index(bases, offset)
    for j in range(i, len(segments)):
        found = segments[j].translate_offset(offset)
        if found is not None:
            return j, found[0]
    return len(segments) - 1, segments[-1].size_bytes


def _record_timestamp(seg: LogSegment, position: int, offset: int) -> int | None:
    """The timestamp of the first record at or after `offset` in the batch at `position`."""
    header = seg.read_header(position)
    if header is None:
        return None
    try:
        for record_offset, timestamp_ms in record_timestamps(seg.read_bytes(position, header.size_bytes), header):
            if record_offset >= offset:
                return timestamp_ms
    except ValueError:
        pass  # undecodable records section: fall back on the batch's first timestamp
    return header.base_timestamp


def partition_lag(log: Log, committed_offset: int, now_ms: int) -> PartitionLag:
    """The lag of a group that committed `committed_offset` (the next offset it will read) on `log`."""
    high_watermark = log.high_watermark
    if committed_offset >= high_watermark:
        return CAUGHT_UP
    lag_records = high_watermark - committed_offset
    if committed_offset < log.log_start_offset:
        # Retention (or DeleteRecords) already removed records this group had not read.
        committed_offset = log.log_start_offset
        lost = True
    else:
        lost = False
    segments = log.segments
    bases = [s.base_offset for s in segments]
    start_seg, start_pos = _position(segments, bases, committed_offset)
    end_seg, end_pos = _position(segments, bases, high_watermark)
    lag_bytes = sum(s.size_bytes for s in segments[start_seg:end_seg]) - start_pos + end_pos
    timestamp_ms = _record_timestamp(segments[start_seg], start_pos, committed_offset)
    lag_ms = max(0, now_ms - timestamp_ms) if timestamp_ms is not None and timestamp_ms >= 0 else 0
    if lost:
        return PartitionLag(lag_records, max(0, lag_bytes), lag_ms, 0.0, 0.0)
    config = log.config
    remaining_ms = math.inf
    if config.retention_ms >= 0:
        remaining_ms = float(max(0, segments[start_seg].largest_timestamp_ms() + config.retention_ms - now_ms))
    remaining_bytes = math.inf
    if config.retention_bytes >= 0:
        # Retention deletes segments from the front while size - retention.bytes covers them whole: the
        # one holding our oldest unread record goes once the log grows past retention.bytes plus every
        # byte up to and including that segment.
        through = sum(s.size_bytes for s in segments[: start_seg + 1])
        total = sum(s.size_bytes for s in segments)
        remaining_bytes = float(max(0, config.retention_bytes + through - total))
    return PartitionLag(lag_records, max(0, lag_bytes), lag_ms, remaining_ms, remaining_bytes)
