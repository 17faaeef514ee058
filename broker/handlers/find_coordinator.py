"""FindCoordinator (key 10), v0-v6.

v1 adds key_type (0 group, 1 transaction) and error_message; v3 is flexible; v4 batches:
coordinator_keys in, a coordinators array out (KIP-699); v5-v6 change only error handling
(v6: share-group keys, type 2, which Samsa does not coordinate).  Asking for a group's coordinator
creates `__consumer_offsets` on first use, like Kafka.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.group.service import OFFSETS_TOPIC
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_requests import group_error, transactional_id_error
from samsa.broker.security.listeners import endpoint_on
from samsa.broker.txn.service import TRANSACTION_STATE_TOPIC
from samsa.broker.wire import build, field
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.find_coordinator import v0, v1, v2, v3, v4, v5, v6
    FindCoordinatorRequest = (v0.FindCoordinatorRequest | v1.FindCoordinatorRequest | v2.FindCoordinatorRequest
                              | v3.FindCoordinatorRequest | v4.FindCoordinatorRequest | v5.FindCoordinatorRequest
                              | v6.FindCoordinatorRequest)
    FindCoordinatorResponse = (v0.FindCoordinatorResponse | v1.FindCoordinatorResponse | v2.FindCoordinatorResponse
                               | v3.FindCoordinatorResponse | v4.FindCoordinatorResponse
                               | v5.FindCoordinatorResponse | v6.FindCoordinatorResponse)

API = ApiSpec(key=10, min_version=0, max_version=6)

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1



@dataclass(frozen=True, slots=True)
class Coordinator:
    """One key's answer (a Coordinator of v4+, or the top-level fields of v0-v3, before it is built)."""

    key: str
    error: ErrorCode
    node_id: int = -1
    host: str = ""
    port: int = -1
    error_message: str | None = None


def _find(ctx: RequestContext, key: str, key_type: int) -> Coordinator:
    broker = ctx.broker
    # KafkaApis.getCoordinator: DESCRIBE on the group / transactional id, before anything else.
    denied = (group_error(ctx, AclOperation.DESCRIBE, key) if key_type == GROUP_KEY_TYPE
              else transactional_id_error(ctx, AclOperation.DESCRIBE, key) if key_type == TRANSACTION_KEY_TYPE
              else ErrorCode.none)
    if denied:
        return _error(key, denied, None)
    if key_type == TRANSACTION_KEY_TYPE:
        if not key:
            return _error(key, ErrorCode.invalid_request, "The transactional id must not be empty")
        error = broker.txn.coordinator_error(key)  # creates __transaction_state on first use
        if error not in (ErrorCode.none, ErrorCode.not_coordinator):
            return _error(key, error, None)
        topic, partition = TRANSACTION_STATE_TOPIC, broker.txn.partition_for(key)
    elif key_type != GROUP_KEY_TYPE:
        return _error(key, ErrorCode.invalid_request, f"Unsupported key type {key_type}")
    elif not key:
        return _error(key, ErrorCode.invalid_request, "The group id must not be empty")
    else:
        error = broker.groups.coordinator_error(key)  # creates __consumer_offsets on first use
        if error not in (ErrorCode.none, ErrorCode.not_coordinator):
            return _error(key, error, None)
        topic, partition = OFFSETS_TOPIC, broker.groups.partition_for(key)
    # The coordinator is the leader of the key's partition of the internal topic.
    error, leader = broker.partition_leader(topic, partition)
    if leader is None:
        return _error(key, error, None)
    host, port = endpoint_on(broker.config, broker.image, broker.node_id, ctx.listener_name, leader.broker_id,
                             leader.host, leader.port)
    return Coordinator(key, ErrorCode.none, node_id=leader.broker_id, host=host, port=port)


def _error(key: str, error: ErrorCode, message: str | None) -> Coordinator:
    return Coordinator(key, error, error_message=message)


def handle_find_coordinator(request: FindCoordinatorRequest, ctx: RequestContext) -> FindCoordinatorResponse:
    key_type = int(field(request, "key_type", GROUP_KEY_TYPE))
    if ctx.version >= 4:  # v4+: a batch of keys (the request was decoded with this version's class)
        batched = cast("v4.FindCoordinatorRequest | v5.FindCoordinatorRequest | v6.FindCoordinatorRequest", request)
        return _response(ctx, [_find(ctx, key, key_type) for key in batched.coordinator_keys])
    single = cast("v0.FindCoordinatorRequest | v1.FindCoordinatorRequest | v2.FindCoordinatorRequest"
                  " | v3.FindCoordinatorRequest", request)
    return _response(ctx, [_find(ctx, single.key, key_type)])


def _response(ctx: RequestContext, results: list[Coordinator]) -> FindCoordinatorResponse:
    """The one place the answers become the kio response of the request's version: v4+ has one entry
    per key, v0-v3 the single key's fields at the top level (without the key)."""
    cls: type[FindCoordinatorResponse] = response_class(10, ctx.version)
    entries = [{"key": r.key, "node_id": r.node_id, "host": r.host, "port": r.port, "error_code": r.error,
                "error_message": r.error_message} for r in results]
    if ctx.version >= 4:
        return build(cls, {"coordinators": entries})
    del entries[0]["key"]
    return build(cls, entries[0])
