"""The transaction coordinator's state machine, its records and the aborted-transaction index (issue 5)."""

from __future__ import annotations

import itertools
import os
from pathlib import Path

from samsa.broker.txn.records import decode_key, decode_value, encode_key, encode_value, partition_for_transactional_id
from samsa.broker.txn.state import (
    MAX_PRODUCER_EPOCH,
    VALID_PREVIOUS_STATES,
    TransactionCoordinator,
    TransactionState,
    TxnConfig,
)
from samsa.kproto.errors import ErrorCode
from samsa.storage.producer_state import ProducerStateEntry
from samsa.storage.txn_index import ENTRY_BYTES, AbortedTxn, TransactionIndex, last_stable_offset

S = TransactionState
E = ErrorCode


def coordinator() -> TransactionCoordinator:
    ids = itertools.count(1000)
    return TransactionCoordinator(TxnConfig(max_timeout_ms=60_000), lambda: next(ids))


def test_state_table_is_kafkas() -> None:
    assert {s.kafka_name for s in S} == {"Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit",
                                         "CompleteAbort", "Dead", "PrepareEpochFence"}
    assert VALID_PREVIOUS_STATES[S.COMPLETE_COMMIT] == {S.PREPARE_COMMIT}
    assert VALID_PREVIOUS_STATES[S.PREPARE_ABORT] == {S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT,
                                                     S.COMPLETE_ABORT}  # Kafka 4: V2 aborts with nothing added
    assert [int(s) for s in S] == list(range(8))


def test_commit_transcript() -> None:
    c = coordinator()
    r, aborting = c.init_producer_id("t", 10_000, -1, -1, now_ms=0)
    assert (r.error, r.producer_id, r.producer_epoch, aborting) == (E.none, 1000, 0, None)
    assert c.drain_changed() == ["t"]
    assert c.end_txn("t", 1000, 0, True, 1) == (E.invalid_txn_state, None)  # nothing to commit
    assert c.add_partitions("t", 1000, 0, [("a", 0)], now_ms=5) == E.none
    md = c.transactions["t"]
    assert (md.state, md.start_ms, md.partitions) == (S.ONGOING, 5, {("a", 0)})
    assert c.add_partitions("t", 1000, 0, [("a", 0)], now_ms=6) == E.none and c.drain_changed() == ["t"]
    assert c.add_partitions("t", 1000, 1, [("a", 1)], 7) == E.producer_fenced
    assert c.add_partitions("t", 999, 0, [("a", 1)], 7) == E.invalid_producer_id_mapping
    error, prepared = c.end_txn("t", 1000, 0, True, 8)
    assert error == E.none and prepared is md and md.state is S.PREPARE_COMMIT
    assert c.add_partitions("t", 1000, 0, [("a", 1)], 9) == E.concurrent_transactions
    assert c.end_txn("t", 1000, 0, True, 9) == (E.concurrent_transactions, None)
    assert c.end_txn("t", 1000, 0, False, 9) == (E.invalid_txn_state, None)
    assert c.pending() == [md]
    c.complete("t", 10)
    assert (md.state, md.partitions) == (S.COMPLETE_COMMIT, set())
    assert c.end_txn("t", 1000, 0, True, 11) == (E.none, None)  # a retried commit
    # The next transaction starts afresh.
    assert c.add_partitions("t", 1000, 0, [("b", 0)], 12) == E.none
    assert (md.partitions, md.start_ms) == ({("b", 0)}, 12)


def test_reinit_fences_and_aborts_the_open_transaction() -> None:
    c = coordinator()
    c.init_producer_id("t", 10_000, -1, -1, 0)
    c.add_partitions("t", 1000, 0, [("a", 0)], 1)
    r, aborting = c.init_producer_id("t", 10_000, -1, -1, 2)
    assert r.error == E.concurrent_transactions and aborting is not None
    assert (aborting.state, aborting.producer_epoch) == (S.PREPARE_ABORT, 1)  # markers carry the bumped epoch
    c.complete("t", 3)
    r, _ = c.init_producer_id("t", 10_000, -1, -1, 4)
    assert (r.error, r.producer_id, r.producer_epoch) == (E.none, 1000, 2)
    assert c.end_txn("t", 1000, 0, True, 5) == (E.producer_fenced, None)
    # KIP-360: the current instance bumps its own epoch; a stale one is fenced; a retried bump is answered.
    r, _ = c.init_producer_id("t", 10_000, 1000, 2, 6)
    assert (r.error, r.producer_epoch) == (E.none, 3)
    assert c.init_producer_id("t", 10_000, 1000, 2, 7)[0].producer_epoch == 3
    assert c.init_producer_id("t", 10_000, 1000, 1, 7)[0].error == E.producer_fenced
    assert c.init_producer_id("t", 10_000, 77, 3, 7)[0].error == E.producer_fenced
    assert c.init_producer_id("t", 10**9, -1, -1, 7)[0].error == E.invalid_transaction_timeout


def test_epoch_exhaustion_moves_to_a_new_producer_id() -> None:
    c = coordinator()
    c.init_producer_id("t", 10_000, -1, -1, 0)
    c.transactions["t"].producer_epoch = MAX_PRODUCER_EPOCH
    r, _ = c.init_producer_id("t", 10_000, -1, -1, 1)
    assert (r.producer_id, r.producer_epoch) == (1001, 0)
    assert c.by_producer_id(1001) is c.transactions["t"] and c.by_producer_id(1000) is None


def test_timeout_aborts_with_a_bumped_epoch_and_ids_expire() -> None:
    c = coordinator()
    c.init_producer_id("t", 1000, -1, -1, 0)
    c.add_partitions("t", 1000, 0, [("a", 0)], 100)
    assert c.abort_timed_out(1099) == []
    (md,) = c.abort_timed_out(1100)
    assert (md.state, md.producer_epoch) == (S.PREPARE_ABORT, 1)
    c.complete("t", 1101)
    assert c.expire_transactional_ids(1101 + c.config.transactional_id_expiration_ms - 1) == []
    assert c.expire_transactional_ids(1101 + c.config.transactional_id_expiration_ms) == ["t"]
    assert "t" not in c.transactions and c.by_producer_id(1000) is None


def test_records_round_trip_and_load() -> None:
    c = coordinator()
    c.init_producer_id("txn-é", 5000, -1, -1, 0)
    c.add_partitions("txn-é", 1000, 0, [("a", 0), ("a", 2), ("b", 1)], 10)
    md = c.transactions["txn-é"]
    key, value = encode_key("txn-é"), encode_value(md)
    assert decode_key(key) == "txn-é"
    back = decode_value("txn-é", value)
    assert (back.producer_id, back.producer_epoch, back.timeout_ms, back.state, back.partitions, back.start_ms,
            back.last_update_ms) == (1000, 0, 5000, S.ONGOING, md.partitions, 10, 10)
    other = coordinator()
    other.load("txn-é", back)
    assert other.by_producer_id(1000) is back
    other.load("txn-é", None)
    assert other.transactions == {} and other.by_producer_id(1000) is None
    assert partition_for_transactional_id("my-txn", 50) == 45  # abs("my-txn".hashCode() = -1061187895) % 50


def test_aborted_transaction_index(tmp_path: Path) -> None:
    index = TransactionIndex._load(tmp_path, [], [0, 100], 300)
    index.append(0, AbortedTxn(1, 5, 20, 21))
    index.append(100, AbortedTxn(2, 90, 110, 111))
    index.append(100, AbortedTxn(3, 150, 160, 200))
    assert (tmp_path / "00000000000000000100.txnindex").stat().st_size == 2 * ENTRY_BYTES
    assert [a.producer_id for a in index.collect_aborted_transactions(0, 300)] == [1, 2, 3]
    assert [a.producer_id for a in index.collect_aborted_transactions(21, 300)] == [2, 3]
    assert [a.producer_id for a in index.collect_aborted_transactions(21, 100)] == [2]
    # Reopened: entries past the log end are dropped (a truncated tail), files of deleted segments removed.
    reopened = TransactionIndex._load(tmp_path, os.listdir(tmp_path), [100], 155)
    assert reopened.collect_aborted_transactions(0, 300) == [AbortedTxn(2, 90, 110, 111)]
    assert not (tmp_path / "00000000000000000000.txnindex").exists()
    reopened.truncate_to(100)
    assert reopened.collect_aborted_transactions(0, 300) == []


def test_last_stable_offset() -> None:
    entries = [ProducerStateEntry(1, current_txn_first_offset=40), ProducerStateEntry(2),
               ProducerStateEntry(3, current_txn_first_offset=12)]
    assert last_stable_offset(entries, 50) == 12
    assert last_stable_offset(entries[1:2], 50) == 50


def test_dirty_index_files_are_handed_out_once(tmp_path: Path) -> None:
    from samsa.storage.txn_index import fsync_files

    index = TransactionIndex._load(tmp_path, [], [0, 100], 300)
    index.append(100, AbortedTxn(2, 90, 110, 111))
    index.append(0, AbortedTxn(1, 5, 20, 21))
    dirty = index.take_dirty()
    assert [p.name for p in dirty] == ["00000000000000000000.txnindex", "00000000000000000100.txnindex"]
    assert index.take_dirty() == []
    fsync_files([*dirty, tmp_path / "gone.txnindex"])
