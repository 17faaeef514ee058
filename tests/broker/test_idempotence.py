"""Idempotent producers on the wire: retries are recognised, gaps and stale epochs refused (issue 5)."""

from __future__ import annotations

import time
from typing import Any

from samsa.broker.client import Connection
from samsa.kproto.records import decode_batches, encode_batch


def init_pid(conn: Connection, transactional_id: str | None = None) -> Any:
    # COORDINATOR_NOT_AVAILABLE / COORDINATOR_LOAD_IN_PROGRESS while __transaction_state is being created:
    # clients retry them (Kafka answers the same way), and so does this helper, a bounded number of times.
    for _ in range(100):
        r = conn.request(22, {"transactional_id": transactional_id, "transaction_timeout": 60000,
                              "producer_id": -1, "producer_epoch": -1})
        if r.error_code.value not in (14, 15):
            return r
        time.sleep(0.05)
    return r


def produce(conn: Connection, topic: str, batch: bytes) -> Any:
    r = conn.request(0, {"transactional_id": None, "acks": -1, "timeout": 5000,
                         "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}]})
    return r.responses[0].partition_responses[0]


T0_MS = int(time.time() * 1000)


def batch(pid: int, epoch: int, seq: int, values: list[bytes]) -> bytes:
    # One timestamp for the module, so a retry made by calling this again is byte for byte the same batch, as a
    # client's retry is: a retry with other bytes is refused (tests/broker/test_conflicting_replay.py).
    return encode_batch([(None, v, ()) for v in values], timestamp_ms=T0_MS,
                        producer_id=pid, producer_epoch=epoch, base_sequence=seq)


def log_values(conn: Connection, topic: str) -> list[bytes | None]:
    r = conn.request(1, {"max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 24, "isolation_level": 0,
                         "session_id": 0, "session_epoch": -1, "replica_id": -1,
                         "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0,
                                                                     "partition_max_bytes": 1 << 24}]}],
                         "forgotten_topics_data": (), "rack_id": ""}, version=12)
    data = r.responses[0].partitions[0].records
    return [rec.value for _, recs in decode_batches(data, max_decompressed_bytes=1 << 26) for rec in recs]


def create(conn: Connection, topic: str) -> None:
    r = conn.request(19, {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1,
                                      "assignments": (), "configs": ()}], "timeout": 1000, "validate_only": False})
    assert r.topics[0].error_code.value == 0


def test_sequence_and_epoch_rules(conn: Connection) -> None:
    create(conn, "idem")
    first, second = init_pid(conn), init_pid(conn)
    assert first.error_code.value == 0 and first.producer_epoch == 0
    assert second.producer_id != first.producer_id
    pid = first.producer_id
    r = produce(conn, "idem", batch(pid, 0, 0, [b"a", b"b"]))
    assert r.error_code.value == 0 and r.base_offset == 0
    # A retry of the same batch returns the original offset and appends nothing.
    again = produce(conn, "idem", batch(pid, 0, 0, [b"a", b"b"]))
    assert again.error_code.value == 0 and again.base_offset == 0
    assert produce(conn, "idem", batch(pid, 0, 2, [b"c"])).base_offset == 2
    # A gap is OUT_OF_ORDER_SEQUENCE_NUMBER.
    assert produce(conn, "idem", batch(pid, 0, 7, [b"gap"])).error_code.value == 45
    # A new epoch starts at sequence 0; the old epoch is then fenced.
    assert produce(conn, "idem", batch(pid, 1, 0, [b"d"])).error_code.value == 0
    assert produce(conn, "idem", batch(pid, 0, 3, [b"stale"])).error_code.value == 47
    assert log_values(conn, "idem") == [b"a", b"b", b"c", b"d"]


def test_transactional_producer_gets_an_id(conn: Connection) -> None:
    r = init_pid(conn, "txn-1")  # transactions: tests/broker/test_txn.py
    assert r.error_code.value == 0 and r.producer_id >= 0 and r.producer_epoch == 0


def test_retry_recognised_after_restart_and_ids_never_reused(samsa_factory: Any) -> None:
    s = samsa_factory()
    s.start()
    with s.connect() as conn:
        create(conn, "idem-restart")
        pid = init_pid(conn).producer_id
        assert produce(conn, "idem-restart", batch(pid, 0, 0, [b"x"])).base_offset == 0
        assert produce(conn, "idem-restart", batch(pid, 0, 1, [b"y"])).base_offset == 1
    assert s.stop() == 0
    s.start()
    with s.connect() as conn:
        r = produce(conn, "idem-restart", batch(pid, 0, 1, [b"y"]))
        assert r.error_code.value == 0 and r.base_offset == 1
        new_pid = init_pid(conn).producer_id
        assert new_pid > pid
        assert produce(conn, "idem-restart", batch(pid, 0, 2, [b"z"])).base_offset == 2
    s.stop(kill=True)  # no clean shutdown: state comes from the log, not a final snapshot
    s.start()
    with s.connect() as conn:
        r = produce(conn, "idem-restart", batch(pid, 0, 2, [b"z"]))
        assert r.error_code.value == 0 and r.base_offset == 2
        assert log_values(conn, "idem-restart") == [b"x", b"y", b"z"]
        assert init_pid(conn).producer_id > new_pid


def test_idle_producer_state_expires(samsa_factory: Any) -> None:
    s = samsa_factory(extra_args=("--override", "producer.id.expiration.ms=1500",
                                  "--override", "producer.id.expiration.check.interval.ms=200"))
    s.start()

    def active(conn: Connection) -> list[int]:
        r = conn.request(61, {"topics": [{"name": "expiring", "partition_indexes": [0]}]})
        return [p.producer_id for p in r.topics[0].partitions[0].active_producers]

    with s.connect() as conn:
        create(conn, "expiring")
        pid = init_pid(conn).producer_id
        assert produce(conn, "expiring", batch(pid, 0, 0, [b"x"])).error_code.value == 0
        assert active(conn) == [pid]
        deadline = time.monotonic() + 60
        while active(conn) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert active(conn) == [], "producer state was not expired"
