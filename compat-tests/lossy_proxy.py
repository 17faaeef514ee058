"""A TCP proxy in front of a broker that loses some Produce responses, so clients must retry.

Each client connection gets its own upstream connection. Frames from the client are parsed only to
remember which correlation ids are Produce requests; when the broker's response to every `every`-th
Produce arrives, the proxy drops it and closes both sides, exactly as if the network lost the reply
after the broker had appended the batch. An idempotent producer must then retry, and the broker must
recognise the retry.
"""

from __future__ import annotations

import socket
import struct
import threading
from dataclasses import dataclass, field

_HEADER = struct.Struct(">ihhi")  # size, api_key, api_version, correlation_id


@dataclass
class LossyProxy:
    upstream: tuple[str, int]
    every: int = 3
    port: int = 0
    dropped: int = 0
    forwarded_produce: int = 0
    _listener: socket.socket | None = None
    _threads: list[threading.Thread] = field(default_factory=list)
    _closing: bool = False
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _produce_seen: int = 0

    def start(self) -> LossyProxy:
        self._listener = socket.create_server(("127.0.0.1", self.port))
        self.port = self._listener.getsockname()[1]
        t = threading.Thread(target=self._accept, daemon=True)
        t.start()
        self._threads.append(t)
        return self

    def close(self) -> None:
        self._closing = True
        if self._listener is not None:
            self._listener.close()

    def _accept(self) -> None:
        assert self._listener is not None
        while not self._closing:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            produce_ids: set[int] = set()
            for target in (self._client_to_server, self._server_to_client):
                t = threading.Thread(target=target, args=(client, server, produce_ids), daemon=True)
                t.start()

    @staticmethod
    def _read_frame(sock: socket.socket) -> bytes | None:
        head = b""
        while len(head) < 4:
            chunk = sock.recv(4 - len(head))
            if not chunk:
                return None
            head += chunk
        (size,) = struct.unpack(">i", head)
        body = bytearray()
        while len(body) < size:
            chunk = sock.recv(min(size - len(body), 1 << 20))
            if not chunk:
                return None
            body += chunk
        return head + bytes(body)

    def _client_to_server(self, client: socket.socket, server: socket.socket, produce_ids: set[int]) -> None:
        try:
            while True:
                frame = self._read_frame(client)
                if frame is None:
                    break
                _, api_key, _, correlation_id = _HEADER.unpack_from(frame)
                if api_key == 0:
                    produce_ids.add(correlation_id)
                server.sendall(frame)
        except OSError:
            pass
        finally:
            _close(client, server)

    def _server_to_client(self, client: socket.socket, server: socket.socket, produce_ids: set[int]) -> None:
        try:
            while True:
                frame = self._read_frame(server)
                if frame is None:
                    break
                (correlation_id,) = struct.unpack_from(">i", frame, 4)
                if correlation_id in produce_ids:
                    produce_ids.discard(correlation_id)
                    with self._lock:
                        self._produce_seen += 1
                        drop = self._produce_seen % self.every == 0
                        if drop:
                            self.dropped += 1
                        else:
                            self.forwarded_produce += 1
                    if drop:
                        break  # the reply is lost and the connection with it
                client.sendall(frame)
        except OSError:
            pass
        finally:
            _close(client, server)


def _close(*socks: socket.socket) -> None:
    for s in socks:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        s.close()
