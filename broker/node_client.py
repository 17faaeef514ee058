"""An asyncio Kafka-protocol client for node-to-node requests (Raft RPCs, broker heartbeats, forwarding).

Like Kafka's NetworkClient for inter-broker traffic: one connection per remote node, opened lazily,
requests pipelined and matched to responses by correlation id. A broken connection fails every
request waiting on it; the next request reconnects. Responses are bounded like any frame we read.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from typing import Any

from samsa.broker.security.client import ClientSecurity as ClientSecurity  # (NodeClient callers name it here)
from samsa.kproto.errors import ProtocolError
from samsa.kproto.framing import FrameReader
from samsa.kproto.messages import decode_response, encode_request

logger = logging.getLogger(__name__)

MAX_RESPONSE_BYTES = 64 * 1024 * 1024
CONNECT_TIMEOUT_S = 2.0
_SIZE = struct.Struct(">i")


class NodeUnavailableError(Exception):
    """The node could not be reached, or the connection broke before the response arrived."""


class NodeClient:
    def __init__(self, host: str, port: int, *, client_id: str, security: ClientSecurity | None = None) -> None:
        """`security`: the TLS and SASL the node's listener requires (None: PLAINTEXT)."""
        self.host = host
        self._security = security
        self.port = port
        self._client_id = client_id
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._connecting: asyncio.Lock = asyncio.Lock()
        self._correlation_id = 0
        # correlation id -> (api key, api version, future of the response, the connection it went out on)
        self._pending: dict[int, tuple[int, int, asyncio.Future[Any], asyncio.StreamWriter]] = {}
        self._closed = False

    async def _connect(self) -> asyncio.StreamWriter:
        async with self._connecting:
            if self._writer is not None and not self._writer.is_closing():
                return self._writer
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(self.host, self.port) if self._security is None
                    else self._security.open(self.host, self.port), CONNECT_TIMEOUT_S)
            except (TimeoutError, OSError) as e:
                raise NodeUnavailableError(f"cannot connect to {self.host}:{self.port}: {e}") from e
            self._writer = writer
            self._reader_task = asyncio.get_running_loop().create_task(self._read_loop(reader, writer))
            return writer

    async def _read_loop(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        frames = FrameReader(MAX_RESPONSE_BYTES)
        error: Exception = NodeUnavailableError(f"connection to {self.host}:{self.port} closed")
        try:
            while True:
                payload = frames.next_frame()
                if payload is None:
                    data = await reader.read(256 * 1024)
                    if not data:
                        break
                    frames.feed(data)
                    continue
                if len(payload) < 4:
                    raise ProtocolError("response shorter than its header")
                (correlation_id,) = _SIZE.unpack_from(payload, 0)
                waiting = self._pending.pop(correlation_id, None)
                if waiting is None:
                    continue  # the caller gave up (timeout); drop the late response
                api_key, api_version, future, _sent_on = waiting
                try:
                    _cid, response = decode_response(api_key, api_version, payload)
                except Exception as e:  # a response we cannot decode poisons only its request
                    if not future.done():
                        future.set_exception(NodeUnavailableError(f"undecodable response: {e}"))
                    continue
                if not future.done():
                    future.set_result(response)
        except (OSError, ProtocolError) as e:
            error = NodeUnavailableError(f"connection to {self.host}:{self.port} failed: {e}")
        except asyncio.CancelledError:
            pass  # close(): fail what waits, in finally
        finally:
            if self._writer is writer:
                self._writer = None
            writer.close()
            # Only the requests sent on this connection: a newer one may already carry others.
            lost = [cid for cid, (_k, _v, _f, sent_on) in self._pending.items() if sent_on is writer]
            for cid in lost:
                future = self._pending.pop(cid)[2]
                if not future.done():
                    future.set_exception(error)

    async def request(self, request: object, *, timeout_s: float) -> Any:
        """Send a kio request entity and return the decoded response entity.

        Raises NodeUnavailableError when the node cannot be reached and asyncio.TimeoutError when no
        answer comes within `timeout_s`.
        """
        if self._closed:
            raise NodeUnavailableError("client closed")
        cls: Any = type(request)
        writer = await self._connect()
        self._correlation_id = (self._correlation_id + 1) & 0x7FFFFFFF
        cid = self._correlation_id
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[cid] = (int(cls.__api_key__), int(cls.__version__), future, writer)
        try:
            writer.write(encode_request(request, correlation_id=cid, client_id=self._client_id))
            return await asyncio.wait_for(future, timeout_s)
        except TimeoutError:  # before OSError, of which it is a subclass
            # Like Kafka's NetworkClient: a request that times out takes its connection down, and the
            # next request connects afresh. After a network partition heals, a new connection works at
            # once, where the old one waits out TCP's retransmission back-off (seconds, doubling); the
            # requests still waiting on it fail with NodeUnavailableError and are retried by their callers.
            if self._writer is writer:
                logger.info("no answer from %s:%d within %.1f s; reconnecting", self.host, self.port, timeout_s)
                self._writer = None
                writer.close()
            raise
        except OSError as e:
            raise NodeUnavailableError(f"sending to {self.host}:{self.port} failed: {e}") from e
        finally:
            self._pending.pop(cid, None)

    async def close(self) -> None:
        self._closed = True
        if self._reader_task is not None:
            self._reader_task.cancel()
            try:
                await self._reader_task
            except (asyncio.CancelledError, Exception):
                pass  # the reader's own end is of no interest once we close
        if self._writer is not None:
            self._writer.close()
