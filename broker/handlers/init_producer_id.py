"""InitProducerId (key 22), v0-v5.

Without a transactional id: a new producer id with epoch 0 (Kafka does the same for every such
request, including KIP-360's epoch-bump requests of v3+, which carry the old id).  With one: the
transaction coordinator bumps the id's epoch (fencing any older instance), aborting a transaction the
previous instance left open (broker/txn/).
v2 is flexible; v3 adds producer_id/producer_epoch (KIP-360); v4 answers PRODUCER_FENCED where
older versions get INVALID_PRODUCER_EPOCH (KIP-588); v5 changes only error handling.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.handlers.add_partitions_to_txn import fenced
from samsa.broker.lifecycle import ProducerIdsUnavailableError
from samsa.broker.security.acl_requests import init_producer_id_error, producer_principals
from samsa.broker.wire import build, field, ms
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.init_producer_id import v0, v1, v2, v3, v4, v5
    InitProducerIdRequest = (v0.InitProducerIdRequest | v1.InitProducerIdRequest | v2.InitProducerIdRequest
                             | v3.InitProducerIdRequest | v4.InitProducerIdRequest | v5.InitProducerIdRequest)
    InitProducerIdResponse = (v0.InitProducerIdResponse | v1.InitProducerIdResponse | v2.InitProducerIdResponse
                              | v3.InitProducerIdResponse | v4.InitProducerIdResponse | v5.InitProducerIdResponse)

API = ApiSpec(key=22, min_version=0, max_version=5)



def handle_init_producer_id(request: InitProducerIdRequest, ctx: RequestContext) -> InitProducerIdResponse:
    cls: type[InitProducerIdResponse] = response_class(22, ctx.version)
    denied = init_producer_id_error(ctx, request.transactional_id)
    if denied:
        return build(cls, {"throttle_time": 0, "error_code": denied, "producer_id": -1, "producer_epoch": -1})
    if request.transactional_id is not None:
        result = ctx.broker.txn.init_producer_id(
            request.transactional_id, ms(request.transaction_timeout), int(field(request, "producer_id", -1)),
            int(field(request, "producer_epoch", -1)), ctx.now_ms)
        producer_principals.issued(result.producer_id, ctx.principal)
        return build(cls, {"throttle_time": 0, "error_code": fenced(result.error, ctx.version, 4),
                           "producer_id": result.producer_id, "producer_epoch": result.producer_epoch})
    try:
        producer_id = ctx.broker.producer_ids.generate()
    except ProducerIdsUnavailableError:
        # The next block is on its way from the controller; clients retry this error (Kafka does the same).
        return build(cls, {"throttle_time": 0, "error_code": ErrorCode.coordinator_load_in_progress,
                           "producer_id": -1, "producer_epoch": -1})
    producer_principals.issued(producer_id, ctx.principal)
    return build(cls, {"throttle_time": 0, "error_code": ErrorCode.none, "producer_id": producer_id,
                       "producer_epoch": 0})
