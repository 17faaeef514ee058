"""A TLS listener's connection counts against max.connections from accept, handshake or not (Kafka's Acceptor
counts it before its SslTransportLayer handshakes), and a handshake that does not go on is closed after
connections.max.idle.ms (Kafka's Selector expires a channel idle that long, handshaking or not).

Real `samsa serve` processes on 127.0.0.1 with an SSL listener; stopped by PID.
"""

from __future__ import annotations

import select
import socket
import ssl
import struct
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from samsa.broker import launcher
from samsa.broker.security.dev_ca import issue, make_ca
from samsa.broker.wire import build
from samsa.kproto.messages import encode_request, request_class

REPO = Path(__file__).resolve().parents[2]
CLIENT_IP = "127.0.0.2"  # where the quota test's connections come from
SETTLE_S = 30.0  # how long the broker gets to act on what a test did (generous: the machine is shared)


@contextmanager
def broker_with_ssl(tmp_path: Path, *overrides: str) -> Iterator[tuple[int, int, Path]]:
    """(PLAINTEXT port, SSL port, CA file) of a broker with one SSL listener."""
    ca = make_ca(tmp_path / "tls")
    files = issue(tmp_path / "tls", "broker", "localhost")
    plain, ssl_port = launcher.free_ports(2)
    options = launcher.ServeOptions(data_dir=tmp_path / "data", port=plain, overrides=(
        f"listeners=PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{ssl_port}",
        "ssl.keystore.type=PEM", f"ssl.keystore.location={files.key_and_chain}", *overrides))
    process = launcher.start_serve(options, tmp_path / "samsa.log", cwd=REPO)
    try:
        process.wait_listening(60)
        yield plain, ssl_port, ca
    finally:
        process.stop()


def api_versions(sock: socket.socket, correlation_id: int) -> bool:
    """Whether `sock` answers an ApiVersions (False: the broker closed it)."""
    try:
        sock.sendall(encode_request(build(request_class(18, 0), {}), correlation_id=correlation_id,
                                    client_id="handshake-bounds"))
        head = sock.recv(8)
    except (ConnectionResetError, BrokenPipeError):
        return False
    return len(head) == 8 and struct.unpack_from(">i", head, 4)[0] == correlation_id


def closed_by_broker(sock: socket.socket) -> bool:
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True


def tls_client(ca: Path) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(ca))
    context.check_hostname = False
    return context


def connect_from(port: int, source_ip: str = CLIENT_IP) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.bind((source_ip, 0))
    sock.connect(("127.0.0.1", port))
    return sock


def test_a_connection_in_its_tls_handshake_counts_against_the_connection_quotas(tmp_path: Path) -> None:
    # (The per-address quota of one client address, so the launcher's own probe from 127.0.0.1 counts elsewhere.)
    with broker_with_ssl(tmp_path, f"max.connections.per.ip.overrides={CLIENT_IP}:2") as (plain, ssl_port, ca):
        # Three TCP connections to the SSL listener that never send a ClientHello: the broker closes one of
        # them at once, the two others hold both places...
        stalled = [connect_from(ssl_port) for _ in range(3)]
        try:
            readable, _, _ = select.select(stalled, [], [], SETTLE_S)
            assert readable, "connections still in their TLS handshake were not counted"
            refused = readable[0]
            assert closed_by_broker(refused)
            stalled.remove(refused)
            refused.close()
            extra = connect_from(plain)  # ...so a connection to another listener is refused as well
            with extra:
                assert not api_versions(extra, 1)
            # ...and one ending frees its place: a TLS client gets it and is served.
            stalled.pop().close()
            deadline = time.monotonic() + SETTLE_S
            while True:
                raw = connect_from(ssl_port)
                try:
                    with tls_client(ca).wrap_socket(raw, server_hostname="localhost") as client:
                        if api_versions(client, 2):
                            break
                except (ssl.SSLError, OSError):
                    raw.close()
                assert time.monotonic() < deadline, "the place of a closed connection was never given back"
                time.sleep(0.05)
        finally:
            for s in stalled:
                s.close()


def test_a_stalled_tls_handshake_is_closed_after_connections_max_idle_ms(tmp_path: Path) -> None:
    with broker_with_ssl(tmp_path, "connections.max.idle.ms=1500") as (_plain, ssl_port, ca):
        stalled = socket.create_connection(("127.0.0.1", ssl_port), timeout=SETTLE_S)
        with stalled:
            assert closed_by_broker(stalled)  # nothing sent: closed once idle that long, not held for ever
        # A client that handshakes is served as before.
        raw = socket.create_connection(("127.0.0.1", ssl_port), timeout=10)
        with tls_client(ca).wrap_socket(raw, server_hostname="localhost") as client:
            assert api_versions(client, 3)
