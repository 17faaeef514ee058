"""EndTxn (key 26), v0-v4.

Commits or aborts the producer's ongoing transaction: the coordinator stores PrepareCommit or
PrepareAbort, writes a marker to every partition of the transaction, then stores Complete*.
v2 answers PRODUCER_FENCED instead of INVALID_PRODUCER_EPOCH (KIP-588); v3 is flexible; v4 only
allows TRANSACTION_ABORTABLE.  v5 (transactions V2, KIP-890: an epoch bump per transaction, returned
in the response) is not advertised.
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
    from kio.schema.end_txn import v0, v1, v2, v3, v4
    EndTxnRequest = v0.EndTxnRequest | v1.EndTxnRequest | v2.EndTxnRequest | v3.EndTxnRequest | v4.EndTxnRequest
    EndTxnResponse = v0.EndTxnResponse | v1.EndTxnResponse | v2.EndTxnResponse | v3.EndTxnResponse | v4.EndTxnResponse

API = ApiSpec(key=26, min_version=0, max_version=4)



def handle_end_txn(request: EndTxnRequest, ctx: RequestContext) -> EndTxnResponse:
    error = transactional_id_error(ctx, AclOperation.WRITE, request.transactional_id) or ctx.broker.txn.end_txn(
        request.transactional_id, request.producer_id, request.producer_epoch, bool(request.committed), ctx.now_ms)
    cls: type[EndTxnResponse] = response_class(26, ctx.version)
    return build(cls, {"throttle_time": 0, "error_code": fenced(error, ctx.version, 2),
                       "producer_id": -1, "producer_epoch": -1})
