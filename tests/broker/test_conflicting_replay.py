"""A retried (producer id, epoch, sequence) with different records is refused on the wire with
INVALID_RECORD (87) and a message naming the producer, sequence and original offset; the same bytes get
the original offset.  Across a clean restart and a SIGKILL (state rebuilt from the log's batch CRCs).
Stricter than Kafka, which answers both with the original offset (issue 20)."""

from __future__ import annotations

import time
from typing import Any

from samsa.broker.client import Connection
from samsa.kproto.records import decode_batches, encode_batch

T0_MS = int(time.time() * 1000)
INVALID_RECORD = 87


def create(conn: Connection, topic: str) -> None:
    r = conn.request(19, {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1,
                                      "assignments": (), "configs": ()}], "timeout": 1000, "validate_only": False})
    assert r.topics[0].error_code.value == 0


def init_pid(conn: Connection) -> int:
    for _ in range(100):  # COORDINATOR_LOAD_IN_PROGRESS while the producer-id block is allocated: retried
        r = conn.request(22, {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1,
                              "producer_epoch": -1})
        if r.error_code.value not in (14, 15):
            break
        time.sleep(0.05)
    assert r.error_code.value == 0
    return int(r.producer_id)


def log_values(conn: Connection, topic: str) -> list[bytes | None]:
    r = conn.request(1, {"max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 24, "isolation_level": 0,
                         "session_id": 0, "session_epoch": -1, "replica_id": -1,
                         "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0,
                                                                     "partition_max_bytes": 1 << 24}]}],
                         "forgotten_topics_data": (), "rack_id": ""}, version=12)
    data = r.responses[0].partitions[0].records
    return [rec.value for _, recs in decode_batches(data, max_decompressed_bytes=1 << 26) for rec in recs]


def produce(conn: Connection, topic: str, batch: bytes, version: int) -> Any:
    r = conn.request(0, {"transactional_id": None, "acks": -1, "timeout": 5000,
                         "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]},
                     version=version)
    return r.responses[0].partition_responses[0]


def batch(pid: int, seq: int, values: list[bytes]) -> bytes:
    return encode_batch([(None, v, ()) for v in values], timestamp_ms=T0_MS, producer_id=pid, producer_epoch=0,
                        base_sequence=seq)


def check_replays(conn: Connection, topic: str, pid: int) -> None:
    """The batch at sequence 1 (offset 2, records y1 y2): a true retry and a conflicting one."""
    same = produce(conn, topic, batch(pid, 1, [b"y1", b"y2"]), version=9)
    assert same.error_code.value == 0 and same.base_offset == 2
    other = produce(conn, topic, batch(pid, 1, [b"y1", b"CHANGED"]), version=9)
    assert other.error_code.value == INVALID_RECORD and other.base_offset == -1
    message = other.error_message or ""
    assert f"producer {pid}" in message and "sequence 1..2" in message and "offset 2" in message, message
    # Produce v3-v7 have no error_message: the code alone
    assert produce(conn, topic, batch(pid, 1, [b"z", b"z"]), version=7).error_code.value == INVALID_RECORD
    assert log_values(conn, topic) == [b"a", b"x", b"y1", b"y2"]


def test_conflicting_replay_refused_across_restart_and_sigkill(samsa_factory: Any) -> None:
    s = samsa_factory()
    s.start()
    topic = "replays"
    with s.connect() as conn:
        create(conn, topic)
        assert produce(conn, topic, encode_batch([(None, b"a", ())], timestamp_ms=T0_MS), 9).error_code.value == 0
        pid = init_pid(conn)
        assert produce(conn, topic, batch(pid, 0, [b"x"]), version=9).base_offset == 1
        assert produce(conn, topic, batch(pid, 1, [b"y1", b"y2"]), version=9).base_offset == 2
        check_replays(conn, topic, pid)
    assert s.stop() == 0  # clean: the state comes back from the snapshot written at shutdown
    s.start()
    with s.connect() as conn:
        check_replays(conn, topic, pid)
    s.stop(kill=True)  # SIGKILL: no final snapshot, the state is rebuilt from the batches in the log
    s.start()
    with s.connect() as conn:
        check_replays(conn, topic, pid)
        # the producer goes on where it was
        assert produce(conn, topic, batch(pid, 3, [b"w"]), version=9).base_offset == 4
