from __future__ import annotations

from pathlib import Path

import pytest
from storage_batches import NOW_MS, compress_batch, decode_values, make_batch, make_control_batch, open_log

from samsa.kproto.batch import iter_batches, parse_header
from samsa.storage import (
    CorruptRecordError,
    InconsistentOffsetsError,
    InvalidProducerEpochError,
    LogConfig,
    OffsetOutOfRangeError,
    OutOfOrderSequenceError,
)


def values(n: int, prefix: str = "v") -> list[bytes]:
    return [f"{prefix}{i}".encode() for i in range(n)]


def test_append_assigns_offsets_and_read_returns_whole_batches(log_dir: Path) -> None:
    log = open_log(log_dir)
    a = log.append_as_leader(make_batch(values(3)), leader_epoch=5, now_ms=NOW_MS)
    b = log.append_as_leader(bytearray(make_batch(values(2, "w"), base_offset=77)), leader_epoch=5, now_ms=NOW_MS)
    assert (a.first_offset, a.last_offset, a.position_bytes) == (0, 2, 0)
    assert (b.first_offset, b.last_offset) == (3, 4)
    assert b.position_bytes > 0 and a.log_append_time_ms == -1
    assert log.log_end_offset == 5
    data = log.read(1, max_bytes=1 << 20, max_offset=None).read_bytes()
    assert decode_values(data) == [(0, b"v0"), (1, b"v1"), (2, b"v2"), (3, b"w0"), (4, b"w1")]
    headers = [h for _, h in iter_batches(data)]  # CRCs still valid after offset/epoch rewrite
    assert [h.base_offset for h in headers] == [0, 3]
    assert all(h.partition_leader_epoch == 5 for h in headers)
    info = log.read(4, max_bytes=1 << 20, max_offset=None)
    assert info.first_offset == 3 and decode_values(info.read_bytes())[0] == (3, b"w0")
    log.close()


def test_read_bounds_max_offset_and_min_one_batch(log_dir: Path) -> None:
    log = open_log(log_dir)
    for i in range(5):
        log.append_as_leader(make_batch(values(2, f"b{i}-")), leader_epoch=0, now_ms=NOW_MS)
    size = len(make_batch(values(2, "b0-")))
    assert log.read(0, max_bytes=1, max_offset=None).size_bytes == size
    assert log.read(0, max_bytes=1, max_offset=None, min_one_batch=False).size_bytes == 0
    assert log.read(0, max_bytes=2 * size + 5, max_offset=None).size_bytes == 2 * size
    # never past max_offset: a batch straddling it is left out
    assert log.read(0, max_bytes=1 << 20, max_offset=5).size_bytes == 2 * size
    assert log.read(0, max_bytes=1 << 20, max_offset=6).size_bytes == 3 * size
    empty = log.read(6, max_bytes=1 << 20, max_offset=6)
    assert empty.regions == () and empty.first_offset == 6
    assert log.read(10, max_bytes=100, max_offset=None).regions == ()
    with pytest.raises(OffsetOutOfRangeError):
        log.read(11, max_bytes=100, max_offset=None)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, max_bytes=100, max_offset=None)


def test_roll_on_size_and_index_lookups_across_segments(log_dir: Path) -> None:
    config = LogConfig(segment_bytes=4000, index_interval_bytes=200)
    log = open_log(log_dir, config)
    for i in range(100):
        log.append_as_leader(make_batch([b"x" * 100, str(i).encode()]), leader_epoch=1, now_ms=NOW_MS)
    assert len(log.segments) >= 4
    for offset in range(0, 200, 7):
        info = log.read(offset, max_bytes=1, max_offset=None)
        got = decode_values(info.read_bytes())
        assert got[0][0] <= offset <= got[-1][0]
    names = sorted(p.name for p in log_dir.iterdir())
    assert "00000000000000000000.log" in names and "leader-epoch-checkpoint" in names
    assert any(n.endswith(".snapshot") for n in names)
    log.close()
    log = open_log(log_dir, config)
    assert log.log_end_offset == 200
    assert decode_values(log.read(199, max_bytes=1, max_offset=None).read_bytes())[-1] == (199, b"99")


def test_log_append_time(log_dir: Path) -> None:
    log = open_log(log_dir, LogConfig(message_timestamp_type="LogAppendTime"))
    info = log.append_as_leader(make_batch(values(3), base_timestamp=5), leader_epoch=0, now_ms=NOW_MS + 9)
    assert info.log_append_time_ms == NOW_MS + 9 and info.max_timestamp_ms == NOW_MS + 9
    data = log.read(0, max_bytes=1000, max_offset=None).read_bytes()
    (_, h), = list(iter_batches(data))  # CRC recomputed
    assert h.is_log_append_time and h.max_timestamp == NOW_MS + 9
    assert log.fetch_offset_for_timestamp(NOW_MS) == (0, NOW_MS + 9, 0)


def test_timestamp_lookups(log_dir: Path) -> None:
    log = open_log(log_dir, LogConfig(segment_bytes=600, index_interval_bytes=100))
    ts = NOW_MS
    for i in range(30):
        log.append_as_leader(make_batch(values(3), timestamps=[ts + 10 * i, ts + 10 * i + 5, ts + 10 * i + 3]),
                             leader_epoch=2, now_ms=NOW_MS)
    assert len(log.segments) > 2
    assert log.fetch_offset_for_timestamp(ts) == (0, ts, 2)
    assert log.fetch_offset_for_timestamp(ts + 4) == (1, ts + 5, 2)
    assert log.fetch_offset_for_timestamp(ts + 106) == (33, ts + 110, 2)
    assert log.fetch_offset_for_timestamp(ts + 295) == (88, ts + 295, 2)
    assert log.fetch_offset_for_timestamp(ts + 296) is None
    assert log.max_timestamp_offset() == (88, ts + 295, 2)
    log.close()
    for recovery_point in (None, 90, 90):  # a full recovery rebuilds time indexes that a later open trusts
        log = open_log(log_dir, LogConfig(segment_bytes=600, index_interval_bytes=100),
                       recovery_point=recovery_point)
        assert log.fetch_offset_for_timestamp(ts + 106) == (33, ts + 110, 2)
        assert log.fetch_offset_for_timestamp(ts + 14) == (4, ts + 15, 2)
        assert log.max_timestamp_offset() == (88, ts + 295, 2)
        for ts_query in range(ts, ts + 300, 17):
            _, found_ts, _ = log.fetch_offset_for_timestamp(ts_query) or (-1, -1, -1)
            assert found_ts >= ts_query
        log.close()


def test_truncate_to_and_epoch_cache(log_dir: Path) -> None:
    log = open_log(log_dir, LogConfig(segment_bytes=500))
    for epoch in (1, 1, 2, 2, 4, 4, 4):
        for _ in range(3):
            log.append_as_leader(make_batch(values(2)), leader_epoch=epoch, now_ms=NOW_MS)
    assert log.epoch_entries == [(1, 0), (2, 12), (4, 24)]
    assert log.end_offset_for_epoch(1) == (1, 12)
    assert log.end_offset_for_epoch(3) == (2, 24)
    assert log.end_offset_for_epoch(4) == (4, 42)
    assert log.end_offset_for_epoch(0) == (0, 0)
    assert log.end_offset_for_epoch(5) == (-1, -1)
    log.update_high_watermark(40)
    log.truncate_to(25)  # mid-batch: the whole batch [24, 25] goes
    assert log.log_end_offset == 24 and log.high_watermark == 24
    assert log.epoch_entries == [(1, 0), (2, 12)]
    assert log.latest_epoch() == 2
    info = log.append_as_follower(make_batch(values(2), base_offset=24, leader_epoch=7), now_ms=NOW_MS)
    assert info.first_offset == 24 and log.epoch_entries[-1] == (7, 24)
    log.close()
    log = open_log(log_dir, LogConfig(segment_bytes=500))
    assert log.epoch_entries == [(1, 0), (2, 12), (7, 24)]
    assert log.log_end_offset == 26
    log.truncate_fully_and_start_at(100)
    assert (log.log_start_offset, log.log_end_offset, log.latest_epoch()) == (100, 100, None)
    log.append_as_follower(make_batch(values(1), base_offset=100, leader_epoch=8), now_ms=NOW_MS)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(99, max_bytes=10, max_offset=None)
    assert decode_values(log.read(100, max_bytes=10, max_offset=None).read_bytes()) == [(100, b"v0")]


def test_follower_rejects_gap_and_overlap(log_dir: Path) -> None:
    log = open_log(log_dir)
    log.append_as_follower(make_batch(values(2), base_offset=0, leader_epoch=1), now_ms=NOW_MS)
    with pytest.raises(InconsistentOffsetsError):
        log.append_as_follower(make_batch(values(2), base_offset=1, leader_epoch=1), now_ms=NOW_MS)
    with pytest.raises(InconsistentOffsetsError):
        log.append_as_follower(make_batch(values(2), base_offset=3, leader_epoch=1), now_ms=NOW_MS)
    bad = bytearray(make_batch(values(2), base_offset=2, leader_epoch=1))
    bad[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        log.append_as_follower(bad, now_ms=NOW_MS)
    assert log.log_end_offset == 2


def test_leader_rejects_garbage(log_dir: Path) -> None:
    log = open_log(log_dir)
    good = make_batch(values(2))
    for bad in (b"", good[:30], good + good[:70], b"\x00" * 61):
        with pytest.raises(CorruptRecordError):
            log.append_as_leader(bad, leader_epoch=0, now_ms=NOW_MS)
    assert log.log_end_offset == 0
    info = log.append_as_leader(good + good, leader_epoch=0, now_ms=NOW_MS)
    assert (info.first_offset, info.last_offset) == (0, 3)


def test_idempotent_producer(log_dir: Path) -> None:
    log = open_log(log_dir)
    pid = 42

    def batch(seq: int, n: int = 2, epoch: int = 0) -> bytes:
        return make_batch(values(n), producer_id=pid, producer_epoch=epoch, base_sequence=seq)

    log.append_as_leader(make_batch(values(1)), leader_epoch=0, now_ms=NOW_MS)
    first = log.append_as_leader(batch(0), leader_epoch=0, now_ms=NOW_MS)
    for seq in range(2, 12, 2):
        log.append_as_leader(batch(seq), leader_epoch=0, now_ms=NOW_MS)
    assert log.log_end_offset == 13
    dup = log.append_as_leader(batch(10), leader_epoch=0, now_ms=NOW_MS)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (11, 12)
    assert log.log_end_offset == 13
    assert first.first_offset == 1
    with pytest.raises(OutOfOrderSequenceError):
        log.append_as_leader(batch(13), leader_epoch=0, now_ms=NOW_MS)
    with pytest.raises(OutOfOrderSequenceError):  # older than the 5 remembered: not a known duplicate
        log.append_as_leader(batch(0), leader_epoch=0, now_ms=NOW_MS)
    with pytest.raises(OutOfOrderSequenceError):  # a new epoch must start at 0
        log.append_as_leader(batch(5, epoch=1), leader_epoch=0, now_ms=NOW_MS)
    log.append_as_leader(batch(0, epoch=1), leader_epoch=0, now_ms=NOW_MS)
    with pytest.raises(InvalidProducerEpochError):
        log.append_as_leader(batch(12, epoch=0), leader_epoch=0, now_ms=NOW_MS)
    entry = log.producer_state(pid)
    assert entry is not None and entry.producer_epoch == 1 and entry.last_seq == 1
    # transactional batch + control marker pass through and track the open transaction
    log.append_as_leader(make_batch(values(1), producer_id=pid, producer_epoch=1, base_sequence=2,
                                    attributes=0x10), leader_epoch=0, now_ms=NOW_MS)
    entry = log.producer_state(pid)
    assert entry is not None and entry.current_txn_first_offset == 15
    log.append_as_leader(make_control_batch(producer_id=pid, producer_epoch=1), leader_epoch=0, now_ms=NOW_MS)
    entry = log.producer_state(pid)
    assert entry is not None and entry.current_txn_first_offset is None
    data = log.read(16, max_bytes=1000, max_offset=None).read_bytes()
    assert parse_header(data).is_control
    log.close()
    # state survives restart via the snapshot, and is rebuilt from the log without it
    log = open_log(log_dir)
    assert log.append_as_leader(batch(0, epoch=1), leader_epoch=0, now_ms=NOW_MS).first_offset == 13
    log.close()
    for snap in log_dir.glob("*.snapshot"):
        snap.unlink()
    log = open_log(log_dir)
    dup = log.append_as_leader(batch(0, epoch=1), leader_epoch=0, now_ms=NOW_MS)
    assert dup.duplicate and dup.first_offset == 13
    entry = log.producer_state(pid)
    assert entry is not None and entry.last_seq == 2


def test_retention_and_delete_records(log_dir: Path) -> None:
    config = LogConfig(segment_bytes=400, retention_ms=1000, file_delete_delay_ms=0)
    log = open_log(log_dir, config)
    for i in range(20):
        log.append_as_leader(make_batch(values(2), base_timestamp=NOW_MS + i), leader_epoch=0, now_ms=NOW_MS)
    assert len(log.segments) > 3
    assert log.delete_old_segments(NOW_MS + 500) == 0
    assert log.delete_old_segments(NOW_MS + 5000) == 0  # nothing below the high watermark yet
    log.update_high_watermark(20)
    deleted = log.delete_old_segments(NOW_MS + 5000)
    assert deleted > 0
    assert log.log_start_offset == log.segments[0].base_offset and log.log_start_offset <= 20
    assert all(s.base_offset <= 20 for s in log.segments[:1])
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, max_bytes=100, max_offset=None)
    with pytest.raises(OffsetOutOfRangeError):
        log.maybe_increment_log_start_offset(21)
    log.update_high_watermark(40)
    target = log.segments[1].base_offset + 1
    assert log.maybe_increment_log_start_offset(target)
    assert not log.maybe_increment_log_start_offset(target - 1)
    assert log.log_start_offset == target
    with pytest.raises(OffsetOutOfRangeError):
        log.read(target - 1, max_bytes=100, max_offset=None)
    assert log.delete_old_segments(NOW_MS) == 1  # the segment wholly below the new log start goes
    assert log.segments[0].base_offset < target < log.segments[0].next_offset
    # size-based retention
    log.update_config(LogConfig(segment_bytes=400, retention_ms=-1, retention_bytes=800, file_delete_delay_ms=0))
    log.delete_old_segments(NOW_MS)
    assert log.size_bytes - log.active_segment.size_bytes <= 800
    assert not any(p.name.endswith(".deleted") for p in log_dir.iterdir())


def test_retention_file_delete_delay(log_dir: Path) -> None:
    config = LogConfig(segment_bytes=300, retention_ms=10, file_delete_delay_ms=1000)
    log = open_log(log_dir, config)
    for _ in range(10):
        log.append_as_leader(make_batch(values(2)), leader_epoch=0, now_ms=NOW_MS)
    log.update_high_watermark(20)
    assert log.delete_old_segments(NOW_MS + 100) > 0
    assert any(p.name.endswith(".log.deleted") for p in log_dir.iterdir())
    log.delete_old_segments(NOW_MS + 2000)
    assert not any(p.name.endswith(".deleted") for p in log_dir.iterdir())


def test_segment_ms_roll(log_dir: Path) -> None:
    log = open_log(log_dir, LogConfig(segment_ms=1000))
    log.append_as_leader(make_batch(values(1), base_timestamp=NOW_MS), leader_epoch=0, now_ms=NOW_MS)
    assert not log.maybe_roll(NOW_MS + 500)
    assert log.maybe_roll(NOW_MS + 1500)
    assert not log.maybe_roll(NOW_MS + 5000)  # empty active segment never rolls
    assert [s.base_offset for s in log.segments] == [0, 1]


def test_flush_advances_recovery_point(log_dir: Path) -> None:
    log = open_log(log_dir, LogConfig(flush_messages=4))
    log.append_as_leader(make_batch(values(2)), leader_epoch=0, now_ms=NOW_MS)
    log.maybe_flush(NOW_MS)
    assert log.recovery_point == 0
    log.append_as_leader(make_batch(values(2)), leader_epoch=0, now_ms=NOW_MS)
    assert log.needs_flush(NOW_MS)
    log.maybe_flush(NOW_MS)
    assert log.recovery_point == 4
    log.append_as_leader(make_batch(values(1)), leader_epoch=0, now_ms=NOW_MS)
    log.flush()
    assert log.recovery_point == 5


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_timestamp_lookup_inside_compressed_batches(log_dir: Path, codec: int) -> None:
    log = open_log(log_dir)
    ts = NOW_MS
    for i in range(3):
        batch = make_batch(values(4), timestamps=[ts + 10 * i + d for d in (0, 7, 3, 9)])
        log.append_as_leader(compress_batch(batch, codec), leader_epoch=1, now_ms=NOW_MS)
    assert log.fetch_offset_for_timestamp(ts + 12) == (5, ts + 17, 1)
    assert log.fetch_offset_for_timestamp(ts + 18) == (7, ts + 19, 1)
    assert log.max_timestamp_offset() == (11, ts + 29, 1)
    data = log.read(0, max_bytes=1 << 20, max_offset=None).read_bytes()
    assert [h.compression for _, h in iter_batches(data)] == [codec] * 3
