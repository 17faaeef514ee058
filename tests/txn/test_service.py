"""The transaction coordinator's shell in one process: a broker restart in the middle of a transaction
completes a decided one (PrepareCommit/PrepareAbort) and keeps an open one until it is aborted (issue 5)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from samsa.broker.broker import Broker
from samsa.broker.config import BrokerConfig
from samsa.broker.controller import TopicSpec
from samsa.broker.txn.state import TransactionState
from samsa.kproto.errors import ErrorCode
from samsa.kproto.records import decode_batches, decode_control_record, encode_batch

OVERRIDES = {"transaction.state.log.num.partitions": "2", "offsets.topic.num.partitions": "2"}


def start(tmp_path: Path) -> Broker:
    return Broker(BrokerConfig(overrides=OVERRIDES, data_dir=tmp_path / "data"))


def now_ms() -> int:
    return int(time.time() * 1000)


def markers(broker: Broker, topic: str) -> list[int]:
    log = broker.replica_manager.get_partition(topic, 0).log  # type: ignore[union-attr]
    data = log.read(0, max_bytes=1 << 20, max_offset=log.high_watermark).read_bytes()
    return [decode_control_record(recs[0]).type for h, recs in decode_batches(data, max_decompressed_bytes=1 << 20)
            if h.is_control]


def test_restart_completes_a_prepared_commit_and_aborts_an_open_transaction(tmp_path: Path) -> None:
    broker = start(tmp_path)
    (result,) = broker.controller.create_topics([TopicSpec("t", 1, 1)], validate_only=False).result()
    assert result.error_code == ErrorCode.none
    txn = broker.txn
    now = now_ms()
    decided = txn.init_producer_id("decided", 60_000, -1, -1, now)
    open_ = txn.init_producer_id("open", 2_000, -1, -1, now)
    partition = broker.replica_manager.get_partition("t", 0)
    assert partition is not None
    for name, r in (("decided", decided), ("open", open_)):
        assert txn.add_partitions(name, r.producer_id, r.producer_epoch, [("t", 0)], now) == ErrorCode.none
        partition.append_as_leader(bytearray(encode_batch([(None, name.encode(), ())], timestamp_ms=now,
                                                          producer_id=r.producer_id, producer_epoch=0,
                                                          base_sequence=0, is_transactional=True)), now)
    # EndTxn(commit) stored PrepareCommit, then the broker stopped before writing any marker.
    error, md = txn.coordinator.end_txn("decided", decided.producer_id, 0, True, now)
    assert error == ErrorCode.none and md is not None
    assert txn.persist(now) == ErrorCode.none
    assert partition.last_stable_offset == 0 and markers(broker, "t") == []
    broker.close()

    broker = start(tmp_path)
    txn = broker.txn
    partition = broker.replica_manager.get_partition("t", 0)
    assert partition is not None
    assert txn.coordinator.transactions["decided"].state is TransactionState.COMPLETE_COMMIT
    assert markers(broker, "t") == [1]  # COMMIT, written at load
    assert txn.coordinator.transactions["open"].state is TransactionState.ONGOING
    assert partition.last_stable_offset == 1  # the open transaction's first offset
    txn.tick(now_ms() + 2_001)  # its timeout passes: aborted with a bumped epoch
    md = txn.coordinator.transactions["open"]
    assert (md.state, md.producer_epoch) == (TransactionState.COMPLETE_ABORT, 1)
    assert markers(broker, "t") == [1, 0]
    assert partition.last_stable_offset == partition.log.high_watermark == 4
    assert [(a.producer_id, a.first_offset) for a in partition.aborted_transactions(0, 4)] == [
        (open_.producer_id, 1)]
    expected = partition.aborted_transactions(0, 4)
    broker.close()
    # The .txnindex is written without fsync: entries after the newest producer-state snapshot are
    # rebuilt from the log at the next start (here: no snapshot left, so from the start of the log).
    directory = partition.log.directory
    for path in [*directory.glob("*.txnindex"), *directory.glob("*.snapshot")]:
        path.unlink()
    broker = start(tmp_path)
    partition = broker.replica_manager.get_partition("t", 0)
    assert partition is not None
    assert partition.aborted_transactions(0, 4) == expected
    assert sorted(p.name for p in directory.glob("*.txnindex")) == ["00000000000000000000.txnindex"]
    broker.close()


def test_transactional_offsets_survive_a_restart_and_count_only_when_committed(tmp_path: Path) -> None:
    from samsa.broker.group.coordinator import OffsetAndMetadata
    from samsa.broker.txn.service import OFFSETS_TOPIC

    broker = start(tmp_path)
    broker.controller.create_topics([TopicSpec("src", 1, 1)], validate_only=False).result()
    assert broker.groups.ensure_offsets_topic() == ErrorCode.none
    now = now_ms()
    group_partition = (OFFSETS_TOPIC, broker.groups.partition_for("g"))
    ids = {}
    for name, offset in (("keep", 42), ("drop", 7)):
        r = broker.txn.init_producer_id(name, 60_000, -1, -1, now)
        ids[name] = r.producer_id
        assert broker.txn.add_partitions(name, r.producer_id, 0, [group_partition], now) == ErrorCode.none
        group = "g" if name == "keep" else "g2"
        if name == "drop":
            assert broker.txn.add_partitions(name, r.producer_id, 0, [(OFFSETS_TOPIC, broker.groups.partition_for(
                "g2"))], now) == ErrorCode.none
        assert broker.txn.txn_offset_commit(name, group, r.producer_id, 0, {
            ("src", 0): OffsetAndMetadata(offset, -1, "", now, None)}) == ErrorCode.none
    assert broker.groups.coordinator.committed_offsets("g") == {}
    broker.close()

    broker = start(tmp_path)  # both transactions are still open after the restart
    assert broker.groups.coordinator.committed_offsets("g") == {}
    assert set(broker.txn.pending_offsets) == {ids["keep"], ids["drop"]}
    assert broker.txn.end_txn("keep", ids["keep"], 0, True, now_ms()).error == ErrorCode.none
    assert broker.txn.end_txn("drop", ids["drop"], 0, False, now_ms()).error == ErrorCode.none
    assert broker.groups.coordinator.committed_offsets("g")[("src", 0)].offset == 42
    assert broker.groups.coordinator.committed_offsets("g2") == {}
    # A fenced instance cannot add offsets any more.
    broker.txn.init_producer_id("keep", 60_000, -1, -1, now_ms())
    assert broker.txn.txn_offset_commit("keep", "g", ids["keep"], 0, {
        ("src", 0): OffsetAndMetadata(99, -1, "", now, None)}) == ErrorCode.producer_fenced
    broker.close()

    broker = start(tmp_path)
    assert broker.groups.coordinator.committed_offsets("g")[("src", 0)].offset == 42
    assert broker.groups.coordinator.committed_offsets("g2") == {}
    assert broker.txn.pending_offsets == {}
    broker.close()


def test_a_failed_write_leaves_the_transaction_as_the_log_has_it(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """AddPartitionsToTxn / EndTxn whose __transaction_state record cannot be written answer
    COORDINATOR_NOT_AVAILABLE and leave memory as the log holds it, so a retry is taken anew."""
    from samsa.broker.txn import service as service_module

    broker = start(tmp_path)
    broker.controller.create_topics([TopicSpec("t", 2, 1)], validate_only=False).result()
    txn = broker.txn
    now = now_ms()
    r = txn.init_producer_id("tx", 60_000, -1, -1, now)
    assert txn.add_partitions("tx", r.producer_id, r.producer_epoch, [("t", 0)], now) == ErrorCode.none

    real_persist = service_module.TxnService.persist
    monkeypatch.setattr(service_module.TxnService, "persist", lambda self, now: ErrorCode.coordinator_not_available)
    assert txn.add_partitions("tx", r.producer_id, r.producer_epoch, [("t", 1)], now) == \
        ErrorCode.coordinator_not_available
    md = txn.coordinator.transactions["tx"]
    assert md.partitions == {("t", 0)} and md.state is TransactionState.ONGOING
    assert txn.end_txn("tx", r.producer_id, r.producer_epoch, True, now).error == ErrorCode.coordinator_not_available
    assert md.state is TransactionState.ONGOING  # not a PrepareCommit that no log holds

    monkeypatch.setattr(service_module.TxnService, "persist", real_persist)
    assert txn.add_partitions("tx", r.producer_id, r.producer_epoch, [("t", 1)], now) == ErrorCode.none
    assert md.partitions == {("t", 0), ("t", 1)}
    broker.close()
