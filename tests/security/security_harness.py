"""A secured Samsa broker for the security tests: test certificates made in tmp_path, four listeners.

PLAINTEXT (the --listen port, for setup), SSL (a client certificate required, principal from its DN),
SASL_PLAINTEXT (PLAIN from the JAAS config, and SCRAM) and SASL_SSL (SCRAM-SHA-512, SCRAM-SHA-256, PLAIN).
The broker is a real `samsa serve` process on 127.0.0.1, stopped by its PID.
"""

from __future__ import annotations

import socket
import ssl
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from samsa.broker import launcher
from samsa.broker.client import Connection
from samsa.broker.security.dev_ca import IssuedFiles, issue, make_ca
from samsa.broker.security.scram import ScramMechanism, credential_from_password, salted_password
from samsa.broker.wire import build
from samsa.kproto.messages import decode_response, encode_request, request_class

REPO = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 60.0

PLAIN_USERS = {"admin": "admin-secret", "alice": "alice-secret"}
SCRAM_USER, SCRAM_PASSWORD = "scram-user", "scram-secret"
REAUTH_MS = 1500


@dataclass
class Certificates:
    directory: Path
    ca: Path
    broker: IssuedFiles
    client: IssuedFiles


@dataclass
class SecuredBroker:
    process: launcher.ServeProcess
    certs: Certificates
    ports: dict[str, int]  # listener name -> port
    log_path: Path

    def bootstrap(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    directory = tmp_path_factory.mktemp("certs")
    ca = make_ca(directory)
    broker = issue(directory, "broker", "broker.samsa.test", organization="Samsa")
    client = issue(directory, "client", "client-app", organization="Acme")
    return Certificates(directory, ca, broker, client)


def jaas_plain(users: dict[str, str]) -> str:
    entries = " ".join(f'user_{name}="{password}"' for name, password in users.items())
    return f'org.apache.kafka.common.security.plain.PlainLoginModule required {entries};'


def upsert_scram(port: int, user: str, password: str, mechanism: ScramMechanism, iterations: int = 4096) -> object:
    """AlterUserScramCredentials over the PLAINTEXT listener, as kafka-configs.sh sends it."""
    salt = credential_from_password(mechanism, password, iterations).salt
    with Connection("127.0.0.1", port, client_id="security-tests") as admin:
        return admin.request(51, {"deletions": (), "upsertions": [{
            "name": user, "mechanism": int(mechanism), "iterations": iterations, "salt": salt,
            "salted_password": salted_password(mechanism, password, salt, iterations)}]})


@pytest.fixture(scope="session")
def secured_broker(tmp_path_factory: pytest.TempPathFactory, certs: Certificates) -> Iterator[SecuredBroker]:
    directory = tmp_path_factory.mktemp("secured-broker")
    plain, ssl_port, sasl_plain, sasl_ssl, reauth = launcher.free_ports(5)
    ports = {"PLAINTEXT": plain, "SSL": ssl_port, "SASL_PLAINTEXT": sasl_plain, "SASL_SSL": sasl_ssl, "REAUTH": reauth}
    overrides = (
        f"listeners=PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{ssl_port},"
        f"SASL_PLAINTEXT://127.0.0.1:{sasl_plain},SASL_SSL://127.0.0.1:{sasl_ssl},REAUTH://127.0.0.1:{reauth}",
        # REAUTH: a listener of a custom name (SASL_PLAINTEXT, PLAIN only) whose sessions last REAUTH_MS (KIP-368)
        "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,"
        "SASL_SSL:SASL_SSL,REAUTH:SASL_PLAINTEXT",
        f"listener.name.reauth.connections.max.reauth.ms={REAUTH_MS}",
        "listener.name.reauth.sasl.enabled.mechanisms=PLAIN",
        f"listener.name.reauth.plain.sasl.jaas.config={jaas_plain(PLAIN_USERS)}",
        "ssl.keystore.type=PEM", f"ssl.keystore.location={certs.broker.key_and_chain}",
        "ssl.truststore.type=PEM", f"ssl.truststore.location={certs.ca}",
        "listener.name.ssl.ssl.client.auth=required",
        "sasl.enabled.mechanisms=PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        f"listener.name.sasl_plaintext.plain.sasl.jaas.config={jaas_plain(PLAIN_USERS)}",
        f"listener.name.sasl_ssl.plain.sasl.jaas.config={jaas_plain(PLAIN_USERS)}",
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
    broker = SecuredBroker(process, certs, ports, log_path)
    try:
        for mechanism in ScramMechanism:
            upsert_scram(plain, SCRAM_USER, SCRAM_PASSWORD, mechanism)
        yield broker
    finally:
        process.stop()


EXPECTED_PRINCIPALS = {"SSL": "User:CN=client-app,O=Acme", "SASL_SSL": f"User:{SCRAM_USER}",
                       "SASL_PLAINTEXT": "User:alice"}


def create_topic(broker: SecuredBroker, prefix: str) -> str:
    """A new one-partition topic named after `prefix`, created over the PLAINTEXT listener."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    with Connection("127.0.0.1", broker.ports["PLAINTEXT"]) as admin:
        r = admin.request(19, {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1,
                                           "assignments": (), "configs": ()}], "timeout": 30_000,
                               "validate_only": False})
    assert r.topics[0].error_code.value == 0
    return name


def confluent_round_trip(bootstrap: str, security: dict[str, Any], topic: str, prefix: str, records: int,
                         *, commit: bool = False) -> None:
    """confluent-kafka produces `records` values to `topic` and a group consumer reads them all back."""
    from confluent_kafka import Consumer, Producer

    producer = Producer({"bootstrap.servers": bootstrap, "client.id": topic, **security})
    delivered: list[Any] = []
    for i in range(records):
        producer.produce(topic, f"{prefix}-{i}".encode(), on_delivery=lambda err, msg: delivered.append(err))
    assert producer.flush(30) == 0
    assert delivered == [None] * records
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{topic}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False, **security})
    consumer.subscribe([topic])
    values: list[bytes] = []
    for _ in range(60):
        message = consumer.poll(1.0)
        if message is None:
            continue
        assert message.error() is None, message.error()
        values.append(message.value())
        if len(values) == records:
            break
    if commit:
        consumer.commit(asynchronous=False)
    consumer.close()
    assert values == [f"{prefix}-{i}".encode() for i in range(records)]


def logged_principals(broker: SecuredBroker, client_id: str, api: str = "Produce") -> set[tuple[str, str]]:
    """(principal, listener) of the request log's lines for `api` requests from `client_id`."""
    found: set[tuple[str, str]] = set()
    for line in broker.log().splitlines():
        if f"api={api} " in line and f'client_id="{client_id}"' in line:
            fields = dict(part.split("=", 1) for part in line.split() if "=" in part and not part.startswith('"'))
            found.add((fields.get("principal", ""), fields.get("listener", "")))
    return found


class RawClient:
    """A bare Kafka connection: frames built from kio entities, no negotiation, so each test chooses what
    goes first on the wire."""

    def __init__(self, port: int, *, tls: ssl.SSLContext | None = None, timeout_s: float = 10.0) -> None:
        sock = socket.create_connection(("127.0.0.1", port), timeout=timeout_s)
        self.sock: socket.socket = tls.wrap_socket(sock, server_hostname="localhost") if tls is not None else sock
        self._correlation_id = 0

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def send(self, api_key: int, version: int, values: dict[str, Any]) -> None:
        self._correlation_id += 1
        request = build(request_class(api_key, version), values)
        self.sock.sendall(encode_request(request, correlation_id=self._correlation_id, client_id="raw"))

    def request(self, api_key: int, version: int, values: dict[str, Any]) -> Any:
        self.send(api_key, version, values)
        frame = self.recv_frame()
        assert frame is not None, f"the broker closed the connection instead of answering api_key {api_key}"
        return decode_response(api_key, version, frame)[1]

    def recv_frame(self) -> bytes | None:
        """One frame's payload, or None if the broker closed the connection."""
        head = self._recv_exact(4)
        if head is None:
            return None
        return self._recv_exact(int.from_bytes(head, "big"))

    def _recv_exact(self, n: int) -> bytes | None:
        data = b""
        while len(data) < n:
            try:
                chunk = self.sock.recv(n - len(data))
            except (ConnectionResetError, ssl.SSLError):
                return None
            if not chunk:
                return None
            data += chunk
        return data

    def closed_by_broker(self) -> bool:
        """Whether the broker closes the connection (reads until EOF, within the socket timeout)."""
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return True
        except (ConnectionResetError, BrokenPipeError, ssl.SSLError):
            return True
        except TimeoutError:
            return False

    def authenticate(self, mechanism: str, tokens: list[bytes]) -> list[Any]:
        """SaslHandshake v1 then one SaslAuthenticate v2 per token; the responses."""
        handshake = self.request(17, 1, {"mechanism": mechanism})
        assert handshake.error_code.value == 0, handshake
        return [self.request(36, 2, {"auth_bytes": token}) for token in tokens]
