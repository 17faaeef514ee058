"""DescribeTransactions (key 65), v0: the coordinator's state of each transactional id."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_requests import topic_authorization, transactional_id_error
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.describe_transactions import v0
    DescribeTransactionsRequest = v0.DescribeTransactionsRequest
    DescribeTransactionsResponse = v0.DescribeTransactionsResponse

API = ApiSpec(key=65, min_version=0, max_version=0)



def _describe(ctx: RequestContext, transactional_id: str) -> dict[str, Any]:
    txn = ctx.broker.txn
    out: dict[str, Any] = {"error_code": ErrorCode.none, "transactional_id": transactional_id,
                           "transaction_state": "", "transaction_timeout": 0, "transaction_start_time": 0,
                           "producer_id": -1, "producer_epoch": -1, "topics": []}
    # KafkaApis: DESCRIBE on the transactional id; only the partitions of topics it may DESCRIBE are listed.
    error = transactional_id_error(ctx, AclOperation.DESCRIBE, transactional_id) or txn.coordinator_error(
        transactional_id)
    describable = topic_authorization(ctx, AclOperation.DESCRIBE, log_if_denied=False)
    md = txn.coordinator.transactions.get(transactional_id)
    if error != ErrorCode.none:
        out["error_code"] = error
    elif md is None:
        out["error_code"] = ErrorCode.transactional_id_not_found
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, p in sorted(md.partitions):
            if describable(topic):
                by_topic.setdefault(topic, []).append(p)
        out.update(transaction_state=md.state.kafka_name, transaction_timeout=md.timeout_ms,
                   transaction_start_time=md.start_ms, producer_id=md.producer_id, producer_epoch=md.producer_epoch,
                   topics=[{"topic": t, "partitions": ps} for t, ps in by_topic.items()])
    return out


def handle_describe_transactions(request: DescribeTransactionsRequest,
                                 ctx: RequestContext) -> DescribeTransactionsResponse:
    states = [_describe(ctx, t) for t in request.transactional_ids]
    cls: type[DescribeTransactionsResponse] = response_class(65, ctx.version)
    return build(cls, {"throttle_time": 0, "transaction_states": states})
