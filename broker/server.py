"""The network shell: the listeners, request dispatch to the handlers, and the broker's background tasks.

Every listener of `listeners` (broker/security/listeners.py) is served with its security protocol: TLS
contexts and SASL mechanisms are built before anything listens (broker/security/channel.py), and on a SASL
listener the connection's authenticator answers frames until the client has authenticated; the principal
and listener name then travel in each request's context.

Connections are asyncio Protocols (broker/connection.py): requests answered in order, one at a time,
the connection muted while one waits (Kafka's SocketServer semantics).  A broken frame or an
undecodable request closes only that connection.

The client listener's connections share ConnectionQuotas (max.connections, max.connections.per.ip and
its overrides, max.connection.creation.rate) and a RequestQueue (queued.max.requests,
queued.max.request.bytes); every connection is closed after connections.max.idle.ms idle. The
controller listener carries the quorum's own traffic and is bounded by none of the quotas or the queue,
so clients can never hold back the metadata quorum.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import anyio
import anyio.to_thread

from samsa.broker.broker import Broker
from samsa.broker.config import BrokerConfig
from samsa.broker.connection import KafkaConnection, Response
from samsa.broker.connection_quotas import ConnectionQuotas, RequestQueue, parse_per_ip_overrides
from samsa.broker.context import RequestContext
from samsa.broker.forwarding import FORWARDED_APIS, error_response, forward
from samsa.broker.handlers import CONTROLLER_HANDLERS, HANDLERS, api_versions_v0_fallback
from samsa.broker.metadata.quorum import NotControllerError
from samsa.broker.observability import ObservabilityHandle, start_observability
from samsa.broker.observability.request_log import REQUEST_LOG_KEY, log_request
from samsa.broker.observability.response_metrics import (
    FETCH_KEY,
    PRODUCE_KEY,
    count_top_level_error,
    observe_fetch,
)
from samsa.broker.reassignment import TICK_INTERVAL_S
from samsa.broker.security.authenticator import FAILURES
from samsa.broker.security.channel import ANONYMOUS, ChannelSecurity, ListenerSecurity, scram_lookup_from
from samsa.broker.security.listeners import broker_listeners, controller_listener
from samsa.kproto.errors import ProtocolError
from samsa.kproto.messages import (
    API_VERSIONS_KEY,
    RequestHeader,
    decode_request,
    encode_response_parts,
    parse_request_header,
)

logger = logging.getLogger(__name__)

HW_CHECKPOINT_INTERVAL_S = 5.0
FLUSH_CHECK_INTERVAL_S = 1.0
# Connections the kernel may queue before we accept them (the kernel caps it at net.core.somaxconn).
LISTEN_BACKLOG = 65536
# Followers that caught up rejoin the ISR within this; laggards leave after replica.lag.time.max.ms.
ISR_CHECK_INTERVAL_S = 0.5


def dispatch_frame(broker: Broker, payload: bytes, client_host: str, *, controller_plane: bool = False,
                   connection: str = "", listener: str = "PLAINTEXT", principal: str = ANONYMOUS,
                   sasl_authenticating: bool = False) -> Response | Coroutine[Any, Any, Response]:
    """Answer one request frame: the response frame (None for acks=0), or a coroutine that answers it
    when the request has to wait. Raises ProtocolError for a request we cannot take. `connection` and
    `listener` name where it came from in the request log; `principal` is who sent it (authenticated);
    `sasl_authenticating`: an ApiVersions on a SASL listener before the client authenticated."""
    started = time.perf_counter()
    header = parse_request_header(payload)
    api = (CONTROLLER_HANDLERS if controller_plane else HANDLERS).get(header.api_key)
    if api is None or not api.min_version <= header.api_version <= api.max_version:
        if header.api_key == API_VERSIONS_KEY:
            # KIP-511: answer an unknown ApiVersions version with a v0 response listing what we speak.
            return api_versions_v0_fallback(header)
        raise ProtocolError(
            f"unsupported request api_key={header.api_key} api_version={header.api_version} "
            f"from client {header.client_id!r}"
        )
    request = decode_request(header, payload)
    ctx = RequestContext(header=header, broker=broker, client_host=client_host, now_ms=int(time.time() * 1000),
                         controller_plane=controller_plane, principal=principal, listener_name=listener,
                         sasl_authenticating=sasl_authenticating)
    forwarded = header.api_key in FORWARDED_APIS
    source = connection or client_host, listener, principal  # for the request log
    if forwarded and not broker.is_active_controller and not controller_plane:
        return _timed(broker, header, started, source, _forward_or_handle(broker, api.handler, header, request, ctx))
    try:
        result = api.handler(request, ctx)
    except NotControllerError as e:
        if not forwarded:
            raise
        result = error_response(header.api_key, header.api_version, request, e.error_code, str(e))
    if inspect.isawaitable(result):
        return _timed(broker, header, started, source, _respond_when_done(header, request, result, forwarded))
    response = None if result is None else encode_response_parts(header, result)
    _answered(broker, header, request, result, started, source)
    return response


def _answered(broker: Broker, header: RequestHeader, request: Any, result: Any, started: float,
              source: tuple[str, str, str]) -> None:
    """A request's answer is there: its error codes and traffic counted (Produce counts its own), its total
    time since `started` recorded, and the request log's line written when samsa.request.log.enable is set
    (`source`: the connection's address and listener)."""
    metrics = broker.request_metrics
    api_key = header.api_key
    if result is not None and api_key != PRODUCE_KEY:
        if api_key == FETCH_KEY:
            observe_fetch(metrics, request, result, broker.image.topics_by_id)
        else:
            count_top_level_error(metrics, api_key, result)
    seconds = time.perf_counter() - started
    metrics.record(api_key, seconds)
    if broker.config.get_bool(REQUEST_LOG_KEY):
        log_request(header, source[0], source[1], seconds, result, source[2])


async def _timed(broker: Broker, header: RequestHeader, started: float, source: tuple[str, str, str],
                 answer: Coroutine[Any, Any, tuple[Any, Any, Response]]) -> Response:
    """A waiting request's answer, counted once it is there (its total time includes the wait)."""
    try:
        request, result, response = await answer
    except BaseException:
        broker.request_metrics.record(header.api_key, time.perf_counter() - started)
        raise
    _answered(broker, header, request, result, started, source)
    return response


async def _respond_when_done(header: RequestHeader, request: Any, pending: Awaitable[Any], forwarded: bool
                             ) -> tuple[Any, Any, Response]:
    """(request, result, response frame) once the handler's wait is over."""
    try:
        result = await pending
    except NotControllerError as e:
        if not forwarded:
            raise
        result = error_response(header.api_key, header.api_version, request, e.error_code, str(e))
    return request, result, None if result is None else encode_response_parts(header, result)


async def _forward_or_handle(broker: Broker, handler: Callable[..., Any], header: RequestHeader, request: Any,
                             ctx: RequestContext) -> tuple[Any, Any, Response]:
    """KIP-590: a request for the active controller, relayed to it (or handled here if that is us now)."""
    # With the authorizer on, the controller authorizes the client (Envelope), not this broker.
    principal = ctx.principal if ctx.broker.config.get("authorizer.class.name") else None
    result = await forward(broker, header.api_key, header.api_version, request, principal, ctx.client_host)
    if result is None:
        try:
            result = handler(request, ctx)
            if inspect.isawaitable(result):
                result = await result
        except NotControllerError as e:
            result = error_response(header.api_key, header.api_version, request, e.error_code, str(e))
    return request, result, None if result is None else encode_response_parts(header, result)


CONTROLLER_LISTENER = "CONTROLLER"


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

    loop = asyncio.get_running_loop()
    connections: set[KafkaConnection] = set()
    broker.connections = connections  # read by /metrics (connections per listener)
    max_frame_bytes = broker.config.get_int("socket.request.max.bytes")
    quotas = connection_quotas(broker.config)
    request_queue = RequestQueue(max_requests=broker.config.get_int("queued.max.requests"),
                                 max_bytes=broker.config.get_int("queued.max.request.bytes"), call_soon=loop.call_soon)
    idle_ms = broker.config.get_int("connections.max.idle.ms")
    max_idle_ms = idle_ms if idle_ms >= 0 else None  # Kafka: -1 never closes an idle connection

    scram_lookup = scram_lookup_from(lambda: broker.image)

    def connection_factory(controller_plane: bool, security: ListenerSecurity | None = None
                           ) -> Callable[[], KafkaConnection]:
        listener_name = security.listener.name if security is not None else CONTROLLER_LISTENER

        def make() -> KafkaConnection:
            connection: KafkaConnection
            # PLAINTEXT connections need no channel: their principal is ANONYMOUS and every frame is the broker's.
            secured = security is not None and (security.ssl_context is not None or bool(security.mechanisms))
            channel = ChannelSecurity(security, scram_lookup) if security is not None and secured else None
            started_channel = False

            def dispatch(payload: bytes, client_host: str) -> Response | Coroutine[Any, Any, Response]:
                nonlocal started_channel
                principal = ANONYMOUS
                authenticator = None
                if channel is not None:
                    if not started_channel:
                        started_channel = True
                        channel.connected(connection.peer_certificate())
                    answer = _authenticate(channel, connection, payload)
                    if answer is not None:
                        return answer
                    principal = channel.principal
                    if channel.authenticator is not None and not channel.authenticator.authenticated:
                        authenticator = channel.authenticator  # an ApiVersions before the handshake
                response = dispatch_frame(broker, payload, client_host, controller_plane=controller_plane,
                                          connection=connection.peer, listener=connection.listener,
                                          principal=principal, sasl_authenticating=authenticator is not None)
                if authenticator is not None and _api_versions_error_code(response) == 0:
                    # Kafka's SaslServerAuthenticator moves on to the handshake only once it answered the
                    # versions; after UNSUPPORTED_VERSION or INVALID_REQUEST the client may ask again.
                    authenticator.versions_answered()
                return response

            # The controller listener is bounded by none of the client quotas or the request queue (the
            # module's docstring says why).
            connection = KafkaConnection(
                dispatch, max_frame_bytes=max_frame_bytes, registry=connections,
                quotas=None if controller_plane else quotas, request_queue=None if controller_plane else request_queue,
                connections_max_idle_ms=max_idle_ms, listener=listener_name, request_metrics=broker.request_metrics,
                authenticate_max_frame_bytes=(channel.security.max_receive_bytes if channel is not None
                                              and channel.authenticator is not None else None),
                ssl_context=security.ssl_context if security is not None else None)
            return connection

        return make

    def fence_expired() -> None:
        broker.controller.fence_expired_brokers(time.monotonic() * 1000)
        broker.controller.registrations.maybe_register_controllers(broker.incarnation_id)

    # Every listener's TLS context and SASL setup is built before anything listens: a listener that cannot
    # be secured as configured stops the start (ListenerConfigError), it is never served half-secured.
    securities = [ListenerSecurity.from_config(broker.config, spec) for spec in broker_listeners(broker.config)]
    controller_address = broker.config.controller_listen()
    controller_spec = None if controller_address is None else controller_listener(broker.config, controller_address)
    controller_security = None if controller_spec is None else ListenerSecurity.from_config(broker.config,
                                                                                            controller_spec)
    listeners: list[asyncio.Server] = []
    observability: ObservabilityHandle | None = None
    try:
        observability = await start_observability(broker)  # /metrics, /health/* (samsa.metrics.listen)
        if controller_address is not None:
            controller_server = await loop.create_server(
                connection_factory(True, controller_security), controller_address[0], controller_address[1],
                reuse_address=True, backlog=LISTEN_BACKLOG)  # (TLS after accept: KafkaConnection._start_tls)
            listeners.append(controller_server)
            logger.info("controller listener %s on port %d", controller_spec.name if controller_spec else "CONTROLLER",
                        _bound_port(controller_server))
        async with anyio.create_task_group() as tg:
            tg.start_soon(broker.quorum.run)  # Raft timers and requests to the other voters
            tg.start_soon(broker.lifecycle.run)  # registration and heartbeats to the active controller
            tg.start_soon(broker.replica_fetchers.run)  # followers fetch from their leaders
            tg.start_soon(_every, ISR_CHECK_INTERVAL_S, broker.maybe_change_isr, "ISR changes")
            tg.start_soon(_every, 0.5, fence_expired, "broker session expiry")
            tg.start_soon(_every, TICK_INTERVAL_S, broker.controller.reassignments.run_periodic,
                          "reassignments, balance")
            tg.start_soon(_every, retention_interval_s, broker.run_retention, "retention")
            tg.start_soon(_every, HW_CHECKPOINT_INTERVAL_S, checkpoint, "high watermark checkpoint")
            tg.start_soon(_every, broker.config.get_int("producer.id.expiration.check.interval.ms") / 1000,
                          expire_producers, "producer id expiration")
            tg.start_soon(_every, FLUSH_CHECK_INTERVAL_S, flush_dirty, "flush")
            if broker.config.get_bool("log.cleaner.enable"):
                tg.start_soon(broker.log_cleaner.run)  # compacted topics
            tg.start_soon(broker.groups.run)  # group coordinator timers: sessions, rebalances, offset expiry
            tg.start_soon(broker.txn.run)  # transaction timeouts, unwritten markers, transactional id expiry
            if not broker.ready.is_set():
                logger.info("catching up with the metadata quorum before listening on %s:%d", host, port)
                await broker.ready.wait()
            bound_port = port
            # The first listener (the --listen address, which launchers poll) opens last: once it accepts,
            # every listener does.
            for index, security in reversed(list(enumerate(securities))):
                spec = security.listener
                bind_host, bind_port = (host, port) if index == 0 else (spec.host, spec.port)
                listener = await loop.create_server(connection_factory(False, security), bind_host, bind_port,
                                                    reuse_address=True, backlog=LISTEN_BACKLOG)
                listeners.append(listener)
                logger.info("listener %s (%s) on %s:%d", spec.name, spec.security_protocol.name, bind_host,
                            _bound_port(listener))
                if index == 0:
                    bound_port = _bound_port(listener)
            if observability is not None:
                observability.listeners_open = True
            logger.info("listening on %s:%d", host, bound_port)
            if started is not None:
                r = started(bound_port)
                if inspect.isawaitable(r):
                    await r
            await anyio.sleep_forever()
    finally:
        if observability is not None:
            observability.close()
        for server in listeners:
            server.close()
        for connection in list(connections):
            connection.abort()


def _authenticate(channel: ChannelSecurity, connection: KafkaConnection, payload: bytes) -> bytes | None:
    """The SASL authenticator's answer to a frame, or None when the broker answers it. A frame no one may
    answer before authentication raises ProtocolError (the connection closes); a failed authentication is
    answered, then the connection closes (Kafka's SaslServerAuthenticator)."""
    authenticator = channel.authenticator
    if authenticator is None:
        return None
    now_ms = int(time.time() * 1000)
    if not authenticator.handles(payload, now_ms):
        return None  # the broker's to answer (before authentication: ApiVersions)
    expires_ms = authenticator.session_expires_ms
    try:
        answer = authenticator.receive(payload, now_ms)
    except ProtocolError:
        if channel.failed:  # a SaslHandshake v0 exchange's failure: no answer, the connection closes
            FAILURES.failed(authenticator, connection.peer, connection.listener, now_ms)
        raise
    if authenticator.authenticated and (not connection.authenticated or authenticator.session_expires_ms != expires_ms):
        logger.debug("%s authenticated as %s on listener %s", connection.peer, authenticator.principal,
                     connection.listener)
    connection.authenticated = authenticator.authenticated
    if channel.failed:
        FAILURES.failed(authenticator, connection.peer, connection.listener, now_ms)
        asyncio.get_running_loop().call_soon(connection.close)  # once this answer is written
    return answer


def _api_versions_error_code(answer: Response | Coroutine[Any, Any, Response]) -> int:
    """The error code of an ApiVersions answer frame. Its response header is always v0 (KIP-511), so the code
    follows the size prefix and the correlation id."""
    assert answer is not None and not inspect.isawaitable(answer), "ApiVersions is answered at once"
    frame = answer if isinstance(answer, bytes) else b"".join(bytes(part) for part in answer)
    return int.from_bytes(frame[8:10], "big", signed=True)


def connection_quotas(config: BrokerConfig) -> ConnectionQuotas:
    """The client listener's connection limits from the broker config (ValueError for a bad override)."""
    return ConnectionQuotas(
        max_connections=config.get_int("max.connections"),
        max_connections_per_ip=config.get_int("max.connections.per.ip"),
        max_connections_per_ip_overrides=parse_per_ip_overrides(config.get("max.connections.per.ip.overrides")),
        max_connection_creation_rate=config.get_int("max.connection.creation.rate"),
    )


def _bound_port(server: asyncio.Server) -> int:
    return int(server.sockets[0].getsockname()[1])
