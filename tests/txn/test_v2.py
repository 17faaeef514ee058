"""Transactions V2 (KIP-890 part 2): EndTxn v5's epoch bump at every transaction end and Kafka's retry table,
the leader's implicit add of a transactional batch's partition (Produce v12+) and of the group's offsets
partition (TxnOffsetCommit v5), and markers carrying the bumped epoch, so a late batch is fenced."""

from __future__ import annotations

import itertools
import time
from pathlib import Path

from samsa.broker.broker import Broker
from samsa.broker.config import BrokerConfig
from samsa.broker.controller import TopicSpec
from samsa.broker.group.coordinator import OffsetAndMetadata
from samsa.broker.txn.service import OFFSETS_TOPIC
from samsa.broker.txn.state import MAX_PRODUCER_EPOCH, TransactionCoordinator, TransactionState, TxnConfig
from samsa.kproto.errors import ErrorCode as E
from samsa.kproto.records import decode_batches, encode_batch

S = TransactionState


def coordinator() -> tuple[TransactionCoordinator, int]:
    ids = itertools.count(1000)
    c = TransactionCoordinator(TxnConfig(max_timeout_ms=60_000), lambda: next(ids))
    result, _ = c.init_producer_id("t", 10_000, -1, -1, now_ms=0)
    return c, result.producer_id


def test_every_end_bumps_the_epoch_and_a_retry_gets_the_same_answer() -> None:
    c, pid = coordinator()
    assert c.add_partitions("t", pid, 0, [("a", 0)], now_ms=1, transaction_version=2) == E.none
    r = c.end_txn_v2("t", pid, 0, True, now_ms=2)
    assert (r.error, r.producer_id, r.producer_epoch) == (E.none, pid, 1)
    assert r.preparing is not None and r.preparing.state is S.PREPARE_COMMIT  # the markers carry epoch 1
    assert c.end_txn_v2("t", pid, 0, True, 3).error == E.concurrent_transactions  # retry, markers pending
    assert c.end_txn_v2("t", pid, 1, True, 3).error == E.producer_fenced  # Prepare* takes only the retry
    c.complete("t", 4)
    retry = c.end_txn_v2("t", pid, 0, True, 5)
    assert (retry.error, retry.preparing, retry.producer_id, retry.producer_epoch) == (E.none, None, pid, 1)
    assert c.end_txn_v2("t", pid, 0, False, 5).error == E.invalid_txn_state  # a retry of the other outcome
    assert c.end_txn_v2("t", pid, 1, True, 5).error == E.invalid_txn_state  # nothing open to commit
    assert c.end_txn_v2("t", pid, 7, True, 5).error == E.producer_fenced
    assert c.end_txn_v2("t", pid + 1, 1, True, 5).error == E.invalid_producer_id_mapping


def test_an_abort_with_nothing_added_bumps_the_epoch_without_markers() -> None:
    c, pid = coordinator()
    assert c.end_txn_v2("t", pid, 0, True, 1).error == E.invalid_txn_state  # Empty: commit refused
    r = c.end_txn_v2("t", pid, 0, False, 1)  # Empty: abort bumps
    assert (r.error, r.producer_epoch) == (E.none, 1)
    assert r.preparing is not None and r.preparing.partitions == set()
    c.complete("t", 2)
    again = c.end_txn_v2("t", pid, 0, False, 3)  # the retry
    assert (again.error, again.preparing, again.producer_epoch) == (E.none, None, 1)
    bumped = c.end_txn_v2("t", pid, 1, False, 3)  # CompleteAbort, current epoch: another bump
    assert (bumped.error, bumped.producer_epoch) == (E.none, 2)


def test_an_exhausted_epoch_moves_to_the_next_producer_id_at_completion() -> None:
    c, pid = coordinator()
    md = c.transactions["t"]
    md.producer_epoch = MAX_PRODUCER_EPOCH
    assert c.add_partitions("t", pid, MAX_PRODUCER_EPOCH, [("a", 0)], 1, transaction_version=2) == E.none
    r = c.end_txn_v2("t", pid, MAX_PRODUCER_EPOCH, False, 2)
    assert r.preparing is not None and (md.producer_id, md.producer_epoch) == (pid, MAX_PRODUCER_EPOCH + 1)
    c.complete("t", 3)
    assert (md.producer_epoch, md.previous_producer_id, md.next_producer_id) == (0, pid, -1)
    assert md.producer_id != pid and c.by_producer_id(md.producer_id) is md
    retry = c.end_txn_v2("t", pid, MAX_PRODUCER_EPOCH, False, 4)  # the retry with the old id
    assert (retry.error, retry.producer_id, retry.producer_epoch) == (E.none, md.producer_id, 0)


def test_a_timed_out_v2_transaction_is_aborted_with_the_fence_and_the_end_bumps() -> None:
    c, pid = coordinator()
    assert c.add_partitions("t", pid, 0, [("a", 0)], 1, transaction_version=2) == E.none
    [md] = c.abort_timed_out(now_ms=20_000)
    assert (md.state, md.producer_epoch) == (S.PREPARE_ABORT, 2)


def batch(producer_id: int, epoch: int, sequence: int, value: bytes) -> bytearray:
    return bytearray(encode_batch([(None, value, ())], timestamp_ms=int(time.time() * 1000), producer_id=producer_id,
                                  producer_epoch=epoch, base_sequence=sequence, is_transactional=True))


def test_the_leader_adds_partitions_and_the_markers_fence_a_late_batch(tmp_path: Path) -> None:
    broker = Broker(BrokerConfig(overrides={"transaction.state.log.num.partitions": "2",
                                            "offsets.topic.num.partitions": "2"}, data_dir=tmp_path / "data"))
    try:
        broker.controller.create_topics([TopicSpec("t", 1, 1)], validate_only=False).result()
        assert broker.groups.ensure_offsets_topic() == E.none
        txn = broker.txn
        now = int(time.time() * 1000)
        r = txn.init_producer_id("tx", 60_000, -1, -1, now)
        pid = r.producer_id
        partition = broker.replica_manager.get_partition("t", 0)
        assert partition is not None
        # Produce v3-v11: the partition must have been added; v12+: the leader adds it.
        assert txn.verify_produce(pid, 0, "t", 0, "tx") == E.invalid_txn_state
        assert txn.verify_produce(pid, 0, "t", 0, "tx", implicit_add=True) == E.none
        partition.append_as_leader(batch(pid, 0, 0, b"a"), now)
        # TxnOffsetCommit v5 adds the group's partition too (no AddOffsetsToTxn)
        offsets = {("t", 0): OffsetAndMetadata(1, -1, "", now, None)}
        assert txn.txn_offset_commit("tx", "g", pid, 0, offsets) == E.invalid_txn_state
        assert txn.txn_offset_commit("tx", "g", pid, 0, offsets, implicit_add=True) == E.none
        md = txn.coordinator.transactions["tx"]
        assert md.partitions == {("t", 0), (OFFSETS_TOPIC, broker.groups.partition_for("g"))}

        ended = txn.end_txn("tx", pid, 0, True, now, transaction_version=2)
        assert (ended.error, ended.producer_id, ended.producer_epoch) == (E.none, pid, 1)
        assert md.state is S.COMPLETE_COMMIT
        assert broker.groups.coordinator.committed_offsets("g")[("t", 0)].offset == 1
        log = partition.log
        data = log.read(0, max_bytes=1 << 20, max_offset=log.high_watermark).read_bytes()
        control = [h for h, _ in decode_batches(data, max_decompressed_bytes=1 << 20) if h.is_control]
        assert [(h.producer_id, h.producer_epoch) for h in control] == [(pid, 1)]  # the bumped epoch
        # A late batch of the ended transaction (epoch 0) is fenced; the next transaction uses epoch 1.
        assert txn.verify_produce(pid, 0, "t", 0, "tx", implicit_add=True) == E.invalid_producer_epoch
        assert txn.verify_produce(pid, 1, "t", 0, "tx", implicit_add=True) == E.none
        partition.append_as_leader(batch(pid, 1, 0, b"b"), now)
        assert txn.end_txn("tx", pid, 1, False, now, transaction_version=2).producer_epoch == 2
    finally:
        broker.close()


def test_a_v2_transaction_is_stored_as_transaction_log_value_v1_with_its_tagged_fields() -> None:
    from samsa.broker.txn.records import decode_value, encode_value

    c, pid = coordinator()
    assert c.add_partitions("t", pid, 0, [("a", 0), ("a", 3), ("b", 1)], 1, transaction_version=2) == E.none
    md = c.transactions["t"]
    md.next_producer_id, md.previous_producer_id = 2000, 999
    value = encode_value(md)
    assert value[:2] == b"\x00\x01"  # version 1, as Kafka 4 writes a V2 transaction
    back = decode_value("t", value)
    assert (back.producer_id, back.producer_epoch, back.state, back.partitions, back.start_ms, back.last_update_ms,
            back.previous_producer_id, back.next_producer_id, back.client_transaction_version) == (
        pid, 0, S.ONGOING, {("a", 0), ("a", 3), ("b", 1)}, 1, 1, 999, 2000, 2)
    md.state, md.partitions = S.EMPTY, set()
    assert decode_value("t", encode_value(md)).partitions == set()


def test_a_fence_at_the_last_epoch_keeps_the_producer_id_its_batches_carry() -> None:
    c, pid = coordinator()
    md = c.transactions["t"]
    md.producer_epoch = MAX_PRODUCER_EPOCH
    assert c.add_partitions("t", pid, MAX_PRODUCER_EPOCH, [("a", 0)], 1) == E.none
    [fenced] = c.abort_timed_out(now_ms=20_000)
    assert (fenced.producer_id, fenced.producer_epoch) == (pid, MAX_PRODUCER_EPOCH + 1)  # the markers' pid
    c.complete("t", 20_001)
    r, _ = c.init_producer_id("t", 10_000, -1, -1, 20_002)
    assert r.producer_id != pid and r.producer_epoch == 0
