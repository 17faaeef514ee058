"""A small blocking Kafka client for the command-line tools and tests: one request at a time.

It speaks to any broker (Samsa or Kafka): versions are negotiated with ApiVersions, requests are
built with kio through `broker.wire.build`, and produce/fetch go to each partition's leader.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from samsa.broker.wire import build
from samsa.kproto.messages import decode_response, encode_request, request_class

if TYPE_CHECKING:
    from samsa.broker.security.client import ClientSecurity

_SIZE = struct.Struct(">i")
# Versions past these name topics by id in ways the tools don't fill in (Produce v13, OffsetCommit and OffsetFetch
# v10, which Kafka 4.4 advertises: topic_id).
CLIENT_MAX_VERSIONS = {0: 12, 8: 9, 9: 9}


class KafkaClientError(Exception):
    pass


class Connection:
    def __init__(self, host: str, port: int, *, client_id: str = "samsa-cli", timeout_s: float = 30.0,
                 security: ClientSecurity | None = None) -> None:
        """`security`: the listener's TLS and SASL (broker/security/client.py), None for PLAINTEXT."""
        sock = socket.create_connection((host, port), timeout=timeout_s)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if security is not None and security.ssl_context is not None:
            try:
                sock = security.ssl_context.wrap_socket(sock, server_hostname=host)
            except BaseException:
                sock.close()
                raise
        self._sock = sock
        self._client_id = client_id
        self._correlation_id = 0
        self.versions: dict[int, tuple[int, int]] = {}
        self._negotiate()
        if security is not None and security.mechanism:
            self._authenticate(security)

    def _authenticate(self, security: ClientSecurity) -> None:
        """SaslHandshake v1, then SaslAuthenticate until the mechanism is done (KIP-152)."""
        handshake = self.request(17, {"mechanism": security.mechanism}, version=1)
        if handshake.error_code.value != 0:
            raise KafkaClientError(f"the broker does not enable SASL mechanism {security.mechanism} on this "
                                   f"listener (it offers {', '.join(handshake.mechanisms) or 'none'})")
        step = security.client_steps()
        token = step(None)
        while token is not None:
            answer = self.request(36, {"auth_bytes": token})
            if answer.error_code.value != 0:
                raise KafkaClientError(f"SASL authentication as {security.username} failed: {answer.error_message}")
            token = step(bytes(answer.auth_bytes))

    def close(self) -> None:
        self._sock.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _recv_exact(self, n: int) -> bytes:
        chunks = []
        while n:
            chunk = self._sock.recv(min(n, 1 << 20))
            if not chunk:
                raise KafkaClientError("connection closed by the broker")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def send_raw(self, frame: bytes) -> None:
        self._sock.sendall(frame)

    def recv_frame(self) -> bytes:
        (size,) = _SIZE.unpack(self._recv_exact(4))
        return self._recv_exact(size)

    def request(self, api_key: int, values: Mapping[str, Any], *, version: int | None = None,
                expect_response: bool = True) -> Any:
        if version is None:
            version = self.pick_version(api_key)
        cls = request_class(api_key, version)
        self._correlation_id += 1
        self.send_raw(encode_request(build(cls, values), correlation_id=self._correlation_id,
                                     client_id=self._client_id))
        if not expect_response:
            return None
        correlation_id, response = decode_response(api_key, version, self.recv_frame())
        if correlation_id != self._correlation_id:
            raise KafkaClientError(f"correlation id {correlation_id}, expected {self._correlation_id}")
        return response

    def pick_version(self, api_key: int) -> int:
        from samsa.kproto.messages import kio_version_range

        ours = kio_version_range(api_key)
        theirs = self.versions.get(api_key)
        if ours is None or theirs is None:
            raise KafkaClientError(f"the broker does not support api key {api_key}")
        low, high = max(ours[0], theirs[0]), min(ours[1], theirs[1], CLIENT_MAX_VERSIONS.get(api_key, ours[1]))
        if low > high:
            raise KafkaClientError(f"no common version for api key {api_key}")
        return high

    def _negotiate(self) -> None:
        response = self.request(18, {"client_software_name": "samsa-cli", "client_software_version": "0.1"},
                                version=3)
        if response.error_code.value != 0:
            response = self.request(18, {}, version=0)
        self.versions = {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}
