"""One client connection as an asyncio Protocol: frames in, responses out in request order, one request at a time.

Like Kafka's SocketServer, a connection is "muted" while a request is handled: while one waits (a
long-poll Fetch, an acks=all Produce, a request forwarded to the controller) the connection stops
reading, so it holds at most that request plus one receive buffer, and responses always leave in
request order however many requests a client pipelines.  A broken frame or a request the dispatcher
rejects with ProtocolError closes only this connection.

Most requests are answered without waiting: `dispatch` returns the response at once and it is
written without a task.  Only when `dispatch` returns an awaitable does the connection start a task
for it, and that task's completion writes the response and reads on.  Responses of the requests
found in one receive buffer are written together (one writev), up to WRITE_BATCH_BYTES.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Awaitable, Callable
from typing import cast

from samsa.kproto.errors import ProtocolError
from samsa.kproto.framing import FrameReader

logger = logging.getLogger(__name__)

# Before a client has sent one valid request, frames are capped small (Kafka's SaslServer applies a
# similar limit before authentication), so a port scanner or a TLS hello cannot make us buffer 100 MiB.
UNAUTHENTICATED_MAX_FRAME_BYTES = 1024 * 1024
# Responses produced from one receive buffer are held back and written with one writev, up to this
# much; past it they go out at once, so a pipelined run of Fetch requests never piles up responses.
WRITE_BATCH_BYTES = 256 * 1024

Buffer = bytes | bytearray | memoryview
# A response frame as one buffer or as parts to write in order; None for a request without one (acks=0).
Response = bytes | list[Buffer] | None
# Answers one request frame (payload without its size prefix) from a client host: the response now,
# or an awaitable of it when the request must wait. Raises ProtocolError for a request that breaks
# the protocol; the connection is then closed.
Dispatch = Callable[[bytes, str], Response | Awaitable[Response]]


class KafkaConnection(asyncio.Protocol):
    """Reads frames, answers them strictly one at a time, pauses reading while a request waits."""

    def __init__(self, dispatch: Dispatch, *, max_frame_bytes: int, registry: set[KafkaConnection]) -> None:
        self._dispatch = dispatch
        self._max_frame_bytes = max_frame_bytes  # socket.request.max.bytes, after the first valid request
        self._registry = registry
        self._reader = FrameReader(UNAUTHENTICATED_MAX_FRAME_BYTES)
        self._transport: asyncio.Transport | None = None
        self._client_host = "unknown"
        self._waiting: asyncio.Future[Response] | None = None  # the request in progress, if it had to wait
        self._write_paused = False  # the transport's buffer is above its high-water mark
        self._reading_paused = False
        self._eof = False  # the client shut down its side; close once what it sent is answered
        self._closed = False

    # --- asyncio.Protocol callbacks ------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # A stream transport (uvloop's do not subclass asyncio.Transport, so no isinstance check).
        self._transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self._client_host = str(peer[0]) if isinstance(peer, tuple) else str(peer)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass  # the peer already went away; the connection ends on its own
        self._registry.add(self)

    def data_received(self, data: bytes) -> None:
        self._reader.feed(data)
        self._process()

    def eof_received(self) -> bool:
        self._eof = True
        self._process()
        return True  # keep the transport: we close it ourselves once the pending request is answered

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._registry.discard(self)
        if self._waiting is not None:
            self._waiting.cancel()
            self._waiting = None

    def pause_writing(self) -> None:
        self._write_paused = True
        self._pause_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._waiting is None:
            self._resume_reading()
            self._process()

    # --- the request loop ----------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection; responses already written are still flushed."""
        if self._closed:
            return
        self._closed = True
        self._registry.discard(self)
        if self._waiting is not None:
            self._waiting.cancel()
            self._waiting = None
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        """Drop the connection at once (server shutdown)."""
        self.close()
        if self._transport is not None:
            self._transport.abort()

    def _process(self) -> None:
        """Answer the whole frames buffered so far, in order, until one has to wait."""
        out: list[Buffer] = []
        out_bytes = 0
        while self._waiting is None and not self._write_paused and not self._closed:
            try:
                payload = self._reader.next_frame()
                if payload is None:
                    break
                answer = self._dispatch(payload, self._client_host)
            except ProtocolError as e:
                # What was answered before the broken frame still goes out, as if sent one by one.
                self._flush(out)
                self._close_for(e)
                return
            except Exception:
                self._flush(out)
                logger.exception("internal error handling a request from %s; closing the connection",
                                 self._client_host)
                self.close()
                return
            if answer is None or isinstance(answer, (bytes, list)):
                self._reader.max_frame_bytes = self._max_frame_bytes
                if answer is None:
                    continue
                if isinstance(answer, bytes):
                    out.append(answer)
                    out_bytes += len(answer)
                else:
                    out.extend(answer)
                    out_bytes += sum(len(part) for part in answer)
                if out_bytes >= WRITE_BATCH_BYTES:
                    self._flush(out)
                    out = []
                    out_bytes = 0
                continue
            # It has to wait: mute the connection until it is answered.
            self._pause_reading()
            waiting = asyncio.ensure_future(answer)
            self._waiting = waiting
            waiting.add_done_callback(self._answered)
        self._flush(out)
        if self._eof and self._waiting is None and not self._write_paused:
            self.close()

    def _answered(self, waiting: asyncio.Future[Response]) -> None:
        if waiting is not self._waiting:
            return  # cancelled by close() or connection_lost()
        self._waiting = None
        if waiting.cancelled():
            self.close()
            return
        error = waiting.exception()
        if isinstance(error, ProtocolError):
            self._close_for(error)
            return
        if error is not None:
            logger.error("internal error handling a request from %s; closing the connection", self._client_host,
                         exc_info=error)
            self.close()
            return
        answer = waiting.result()
        self._reader.max_frame_bytes = self._max_frame_bytes
        if answer is not None:
            self._flush([answer] if isinstance(answer, bytes) else answer)
        if not self._write_paused:
            self._resume_reading()
        self._process()

    def _flush(self, out: list[Buffer]) -> None:
        if not out or self._transport is None or self._transport.is_closing():
            return
        if len(out) == 1:
            self._transport.write(out[0])
        else:
            self._transport.writelines(out)

    def _close_for(self, error: ProtocolError) -> None:
        logger.info("closing connection from %s: %s", self._client_host, error)
        self.close()

    def _pause_reading(self) -> None:
        if not self._reading_paused and self._transport is not None and not self._transport.is_closing():
            self._reading_paused = True
            self._transport.pause_reading()

    def _resume_reading(self) -> None:
        if self._reading_paused and self._transport is not None and not self._transport.is_closing():
            self._reading_paused = False
            self._transport.resume_reading()
