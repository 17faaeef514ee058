"""kcat (librdkafka) and kafkajs against a secured Samsa: produce and consume over SASL_SSL with SCRAM-SHA-512,
over SSL with a client certificate and over SASL_PLAINTEXT with PLAIN (kafkajs and kcat -G with a consumer
group), the principal each request ran as read from the broker's request log; a wrong password is an
authentication failure the client reports; a client without SASL on a SASL listener is disconnected.

The broker and its certificates are the security tests' (tests/security/security_harness.py).
"""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "security"))

import security_harness
from security_harness import (
    EXPECTED_PRINCIPALS,
    PLAIN_USERS,
    SCRAM_PASSWORD,
    SCRAM_USER,
    SecuredBroker,
    create_topic,
    logged_principals,
)

from samsa.broker.client import Connection

HERE = Path(__file__).resolve().parent
certs = security_harness.certs
secured_broker = security_harness.secured_broker
_topic = create_topic

LISTENERS = ["SASL_SSL", "SSL", "SASL_PLAINTEXT"]
RECORDS = 5
CLIENT_TIMEOUT_S = 90
KAFKAJS = HERE / "node" / "node_modules" / "kafkajs" / "package.json"
# librdkafka before 2.6.1 puts its own nonce in front of the server's (which already starts with it) in the
# SCRAM client-final message (confluentinc/librdkafka#4895). Kafka 4.x refuses that, as RFC 5802 says and as
# Samsa does; Debian's kcat has librdkafka 2.0.2, so its SASL_SSL round trip logs in with PLAIN instead.
SCRAM_FIXED_LIBRDKAFKA = (2, 6, 1)
SCRAM_FAILED = ("Authentication failed during authentication due to invalid credentials with SASL mechanism "
                "SCRAM-SHA-512")


def _need(client: str) -> None:
    missing = {"kcat": shutil.which("kcat") is None, "kafkajs": shutil.which("node") is None or not KAFKAJS.exists()}
    if missing[client]:
        pytest.fail(f"{client} is missing: run `make compat-deps`", pytrace=False)


def _run(cmd: list[str], *, stdin: str | None = None, env: dict[str, str] | None = None,
         timeout_s: float = CLIENT_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, input=stdin, capture_output=True, text=True, timeout=timeout_s, cwd=HERE,
                          env={**os.environ, **(env or {})})


# --- kcat --------------------------------------------------------------------------------------------------


@functools.cache
def _kcat_librdkafka() -> tuple[int, ...]:
    exe = shutil.which("kcat")
    assert exe is not None
    found = re.search(r"librdkafka (\d+)\.(\d+)\.(\d+)", _run([exe, "-V"]).stdout)
    assert found is not None, "kcat -V names no librdkafka version"
    return tuple(int(part) for part in found.groups())


def _kcat_scram_works() -> bool:
    return _kcat_librdkafka() >= SCRAM_FIXED_LIBRDKAFKA


def _kcat_security(broker: SecuredBroker, listener: str, password: str | None = None,
                   mechanism: str | None = None) -> dict[str, str]:
    certs_ = broker.certs
    if listener == "SSL":
        return {"security.protocol": "SSL", "ssl.ca.location": str(certs_.ca),
                "ssl.certificate.location": str(certs_.client.certificate),
                "ssl.key.location": str(certs_.client.key)}
    if listener == "SASL_SSL":
        mechanism = mechanism or ("SCRAM-SHA-512" if _kcat_scram_works() else "PLAIN")
        user, secret = (SCRAM_USER, SCRAM_PASSWORD) if mechanism != "PLAIN" else ("alice", PLAIN_USERS["alice"])
        return {"security.protocol": "SASL_SSL", "ssl.ca.location": str(certs_.ca), "sasl.mechanisms": mechanism,
                "sasl.username": user, "sasl.password": password or secret}
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "PLAIN", "sasl.username": "alice",
            "sasl.password": password or PLAIN_USERS["alice"]}


def _kcat(broker: SecuredBroker, listener: str, args: list[str], settings: dict[str, str], *,
          stdin: str | None = None, timeout_s: float = CLIENT_TIMEOUT_S) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("kcat")
    assert exe is not None
    options = [item for key, value in settings.items() for item in ("-X", f"{key}={value}")]
    return _run([exe, "-b", broker.bootstrap(listener), *args, *options], stdin=stdin, timeout_s=timeout_s)


@pytest.mark.parametrize("listener", LISTENERS)
def test_kcat_produces_and_consumes_in_a_group(secured_broker: SecuredBroker, listener: str) -> None:
    _need("kcat")
    topic = _topic(secured_broker, f"kcat-{listener.lower()}")
    settings = {**_kcat_security(secured_broker, listener), "client.id": topic}
    values = [f"kcat-{i}" for i in range(RECORDS)]
    produced = _kcat(secured_broker, listener, ["-P", "-t", topic, "-X", "acks=all"], settings,
                     stdin="".join(f"{v}\n" for v in values))
    assert produced.returncode == 0 and "ERROR" not in produced.stderr, produced.stderr
    # -G: librdkafka's balanced consumer (JoinGroup, SyncGroup, OffsetCommit); -e: exit at the end of the
    # partitions it was assigned.
    consumed = _kcat(secured_broker, listener, ["-G", f"g-{topic}", topic, "-e", "-q", "-f", "%s\n"],
                     {**settings, "auto.offset.reset": "earliest"})
    assert consumed.returncode == 0, consumed.stderr
    assert consumed.stdout.split() == values
    principal = settings.get("sasl.username", "")
    expected = {(f"User:{principal}" if principal else EXPECTED_PRINCIPALS[listener], listener)}
    assert logged_principals(secured_broker, topic) == expected
    assert logged_principals(secured_broker, topic, "JoinGroup") == expected
    with Connection("127.0.0.1", secured_broker.ports["PLAINTEXT"]) as admin:
        fetched = admin.request(9, {"group_id": f"g-{topic}", "topics": [{"name": topic, "partition_indexes": [0]}]},
                                version=7)
    assert [p.committed_offset for p in fetched.topics[0].partitions] == [RECORDS]


@pytest.mark.parametrize(("listener", "mechanism"), [("SASL_SSL", "SCRAM-SHA-512"), ("SASL_SSL", "PLAIN"),
                                                     ("SASL_PLAINTEXT", "PLAIN")])
def test_kcat_reports_a_wrong_password_as_an_authentication_failure(secured_broker: SecuredBroker,
                                                                     listener: str, mechanism: str) -> None:
    _need("kcat")
    settings = _kcat_security(secured_broker, listener, password="not-the-password", mechanism=mechanism)
    answer = _kcat(secured_broker, listener, ["-L", "-m", "5"], settings)
    assert answer.returncode != 0
    # librdkafka's own words for a refused login, then the broker's message
    assert "SASL authentication error" in answer.stderr, answer.stderr
    expected = SCRAM_FAILED if mechanism == "SCRAM-SHA-512" else "Authentication failed: Invalid username or password"
    assert expected in answer.stderr, answer.stderr


def test_kcat_scram_login_matches_kafka_4_for_its_librdkafka(secured_broker: SecuredBroker) -> None:
    """With the right password: logged in when kcat's librdkafka sends RFC 5802's nonce (2.6.1 on); refused,
    as Kafka 4.x refuses it, when it sends the nonce doubled (before 2.6.1)."""
    _need("kcat")
    settings = _kcat_security(secured_broker, "SASL_SSL", mechanism="SCRAM-SHA-512")
    answer = _kcat(secured_broker, "SASL_SSL", ["-L", "-m", "5"], settings)
    if _kcat_scram_works():
        assert answer.returncode == 0, answer.stderr
        assert f"127.0.0.1:{secured_broker.ports['SASL_SSL']}" in answer.stdout
    else:
        assert answer.returncode != 0
        assert SCRAM_FAILED in answer.stderr, answer.stderr


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_kcat_without_sasl_on_a_sasl_listener_is_disconnected(secured_broker: SecuredBroker, listener: str) -> None:
    """No SASL settings (on SASL_SSL: TLS alone, the certificate trusted)."""
    _need("kcat")
    settings = {"security.protocol": "PLAINTEXT"} if listener == "SASL_PLAINTEXT" else {
        "security.protocol": "SSL", "ssl.ca.location": str(secured_broker.certs.ca)}
    answer = _kcat(secured_broker, listener, ["-L", "-m", "5"], settings)
    assert answer.returncode != 0
    # The broker answered ApiVersions, then closed the connection at the Metadata request (librdkafka's hint)
    assert "Disconnected: verify that security.protocol is correctly configured, broker might require SASL " \
           "authentication" in answer.stderr, answer.stderr
    assert "Failed to acquire metadata" in answer.stderr


# --- kafkajs -----------------------------------------------------------------------------------------------


def _kafkajs_security(broker: SecuredBroker, listener: str, password: str | None = None) -> dict[str, Any]:
    certs_ = broker.certs
    if listener == "SSL":
        return {"ssl": {"ca": str(certs_.ca), "cert": str(certs_.client.certificate), "key": str(certs_.client.key)}}
    if listener == "SASL_SSL":
        return {"ssl": {"ca": str(certs_.ca)}, "sasl": {"mechanism": "scram-sha-512", "username": SCRAM_USER,
                                                        "password": password or SCRAM_PASSWORD}}
    return {"sasl": {"mechanism": "plain", "username": "alice", "password": password or PLAIN_USERS["alice"]}}


def _kafkajs(broker: SecuredBroker, mode: str, listener: str, topic: str, security: dict[str, Any]) -> Any:
    answer = _run(["node", str(HERE / "node" / "security_client.js"), mode, broker.bootstrap(listener), topic],
                  env={"SECURITY": json.dumps(security)})
    assert answer.returncode == 0, f"kafkajs {mode} exited {answer.returncode}: {answer.stderr[-3000:]}"
    return json.loads(answer.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("listener", LISTENERS)
def test_kafkajs_produces_and_consumes_in_a_group(secured_broker: SecuredBroker, listener: str) -> None:
    _need("kafkajs")
    topic = _topic(secured_broker, f"kjs-{listener.lower()}")
    out = _kafkajs(secured_broker, "roundtrip", listener, topic, _kafkajs_security(secured_broker, listener))
    assert out == {"values": [f"kjs-{i}" for i in range(RECORDS)], "committed": [RECORDS]}
    principal = {(EXPECTED_PRINCIPALS[listener], listener)}
    assert logged_principals(secured_broker, topic) == principal
    assert logged_principals(secured_broker, topic, "JoinGroup") == principal
    assert logged_principals(secured_broker, topic, "OffsetCommit") == principal


@pytest.mark.parametrize("listener", ["SASL_SSL", "SASL_PLAINTEXT"])
def test_kafkajs_reports_a_wrong_password_as_an_authentication_failure(secured_broker: SecuredBroker,
                                                                        listener: str) -> None:
    _need("kafkajs")
    security = _kafkajs_security(secured_broker, listener, password="not-the-password")
    out = _kafkajs(secured_broker, "connect", listener, "unused", security)
    assert out["error"] == "KafkaJSSASLAuthenticationError", out
    expected = ("Authentication failed during authentication due to invalid credentials with SASL mechanism "
                "SCRAM-SHA-512") if listener == "SASL_SSL" else "Invalid username or password"
    assert expected in out["message"], out


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_kafkajs_without_sasl_on_a_sasl_listener_is_disconnected(secured_broker: SecuredBroker,
                                                                 listener: str) -> None:
    _need("kafkajs")
    security = {} if listener == "SASL_PLAINTEXT" else {"ssl": {"ca": str(secured_broker.certs.ca)}}
    out = _kafkajs(secured_broker, "connect", listener, "unused", security)
    assert out == {"error": "KafkaJSConnectionClosedError", "message": "Closed connection"}
