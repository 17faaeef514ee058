"""The transaction APIs on the wire, the same steps against Samsa and the reference Kafka (``-m samsa`` / ``-m kafka``):
error codes for fencing, retries and bad partitions, and what read_committed sees (issue 5)."""

from __future__ import annotations

import sys
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compat_targets import Target

from samsa.broker.client import Connection
from samsa.kproto.records import encode_batch

RETRIABLE = {14, 15, 16, 51}  # COORDINATOR_LOAD_IN_PROGRESS, _NOT_AVAILABLE, NOT_COORDINATOR, CONCURRENT_TRANSACTIONS


def connect(target: Target) -> Connection:
    host, _, port = target.bootstrap.rpartition(":")
    return Connection(host, int(port))


def retry(call: Any, code: Any, timeout_s: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while True:
        r = call()
        if code(r) not in RETRIABLE or time.monotonic() > deadline:
            return r
        time.sleep(0.2)


def init_pid(conn: Connection, txn_id: str, pid: int = -1, epoch: int = -1) -> Any:
    return retry(lambda: conn.request(22, {"transactional_id": txn_id, "transaction_timeout": 60000,
                                           "producer_id": pid, "producer_epoch": epoch}, version=4),
                 lambda r: r.error_code.value)


def add(conn: Connection, txn_id: str, pid: int, epoch: int, parts: list[tuple[str, int]],
        version: int = 3) -> dict[tuple[str, int], int]:
    by_topic: dict[str, list[int]] = {}
    for t, p in parts:
        by_topic.setdefault(t, []).append(p)

    def call() -> Any:
        return conn.request(24, {"v3_and_below_transactional_id": txn_id, "v3_and_below_producer_id": pid,
                                 "v3_and_below_producer_epoch": epoch,
                                 "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in by_topic.items()]},
                            version=version)

    r = retry(call, lambda r: r.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code.value)
    return {(t.name, p.partition_index): p.partition_error_code.value
            for t in r.results_by_topic_v3_and_below for p in t.results_by_partition}


def end(conn: Connection, txn_id: str, pid: int, epoch: int, commit: bool, version: int = 3) -> int:
    r = retry(lambda: conn.request(26, {"transactional_id": txn_id, "producer_id": pid, "producer_epoch": epoch,
                                        "committed": commit}, version=version), lambda r: r.error_code.value)
    return int(r.error_code.value)


def produce(conn: Connection, topic: str, partition: int, pid: int, epoch: int, seq: int, txn_id: str) -> int:
    batch = encode_batch([(None, b"v%d" % seq, ())], timestamp_ms=int(time.time() * 1000), producer_id=pid,
                         producer_epoch=epoch, base_sequence=seq, is_transactional=True)
    deadline = time.monotonic() + 30
    while True:
        r = conn.request(0, {"transactional_id": txn_id, "acks": -1, "timeout": 5000, "topic_data": [
            {"name": topic, "partition_data": [{"index": partition, "records": batch}]}]}, version=9)
        error = int(r.responses[0].partition_responses[0].error_code.value)
        # Kafka may answer NOT_LEADER_OR_FOLLOWER (6) for a moment after creating a topic, until the
        # broker has applied the new leadership; clients retry it, and so does this test.
        if error != 6 or time.monotonic() > deadline:
            return error
        time.sleep(0.2)


def fetch_committed(conn: Connection, topic: str) -> Any:
    r = conn.request(1, {"max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 1,
                         "session_id": 0, "session_epoch": -1, "replica_id": -1,
                         "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0,
                                                                     "partition_max_bytes": 1 << 20}]}],
                         "forgotten_topics_data": (), "rack_id": ""}, version=12)
    return r.responses[0].partitions[0]


def test_fencing_retries_and_read_committed_match_kafka(broker: Target) -> None:
    topic, txn_id = f"raw-{uuid.uuid4().hex[:8]}", f"raw-{uuid.uuid4().hex[:8]}"
    with connect(broker) as conn:
        r = conn.request(19, {"topics": [{"name": topic, "num_partitions": 2, "replication_factor": 1}],
                              "timeout": 30000})
        assert r.topics[0].error_code.value == 0
        r = retry(lambda: conn.request(10, {"key": txn_id, "key_type": 1}, version=3), lambda r: r.error_code.value)
        assert r.error_code.value == 0
        first = init_pid(conn, txn_id)
        pid, epoch = first.producer_id, first.producer_epoch
        assert (first.error_code.value, epoch) == (0, 0)
        assert end(conn, txn_id, pid, epoch, commit=True) == 48  # nothing to commit: INVALID_TXN_STATE
        assert add(conn, txn_id, pid, epoch, [(topic, 0), ("no-such-topic", 0)]) == {
            (topic, 0): 55, ("no-such-topic", 0): 3}
        assert add(conn, txn_id, pid, epoch, [(topic, 0)]) == {(topic, 0): 0}
        assert produce(conn, topic, 0, pid, epoch, 0, txn_id) == 0
        # A partition that was not added (KIP-890 part 1's verification): INVALID_TXN_STATE.
        assert produce(conn, topic, 1, pid, epoch, 0, txn_id) == 48
        p = fetch_committed(conn, topic)
        assert (p.high_watermark, p.last_stable_offset) == (1, 0)

        # A second instance: the open transaction is aborted and the first instance fenced.
        second = init_pid(conn, txn_id)
        assert second.error_code.value == 0 and second.producer_id == pid and second.producer_epoch > epoch
        assert add(conn, txn_id, pid, epoch, [(topic, 1)]) == {(topic, 1): 90}  # PRODUCER_FENCED
        assert add(conn, txn_id, pid, epoch, [(topic, 1)], version=1) == {(topic, 1): 47}  # INVALID_PRODUCER_EPOCH
        assert end(conn, txn_id, pid, epoch, commit=True) == 90
        assert produce(conn, topic, 0, pid, epoch, 1, txn_id) == 47
        p = fetch_committed(conn, topic)
        assert p.last_stable_offset == p.high_watermark == 2  # the record and the ABORT marker
        assert [(a.producer_id, a.first_offset) for a in p.aborted_transactions] == [(pid, 0)]

        new_epoch = second.producer_epoch
        assert add(conn, txn_id, pid, new_epoch, [(topic, 0)]) == {(topic, 0): 0}
        assert produce(conn, topic, 0, pid, new_epoch, 0, txn_id) == 0
        assert end(conn, txn_id, pid, new_epoch, commit=True) == 0
        assert end(conn, txn_id, pid, new_epoch, commit=True) == 0  # a retried commit
        assert end(conn, txn_id, pid, new_epoch, commit=False) == 48
        p = retry(lambda: fetch_committed(conn, topic), lambda p: 51 if p.last_stable_offset < 4 else 0)
        assert (p.high_watermark, p.last_stable_offset) == (4, 4)
        r = conn.request(65, {"transactional_ids": [txn_id]}, version=0).transaction_states[0]
        assert (r.error_code.value, r.transaction_state, r.producer_id, r.producer_epoch) == (
            0, "CompleteCommit", pid, new_epoch)
