"""DeleteRecords (key 21), v0-v2.

Advances a partition's log start offset (offset -1 means "up to the high watermark"); the new low
watermark is returned. An offset past the high watermark is OFFSET_OUT_OF_RANGE. v2 is flexible.
"""

from __future__ import annotations

from typing import Any

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.handlers.metadata import INTERNAL_TOPICS
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class
from samsa.storage.errors import StorageError

API = ApiSpec(key=21, min_version=0, max_version=2)

HIGH_WATERMARK = -1


def _delete(ctx: RequestContext, topic: str, partition_index: int, offset: int) -> dict[str, Any]:
    out: dict[str, Any] = {"partition_index": partition_index, "low_watermark": -1, "error_code": ErrorCode.none}
    partition = ctx.broker.replica_manager.get_partition(topic, partition_index)
    if partition is None:
        out["error_code"] = ctx.broker.replica_manager.missing_error(topic, partition_index)
        return out
    if topic in INTERNAL_TOPICS:
        out["error_code"] = ErrorCode.invalid_topic_exception
        return out
    if partition.leader_id != ctx.broker.node_id:
        out["error_code"] = ErrorCode.not_leader_or_follower
        return out
    log = partition.log
    target = log.high_watermark if offset == HIGH_WATERMARK else offset
    if target < 0 or target > log.high_watermark:
        out["error_code"] = ErrorCode.offset_out_of_range
        return out
    try:
        log.maybe_increment_log_start_offset(target)
    except StorageError as e:
        out["error_code"] = ErrorCode(e.error_code)
        return out
    out["low_watermark"] = log.log_start_offset
    return out


def handle_delete_records(request: Any, ctx: RequestContext) -> Any:
    topics = [
        {"name": t.name, "partitions": [_delete(ctx, t.name, p.partition_index, p.offset) for p in t.partitions]}
        for t in request.topics
    ]
    return build(response_class(21, ctx.version), {"throttle_time": 0, "topics": topics})
