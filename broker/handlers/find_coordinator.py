"""FindCoordinator (key 10), v0-v6.

v1 adds key_type (0 group, 1 transaction) and error_message; v3 is flexible; v4 batches:
coordinator_keys in, a coordinators array out (KIP-699); v5-v6 change only error handling
(v6: share-group keys, type 2, which Samsa does not coordinate).  Asking for a group's coordinator
creates `__consumer_offsets` on first use, like Kafka.
"""

from __future__ import annotations

from typing import Any

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.group.service import OFFSETS_TOPIC
from samsa.broker.txn.service import TRANSACTION_STATE_TOPIC
from samsa.broker.wire import build, field
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

API = ApiSpec(key=10, min_version=0, max_version=6)

GROUP_KEY_TYPE = 0
TRANSACTION_KEY_TYPE = 1


def _find(ctx: RequestContext, key: str, key_type: int) -> dict[str, Any]:
    broker = ctx.broker
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
    return {"key": key, "node_id": leader.broker_id, "host": leader.host, "port": leader.port,
            "error_code": ErrorCode.none, "error_message": None}


def _error(key: str, error: ErrorCode, message: str | None) -> dict[str, Any]:
    return {"key": key, "node_id": -1, "host": "", "port": -1, "error_code": error, "error_message": message}


def handle_find_coordinator(request: Any, ctx: RequestContext) -> Any:
    cls = response_class(10, ctx.version)
    key_type = int(field(request, "key_type", GROUP_KEY_TYPE))
    if ctx.version >= 4:
        return build(cls, {"coordinators": [_find(ctx, key, key_type) for key in request.coordinator_keys]})
    result = _find(ctx, request.key, key_type)
    del result["key"]
    return build(cls, result)
