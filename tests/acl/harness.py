"""Requests to an in-process broker with ACLs on, sent as a chosen principal from a chosen host.

Each request is encoded, decoded as the server does, given to the API's handler with a RequestContext that
carries the principal (what the connection will set once TLS / SASL authenticate it), and the handler's
answer is encoded and decoded again, so the response is checked to be valid on the wire for its version.
The principals are names only: once authentication lands, the same tables can be pointed at a live broker
with named users.
"""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path
from typing import Any

from samsa.broker.broker import Broker
from samsa.broker.config import BrokerConfig
from samsa.broker.context import RequestContext
from samsa.broker.controller import TopicSpec
from samsa.broker.handlers import HANDLERS
from samsa.broker.security.acl import (
    STANDARD_AUTHORIZER,
    Acl,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import (
    decode_request,
    decode_response,
    encode_request,
    encode_response_parts,
    parse_request_header,
    request_class,
)

ADMIN = "User:admin"
ALICE = "User:alice"
MALLORY = "User:mallory"
HOST = "127.0.0.1"
TIMEOUT_S = 30  # a bound on one request, never reached when it works
T0_MS = 1_700_000_000_000


def acl_broker(tmp_path: Path, **overrides: str) -> Broker:
    return Broker(BrokerConfig(overrides={
        "authorizer.class.name": STANDARD_AUTHORIZER, "super.users": ADMIN, "offsets.topic.num.partitions": "1",
        "transaction.state.log.num.partitions": "1", "group.initial.rebalance.delay.ms": "0", **overrides},
        data_dir=tmp_path / "data"))


def allow(broker: Broker, principal: str, operation: AclOperation, resource_type: ResourceType, name: str, *,
          pattern: PatternType = PatternType.LITERAL, permission: AclPermissionType = AclPermissionType.ALLOW,
          host: str = "*") -> None:
    """Add one ACL through the controller (committed at once: one voter)."""
    acl = Acl(resource_type, name, pattern, principal, host, operation, permission)
    (result,) = broker.controller.acls.create_acls([acl]).result()
    assert result.error == ErrorCode.none, result.message


def deny(broker: Broker, principal: str, operation: AclOperation, resource_type: ResourceType, name: str) -> None:
    allow(broker, principal, operation, resource_type, name, permission=AclPermissionType.DENY)


def create_topic(broker: Broker, name: str, partitions: int = 1) -> None:
    (result,) = broker.controller.create_topics([TopicSpec(name, partitions, 1)], validate_only=False).result()
    assert result.error_code == ErrorCode.none


def call(broker: Broker, api_key: int, version: int, values: dict[str, Any], principal: str = ALICE,
         host: str = HOST, now_ms: int = T0_MS) -> Any:
    """The decoded response to one request sent by `principal` from `host`."""

    async def answer() -> Any:
        frame = encode_request(build(request_class(api_key, version), values), correlation_id=7, client_id="acl-test")
        header = parse_request_header(frame[4:])
        request = decode_request(header, frame[4:])
        ctx = RequestContext(header=header, broker=broker, client_host=host, now_ms=now_ms, principal=principal)
        result = HANDLERS[api_key].handler(request, ctx)
        if inspect.isawaitable(result):
            result = await asyncio.wait_for(result, TIMEOUT_S)
        assert result is not None
        data = b"".join(bytes(p) for p in encode_response_parts(header, result))
        correlation, response = decode_response(api_key, version, data[4:])
        assert correlation == 7
        return response

    return asyncio.run(answer())
