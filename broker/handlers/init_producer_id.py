"""InitProducerId (key 22), v0-v5.

Hands an idempotent producer a new producer id with epoch 0 (Kafka does the same for every request
without a transactional id, including KIP-360's epoch-bump requests of v3+, which carry the old id).
v2 is flexible; v3 adds producer_id/producer_epoch (KIP-360); v4-v5 change only error handling.

Transactions (issue 5) are not implemented yet: a request with a transactional id is refused with
TRANSACTIONAL_ID_AUTHORIZATION_FAILED, so a transactional producer fails at once with a clear error
instead of retrying forever.
"""

from __future__ import annotations

from typing import Any

from broker.context import RequestContext
from broker.wire import build
from kproto.errors import ErrorCode
from kproto.messages import response_class


def handle_init_producer_id(request: Any, ctx: RequestContext) -> Any:
    cls = response_class(22, ctx.version)
    if request.transactional_id is not None:
        return build(cls, {"throttle_time": 0, "error_code": ErrorCode.transactional_id_authorization_failed,
                           "producer_id": -1, "producer_epoch": -1})
    producer_id = ctx.broker.controller.generate_producer_id()
    return build(cls, {"throttle_time": 0, "error_code": ErrorCode.none, "producer_id": producer_id,
                       "producer_epoch": 0})
