"""The replicated log as the Raft core sees it: entries, the latest snapshot, and the epoch cache.

This is an in-memory model (Kafka: KafkaMetadataLog over UnifiedLog + LeaderEpochFileCache). The core
mutates it and tells the driver, through actions, what to make durable; the driver backs it with
storage and rebuilds it on restart from what survived.
"""

from __future__ import annotations

import bisect
import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from samsa.raft.invariants import InvariantViolation
from samsa.raft.voter_set import VoterSet

__all__ = [
    "Diverging",
    "EntryKind",
    "LogEntry",
    "NeedSnapshot",
    "RaftLog",
    "Snapshot",
    "SnapshotId",
    "Valid",
]


class EntryKind(enum.IntEnum):
    DATA = 0
    LEADER_CHANGE = 1  # control record appended by every new leader (Kafka: LeaderChangeMessage)
    KRAFT_VERSION = 2  # control record: KRaftVersionRecord (KIP-853), payload its bytes
    VOTERS = 3  # control record: VotersRecord (KIP-853), payload its bytes; the voter set from here on


@dataclass(frozen=True, slots=True)
class LogEntry:
    offset: int
    epoch: int
    payload: bytes
    kind: EntryKind = EntryKind.DATA


@dataclass(frozen=True, slots=True, order=True)
class SnapshotId:
    """Kafka's OffsetAndEpoch for a snapshot: it holds every entry below `end_offset`."""

    end_offset: int
    epoch: int  # epoch of the entry at end_offset - 1


@dataclass(frozen=True, slots=True)
class Snapshot:
    snapshot_id: SnapshotId
    data: bytes  # the state machine's image
    voters: bytes = b""  # the VotersRecord in force at end_offset (empty: none in the log yet)


@dataclass(frozen=True, slots=True)
class Valid:
    pass


@dataclass(frozen=True, slots=True)
class Diverging:
    epoch: int
    end_offset: int


@dataclass(frozen=True, slots=True)
class NeedSnapshot:
    snapshot_id: SnapshotId


class RaftLog:
    """Entries [log_start_offset, end_offset); everything below log_start_offset is in `snapshot`."""

    def __init__(self, snapshot: Snapshot | None = None, entries: Iterable[LogEntry] = ()) -> None:
        self.snapshot = snapshot
        self.log_start_offset = snapshot.snapshot_id.end_offset if snapshot else 0
        self._entries: list[LogEntry] = []
        # Epoch cache (Kafka: LeaderEpochFileCache): parallel lists, epochs strictly increasing.
        self._epochs: list[int] = []
        self._epoch_starts: list[int] = []
        # KIP-853 (Kafka: KRaftControlRecordStateMachine): the VOTERS entries of the log, in order, as
        # (offset, voter set); the snapshot's set stands below them. `voters_generation` counts changes.
        self._voter_history: list[tuple[int, VoterSet]] = []
        self._snapshot_voters = _snapshot_voter_set(snapshot)
        self.voters_generation = 0
        self.append(self._entries_after_snapshot(list(entries)))

    def _entries_after_snapshot(self, entries: list[LogEntry]) -> list[LogEntry]:
        """What of the log on disk continues the snapshot (Kafka: truncateToLatestSnapshot at startup).

        A crash after PersistSnapshot but before the log was cut leaves entries below the snapshot
        (dropped) and maybe a suffix that does not extend it (dropped too: it was never validated).
        """
        if self.snapshot is None or not entries:
            return entries
        end, epoch = self.snapshot.snapshot_id.end_offset, self.snapshot.snapshot_id.epoch
        if entries[0].offset == end:
            return entries
        base = entries[0].offset
        if base < end <= base + len(entries) and entries[end - 1 - base].epoch == epoch:
            return entries[end - base :]
        return []

    # -- reads -----------------------------------------------------------------------------------

    @property
    def end_offset(self) -> int:
        return self.log_start_offset + len(self._entries)

    @property
    def last_fetched_epoch(self) -> int:
        if self._entries:
            return self._entries[-1].epoch
        return self.snapshot.snapshot_id.epoch if self.snapshot else 0

    @property
    def voter_set(self) -> VoterSet | None:
        """The latest voter set in the log (committed or not) or the snapshot; None: none stored yet."""
        return self._voter_history[-1][1] if self._voter_history else self._snapshot_voters

    @property
    def voter_set_offset(self) -> int | None:
        """Offset of the VOTERS entry that set voter_set; -1 when it came from the snapshot; None: none."""
        if self._voter_history:
            return self._voter_history[-1][0]
        return -1 if self._snapshot_voters is not None else None

    def voter_set_at(self, end_offset: int) -> VoterSet | None:
        """The voter set in force for a snapshot of every entry below `end_offset`."""
        found = self._snapshot_voters
        for offset, voters in self._voter_history:
            if offset < end_offset:
                found = voters
        return found

    @property
    def entries(self) -> Sequence[LogEntry]:
        return self._entries

    def entry(self, offset: int) -> LogEntry:
        if not self.log_start_offset <= offset < self.end_offset:
            raise InvariantViolation(f"entry {offset} outside [{self.log_start_offset}, {self.end_offset})")
        return self._entries[offset - self.log_start_offset]

    def epoch_at(self, offset: int) -> int:
        """Epoch of the entry at `offset`, which may be the last entry covered by the snapshot."""
        if self.snapshot and offset == self.log_start_offset - 1:
            return self.snapshot.snapshot_id.epoch
        return self.entry(offset).epoch

    def read(self, from_offset: int, max_count: int, max_bytes: int | None = None) -> tuple[LogEntry, ...]:
        """Up to `max_count` entries from `from_offset`, and no more than `max_bytes` of payload beyond the
        first entry (which is always returned, however large, so a fetch always makes progress)."""
        if not self.log_start_offset <= from_offset <= self.end_offset:
            raise InvariantViolation(f"read from {from_offset} outside [{self.log_start_offset}, {self.end_offset}]")
        start = from_offset - self.log_start_offset
        entries = self._entries[start : start + max_count]
        if max_bytes is None or not entries:
            return tuple(entries)
        total = 0
        for i, entry in enumerate(entries):
            total += len(entry.payload)
            if total > max_bytes and i > 0:
                return tuple(entries[:i])
        return tuple(entries)

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """(largest epoch <= `epoch` in the log, the offset where it ends). Kafka: endOffsetForEpoch."""
        i = bisect.bisect_right(self._epochs, epoch) - 1
        if i < 0:
            if self.snapshot:
                return self.snapshot.snapshot_id.epoch, self.log_start_offset
            return 0, 0
        end = self._epoch_starts[i + 1] if i + 1 < len(self._epochs) else self.end_offset
        return self._epochs[i], end

    def validate_offset_and_epoch(self, offset: int, epoch: int) -> Valid | Diverging | NeedSnapshot:
        """Is a follower's log, ending at `offset` with an entry of `epoch`, a prefix of ours?

        Kafka: KafkaMetadataLog.validateOffsetAndEpoch.
        """
        snap = self.snapshot.snapshot_id if self.snapshot else None
        if snap is not None and offset == snap.end_offset and epoch == snap.epoch:
            return Valid()
        if snap is None and offset == 0:
            return Valid()
        if snap is not None and (
            offset < self.log_start_offset
            or (offset == self.log_start_offset and epoch != snap.epoch)
            or epoch < snap.epoch
        ):
            return NeedSnapshot(snap)
        end_epoch, end_offset = self.end_offset_for_epoch(epoch)
        if end_epoch != epoch or end_offset < offset:
            return Diverging(end_epoch, end_offset)
        return Valid()

    def truncation_offset_for(self, diverging: Diverging) -> int:
        """Where a follower truncates when the leader reports a divergence. Kafka: truncateToEndOffset."""
        if diverging.epoch == 0:
            return min(diverging.end_offset, self.end_offset)
        local_epoch, local_end = self.end_offset_for_epoch(diverging.epoch)
        if local_epoch == diverging.epoch:
            return min(local_end, diverging.end_offset)
        return local_end

    # -- mutations (each one is mirrored by an action the driver makes durable) ------------------

    def append(self, entries: Sequence[LogEntry]) -> None:
        for entry in entries:
            if entry.offset != self.end_offset:
                raise InvariantViolation(
                    f"entry {entry.offset} appended at the log end {self.end_offset}: the log is contiguous")
            if entry.epoch < self.last_fetched_epoch:
                raise InvariantViolation(f"entry of epoch {entry.epoch} after one of epoch {self.last_fetched_epoch}")
            if not self._epochs or entry.epoch > self._epochs[-1]:
                self._epochs.append(entry.epoch)
                self._epoch_starts.append(entry.offset)
            self._entries.append(entry)
            if entry.kind == EntryKind.VOTERS:
                self._voter_history.append((entry.offset, VoterSet.decode(entry.payload)))
                self.voters_generation += 1

    def truncate_to(self, offset: int) -> None:
        """Drop every entry at or above `offset` (a follower discarding a divergent suffix)."""
        if not self.log_start_offset <= offset <= self.end_offset:
            raise InvariantViolation(f"truncation to {offset} outside [{self.log_start_offset}, {self.end_offset}]")
        del self._entries[offset - self.log_start_offset :]
        while self._epoch_starts and self._epoch_starts[-1] >= offset:
            self._epochs.pop()
            self._epoch_starts.pop()
        while self._voter_history and self._voter_history[-1][0] >= offset:
            self._voter_history.pop()  # KIP-853: back to the previous voter set
            self.voters_generation += 1

    def extends(self, snapshot_id: SnapshotId) -> bool:
        """Does this log hold the entry at snapshot_id.end_offset - 1, with the snapshot's epoch?"""
        end = snapshot_id.end_offset
        if not (self.log_start_offset <= end <= self.end_offset) or end == 0:
            return end == 0
        return self.epoch_at(end - 1) == snapshot_id.epoch

    def install_snapshot(self, snapshot: Snapshot) -> None:
        """Adopt `snapshot` as the new log start, keeping the entries after it.

        The caller first truncates a log that does not extend the snapshot (everything after it would
        be unvalidated, Kafka: truncateToLatestSnapshot).
        """
        end = snapshot.snapshot_id.end_offset
        if end < self.log_start_offset:
            raise InvariantViolation(f"snapshot to {end} behind the log start {self.log_start_offset}")
        if not (self.extends(snapshot.snapshot_id) or self.end_offset == self.log_start_offset):
            raise InvariantViolation(f"snapshot {snapshot.snapshot_id} does not extend the log it replaces")
        keep = list(self._entries[end - self.log_start_offset :]) if end <= self.end_offset else []
        self.snapshot = snapshot
        self.log_start_offset = end
        self._entries = []
        self._epochs = []
        self._epoch_starts = []
        self._voter_history = []
        self._snapshot_voters = _snapshot_voter_set(snapshot)
        self.voters_generation += 1
        self.append(keep)


def _snapshot_voter_set(snapshot: Snapshot | None) -> VoterSet | None:
    if snapshot is None or not snapshot.voters:
        return None
    return VoterSet.decode(snapshot.voters)
