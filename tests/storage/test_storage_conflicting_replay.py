"""A retried sequence with different records is refused (INVALID_RECORD 87), a true retry is answered with
the original offsets — live, after a snapshot reload, after a rebuild from the log (snapshots deleted,
SIGKILL), on a follower that becomes leader, and from a version 1 snapshot written before the checksums.
Stricter than Kafka, which answers the conflicting replay with the original offset (issue 20)."""

from __future__ import annotations

import signal
import struct
import subprocess
import sys
from pathlib import Path

import pytest
from storage_batches import NOW_MS, make_batch, open_log

from samsa.kproto.batch import parse_header
from samsa.kproto.checksum import crc32c
from samsa.storage import Log, LogConfig, StorageError
from samsa.storage.producer_state import UNKNOWN_CRC, ProducerStateManager

PID = 42
HERE = Path(__file__).parent


def batch(seq: int, prefix: str = "v", n: int = 2, epoch: int = 0) -> bytes:
    return make_batch([f"{prefix}{seq + i}".encode() for i in range(n)], producer_id=PID, producer_epoch=epoch,
                      base_sequence=seq)


def fill(log: Log, batches: int = 4) -> None:
    """Batches of 2 records at sequences 0, 2, 4, ... after one record without a producer (offset 0)."""
    log.append_as_leader(make_batch([b"plain"]), leader_epoch=0, now_ms=NOW_MS)
    for k in range(batches):
        log.append_as_leader(batch(2 * k), leader_epoch=0, now_ms=NOW_MS)


def assert_replays(log: Log) -> None:
    """The batch at sequence 2 (offsets 3-4): same bytes are a duplicate, other bytes are refused."""
    end = log.log_end_offset
    dup = log.append_as_leader(batch(2), leader_epoch=0, now_ms=NOW_MS)
    assert dup.duplicate and (dup.first_offset, dup.last_offset) == (3, 4)
    with pytest.raises(StorageError) as refused:
        log.append_as_leader(batch(2, prefix="other"), leader_epoch=0, now_ms=NOW_MS)
    assert refused.value.error_code == 87  # INVALID_RECORD
    message = str(refused.value)
    assert f"producer {PID}" in message and "sequence 2..3" in message and "offset 3" in message
    assert log.log_end_offset == end  # nothing appended either way


def test_same_bytes_is_a_duplicate_different_bytes_refused(log_dir: Path) -> None:
    log = open_log(log_dir)
    fill(log)
    assert_replays(log)
    # bytearray input (the produce handler's) and the multi-batch path refuse too
    with pytest.raises(StorageError) as refused:
        log.append_as_leader(bytearray(batch(4, prefix="x")), leader_epoch=0, now_ms=NOW_MS)
    assert refused.value.error_code == 87
    with pytest.raises(StorageError) as refused:
        log.append_as_leader(batch(8) + batch(6, prefix="x"), leader_epoch=0, now_ms=NOW_MS)
    assert refused.value.error_code == 87
    assert log.append_as_leader(batch(8), leader_epoch=0, now_ms=NOW_MS).first_offset == 9  # the log goes on
    log.close()


def test_refusal_survives_snapshot_reload(log_dir: Path) -> None:
    log = open_log(log_dir)
    fill(log)
    log.close()
    assert list(log_dir.glob("*.snapshot"))
    log = open_log(log_dir)
    entry = log.producer_state(PID)
    assert entry is not None and all(b.crc != UNKNOWN_CRC for b in entry.batches)
    assert_replays(log)
    log.close()


def test_refusal_survives_rebuild_from_the_log(log_dir: Path) -> None:
    config = LogConfig(segment_bytes=300)  # several segments, so snapshots at every roll
    log = open_log(log_dir, config)
    fill(log, batches=6)
    log.close()
    for snap in log_dir.glob("*.snapshot"):
        snap.unlink()
    log = open_log(log_dir, config)
    with pytest.raises(StorageError) as refused:
        log.append_as_leader(batch(8, prefix="other"), leader_epoch=0, now_ms=NOW_MS)
    assert refused.value.error_code == 87 and "offset 9" in str(refused.value)
    assert log.append_as_leader(batch(8), leader_epoch=0, now_ms=NOW_MS).duplicate
    log.close()


_KILLED_WRITER = """
import os, signal, sys
sys.path.insert(0, sys.argv[2])
from storage_batches import NOW_MS, make_batch, open_log
log = open_log(__import__("pathlib").Path(sys.argv[1]))
log.append_as_leader(make_batch([b"plain"]), leader_epoch=0, now_ms=NOW_MS)
for k in range(4):
    log.append_as_leader(make_batch([f"v{2 * k + i}".encode() for i in range(2)], producer_id=42,
                                    producer_epoch=0, base_sequence=2 * k), leader_epoch=0, now_ms=NOW_MS)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_refusal_survives_sigkill(log_dir: Path) -> None:
    r = subprocess.run([sys.executable, "-c", _KILLED_WRITER, str(log_dir), str(HERE)], timeout=60, check=False)
    assert r.returncode == -signal.SIGKILL
    assert not list(log_dir.glob("*.snapshot"))  # no clean close: the state comes from the log's batches
    log = open_log(log_dir, recovery_point=0)
    assert log.log_end_offset == 9
    assert_replays(log)
    log.close()


def test_follower_rebuilds_checksums_from_replicated_batches(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "t-0")
    fill(leader)
    follower = open_log(tmp_path / "t-0-follower")
    follower.append_as_follower(leader.read(0, max_bytes=1 << 20, max_offset=None).read_bytes(), now_ms=NOW_MS)
    assert follower.log_end_offset == leader.log_end_offset
    assert_replays(follower)  # the follower, now leader, refuses what the old leader would have
    leader.close()
    follower.close()


def _v1_snapshot(offset: int, first_offsets: list[int]) -> bytes:
    """A snapshot as written before the checksums (version 1): producer PID with batches of 2 at sequences
    0, 2, ... starting at `first_offsets`."""
    body = struct.pack(">qi", offset, 1)
    body += struct.pack(">qhqiqb", PID, 0, NOW_MS, -1, -1, len(first_offsets))
    for k, first in enumerate(first_offsets):
        body += struct.pack(">iiqqq", 2 * k, 2 * k + 1, first, first + 1, NOW_MS)
    return struct.pack(">4shI", b"SMPS", 1, crc32c(body)) + body


def test_version_1_snapshot_still_loads(log_dir: Path) -> None:
    log = open_log(log_dir)
    fill(log)
    log.close()
    for snap in log_dir.glob("*.snapshot"):
        snap.unlink()
    (log_dir / f"{9:020d}.snapshot").write_bytes(_v1_snapshot(9, [1, 3, 5, 7]))
    log = open_log(log_dir)
    entry = log.producer_state(PID)
    assert entry is not None and entry.last_seq == 7 and [b.first_offset for b in entry.batches] == [1, 3, 5, 7]
    assert all(b.crc == UNKNOWN_CRC for b in entry.batches)
    # no checksum to compare: answered with the original offset, as before the upgrade (and as Kafka does)
    assert log.append_as_leader(batch(2), leader_epoch=0, now_ms=NOW_MS).first_offset == 3
    assert log.append_as_leader(batch(2, prefix="other"), leader_epoch=0, now_ms=NOW_MS).first_offset == 3
    # batches appended after the upgrade carry their checksum, and the next snapshot is version 2
    log.append_as_leader(batch(8), leader_epoch=0, now_ms=NOW_MS)
    with pytest.raises(StorageError):
        log.append_as_leader(batch(8, prefix="other"), leader_epoch=0, now_ms=NOW_MS)
    log.close()
    newest = sorted(log_dir.glob("*.snapshot"))[-1].read_bytes()
    assert newest[:6] == b"SMPS\x00\x02"
    offset, producers = ProducerStateManager.decode_snapshot(newest)
    assert offset == 11 and producers[PID].batches[-1].crc == parse_header(batch(8)).crc


def test_log_append_time_topic_answers_replays_as_kafka(log_dir: Path) -> None:
    """LogAppendTime restamps the batch (its CRC and max timestamp become the broker's) on every replica, so
    there is no client checksum to compare: a retry is a duplicate whatever its records, live and after a
    rebuild from the log."""
    config = LogConfig(message_timestamp_type="LogAppendTime")
    log = open_log(log_dir, config)
    fill(log)
    entry = log.producer_state(PID)
    assert entry is not None and all(b.crc == UNKNOWN_CRC for b in entry.batches)
    assert log.append_as_leader(batch(2), leader_epoch=0, now_ms=NOW_MS + 5).duplicate
    assert log.append_as_leader(batch(2, prefix="other"), leader_epoch=0, now_ms=NOW_MS + 5).first_offset == 3
    log.close()
    for snap in log_dir.glob("*.snapshot"):
        snap.unlink()
    log = open_log(log_dir, config)
    dup = log.append_as_leader(batch(2), leader_epoch=0, now_ms=NOW_MS + 9)
    assert dup.duplicate and dup.first_offset == 3
    log.close()


def test_retry_re_encoded_with_new_batch_timestamps_is_a_duplicate(log_dir: Path) -> None:
    """kafkajs stamps Date.now() into a batch's base and max timestamps at every encode (when its messages
    carry no timestamp), so its retry of the same records has another CRC: still a duplicate, also after a
    rebuild from the log; other records with the new timestamps are still refused."""
    log = open_log(log_dir, LogConfig(segment_bytes=300))
    fill(log)
    later = NOW_MS + 1234
    retry = make_batch([b"v2", b"v3"], base_timestamp=later, producer_id=PID, producer_epoch=0, base_sequence=2)
    assert parse_header(retry).crc != parse_header(batch(2)).crc
    for attempt in range(2):
        dup = log.append_as_leader(retry, leader_epoch=0, now_ms=NOW_MS)
        assert dup.duplicate and dup.first_offset == 3
        other = make_batch([b"v2", b"X"], base_timestamp=later, producer_id=PID, producer_epoch=0, base_sequence=2)
        with pytest.raises(StorageError):
            log.append_as_leader(other, leader_epoch=0, now_ms=NOW_MS)
        # record timestamps are records: the same values stamped 1 ms apart are other records
        shifted = make_batch([b"v2", b"v3"], timestamps=[later, later + 1], producer_id=PID, producer_epoch=0,
                             base_sequence=2)
        with pytest.raises(StorageError):
            log.append_as_leader(shifted, leader_epoch=0, now_ms=NOW_MS)
        # the multi-batch path too
        assert log.append_as_leader(retry + batch(8), leader_epoch=0, now_ms=NOW_MS).duplicate
        if attempt == 0:
            log.close()
            for snap in log_dir.glob("*.snapshot"):
                snap.unlink()
            log = open_log(log_dir, LogConfig(segment_bytes=300))
    log.close()


def test_new_epoch_reusing_sequence_zero_is_not_a_replay(log_dir: Path) -> None:
    log = open_log(log_dir)
    fill(log)
    info = log.append_as_leader(batch(0, prefix="fresh", epoch=1), leader_epoch=0, now_ms=NOW_MS)
    assert not info.duplicate and info.first_offset == 9
    log.close()


def test_snapshot_round_trip_keeps_checksums() -> None:
    manager = ProducerStateManager()
    for k in range(7):
        h = parse_header(make_batch([b"a", b"b"], base_offset=2 * k, producer_id=PID, producer_epoch=0,
                                    base_sequence=2 * k))
        manager.update(h)
    offset, producers = ProducerStateManager.decode_snapshot(manager.encode_snapshot(14))
    assert offset == 14
    assert list(producers[PID].batches) == list(manager.producers[PID].batches)
    assert len(producers[PID].batches) == 5 and all(b.crc != UNKNOWN_CRC for b in producers[PID].batches)

