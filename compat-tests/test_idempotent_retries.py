"""Idempotent producers through a proxy that loses Produce responses: every record lands exactly once,
in order (issue 5). The proxy drops the reply to every third Produce after the broker appended it, so
the client retries a batch the log already holds; the broker must answer with the original offset.

Samsa refuses a retried sequence whose records differ (INVALID_RECORD, issue 20), so these also prove
that no stock client's true retry is taken for a conflicting one: librdkafka, the Java client,
kafka-python, aiokafka and kafkajs (which re-encodes a retry with new batch timestamps).
"""

from __future__ import annotations

import asyncio
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from lossy_proxy import LossyProxy
from samsa_fixture import SamsaProcess, start_samsa

from samsa.broker.client import Connection
from samsa.kproto.records import decode_batches

HERE = Path(__file__).resolve().parent
COUNT = 400


@pytest.fixture
def proxied_samsa() -> Iterator[tuple[SamsaProcess, LossyProxy]]:
    from oracle_fixture import free_port

    proxy_port = free_port()
    samsa = start_samsa(extra_args=("--advertise", f"127.0.0.1:{proxy_port}"))
    proxy = LossyProxy(("127.0.0.1", samsa.port), every=3, port=proxy_port).start()
    try:
        yield samsa, proxy
    finally:
        proxy.close()
        samsa.stop()


def _create(samsa: SamsaProcess, topic: str) -> None:
    with Connection("127.0.0.1", samsa.port) as conn:
        r = conn.request(19, {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1,
                                          "assignments": (), "configs": ()}], "timeout": 5000,
                              "validate_only": False})
        assert r.topics[0].error_code.value == 0


def _read_all(samsa: SamsaProcess, topic: str) -> list[bytes | None]:
    with Connection("127.0.0.1", samsa.port) as conn:
        values: list[bytes | None] = []
        offset = 0
        while True:
            r = conn.request(1, {"max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 24, "isolation_level": 0,
                                 "session_id": 0, "session_epoch": -1, "replica_id": -1,
                                 "topics": [{"topic": topic, "partitions": [
                                     {"partition": 0, "fetch_offset": offset, "partition_max_bytes": 1 << 24}]}],
                                 "forgotten_topics_data": (), "rack_id": ""}, version=12)
            part = r.responses[0].partitions[0]
            batches = list(decode_batches(part.records, max_decompressed_bytes=1 << 26))
            if not batches:
                return values
            for header, records in batches:
                values += [rec.value for rec in records if rec.offset >= offset]
                offset = header.next_offset


def _check(values: list[bytes | None], proxy: LossyProxy) -> None:
    assert proxy.dropped > 0, "the proxy never dropped a response: the test proved nothing"
    expected = [b"v-%d" % i for i in range(COUNT)]
    assert len(values) == len(set(values)), "duplicates in the log"
    assert values == expected


@pytest.mark.samsa
def test_confluent_idempotent_producer_exactly_once(proxied_samsa: tuple[SamsaProcess, LossyProxy]) -> None:
    from confluent_kafka import Producer

    samsa, proxy = proxied_samsa
    topic = f"idem-{uuid.uuid4().hex[:8]}"
    _create(samsa, topic)
    errors: list[object] = []
    p = Producer({"bootstrap.servers": f"127.0.0.1:{proxy.port}", "enable.idempotence": True,
                  "linger.ms": 2, "batch.num.messages": 20, "socket.timeout.ms": 5000,
                  "message.timeout.ms": 120000, "retry.backoff.ms": 50, "reconnect.backoff.ms": 20})
    for i in range(COUNT):
        p.produce(topic, b"v-%d" % i, partition=0,
                  on_delivery=lambda err, _m: errors.append(err) if err is not None else None)
        if i % 20 == 19:
            p.flush(60)
    assert p.flush(120) == 0
    assert errors == []
    _check(_read_all(samsa, topic), proxy)


@pytest.mark.samsa
def test_java_idempotent_producer_exactly_once(proxied_samsa: tuple[SamsaProcess, LossyProxy]) -> None:
    classes = HERE / "java" / "target" / "classes"
    if not (classes / "IdempotentProducer.class").exists():
        pytest.fail("the Java programs are not built: run `make compat-deps`")
    samsa, proxy = proxied_samsa
    topic = f"idem-{uuid.uuid4().hex[:8]}"
    _create(samsa, topic)
    started = time.monotonic()
    r = subprocess.run(
        ["java", "-Xmx256m", "-XX:TieredStopAtLevel=1", "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
         "-cp", f"{classes}:{HERE / 'java' / 'target' / 'lib' / '*'}", "IdempotentProducer",
         f"127.0.0.1:{proxy.port}", topic, str(COUNT)],
        capture_output=True, timeout=240, check=False,
    )
    assert r.returncode == 0, (r.stdout.decode() + r.stderr.decode())[-3000:]
    assert time.monotonic() - started < 240
    _check(_read_all(samsa, topic), proxy)


@pytest.mark.samsa
def test_kafka_python_idempotent_producer_exactly_once(proxied_samsa: tuple[SamsaProcess, LossyProxy]) -> None:
    from kafka import KafkaProducer

    samsa, proxy = proxied_samsa
    topic = f"idem-{uuid.uuid4().hex[:8]}"
    _create(samsa, topic)
    p = KafkaProducer(bootstrap_servers=f"127.0.0.1:{proxy.port}", enable_idempotence=True, acks="all",
                      linger_ms=2, request_timeout_ms=5000, retry_backoff_ms=50, reconnect_backoff_ms=20,
                      delivery_timeout_ms=120000)
    try:
        futures = []
        for i in range(COUNT):
            futures.append(p.send(topic, b"v-%d" % i, partition=0))
            if i % 20 == 19:
                p.flush(60)
        p.flush(120)
        for f in futures:
            f.get(timeout=60)  # raises the send's error, if any
    finally:
        p.close(10)
    _check(_read_all(samsa, topic), proxy)


@pytest.mark.samsa
def test_aiokafka_idempotent_producer_exactly_once(proxied_samsa: tuple[SamsaProcess, LossyProxy]) -> None:
    from aiokafka import AIOKafkaProducer

    samsa, proxy = proxied_samsa
    topic = f"idem-{uuid.uuid4().hex[:8]}"
    _create(samsa, topic)

    async def produce() -> None:
        p = AIOKafkaProducer(bootstrap_servers=f"127.0.0.1:{proxy.port}", enable_idempotence=True,
                             linger_ms=2, request_timeout_ms=5000, retry_backoff_ms=50)
        await p.start()
        try:
            for start in range(0, COUNT, 20):
                sent = [await p.send(topic, b"v-%d" % i, partition=0) for i in range(start, min(start + 20, COUNT))]
                await asyncio.gather(*sent)  # raises the send's error, if any
        finally:
            await p.stop()

    asyncio.run(asyncio.wait_for(produce(), 240))
    _check(_read_all(samsa, topic), proxy)


@pytest.mark.samsa
def test_kafkajs_idempotent_producer_exactly_once(proxied_samsa: tuple[SamsaProcess, LossyProxy]) -> None:
    if not (HERE / "node" / "node_modules" / "kafkajs").exists():
        pytest.fail("kafkajs is not installed: run `make compat-deps`")
    samsa, proxy = proxied_samsa
    topic = f"idem-{uuid.uuid4().hex[:8]}"
    _create(samsa, topic)
    r = subprocess.run(["node", str(HERE / "node" / "idempotent_producer.js"), f"127.0.0.1:{proxy.port}", topic,
                        str(COUNT)], capture_output=True, timeout=240, check=False)
    assert r.returncode == 0, (r.stdout.decode() + r.stderr.decode())[-3000:]
    _check(_read_all(samsa, topic), proxy)
