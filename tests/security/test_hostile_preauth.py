"""Hostile input on a SASL listener before authentication: nothing but ApiVersions, SaslHandshake and
SaslAuthenticate is answered, nothing a stranger sends changes state, malformed SASL tokens fail the
login (never the broker), and what unauthenticated connections hold stays bounded.

Kafka's rule (SaslServerAuthenticator): before authentication a request of any other API closes the
connection before its body is parsed ("Unexpected Kafka request of type X during SASL handshake"), and
frames are capped at sasl.server.max.receive.size (512 KiB). test_sasl_protocol.py has the well-formed
cases; here are the probes of the hostile-input issue pointed at a SASL listener. After each probe a
client still logs in and is answered.
"""

from __future__ import annotations

import socket
import ssl
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from scramp import ScramClient
from security_harness import PLAIN_USERS, SCRAM_PASSWORD, SCRAM_USER, RawClient, SecuredBroker

from samsa.broker.client import Connection

SASL_AUTHENTICATION_FAILED = 58
ILLEGAL_SASL_STATE = 34
ANSWERED_BEFORE_AUTHENTICATION = {17, 18, 36}  # SaslHandshake, ApiVersions, SaslAuthenticate
METADATA_V12 = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
API_VERSIONS_V3 = {"client_software_name": "hostile", "client_software_version": "1"}
MIB = 1024 * 1024
SASL_MAX_RECEIVE_BYTES = 512 * 1024  # sasl.server.max.receive.size's default
# Generous (a shared machine, allocator arenas): the point is no growth beyond what the caps allow.
RSS_SLACK_BYTES = 48 * MIB


def plain_token(user: str, password: str, authzid: str = "") -> bytes:
    return authzid.encode() + b"\0" + user.encode() + b"\0" + password.encode()


def _tls(broker: SecuredBroker) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(broker.certs.ca))


def _connect(broker: SecuredBroker, listener: str) -> RawClient:
    return RawClient(broker.ports[listener], tls=_tls(broker) if listener == "SASL_SSL" else None)


def still_serves(broker: SecuredBroker) -> None:
    """A well-behaved client logs in with PLAIN on SASL_PLAINTEXT and with SCRAM on SASL_SSL, and is answered."""
    with RawClient(broker.ports["SASL_PLAINTEXT"]) as client:
        [answer] = client.authenticate("PLAIN", [plain_token("alice", PLAIN_USERS["alice"])])
        assert answer.error_code.value == 0
        assert client.request(3, 12, METADATA_V12).brokers
    scram = ScramClient(["SCRAM-SHA-512"], SCRAM_USER, SCRAM_PASSWORD)
    with RawClient(broker.ports["SASL_SSL"], tls=_tls(broker)) as client:
        [first] = client.authenticate("SCRAM-SHA-512", [scram.get_client_first().encode()])
        scram.set_server_first(first.auth_bytes.decode())
        final = client.request(36, 2, {"auth_bytes": scram.get_client_final().encode()})
        assert final.error_code.value == 0
        assert client.request(3, 12, METADATA_V12).brokers


def rss_bytes(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS in /proc status")


@pytest.fixture(scope="module")
def advertised(secured_broker: SecuredBroker) -> dict[int, tuple[int, int]]:
    """api_key -> (min, max) version, as the PLAINTEXT listener advertises them."""
    with RawClient(secured_broker.ports["PLAINTEXT"]) as client:
        versions = client.request(18, 3, API_VERSIONS_V3)
    return {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in versions.api_keys}


@pytest.fixture
def opened() -> Iterator[list[socket.socket]]:
    sockets: list[socket.socket] = []
    yield sockets
    for s in sockets:
        s.close()


# --- only ApiVersions and SASL are answered ------------------------------------------------------------


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_every_other_api_closes_the_connection_unanswered(secured_broker: SecuredBroker, listener: str,
                                                         advertised: dict[int, tuple[int, int]]) -> None:
    """Each API the broker has, as a well-formed request at its newest version, first on a fresh connection
    and again after ApiVersions: no answer, the connection closed."""
    others = sorted(set(advertised) - ANSWERED_BEFORE_AUTHENTICATION)
    assert len(others) > 30, others  # the broker's whole API, not a handful
    answered = []
    for api_key in others:
        version = advertised[api_key][1]
        for after_api_versions in (False, True):
            with _connect(secured_broker, listener) as client:
                if after_api_versions:
                    client.request(18, 3, API_VERSIONS_V3)
                client.send(api_key, version, {})
                if client.recv_frame() is not None:
                    answered.append((api_key, version, after_api_versions))
    assert answered == [], f"answered before authentication: {answered}"
    still_serves(secured_broker)


def test_requests_before_authentication_change_nothing(secured_broker: SecuredBroker) -> None:
    """CreateTopics, AlterUserScramCredentials and CreateAcls sent unauthenticated (well-formed, after
    ApiVersions and after a SaslHandshake) leave no topic, no credential and no ACL behind."""
    topic, user = "made-by-a-stranger", "mallory"
    create_topics = {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1, "assignments": (),
                                 "configs": ()}], "timeout": 5000, "validate_only": False}
    upsert = {"deletions": (), "upsertions": [{"name": user, "mechanism": 2, "iterations": 4096, "salt": b"s" * 16,
                                               "salted_password": b"p" * 64}]}
    create_acls = {"creations": [{"resource_type": 2, "resource_name": "*", "resource_pattern_type": 3,
                                  "principal": f"User:{user}", "host": "*", "operation": 2, "permission_type": 3}]}
    for api_key, version, values in ((19, 7, create_topics), (51, 0, upsert), (30, 3, create_acls)):
        for handshake_first in (False, True):
            with RawClient(secured_broker.ports["SASL_PLAINTEXT"]) as client:
                client.request(18, 3, API_VERSIONS_V3)
                if handshake_first:
                    assert client.request(17, 1, {"mechanism": "PLAIN"}).error_code.value == 0
                client.send(api_key, version, values)
                assert client.recv_frame() is None, (api_key, handshake_first)
    with Connection("127.0.0.1", secured_broker.ports["PLAINTEXT"]) as admin:
        metadata = admin.request(3, {"topics": [{"name": topic}], "allow_auto_topic_creation": False,
                                     "include_topic_authorized_operations": False})
        assert metadata.topics[0].error_code.value == 3  # UNKNOWN_TOPIC_OR_PARTITION
        described = admin.request(50, {"users": [{"name": user}]})
        assert described.results[0].error_code.value == 91  # RESOURCE_NOT_FOUND
        acls = admin.request(29, {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                                  "principal_filter": f"User:{user}", "host_filter": None, "operation": 1,
                                  "permission_type": 1})
        assert list(acls.resources) == []
    still_serves(secured_broker)


def test_sasl_out_of_order_closes_the_connection(secured_broker: SecuredBroker) -> None:
    """SaslAuthenticate with no handshake (even with the right password), and a second SaslHandshake where a
    token is due: closed unanswered, as Kafka does (an unexpected request during SASL authentication)."""
    with RawClient(secured_broker.ports["SASL_PLAINTEXT"]) as client:
        client.send(36, 2, {"auth_bytes": plain_token("alice", PLAIN_USERS["alice"])})
        assert client.recv_frame() is None
    with RawClient(secured_broker.ports["SASL_PLAINTEXT"]) as client:
        assert client.request(17, 1, {"mechanism": "PLAIN"}).error_code.value == 0
        client.send(17, 1, {"mechanism": "PLAIN"})
        assert client.recv_frame() is None
        assert client.closed_by_broker()
    still_serves(secured_broker)


# --- malformed tokens fail the login, not the broker -------------------------------------------------


PLAIN_TOKENS = {
    "empty": b"",
    "no separators": b"alice" + PLAIN_USERS["alice"].encode(),
    "one separator": b"alice\0" + PLAIN_USERS["alice"].encode(),
    "too many separators": b"\0alice\0" + PLAIN_USERS["alice"].encode() + b"\0extra",
    "empty user": plain_token("", PLAIN_USERS["alice"]),
    "empty password": plain_token("alice", ""),
    "another authorization id": plain_token("alice", PLAIN_USERS["alice"], authzid="admin"),
    "not utf-8": b"\0\xff\xfe\0\xc3\x28",
    "400 KiB": plain_token("alice", "x" * (400 * 1024)),
}


@pytest.mark.parametrize("name", sorted(PLAIN_TOKENS))
def test_a_malformed_plain_token_fails_the_login_and_closes(secured_broker: SecuredBroker, name: str) -> None:
    with RawClient(secured_broker.ports["SASL_PLAINTEXT"]) as client:
        [answer] = client.authenticate("PLAIN", [PLAIN_TOKENS[name]])
        assert answer.error_code.value == SASL_AUTHENTICATION_FAILED, (name, answer)
        assert client.closed_by_broker()
    still_serves(secured_broker)


SCRAM_FIRSTS = {
    "garbage": b"hello",
    "not utf-8": b"n,,n=\xff\xfe,r=abc",
    "channel binding asked for": b"p=tls-unique,,n=scram-user,r=abcdefgh",
    "no nonce": b"n,,n=scram-user",
    "empty": b"",
    "100 KiB user name, no nonce": b"n,,n=" + b"u" * (100 * 1024),
}


@pytest.mark.parametrize("name", sorted(SCRAM_FIRSTS))
def test_a_malformed_scram_client_first_fails_the_login_and_closes(secured_broker: SecuredBroker,
                                                                   name: str) -> None:
    with RawClient(secured_broker.ports["SASL_SSL"], tls=_tls(secured_broker)) as client:
        [answer] = client.authenticate("SCRAM-SHA-512", [SCRAM_FIRSTS[name]])
        assert answer.error_code.value == SASL_AUTHENTICATION_FAILED, (name, answer)
        assert client.closed_by_broker()
    still_serves(secured_broker)


def _scram_final_variants(final: str, server_nonce: str) -> dict[str, bytes]:
    proof = final.rsplit(",p=", 1)[1]
    return {
        # librdkafka before 2.6.1: its own nonce again in front of the server's (Kafka 4.x refuses it too)
        "nonce doubled": final.replace(f"r={server_nonce}", f"r={server_nonce[:32]}{server_nonce}").encode(),
        "nonce cut short": final.replace(f"r={server_nonce}", f"r={server_nonce[:-1]}").encode(),
        "channel binding changed": final.replace("c=biws", "c=eSws").encode(),
        "proof not base64": final.replace(proof, "!!!!").encode(),
        "proof cut short": final.replace(proof, proof[:8]).encode(),
        "no proof": final.rsplit(",p=", 1)[0].encode(),
        "garbage": b"\xff" * 64,
    }


@pytest.mark.parametrize("variant", ["nonce doubled", "nonce cut short", "channel binding changed",
                                     "proof not base64", "proof cut short", "no proof", "garbage"])
def test_a_tampered_scram_client_final_fails_the_login_and_closes(secured_broker: SecuredBroker,
                                                                  variant: str) -> None:
    """The right password, then a client-final message changed on the way: refused (RFC 5802 section 5.1)."""
    scram = ScramClient(["SCRAM-SHA-512"], SCRAM_USER, SCRAM_PASSWORD)
    with RawClient(secured_broker.ports["SASL_PLAINTEXT"]) as client:
        [first] = client.authenticate("SCRAM-SHA-512", [scram.get_client_first().encode()])
        server_first = first.auth_bytes.decode()
        scram.set_server_first(server_first)
        server_nonce = server_first.split(",")[0][2:]
        token = _scram_final_variants(scram.get_client_final(), server_nonce)[variant]
        final = client.request(36, 2, {"auth_bytes": token})
        assert final.error_code.value == SASL_AUTHENTICATION_FAILED, (variant, final)
        assert client.closed_by_broker()
    still_serves(secured_broker)


def test_a_token_over_the_sasl_frame_cap_after_the_handshake_closes_at_its_size(
        secured_broker: SecuredBroker) -> None:
    with RawClient(secured_broker.ports["SASL_PLAINTEXT"]) as client:
        assert client.request(17, 1, {"mechanism": "PLAIN"}).error_code.value == 0
        header = struct.pack(">hhih", 36, 2, 99, -1)  # then the body would follow: never sent
        client.sock.sendall(struct.pack(">i", 600 * 1024) + header)
        assert client.recv_frame() is None
    still_serves(secured_broker)


def test_bytes_that_are_not_kafka_close_the_connection(secured_broker: SecuredBroker) -> None:
    """An HTTP request, a TLS ClientHello on the plaintext SASL port, plaintext on the TLS one, and a frame
    whose header is cut short."""
    probes = [
        ("SASL_PLAINTEXT", b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"),
        ("SASL_PLAINTEXT", bytes.fromhex("160301020001") + b"\0" * 512),
        ("SASL_PLAINTEXT", struct.pack(">i", 3) + b"\x00\x12\x00"),
        ("SASL_SSL", struct.pack(">i", 16) + b"\x00\x12\x00\x03" + b"\0" * 12),
    ]
    for listener, data in probes:
        with RawClient(secured_broker.ports[listener]) as client:
            client.sock.sendall(data)
            assert client.closed_by_broker(), (listener, data[:16])
    still_serves(secured_broker)


# --- bounded memory --------------------------------------------------------------------------------------


def test_unauthenticated_connections_hold_no_more_than_the_sasl_frame_cap(secured_broker: SecuredBroker,
                                                                          opened: list[socket.socket]) -> None:
    """Forty connections each send ApiVersions, then all but one byte of a frame just under the cap, and
    twenty more announce 2 GiB frames: the first forty hold at most the cap each, the others are closed
    at their size prefix, and the broker answers a client that logs in meanwhile."""
    pid = secured_broker.process.popen.pid
    still_serves(secured_broker)
    before = rss_bytes(pid)
    frame_bytes = SASL_MAX_RECEIVE_BYTES - 1024
    partial = struct.pack(">i", frame_bytes) + b"\0" * (frame_bytes - 1)
    for _ in range(40):
        client = RawClient(secured_broker.ports["SASL_PLAINTEXT"])
        opened.append(client.sock)
        client.request(18, 3, API_VERSIONS_V3)
        client.sock.sendall(partial)
    announced = []
    for _ in range(20):
        client = RawClient(secured_broker.ports["SASL_PLAINTEXT"])
        opened.append(client.sock)
        client.sock.sendall(struct.pack(">i", 2**31 - 1) + b"\0" * 4096)
        announced.append(client)
    still_serves(secured_broker)
    assert all(c.closed_by_broker() for c in announced)
    grown = rss_bytes(pid) - before
    print(f"broker RSS grew by {grown / MIB:.1f} MiB with 40 unauthenticated connections holding "
          f"{40 * frame_bytes / MIB:.1f} MiB of partial frames")
    assert grown < 40 * SASL_MAX_RECEIVE_BYTES + RSS_SLACK_BYTES, f"RSS grew by {grown / MIB:.0f} MiB"
    for s in opened:
        s.close()
    opened.clear()
    still_serves(secured_broker)


def test_many_failed_logins_leave_the_broker_serving(secured_broker: SecuredBroker) -> None:
    for i in range(30):
        mechanism = ("PLAIN", "SCRAM-SHA-512")[i % 2]
        with RawClient(secured_broker.ports["SASL_PLAINTEXT"]) as client:
            if mechanism == "PLAIN":
                [answer] = client.authenticate("PLAIN", [plain_token("alice", f"guess-{i}")])
            else:
                scram = ScramClient(["SCRAM-SHA-512"], SCRAM_USER, f"guess-{i}")
                [first] = client.authenticate("SCRAM-SHA-512", [scram.get_client_first().encode()])
                scram.set_server_first(first.auth_bytes.decode())
                answer = client.request(36, 2, {"auth_bytes": scram.get_client_final().encode()})
            assert answer.error_code.value == SASL_AUTHENTICATION_FAILED
    still_serves(secured_broker)

