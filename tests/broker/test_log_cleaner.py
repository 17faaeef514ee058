"""The broker's log cleaner end to end: a compacted topic cleaned while kafka-python consumers read it (issue 16)."""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic

from samsa.broker.config import BrokerConfig
from samsa.broker.log_cleaner import LogCleaner
from samsa.kproto.records import encode_batch
from samsa.storage.config import LogConfig
from samsa.storage.log_manager import LogManager

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


def test_a_corrupt_log_is_marked_uncleanable_and_the_others_are_cleaned(tmp_path: Any, caplog: Any) -> None:
    manager = LogManager(tmp_path / "data")
    config = LogConfig(segment_bytes=400, retention_ms=-1, file_delete_delay_ms=0, cleanup_policy="compact",
                       min_cleanable_dirty_ratio=0.01)
    logs = {}
    for topic in ("bad", "good"):
        log = manager.get_or_create_log(topic, 0, config, 1_700_000_000_000)
        for i in range(40):
            log.append_as_leader(encode_batch([(b"k%d" % (i % 4), b"v%d" % i, ())], timestamp_ms=1_700_000_000_000),
                                 leader_epoch=0, now_ms=1_700_000_000_000)
        log.roll(1_700_000_000_000)
        log.update_high_watermark(log.log_end_offset)
        logs[topic] = log
    bad = logs["bad"].segments[1].log_path
    data = bytearray(bad.read_bytes())
    data[70] ^= 0xFF
    bad.write_bytes(bytes(data))
    cleaner = LogCleaner(manager, lambda: BrokerConfig())

    async def clean_all() -> None:
        while await cleaner.clean_once(1_700_000_000_000):
            pass

    with caplog.at_level("ERROR", logger="samsa.broker.log_cleaner"):
        anyio.run(clean_all)
    assert set(cleaner.uncleanable) == {("bad", 0)}
    assert any("bad-0 is marked uncleanable" in r.getMessage() for r in caplog.records)
    assert logs["good"].size_bytes < logs["bad"].size_bytes
    assert cleaner.figures.cleanings == 1
    assert (tmp_path / "data" / "cleaner-offset-checkpoint").read_text().splitlines()[2:] == ["good 0 40"]
    manager.close()



# --- kafka-python and confluent-kafka reading from 0 while a producer updates 100 keys and the cleaner cleans ---

MANY_KEYS = 100
UPDATE_ROUNDS = 8
Rec = tuple[int, bytes, bytes]


def _kafka_python_read(bootstrap: str, topic: str, end: int) -> list[Rec]:
    """kafka-python from offset 0 until its position reaches `end` (assign, no group): every record it returns."""
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        out: list[Rec] = []
        give_up = time.monotonic() + 30
        while consumer.position(tp) < end:
            assert time.monotonic() < give_up, f"kafka-python never reached {end}"
            for records in consumer.poll(timeout_ms=1000).values():
                out.extend((r.offset, r.key, r.value) for r in records)
        return out
    finally:
        consumer.close()


def _confluent_read(bootstrap: str, topic: str, end: int, errors: list[str]) -> list[Rec]:
    """librdkafka's consumer from offset 0 until it has passed `end` (assign; a group.id, never joined)."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as ConfluentTopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "cleaner-reader", "enable.auto.commit": False,
                         "error_cb": lambda e: errors.append(f"confluent-kafka error_cb: {e}")})
    try:
        consumer.assign([ConfluentTopicPartition(topic, 0, 0)])
        out: list[Rec] = []
        position = 0
        give_up = time.monotonic() + 30
        while position < end:
            assert time.monotonic() < give_up, f"confluent-kafka never reached {end} (at {position})"
            for m in consumer.consume(num_messages=1000, timeout=1.0):
                if m.error() is not None:
                    errors.append(f"confluent-kafka message error: {m.error()}")
                    continue
                position = m.offset() + 1
                out.append((m.offset(), m.key(), m.value()))
        return out
    finally:
        consumer.close()


def _check_read(name: str, records: list[Rec], written: list[Rec]) -> None:
    """What a read from 0 may show while the cleaner runs: written records in offset order, and for each key
    the latest value up to the last offset read -- unless the cleaner removed it for a newer one written
    after (a reader that stops before the head may miss a key; one that reads to the head never does)."""
    offsets = [o for o, _, _ in records]
    assert offsets == sorted(set(offsets)), name
    assert set(records) <= set(written), name
    top = offsets[-1]
    seen = {k: v for _, k, v in records}
    latest = {k: v for o, k, v in sorted(written) if o <= top}
    newer = {k for o, k, _ in written if o > top}
    wrong = {k for k in latest if seen.get(k) != latest[k] and k not in newer}
    assert not wrong, (name, top, sorted(wrong)[:5])


def test_kafka_python_and_confluent_consumers_read_while_the_cleaner_runs(samsa_factory: Any) -> None:
    samsa = samsa_factory(extra_args=("--override", "log.cleaner.backoff.ms=200"))
    samsa.start()
    topic = "compacted-many"
    admin = KafkaAdminClient(bootstrap_servers=samsa.bootstrap)
    admin.create_topics([NewTopic(topic, 1, 1, topic_configs={
        "cleanup.policy": "compact", "segment.ms": "300", "min.cleanable.dirty.ratio": "0.01"})])
    admin.close()

    written: list[Rec] = []
    lock = threading.Lock()
    errors: list[str] = []
    reads: dict[str, list[list[Rec]]] = {"kafka-python": [], "confluent-kafka": []}
    stop = threading.Event()

    def reader(name: str) -> None:  # from 0 to the last acknowledged offset, again and again
        try:
            while not stop.is_set():
                with lock:
                    end = written[-1][0] + 1 if written else 0
                if end == 0:
                    time.sleep(0.1)
                    continue
                got = _kafka_python_read(samsa.bootstrap, topic, end) if name == "kafka-python" else \
                    _confluent_read(samsa.bootstrap, topic, end, errors)
                reads[name].append(got)
        except BaseException as e:  # reported by the test
            errors.append(f"{name}: {e!r}")

    threads = [threading.Thread(target=reader, args=(n,), daemon=True) for n in reads]
    for t in threads:
        t.start()
    producer = KafkaProducer(bootstrap_servers=samsa.bootstrap, linger_ms=5)
    for r in range(UPDATE_ROUNDS):  # every key updated, then a pause past segment.ms: the next round rolls
        futures = [(producer.send(topic, key=b"key-%03d" % i, value=b"value-%d-%d" % (r, i)), i)
                   for i in range(MANY_KEYS)]
        producer.flush()
        with lock:
            written.extend((f.get(timeout=10).offset, b"key-%03d" % i, b"value-%d-%d" % (r, i)) for f, i in futures)
        time.sleep(0.4)
    last = producer.send(topic, key=b"key-000", value=b"last").get(timeout=10)  # rolls the last round
    with lock:
        written.append((last.offset, b"key-000", b"last"))
    producer.close()
    total = len(written)

    deadline = time.monotonic() + DEADLINE_S  # cleaned: each key once below the last record
    while time.monotonic() < deadline and len(_kafka_python_read(samsa.bootstrap, topic, total)) > MANY_KEYS + 1:
        time.sleep(0.5)
    stop.set()
    for t in threads:
        t.join(60)
    final = {"kafka-python": _kafka_python_read(samsa.bootstrap, topic, total),
             "confluent-kafka": _confluent_read(samsa.bootstrap, topic, total, errors)}
    assert not errors, errors[:10]
    # (101: key-000's last value sits in the active segment, which is never cleaned, over its cleaned one)
    assert len(final["kafka-python"]) <= MANY_KEYS + 1, f"not cleaned within {DEADLINE_S} s:\n{samsa.log_tail()}"
    want = {k: v for _, k, v in sorted(written)}
    for name, got in final.items():  # read to the head after the cleaning: exactly each key's latest value
        assert {k: v for _, k, v in got} == want, name
        assert len(got) <= MANY_KEYS + 1, name
    for name, client_reads in reads.items():
        assert len(client_reads) >= 2, name
        for got in client_reads:
            _check_read(name, got, written)
    cleanings = samsa.log_tail(2000).count(f"log cleaner: cleaned {topic}-0")
    print(f"reads from offset 0 during the writes: kafka-python {len(reads['kafka-python'])}, "
          f"confluent-kafka {len(reads['confluent-kafka'])}; {cleanings} cleanings")
    assert cleanings >= 2
