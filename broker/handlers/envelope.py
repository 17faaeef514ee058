"""Envelope (key 58), v0, on the controller listener only: a client request a broker forwards to the
active controller (KIP-590), with the principal and address of the client that sent it.

Forwarded admin requests are authorized as their client, not as the forwarding broker: the broker wraps
the request it received (header and body) with the client's principal ("User:NAME", UTF-8) and address
(the IP's packed bytes) when the authorizer is on; the controller unwraps it, runs the same handler with a
context carrying that principal and answers the handler's response frame (without its size) in
response_data. A request the controller listener does not forward-serve is UNSUPPORTED_VERSION, a broken
envelope INVALID_REQUEST. (Kafka also requires CLUSTER_ACTION of the envelope's sender; the controller
listener is the nodes' own, as for the quorum's requests, so its connections are trusted.)
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.forwarding import FORWARDED_APIS, error_response, unpack_host
from samsa.broker.metadata.quorum import NotControllerError
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode, ProtocolError
from samsa.kproto.messages import decode_request, encode_response_parts, parse_request_header, response_class

if TYPE_CHECKING:
    from kio.schema.envelope import v0
    EnvelopeRequest = v0.EnvelopeRequest
    EnvelopeResponse = v0.EnvelopeResponse

API = ApiSpec(key=58, min_version=0, max_version=0)

_handlers: Mapping[int, Any] = {}  # the controller listener's table (broker.handlers sets it: no import circle)


def set_handlers(table: Mapping[int, Any]) -> None:
    global _handlers
    _handlers = table


async def handle_envelope(request: EnvelopeRequest, ctx: RequestContext) -> EnvelopeResponse:
    cls: type[EnvelopeResponse] = response_class(58, ctx.version)
    if request.request_principal is None:
        return build(cls, {"error_code": ErrorCode.invalid_request, "response_data": None})
    try:
        header = parse_request_header(request.request_data)
        api = _handlers.get(header.api_key)
        if (api is None or header.api_key not in FORWARDED_APIS
                or not api.min_version <= header.api_version <= api.max_version):
            return build(cls, {"error_code": ErrorCode.unsupported_version, "response_data": None})
        inner = decode_request(header, request.request_data)
    except ProtocolError:
        return build(cls, {"error_code": ErrorCode.invalid_request, "response_data": None})
    client = RequestContext(header=header, broker=ctx.broker, client_host=unpack_host(request.client_host_address),
                            now_ms=ctx.now_ms, principal=request.request_principal.decode(errors="replace"),
                            listener_name=ctx.listener_name)
    handler: Callable[..., Any] = api.handler
    try:
        result = handler(inner, client)
        if inspect.isawaitable(result):
            result = await result
    except NotControllerError as e:
        result = error_response(header.api_key, header.api_version, inner, e.error_code, str(e))
    frame = b"".join(bytes(part) for part in encode_response_parts(header, result))
    return build(cls, {"error_code": ErrorCode.none, "response_data": frame[4:]})
