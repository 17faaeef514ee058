"""EndTxn (key 26), v0-v5.

Commits or aborts the producer's ongoing transaction: the coordinator stores PrepareCommit or
PrepareAbort, writes a marker to every partition of the transaction, then stores Complete*.
v2 answers PRODUCER_FENCED instead of INVALID_PRODUCER_EPOCH (KIP-588); v3 is flexible; v4 only
allows TRANSACTION_ABORTABLE.  v5 is transactions V2 (KIP-890 part 2): the coordinator bumps the
producer epoch at every transaction end (also for an abort with nothing added), writes the markers with
the bumped epoch and returns producer_id/producer_epoch; a retry carries the epoch before the bump.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.handlers.add_partitions_to_txn import fenced
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_requests import transactional_id_error
from samsa.broker.wire import build
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.end_txn import v0, v1, v2, v3, v4, v5
    EndTxnRequest = (v0.EndTxnRequest | v1.EndTxnRequest | v2.EndTxnRequest | v3.EndTxnRequest | v4.EndTxnRequest
                     | v5.EndTxnRequest)
    EndTxnResponse = (v0.EndTxnResponse | v1.EndTxnResponse | v2.EndTxnResponse | v3.EndTxnResponse
                      | v4.EndTxnResponse | v5.EndTxnResponse)

API = ApiSpec(key=26, min_version=0, max_version=5)
FIRST_V2_VERSION = 5  # Kafka's TransactionVersion.transactionVersionForEndTxn


def handle_end_txn(request: EndTxnRequest, ctx: RequestContext) -> EndTxnResponse:
    cls: type[EndTxnResponse] = response_class(26, ctx.version)
    denied = transactional_id_error(ctx, AclOperation.WRITE, request.transactional_id)
    if denied:
        return build(cls, {"throttle_time": 0, "error_code": denied, "producer_id": -1, "producer_epoch": -1})
    result = ctx.broker.txn.end_txn(request.transactional_id, request.producer_id, request.producer_epoch,
                                    bool(request.committed), ctx.now_ms,
                                    2 if ctx.version >= FIRST_V2_VERSION else 0)
    return build(cls, {"throttle_time": 0, "error_code": fenced(result.error, ctx.version, 2),
                       "producer_id": result.producer_id, "producer_epoch": result.producer_epoch})
