"""Crashes, power loss, damaged files and full disks."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from storage_batches import NOW_MS, decode_values, make_batch, open_log

from samsa.storage import (
    FaultyFileIO,
    KafkaStorageError,
    Log,
    LogConfig,
    LogManager,
    OsFileIO,
)
from samsa.storage.disk_guard import DiskSpaceGuard

HERE = Path(__file__).parent
REPO = HERE.parent.parent


def read_all(log: Log) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        chunk = decode_values(log.read(offset, max_bytes=1 << 16, max_offset=None).read_bytes())
        assert chunk, f"nothing readable at {offset} < log end {log.log_end_offset}"
        out.extend(chunk)
        offset = chunk[-1][0] + 1
    return out


# -- SIGKILL --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_sigkill_loses_no_acknowledged_append(tmp_path: Path, seed: int) -> None:
    env = {**os.environ, "PYTHONPATH": f"{REPO}{os.pathsep}{HERE}"}
    proc = subprocess.Popen([sys.executable, str(HERE / "crash_writer.py"), str(tmp_path), str(seed)],
                            stdout=subprocess.PIPE, text=True, env=env, cwd=REPO)
    assert proc.stdout is not None
    acks: list[tuple[int, int, int, str]] = []
    target = random.Random(seed).randint(100, 600)
    try:
        while len(acks) < target:
            line = proc.stdout.readline()
            assert line, "writer died"
            p, first, last, tag = line.split()
            acks.append((int(p), int(first), int(last), tag))
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    for line in proc.stdout.read().splitlines():  # printed before the kill: acknowledged too
        parts = line.split()
        if len(parts) == 4:
            acks.append((int(parts[0]), int(parts[1]), int(parts[2]), parts[3]))
    proc.stdout.close()

    manager = LogManager(tmp_path, max_open_files=8)
    manager.load_logs(lambda _topic: LogConfig(), NOW_MS)
    for p in range(3):
        log = manager.get_log("crash.topic", p)
        assert log is not None and log.offline_reason is None
        records = dict(read_all(log))
        mine = [a for a in acks if a[0] == p]
        for _, first, last, tag in mine:
            for offset in range(first, last + 1):
                assert records[offset].startswith(f"{tag}/".encode()), (p, offset)
        if mine:
            entry = log.producer_state(1000 + p)
            assert entry is not None
            acked_records = sum(last - first + 1 for _, first, last, _ in mine)
            assert entry.last_seq >= acked_records - 1
    manager.close()


# -- power loss ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(16))
def test_power_loss_keeps_everything_flushed(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    io = FaultyFileIO()
    config = LogConfig(segment_bytes=rng.choice([600, 3000]), index_interval_bytes=rng.choice([50, 4096]))
    manager = LogManager(tmp_path, file_io=io)
    log = manager.get_or_create_log("power.loss", 0, config, NOW_MS)
    appended: dict[int, bytes] = {}
    durable_upto = 0
    now_ms = NOW_MS
    for i in range(rng.randint(10, 60)):
        now_ms += 1
        values = [f"{i}/{k}".encode() + b"#" * rng.randint(0, 120) for k in range(rng.randint(1, 4))]
        info = log.append_as_leader(make_batch(values, base_timestamp=now_ms, producer_id=7, producer_epoch=0,
                                               base_sequence=len(appended)), leader_epoch=1 + i // 20,
                                    now_ms=now_ms)
        appended.update((info.first_offset + k, v) for k, v in enumerate(values))
        log.update_high_watermark(info.last_offset + 1)
        r = rng.random()
        if r < 0.1:
            log.flush()
            manager.checkpoint_high_watermarks()
            durable_upto = log.recovery_point
        elif r < 0.2:
            log.roll(now_ms)
        elif r < 0.3:
            manager.flush_dirty(now_ms)  # flushes what a roll left behind, checkpoints recovery points
            durable_upto = log.recovery_point
    io.power_loss(rng)

    manager = LogManager(tmp_path, file_io=OsFileIO())
    manager.load_logs(lambda _topic: config, now_ms)
    log2 = manager.get_log("power.loss", 0)
    assert log2 is not None and log2.offline_reason is None
    assert log2.log_end_offset >= durable_upto
    records = read_all(log2)
    assert [o for o, _ in records] == list(range(log2.log_end_offset))
    assert all(appended[o] == v for o, v in records)
    for epoch, start in log2.epoch_entries:
        assert start <= log2.log_end_offset and epoch >= 1
    # the log takes appends again, and producer state continued from what survived
    entry = log2.producer_state(7)
    if log2.log_end_offset:
        assert entry is not None and entry.last_seq == log2.log_end_offset - 1
    info = log2.append_as_leader(make_batch([b"after"]), leader_epoch=9, now_ms=now_ms)
    assert info.first_offset == log2.log_end_offset - 1
    manager.close()


# -- damaged files -------------------------------------------------------------------------------------------


def _filled_log(directory: Path, config: LogConfig, batches: int = 40) -> list[tuple[int, bytes]]:
    log = open_log(directory, config)
    for i in range(batches):
        log.append_as_leader(make_batch([f"{i}/{k}".encode() * 5 for k in range(3)], producer_id=3,
                                        producer_epoch=0, base_sequence=3 * i), leader_epoch=1 + i // 10,
                             now_ms=NOW_MS)
    expected = read_all(log)
    log.close()
    return expected


SMALL = LogConfig(segment_bytes=1000, index_interval_bytes=60)


@pytest.mark.parametrize("damage", ["garbage", "torn", "missing", "shifted"])
def test_damaged_index_files_are_rebuilt(log_dir: Path, damage: str) -> None:
    expected = _filled_log(log_dir, SMALL)
    rng = random.Random(damage)
    for path in sorted(log_dir.glob("*.index")) + sorted(log_dir.glob("*.timeindex")):
        size = path.stat().st_size
        if damage == "garbage":
            path.write_bytes(rng.randbytes(size))
        elif damage == "torn":
            path.write_bytes(path.read_bytes()[: max(0, size - 3)])
        elif damage == "missing":
            path.unlink()
        else:  # plausible entries pointing at the wrong places
            data = path.read_bytes()
            path.write_bytes(data[8:] + data[:8])
    log = open_log(log_dir, SMALL, recovery_point=expected[-1][0] + 1)
    assert read_all(log) == expected
    assert log.offline_reason is None
    for offset in range(0, len(expected), 7):
        info = log.read(offset, max_bytes=1, max_offset=None)
        got = decode_values(info.read_bytes())
        assert got[0][0] <= offset <= got[-1][0]
    log.close()


def test_corrupt_snapshot_is_discarded_and_state_rebuilt(log_dir: Path) -> None:
    expected = _filled_log(log_dir, SMALL)
    snapshots = sorted(log_dir.glob("*.snapshot"))
    assert snapshots
    for snap in snapshots:
        data = bytearray(snap.read_bytes())
        data[len(data) // 2] ^= 0xFF
        snap.write_bytes(bytes(data))
    log = open_log(log_dir, SMALL, recovery_point=len(expected))
    entry = log.producer_state(3)
    assert entry is not None and entry.last_seq == len(expected) - 1
    # the retry of the last batch is still recognised
    dup = log.append_as_leader(make_batch([f"39/{k}".encode() * 5 for k in range(3)], producer_id=3,
                                          producer_epoch=0, base_sequence=117), leader_epoch=4, now_ms=NOW_MS)
    assert dup.duplicate and dup.first_offset == 117
    assert not any(s.exists() for s in snapshots)  # corrupt snapshots are deleted


@pytest.mark.parametrize("content", [b"", b"0\n3\n1 0\n", b"1\n0\n", b"0\n2\n5 100\n2 3\n", b"\xff\xfe"])
def test_corrupt_leader_epoch_checkpoint_is_rebuilt(log_dir: Path, content: bytes) -> None:
    expected = _filled_log(log_dir, SMALL)
    (log_dir / "leader-epoch-checkpoint").write_bytes(content)
    log = open_log(log_dir, SMALL, recovery_point=len(expected))
    assert log.epoch_entries == [(1, 0), (2, 30), (3, 60), (4, 90)]
    assert log.end_offset_for_epoch(2) == (2, 60)
    assert (log_dir / "leader-epoch-checkpoint").read_text() == "0\n4\n1 0\n2 30\n3 60\n4 90\n"


def test_corrupt_data_dir_checkpoints_fall_back_to_full_recovery(tmp_path: Path) -> None:
    manager = LogManager(tmp_path)
    for p in range(3):
        log = manager.get_or_create_log("my.topic_x-y", p, SMALL, NOW_MS)
        for i in range(10):
            log.append_as_leader(make_batch([f"{p}-{i}".encode()]), leader_epoch=0, now_ms=NOW_MS)
        log.update_high_watermark(8)
    manager.close()
    assert (tmp_path / "replication-offset-checkpoint").read_text().startswith("0\n3\nmy.topic_x-y 0 8\n")
    for name in ("replication-offset-checkpoint", "recovery-point-offset-checkpoint", "log-start-offset-checkpoint"):
        (tmp_path / name).write_bytes(b"0\n7\ngarbage")
    manager = LogManager(tmp_path)
    manager.load_logs(lambda _t: SMALL, NOW_MS)
    assert sorted((t, p) for t, p, _ in manager.all_logs()) == [("my.topic_x-y", p) for p in range(3)]
    for _, p, log in manager.all_logs():
        assert read_all(log) == [(i, f"{p}-{i}".encode()) for i in range(10)]
        assert log.high_watermark == 0  # unknown: the conservative value, replication raises it again
    manager.close()


def test_corrupt_closed_segment_takes_partition_offline(tmp_path: Path) -> None:
    config = LogConfig(segment_bytes=1000, index_interval_bytes=4096)  # no index entries: reads walk headers
    manager = LogManager(tmp_path)
    good = manager.get_or_create_log("t", 0, config, NOW_MS)
    bad = manager.get_or_create_log("t", 1, config, NOW_MS)
    for log in (good, bad):
        for i in range(40):
            log.append_as_leader(make_batch([f"{i}".encode() * 20]), leader_epoch=0, now_ms=NOW_MS)
    manager.close()
    first = sorted((tmp_path / "t-1").glob("*.log"))[0]
    data = bytearray(first.read_bytes())
    size0 = int.from_bytes(data[8:12], "big") + 12
    size1 = int.from_bytes(data[size0 + 8 : size0 + 12], "big") + 12
    data[size0 + size1 + 16] = 9  # the magic byte of the third batch (offset 2) of the first, closed segment
    first.write_bytes(bytes(data))
    manager = LogManager(tmp_path)
    manager.load_logs(lambda _t: config, NOW_MS)
    bad2 = manager.get_log("t", 1)
    good2 = manager.get_log("t", 0)
    assert bad2 is not None and good2 is not None
    assert bad2.offline_reason is None  # below the recovery point: not scanned at open ...
    assert decode_values(bad2.read(1, max_bytes=1, max_offset=None).read_bytes()) == [(1, b"1" * 20)]
    with pytest.raises(KafkaStorageError):  # ... but found by the first read that walks over it
        bad2.read(3, max_bytes=1, max_offset=None)
    assert bad2.offline_reason is not None and "corrupt" in bad2.offline_reason
    with pytest.raises(KafkaStorageError) as e:
        bad2.append_as_leader(make_batch([b"x"]), leader_epoch=0, now_ms=NOW_MS)
    assert e.value.error_code == 56
    assert len(read_all(good2)) == 40
    manager.close()
    # nothing was dropped: the damaged segment is still there for an operator to look at
    assert first.stat().st_size == len(data)


@pytest.mark.parametrize("below_recovery_point", [True, False])
def test_crc_damage_found_by_recovery(log_dir: Path, below_recovery_point: bool) -> None:
    """Damage above the recovery point is a crash tail (truncated, Kafka's rule); below it, it is offline."""
    _filled_log(log_dir, SMALL)
    logs = sorted(log_dir.glob("*.log"))
    second_base = int(logs[1].name[:-4])
    data = bytearray(logs[0].read_bytes())
    data[-5] ^= 0xFF  # CRC failure in the last batch (3 records) of the first segment
    logs[0].write_bytes(bytes(data))
    recovery_point = second_base - 1 if below_recovery_point else second_base - 3
    log = open_log(log_dir, SMALL, recovery_point=recovery_point)
    if below_recovery_point:
        assert log.offline_reason is not None
        assert all(p.exists() for p in logs) and logs[0].stat().st_size == len(data)
        with pytest.raises(KafkaStorageError):
            log.read(0, max_bytes=100, max_offset=None)
    else:
        assert log.offline_reason is None
        assert log.log_end_offset == second_base - 3
        assert [o for o, _ in read_all(log)] == list(range(second_base - 3))


def test_torn_tail_after_crash_is_truncated(log_dir: Path) -> None:
    expected = _filled_log(log_dir, SMALL)
    last = sorted(log_dir.glob("*.log"))[-1]
    with open(last, "ab") as f:
        f.write(make_batch([b"torn"])[:40])
    log = open_log(log_dir, SMALL, recovery_point=None)
    assert read_all(log) == expected
    assert last.stat().st_size == log.active_segment.size_bytes


# -- full disks and I/O errors -------------------------------------------------------------------------------


def test_disk_reserve_refuses_appends(tmp_path: Path) -> None:
    io = FaultyFileIO()
    manager = LogManager(tmp_path, file_io=io, min_free_disk_bytes=1 << 20)
    manager.disk_guard.recheck_interval_ms = 0
    log = manager.get_or_create_log("full", 0, LogConfig(), NOW_MS)
    log.append_as_leader(make_batch([b"a"]), leader_epoch=0, now_ms=NOW_MS)
    io.free_bytes = (1 << 20) + 100
    with pytest.raises(KafkaStorageError) as e:
        log.append_as_leader(make_batch([b"b" * 200]), leader_epoch=0, now_ms=NOW_MS + 1)
    assert e.value.error_code == 56
    assert log.log_end_offset == 1 and log.offline_reason is None
    assert read_all(log) == [(0, b"a")]
    io.free_bytes = 10 << 20
    assert log.append_as_leader(make_batch([b"c"]), leader_epoch=0, now_ms=NOW_MS + 2).first_offset == 1
    # a per-topic reserve (LogConfig.min_free_disk_bytes) applies as well
    log.update_config(LogConfig(min_free_disk_bytes=20 << 20))
    with pytest.raises(KafkaStorageError):
        log.append_as_leader(make_batch([b"d"]), leader_epoch=0, now_ms=NOW_MS + 3)
    manager.close()


def test_disk_guard_rechecks_on_interval() -> None:
    io = FaultyFileIO()
    guard = DiskSpaceGuard(io, Path("/"), min_free_bytes=1000, recheck_interval_ms=100)
    io.free_bytes = 10_000
    guard.check(100, now_ms=0)
    io.free_bytes = 500
    guard.check(100, now_ms=50)  # estimate still says there is room
    with pytest.raises(KafkaStorageError):
        guard.check(100, now_ms=150)


@pytest.mark.parametrize("fault", ["enospc", "eio"])
def test_failed_write_leaves_the_log_unchanged(log_dir: Path, fault: str) -> None:
    io = FaultyFileIO()
    log = open_log(log_dir, LogConfig(), file_io=io)
    log.append_as_leader(make_batch([b"one"]), leader_epoch=0, now_ms=NOW_MS)
    size = log.active_segment.size_bytes
    if fault == "enospc":
        io.write_budget_bytes = 30  # a torn partial write, then ENOSPC
    else:
        io.fail_next_write = True
    with pytest.raises(KafkaStorageError):
        log.append_as_leader(make_batch([b"two" * 50]), leader_epoch=0, now_ms=NOW_MS)
    assert log.log_end_offset == 1 and log.active_segment.size_bytes == size
    assert (log_dir / "00000000000000000000.log").stat().st_size == size
    io.write_budget_bytes = None
    log.append_as_leader(make_batch([b"three"]), leader_epoch=0, now_ms=NOW_MS)
    assert read_all(log) == [(0, b"one"), (1, b"three")]
    log.close()
    assert read_all(open_log(log_dir, LogConfig(), recovery_point=2)) == [(0, b"one"), (1, b"three")]
