"""SASL on the wire, against a real broker: what a client that authenticates badly, or not at all, gets.

Kafka's rules: before authentication only ApiVersions, SaslHandshake and SaslAuthenticate are answered;
anything else closes the connection. A failed authentication is answered with SASL_AUTHENTICATION_FAILED
(58) and a message, then the connection closes. Frames are capped at sasl.server.max.receive.size until
the client has authenticated.
"""

from __future__ import annotations

import ssl
import struct
import time

import pytest
from scramp import ScramClient
from security_harness import PLAIN_USERS, REAUTH_MS, SCRAM_PASSWORD, SCRAM_USER, RawClient, SecuredBroker

from samsa.kproto.messages import decode_response

SASL_AUTHENTICATION_FAILED = 58
METADATA_V12 = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}


def plain_token(user: str, password: str) -> bytes:
    return b"\0" + user.encode() + b"\0" + password.encode()


def test_plain_with_a_wrong_password_fails_then_closes(secured_broker: SecuredBroker) -> None:
    with RawClient(secured_broker.ports["SASL_PLAINTEXT"]) as client:
        [answer] = client.authenticate("PLAIN", [plain_token("alice", "not-her-password")])
        assert answer.error_code.value == SASL_AUTHENTICATION_FAILED
        assert answer.error_message == "Authentication failed: Invalid username or password"
        assert client.closed_by_broker()


def test_plain_with_an_unknown_user_fails_like_a_wrong_password(secured_broker: SecuredBroker) -> None:
    with RawClient(secured_broker.ports["SASL_PLAINTEXT"]) as client:
        [answer] = client.authenticate("PLAIN", [plain_token("mallory", "whatever")])
        assert answer.error_code.value == SASL_AUTHENTICATION_FAILED
        assert answer.error_message == "Authentication failed: Invalid username or password"


@pytest.mark.parametrize(("user", "password"), [(SCRAM_USER, "wrong"), ("nobody", SCRAM_PASSWORD)])
def test_scram_with_a_wrong_password_or_user_fails_at_the_final_step(secured_broker: SecuredBroker, user: str,
                                                                     password: str) -> None:
    scram = ScramClient(["SCRAM-SHA-512"], user, password)
    with RawClient(secured_broker.ports["SASL_PLAINTEXT"]) as client:
        [first] = client.authenticate("SCRAM-SHA-512", [scram.get_client_first().encode()])
        assert first.error_code.value == 0
        scram.set_server_first(first.auth_bytes.decode())
        final = client.request(36, 2, {"auth_bytes": scram.get_client_final().encode()})
        assert final.error_code.value == SASL_AUTHENTICATION_FAILED
        assert final.error_message == ("Authentication failed during authentication due to invalid credentials with "
                                       "SASL mechanism SCRAM-SHA-512")
        assert client.closed_by_broker()


def test_scram_sha_256_authenticates_and_the_server_proves_it_knows_the_key(secured_broker: SecuredBroker) -> None:
    scram = ScramClient(["SCRAM-SHA-256"], SCRAM_USER, SCRAM_PASSWORD)
    with RawClient(secured_broker.ports["SASL_PLAINTEXT"]) as client:
        [first] = client.authenticate("SCRAM-SHA-256", [scram.get_client_first().encode()])
        scram.set_server_first(first.auth_bytes.decode())
        final = client.request(36, 2, {"auth_bytes": scram.get_client_final().encode()})
        assert final.error_code.value == 0
        scram.set_server_final(final.auth_bytes.decode())  # raises if the server's signature is wrong
        assert client.request(3, 12, METADATA_V12).brokers[0].port == secured_broker.ports["SASL_PLAINTEXT"]


def test_a_request_before_authentication_closes_the_connection(secured_broker: SecuredBroker) -> None:
    with RawClient(secured_broker.ports["SASL_PLAINTEXT"]) as c:
        c.send(3, 12, METADATA_V12)
        assert c.recv_frame() is None


def test_api_versions_is_answered_before_authentication_but_nothing_else(secured_broker: SecuredBroker) -> None:
    with RawClient(secured_broker.ports["SASL_PLAINTEXT"]) as client:
        versions = client.request(18, 3, {"client_software_name": "raw", "client_software_version": "1"})
        keys = {k.api_key for k in versions.api_keys}
        assert {17, 36, 50, 51} <= keys
        client.send(19, 7, {"topics": [], "timeout": 1000, "validate_only": False})  # CreateTopics
        assert client.recv_frame() is None


def test_api_versions_refused_before_the_handshake_may_be_asked_again(secured_broker: SecuredBroker) -> None:
    """Kafka's SaslServerAuthenticator moves on to the handshake only after answering the versions: a client
    told UNSUPPORTED_VERSION (a version newer than the broker's) or INVALID_REQUEST asks again."""
    with RawClient(secured_broker.ports["SASL_PLAINTEXT"]) as client:
        payload = struct.pack(">hhi", 18, 99, 1) + struct.pack(">h", 3) + b"raw" + b"\x00\x00\x00"
        client.sock.sendall(struct.pack(">i", len(payload)) + payload)
        frame = client.recv_frame()
        assert frame is not None
        unsupported = decode_response(18, 0, frame)[1]
        assert unsupported.error_code.value == 35  # UNSUPPORTED_VERSION, with ApiVersions' own range
        assert [(k.api_key, k.min_version, k.max_version) for k in unsupported.api_keys] == [(18, 0, 5)]
        invalid = client.request(18, 5, {"client_software_name": "raw", "client_software_version": "1",
                                         "cluster_id": None, "node_id": 1})
        assert invalid.error_code.value == 42 and not invalid.api_keys  # INVALID_REQUEST: node id without cluster
        versions = client.request(18, 3, {"client_software_name": "raw", "client_software_version": "1"})
        assert versions.error_code.value == 0 and {17, 36} <= {k.api_key for k in versions.api_keys}
        [answer] = client.authenticate("PLAIN", [plain_token("alice", PLAIN_USERS["alice"])])
        assert answer.error_code.value == 0
        assert client.request(3, 12, METADATA_V12).brokers


def test_api_versions_v5_checks_the_cluster_only_once_authenticated(secured_broker: SecuredBroker) -> None:
    """KIP-1242: before authentication the SASL authenticator answers ApiVersions without looking at the cluster
    and node named; once authenticated, the broker answers REBOOTSTRAP_REQUIRED (129) when they are not its own."""
    software = {"client_software_name": "raw", "client_software_version": "1"}
    with RawClient(secured_broker.ports["SASL_PLAINTEXT"]) as client:
        before = client.request(18, 5, {**software, "cluster_id": "SomeOtherClusterIdXXXX", "node_id": 7})
        assert before.error_code.value == 0 and (18, 0, 5) in [(k.api_key, k.min_version, k.max_version)
                                                               for k in before.api_keys]
        [answer] = client.authenticate("PLAIN", [plain_token("alice", PLAIN_USERS["alice"])])
        assert answer.error_code.value == 0
        metadata = client.request(3, 12, METADATA_V12)
        cluster_id, node_id = metadata.cluster_id, metadata.brokers[0].node_id
        other = client.request(18, 5, {**software, "cluster_id": "SomeOtherClusterIdXXXX", "node_id": node_id})
        assert other.error_code.value == 129 and not other.api_keys
        other_node = client.request(18, 5, {**software, "cluster_id": cluster_id, "node_id": node_id + 1})
        assert other_node.error_code.value == 129
        own = client.request(18, 5, {**software, "cluster_id": cluster_id, "node_id": node_id})
        assert own.error_code.value == 0 and own.api_keys
        assert client.request(3, 12, METADATA_V12).cluster_id == cluster_id  # the connection still serves


def test_an_unsupported_mechanism_is_refused_with_the_enabled_ones(secured_broker: SecuredBroker) -> None:
    with RawClient(secured_broker.ports["SASL_PLAINTEXT"]) as client:
        answer = client.request(17, 1, {"mechanism": "GSSAPI"})
        assert answer.error_code.value == 33  # UNSUPPORTED_SASL_MECHANISM
        assert list(answer.mechanisms) == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
        assert client.closed_by_broker()


def test_a_huge_frame_before_authentication_closes_at_its_size_prefix(secured_broker: SecuredBroker) -> None:
    with RawClient(secured_broker.ports["SASL_PLAINTEXT"]) as client:
        client.request(18, 3, {"client_software_name": "raw", "client_software_version": "1"})
        # Over sasl.server.max.receive.size (512 KiB): refused from the size prefix alone, before any body.
        client.sock.sendall((600 * 1024).to_bytes(4, "big") + b"\0" * 16)
        assert client.closed_by_broker()
    with RawClient(secured_broker.ports["SASL_PLAINTEXT"]) as c:
        c.sock.sendall((2**31 - 1).to_bytes(4, "big"))
        assert c.closed_by_broker()


def test_many_hostile_connections_leave_the_broker_serving(secured_broker: SecuredBroker) -> None:
    for _ in range(20):
        with RawClient(secured_broker.ports["SASL_PLAINTEXT"]) as client:
            client.sock.sendall((500 * 1024).to_bytes(4, "big") + b"\x00\x03\x00\x0c" + b"\0" * 4096)
            client.sock.sendall(b"\0" * 4096)
    with RawClient(secured_broker.ports["SASL_PLAINTEXT"]) as client:
        [answer] = client.authenticate("PLAIN", [plain_token("alice", PLAIN_USERS["alice"])])
        assert answer.error_code.value == 0
        assert client.request(3, 12, METADATA_V12).brokers


def test_legacy_v0_handshake_then_raw_tokens(secured_broker: SecuredBroker) -> None:
    with RawClient(secured_broker.ports["SASL_PLAINTEXT"]) as client:
        assert client.request(17, 0, {"mechanism": "PLAIN"}).error_code.value == 0
        token = plain_token("admin", PLAIN_USERS["admin"])
        client.sock.sendall(len(token).to_bytes(4, "big") + token)
        assert client.recv_frame() == b""  # PLAIN's (empty) server token, size-prefixed
        assert client.request(3, 12, METADATA_V12).brokers


def test_sasl_handshake_on_a_plaintext_listener_is_an_illegal_state(secured_broker: SecuredBroker) -> None:
    with RawClient(secured_broker.ports["PLAINTEXT"]) as client:
        assert client.request(17, 1, {"mechanism": "PLAIN"}).error_code.value == 34  # ILLEGAL_SASL_STATE


def test_reauthentication_extends_the_session_and_expiry_disconnects(secured_broker: SecuredBroker) -> None:
    port = secured_broker.ports["REAUTH"]
    with RawClient(port) as client:
        [answer] = client.authenticate("PLAIN", [plain_token("alice", PLAIN_USERS["alice"])])
        assert answer.error_code.value == 0
        assert answer.session_lifetime.total_seconds() * 1000 == REAUTH_MS
        # KIP-368: the client re-authenticates on the same connection, as the same principal.
        [again] = client.authenticate("PLAIN", [plain_token("alice", PLAIN_USERS["alice"])])
        assert again.error_code.value == 0
        assert client.request(3, 12, METADATA_V12).brokers[0].port == port
    with RawClient(port) as client:
        client.authenticate("PLAIN", [plain_token("alice", PLAIN_USERS["alice"])])
        [other] = client.authenticate("PLAIN", [plain_token("admin", PLAIN_USERS["admin"])])
        assert other.error_code.value == SASL_AUTHENTICATION_FAILED
        assert "Cannot change principals" in (other.error_message or "")
    with RawClient(port) as client:
        client.authenticate("PLAIN", [plain_token("alice", PLAIN_USERS["alice"])])
        time.sleep(REAUTH_MS / 1000 + 0.5)  # past the session's lifetime, without re-authenticating
        client.send(3, 12, METADATA_V12)
        assert client.recv_frame() is None


def test_an_ssl_listener_requiring_client_certificates_refuses_a_client_without_one(
        secured_broker: SecuredBroker) -> None:
    context = ssl.create_default_context(cafile=str(secured_broker.certs.ca))
    try:
        with RawClient(secured_broker.ports["SSL"], tls=context) as client:
            client.send(18, 3, {"client_software_name": "raw", "client_software_version": "1"})
            answered = client.recv_frame()
    except (ssl.SSLError, ConnectionResetError):
        answered = None  # TLS 1.2 refuses during the handshake; TLS 1.3 right after it
    assert answered is None
