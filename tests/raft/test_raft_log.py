"""The in-memory Raft log: epoch cache lookups, fetch validation, truncation points, snapshots."""

from __future__ import annotations

from samsa.raft.log import Diverging, LogEntry, NeedSnapshot, RaftLog, Snapshot, SnapshotId, Valid


def _log(epochs: list[int], snapshot: Snapshot | None = None) -> RaftLog:
    start = snapshot.snapshot_id.end_offset if snapshot else 0
    return RaftLog(snapshot, [LogEntry(start + i, e, b"") for i, e in enumerate(epochs)])


def test_end_offset_for_epoch_is_the_start_of_the_next_epoch() -> None:
    log = _log([1, 1, 3, 3, 3, 5])
    assert log.end_offset_for_epoch(1) == (1, 2)
    assert log.end_offset_for_epoch(2) == (1, 2)  # no epoch 2: the largest epoch below it
    assert log.end_offset_for_epoch(3) == (3, 5)
    assert log.end_offset_for_epoch(5) == (5, 6)
    assert log.end_offset_for_epoch(9) == (5, 6)
    assert log.end_offset_for_epoch(0) == (0, 0)


def test_validate_offset_and_epoch() -> None:
    leader = _log([1, 1, 3, 3, 3])
    assert leader.validate_offset_and_epoch(0, 0) == Valid()
    assert leader.validate_offset_and_epoch(2, 1) == Valid()
    assert leader.validate_offset_and_epoch(5, 3) == Valid()
    # The follower has epoch-1 entries past where epoch 1 ended here.
    assert leader.validate_offset_and_epoch(4, 1) == Diverging(1, 2)
    # The follower has an epoch this log never had.
    assert leader.validate_offset_and_epoch(4, 2) == Diverging(1, 2)


def test_validate_below_the_log_start_asks_for_the_snapshot() -> None:
    snap = Snapshot(SnapshotId(10, 2), b"image")
    leader = _log([2, 4], snap)
    assert leader.validate_offset_and_epoch(3, 1) == NeedSnapshot(snap.snapshot_id)
    assert leader.validate_offset_and_epoch(10, 1) == NeedSnapshot(snap.snapshot_id)
    assert leader.validate_offset_and_epoch(10, 2) == Valid()
    assert leader.validate_offset_and_epoch(12, 4) == Valid()
    assert leader.validate_offset_and_epoch(12, 3) == Diverging(2, 11)


def test_truncation_offset_follows_kafka_truncate_to_end_offset() -> None:
    follower = _log([1, 1, 2, 2, 2])
    assert follower.truncation_offset_for(Diverging(1, 2)) == 2
    assert follower.truncation_offset_for(Diverging(2, 3)) == 3  # min(local end of 2 = 5, leader's 3)
    assert follower.truncation_offset_for(Diverging(0, 0)) == 0
    follower.truncate_to(2)
    assert follower.end_offset == 2 and follower.last_fetched_epoch == 1
    assert follower.end_offset_for_epoch(2) == (1, 2)


def test_install_snapshot_keeps_a_log_that_extends_it() -> None:
    log = _log([1, 1, 2, 2])
    snap = Snapshot(SnapshotId(3, 2), b"image")
    assert log.extends(snap.snapshot_id)
    assert not log.extends(SnapshotId(3, 1))
    log.install_snapshot(snap)
    assert (log.log_start_offset, log.end_offset, log.last_fetched_epoch) == (3, 4, 2)
    assert log.epoch_at(2) == 2
    assert [e.offset for e in log.entries] == [3]


def test_restart_drops_entries_a_snapshot_already_covers() -> None:
    # A crash between PersistSnapshot and AdvanceLogStartOffset leaves the prefix on disk.
    snap = Snapshot(SnapshotId(2, 1), b"image")
    log = RaftLog(snap, [LogEntry(i, 1, b"") for i in range(4)])
    assert (log.log_start_offset, log.end_offset) == (2, 4)


def test_restart_drops_a_suffix_that_does_not_extend_the_snapshot() -> None:
    # The snapshot (4, epoch 3) was persisted, the divergent log [.., 3@2, 4@2] not yet truncated.
    snap = Snapshot(SnapshotId(4, 3), b"image")
    log = RaftLog(snap, [LogEntry(i, 2, b"") for i in range(6)])
    assert (log.log_start_offset, log.end_offset, log.last_fetched_epoch) == (4, 4, 3)
    assert RaftLog(snap, [LogEntry(4, 3, b""), LogEntry(5, 3, b"")]).end_offset == 6
