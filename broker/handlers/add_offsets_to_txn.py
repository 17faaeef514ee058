"""AddOffsetsToTxn (key 25), v0-v4.

Adds the group's `__consumer_offsets` partition to the transaction, so the TxnOffsetCommit that
follows is part of it.  v2 answers PRODUCER_FENCED instead of INVALID_PRODUCER_EPOCH (KIP-588);
v3 is flexible; v4 only allows TRANSACTION_ABORTABLE.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.handlers.add_partitions_to_txn import fenced
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_requests import group_error, transactional_id_error
from samsa.broker.txn.service import OFFSETS_TOPIC
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.add_offsets_to_txn import v0, v1, v2, v3, v4
    AddOffsetsToTxnRequest = (v0.AddOffsetsToTxnRequest | v1.AddOffsetsToTxnRequest | v2.AddOffsetsToTxnRequest
                              | v3.AddOffsetsToTxnRequest | v4.AddOffsetsToTxnRequest)
    AddOffsetsToTxnResponse = (v0.AddOffsetsToTxnResponse | v1.AddOffsetsToTxnResponse | v2.AddOffsetsToTxnResponse
                               | v3.AddOffsetsToTxnResponse | v4.AddOffsetsToTxnResponse)

API = ApiSpec(key=25, min_version=0, max_version=4)



def handle_add_offsets_to_txn(request: AddOffsetsToTxnRequest, ctx: RequestContext) -> AddOffsetsToTxnResponse:
    groups = ctx.broker.groups
    # KafkaApis: WRITE on the transactional id, then READ on the group.
    error = (transactional_id_error(ctx, AclOperation.WRITE, request.transactional_id)
             or group_error(ctx, AclOperation.READ, request.group_id) or groups.ensure_offsets_topic())
    if error == ErrorCode.none:
        partition = (OFFSETS_TOPIC, groups.partition_for(request.group_id))
        error = ctx.broker.txn.add_partitions(request.transactional_id, request.producer_id, request.producer_epoch,
                                              [partition], ctx.now_ms)
    cls: type[AddOffsetsToTxnResponse] = response_class(25, ctx.version)
    return build(cls, {"throttle_time": 0, "error_code": fenced(error, ctx.version, 2)})
