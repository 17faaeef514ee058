"""Invariants of a partition log that hold whatever a client sends, checked with `raise`, not `assert`, so
they survive `python -O` (TigerBeetle's rule: assertions document invariants; ours must not vanish).

A violation is our own bug, never a client's doing: StorageInvariantError takes the partition offline
through the caller (like any storage error) instead of letting a bad offset reach the disk or a fetch.
"""

from __future__ import annotations

from samsa.storage.segment import MAX_RELATIVE_OFFSET


class StorageInvariantError(RuntimeError):
    """A partition log's offsets disagree with each other, or a batch header is not what was written."""


def check_offsets(where: object, log_start_offset: int, high_watermark: int, log_end_offset: int) -> None:
    """log start <= high watermark <= log end: what every reader and the replication protocol assume."""
    if not 0 <= log_start_offset <= high_watermark <= log_end_offset:
        raise StorageInvariantError(
            f"{where}: offsets out of order: log start {log_start_offset}, high watermark {high_watermark}, "
            f"log end {log_end_offset}")


def check_appended(where: object, first_offset: int, last_offset: int, log_end_offset: int) -> None:
    """After an append, the batch sits exactly at the end: offsets only grow, contiguous with the log end."""
    if not first_offset <= last_offset == log_end_offset - 1:
        raise StorageInvariantError(
            f"{where}: appended offsets {first_offset}..{last_offset} but the log end is {log_end_offset}")


def check_read_header(where: object, magic: int, base_offset: int, last_offset: int, fetch_offset: int) -> None:
    """A batch read for a fetch is v2 and holds the offset asked for (or starts after it, past a gap)."""
    if magic != 2 or last_offset < fetch_offset or last_offset < base_offset:
        raise StorageInvariantError(
            f"{where}: read batch magic {magic} offsets {base_offset}..{last_offset} for fetch offset {fetch_offset}")


def check_write_header(where: object, magic: int, base_offset: int, last_offset: int, segment_base_offset: int,
                       segment_next_offset: int) -> None:
    """Before a batch reaches the disk: v2, placed at the active segment's end (a follower of a compacted
    topic may leave a gap there), and every offset in it representable in that segment's offset index
    (Kafka's LogSegment.ensureOffsetInRange). A roll that went wrong would otherwise write a batch over
    offsets already written, or one the index cannot find."""
    if not (magic == 2 and segment_base_offset <= segment_next_offset <= base_offset <= last_offset
            and last_offset - segment_base_offset <= MAX_RELATIVE_OFFSET):
        raise StorageInvariantError(
            f"{where}: batch magic {magic} offsets {base_offset}..{last_offset} does not fit the active segment "
            f"(base {segment_base_offset}, next offset {segment_next_offset})")


def check_high_watermark_advance(where: object, high_watermark: int, new_high_watermark: int,
                                 log_end_offset: int) -> None:
    """A leader's (or a follower's) high watermark only moves forward, and never past the log end: only a
    truncation moves it back (Kafka: UnifiedLog.maybeIncrementHighWatermark refuses an offset past the
    log end offset)."""
    if not high_watermark <= new_high_watermark <= log_end_offset:
        raise StorageInvariantError(
            f"{where}: high watermark would move from {high_watermark} to {new_high_watermark} "
            f"(log end {log_end_offset}); only a truncation moves it back")
