"""ListTransactions (key 66), v0-v2.

Filters by state name and producer id; v1 adds duration_filter (only transactions running longer
than that many ms, KIP-994); v2 adds transactional_id_pattern (a regular expression, KIP-1152).
State names this broker does not know come back in unknown_state_filters.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.security.acl import AclOperation, ResourceType
from samsa.broker.security.authorizer import authorize
from samsa.broker.txn.state import STATE_BY_NAME
from samsa.broker.wire import build, field
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.list_transactions import v0, v1, v2
    ListTransactionsRequest = v0.ListTransactionsRequest | v1.ListTransactionsRequest | v2.ListTransactionsRequest
    ListTransactionsResponse = v0.ListTransactionsResponse | v1.ListTransactionsResponse | v2.ListTransactionsResponse

API = ApiSpec(key=66, min_version=0, max_version=2)



def handle_list_transactions(request: ListTransactionsRequest, ctx: RequestContext) -> ListTransactionsResponse:
    cls: type[ListTransactionsResponse] = response_class(66, ctx.version)
    states = set(request.state_filters)
    unknown = sorted(s for s in states if s not in STATE_BY_NAME)
    producer_ids = set(request.producer_id_filters)
    duration_ms = int(field(request, "duration_filter", -1))
    pattern_text = field(request, "transactional_id_pattern")
    pattern = None
    if pattern_text:
        try:
            pattern = re.compile(pattern_text)
        except re.error:
            return build(cls, {"throttle_time": 0, "error_code": ErrorCode.invalid_regular_expression,
                               "unknown_state_filters": unknown, "transaction_states": []})
    out = []
    for md in ctx.broker.txn.coordinator.transactions.values():
        if states and md.state.kafka_name not in states:
            continue
        if producer_ids and md.producer_id not in producer_ids:
            continue
        if duration_ms >= 0 and (md.start_ms < 0 or ctx.now_ms - md.start_ms <= duration_ms):
            continue
        if pattern is not None and not pattern.fullmatch(md.transactional_id):
            continue
        if not authorize(ctx, AclOperation.DESCRIBE, ResourceType.TRANSACTIONAL_ID, md.transactional_id,
                         log_if_denied=False):
            continue  # KafkaApis: only the transactional ids the principal may DESCRIBE
        out.append({"transactional_id": md.transactional_id, "producer_id": md.producer_id,
                    "transaction_state": md.state.kafka_name})
    return build(cls, {"throttle_time": 0, "error_code": ErrorCode.none, "unknown_state_filters": unknown,
                       "transaction_states": out})
