"""OAUTHBEARER against a real broker: a SaslAuthenticate exchange on the wire, and confluent-kafka and
kafka-python producing and consuming with tokens, in both of Kafka's modes.

Listeners: PLAINTEXT (setup), UNSECURED (SASL_PLAINTEXT, Kafka's unsecured JWS validator from the JAAS
config) and SIGNED (SASL_SSL, RS256/ES256 JWTs checked against a JWKS file with audience and issuer).
Keys, JWKS and certificates are made in tmp_path; the broker is a `samsa serve` process stopped by PID.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from oauth_tokens import AUDIENCE, ISSUER, Issuer, initial_response, make_issuer, unsecured_token
from security_harness import (
    REPO,
    START_TIMEOUT_S,
    Certificates,
    RawClient,
    SecuredBroker,
    confluent_round_trip,
    create_topic,
    logged_principals,
)

from samsa.broker import launcher

SASL_AUTHENTICATION_FAILED = 58
RECORDS = 5
LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
SIGNED_HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler"


class OAuthBroker(SecuredBroker):
    issuer: Issuer


@pytest.fixture(scope="module")
def oauth_broker(tmp_path_factory: pytest.TempPathFactory, certs: Certificates) -> Iterator[OAuthBroker]:
    directory = tmp_path_factory.mktemp("oauth-broker")
    issuer = make_issuer(directory)
    plain, unsecured, signed = launcher.free_ports(3)
    ports = {"PLAINTEXT": plain, "UNSECURED": unsecured, "SIGNED": signed}
    overrides = (
        f"listeners=PLAINTEXT://127.0.0.1:{plain},UNSECURED://127.0.0.1:{unsecured},SIGNED://127.0.0.1:{signed}",
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,UNSECURED:SASL_PLAINTEXT,SIGNED:SASL_SSL",
        "sasl.enabled.mechanisms=OAUTHBEARER",
        f"listener.name.unsecured.oauthbearer.sasl.jaas.config={LOGIN_MODULE} required "
        'unsecuredLoginStringClaim_sub="admin" unsecuredValidatorAllowableClockSkewMs="2000";',
        f"listener.name.signed.oauthbearer.sasl.server.callback.handler.class={SIGNED_HANDLER}",
        f"listener.name.signed.oauthbearer.sasl.oauthbearer.jwks.endpoint.url={issuer.jwks_url}",
        f"sasl.oauthbearer.expected.audience={AUDIENCE}", f"sasl.oauthbearer.expected.issuer={ISSUER}",
        "ssl.keystore.type=PEM", f"ssl.keystore.location={certs.broker.key_and_chain}",
        "ssl.truststore.type=PEM", f"ssl.truststore.location={certs.ca}",
        "samsa.request.log.enable=true",
        "offsets.topic.replication.factor=1", "transaction.state.log.replication.factor=1",
        "group.initial.rebalance.delay.ms=0",
    )
    log_path = directory / "samsa.log"
    options = launcher.ServeOptions(data_dir=directory / "data", port=plain, overrides=overrides)
    process = launcher.start_serve(options, log_path, cwd=REPO)
    try:
        process.wait_listening(START_TIMEOUT_S)
    except launcher.LaunchError:
        process.stop(kill=True)
        raise
    broker = OAuthBroker(process, certs, ports, log_path)
    broker.issuer = issuer
    try:
        yield broker
    finally:
        process.stop()


_topic = create_topic


# --- the wire ---------------------------------------------------------------------------------------

def test_a_good_unsecured_token_authenticates_with_a_session_bounded_by_exp(oauth_broker: OAuthBroker) -> None:
    with RawClient(oauth_broker.ports["UNSECURED"]) as client:
        [answer] = client.authenticate("OAUTHBEARER", [initial_response(unsecured_token("alice", lifetime_s=600))])
        assert (answer.error_code.value, answer.auth_bytes) == (0, b"")
        assert 590_000 < answer.session_lifetime.total_seconds() * 1000 <= 600_000  # KIP-368: the token's exp
        metadata = client.request(3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                          "include_topic_authorized_operations": False})
        assert metadata.brokers[0].port == oauth_broker.ports["UNSECURED"]


def test_a_bad_token_gets_the_json_challenge_then_sasl_authentication_failed(oauth_broker: OAuthBroker) -> None:
    with RawClient(oauth_broker.ports["UNSECURED"]) as client:
        [challenge] = client.authenticate("OAUTHBEARER", [initial_response(unsecured_token("mallory", lifetime_s=-60,
                                                                                           iat=1))])
        assert challenge.error_code.value == 0
        assert json.loads(challenge.auth_bytes) == {"status": "invalid_token"}
        final = client.request(36, 2, {"auth_bytes": b"\x01"})
        assert final.error_code.value == SASL_AUTHENTICATION_FAILED
        assert final.error_message == '{"status":"invalid_token"}'
        assert client.closed_by_broker()
    line = _failure_line(oauth_broker, "mallory")
    assert re.search(r"from 127\.0\.0\.1:\d+ on listener UNSECURED with SASL mechanism OAUTHBEARER: The indicated "
                     r"time \(\d+ ms\) minus allowable clock skew \(2000 ms\) was on or after the Expiration Time",
                     line), line


def test_a_malformed_client_message_fails_at_once(oauth_broker: OAuthBroker) -> None:
    with RawClient(oauth_broker.ports["UNSECURED"]) as client:
        [answer] = client.authenticate("OAUTHBEARER", [b"n,,\x01auth=Basic abc\x01\x01"])
        assert answer.error_code.value == SASL_AUTHENTICATION_FAILED
        assert answer.error_message == "Invalid scheme in OAUTHBEARER client first message: Basic"


def test_the_signed_listener_refuses_an_unsecured_token(oauth_broker: OAuthBroker) -> None:
    import ssl

    context = ssl.create_default_context(cafile=str(oauth_broker.certs.ca))
    with RawClient(oauth_broker.ports["SIGNED"], tls=context) as client:
        token = unsecured_token("mallory", aud=AUDIENCE, iss=ISSUER)
        [challenge] = client.authenticate("OAUTHBEARER", [initial_response(token)])
        assert json.loads(challenge.auth_bytes) == {"status": "invalid_token"}
        assert client.request(36, 2, {"auth_bytes": b"\x01"}).error_code.value == SASL_AUTHENTICATION_FAILED
    assert "the JWS algorithm 'none' is not accepted" in _failure_line(oauth_broker, "mallory", "SIGNED")


def _failure_line(broker: SecuredBroker, user: str, listener: str = "UNSECURED") -> str:
    lines = [line for line in broker.log().splitlines()
             if f"Failed authentication of User:{user} " in line and f"on listener {listener} " in line]
    assert lines, f"no authentication-failure line for {user} on {listener}"
    return lines[-1]


# --- confluent-kafka (librdkafka) -------------------------------------------------------------------

def _confluent_round_trip(broker: SecuredBroker, listener: str, security: dict[str, Any], prefix: str) -> str:
    topic = _topic(broker, prefix)
    confluent_round_trip(broker.bootstrap(listener), security, topic, "v", RECORDS)
    return topic


def test_confluent_kafka_with_librdkafkas_unsecured_jwt(oauth_broker: OAuthBroker) -> None:
    security = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                "enable.sasl.oauthbearer.unsecure.jwt": True,
                "sasl.oauthbearer.config": "principal=ck-alice lifeSeconds=600"}
    topic = _confluent_round_trip(oauth_broker, "UNSECURED", security, "ck-unsecured")
    assert logged_principals(oauth_broker, topic) == {("User:ck-alice", "UNSECURED")}


def _signed_oauth_cb(issuer: Issuer, sub: str, **claims: Any) -> Any:
    def oauth_cb(_config: str) -> tuple[str, float]:
        import time

        return issuer.token(sub, alg="ES256", **claims), time.time() + 600

    return oauth_cb


def test_confluent_kafka_with_signed_tokens_from_oauth_cb(oauth_broker: OAuthBroker) -> None:
    security = {"security.protocol": "SASL_SSL", "ssl.ca.location": str(oauth_broker.certs.ca),
                "sasl.mechanism": "OAUTHBEARER", "oauth_cb": _signed_oauth_cb(oauth_broker.issuer, "ck-signed")}
    topic = _confluent_round_trip(oauth_broker, "SIGNED", security, "ck-signed")
    assert logged_principals(oauth_broker, topic) == {("User:ck-signed", "SIGNED")}


def test_confluent_kafka_with_a_token_for_another_audience_gets_an_authentication_error(
        oauth_broker: OAuthBroker) -> None:
    from confluent_kafka import KafkaError, Producer

    errors: list[KafkaError] = []
    producer = Producer({"bootstrap.servers": oauth_broker.bootstrap("SIGNED"), "error_cb": errors.append,
                         "security.protocol": "SASL_SSL", "ssl.ca.location": str(oauth_broker.certs.ca),
                         "sasl.mechanism": "OAUTHBEARER",
                         "oauth_cb": _signed_oauth_cb(oauth_broker.issuer, "ck-wrong-aud", aud="elsewhere")})
    for _ in range(30):
        producer.poll(0.5)
        if any(e.code() == KafkaError._AUTHENTICATION for e in errors):
            break
    authentication = [e for e in errors if e.code() == KafkaError._AUTHENTICATION]
    assert authentication, errors
    assert '{"status":"invalid_token"}' in authentication[0].str()
    assert "Audience doesn't match" in _failure_line(oauth_broker, "ck-wrong-aud", "SIGNED")


# --- kafka-python ----------------------------------------------------------------------------------

def _kafka_python_provider(token: str) -> Any:
    from kafka.net.sasl.oauth import AbstractTokenProvider

    class Provider(AbstractTokenProvider):
        def token(self) -> str:
            return token

    return Provider()


@pytest.mark.parametrize("listener", ["UNSECURED", "SIGNED"])
def test_kafka_python_round_trip(oauth_broker: OAuthBroker, listener: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer

    sub = f"kp-{listener.lower()}"
    token = unsecured_token(sub) if listener == "UNSECURED" else oauth_broker.issuer.token(sub)
    security: dict[str, Any] = {"sasl_mechanism": "OAUTHBEARER", "sasl_oauth_token_provider":
                                _kafka_python_provider(token)}
    if listener == "SIGNED":
        security |= {"security_protocol": "SASL_SSL", "ssl_cafile": str(oauth_broker.certs.ca)}
    else:
        security |= {"security_protocol": "SASL_PLAINTEXT"}
    topic = _topic(oauth_broker, sub)
    producer = KafkaProducer(bootstrap_servers=oauth_broker.bootstrap(listener), client_id=topic, **security)
    for i in range(RECORDS):
        producer.send(topic, f"kp-{i}".encode()).get(timeout=30)
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=oauth_broker.bootstrap(listener), group_id=f"g-{topic}",
                             auto_offset_reset="earliest", consumer_timeout_ms=15_000, **security)
    values = []
    for message in consumer:
        values.append(message.value)
        if len(values) == RECORDS:
            break
    consumer.close()
    assert values == [f"kp-{i}".encode() for i in range(RECORDS)]
    assert logged_principals(oauth_broker, topic) == {(f"User:{sub}", listener)}


def test_kafka_python_with_an_expired_token_fails_authentication(oauth_broker: OAuthBroker) -> None:
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaConfigurationError, KafkaError

    token = oauth_broker.issuer.token("kp-expired", lifetime_s=-600, iat_offset_s=-1200)
    with pytest.raises(KafkaError) as raised:
        KafkaAdminClient(bootstrap_servers=oauth_broker.bootstrap("SIGNED"), security_protocol="SASL_SSL",
                         ssl_cafile=str(oauth_broker.certs.ca), sasl_mechanism="OAUTHBEARER",
                         sasl_oauth_token_provider=_kafka_python_provider(token), request_timeout_ms=3000,
                         bootstrap_timeout_ms=3000)
    assert not isinstance(raised.value, KafkaConfigurationError), raised.value
    assert "Signature has expired" in _failure_line(oauth_broker, "kp-expired", "SIGNED")


def test_a_jwks_that_cannot_be_read_stops_the_broker_from_starting(tmp_path: Path) -> None:
    from samsa.broker.security.oauthbearer import JwksError, read_jwks

    with pytest.raises(JwksError, match="cannot read the JWKS"):
        read_jwks((tmp_path / "absent.json").as_uri())


def test_confluent_kafka_keeps_producing_past_its_tokens_lifetime(oauth_broker: OAuthBroker) -> None:
    """KIP-368: the session ends at the token's exp; librdkafka fetches a new token and re-authenticates (or
    reconnects) before then, so produce keeps working past several token lifetimes."""
    import time

    from confluent_kafka import Producer

    topic = _topic(oauth_broker, "ck-token-expiry")
    lifetime_s = 3
    producer = Producer({"bootstrap.servers": oauth_broker.bootstrap("UNSECURED"), "client.id": topic,
                         "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
                         "enable.sasl.oauthbearer.unsecure.jwt": True,
                         "sasl.oauthbearer.config": f"principal=ck-short lifeSeconds={lifetime_s}"})
    delivered: list[Any] = []
    for i in range(4):
        producer.produce(topic, f"r{i}".encode(), on_delivery=lambda err, msg: delivered.append(err))
        assert producer.flush(30) == 0
        time.sleep(lifetime_s / 2)
    assert delivered == [None] * 4
    assert logged_principals(oauth_broker, topic) == {("User:ck-short", "UNSECURED")}


def test_samsas_own_client_logs_in_with_oauthbearer(oauth_broker: OAuthBroker) -> None:
    """The CLI's client properties (kafka-*.sh --command-config) with OAuthBearerLoginModule: an unsecured
    token on UNSECURED, and on SIGNED a signed token read from a file (OAuthBearerLoginCallbackHandler)."""
    from samsa.broker.client import Connection
    from samsa.broker.security.client import client_security_from_properties

    token_file = oauth_broker.issuer.jwks_path.parent / "cli.jwt"
    token_file.write_text(oauth_broker.issuer.token("cli-signed"))
    cases = {
        "UNSECURED": ({"security.protocol": "SASL_PLAINTEXT", "sasl.jaas.config":
                       f'{LOGIN_MODULE} required unsecuredLoginStringClaim_sub="cli-unsecured";'},
                      "User:cli-unsecured"),
        "SIGNED": ({"security.protocol": "SASL_SSL", "ssl.truststore.location": str(oauth_broker.certs.ca),
                    "sasl.jaas.config": f"{LOGIN_MODULE} required ;",
                    "sasl.login.callback.handler.class":
                        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
                    "sasl.oauthbearer.token.endpoint.url": token_file.as_uri()}, "User:cli-signed"),
    }
    for listener, (properties, principal) in cases.items():
        security = client_security_from_properties({"sasl.mechanism": "OAUTHBEARER", **properties}, "test")
        client_id = f"cli-{listener.lower()}-{uuid.uuid4().hex[:6]}"
        with Connection("127.0.0.1", oauth_broker.ports[listener], security=security, client_id=client_id) as conn:
            r = conn.request(3, {"topics": [], "allow_auto_topic_creation": False,
                                 "include_topic_authorized_operations": False})
        assert r.brokers
        assert logged_principals(oauth_broker, client_id, api="Metadata") == {(principal, listener)}
