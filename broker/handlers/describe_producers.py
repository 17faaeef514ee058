"""DescribeProducers (key 61), v0.

The active producers of each partition (from the partition's producer state), as
`kafka-transactions.sh describe-producers` shows them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_requests import topic_authorization
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.describe_producers import v0
    DescribeProducersRequest = v0.DescribeProducersRequest
    DescribeProducersResponse = v0.DescribeProducersResponse

API = ApiSpec(key=61, min_version=0, max_version=0)



def _partition(ctx: RequestContext, topic: str, index: int) -> dict[str, Any]:
    out: dict[str, Any] = {"partition_index": index, "error_code": ErrorCode.none, "error_message": None,
                           "active_producers": []}
    partition = ctx.broker.replica_manager.get_partition(topic, index)
    if partition is None:
        out["error_code"] = ErrorCode.unknown_topic_or_partition
    elif partition.leader_id != ctx.broker.node_id:
        out["error_code"] = ErrorCode.not_leader_or_follower
    else:
        out["active_producers"] = [
            {"producer_id": e.producer_id, "producer_epoch": e.producer_epoch, "last_sequence": e.last_seq,
             "last_timestamp": e.last_timestamp_ms, "coordinator_epoch": e.coordinator_epoch,
             "current_txn_start_offset": -1 if e.current_txn_first_offset is None else e.current_txn_first_offset}
            for e in sorted(partition.log.producer_states.values(), key=lambda e: e.producer_id)
        ]
    return out


def handle_describe_producers(request: DescribeProducersRequest, ctx: RequestContext) -> DescribeProducersResponse:
    readable = topic_authorization(ctx, AclOperation.READ)  # KafkaApis: READ on each topic
    topics = [{"name": t.name, "partitions": [
        _partition(ctx, t.name, p) if readable(t.name) else
        {"partition_index": p, "error_code": ErrorCode.topic_authorization_failed, "error_message": None,
         "active_producers": []} for p in t.partition_indexes]} for t in request.topics]
    cls: type[DescribeProducersResponse] = response_class(61, ctx.version)
    return build(cls, {"throttle_time": 0, "topics": topics})
