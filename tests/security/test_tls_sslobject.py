"""broker/security/tls.py's DirectSSLObject: a listener's TLS objects read through the C methods, with ssl.SSLObject's
behaviour (a handshake, records both ways, reads into a buffer or as bytes, pending, want-read)."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from samsa.broker.config import BrokerConfig
from samsa.broker.security.dev_ca import issue, make_ca
from samsa.broker.security.tls import DirectSSLObject, listener_key_reader, server_context


@pytest.fixture(scope="module")
def ca(tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("ca")
    make_ca(directory)
    issue(directory, "server", "localhost")
    return directory


def _pair(ca: Path) -> tuple[ssl.SSLObject, ssl.MemoryBIO, ssl.SSLObject, ssl.MemoryBIO]:
    """A client and a listener's server SSLObject over memory BIOs, handshaken; (client, its outgoing BIO,
    server, its incoming BIO)."""
    config = BrokerConfig(overrides={"ssl.keystore.type": "PEM", "ssl.keystore.location": str(ca / "server.pem")},
                          listen_host="127.0.0.1", listen_port=9092, advertised_host="localhost", advertised_port=9092)
    server_ctx = server_context(listener_key_reader(config.get, "SSL"))
    client_ctx = ssl.create_default_context(cafile=str(ca / "ca.pem"))
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    client = client_ctx.wrap_bio(c_in, c_out, server_hostname="localhost")
    server = server_ctx.wrap_bio(s_in, s_out, server_side=True)
    for _ in range(10):
        for side in (client, server):
            try:
                side.do_handshake()
            except ssl.SSLWantReadError:
                pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
    assert client.version() == server.version() == "TLSv1.3"
    return client, c_out, server, s_in


def test_a_listeners_tls_objects_read_through_the_c_methods(ca: Path) -> None:
    client, c_out, server, s_in = _pair(ca)
    assert isinstance(server, DirectSSLObject)
    # The instance's read and pending are the C object's (no Python frame per TLS record), not ssl.py's.
    assert type(server.read).__name__ == "builtin_function_or_method"
    assert type(server.pending).__name__ == "builtin_function_or_method"
    with pytest.raises(ssl.SSLWantReadError):
        server.read(1024)  # nothing received yet
    for chunk in (b"a" * 2000, b"b" * 3000):  # two TLS records
        client.write(chunk)
    wire = c_out.read()
    s_in.write(wire[:-10])  # the second record not yet whole
    buffer = bytearray(8192)
    assert server.read(8192, buffer) == 2000 and bytes(buffer[:2000]) == b"a" * 2000
    assert server.pending() == 0
    with pytest.raises(ssl.SSLWantReadError):
        server.read(8192, buffer)
    s_in.write(wire[-10:])
    assert server.read(100) == b"b" * 100  # bytes when no buffer is given
    assert server.pending() == 2900
    assert server.read(8192) == b"b" * 2900
