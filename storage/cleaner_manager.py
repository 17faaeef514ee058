"""Which log the cleaner cleans next, and how far (Kafka's LogCleanerManager), plus its checkpoint and throttler.

- `cleanable_range`: Kafka's cleanableOffsets.  The first dirty offset is the checkpointed one (reset to
  the log start when it is out of range); the first uncleanable offset is the smallest of the last stable
  offset (itself at most the high watermark: no open transaction's data and nothing not yet replicated is
  cleaned), the active segment's base, and the base of the first dirty segment whose newest record is
  younger than min.compaction.lag.ms (KIP-58).  Unlike Kafka we then round it down to a segment base, so
  a cleaning never maps a record at or above it (Kafka maps the whole segment holding the LSO).
- the dirty ratio: dirty bytes / (clean + dirty bytes) over the segments below that point.
- `grab_filthiest_log`: among logs not being cleaned and not marked uncleanable, those whose ratio passes
  min.cleanable.dirty.ratio or whose oldest dirty record is older than max.compaction.lag.ms (KIP-354)
  are eligible; the one with the highest ratio is cleaned first.
- `cleaner-offset-checkpoint` in the data directory: the first dirty offset per log, Kafka's file and format.
"""

from __future__ import annotations

import bisect
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from samsa.kproto.batch import CorruptBatchError
from samsa.storage.checkpoint import CorruptCheckpointError, read_offset_checkpoint, write_offset_checkpoint
from samsa.storage.file_io import FileIO
from samsa.storage.log import Log
from samsa.storage.txn_index import last_stable_offset

CLEANER_OFFSET_CHECKPOINT = "cleaner-offset-checkpoint"
LONG_MAX = 9223372036854775807


@dataclass(frozen=True, slots=True)
class CleanableRange:
    """A log's figures for the chooser (Kafka's LogToClean)."""

    first_dirty_offset: int
    first_uncleanable_offset: int  # a segment base: everything below it may be cleaned
    clean_bytes: int
    dirty_bytes: int  # the cleanable part's bytes at or above the first dirty offset
    max_compaction_delay_ms: int  # > 0: the oldest dirty record waited longer than max.compaction.lag.ms

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.dirty_bytes

    @property
    def cleanable_ratio(self) -> float:
        return self.dirty_bytes / self.total_bytes if self.total_bytes else 0.0


def cleanable_range(log: Log, checkpointed_offset: int | None, now_ms: int) -> CleanableRange:
    """Kafka's LogCleanerManager.cleanableOffsets, over whole segments."""
    segments = log.segments
    start, leo = log.log_start_offset, log.log_end_offset
    first_dirty = checkpointed_offset if checkpointed_offset is not None else start
    if not start <= first_dirty <= leo:
        first_dirty = start  # Kafka resets a checkpoint out of range to the log start
    config = log.config
    bound = min(last_stable_offset(log.producer_states.values(), log.high_watermark), segments[-1].base_offset)
    bases = [s.base_offset for s in segments]
    first_dirty_index = max(0, bisect.bisect_right(bases, first_dirty) - 1)
    if config.min_compaction_lag_ms > 0:
        for seg in segments[first_dirty_index:-1]:
            if seg.base_offset >= bound:
                break
            if seg.largest_timestamp_ms() > now_ms - config.min_compaction_lag_ms:
                bound = seg.base_offset
                break
    uncleanable = bases[max(0, bisect.bisect_right(bases, bound) - 1)]
    clean_bytes = dirty_bytes = 0
    for i, seg in enumerate(segments[:-1]):
        if seg.base_offset >= uncleanable:
            break
        if bases[i + 1] <= first_dirty:
            clean_bytes += seg.size_bytes
        else:
            dirty_bytes += seg.size_bytes
    delay = 0
    if 0 <= config.max_compaction_lag_ms < LONG_MAX and first_dirty < uncleanable:
        seg = segments[first_dirty_index]
        try:
            header = seg.read_header(0)
        except CorruptBatchError:
            header = None
        first_ts = header.max_timestamp if header is not None and header.max_timestamp >= 0 else seg.created_ms
        delay = max(0, now_ms - first_ts - config.max_compaction_lag_ms)
    return CleanableRange(first_dirty, max(uncleanable, first_dirty) if dirty_bytes else first_dirty,
                          clean_bytes, dirty_bytes, delay)


@dataclass(frozen=True, slots=True)
class LogCleaningCandidate:
    key: tuple[str, int]
    cleanable: CleanableRange
    min_cleanable_dirty_ratio: float


def grab_filthiest_log(candidates: Iterable[LogCleaningCandidate], in_progress: set[tuple[str, int]],
                       uncleanable: set[tuple[str, int]]) -> LogCleaningCandidate | None:
    """Kafka's grabFilthiestCompactedLog: the eligible log with the highest dirty ratio, or None."""
    best: LogCleaningCandidate | None = None
    for c in candidates:
        if c.key in in_progress or c.key in uncleanable:
            continue
        r = c.cleanable
        needs_now = r.max_compaction_delay_ms > 0 and r.dirty_bytes > 0
        if not (needs_now or (r.dirty_bytes > 0 and r.cleanable_ratio > c.min_cleanable_dirty_ratio)):
            continue
        if best is None or r.cleanable_ratio > best.cleanable.cleanable_ratio:
            best = c
    return best


def read_cleaner_checkpoint(io: FileIO, data_dir: Path) -> dict[tuple[str, int], int]:
    """The first dirty offset per log; empty if the file is missing or corrupt (every log is then dirty
    from its start, which only costs a cleaning)."""
    try:
        return read_offset_checkpoint(io, data_dir / CLEANER_OFFSET_CHECKPOINT) or {}
    except CorruptCheckpointError:
        return {}


def write_cleaner_checkpoint(io: FileIO, data_dir: Path, offsets: dict[tuple[str, int], int]) -> None:
    write_offset_checkpoint(io, data_dir / CLEANER_OFFSET_CHECKPOINT, offsets)


class Throttler:
    """log.cleaner.io.max.bytes.per.second: sleeps when the bytes counted run ahead of the rate (Kafka's
    Throttler, checked every `check_interval_s`)."""

    def __init__(self, bytes_per_second: float, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], None] = time.sleep, check_interval_s: float = 0.1) -> None:
        self.bytes_per_second = bytes_per_second
        self._clock = clock
        self._sleep = sleep
        self._interval = check_interval_s
        self._period_start = clock()
        self._count = 0

    def __call__(self, n_bytes: int) -> None:
        if self.bytes_per_second <= 0 or self.bytes_per_second == float("inf"):
            return
        self._count += n_bytes
        now = self._clock()
        elapsed = now - self._period_start
        if elapsed < self._interval:
            return
        wanted = self._count / self.bytes_per_second
        if wanted > elapsed:
            self._sleep(wanted - elapsed)
        self._period_start = self._clock()
        self._count = 0
