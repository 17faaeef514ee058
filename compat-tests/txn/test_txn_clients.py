"""Transactions with real clients (issue 5): consume-transform-produce loops with random aborts.

Each loop reads an input topic in a consumer group, writes "out-<value>" for every record to an output
topic and commits the consumed offsets in the same transaction; about a third of the transactions are
aborted (the consumer then rewinds to the group's committed offsets).  Read with read_committed, the
output must hold exactly one copy of each input record.  Also: a zombie producer (old epoch) is fenced.
Each test runs against Samsa and against the reference Kafka (``-m samsa`` / ``-m kafka``), which proves it right.
"""

from __future__ import annotations

import random
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from compat_targets import Target

from samsa.broker.client import Connection

HERE = Path(__file__).resolve().parent
JAVA = HERE.parent / "java"
COUNT = 300


def create(samsa: Target, topic: str, partitions: int) -> None:
    host, _, port = samsa.bootstrap.rpartition(":")
    with Connection(host, int(port)) as conn:
        r = conn.request(19, {"topics": [{"name": topic, "num_partitions": partitions, "replication_factor": 1,
                                          "assignments": (), "configs": ()}], "timeout": 5000,
                              "validate_only": False})
        assert r.topics[0].error_code.value == 0


def fill_input(samsa: Target, topic: str) -> list[bytes]:
    from confluent_kafka import Producer

    values = [b"v-%d" % i for i in range(COUNT)]
    p = Producer({"bootstrap.servers": samsa.bootstrap, "linger.ms": 5})
    for i, v in enumerate(values):
        p.produce(topic, v, partition=i % 2)
    assert p.flush(60) == 0
    return values


def read_committed(samsa: Target, topic: str, expected: int, timeout_s: float = 60.0) -> list[bytes]:
    from confluent_kafka import Consumer

    c = Consumer({"bootstrap.servers": samsa.bootstrap, "group.id": f"check-{uuid.uuid4().hex[:8]}",
                  "auto.offset.reset": "earliest", "isolation.level": "read_committed",
                  "enable.auto.commit": False, "enable.partition.eof": False})
    c.subscribe([topic])
    out: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    quiet_until = None
    try:
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                if len(out) >= expected:
                    quiet_until = quiet_until or time.monotonic() + 3  # wait a little for extra copies
                    if time.monotonic() > quiet_until:
                        break
                continue
            assert m.error() is None, m.error()
            out.append(m.value())
    finally:
        c.close()
    return out


def test_confluent_consume_transform_produce_with_random_aborts(broker: Target) -> None:
    samsa = broker
    from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

    suffix = uuid.uuid4().hex[:8]
    src, dst, group = f"ctp-in-{suffix}", f"ctp-out-{suffix}", f"ctp-{suffix}"
    create(samsa, src, 2)
    create(samsa, dst, 3)
    values = fill_input(samsa, src)
    rng = random.Random(5)
    consumer = Consumer({"bootstrap.servers": samsa.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "isolation.level": "read_committed"})
    producer = Producer({"bootstrap.servers": samsa.bootstrap, "transactional.id": f"ctp-{suffix}",
                         "transaction.timeout.ms": 30000, "linger.ms": 2})
    producer.init_transactions(30)
    consumer.subscribe([src])
    done = 0
    commits = aborts = 0
    deadline = time.monotonic() + 180
    try:
        while done < COUNT:
            assert time.monotonic() < deadline, f"stuck after {done} records ({commits} commits, {aborts} aborts)"
            msgs = consumer.consume(num_messages=25, timeout=1.0)
            msgs = [m for m in msgs if m.error() is None]
            if not msgs:
                continue
            producer.begin_transaction()
            for m in msgs:
                producer.produce(dst, b"out-" + m.value(), key=m.value())
            positions = consumer.position(consumer.assignment())
            producer.send_offsets_to_transaction(positions, consumer.consumer_group_metadata(), 30)
            if rng.random() < 0.35:
                producer.abort_transaction(30)
                aborts += 1
                committed = consumer.committed(consumer.assignment(), 30)
                for tp in committed:
                    consumer.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else 0))
            else:
                producer.commit_transaction(30)
                commits += 1
                done += len(msgs)
    except KafkaException as e:
        raise AssertionError(f"transaction failed: {e}") from e
    finally:
        consumer.close()
    assert aborts > 0 and commits > 0
    out = read_committed(samsa, dst, COUNT)
    assert sorted(out) == sorted(b"out-" + v for v in values), (len(out), len(set(out)))


def test_confluent_zombie_producer_is_fenced(broker: Target) -> None:
    samsa = broker
    from confluent_kafka import KafkaException, Producer

    topic = f"zombie-{uuid.uuid4().hex[:8]}"
    create(samsa, topic, 1)
    conf = {"bootstrap.servers": samsa.bootstrap, "transactional.id": f"zombie-{topic}", "linger.ms": 0}
    old = Producer(conf)
    old.init_transactions(30)
    old.begin_transaction()
    old.produce(topic, b"from-zombie")
    old.flush(30)
    new = Producer(conf)
    new.init_transactions(30)  # fences `old` and aborts its open transaction
    new.begin_transaction()
    new.produce(topic, b"from-new")
    new.commit_transaction(30)
    with pytest.raises(KafkaException) as e:
        old.commit_transaction(30)
    assert e.value.args[0].fatal() or "fenced" in str(e.value).lower(), e.value
    assert read_committed(samsa, topic, 1) == [b"from-new"]
    del old, new  # close both clients before the broker stops


def test_java_consume_transform_produce_with_random_aborts(broker: Target) -> None:
    samsa = broker
    classes = JAVA / "target" / "classes"
    if not (classes / "TxnLoop.class").exists():
        pytest.fail("the Java programs are not built: run `make compat-java`")
    suffix = uuid.uuid4().hex[:8]
    src, dst = f"jtx-in-{suffix}", f"jtx-out-{suffix}"
    create(samsa, src, 2)
    create(samsa, dst, 3)
    values = fill_input(samsa, src)
    r = subprocess.run(
        ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
         "-cp", f"{classes}:{JAVA / 'target' / 'lib' / '*'}", "TxnLoop", samsa.bootstrap, src, dst,
         f"jtx-{suffix}", str(COUNT)],
        capture_output=True, timeout=300, check=False,
    )
    output = r.stdout.decode() + r.stderr.decode()
    assert r.returncode == 0, output[-3000:]
    assert "aborts=0" not in output, output[-500:]
    out = read_committed(samsa, dst, COUNT)
    assert sorted(out) == sorted(b"out-" + v for v in values), (len(out), len(set(out)))
