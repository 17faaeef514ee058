"""An expired transactional id leaves a tombstone in `__transaction_state` that compaction removes, so
a restart no longer loads it (Kafka's TransactionStateManager.removeExpiredTransactionalIds; issue 16)."""

from __future__ import annotations

import time
from pathlib import Path

import anyio

from samsa.broker.broker import Broker
from samsa.broker.config import BrokerConfig
from samsa.broker.internal_topic import replay
from samsa.broker.log_cleaner import LogCleaner
from samsa.broker.txn.records import encode_key
from samsa.broker.txn.service import TRANSACTION_STATE_TOPIC
from samsa.kproto.errors import ErrorCode
from samsa.storage.log import Log

SEGMENT_BYTES = 1 << 20
OVERRIDES = {"transaction.state.log.num.partitions": "1", "offsets.topic.num.partitions": "1",
             "transaction.state.log.segment.bytes": str(SEGMENT_BYTES), "log.cleaner.delete.retention.ms": "0",
             "log.cleaner.min.cleanable.ratio": "0.01"}


def start(tmp_path: Path) -> Broker:
    return Broker(BrokerConfig(overrides=OVERRIDES, data_dir=tmp_path / "data"))


def now_ms() -> int:
    return int(time.time() * 1000)


def state_log(broker: Broker) -> Log:
    partition = broker.replica_manager.get_partition(TRANSACTION_STATE_TOPIC, 0)
    assert partition is not None
    return partition.log


def clean(broker: Broker) -> None:
    log = state_log(broker)
    log.roll(now_ms())  # as segment.ms would: every record below the active segment
    cleaner = LogCleaner(broker.log_manager, lambda: broker.config)
    assert anyio.run(cleaner.clean_once, now_ms())
    assert not cleaner.uncleanable


def records_of(log: Log, transactional_id: str) -> list[bytes | None]:
    key = encode_key(transactional_id)
    return [v for _o, k, v in replay(log) if k == key]


def test_an_expired_transactional_id_is_tombstoned_and_compacted_away(tmp_path: Path) -> None:
    broker = start(tmp_path)
    txn = broker.txn
    now = now_ms()
    for tid in ("old", "kept"):
        assert txn.init_producer_id(tid, 60_000, -1, -1, now).error == ErrorCode.none
    log = state_log(broker)
    assert log.config.compact and log.config.segment_bytes == SEGMENT_BYTES
    assert txn.init_producer_id("kept", 60_000, -1, -1, now + 10).error == ErrorCode.none
    expiration_ms = txn.coordinator.config.transactional_id_expiration_ms
    txn.expire(now + expiration_ms + 5)  # "old" is idle past transactional.id.expiration.ms, "kept" not
    assert "old" not in txn.coordinator.transactions and "kept" in txn.coordinator.transactions
    assert records_of(log, "old")[-1] is None  # the tombstone
    clean(broker)  # keeps the tombstone, and sets its delete horizon (KIP-534)
    assert records_of(log, "old") == [None]
    txn.init_producer_id("kept", 60_000, -1, -1, now_ms())  # something new: the log is dirty again
    clean(broker)  # delete.retention.ms (0) has passed: the tombstone goes
    assert records_of(log, "old") == []
    assert len(records_of(log, "kept")) == 1
    broker.close()

    broker = start(tmp_path)
    assert "old" not in broker.txn.coordinator.transactions
    assert "kept" in broker.txn.coordinator.transactions
    broker.close()
