"""Log.append_as_leader takes an inlined fast path for the common single-batch append; it must leave exactly
what the general (multi-batch) path leaves: same answers, bytes, indexes, epochs and producer state."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

import pytest
from storage_batches import NOW_MS, make_batch, make_control_batch, open_log

from samsa.kproto.batch import BatchHeader, iter_batches
from samsa.storage import Log, LogAppendInfo, LogConfig, StorageError
from samsa.storage.producer_state import ProducerStateManager


def _script(rng: random.Random) -> list[tuple[bytes, int, int]]:
    """(batch, leader epoch, now_ms): plain and idempotent batches, retries, fenced and out-of-order ones,
    control batches, epoch changes, timestamps going back and forth, one batch over 128 KiB."""
    out: list[tuple[bytes, int, int]] = []
    seqs = {7: 0, 8: 0}
    epoch = 0
    now = NOW_MS
    for i in range(160):
        now += rng.randint(0, 50)
        if i % 40 == 39:
            epoch += 1
        n = rng.randint(1, 6)
        values = [rng.randbytes(rng.randint(1, 200)) for _ in range(n)]
        timestamps = [now - rng.randint(-500, 5000) for _ in range(n)]
        kind = rng.random()
        if kind < 0.4:
            batch = make_batch(values, timestamps=timestamps)
        elif kind < 0.85:
            pid = rng.choice((7, 8))
            seq = seqs[pid]
            if rng.random() < 0.1 and seq >= n:
                seq -= n  # maybe a retry of the last batch (a duplicate), maybe out of order
            elif rng.random() < 0.05:
                seq += 3  # a gap: refused
            else:
                seqs[pid] = seq + n
            batch = make_batch(values, timestamps=timestamps, producer_id=pid, producer_epoch=0,
                               base_sequence=seq)
        elif kind < 0.9:
            batch = make_control_batch(producer_id=rng.choice((7, 8)), producer_epoch=0, timestamp=now)
        else:
            batch = make_batch(values, timestamps=timestamps, producer_id=9, producer_epoch=-1)
        out.append((batch, epoch, now))
    out.append((make_batch([rng.randbytes(1000) for _ in range(140)], base_timestamp=now), epoch, now + 1))
    return out


def _append(log: Log, batch: bytes | bytearray, epoch: int, now: int, general: bool) -> LogAppendInfo | str:
    try:
        if general:
            return log._append_many_as_leader(batch, epoch, now)
        return log.append_as_leader(batch, leader_epoch=epoch, now_ms=now)
    except StorageError as e:
        return type(e).__name__


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


@pytest.mark.parametrize("timestamp_type", ["CreateTime", "LogAppendTime"])
@pytest.mark.parametrize("as_bytearray", [False, True])
def test_single_batch_fast_path_matches_general_path(tmp_path: Path, timestamp_type: str,
                                                     as_bytearray: bool) -> None:
    config = LogConfig(segment_bytes=6000, index_interval_bytes=300, message_timestamp_type=timestamp_type)
    fast = open_log(tmp_path / "fast-0", config)
    general = open_log(tmp_path / "general-0", config)
    for batch, epoch, now in _script(random.Random(20240611)):
        a = _append(fast, bytearray(batch) if as_bytearray else batch, epoch, now, general=False)
        b = _append(general, bytearray(batch) if as_bytearray else batch, epoch, now, general=True)
        assert a == b
        assert fast.log_end_offset == general.log_end_offset
    assert fast.epoch_entries == general.epoch_entries
    assert fast.producer_states == general.producer_states
    assert [s.base_offset for s in fast.segments] == [s.base_offset for s in general.segments]
    assert len(fast.segments) > 3
    for f, g in zip(fast.segments, general.segments, strict=True):
        assert f.max_timestamp_and_offset() == g.max_timestamp_and_offset()
        assert f.offset_index.read_range(0, 1 << 20) == g.offset_index.read_range(0, 1 << 20)
        assert f.time_index.read_range(0, 1 << 20) == g.time_index.read_range(0, 1 << 20)
    assert fast.max_timestamp_offset() == general.max_timestamp_offset()
    fast.close()
    general.close()
    assert _files(tmp_path / "fast-0") == _files(tmp_path / "general-0")
    stored = b"".join(p.read_bytes() for p in sorted((tmp_path / "fast-0").glob("*.log")))
    headers = [h for _, h in iter_batches(stored)]  # every stamped CRC (LogAppendTime: recomputed) is valid
    assert max(h.size_bytes for h in headers) > 128 << 10
    if timestamp_type == "LogAppendTime":
        assert all(h.is_log_append_time for h in headers)


def _outcome(fn: Callable[[], object]) -> object:
    try:
        return fn()
    except StorageError as e:
        return type(e).__name__, str(e)


def test_check_append_is_check_duplicate_then_validate() -> None:
    rng = random.Random(7)
    epochs = (-3, -1, 0, 1, 2, 0x7FFF)
    seqs = (-1, 0, 1, 2, 3, 5, 0x7FFFFFFE, 0x7FFFFFFF)

    def header(pid: int) -> BatchHeader:
        return BatchHeader(rng.randrange(1000), 100, 0, 2, 0, rng.choice((0, 0x10, 0x20, 0x30)), rng.choice((0, 1, 2)),
                      NOW_MS, NOW_MS, pid, rng.choice(epochs), rng.choice(seqs), 1)

    for _ in range(300):
        state = ProducerStateManager()
        for _ in range(rng.randrange(8)):
            state.update(header(rng.choice((1, 2))))
        for _ in range(20):
            h = header(rng.choice((-1, 1, 2, 3)))
            expected = _outcome(lambda: state.check_duplicate(h) or state.validate((h,)))  # noqa: B023
            assert _outcome(lambda: state.check_append(h)) == expected  # noqa: B023


@pytest.mark.parametrize("general", [False, True])
def test_epoch_recorded_without_flush_is_written_by_its_first_append(log_dir: Path, general: bool) -> None:
    """assign_epoch_start_offset (a new leader) does not write the checkpoint; the append path skips the
    epoch cache when the batch's epoch is already the latest, but not while the file lags behind it."""
    log = open_log(log_dir)
    log.append_as_leader(make_batch([b"a"]), leader_epoch=1, now_ms=NOW_MS)
    log.assign_epoch_start_offset(2)
    _append(log, make_batch([b"b", b"c"]), 2, NOW_MS, general)
    _append(log, make_batch([b"d"]), 2, NOW_MS, general)
    assert log.epoch_entries == [(1, 0), (2, 1)]
    log.close()
    assert open_log(log_dir).epoch_entries == [(1, 0), (2, 1)]
