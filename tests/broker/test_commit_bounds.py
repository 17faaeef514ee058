"""Commits past the log end are refused (issue 20 item 2; broker/commit_bounds.py), with stock clients.

A group member's commit of an offset greater than the partition's log end gets OFFSET_OUT_OF_RANGE; the log
end itself and anything below it are accepted; an administrative reset (generation -1, no member, an empty
group) may go anywhere (the handler audits it when the group exists);
`samsa.offset.commit.past.log.end.enable=true` (dynamic) gives Kafka's behaviour back. What the clients do
with the refusal: kafka-python raises OffsetOutOfRangeError from commit(), confluent-kafka a KafkaException
with OFFSET_OUT_OF_RANGE; used normally (commit what was consumed) neither ever meets it.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka import TopicPartition as CTopicPartition
from kafka import KafkaConsumer, TopicPartition
from kafka.errors import OffsetOutOfRangeError
from kafka.structs import OffsetAndMetadata

from samsa.broker.client import Connection

RECORDS = 6


def _topic_with_records(samsa: Any) -> str:
    topic = f"bounds-{uuid.uuid4().hex[:8]}"
    with samsa.connect() as conn:
        r = conn.request(19, {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1}],
                              "timeout": 30000})
        assert r.topics[0].error_code.value == 0
    p = Producer({"bootstrap.servers": samsa.bootstrap})
    for i in range(RECORDS):
        p.produce(topic, value=b"v%d" % i, partition=0)
    assert p.flush(30) == 0
    return topic


def _committed(conn: Connection, group: str, topic: str) -> int:
    r = conn.request(9, {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}, version=7)
    return int(r.topics[0].partitions[0].committed_offset)


def _kafka_python_member(samsa: Any, topic: str, group: str) -> KafkaConsumer:
    c = KafkaConsumer(topic, bootstrap_servers=samsa.bootstrap, group_id=group, enable_auto_commit=False,
                      auto_offset_reset="earliest", consumer_timeout_ms=500)
    deadline = time.monotonic() + 60
    while not c.assignment():
        assert time.monotonic() < deadline, "the kafka-python member got no assignment"
        c.poll(timeout_ms=200)
    return c


def test_a_member_cannot_commit_past_the_log_end_but_can_commit_up_to_it(samsa: Any) -> None:
    topic, group = _topic_with_records(samsa), f"g-{uuid.uuid4().hex[:8]}"
    c = _kafka_python_member(samsa, topic, group)
    try:
        tp = TopicPartition(topic, 0)
        with pytest.raises(OffsetOutOfRangeError):
            c.commit({tp: OffsetAndMetadata(RECORDS + 1, "", -1)})
        with samsa.connect() as conn:
            assert _committed(conn, group, topic) == -1  # nothing was stored
        c.commit({tp: OffsetAndMetadata(RECORDS, "", -1)})  # the log end: everything read
        with samsa.connect() as conn:
            assert _committed(conn, group, topic) == RECORDS
        # used normally: consume and commit what was consumed
        c.seek_to_beginning(tp)
        seen = [r.offset for r in c]
        assert seen == list(range(RECORDS))
        c.commit()
        with samsa.connect() as conn:
            assert _committed(conn, group, topic) == RECORDS
    finally:
        c.close()


def test_confluent_kafka_gets_offset_out_of_range(samsa: Any) -> None:
    topic, group = _topic_with_records(samsa), f"g-{uuid.uuid4().hex[:8]}"
    c = Consumer({"bootstrap.servers": samsa.bootstrap, "group.id": group, "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"})
    try:
        c.subscribe([topic])
        got = []
        deadline = time.monotonic() + 60
        while len(got) < RECORDS:
            assert time.monotonic() < deadline, f"consumed only {got}"
            m = c.poll(0.5)
            if m is not None and m.error() is None:
                got.append(m.offset())
        with pytest.raises(KafkaException) as refused:
            c.commit(offsets=[CTopicPartition(topic, 0, 1000)], asynchronous=False)
        failed = refused.value.args[0]
        # librdkafka reports a per-partition error inside the result, or the error itself
        codes = {failed.code()} if isinstance(failed, KafkaError) else set()
        assert KafkaError.OFFSET_OUT_OF_RANGE in codes or "OFFSET_OUT_OF_RANGE" in str(refused.value), refused.value
        c.commit(asynchronous=False)  # what it consumed: the log end
        committed = c.committed([CTopicPartition(topic, 0)], timeout=10)
        assert committed[0].offset == RECORDS
    finally:
        c.close()


def test_an_administrative_reset_may_go_past_the_end(samsa: Any) -> None:
    topic, group = _topic_with_records(samsa), f"g-{uuid.uuid4().hex[:8]}"
    with samsa.connect() as conn:
        deadline = time.monotonic() + 30
        while conn.request(10, {"key": group, "key_type": 0}, version=3).error_code.value != 0:
            assert time.monotonic() < deadline, "no group coordinator (__consumer_offsets not created?)"
            time.sleep(0.1)
        r = conn.request(8, {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                             "group_instance_id": None, "retention_time_ms": -1,
                             "topics": [{"name": topic, "partitions": [
                                 {"partition_index": 0, "committed_offset": 1000, "committed_leader_epoch": -1,
                                  "committed_metadata": "reset for a test"}]}]}, version=8)
        assert r.topics[0].partitions[0].error_code.value == 0
        assert _committed(conn, group, topic) == 1000


def test_the_config_gives_kafkas_behaviour_back(samsa: Any) -> None:
    topic, group = _topic_with_records(samsa), f"g-{uuid.uuid4().hex[:8]}"
    with samsa.connect() as conn:
        r = conn.request(44, {"resources": [{"resource_type": 4, "resource_name": "", "configs": [
            {"name": "samsa.offset.commit.past.log.end.enable", "config_operation": 0, "value": "true"}]}],
            "validate_only": False}, version=1)
        assert r.responses[0].error_code.value == 0, r
    c = _kafka_python_member(samsa, topic, group)
    try:
        c.commit({TopicPartition(topic, 0): OffsetAndMetadata(RECORDS + 10, "", -1)})
        with samsa.connect() as conn:
            assert _committed(conn, group, topic) == RECORDS + 10
    finally:
        c.close()


def test_a_transactional_commit_past_the_end_is_refused(samsa: Any) -> None:
    topic, group = _topic_with_records(samsa), f"g-{uuid.uuid4().hex[:8]}"
    consumer = Consumer({"bootstrap.servers": samsa.bootstrap, "group.id": group, "enable.auto.commit": False})
    producer = Producer({"bootstrap.servers": samsa.bootstrap, "transactional.id": f"tx-{uuid.uuid4().hex[:8]}"})
    try:
        producer.init_transactions(30)
        producer.begin_transaction()
        with pytest.raises(KafkaException) as refused:
            producer.send_offsets_to_transaction([CTopicPartition(topic, 0, 1000)],
                                                 consumer.consumer_group_metadata(), 30)
        assert "OFFSET_OUT_OF_RANGE" in str(refused.value) or "out of range" in str(refused.value).lower(), \
            refused.value
        producer.abort_transaction(30)
        producer.begin_transaction()
        producer.send_offsets_to_transaction([CTopicPartition(topic, 0, RECORDS)], consumer.consumer_group_metadata(),
                                             30)
        producer.commit_transaction(30)
        with samsa.connect() as conn:
            assert _committed(conn, group, topic) == RECORDS
    finally:
        consumer.close()
