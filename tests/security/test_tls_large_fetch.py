"""Fetch answers of more than one chunk over TLS: the slice of the segment goes out chunk by chunk, and over
asyncio's TLS transport the connection must still be told to send the next chunk (it once waited forever
after the first, so a consumer over SASL_SSL stalled once its fetch held more than a chunk)."""

from __future__ import annotations

import os

from security_harness import SCRAM_PASSWORD, SCRAM_USER, SecuredBroker

RECORDS, VALUE_BYTES = 6000, 1024  # ~6 MiB in 4 partitions: fetches of more than one 1 MiB chunk


def test_a_consumer_reads_megabytes_over_sasl_ssl(secured_broker: SecuredBroker) -> None:
    from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = "tls-large-fetch"
    plain = secured_broker.bootstrap("PLAINTEXT")
    admin = AdminClient({"bootstrap.servers": plain})
    for f in admin.create_topics([NewTopic(topic, 4, 1)]).values():
        f.result(30)
    producer = Producer({"bootstrap.servers": plain, "linger.ms": 5, "batch.size": 1_000_000})
    payload = os.urandom(VALUE_BYTES)
    for _ in range(RECORDS):
        producer.produce(topic, payload)
        producer.poll(0)
    assert producer.flush(60) == 0
    consumer = Consumer({"bootstrap.servers": secured_broker.bootstrap("SASL_SSL"), "group.id": "tls-large-fetch",
                         "enable.auto.commit": False, "security.protocol": "SASL_SSL",
                         "ssl.ca.location": str(secured_broker.certs.ca), "sasl.mechanism": "SCRAM-SHA-512",
                         "sasl.username": SCRAM_USER, "sasl.password": SCRAM_PASSWORD,
                         "fetch.max.bytes": 52_428_800, "max.partition.fetch.bytes": 4_194_304,
                         "socket.timeout.ms": 20_000})
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(4)])
    seen = 0
    for _ in range(60):  # a bound on polls (each up to 1 s), never reached when fetches complete
        for m in consumer.consume(num_messages=10_000, timeout=1.0):
            assert m.error() is None, m.error()
            seen += 1
        if seen >= RECORDS:
            break
    consumer.close()
    assert seen == RECORDS
