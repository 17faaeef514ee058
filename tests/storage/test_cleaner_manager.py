"""Choosing what the cleaner cleans (Kafka's LogCleanerManager): dirty ratio, eligibility, checkpoint, throttle."""

from __future__ import annotations

from pathlib import Path

from cleaner_fixtures import NOW_MS, compact_config, kv, open_compact
from cleaner_fixtures import clean as run_clean

from samsa.storage import Log
from samsa.storage.cleaner_manager import (
    CleanableRange,
    LogCleaningCandidate,
    Throttler,
    cleanable_range,
    grab_filthiest_log,
    read_cleaner_checkpoint,
    write_cleaner_checkpoint,
)
from samsa.storage.file_io import OsFileIO


def _fill(log: Log, count: int, keys: int, ts: int = NOW_MS) -> None:
    for i in range(count):
        log.append_as_leader(kv([(b"k%d" % (i % keys), b"v%d" % i)], ts=ts), leader_epoch=0, now_ms=ts)


def test_dirty_ratio_is_dirty_bytes_over_the_cleanable_bytes(log_dir: Path) -> None:
    log = open_compact(log_dir)
    _fill(log, 60, 5)
    log.roll(NOW_MS)
    log.update_high_watermark(log.log_end_offset)
    r = cleanable_range(log, None, NOW_MS)
    closed = sum(s.size_bytes for s in log.segments[:-1])
    assert (r.first_dirty_offset, r.first_uncleanable_offset) == (0, 60)
    assert (r.clean_bytes, r.dirty_bytes, r.cleanable_ratio) == (0, closed, 1.0)
    result = run_clean(log, NOW_MS)
    after = cleanable_range(log, result.end_offset, NOW_MS)
    assert after.dirty_bytes == 0 and after.cleanable_ratio == 0.0
    assert after.clean_bytes == sum(s.size_bytes for s in log.segments[:-1])
    _fill(log, 30, 5)
    log.roll(NOW_MS)
    log.update_high_watermark(log.log_end_offset)
    again = cleanable_range(log, result.end_offset, NOW_MS)
    assert again.first_dirty_offset == 60 and again.first_uncleanable_offset == 90
    assert 0 < again.cleanable_ratio < 1
    log.close()


def test_the_high_watermark_rounds_down_to_a_segment_base(log_dir: Path) -> None:
    log = open_compact(log_dir)
    _fill(log, 60, 5)
    log.roll(NOW_MS)
    log.update_high_watermark(33)
    r = cleanable_range(log, None, NOW_MS)
    bases = [s.base_offset for s in log.segments]
    assert r.first_uncleanable_offset in bases and r.first_uncleanable_offset <= 33
    assert r.first_uncleanable_offset == max(b for b in bases if b <= 33)
    log.close()


def test_a_checkpoint_out_of_range_restarts_from_the_log_start(log_dir: Path) -> None:
    log = open_compact(log_dir)
    _fill(log, 20, 5)
    log.roll(NOW_MS)
    log.update_high_watermark(log.log_end_offset)
    assert cleanable_range(log, 10_000, NOW_MS).first_dirty_offset == 0
    assert cleanable_range(log, 7, NOW_MS).first_dirty_offset == 7
    log.close()


def test_max_compaction_lag_makes_a_log_due(log_dir: Path) -> None:
    log = open_compact(log_dir, compact_config(max_compaction_lag_ms=60_000))
    _fill(log, 20, 5, ts=NOW_MS - 120_000)
    log.roll(NOW_MS)
    log.update_high_watermark(log.log_end_offset)
    assert cleanable_range(log, None, NOW_MS).max_compaction_delay_ms == 60_000
    assert cleanable_range(log, None, NOW_MS - 70_000).max_compaction_delay_ms == 0
    log.close()


def _candidate(name: str, dirty: int, total: int, *, ratio: float = 0.5, delay: int = 0) -> LogCleaningCandidate:
    return LogCleaningCandidate((name, 0), CleanableRange(0, 10, total - dirty, dirty, delay), ratio)


def test_the_dirtiest_eligible_log_goes_first() -> None:
    logs = [_candidate("a", 60, 100), _candidate("b", 90, 100), _candidate("c", 40, 100),
            _candidate("d", 95, 100, ratio=0.99)]
    best = grab_filthiest_log(logs, set(), set())
    assert best is not None and best.key == ("b", 0)
    best = grab_filthiest_log(logs, {("b", 0)}, set())
    assert best is not None and best.key == ("a", 0)
    assert grab_filthiest_log(logs, {("b", 0)}, {("a", 0)}) is None  # c is below its ratio, d below 0.99
    overdue = _candidate("e", 10, 100, delay=5)
    best = grab_filthiest_log([logs[2], overdue], set(), set())
    assert best is not None and best.key == ("e", 0)
    assert grab_filthiest_log([_candidate("f", 0, 100, delay=5)], set(), set()) is None


def test_cleaner_offset_checkpoint_round_trip(tmp_path: Path) -> None:
    io = OsFileIO()
    assert read_cleaner_checkpoint(io, tmp_path) == {}
    write_cleaner_checkpoint(io, tmp_path, {("t", 0): 42, ("__consumer_offsets", 7): 9})
    assert read_cleaner_checkpoint(io, tmp_path) == {("t", 0): 42, ("__consumer_offsets", 7): 9}
    (tmp_path / "cleaner-offset-checkpoint").write_text("garbage")
    assert read_cleaner_checkpoint(io, tmp_path) == {}


def test_the_throttler_sleeps_when_bytes_run_ahead_of_the_rate() -> None:
    clock = [0.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        clock[0] += s

    throttle = Throttler(1000.0, clock=lambda: clock[0], sleep=sleep, check_interval_s=0.1)
    clock[0] = 0.2
    throttle(1000)  # 1000 bytes in 0.2 s at 1000 B/s: 0.8 s to wait
    assert slept == [0.8]
    clock[0] += 1.0
    throttle(100)  # well under the rate
    assert slept == [0.8]
