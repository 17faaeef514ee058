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

A response part may be a FileRecords slice of a segment (a large Fetch answer, broker/handlers/fetch.py):
it is read in chunks of up to SEND_CHUNK_BYTES as the socket drains: one chunk is written, the next
is read once the transport has handed everything to the kernel (the transport's write limits are set
to pause at any buffered byte while a slice is sent, so resume_writing means "empty"). A fast reader
costs one pread and one write per MiB, as when the bytes were read whole; a slow reader holds one
chunk, not its response. The connection reads no further request until the whole response has gone,
as Kafka's Selector mutes a channel while its response is being sent.

Not os.sendfile: measured here (Linux 6.18, loopback, page-cached segment) a 1 MiB sendfile to the
socket took ~390 us against ~110 us for pread + writev, and the broker used more CPU per GiB served;
the chunks bound memory just as well.

Bounds shared by every connection of a listener (broker/connection_quotas.py): a connection over
max.connections / max.connections.per.ip / max.connection.creation.rate is closed as soon as it is
made (on a TLS listener too: it is accepted as TCP, counted, then put through its TLS handshake, as
Kafka's Acceptor counts a connection before its handshake); a request needs one of queued.max.requests
slots (requests read but not yet answered) and its frame a reservation from the queued.max.request.bytes
pool when that is set, else the connection stops reading until one is released; and a connection idle for
connections.max.idle.ms (nothing read or written, no request in progress) is closed.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import threading
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Protocol, cast

from samsa.broker.connection_quotas import ConnectionQuotas, RequestQueue
from samsa.broker.security.tls import server_tls_protocol
from samsa.kproto.errors import ProtocolError
from samsa.kproto.framing import PREALLOCATE_BYTES, FrameBuffer, ReceiveBuffers
from samsa.storage.file_records import FileRecords

logger = logging.getLogger(__name__)

# Before a client has sent one valid request, frames are capped small (Kafka's SaslServer applies a
# similar limit before authentication), so a port scanner or a TLS hello cannot make us buffer 100 MiB.
UNAUTHENTICATED_MAX_FRAME_BYTES = 1024 * 1024
# Responses produced from one receive buffer are held back and written with one writev, up to this
# much; past it they go out at once, so a pipelined run of Fetch requests never piles up responses.
WRITE_BATCH_BYTES = 256 * 1024
# A FileRecords slice is read and written this much at a time: a consumer's usual 1 MiB partition
# fetch in one pread and one write, and at most this much held for a reader that does not read.
SEND_CHUNK_BYTES = 1024 * 1024
# Receives go into one buffer shared by the connections of an event loop (kproto.framing.FrameBuffer), as big
# as uvloop's own read buffer and its TLS transport's largest read.
RECEIVE_BYTES = 256 * 1024
_receive = threading.local()  # a loop runs in one thread: its connections share that thread's buffers


def _receive_buffers() -> ReceiveBuffers:
    shared: ReceiveBuffers | None = getattr(_receive, "buffers", None)
    if shared is None:
        shared = _receive.buffers = ReceiveBuffers(RECEIVE_BYTES)
    return shared

Buffer = bytes | bytearray | memoryview
Part = Buffer | FileRecords  # what a response's parts can be (encode_response_parts keeps FileRecords by reference)
# A response frame as one buffer or as parts to write in order; None for a request without one (acks=0).
Response = bytes | list[Buffer] | None
# Answers one request frame (payload without its size prefix) from a client host: the response now,
# or an awaitable of it when the request must wait. Raises ProtocolError for a request that breaks
# the protocol; the connection is then closed.
Dispatch = Callable[[bytes, str], Response | Awaitable[Response]]
# One answered request's phases (api key, then seconds in the request queue, local, remote, response send).
_Timing = tuple[int, float, float, float, float]


class PhaseRecorder(Protocol):
    """Where the connection reports each request's phases (observability.request_metrics.RequestMetrics)."""

    def record_phases(self, api_key: int, queue_s: float, local_s: float, remote_s: float, send_s: float
                      ) -> None: ...


class KafkaConnection(asyncio.BufferedProtocol):
    """Reads frames, answers them strictly one at a time, pauses reading while a request waits.

    A BufferedProtocol: the transport receives into our buffers (plain TCP: recv_into; TLS: the SSL object
    decrypts into them), so a frame costs one copy however many reads or TLS records it spans."""

    def __init__(self, dispatch: Dispatch, *, max_frame_bytes: int, registry: set[KafkaConnection],
                 quotas: ConnectionQuotas | None = None, request_queue: RequestQueue | None = None,
                 connections_max_idle_ms: int | None = None, listener: str = "PLAINTEXT",
                 request_metrics: PhaseRecorder | None = None, authenticate_max_frame_bytes: int | None = None,
                 ssl_context: ssl.SSLContext | None = None) -> None:
        self.listener = listener  # the listener's name, as Kafka's socket-server metrics label it
        self.peer = "unknown"  # host:port of the client (the request log names it)
        self._dispatch = dispatch
        self._max_frame_bytes = max_frame_bytes  # socket.request.max.bytes, after the first valid request
        self._registry = registry
        self._quotas = quotas
        self._counted = False  # counted in self._quotas (released once when the connection ends)
        self._queue = request_queue
        self._holds_slot = False  # one of queued.max.requests while a request waits for its answer
        self._reserved_bytes = 0  # from queued.max.request.bytes for the frame being read or answered
        self._queue_waiting = False  # waiting for the request queue to release a slot or bytes
        self._idle_s = connections_max_idle_ms / 1000 if connections_max_idle_ms is not None else None
        self._idle_timer: asyncio.TimerHandle | None = None
        self._last_active_s = time.monotonic()
        # A SASL listener's connection stays capped at sasl.server.max.receive.size until the client has
        # authenticated (the dispatcher sets `authenticated`); any other after its first valid request.
        self.authenticated = authenticate_max_frame_bytes is None
        self._unauthenticated_max_frame_bytes = min(authenticate_max_frame_bytes or UNAUTHENTICATED_MAX_FRAME_BYTES,
                                                    UNAUTHENTICATED_MAX_FRAME_BYTES)
        self._reader = FrameBuffer(self._unauthenticated_max_frame_bytes, _receive_buffers())
        self._reader.preallocate_bytes = 0  # until authenticated: a frame's buffer grows as its bytes arrive
        self._preallocate = request_queue is None or request_queue.max_bytes <= 0  # not when the pool bounds bytes
        self._transport: asyncio.Transport | None = None
        self._client_host = "unknown"
        self._waiting: asyncio.Future[Response] | None = None  # the request in progress, if it had to wait
        self._write_paused = False  # the transport's buffer is above its high-water mark
        self._reading_paused = False
        self._eof = False  # the client shut down its side; close once what it sent is answered
        self._closed = False
        self._sending: deque[Part] = deque()  # a response with FileRecords parts still going out
        # Request phases (RequestMetrics' docstring says what each one covers), timed when a recorder is given.
        self._phases = request_metrics
        self._received_s = 0.0  # perf_counter() of the last read: a frame in the buffer arrived by then
        self._waiting_timing: tuple[int, float, float, float] | None = None  # key, queue, local, handed back at
        self._sending_timings: list[_Timing] = []  # responses behind a FileRecords slice still going out
        # A TLS listener's connections are accepted as TCP, counted, then upgraded (see connection_made).
        self._ssl_context = ssl_context
        self._handshake: asyncio.Future[None] | None = None  # the TLS handshake's end, while it runs

    # --- asyncio.Protocol callbacks ------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if self._handshake is not None:  # a TLS listener's connection: the handshake is done
            self._handshake = None
            self._transport = cast(asyncio.Transport, transport)
            self._last_active_s = time.monotonic()
            return
        # A stream transport (uvloop's do not subclass asyncio.Transport, so no isinstance check).
        self._transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self._client_host = str(peer[0]) if isinstance(peer, tuple) else str(peer)
        if isinstance(peer, tuple) and len(peer) >= 2:
            host = self._client_host
            self.peer = f"[{host}]:{peer[1]}" if ":" in host else f"{host}:{peer[1]}"  # IPv6 in brackets
        else:
            self.peer = self._client_host
        if self._quotas is not None:
            if not self._quotas.try_accept(self._client_host, int(time.time() * 1000)):
                self._closed = True
                transport.close()
                return
            self._counted = True
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            try:
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            except OSError:
                pass  # the peer already went away; the connection ends on its own
        self._registry.add(self)
        if self._idle_s is not None:
            self._idle_timer = asyncio.get_running_loop().call_later(self._idle_s, self._check_idle)
        if self._ssl_context is not None:
            self._start_tls(asyncio.get_running_loop(), self._ssl_context)

    def _start_tls(self, loop: asyncio.AbstractEventLoop, context: ssl.SSLContext) -> None:
        """Put TLS between the socket and us, now, before the loop reads a byte: a TLS listener accepts
        TCP, so a connection is counted in the quotas from accept, as Kafka counts it (the loop's own TLS
        server would call us only once the handshake is done). The SSL protocol calls connection_made
        again with its transport once the handshake is done.

        Kafka bounds a handshake by connections.max.idle.ms (its Selector expires a channel idle that long,
        handshaking or not), so that is the handshake's timeout here too; with idle connections never
        closed (-1), asyncio's default (60 s) bounds it."""
        raw = self._transport
        assert raw is not None
        waiter: asyncio.Future[None] = loop.create_future()
        tls = server_tls_protocol(loop, self, context, waiter, handshake_timeout_s=self._idle_s or None)
        self._handshake = waiter
        waiter.add_done_callback(self._handshake_ended)
        raw.set_protocol(tls)
        tls.connection_made(raw)

    def _handshake_ended(self, waiter: asyncio.Future[None]) -> None:
        error = None if waiter.cancelled() else waiter.exception()
        if error is None and not waiter.cancelled():
            return  # connection_made had the TLS transport
        if self._handshake is waiter:
            self._handshake = None
        if not self._closed:
            logger.info("closing connection from %s: TLS handshake failed: %s", self._client_host,
                        error or "cancelled")
            self.close()

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self._last_active_s = time.monotonic()
        self._received_s = time.perf_counter()
        reader = self._reader
        reader.buffer_updated(nbytes)
        try:
            self._process()
        finally:
            reader.release()  # what is left of the shared receive buffer moves to ours

    def data_received(self, data: bytes) -> None:
        """Bytes received as an object (a transport that is not buffered, and tests): as if received into
        our buffers."""
        view = memoryview(data)
        while view and not self._closed:
            into = self.get_buffer(len(view))
            n = min(len(into), len(view))
            into[:n] = view[:n]
            into.release()
            view = view[n:]
            self.buffer_updated(n)

    def eof_received(self) -> bool:
        self._eof = True
        self._process()
        return True  # keep the transport: we close it ourselves once the pending request is answered

    def connection_lost(self, exc: Exception | None) -> None:
        self._closed = True
        self._end()

    def pause_writing(self) -> None:
        self._write_paused = True
        self._pause_reading()

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._sending:
            self._pump()
            if self._sending or self._closed:
                return
        if self._waiting is None:
            self._resume_reading()
            self._process()

    def peer_certificate(self) -> bytes | None:
        """The client's TLS certificate (DER), if the listener is TLS and the client presented a verified one."""
        transport = self._transport
        ssl_object = transport.get_extra_info("ssl_object") if transport is not None else None
        if ssl_object is None:
            return None
        der = ssl_object.getpeercert(binary_form=True)
        return bytes(der) if der else None

    # --- the request loop ----------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection; responses already written are still flushed."""
        if self._closed:
            return
        self._closed = True
        self._end()
        if self._transport is not None:
            self._transport.close()

    def abort(self) -> None:
        """Drop the connection at once (server shutdown)."""
        self.close()
        if self._transport is not None:
            self._transport.abort()

    def _end(self) -> None:
        """Give back everything the connection holds (once it is closed)."""
        self._registry.discard(self)
        if self._handshake is not None:
            self._handshake = None  # (its transport is closed below; the SSL protocol ends it)
        if self._counted and self._quotas is not None:
            self._counted = False
            self._quotas.release(self._client_host)
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None
        if self._waiting is not None:
            self._waiting.cancel()
            self._waiting = None
        while self._sending:
            part = self._sending.popleft()
            if type(part) is FileRecords:
                part.close()
        self._release_queue()

    def _process(self) -> None:
        """Answer the whole frames buffered so far, in order, until one has to wait."""
        out: list[Part] = []
        out_bytes = 0
        queue = self._queue
        phases = self._phases
        timed: list[_Timing] | None = [] if phases is not None else None
        begun = done = 0.0
        api_key = -1
        while self._waiting is None and not self._write_paused and not self._closed and not self._sending:
            try:
                # (the attributes, not RequestQueue.full / bytes_bounded: this runs for every frame)
                if queue is not None and (queue.in_flight_count >= queue.max_requests or queue.max_bytes > 0) \
                        and not self._admit(queue):
                    break
                payload = self._reader.next_frame()
                if payload is None:
                    break
                if phases is not None:
                    begun = time.perf_counter()
                answer = self._dispatch(payload, self._client_host)
            except ProtocolError as e:
                # What was answered before the broken frame still goes out, as if sent one by one.
                self._flush(out, timed)
                self._close_for(e)
                return
            except Exception:
                self._flush(out, timed)
                logger.exception("internal error handling a request from %s; closing the connection",
                                 self._client_host)
                self.close()
                return
            if phases is not None:
                done = time.perf_counter()
                api_key = payload[0] << 8 | payload[1]  # the header's first field (it was parsed: >= 2 bytes)
            if answer is None or isinstance(answer, (bytes, list)):
                self._set_frame_limits()
                if self._reserved_bytes:
                    self._release_queue()
                if answer is None:
                    if phases is not None:
                        phases.record_phases(api_key, begun - self._received_s, done - begun, 0.0, 0.0)
                    continue
                if timed is not None:
                    timed.append((api_key, begun - self._received_s, done - begun, 0.0, done))
                if isinstance(answer, bytes):
                    out.append(answer)
                    out_bytes += len(answer)
                else:
                    out.extend(answer)
                    out_bytes += sum(len(part) for part in answer)
                if out_bytes >= WRITE_BATCH_BYTES:
                    self._flush(out, timed)
                    out = []
                    out_bytes = 0
                    timed = [] if phases is not None else None
                continue
            if phases is not None:
                self._waiting_timing = (api_key, begun - self._received_s, done - begun, done)
            # It has to wait: mute the connection until it is answered.
            if queue is not None:
                queue.acquire_request()  # a slot was free, or _admit would have stopped us
                self._holds_slot = True
            self._pause_reading()
            waiting = asyncio.ensure_future(answer)
            self._waiting = waiting
            waiting.add_done_callback(self._answered)
        self._flush(out, timed)
        if self._eof and self._waiting is None and not self._write_paused and not self._sending:
            self.close()

    def _set_frame_limits(self) -> None:
        reader = self._reader
        if self.authenticated:
            reader.max_frame_bytes = self._max_frame_bytes
            if self._preallocate:
                reader.preallocate_bytes = PREALLOCATE_BYTES
        else:
            reader.max_frame_bytes = self._unauthenticated_max_frame_bytes

    def _admit(self, queue: RequestQueue) -> bool:
        """Whether the next frame may be taken: a request slot must be free (queued.max.requests counts
        the requests that wait for their answer; one answered at once is done before the next is read),
        and once its size prefix is in, a bounded pool must grant its size. Else the connection stops
        reading until something is released."""
        if queue.full:
            if self._reader.buffered_bytes == 0:
                return True  # nothing to take anyway
            self._wait_for_queue(queue)
            return False
        if self._reserved_bytes == 0 and queue.bytes_bounded:
            size = self._reader.peek_frame_size()  # FrameError (a ProtocolError) for a broken prefix
            if size is not None and size > 0:
                if not queue.try_reserve_bytes(size):
                    self._wait_for_queue(queue)
                    return False
                self._reserved_bytes = size
        return True

    def _wait_for_queue(self, queue: RequestQueue) -> None:
        self._pause_reading()
        if not self._queue_waiting:
            self._queue_waiting = True
            queue.wait(self._queue_released)

    def _queue_released(self) -> None:
        self._queue_waiting = False
        if self._closed or self._waiting is not None or self._sending:
            return
        if not self._write_paused:
            self._resume_reading()
        self._process()

    def _release_queue(self) -> None:
        queue = self._queue
        if queue is None:
            return
        if self._queue_waiting:
            self._queue_waiting = False
            queue.cancel(self._queue_released)
        if self._reserved_bytes:
            reserved, self._reserved_bytes = self._reserved_bytes, 0
            queue.release_bytes(reserved)
        if self._holds_slot:
            self._holds_slot = False
            queue.release_request()

    def _answered(self, waiting: asyncio.Future[Response]) -> None:
        if waiting is not self._waiting:
            return  # cancelled by close() or connection_lost()
        self._waiting = None
        timing, self._waiting_timing = self._waiting_timing, None
        self._release_queue()
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
        self._set_frame_limits()
        timed: list[_Timing] | None = None
        if timing is not None and self._phases is not None:
            now = time.perf_counter()
            api_key, queue_s, local_s, handed_back_s = timing
            if answer is None:
                self._phases.record_phases(api_key, queue_s, local_s, now - handed_back_s, 0.0)
            else:
                timed = [(api_key, queue_s, local_s, now - handed_back_s, now)]
        if answer is not None:
            self._flush([answer] if isinstance(answer, bytes) else list[Part](answer), timed)
        if not self._write_paused and not self._sending:
            self._resume_reading()
        self._process()

    # --- writing -------------------------------------------------------------------------------

    def _flush(self, out: list[Part], timed: list[_Timing] | None = None) -> None:
        """Write `out`; `timed` holds the phases of the responses in it, their send time still to come."""
        if not out:
            return
        transport = self._transport
        if transport is None or transport.is_closing() or self._closed:
            for part in out:
                if type(part) is FileRecords:
                    part.close()
            return
        self._last_active_s = time.monotonic()
        if self._sending or any(type(part) is FileRecords for part in out):
            if not self._sending and transport.get_extra_info("ssl_object") is None:
                # Pause at any buffered byte while a slice goes out: resume_writing then says the buffer
                # is empty, and the next chunk is read. Not over TLS: asyncio's TLS transport counts only
                # its own buffer, which it hands to the socket's transport at once, and looks at its limits
                # again only on a write or when that transport had paused it; paused at 0 bytes it would
                # never resume (a consumer's Fetch stalled). Its default limits bound it: the socket's
                # transport pauses it past 64 KiB, and then its own buffer holds the next chunk.
                transport.set_write_buffer_limits(high=0, low=0)
            self._sending.extend(out)
            if timed:
                self._sending_timings.extend(timed)
            self._pump()
            return
        if len(out) == 1:
            transport.write(cast(Buffer, out[0]))
        else:
            transport.writelines(cast(list[Buffer], out))
        if timed:
            self._record_sent(timed)

    def _record_sent(self, timed: list[_Timing]) -> None:
        """The responses' last bytes are with the transport: their phases are complete."""
        phases = self._phases
        if phases is None:
            return
        now = time.perf_counter()
        for api_key, queue_s, local_s, remote_s, handed_s in timed:
            phases.record_phases(api_key, queue_s, local_s, remote_s, now - handed_s)

    def _pump(self) -> None:
        """Send the queued parts until the socket is full (resume_writing calls again) or all are sent.
        Buffers before a slice go out in one writev with the slice's next chunk, so a response of a
        header and one chunk of records costs one pread and one writev, as when it was read whole."""
        transport = self._transport
        sending = self._sending
        assert transport is not None
        while sending:
            if self._closed or transport.is_closing():
                return
            batch: list[Buffer] = []
            while sending and type(sending[0]) is not FileRecords:
                batch.append(cast(Buffer, sending.popleft()))
            if sending and not self._write_paused:
                part = cast(FileRecords, sending[0])
                if part.remaining_bytes > 0:
                    try:
                        chunk = part.read_chunk(SEND_CHUNK_BYTES)
                    except OSError as e:
                        logger.info("closing connection from %s: sending a response failed: %s",
                                    self._client_host, e)
                        self.close()
                        return
                    if not chunk:
                        if batch:
                            transport.writelines(batch)
                        self._slice_cut_short(part)
                        return
                    batch.append(chunk)
                if part.remaining_bytes == 0:
                    sending.popleft()
                    part.close()
            if batch:
                transport.writelines(batch)
            if self._write_paused:
                return
        self._last_active_s = time.monotonic()
        transport.set_write_buffer_limits()  # the transport's defaults again
        if self._sending_timings:
            timed, self._sending_timings = self._sending_timings, []
            self._record_sent(timed)

    def _slice_cut_short(self, part: FileRecords) -> None:
        # The segment was truncated under the slice: the frame's announced size cannot be honoured.
        logger.warning("closing connection from %s: a segment shrank while %d bytes of it were being sent",
                       self._client_host, part.remaining_bytes)
        self.close()

    # --- idle connections ----------------------------------------------------------------------

    def _check_idle(self) -> None:
        """connections.max.idle.ms: close a connection with nothing read or written that long and no
        request in progress (Kafka's Selector closes its idle channels the same way)."""
        self._idle_timer = None
        if self._closed or self._idle_s is None:
            return
        now = time.monotonic()
        due = self._last_active_s + self._idle_s
        if now >= due and self._waiting is None and not self._sending:
            logger.debug("closing connection from %s: idle for more than %d ms", self._client_host,
                         round(self._idle_s * 1000))
            self.close()
            return
        delay = due - now if now < due else self._idle_s
        self._idle_timer = asyncio.get_running_loop().call_later(delay, self._check_idle)

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
