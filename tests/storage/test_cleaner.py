"""The log cleaner over a real Log: what a compaction pass keeps and removes (issue 16)."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest
from cleaner_fixtures import (
    DAY_MS,
    NOW_MS,
    compact_config,
    kv,
    latest,
    open_compact,
    read_all,
    read_batches,
    read_committed,
    write_marker,
)
from cleaner_fixtures import clean as run_clean

from samsa.kproto.records import encode_batch
from samsa.storage import Log
from samsa.storage.cleaner import Cleaner, LogCleaningAbortedError, UncleanableLogError
from samsa.storage.cleaner_manager import cleanable_range
from samsa.storage.cleaner_swap import SwapStep, replace_segments
from samsa.storage.file_io import FaultyFileIO


def _fill(log: Log, count: int, keys: int, *, start: int = 0, ts: int = NOW_MS) -> None:
    for i in range(start, start + count):
        log.append_as_leader(kv([(b"k%d" % (i % keys), b"v%d" % i)], ts=ts), leader_epoch=0, now_ms=ts)


def _close_segments(log: Log, now_ms: int = NOW_MS) -> None:
    log.roll(now_ms)
    log.update_high_watermark(log.log_end_offset)


def _offsets_increase(records: list) -> None:  # type: ignore[type-arg]
    offsets = [r.offset for r in records]
    assert offsets == sorted(set(offsets))


def _stray(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith((".cleaned", ".swap", ".deleted")))


def test_keeps_the_latest_record_of_each_key_at_its_offset(log_dir: Path) -> None:
    log = open_compact(log_dir)
    _fill(log, 60, 5)
    _close_segments(log)
    before = read_all(log)
    result = run_clean(log, NOW_MS)
    after = read_all(log)
    assert result.end_offset == 60
    assert [(r.offset, r.key, r.value) for r in after] == [(55 + i, b"k%d" % i, b"v%d" % (55 + i)) for i in range(5)]
    assert latest(after) == latest(before)
    _offsets_increase(after)
    assert log.log_end_offset == 60 and log.log_start_offset == 0
    log.close()
    reopened = open_compact(log_dir)
    assert [(r.offset, r.value) for r in read_all(reopened)] == [(r.offset, r.value) for r in after]
    assert _stray(log_dir) == []
    reopened.close()


def test_a_second_pass_merges_the_small_segments(log_dir: Path) -> None:
    log = open_compact(log_dir)
    _fill(log, 60, 5)
    _close_segments(log)
    run_clean(log, NOW_MS)
    closed_before = len(log.segments) - 1
    run_clean(log, NOW_MS)
    assert len(log.segments) - 1 < closed_before
    assert [r.value for r in read_all(log)] == [b"v%d" % i for i in range(55, 60)]
    log.close()


def test_the_active_segment_is_never_touched(log_dir: Path) -> None:
    log = open_compact(log_dir, compact_config(segment_bytes=1 << 20))
    _fill(log, 40, 4)  # everything in the active segment
    log.update_high_watermark(log.log_end_offset)
    active = log.active_segment.log_path.read_bytes()
    result = run_clean(log, NOW_MS)
    assert result.stats.segments_cleaned == 0
    assert log.active_segment.log_path.read_bytes() == active
    assert len(read_all(log)) == 40
    log.close()


def test_nothing_at_or_above_the_high_watermark_is_removed(log_dir: Path) -> None:
    log = open_compact(log_dir)
    _fill(log, 60, 3)
    log.roll(NOW_MS)
    log.update_high_watermark(31)
    above = [(r.offset, r.value) for r in read_all(log) if r.offset >= 31]
    run_clean(log, NOW_MS)
    after = read_all(log)
    assert [(r.offset, r.value) for r in after if r.offset >= 31] == above
    assert all(r.offset >= 31 or r.offset < 31 for r in after)
    assert latest(after) == {b"k0": b"v57", b"k1": b"v58", b"k2": b"v59"}
    assert len([r for r in after if r.offset < 31]) < 31  # something below was cleaned
    log.close()


def test_an_open_transaction_bounds_the_cleaning(log_dir: Path) -> None:
    log = open_compact(log_dir)
    _fill(log, 20, 2)
    log.append_as_leader(kv([(b"k0", b"txn")], pid=9, epoch=0, seq=0, txn=True), leader_epoch=0, now_ms=NOW_MS)
    lso = log.log_end_offset - 1
    _fill(log, 20, 2, start=100)
    _close_segments(log)
    above = [(r.offset, r.value) for r in read_all(log) if r.offset >= lso]
    r = cleanable_range(log, None, NOW_MS)
    assert r.first_uncleanable_offset <= lso
    run_clean(log, NOW_MS)
    assert [(r.offset, r.value) for r in read_all(log) if r.offset >= lso] == above
    log.close()


def test_min_compaction_lag_keeps_young_segments_dirty(log_dir: Path) -> None:
    log = open_compact(log_dir, compact_config(min_compaction_lag_ms=60_000))
    _fill(log, 30, 3, ts=NOW_MS - 120_000)
    _fill(log, 30, 3, start=30, ts=NOW_MS)
    _close_segments(log)
    r = cleanable_range(log, None, NOW_MS)
    assert 0 < r.first_uncleanable_offset <= 30
    young = [(x.offset, x.value) for x in read_all(log) if x.offset >= r.first_uncleanable_offset]
    run_clean(log, NOW_MS)
    assert [(x.offset, x.value) for x in read_all(log) if x.offset >= r.first_uncleanable_offset] == young
    log.close()


def test_tombstones_live_for_delete_retention_ms_after_the_first_cleaning(log_dir: Path) -> None:
    log = open_compact(log_dir)
    _fill(log, 20, 4)
    log.append_as_leader(kv([(b"k1", None)]), leader_epoch=0, now_ms=NOW_MS)
    _fill(log, 10, 1, start=200)  # k0 only: the tombstone is not in the last batch
    _close_segments(log)
    run_clean(log, NOW_MS)
    assert latest(read_all(log))[b"k1"] is None
    assert [r.offset for r in read_all(log) if r.key == b"k1"] == [20]
    run_clean(log, NOW_MS + DAY_MS - 1)
    assert [r.value for r in read_all(log) if r.key == b"k1"] == [None]
    run_clean(log, NOW_MS + DAY_MS)
    assert [r for r in read_all(log) if r.key == b"k1"] == []
    log.close()


def test_compressed_batches_are_rewritten_with_their_codec(log_dir: Path) -> None:
    log = open_compact(log_dir, compact_config(segment_bytes=2000))
    for i in range(6):
        batch = encode_batch([(b"k%d" % j, b"v%d-%d" % (i, j), ()) for j in range(i, i + 4)], timestamp_ms=NOW_MS,
                             compression=1)
        log.append_as_leader(batch, leader_epoch=0, now_ms=NOW_MS)
    _close_segments(log)
    before = latest(read_all(log))
    run_clean(log, NOW_MS)
    batches = read_batches(log)
    assert all(h.compression == 1 for h, _ in batches)
    assert latest(read_all(log)) == before
    assert len(read_all(log)) == len(before)
    for h, recs in batches:  # offsets keep their place in their batch, and the batch its last offset
        assert all(h.base_offset <= r.offset <= h.last_offset for r in recs)
    log.close()


def test_a_small_offset_map_cleans_in_several_passes(log_dir: Path) -> None:
    log = open_compact(log_dir)
    _fill(log, 80, 10)
    _close_segments(log)
    want = latest(read_all(log))
    end = cleanable_range(log, None, NOW_MS).first_uncleanable_offset
    cleaner = Cleaner(4 * 24)  # 4 slots, 3 keys at most
    first_dirty, passes = 0, 0
    while first_dirty < end:
        r = cleanable_range(log, first_dirty, NOW_MS)
        result = cleaner.clean(log, r.first_dirty_offset, r.first_uncleanable_offset, NOW_MS)
        assert len(cleaner.offset_map) <= 3
        assert result.end_offset > first_dirty
        first_dirty = result.end_offset
        passes += 1
        assert latest(read_all(log)) == want
    assert passes >= 3
    run_clean(log, NOW_MS)
    assert len(read_all(log)) == 10
    log.close()


def test_aborted_transactions_are_removed_and_never_visible(log_dir: Path) -> None:
    log = open_compact(log_dir)

    def put(key: bytes, value: bytes, count: int = 1) -> None:
        for _ in range(count):
            log.append_as_leader(kv([(key, value)]), leader_epoch=0, now_ms=NOW_MS)

    put(b"k0", b"committed-0")
    put(b"filler", b"f", 8)
    # an aborted transaction over two segments (KAFKA-8351): its k0 is the last k0 in the log, so an offset
    # map that counted it would drop committed-0; "ax" is only ever written by it
    log.append_as_leader(kv([(b"k0", b"aborted-0"), (b"ax", b"aborted-x")], pid=7, epoch=0, seq=0, txn=True),
                         leader_epoch=0, now_ms=NOW_MS)
    put(b"filler", b"f", 8)
    log.roll(NOW_MS)
    log.append_as_leader(kv([(b"k1", b"aborted-1")], pid=7, epoch=0, seq=2, txn=True), leader_epoch=0, now_ms=NOW_MS)
    write_marker(log, 7, 0, commit=False)
    log.append_as_leader(kv([(b"k5", b"committed")], pid=7, epoch=0, seq=3, txn=True), leader_epoch=0, now_ms=NOW_MS)
    write_marker(log, 7, 0, commit=True)
    put(b"filler", b"f", 8)
    _close_segments(log)
    visible = [r.value for r in read_committed(log)]
    assert b"aborted-0" not in visible and b"committed-0" in visible
    for i in range(3):
        run_clean(log, NOW_MS + i * DAY_MS * 2)
        values = [r.value for r in read_all(log)]
        assert not {b"aborted-0", b"aborted-1", b"aborted-x"} & set(values)
        committed = latest(read_committed(log))
        assert committed == {b"k0": b"committed-0", b"k5": b"committed", b"filler": b"f"}
    log.close()
    reopened = open_compact(log_dir)
    assert latest(read_committed(reopened)) == {b"k0": b"committed-0", b"k5": b"committed", b"filler": b"f"}
    reopened.close()


def test_abort_marker_stays_while_aborted_data_remains(log_dir: Path) -> None:
    """KAFKA-13727: an ABORT marker must not go while a batch of its transaction is still in the log, even when
    that batch lies before the dirty range; here the aborted batch is its producer's last data batch, so it
    stays (emptied) and so must the marker."""
    log = open_compact(log_dir)
    log.append_as_leader(kv([(b"a", b"aborted")], pid=3, epoch=0, seq=0, txn=True), leader_epoch=0, now_ms=NOW_MS)
    _fill(log, 12, 3)
    write_marker(log, 3, 0, commit=False)
    _fill(log, 12, 3, start=100)
    _close_segments(log)
    first = run_clean(log, NOW_MS)
    for n in range(1, 4):
        run_clean(log, NOW_MS + n * 2 * DAY_MS, first_dirty=first.end_offset)
        controls = [h for h, _ in read_batches(log) if h.is_control and h.producer_id == 3]
        assert len(controls) == 1
        assert all(r.value != b"aborted" for r in read_committed(log))
        assert all(r.value != b"aborted" for r in read_all(log))
    log.close()


def test_commit_marker_goes_once_its_data_is_gone_and_the_delay_passed(log_dir: Path) -> None:
    log = open_compact(log_dir)
    log.append_as_leader(kv([(b"a", b"txn")], pid=4, epoch=0, seq=0, txn=True), leader_epoch=0, now_ms=NOW_MS)
    write_marker(log, 4, 0, commit=True)
    # the producer's last batch
    log.append_as_leader(kv([(b"z", b"later")], pid=4, epoch=0, seq=1), leader_epoch=0, now_ms=NOW_MS)
    _fill(log, 12, 1)  # key k0
    log.append_as_leader(kv([(b"a", b"new")]), leader_epoch=0, now_ms=NOW_MS)  # supersedes the txn's record
    _fill(log, 12, 1, start=100)
    _close_segments(log)

    def markers() -> int:
        return sum(1 for h, _ in read_batches(log) if h.is_control)

    run_clean(log, NOW_MS)  # the txn's batch is read (then emptied away) in this pass: the marker stays
    assert markers() == 1
    run_clean(log, NOW_MS)  # no batch of the txn left: the marker gets its delete horizon
    assert markers() == 1
    run_clean(log, NOW_MS + DAY_MS - 1)
    assert markers() == 1
    run_clean(log, NOW_MS + DAY_MS)
    assert markers() == 0
    assert latest(read_committed(log))[b"a"] == b"new"
    log.close()


def test_producer_state_survives_a_cleaning_and_a_reopen(log_dir: Path) -> None:
    log = open_compact(log_dir)
    for seq in range(5):
        log.append_as_leader(kv([(b"p", b"idem%d" % seq)], pid=5, epoch=2, seq=seq), leader_epoch=0, now_ms=NOW_MS)
        _fill(log, 4, 2, start=seq * 10)
    log.append_as_leader(kv([(b"p", b"plain")]), leader_epoch=0, now_ms=NOW_MS)  # supersedes every idem record
    _fill(log, 6, 2, start=500)
    _close_segments(log)
    run_clean(log, NOW_MS)
    assert all(not r.value.startswith(b"idem") for r in read_all(log) if r.value)  # type: ignore[union-attr]
    kept = [h for h, recs in read_batches(log) if h.producer_id == 5]
    assert len(kept) == 1 and kept[0].records_count == 0 and kept[0].base_sequence == 4
    log.close()
    for snapshot in log_dir.glob("*.snapshot"):
        snapshot.unlink()  # producer state rebuilt from the cleaned log alone
    reopened = open_compact(log_dir)
    entry = reopened.producer_state(5)
    assert entry is not None and entry.producer_epoch == 2 and entry.last_seq == 4
    retry = reopened.append_as_leader(kv([(b"p", b"idem4")], pid=5, epoch=2, seq=4), leader_epoch=0, now_ms=NOW_MS)
    assert retry.duplicate
    reopened.append_as_leader(kv([(b"p", b"idem5")], pid=5, epoch=2, seq=5), leader_epoch=0, now_ms=NOW_MS)
    reopened.close()


@pytest.mark.parametrize("step", list(SwapStep))
def test_a_crash_at_each_swap_step_recovers_old_or_new(tmp_path: Path, step: SwapStep) -> None:
    old_dir, new_dir, crash_dir = (tmp_path / f"{name}-0" for name in ("old", "new", "crash"))
    log = open_compact(old_dir)
    _fill(log, 60, 7)
    log.append_as_leader(kv([(b"k3", None)]), leader_epoch=0, now_ms=NOW_MS)
    _fill(log, 5, 2, start=900)
    _close_segments(log)
    log.close()
    shutil.copytree(old_dir, new_dir)
    shutil.copytree(old_dir, crash_dir)
    big = compact_config(segment_bytes=1 << 20)  # one group: the whole cleanable part swaps at once

    def state(directory: Path) -> list[tuple[int, bytes | None, bytes | None]]:
        log = open_compact(directory, big)
        try:
            return [(r.offset, r.key, r.value) for r in read_all(log)]
        finally:
            log.close()

    old = state(old_dir)
    new_log = open_compact(new_dir, big)
    new_log.update_high_watermark(new_log.log_end_offset)
    run_clean(new_log, NOW_MS)
    new_log.close()
    new = state(new_dir)
    assert new != old

    crashing = open_compact(crash_dir, big)
    crashing.update_high_watermark(crashing.log_end_offset)
    run_clean(crashing, NOW_MS, stop_after=step)
    crashing.close_for_delete()  # a crash: no flush, no snapshot, fds dropped
    recovered = state(crash_dir)
    assert recovered == (old if step == SwapStep.CLEANED else new)
    assert _stray(crash_dir) == []
    assert latest([r for r in read_all(open_compact(crash_dir, big))]) == latest(
        [r for r in read_all(open_compact(old_dir, big))])


def test_a_corrupt_batch_makes_the_log_uncleanable(log_dir: Path) -> None:
    log = open_compact(log_dir)
    _fill(log, 40, 4)
    _close_segments(log)
    bases = [s.base_offset for s in log.segments]
    seg = log.segments[1]
    data = bytearray(seg.log_path.read_bytes())
    data[70] ^= 0xFF  # inside the first record: the CRC no longer matches
    seg.log_path.write_bytes(bytes(data))
    with pytest.raises(UncleanableLogError, match="corrupt batch"):
        run_clean(log, NOW_MS)
    assert _stray(log_dir) == []
    assert [s.base_offset for s in log.segments] == bases  # nothing was swapped
    assert seg.log_path.read_bytes() == bytes(data)
    log.close()


def test_a_follower_replicates_a_cleaned_log_as_it_is(tmp_path: Path) -> None:
    leader = open_compact(tmp_path / "leader-0")
    for seq in range(4):
        leader.append_as_leader(kv([(b"p", b"x%d" % seq), (b"q%d" % seq, b"y")], pid=8, epoch=0, seq=seq * 2),
                                leader_epoch=0, now_ms=NOW_MS)
        _fill(leader, 6, 3, start=seq * 10)
    leader.append_as_leader(kv([(b"p", b"last")]), leader_epoch=0, now_ms=NOW_MS)
    _close_segments(leader)
    run_clean(leader, NOW_MS)
    assert any(h.records_count < h.last_offset_delta + 1 for h, _ in read_batches(leader))  # rewritten batches
    follower = open_compact(tmp_path / "follower-0")
    offset = 0
    while offset < leader.log_end_offset:
        data = leader.read(offset, max_bytes=500, max_offset=None).read_bytes()
        follower.append_as_follower(data, now_ms=NOW_MS)
        offset = follower.log_end_offset
    follower.update_high_watermark(follower.log_end_offset)
    assert [(r.offset, r.key, r.value) for r in read_all(follower)] == [(r.offset, r.key, r.value) for r in
                                                                         read_all(leader)]
    entry = follower.producer_state(8)
    assert entry is not None and entry.last_seq == 7
    leader.close()
    follower.close()


def test_a_truncation_during_cleaning_aborts_the_swap(log_dir: Path) -> None:
    log = open_compact(log_dir)
    _fill(log, 60, 5)
    _close_segments(log)
    log.update_config(compact_config(segment_bytes=1 << 20))  # one group
    r = cleanable_range(log, None, NOW_MS)
    cleaner = Cleaner(1 << 20)
    p = cleaner.begin(log, r.first_dirty_offset, r.first_uncleanable_offset, NOW_MS)
    cleaner.plan(p)
    (group,) = p.groups
    cleaned = cleaner.clean_group(p, group)
    log.truncate_to(group[-1].base_offset + 2)  # a follower truncating inside the group (below the old HW)
    _fill(log, 3, 5, start=1000)  # then appending and rolling: the group's segments are all there again
    log.roll(NOW_MS)
    truncated = [(x.offset, x.value) for x in read_all(log)]
    with pytest.raises(LogCleaningAbortedError):
        replace_segments(log, cleaned, group, now_ms=NOW_MS)
    assert [(x.offset, x.value) for x in read_all(log)] == truncated
    assert _stray(log_dir) == []
    log.close()


@pytest.mark.parametrize("step", list(SwapStep))
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_power_loss_at_each_swap_step_recovers_old_or_new(tmp_path: Path, step: SwapStep, seed: int) -> None:
    """Like a crash, but the page cache is lost too (FaultyFileIO keeps only what was fsynced): the cleaned
    files must be durable before the rename that commits them."""
    directory = tmp_path / "p-0"
    log = open_compact(directory, compact_config(segment_bytes=300))
    _fill(log, 50, 6)
    log.append_as_leader(kv([(b"k2", None)]), leader_epoch=0, now_ms=NOW_MS)
    _fill(log, 4, 1, start=700)
    _close_segments(log)
    log.close()  # everything so far is durable
    big = compact_config(segment_bytes=1 << 20)
    reopened = open_compact(directory, big)
    old = [(r.offset, r.key, r.value) for r in read_all(reopened)]
    reopened.close()
    io = FaultyFileIO()
    log = Log.open(directory, big, now_ms=NOW_MS, file_io=io)
    log.update_high_watermark(log.log_end_offset)
    run_clean(log, NOW_MS, stop_after=step)
    log.close_for_delete()
    io.power_loss(random.Random(seed))
    recovered_log = open_compact(directory, big)
    read = read_all(recovered_log)
    recovered_log.close()
    recovered = [(r.offset, r.key, r.value) for r in read]
    if step == SwapStep.CLEANED:
        assert recovered == old
    else:
        assert recovered != old and set(recovered) <= set(old)
    assert latest(read) == {k: v for _, k, v in old if k is not None}
    assert _stray(directory) == []
