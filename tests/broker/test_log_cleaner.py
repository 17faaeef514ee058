"""The broker's log cleaner end to end: a compacted topic cleaned while kafka-python consumers read it (issue 16)."""

from __future__ import annotations

import threading
import time
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

TOPIC = "compacted"
KEYS = 10
ROUNDS = 6
PER_ROUND = 300
DEADLINE_S = 90.0


def _read_from_start(bootstrap: str, end: int) -> list[tuple[int, bytes, bytes]]:
    """Every record of partition 0 below `end`, from offset 0, with a fresh consumer (no group)."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, consumer_timeout_ms=5000,
                             auto_offset_reset="earliest")
    try:
        tp = TopicPartition(TOPIC, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        out = []
        give_up = time.monotonic() + 30
        while consumer.position(tp) < end:
            assert time.monotonic() < give_up, "the consumer never reached the end"
            for records in consumer.poll(timeout_ms=1000).values():
                out.extend((r.offset, r.key, r.value) for r in records if r.offset < end)
        return out
    finally:
        consumer.close()


def _end_offset(bootstrap: str) -> int:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False)
    try:
        tp = TopicPartition(TOPIC, 0)
        return int(consumer.end_offsets([tp])[tp])
    finally:
        consumer.close()


def test_a_compacted_topic_is_cleaned_while_a_consumer_reads_it(samsa_factory: Any) -> None:
    samsa = samsa_factory(extra_args=("--override", "log.cleaner.backoff.ms=200"))
    samsa.start()
    admin = KafkaAdminClient(bootstrap_servers=samsa.bootstrap)
    admin.create_topics([NewTopic(TOPIC, 1, 1, topic_configs={
        "cleanup.policy": "compact", "segment.ms": "300", "min.cleanable.dirty.ratio": "0.01"})])
    admin.close()

    errors: list[BaseException] = []
    reads: list[tuple[int, list[tuple[int, bytes, bytes]]]] = []  # (end, records below it), each from offset 0
    stop = threading.Event()

    def reader() -> None:  # reads from 0 again and again while the producer writes and the cleaner cleans
        try:
            while not stop.is_set():
                end = _end_offset(samsa.bootstrap)
                reads.append((end, _read_from_start(samsa.bootstrap, end)))
        except BaseException as e:  # reported by the test below
            errors.append(e)

    producer = KafkaProducer(bootstrap_servers=samsa.bootstrap, linger_ms=5)
    written: list[tuple[int, bytes, bytes]] = []
    thread = threading.Thread(target=reader, daemon=True)
    for r in range(ROUNDS):
        futures = [(producer.send(TOPIC, key=b"key-%d" % (i % KEYS), value=b"value-%d-%d" % (r, i)),
                    b"key-%d" % (i % KEYS), b"value-%d-%d" % (r, i)) for i in range(PER_ROUND)]
        producer.flush()
        written.extend((f.get(timeout=10).offset, k, v) for f, k, v in futures)
        if r == 1:
            thread.start()
        time.sleep(0.4)  # past segment.ms: the next append rolls a segment
    last = producer.send(TOPIC, key=b"key-0", value=b"last").get(timeout=10)  # rolls the last round's segment
    written.append((last.offset, b"key-0", b"last"))
    producer.close()
    total = len(written)

    deadline = time.monotonic() + DEADLINE_S
    cleaned: list[tuple[int, bytes, bytes]] = []
    while time.monotonic() < deadline:
        cleaned = _read_from_start(samsa.bootstrap, total)
        if len(cleaned) < total // 2:
            break
        time.sleep(0.5)
    stop.set()
    thread.join(60)
    assert not errors, errors
    assert len(cleaned) < total // 2, f"not cleaned within {DEADLINE_S} s:\n{samsa.log_tail()}"
    assert len(reads) >= 2
    for end, records in [*reads, (total, cleaned)]:  # every read sees each key's latest value below its end
        want = {k: v for o, k, v in sorted(written) if o < end}
        offsets = [o for o, _, _ in records]
        assert offsets == sorted(set(offsets))
        assert {k: v for _, k, v in records} == want, end
        assert set(records) <= set(written)
    cleanings = samsa.log_tail(1000).count("log cleaner: cleaned compacted-0")
    print(f"{len(reads)} reads from offset 0, {cleanings} cleanings")
    assert cleanings >= 1
