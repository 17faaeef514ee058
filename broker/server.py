"""The network shell: anyio listener, one task per connection, requests answered in order.

Like Kafka's SocketServer, a connection is "muted" while its request is handled: the next frame is
read only after the previous response is written, so a client may pipeline requests and always
gets responses in request order, and one connection can hold at most one request plus one receive
buffer of memory.  A broken frame or undecodable request closes only that connection.
"""

from __future__ import annotations

import inspect
import logging
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread

from broker.broker import Broker
from broker.context import RequestContext
from broker.forwarding import FORWARDED_APIS, error_response, forward
from broker.handlers import CONTROLLER_HANDLERS, HANDLERS, api_versions_v0_fallback
from broker.metadata.quorum import NotControllerError
from broker.reassignment import TICK_INTERVAL_S
from kproto.errors import ErrorCode, ProtocolError
from kproto.framing import FrameReader
from kproto.messages import API_VERSIONS_KEY, decode_request, encode_response, parse_request_header

logger = logging.getLogger(__name__)

# Before a client has sent one valid request, frames are capped small (Kafka's SaslServer applies a
# similar limit before authentication), so a port scanner or a TLS hello cannot make us buffer 100 MiB.
UNAUTHENTICATED_MAX_FRAME_BYTES = 1024 * 1024
RECEIVE_CHUNK_BYTES = 256 * 1024
HW_CHECKPOINT_INTERVAL_S = 5.0
FLUSH_CHECK_INTERVAL_S = 1.0
# Followers that caught up rejoin the ISR within this; laggards leave after replica.lag.time.max.ms.
ISR_CHECK_INTERVAL_S = 0.5


async def handle_frame(
    broker: Broker, payload: bytes, client_host: str, *, controller_plane: bool = False
) -> tuple[bytes | None, bool]:
    """Answer one request frame: (response frame or None for acks=0, whether the request was valid)."""
    header = parse_request_header(payload)
    api = (CONTROLLER_HANDLERS if controller_plane else HANDLERS).get(header.api_key)
    if api is None or not api.min_version <= header.api_version <= api.max_version:
        if header.api_key == API_VERSIONS_KEY:
            # KIP-511: answer an unknown ApiVersions version with a v0 response listing what we speak.
            return api_versions_v0_fallback(header), True
        raise ProtocolError(
            f"unsupported request api_key={header.api_key} api_version={header.api_version} "
            f"from client {header.client_id!r}"
        )
    request = decode_request(header, payload)
    ctx = RequestContext(header=header, broker=broker, client_host=client_host, now_ms=int(time.time() * 1000),
                         controller_plane=controller_plane)
    result = None
    forwarded = header.api_key in FORWARDED_APIS
    if forwarded and not broker.is_active_controller and not controller_plane:
        result = await forward(broker, header.api_key, header.api_version, request)
    if result is None:
        try:
            result = api.handler(request, ctx)
            if inspect.isawaitable(result):
                result = await result
        except NotControllerError as e:
            if not forwarded:
                raise
            result = error_response(header.api_key, header.api_version, request, ErrorCode.not_controller, str(e))
    if result is None:
        return None, True
    return encode_response(header, result), True


async def serve_connection(broker: Broker, stream: anyio.abc.SocketStream, *, controller_plane: bool = False) -> None:
    try:
        peer = stream.extra(anyio.abc.SocketAttribute.remote_address)
        client_host = str(peer[0]) if isinstance(peer, tuple) else str(peer)
    except Exception:
        client_host = "unknown"
    reader = FrameReader(UNAUTHENTICATED_MAX_FRAME_BYTES)
    max_frame = broker.config.get_int("socket.request.max.bytes")
    try:
        sock = stream.extra(anyio.abc.SocketAttribute.raw_socket)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except Exception:  # not a TCP socket (tests may use others)
        pass
    async with stream:
        while True:
            try:
                payload = reader.next_frame()
            except ProtocolError as e:
                logger.info("closing connection from %s: %s", client_host, e)
                return
            if payload is None:
                try:
                    data = await stream.receive(RECEIVE_CHUNK_BYTES)
                except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                    return
                reader.feed(data)
                continue
            try:
                response, valid = await handle_frame(broker, payload, client_host, controller_plane=controller_plane)
            except ProtocolError as e:
                logger.info("closing connection from %s: %s", client_host, e)
                return
            except Exception:
                logger.exception("internal error handling a request from %s; closing the connection", client_host)
                return
            if valid:
                reader.max_frame_bytes = max_frame
            if response is not None:
                try:
                    await stream.send(response)
                except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                    return


async def _every(interval_s: float, what: Callable[[], Any], name: str) -> None:
    while True:
        await anyio.sleep(interval_s)
        try:
            result = what()
            if inspect.isawaitable(result):
                await result
        except Exception:
            logger.exception("background task %s failed", name)


async def serve(
    broker: Broker,
    host: str,
    port: int,
    *,
    started: Callable[[int], Awaitable[None] | None] | None = None,
) -> None:
    """Serve until cancelled. `started` is called with the bound port once the listener is up.

    A cluster member opens its client listener only once its metadata image has caught up with the
    quorum (Kafka's brokers wait the same way): before that it would answer Metadata from an image
    that lacks topics which exist. Its controller listener opens at once: the quorum needs it."""
    retention_interval_s = broker.config.get_int("log.retention.check.interval.ms") / 1000

    # Checkpoints and flushes fsync: they run on a worker thread so the event loop never waits on
    # the disk (storage's LogManager snapshots its state under a lock for exactly this).
    async def flush_dirty() -> None:
        await anyio.to_thread.run_sync(broker.log_manager.flush_dirty, int(time.time() * 1000))

    def expire_producers() -> None:
        broker.log_manager.remove_expired_producers(
            int(time.time() * 1000), broker.config.get_int("producer.id.expiration.ms")
        )

    async def checkpoint() -> None:
        await anyio.to_thread.run_sync(broker.checkpoint)

    controller_listener = None
    controller_address = broker.config.controller_listen()
    if controller_address is not None:
        controller_listener = await anyio.create_tcp_listener(
            local_host=controller_address[0], local_port=controller_address[1], reuse_port=False)

    def fence_expired() -> None:
        broker.controller.fence_expired_brokers(time.monotonic() * 1000)

    async with anyio.create_task_group() as tg:
        tg.start_soon(broker.quorum.run)  # Raft timers and requests to the other voters
        tg.start_soon(broker.lifecycle.run)  # registration and heartbeats to the active controller
        tg.start_soon(broker.replica_fetchers.run)  # followers fetch from their leaders
        tg.start_soon(_every, ISR_CHECK_INTERVAL_S, broker.maybe_change_isr, "ISR changes")
        tg.start_soon(_every, 0.5, fence_expired, "broker session expiry")
        tg.start_soon(_every, TICK_INTERVAL_S, broker.controller.reassignments.run_periodic, "reassignments, balance")
        if controller_listener is not None:
            async def controller_handler(stream: anyio.abc.SocketStream) -> None:
                await serve_connection(broker, stream, controller_plane=True)

            tg.start_soon(controller_listener.serve, controller_handler, tg)
            logger.info("controller listener on port %d",
                        controller_listener.extra(anyio.abc.SocketAttribute.local_port))
        tg.start_soon(_every, retention_interval_s, broker.run_retention, "retention")
        tg.start_soon(_every, HW_CHECKPOINT_INTERVAL_S, checkpoint, "high watermark checkpoint")
        tg.start_soon(_every, broker.config.get_int("producer.id.expiration.check.interval.ms") / 1000,
                      expire_producers, "producer id expiration")
        tg.start_soon(_every, FLUSH_CHECK_INTERVAL_S, flush_dirty, "flush")
        tg.start_soon(broker.groups.run)  # group coordinator timers: sessions, rebalances, offset expiry
        tg.start_soon(broker.txn.run)  # transaction timeouts, unwritten markers, transactional id expiry
        if not broker.ready.is_set():
            logger.info("catching up with the metadata quorum before listening on %s:%d", host, port)
            await broker.ready.wait()
        listener = await anyio.create_tcp_listener(local_host=host, local_port=port, reuse_port=False)
        bound_port = listener.extra(anyio.abc.SocketAttribute.local_port)
        async with listener:
            logger.info("listening on %s:%d", host, bound_port)
            if started is not None:
                r = started(bound_port)
                if inspect.isawaitable(r):
                    await r

            async def handler(stream: anyio.abc.SocketStream) -> None:
                await serve_connection(broker, stream)

            await listener.serve(handler, task_group=tg)

