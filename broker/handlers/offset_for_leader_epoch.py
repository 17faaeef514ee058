"""OffsetForLeaderEpoch (key 23), v2-v4.

For each partition, the end offset of the requested leader epoch: the start offset of the next
higher epoch in the leader-epoch cache, or the log end offset for the current epoch (KIP-101/279).
Consumers use it to detect log truncation (KIP-320); v3 adds replica_id, v4 is flexible.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.security.acl_requests import offset_for_leader_epoch_authorization
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

if TYPE_CHECKING:
    from kio.schema.offset_for_leader_epoch import v2, v3, v4
    from kio.schema.offset_for_leader_epoch.v2 import request as v2_request
    from kio.schema.offset_for_leader_epoch.v3 import request as v3_request
    from kio.schema.offset_for_leader_epoch.v4 import request as v4_request
    OffsetForLeaderEpochRequest = (v2.OffsetForLeaderEpochRequest | v3.OffsetForLeaderEpochRequest
                                   | v4.OffsetForLeaderEpochRequest)
    OffsetForLeaderEpochResponse = (v2.OffsetForLeaderEpochResponse | v3.OffsetForLeaderEpochResponse
                                    | v4.OffsetForLeaderEpochResponse)
    OffsetForLeaderPartition = (v2_request.OffsetForLeaderPartition | v3_request.OffsetForLeaderPartition
                                | v4_request.OffsetForLeaderPartition)

API = ApiSpec(key=23, min_version=2, max_version=4)



@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    """One partition's answer (an EpochEndOffset before it is built for the version)."""

    error: ErrorCode
    leader_epoch: int = -1
    end_offset: int = -1


def _lookup(ctx: RequestContext, topic: str, p: OffsetForLeaderPartition) -> EpochEndOffset:
    partition = ctx.broker.replica_manager.get_partition(topic, p.partition)
    if partition is None:
        return EpochEndOffset(ctx.broker.replica_manager.missing_error(topic, p.partition))
    error = partition.leader_error(ctx.broker.node_id, p.current_leader_epoch)
    if error is not None:
        return EpochEndOffset(error)
    epoch, end_offset = partition.log.end_offset_for_epoch(p.leader_epoch)
    return EpochEndOffset(ErrorCode.none, leader_epoch=epoch, end_offset=end_offset)


def handle_offset_for_leader_epoch(request: OffsetForLeaderEpochRequest,
                                   ctx: RequestContext) -> OffsetForLeaderEpochResponse:
    allowed = offset_for_leader_epoch_authorization(ctx)  # CLUSTER_ACTION, else DESCRIBE per topic
    denied = EpochEndOffset(ErrorCode.topic_authorization_failed)
    topics: list[tuple[str, list[tuple[int, EpochEndOffset]]]] = [
        (t.topic, [(p.partition, _lookup(ctx, t.topic, p) if allowed(t.topic) else denied) for p in t.partitions])
        for t in request.topics]
    return _response(ctx, topics)


def _response(ctx: RequestContext, topics: list[tuple[str, list[tuple[int, EpochEndOffset]]]]
              ) -> OffsetForLeaderEpochResponse:
    """The one place the answers become the kio response of the request's version."""
    cls: type[OffsetForLeaderEpochResponse] = response_class(23, ctx.version)
    return build(cls, {"throttle_time": 0, "topics": [
        {"topic": name, "partitions": [
            {"error_code": r.error, "partition": index, "leader_epoch": r.leader_epoch, "end_offset": r.end_offset}
            for index, r in partitions]}
        for name, partitions in topics]})
