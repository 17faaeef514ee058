"""Invariants of a partition log that hold whatever a client sends, checked with `raise`, not `assert`, so
they survive `python -O` (TigerBeetle's rule: assertions document invariants; ours must not vanish).

A violation is our own bug, never a client's doing: StorageInvariantError takes the partition offline
through the caller (like any storage error) instead of letting a bad offset reach the disk or a fetch.
"""

from __future__ import annotations


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
