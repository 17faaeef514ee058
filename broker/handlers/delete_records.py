"""DeleteRecords (key 21), v0-v2.

Advances a partition's log start offset (offset -1 means "up to the high watermark"); the new low
watermark is returned. An offset past the high watermark is OFFSET_OUT_OF_RANGE. v2 is flexible.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.handlers.metadata import INTERNAL_TOPICS
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_requests import topic_authorization
from samsa.broker.wire import build
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class
from samsa.storage.errors import StorageError

if TYPE_CHECKING:
    from kio.schema.delete_records import v0, v1, v2
    DeleteRecordsRequest = v0.DeleteRecordsRequest | v1.DeleteRecordsRequest | v2.DeleteRecordsRequest
    DeleteRecordsResponse = v0.DeleteRecordsResponse | v1.DeleteRecordsResponse | v2.DeleteRecordsResponse

API = ApiSpec(key=21, min_version=0, max_version=2)


HIGH_WATERMARK = -1


@dataclass(frozen=True, slots=True)
class PartitionDeletion:
    """One partition's answer (a DeleteRecordsPartitionResult before it is built for the version)."""

    error: ErrorCode
    low_watermark: int = -1


def _delete(ctx: RequestContext, topic: str, partition_index: int, offset: int) -> PartitionDeletion:
    partition = ctx.broker.replica_manager.get_partition(topic, partition_index)
    if partition is None:
        return PartitionDeletion(ctx.broker.replica_manager.missing_error(topic, partition_index))
    if topic in INTERNAL_TOPICS:
        return PartitionDeletion(ErrorCode.invalid_topic_exception)
    if partition.leader_id != ctx.broker.node_id:
        return PartitionDeletion(ErrorCode.not_leader_or_follower)
    log = partition.log
    target = log.high_watermark if offset == HIGH_WATERMARK else offset
    if target < 0 or target > log.high_watermark:
        return PartitionDeletion(ErrorCode.offset_out_of_range)
    try:
        log.maybe_increment_log_start_offset(target)
    except StorageError as e:
        return PartitionDeletion(ErrorCode(e.error_code))
    return PartitionDeletion(ErrorCode.none, log.log_start_offset)


def handle_delete_records(request: DeleteRecordsRequest, ctx: RequestContext) -> DeleteRecordsResponse:
    deletable = topic_authorization(ctx, AclOperation.DELETE)  # KafkaApis: DELETE, decided before existence
    denied = PartitionDeletion(ErrorCode.topic_authorization_failed)
    results: list[tuple[str, list[tuple[int, PartitionDeletion]]]] = [
        (t.name, [(p.partition_index, _delete(ctx, t.name, p.partition_index, p.offset) if deletable(t.name)
                   else denied) for p in t.partitions])
        for t in request.topics]
    return _response(ctx, results)


def _response(ctx: RequestContext, results: list[tuple[str, list[tuple[int, PartitionDeletion]]]]
              ) -> DeleteRecordsResponse:
    """The one place the answers become the kio response of the request's version."""
    cls: type[DeleteRecordsResponse] = response_class(21, ctx.version)
    return build(cls, {"throttle_time": 0, "topics": [
        {"name": name, "partitions": [{"partition_index": index, "low_watermark": r.low_watermark,
                                       "error_code": r.error} for index, r in partitions]}
        for name, partitions in results]})
