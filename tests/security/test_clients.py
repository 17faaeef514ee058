"""Stock clients (kafka-python, aiokafka, confluent-kafka) produce and consume, with a consumer group,
over SASL_SSL with SCRAM-SHA-512, over SSL with a client certificate, and over SASL_PLAINTEXT with PLAIN."""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

import pytest
from security_harness import (
    EXPECTED_PRINCIPALS,
    PLAIN_USERS,
    SCRAM_PASSWORD,
    SCRAM_USER,
    SecuredBroker,
    confluent_round_trip,
    create_topic,
    logged_principals,
)

RECORDS = 5


_topic = create_topic


def _kafka_python_security(broker: SecuredBroker, listener: str) -> dict[str, Any]:
    certs = broker.certs
    if listener == "SSL":
        return {"security_protocol": "SSL", "ssl_cafile": str(certs.ca), "ssl_certfile": str(certs.client.certificate),
                "ssl_keyfile": str(certs.client.key)}
    if listener == "SASL_SSL":
        return {"security_protocol": "SASL_SSL", "ssl_cafile": str(certs.ca), "sasl_mechanism": "SCRAM-SHA-512",
                "sasl_plain_username": SCRAM_USER, "sasl_plain_password": SCRAM_PASSWORD}
    return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "PLAIN", "sasl_plain_username": "alice",
            "sasl_plain_password": PLAIN_USERS["alice"]}


@pytest.mark.parametrize("listener", ["SASL_SSL", "SSL", "SASL_PLAINTEXT"])
def test_kafka_python_round_trip(secured_broker: SecuredBroker, listener: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    topic = _topic(secured_broker, f"kp-{listener.lower()}")
    security = _kafka_python_security(secured_broker, listener)
    producer = KafkaProducer(bootstrap_servers=secured_broker.bootstrap(listener), client_id=topic, **security)
    for i in range(RECORDS):
        producer.send(topic, f"kp-{i}".encode()).get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=secured_broker.bootstrap(listener), group_id=f"g-{topic}",
                             auto_offset_reset="earliest", consumer_timeout_ms=15_000, **security)
    values = []
    for record in consumer:
        values.append(record.value)
        if len(values) == RECORDS:
            break
    consumer.commit()
    consumer.close()
    assert values == [f"kp-{i}".encode() for i in range(RECORDS)]
    assert logged_principals(secured_broker, topic) == {(EXPECTED_PRINCIPALS[listener], listener)}


def _ssl_context(broker: SecuredBroker, listener: str) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(broker.certs.ca))
    if listener == "SSL":
        context.load_cert_chain(str(broker.certs.client.certificate), str(broker.certs.client.key))
    return context


@pytest.mark.parametrize("listener", ["SASL_SSL", "SSL", "SASL_PLAINTEXT"])
def test_aiokafka_round_trip(secured_broker: SecuredBroker, listener: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    topic = _topic(secured_broker, f"aio-{listener.lower()}")
    security: dict[str, Any] = {"security_protocol": listener}
    if listener != "SASL_PLAINTEXT":
        security["ssl_context"] = _ssl_context(secured_broker, listener)
    if listener == "SASL_SSL":
        security.update(sasl_mechanism="SCRAM-SHA-512", sasl_plain_username=SCRAM_USER,
                        sasl_plain_password=SCRAM_PASSWORD)
    elif listener == "SASL_PLAINTEXT":
        security.update(sasl_mechanism="PLAIN", sasl_plain_username="alice", sasl_plain_password=PLAIN_USERS["alice"])

    async def run() -> list[bytes]:
        producer = AIOKafkaProducer(bootstrap_servers=secured_broker.bootstrap(listener), client_id=topic,
                                    **security)
        await producer.start()
        try:
            for i in range(RECORDS):
                await producer.send_and_wait(topic, f"aio-{i}".encode())
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=secured_broker.bootstrap(listener),
                                    group_id=f"g-{topic}", auto_offset_reset="earliest", **security)
        await consumer.start()
        values: list[bytes] = []
        try:
            async with asyncio.timeout(30):
                async for record in consumer:
                    assert record.value is not None
                    values.append(record.value)
                    if len(values) == RECORDS:
                        break
            await consumer.commit()
        finally:
            await consumer.stop()
        return values

    assert asyncio.run(run()) == [f"aio-{i}".encode() for i in range(RECORDS)]
    assert logged_principals(secured_broker, topic) == {(EXPECTED_PRINCIPALS[listener], listener)}


def _confluent_security(broker: SecuredBroker, listener: str) -> dict[str, str]:
    certs = broker.certs
    if listener == "SSL":
        return {"security.protocol": "SSL", "ssl.ca.location": str(certs.ca),
                "ssl.certificate.location": str(certs.client.certificate), "ssl.key.location": str(certs.client.key)}
    if listener == "SASL_SSL":
        return {"security.protocol": "SASL_SSL", "ssl.ca.location": str(certs.ca), "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": SCRAM_USER, "sasl.password": SCRAM_PASSWORD}
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "alice",
            "sasl.password": PLAIN_USERS["alice"]}


@pytest.mark.parametrize("listener", ["SASL_SSL", "SSL", "SASL_PLAINTEXT"])
def test_confluent_kafka_round_trip(secured_broker: SecuredBroker, listener: str) -> None:
    topic = _topic(secured_broker, f"ck-{listener.lower()}")
    confluent_round_trip(secured_broker.bootstrap(listener), _confluent_security(secured_broker, listener), topic,
                         "ck", RECORDS, commit=True)
    assert logged_principals(secured_broker, topic) == {(EXPECTED_PRINCIPALS[listener], listener)}


def test_confluent_kafka_reports_a_wrong_password_as_an_authentication_error(secured_broker: SecuredBroker) -> None:
    from confluent_kafka import KafkaError, Producer

    errors: list[KafkaError] = []
    security = {**_confluent_security(secured_broker, "SASL_SSL"), "sasl.password": "not-the-password"}
    producer = Producer({"bootstrap.servers": secured_broker.bootstrap("SASL_SSL"), "error_cb": errors.append,
                         **security})
    for _ in range(30):
        producer.poll(0.5)
        if errors:
            break
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION
    assert "Authentication failed during authentication due to invalid credentials with SASL mechanism " \
           "SCRAM-SHA-512" in errors[0].str()


def test_kafka_python_without_sasl_on_a_sasl_listener_is_disconnected(secured_broker: SecuredBroker) -> None:
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    with pytest.raises(KafkaError):
        KafkaAdminClient(bootstrap_servers=secured_broker.bootstrap("SASL_PLAINTEXT"), request_timeout_ms=3000,
                         api_version_auto_timeout_ms=3000)


def test_confluent_kafka_keeps_producing_across_session_expiry(secured_broker: SecuredBroker) -> None:
    """KIP-368: on a listener with connections.max.reauth.ms, librdkafka re-authenticates (or reconnects) before
    its session ends, and produce keeps working past several lifetimes."""
    import time

    from confluent_kafka import Producer
    from security_harness import REAUTH_MS

    topic = _topic(secured_broker, "ck-reauth")
    producer = Producer({"bootstrap.servers": secured_broker.bootstrap("REAUTH"), "client.id": topic,
                         "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "alice",
                         "sasl.password": PLAIN_USERS["alice"]})
    delivered: list[Any] = []
    for i in range(4):
        producer.produce(topic, f"r{i}".encode(), on_delivery=lambda err, msg: delivered.append(err))
        assert producer.flush(30) == 0
        time.sleep(REAUTH_MS / 1000)
    assert delivered == [None] * 4
    assert logged_principals(secured_broker, topic) == {("User:alice", "REAUTH")}
