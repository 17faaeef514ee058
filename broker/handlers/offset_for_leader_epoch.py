"""OffsetForLeaderEpoch (key 23), v2-v4.

For each partition, the end offset of the requested leader epoch: the start offset of the next
higher epoch in the leader-epoch cache, or the log end offset for the current epoch (KIP-101/279).
Consumers use it to detect log truncation (KIP-320); v3 adds replica_id, v4 is flexible.
"""

from __future__ import annotations

from typing import Any

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.wire import build, field
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class

API = ApiSpec(key=23, min_version=2, max_version=4)


def _lookup(ctx: RequestContext, topic: str, p: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"error_code": ErrorCode.none, "partition": p.partition, "leader_epoch": -1,
                           "end_offset": -1}
    partition = ctx.broker.replica_manager.get_partition(topic, p.partition)
    if partition is None:
        out["error_code"] = ctx.broker.replica_manager.missing_error(topic, p.partition)
        return out
    error = partition.leader_error(ctx.broker.node_id, field(p, "current_leader_epoch", -1))
    if error is not None:
        out["error_code"] = error
        return out
    epoch, end_offset = partition.log.end_offset_for_epoch(p.leader_epoch)
    out.update(leader_epoch=epoch, end_offset=end_offset)
    return out


def handle_offset_for_leader_epoch(request: Any, ctx: RequestContext) -> Any:
    topics = [{"topic": t.topic, "partitions": [_lookup(ctx, t.topic, p) for p in t.partitions]}
              for t in request.topics]
    return build(response_class(23, ctx.version), {"throttle_time": 0, "topics": topics})
