from __future__ import annotations

import os
from pathlib import Path

import pytest
from storage_batches import NOW_MS, decode_values, make_batch

from samsa.storage import FaultyFileIO, Log, LogConfig, LogManager, OffsetOutOfRangeError
from samsa.storage.checkpoint import CorruptCheckpointError, read_offset_checkpoint
from samsa.storage.log_manager import parse_log_dir_name


def test_parse_log_dir_name() -> None:
    assert parse_log_dir_name("my.topic_with-dashes-12") == ("my.topic_with-dashes", 12)
    assert parse_log_dir_name("__consumer_offsets-0") == ("__consumer_offsets", 0)
    assert parse_log_dir_name("replication-offset-checkpoint") is None
    assert parse_log_dir_name("t-0.abc123-delete") is None
    assert parse_log_dir_name("meta.properties") is None
    assert parse_log_dir_name("-3") is None


def test_manager_round_trip_and_checkpoint_files(tmp_path: Path) -> None:
    manager = LogManager(tmp_path)
    names = ["a.b-c", "x_y", "z"]
    for topic in names:
        for p in range(2):
            log = manager.get_or_create_log(topic, p, LogConfig(), NOW_MS)
            for i in range(3):
                log.append_as_leader(make_batch([f"{topic}/{p}/{i}".encode()]), leader_epoch=0, now_ms=NOW_MS)
            log.update_high_watermark(2)
    assert manager.get_or_create_log("z", 0, LogConfig(), NOW_MS) is manager.get_log("z", 0)
    manager.get_log("x_y", 1).maybe_increment_log_start_offset(1)  # type: ignore[union-attr]
    manager.close()
    hw = read_offset_checkpoint(manager.file_io, tmp_path / "replication-offset-checkpoint")
    assert hw == {(t, p): 2 for t in names for p in range(2)}
    starts = read_offset_checkpoint(manager.file_io, tmp_path / "log-start-offset-checkpoint")
    assert starts is not None and starts[("x_y", 1)] == 1
    text = (tmp_path / "recovery-point-offset-checkpoint").read_text()
    assert text.splitlines()[:3] == ["0", "6", "a.b-c 0 3"]

    manager = LogManager(tmp_path)
    manager.load_logs(lambda _t: LogConfig(), NOW_MS)
    assert sorted((t, p) for t, p, _ in manager.all_logs()) == [(t, p) for t in sorted(names) for p in range(2)]
    log = manager.get_log("a.b-c", 1)
    assert log is not None and log.high_watermark == 2 and log.recovery_point == 3
    assert decode_values(log.read(0, max_bytes=1000, max_offset=log.high_watermark).read_bytes()) == [
        (0, b"a.b-c/1/0"), (1, b"a.b-c/1/1")]
    log2 = manager.get_log("x_y", 1)
    assert log2 is not None and log2.log_start_offset == 1
    with pytest.raises(OffsetOutOfRangeError):
        log2.read(0, max_bytes=100, max_offset=None)
    manager.close()


def test_delete_log_renames_then_removes(tmp_path: Path) -> None:
    manager = LogManager(tmp_path)
    log = manager.get_or_create_log("gone", 0, LogConfig(file_delete_delay_ms=1000), NOW_MS)
    log.append_as_leader(make_batch([b"x"]), leader_epoch=0, now_ms=NOW_MS)
    manager.delete_log("gone", 0, now_ms=NOW_MS)
    assert manager.get_log("gone", 0) is None
    doomed = [p.name for p in tmp_path.iterdir() if p.name.endswith("-delete")]
    assert len(doomed) == 1 and doomed[0].startswith("gone-0.")
    manager.run_retention(NOW_MS + 500)
    assert (tmp_path / doomed[0]).exists()
    manager.run_retention(NOW_MS + 1500)
    assert not (tmp_path / doomed[0]).exists()
    # a deletion interrupted by a restart is finished by load_logs
    log = manager.get_or_create_log("gone", 1, LogConfig(), NOW_MS)
    manager.delete_log("gone", 1, now_ms=NOW_MS)
    leftover = [p for p in tmp_path.iterdir() if p.name.endswith("-delete")]
    assert leftover
    manager2 = LogManager(tmp_path)
    manager2.load_logs(lambda _t: LogConfig(), NOW_MS)
    assert not any(p.name.endswith("-delete") for p in tmp_path.iterdir())
    assert list(manager2.all_logs()) == []


def test_many_partitions_within_a_small_fd_cap(tmp_path: Path) -> None:
    fds_before = len(os.listdir("/proc/self/fd"))
    manager = LogManager(tmp_path, max_open_files=4)
    config = LogConfig(segment_bytes=300)
    partitions = 40
    for round_ in range(5):
        for p in range(partitions):
            log = manager.get_or_create_log("many", p, config, NOW_MS)
            log.append_as_leader(make_batch([f"{p}/{round_}".encode() * 10]), leader_epoch=0, now_ms=NOW_MS)
            assert len(manager.handle_cache) <= 4
    for p in range(0, partitions, 3):
        log = manager.get_log("many", p)
        assert log is not None
        got = []
        offset = 0
        while offset < log.log_end_offset:
            chunk = decode_values(log.read(offset, max_bytes=10_000, max_offset=None).read_bytes())
            got.extend(chunk)
            offset = chunk[-1][0] + 1
        assert got == [(r, f"{p}/{r}".encode() * 10) for r in range(5)]
    assert len(manager.handle_cache) <= 4
    assert len(os.listdir("/proc/self/fd")) <= fds_before + 4
    manager.close()
    assert len(manager.handle_cache) == 0


def test_reader_of_a_deleted_segment_finishes_on_its_file(log_dir: Path) -> None:
    config = LogConfig(segment_bytes=200, retention_ms=0, file_delete_delay_ms=60_000)
    log = Log.open(log_dir, config, now_ms=NOW_MS)
    for i in range(10):
        log.append_as_leader(make_batch([f"{i}".encode() * 30]), leader_epoch=0, now_ms=NOW_MS)
    log.update_high_watermark(10)
    info = log.read(0, max_bytes=10_000, max_offset=None)
    assert log.delete_old_segments(NOW_MS + 10) > 0
    assert decode_values(info.read_bytes())[0] == (0, b"0" * 30)  # the fd still reads the renamed file
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, max_bytes=10_000, max_offset=None)
    log.delete_old_segments(NOW_MS + 120_000)
    assert not any(p.name.endswith(".deleted") for p in log_dir.iterdir())
    log.close()


def test_flush_dirty_after_roll_advances_recovery_points(tmp_path: Path) -> None:
    io = FaultyFileIO()
    manager = LogManager(tmp_path, file_io=io)
    log = manager.get_or_create_log("f", 0, LogConfig(segment_bytes=200), NOW_MS)
    for i in range(6):
        log.append_as_leader(make_batch([f"{i}".encode() * 40]), leader_epoch=0, now_ms=NOW_MS)
    assert len(log.segments) > 1 and log.recovery_point == 0
    assert log.needs_flush(NOW_MS)
    manager.flush_dirty(NOW_MS)
    assert log.recovery_point == log.active_segment.base_offset  # what the rolls left behind
    rp = read_offset_checkpoint(io, tmp_path / "recovery-point-offset-checkpoint")
    assert rp == {("f", 0): log.recovery_point}
    assert not log.needs_flush(NOW_MS)
    manager.close()


def test_checkpoint_parser_rejects_damage(tmp_path: Path) -> None:
    io = FaultyFileIO()
    for bad in (b"1\n0\n", b"0\n2\nt 0 1\n", b"0\nx\n", b"0\n1\nt x 1\n", b"0\n1\nt 0\n"):
        (tmp_path / "cp").write_bytes(bad)
        with pytest.raises(CorruptCheckpointError):
            read_offset_checkpoint(io, tmp_path / "cp")
