"""Leader epoch cache: epoch -> start offset, persisted as `leader-epoch-checkpoint` (Kafka's LeaderEpochFileCache)."""

from __future__ import annotations

import bisect
from pathlib import Path

from samsa.storage.checkpoint import LEADER_EPOCH_CHECKPOINT, write_epoch_checkpoint
from samsa.storage.file_io import FileIO

UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


class LeaderEpochCache:
    def __init__(self, file_io: FileIO, directory: Path, entries: list[tuple[int, int]] | None = None) -> None:
        self._file_io = file_io
        self._path = directory / LEADER_EPOCH_CHECKPOINT
        self._epochs: list[int] = [e for e, _ in entries or []]
        self._offsets: list[int] = [o for _, o in entries or []]
        self.latest: int | None = None  # latest_epoch(), as an attribute for the append path; read-only
        # `latest` once the checkpoint file holds every entry, None while it lags (after assign(flush=False)):
        # the append path compares the batch's epoch with this, so the first append of an epoch recorded
        # without a flush writes the file.  Read-only outside this class.
        self.latest_written: int | None = None
        self._changed()

    def _changed(self) -> None:
        self.latest = self._epochs[-1] if self._epochs else None
        self.latest_written = None

    def reset(self, entries: list[tuple[int, int]]) -> None:
        """Replace the in-memory entries (on load); does not write the file."""
        self._epochs = [e for e, _ in entries]
        self._offsets = [o for _, o in entries]
        self._changed()
        self.latest_written = self.latest  # the entries are the file's (or none yet)

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(zip(self._epochs, self._offsets, strict=True))

    def latest_epoch(self) -> int | None:
        return self.latest

    def flush(self) -> None:
        write_epoch_checkpoint(self._file_io, self._path, self.entries)
        self.latest_written = self.latest

    def assign(self, epoch: int, start_offset: int, *, flush: bool = True) -> bool:
        """Record that `epoch` starts at `start_offset`; returns True if the cache changed.

        Like Kafka's assign(): entries that would break monotonicity (epoch >= the new one, or start
        offset >= the new one) are removed first; a repeat of the latest epoch changes nothing (but writes
        the file if `flush` and an earlier assign(flush=False) left it behind).
        """
        if epoch < 0:
            return False
        if self._epochs and self._epochs[-1] == epoch and self._offsets[-1] <= start_offset:
            if flush and self.latest_written != epoch:
                self.flush()
            return False
        while self._epochs and (self._epochs[-1] >= epoch or self._offsets[-1] >= start_offset):
            self._epochs.pop()
            self._offsets.pop()
        self._epochs.append(epoch)
        self._offsets.append(start_offset)
        self._changed()
        if flush:
            self.flush()
        return True

    def end_offset_for_epoch(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) as OffsetForLeaderEpoch answers; (-1, -1) when unknown."""
        if requested_epoch == UNDEFINED_EPOCH or not self._epochs:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if requested_epoch == self._epochs[-1]:
            return requested_epoch, log_end_offset
        higher = bisect.bisect_right(self._epochs, requested_epoch)
        if higher == len(self._epochs):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if higher == 0:
            # older than anything we know: the data is gone, answer with the first known epoch's start
            return requested_epoch, self._offsets[0]
        return self._epochs[higher - 1], self._offsets[higher]

    def truncate_from_end(self, end_offset: int) -> None:
        """Drop entries that start at or after `end_offset` (follower truncation)."""
        changed = False
        while self._offsets and self._offsets[-1] >= end_offset:
            self._epochs.pop()
            self._offsets.pop()
            changed = True
        if changed:
            self._changed()
            self.flush()

    def truncate_from_start(self, start_offset: int) -> None:
        """Drop entries wholly before `start_offset`, moving the one that covers it to `start_offset`."""
        i = bisect.bisect_right(self._offsets, start_offset)
        if i == 0:
            return
        if i - 1 == 0 and self._offsets[0] == start_offset:
            return
        del self._epochs[: i - 1]
        del self._offsets[: i - 1]
        self._offsets[0] = start_offset
        self._changed()
        self.flush()

    def clear(self) -> None:
        self._epochs.clear()
        self._offsets.clear()
        self._changed()
        self.flush()
