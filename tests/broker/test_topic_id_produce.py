"""Produce v13 names topics by id (KIP-516) and Fetch v18 is served; kafka-python infers a 4.3+ broker.

kafka-python (3.0) infers the broker's version from the highest versions it advertises (Produce v13 and
Fetch v18 mean 4.1; DescribeLogDirs v5, which Kafka 4.4.0 advertises too, 4.3) and then speaks those
versions: the round trip here runs on them.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from kafka import KafkaConsumer, KafkaProducer
from kafka.admin import KafkaAdminClient

from samsa.broker.client import Connection
from samsa.kproto.records import decode_batches, encode_batch

TOPIC = "by-id"


def _create(conn: Connection, name: str, partitions: int = 1) -> uuid.UUID:
    r = conn.request(19, {"topics": [{"name": name, "num_partitions": partitions, "replication_factor": 1,
                                      "assignments": (), "configs": ()}], "timeout": 5000, "validate_only": False})
    assert r.topics[0].error_code.value == 0
    topic_id: uuid.UUID = conn.request(3, {"topics": [{"name": name}], "allow_auto_topic_creation": False},
                                       version=12).topics[0].topic_id
    return topic_id


def _produce(conn: Connection, topic_id: uuid.UUID | None, partitions: list[int]) -> Any:
    batch = encode_batch([(b"k", b"v", ())], timestamp_ms=int(time.time() * 1000))
    return conn.request(0, {"transactional_id": None, "acks": -1, "timeout": 5000, "topic_data": [
        {"topic_id": topic_id, "partition_data": [{"index": i, "records": batch} for i in partitions]}]},
        version=13).responses[0]


def test_produce_v13_by_topic_id(conn: Connection) -> None:
    topic_id = _create(conn, TOPIC)
    known = _produce(conn, topic_id, [0, 5])
    assert known.topic_id == topic_id  # the answer names the topic as the request did
    assert [(p.index, p.error_code.value, p.base_offset) for p in known.partition_responses] == [(0, 0, 0), (5, 3, -1)]
    unknown_id = uuid.uuid4()
    unknown = _produce(conn, unknown_id, [0, 1])
    assert unknown.topic_id == unknown_id
    assert [(p.index, p.error_code.value) for p in unknown.partition_responses] == [(0, 100), (1, 100)]
    assert [p.error_code.value for p in _produce(conn, None, [0]).partition_responses] == [100]
    # Fetch v18 reads what v13 wrote.
    r = conn.request(1, {"max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
                         "session_id": 0, "session_epoch": -1, "replica_id": -1, "rack_id": "",
                         "forgotten_topics_data": (), "topics": [{"topic_id": topic_id, "partitions": [
                             {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 16}]}]}, version=18)
    p = r.responses[0].partitions[0]
    assert (p.error_code.value, p.high_watermark) == (0, 1)
    records = [rec for _, recs in decode_batches(p.records, max_decompressed_bytes=1 << 20) for rec in recs]
    assert [(rec.offset, rec.key, rec.value) for rec in records] == [(0, b"k", b"v")]


def test_kafka_python_infers_4_3_and_round_trips(samsa: Any) -> None:
    # DescribeLogDirs v5 (as Kafka 4.4.0 advertises) is kafka-python's mark of a 4.3+ broker, its newest.
    admin = KafkaAdminClient(bootstrap_servers=samsa.bootstrap, request_timeout_ms=10000)
    try:
        assert admin._client.check_version() == (4, 3)
    finally:
        admin.close()
    producer = KafkaProducer(bootstrap_servers=samsa.bootstrap, acks="all")
    try:
        assert producer.config["api_version"] == (4, 3)
        metadata = producer.send("kp-41", key=b"a", value=b"one").get(timeout=30)
        assert metadata.offset == 0
    finally:
        producer.close(timeout=10)
    consumer = KafkaConsumer("kp-41", bootstrap_servers=samsa.bootstrap, auto_offset_reset="earliest",
                             consumer_timeout_ms=10000)
    try:
        values = [(m.key, m.value) for m in consumer]
    finally:
        consumer.close()
    assert values == [(b"a", b"one")]
