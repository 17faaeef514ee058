"""AddPartitionsToTxn (key 24), v0-v5.

v1 is v0 with the same shape (KIP-98 follow-up); v2 answers PRODUCER_FENCED instead of
INVALID_PRODUCER_EPOCH (KIP-588); v3 is flexible; v4 batches several transactions for brokers
(KIP-890: a top-level error code, results_by_transaction, verify_only); v5 only allows the
TRANSACTION_ABORTABLE error.  Clients use v0-v3; brokers send v4+ for Produce v12+ (transactions V2:
the leader adds the partition for the client) and for KIP-890 part 1's verification.  If any partition
is unknown, nothing is added: those partitions get UNKNOWN_TOPIC_OR_PARTITION and the others
OPERATION_NOT_ATTEMPTED, as in Kafka.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_requests import cluster_error, topic_authorization, transactional_id_error
from samsa.broker.txn.state import TransactionState
from samsa.broker.wire import build, field
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.add_partitions_to_txn import v0, v1, v2, v3, v4, v5
    AddPartitionsToTxnRequest = (v0.AddPartitionsToTxnRequest | v1.AddPartitionsToTxnRequest
                                 | v2.AddPartitionsToTxnRequest | v3.AddPartitionsToTxnRequest
                                 | v4.AddPartitionsToTxnRequest | v5.AddPartitionsToTxnRequest)
    AddPartitionsToTxnResponse = (v0.AddPartitionsToTxnResponse | v1.AddPartitionsToTxnResponse
                                  | v2.AddPartitionsToTxnResponse | v3.AddPartitionsToTxnResponse
                                  | v4.AddPartitionsToTxnResponse | v5.AddPartitionsToTxnResponse)

API = ApiSpec(key=24, min_version=0, max_version=5)



def fenced(error: ErrorCode, version: int, first_fenced_version: int) -> ErrorCode:
    """KIP-588: versions before `first_fenced_version` know PRODUCER_FENCED as INVALID_PRODUCER_EPOCH."""
    if error == ErrorCode.producer_fenced and version < first_fenced_version:
        return ErrorCode.invalid_producer_epoch
    return error


def _one(ctx: RequestContext, transactional_id: str, producer_id: int, producer_epoch: int, topics: Any,
         verify_only: bool) -> list[dict[str, Any]]:
    broker = ctx.broker
    image = broker.image
    wanted = [(t.name, p) for t in topics for p in t.partitions]
    errors: dict[tuple[str, int], ErrorCode] = {}
    # KafkaApis, v0-v3 (clients): WRITE on the transactional id, then WRITE on each topic (v4+ is brokers').
    denied = transactional_id_error(ctx, AclOperation.WRITE, transactional_id) if ctx.version <= 3 else ErrorCode.none
    writable = topic_authorization(ctx, AclOperation.WRITE)
    for topic, p in wanted:
        known = image.topics_by_name.get(topic)
        if denied:
            errors[(topic, p)] = denied
        elif ctx.version <= 3 and not writable(topic):
            errors[(topic, p)] = ErrorCode.topic_authorization_failed
        elif known is None or p not in known.partitions:
            errors[(topic, p)] = ErrorCode.unknown_topic_or_partition
    if errors:
        for tp in wanted:
            errors.setdefault(tp, ErrorCode.operation_not_attempted)
    elif verify_only:
        md = broker.txn.coordinator.transactions.get(transactional_id)
        check = broker.txn.check_add(transactional_id, producer_id, producer_epoch)
        for tp in wanted:
            if check != ErrorCode.none:
                errors[tp] = check
            elif md is None or md.state is not TransactionState.ONGOING or tp not in md.partitions:
                errors[tp] = ErrorCode.invalid_txn_state
            else:
                errors[tp] = ErrorCode.none
    else:
        # v4+ come from partition leaders adding for a transactions V2 client (Kafka's
        # transactionVersionForAddPartitionsToTxn: a version above 3 is V2)
        error = broker.txn.add_partitions(transactional_id, producer_id, producer_epoch, wanted, ctx.now_ms,
                                          2 if ctx.version >= 4 else 0)
        errors = {tp: fenced(error, ctx.version, 2) for tp in wanted}
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for (topic, p), error in errors.items():
        by_topic.setdefault(topic, []).append({"partition_index": p, "partition_error_code": error})
    return [{"name": name, "results_by_partition": parts} for name, parts in by_topic.items()]


def handle_add_partitions_to_txn(request: AddPartitionsToTxnRequest, ctx: RequestContext
                                 ) -> AddPartitionsToTxnResponse:
    cls: type[AddPartitionsToTxnResponse] = response_class(24, ctx.version)
    if ctx.version <= 3:  # v0-v3 carry one transaction's fields, v4+ a batch of transactions
        results = _one(ctx, field(request, "v3_and_below_transactional_id"),
                       field(request, "v3_and_below_producer_id"), field(request, "v3_and_below_producer_epoch"),
                       field(request, "v3_and_below_topics"), False)
        return build(cls, {"throttle_time": 0, "results_by_topic_v3_and_below": results})
    denied = cluster_error(ctx, AclOperation.CLUSTER_ACTION)  # v4+ come from brokers only
    if denied:
        return build(cls, {"throttle_time": 0, "error_code": denied, "results_by_transaction": ()})
    transactions = [
        {"transactional_id": t.transactional_id,
         "topic_results": _one(ctx, t.transactional_id, t.producer_id, t.producer_epoch, t.topics, t.verify_only)}
        for t in field(request, "transactions")
    ]
    return build(cls, {"throttle_time": 0, "error_code": ErrorCode.none, "results_by_transaction": transactions})
