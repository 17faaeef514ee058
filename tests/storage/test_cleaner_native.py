"""The log cleaner's native walks (storage/_cleaner_native.c) against the Python reference: the same cleanings of
the same random logs must write the same bytes, report the same figures, and the native pieces (MD5, CRC32C,
the offset table) must answer as hashlib, kproto's CRC and the dict-backed map do."""

from __future__ import annotations

import hashlib
import os
import random
from pathlib import Path

import pytest
from cleaner_fixtures import NOW_MS, compact_config, read_all, write_marker

from samsa.kproto.checksum import crc32c
from samsa.kproto.records import Record, encode_batch
from samsa.storage import Log
from samsa.storage.cleaner import Cleaner, UncleanableLogError
from samsa.storage.cleaner_manager import cleanable_range
from samsa.storage.offset_map import OffsetMap

native = pytest.importorskip("samsa.storage._cleaner_native", reason="built without a C compiler")

RETENTION_MS = 1000


def test_md5_and_crc32c_match_the_references() -> None:
    rng = random.Random(1)
    for n in [*range(130), 1000, 4096, 65537]:
        data = rng.randbytes(n)
        assert native.md5(data) == hashlib.md5(data).digest(), n
        assert native.crc32c(data) == crc32c(data), n


@pytest.mark.parametrize("seed", range(5))
def test_the_offset_table_answers_as_the_dict(seed: int) -> None:
    rng = random.Random(seed)
    memory = rng.choice([24, 24 * 7, 24 * 100, 24 * 20_000])
    load = rng.choice([0.5, 0.9, 1.0])
    table, reference = OffsetMap(memory, load, native=True), OffsetMap(memory, load, native=False)
    assert table.table is not None and reference.table is None
    keys = [b"k%d" % i for i in range(rng.choice([5, 200, 30_000]))]
    for i in range(20_000):
        key = rng.choice(keys)
        assert table.put(key, i) == reference.put(key, i)
        probe = rng.choice(keys)
        assert table.get(probe) == reference.get(probe)
        assert len(table) == len(reference)
    assert table.table.allocated_bytes <= max(table.slots, table.capacity) * 24
    table.clear()
    assert len(table) == 0 and table.get(keys[0]) == -1


def _batch(rng: random.Random, now: int, keys: list[bytes], **kw: int | bool) -> bytes:
    records = []
    for i in range(rng.choice([1, 1, 2, 5, 20])):
        roll = rng.random()
        key = None if roll < 0.05 else rng.choice(keys)
        value = None if roll > 0.85 else rng.randbytes(rng.randrange(0, 40))
        headers = [("h", b"x")] if rng.random() < 0.2 else []
        records.append(Record(i, now + rng.randrange(-3000, 3000), key, value, tuple(headers)))  # type: ignore[arg-type]
    return encode_batch(records, timestamp_ms=now, **kw)  # type: ignore[arg-type]


def _scenario(directory: Path, seed: int, native_walks: bool) -> list[object]:
    """Random appends (plain, idempotent, transactional, compressed), markers, rolls, time and cleanings with
    maps small enough to fill; returns what each cleaning reported and every file's bytes at the end."""
    rng = random.Random(seed)
    config = compact_config(segment_bytes=rng.choice([300, 700, 2000, 20_000]), delete_retention_ms=RETENTION_MS,
                            index_interval_bytes=rng.choice([64, 4096]))
    log = Log.open(directory, config, now_ms=NOW_MS)
    keys = [b"key-%d" % i for i in range(rng.choice([3, 10, 60]))]
    now = NOW_MS
    seq = {7: 0, 10: 0, 11: 0}
    open_txn: set[int] = set()
    checkpoint: int | None = None
    seen: list[object] = []
    for _ in range(rng.randrange(40, 120)):
        op = rng.random()
        if op < 0.45:
            kw: dict[str, int | bool] = {"compression": rng.choice([0, 0, 0, 1, 4])}
            if rng.random() < 0.3:
                kw |= {"producer_id": 7, "producer_epoch": 0, "base_sequence": seq[7]}
            batch = _batch(rng, now, keys, **kw)
            info = log.append_as_leader(batch, leader_epoch=0, now_ms=now)
            if "producer_id" in kw:
                seq[7] += info.last_offset - info.first_offset + 1
        elif op < 0.55:
            pid = rng.choice([10, 11])
            batch = _batch(rng, now, keys, producer_id=pid, producer_epoch=0, base_sequence=seq[pid],
                           is_transactional=True)
            info = log.append_as_leader(batch, leader_epoch=0, now_ms=now)
            seq[pid] += info.last_offset - info.first_offset + 1
            open_txn.add(pid)
        elif op < 0.62 and open_txn:
            pid = rng.choice(sorted(open_txn))
            write_marker(log, pid, 0, commit=rng.random() < 0.5, ts=now)
            open_txn.discard(pid)
        elif op < 0.72:
            log.roll(now)
        elif op < 0.8:
            now += rng.choice([0, 300, RETENTION_MS, 3 * RETENTION_MS])
        else:
            log.update_high_watermark(log.log_end_offset)
            r = cleanable_range(log, checkpoint if rng.random() < 0.7 else None, now)
            cleaner = Cleaner(rng.choice([2, 5, 40, 1 << 14]) * 24, io_buffer_bytes=rng.choice([200, 4096, 1 << 20]),
                              native=native_walks)
            result = cleaner.clean(log, r.first_dirty_offset, r.first_uncleanable_offset, now)
            checkpoint = result.end_offset
            s = result.stats
            seen.append((result.end_offset, s.map_bytes_read, s.map_messages_read, s.bytes_read, s.bytes_written,
                         s.messages_read, s.messages_written, s.segments_cleaned, s.buffer_utilization))
            seen.append([(x.offset, x.key, x.value) for x in read_all(log)])
        log.update_high_watermark(log.log_end_offset)
    log.close()
    seen.append({p.name: p.read_bytes() for p in sorted(directory.iterdir())})
    return seen


@pytest.mark.parametrize("seed", range(40))
def test_native_and_python_cleanings_write_the_same_bytes(tmp_path: Path, seed: int) -> None:
    with_native = _scenario(tmp_path / "native" / "t-0", seed, True)
    python_only = _scenario(tmp_path / "python" / "t-0", seed, False)
    assert len(with_native) == len(python_only)
    for i, (a, b) in enumerate(zip(with_native, python_only, strict=True)):
        assert a == b, f"seed {seed}: step {i} differs"


def test_pure_python_is_forced_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SAMSA_PURE_PYTHON", "1")
    assert OffsetMap(1 << 10).table is None
    monkeypatch.delenv("SAMSA_PURE_PYTHON")
    assert OffsetMap(1 << 10).table is not None or os.environ.get("SAMSA_PURE_PYTHON")


@pytest.mark.parametrize("native_walks", [True, False])
def test_a_corrupt_batch_in_the_clean_part_stops_the_recopy(tmp_path: Path, native_walks: bool) -> None:
    """The map walk checks the CRCs of the dirty segments, the recopy those of the others (the scan reads
    headers only): a batch corrupted in a segment cleaned before is found by the next cleaning."""
    log = Log.open(tmp_path / "t-0", compact_config(segment_bytes=400), now_ms=NOW_MS)
    for i in range(40):
        log.append_as_leader(encode_batch([(b"k%d" % (i % 4), b"v%d" % i, ())], timestamp_ms=NOW_MS),
                             leader_epoch=0, now_ms=NOW_MS)
    log.roll(NOW_MS)
    log.update_high_watermark(log.log_end_offset)
    r = cleanable_range(log, None, NOW_MS)
    first = Cleaner(1 << 20, native=native_walks).clean(log, r.first_dirty_offset, r.first_uncleanable_offset, NOW_MS)
    for i in range(40, 80):
        log.append_as_leader(encode_batch([(b"k%d" % (i % 4), b"v%d" % i, ())], timestamp_ms=NOW_MS),
                             leader_epoch=0, now_ms=NOW_MS)
    log.roll(NOW_MS)
    log.update_high_watermark(log.log_end_offset)
    segments = log.segments
    i = max(k for k, seg in enumerate(segments[:-1]) if seg.size_bytes > 0 and seg.base_offset < first.end_offset)
    clean_segment = segments[i]
    assert segments[i + 1].base_offset <= first.end_offset  # wholly in the clean part
    data = bytearray(clean_segment.log_path.read_bytes())
    data[30] ^= 0xFF  # the first batch's baseTimestamp: its CRC no longer matches
    clean_segment.log_path.write_bytes(bytes(data))
    r = cleanable_range(log, first.end_offset, NOW_MS)
    with pytest.raises(UncleanableLogError, match="corrupt batch"):
        Cleaner(1 << 20, native=native_walks).clean(log, r.first_dirty_offset, r.first_uncleanable_offset, NOW_MS)
    assert clean_segment.log_path.read_bytes() == bytes(data)  # nothing swapped
    log.close()
