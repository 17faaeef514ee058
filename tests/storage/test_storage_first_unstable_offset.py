"""The first unstable offset (the earliest open transaction's first offset) and the txn_version callers cache
it under: it changes exactly when a transaction opens or ends, or the producer state is rebuilt."""

from __future__ import annotations

from pathlib import Path

from storage_batches import make_batch, make_control_batch, open_log

from samsa.kproto.batch import TRANSACTIONAL_BIT

T0 = 1_700_000_000_000


def _txn(value: bytes, pid: int, seq: int) -> bytes:
    return make_batch([value], base_timestamp=T0, producer_id=pid, producer_epoch=0, base_sequence=seq,
                      attributes=TRANSACTIONAL_BIT)


def test_first_unstable_offset_follows_open_transactions(log_dir: Path) -> None:
    log = open_log(log_dir)
    assert log.first_unstable_offset() is None
    version = log.producer_txn_version
    log.append_as_leader(make_batch([b"i"], base_timestamp=T0, producer_id=1, producer_epoch=0, base_sequence=0),
                         leader_epoch=0, now_ms=T0)
    assert log.producer_txn_version == version  # an idempotent batch opens nothing
    log.append_as_leader(_txn(b"a", 2, 0), leader_epoch=0, now_ms=T0)  # offset 1 opens producer 2's
    assert log.first_unstable_offset() == 1 and log.producer_txn_version != version
    version = log.producer_txn_version
    log.append_as_leader(_txn(b"b", 2, 1), leader_epoch=0, now_ms=T0)  # the same transaction goes on
    log.append_as_leader(_txn(b"c", 3, 0), leader_epoch=0, now_ms=T0)  # offset 3 opens producer 3's
    assert log.first_unstable_offset() == 1
    version = log.producer_txn_version
    log.append_as_leader(make_control_batch(producer_id=2, producer_epoch=0), leader_epoch=0, now_ms=T0)
    assert log.first_unstable_offset() == 3 and log.producer_txn_version != version
    version = log.producer_txn_version
    # Truncation rebuilds the state: producer 3's batch and producer 2's marker are gone, so producer 2's
    # transaction is open again.
    log.truncate_to(3)
    assert log.first_unstable_offset() == 1 and log.producer_txn_version != version
