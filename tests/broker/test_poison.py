"""samsa.broker.poison.PoisonGuard: bounded retry, then stop or quarantine; end to end with kafka-python and
confluent-kafka consumers reading a partition with a poison record in the middle."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import pytest

from samsa.broker.poison import PoisonGuard, PoisonRecordError, RetryPolicy
from samsa.kproto.records import Header, Record, decode_batches, encode_batch

POISON = b"POISON"
VALUES = [b"v0", b"v1", b"v2", b"v3", POISON, b"v5", b"v6", b"v7", b"v8"]
CONSUME_DEADLINE_S = 60


class FakeRecord:
    def __init__(self, value: bytes) -> None:
        self.topic, self.partition, self.offset, self.value = "t", 0, 7, value


def test_retry_policy_backs_off_exponentially_to_its_cap() -> None:
    assert list(RetryPolicy(attempts=5, backoff_ms=100, backoff_max_ms=300).delays_ms()) == [100, 200, 300, 300]
    assert list(RetryPolicy(attempts=1).delays_ms()) == []
    with pytest.raises(ValueError):
        RetryPolicy(attempts=0)


def test_a_handler_that_recovers_is_not_skipped_and_stop_raises() -> None:
    sleeps: list[float] = []
    calls: list[int] = []
    commits: list[Any] = []

    def flaky(rec: FakeRecord) -> str:
        calls.append(1)
        if len(calls) < 3:
            raise TimeoutError("downstream busy")
        return "done"

    guard = PoisonGuard(object(), group="g", bootstrap="127.0.0.1:1", policy=RetryPolicy(3, 50, 80),
                        commit=lambda *a: commits.append(a), sleep=sleeps.append)
    assert guard.process(FakeRecord(b"x"), flaky) == "done"
    assert (len(calls), sleeps, commits, guard.quarantined) == (3, [0.05, 0.08], [], [])

    def broken(rec: FakeRecord) -> None:
        raise ValueError("cannot parse")

    stopping = PoisonGuard(object(), group="g", bootstrap="127.0.0.1:1", on_failure="stop",
                           policy=RetryPolicy(2, 0, 0), commit=lambda *a: commits.append(a), sleep=sleeps.append)
    with pytest.raises(PoisonRecordError) as raised:
        stopping.process(FakeRecord(b"x"), broken)
    assert (raised.value.topic, raised.value.partition, raised.value.offset, raised.value.attempts) == ("t", 0, 7, 2)
    assert isinstance(raised.value.__cause__, ValueError) and commits == []


@pytest.fixture
def broker(group_broker: Any) -> Any:
    return group_broker


def fetch_all(conn: Any, topic: str) -> list[Record]:
    r = conn.request(1, {"max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 24, "isolation_level": 0,
                         "session_id": 0, "session_epoch": -1, "replica_id": -1,
                         "topics": [{"topic": topic, "partitions": [{"partition": 0, "fetch_offset": 0,
                                                                     "partition_max_bytes": 1 << 24}]}],
                         "forgotten_topics_data": (), "rack_id": ""}, version=12)
    part = r.responses[0].partitions[0]
    assert part.error_code.value == 0
    return [rec for _, recs in decode_batches(part.records or b"", max_decompressed_bytes=1 << 26) for rec in recs]


def value_of(record: Any) -> bytes:
    value = record.value
    return bytes(value() if callable(value) else value)


class KafkaPython:
    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        from kafka import KafkaConsumer

        self.consumer = KafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, client_id="kp-app",
                                      auto_offset_reset="earliest", enable_auto_commit=False)

    def poll(self) -> list[Any]:
        return [r for rs in self.consumer.poll(timeout_ms=500).values() for r in rs]

    def commit(self) -> None:
        self.consumer.commit()

    def close(self) -> None:
        self.consumer.close()


class Confluent:
    def __init__(self, bootstrap: str, group: str, topic: str) -> None:
        from confluent_kafka import Consumer

        self.consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "client.id": "ck-app",
                                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
        self.consumer.subscribe([topic])

    def poll(self) -> list[Any]:
        msg = self.consumer.poll(0.5)
        if msg is None:
            return []
        assert msg.error() is None, msg.error()
        return [msg]

    def commit(self) -> None:
        self.consumer.commit(asynchronous=False)

    def close(self) -> None:
        self.consumer.close()


@pytest.mark.parametrize("client", [KafkaPython, Confluent], ids=["kafka-python", "confluent-kafka"])
def test_poison_record_is_retried_quarantined_and_passed(broker: Any, client: Any) -> None:
    topic, group = f"payments-{client.__name__.lower()}", f"ledger-{client.__name__.lower()}"
    base_ms = int(time.time() * 1000) - 60_000
    with broker.connect() as conn:
        r = conn.request(19, {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1}],
                              "timeout": 30000})
        assert r.topics[0].error_code.value == 0
        records = [Record(i, base_ms + i, b"key-%d" % i, v, (Header("h", b"x"),)) for i, v in enumerate(VALUES)]
        p = conn.request(0, {"acks": -1, "timeout": 30000, "topic_data": [
            {"name": topic, "partition_data": [{"index": 0, "records": encode_batch(records, timestamp_ms=base_ms)}]}]})
        assert p.responses[0].partition_responses[0].error_code.value == 0

    processed: list[bytes] = []
    poison_attempts: list[int] = []

    def handle(record: Any) -> None:
        value = value_of(record)
        if value == POISON:
            poison_attempts.append(1)
            raise ValueError("amount is not a number")
        processed.append(value)

    consumer = client(broker.bootstrap, group, topic)
    seen = 0
    try:
        with PoisonGuard(consumer.consumer, group=group, bootstrap=broker.bootstrap, operator="oncall",
                         policy=RetryPolicy(attempts=3, backoff_ms=10, backoff_max_ms=20)) as guard:
            deadline = time.monotonic() + CONSUME_DEADLINE_S
            while seen < len(VALUES) and time.monotonic() < deadline:
                for record in consumer.poll():
                    seen += 1
                    guard.process(record, handle)
        consumer.commit()
    finally:
        consumer.close()

    assert processed == [v for v in VALUES if v != POISON]  # consumption went on past it, nothing else lost
    assert len(poison_attempts) == 3
    assert [(s.first_offset, s.next_offset, s.count, s.quarantine_topic) for s in guard.quarantined] == [
        (4, 5, 1, f"{topic}.quarantine")]
    with broker.connect() as conn:
        copies = fetch_all(conn, f"{topic}.quarantine")
        assert [(c.key, c.value, c.timestamp_ms) for c in copies] == [(b"key-4", POISON, base_ms + 4)]
        headers = dict((h.key, h.value) for h in copies[0].headers)
        assert headers["h"] == b"x" and headers["samsa.quarantine.source.offset"] == b"4"
        assert headers["samsa.quarantine.group"] == group.encode()
        assert headers["samsa.quarantine.operator"] == b"oncall"
        assert headers["samsa.quarantine.reason"].startswith(b"ValueError: amount is not a number")
        c = conn.request(9, {"group_id": group, "topics": [{"name": topic, "partition_indexes": [0]}]}, version=7)
        assert c.topics[0].partitions[0].committed_offset == len(VALUES)

    history = subprocess.run([sys.executable, "-m", "samsa.broker.cli", "groups", "history", "--bootstrap-server",
                              broker.bootstrap, "--json", group], capture_output=True, text=True, timeout=60)
    assert history.returncode == 0 and history.stdout.startswith("{"), (history.stdout, history.stderr)
    audits = [json.loads(line) for line in history.stdout.splitlines()]
    assert [(a["kind"], a["first"], a["count"], a["operator"], a["changes"][0]["to"]) for a in audits] == [
        ("skip", 4, 1, "oncall", 5)]
    assert audits[0]["who"].startswith("kp-app@" if client is KafkaPython else "ck-app@")
