"""ListOffsets (key 2), v1-v11.

v1 returns one offset per partition; v2 adds isolation_level; v4 adds current_leader_epoch and the
returned leader_epoch (KIP-320); v6 is flexible; v7 allows -3 (max timestamp, KIP-734); v8 -4
(earliest local, KIP-405); v9 -5 (latest tiered, KIP-1005); v10 adds a timeout (KIP-1075); v11 -6
(earliest pending upload, KIP-1023). Without tiered storage, earliest-local equals earliest and nothing is
tiered or pending upload (offset -1). Another negative timestamp, or -6 before v11, is UNSUPPORTED_VERSION,
as Kafka 4.4.0 answers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.security.acl import AclOperation
from samsa.broker.security.acl_requests import topic_authorization
from samsa.broker.wire import build, field
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class
from samsa.storage.errors import StorageError

if TYPE_CHECKING:
    from kio.schema.list_offsets import v1, v2, v3, v4, v5, v6, v7, v8, v9, v10, v11
    ListOffsetsRequest = (v1.ListOffsetsRequest | v2.ListOffsetsRequest | v3.ListOffsetsRequest | v4.ListOffsetsRequest
                          | v5.ListOffsetsRequest | v6.ListOffsetsRequest | v7.ListOffsetsRequest
                          | v8.ListOffsetsRequest | v9.ListOffsetsRequest | v10.ListOffsetsRequest
                          | v11.ListOffsetsRequest)
    ListOffsetsResponse = (v1.ListOffsetsResponse | v2.ListOffsetsResponse | v3.ListOffsetsResponse
                           | v4.ListOffsetsResponse | v5.ListOffsetsResponse | v6.ListOffsetsResponse
                           | v7.ListOffsetsResponse | v8.ListOffsetsResponse | v9.ListOffsetsResponse
                           | v10.ListOffsetsResponse | v11.ListOffsetsResponse)

API = ApiSpec(key=2, min_version=1, max_version=11)

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
LATEST_TIERED = -5
EARLIEST_PENDING_UPLOAD = -6
READ_COMMITTED = 1



class PartitionQuery(Protocol):
    """The fields of a request's ListOffsetsPartition (every version) the lookup reads."""

    @property
    def partition_index(self) -> int: ...

    @property
    def timestamp(self) -> int: ...


@dataclass(frozen=True, slots=True)
class PartitionOffset:
    """One partition's answer (a ListOffsetsPartitionResponse before it is built for the version)."""

    error: ErrorCode
    offset: int = -1
    timestamp: int = -1
    leader_epoch: int = -1


def _lookup(ctx: RequestContext, topic: str, p: PartitionQuery, isolation: int) -> PartitionOffset:
    partition = ctx.broker.replica_manager.get_partition(topic, p.partition_index)
    if partition is None:
        return PartitionOffset(ctx.broker.replica_manager.missing_error(topic, p.partition_index))
    current_leader_epoch: int = field(p, "current_leader_epoch", -1)
    error = partition.leader_error(ctx.broker.node_id, current_leader_epoch)
    if error is not None:
        return PartitionOffset(error)
    log = partition.log
    # read_committed sees up to the last stable offset (the first offset of the earliest open transaction)
    upper = partition.last_stable_offset if isolation == READ_COMMITTED else log.high_watermark
    ts = p.timestamp
    try:
        if ts == LATEST:
            # Kafka's leader assigns its epoch in the epoch cache when it becomes leader, so the cache's
            # latest epoch, which Kafka answers, is the current leader epoch (also for an empty log).
            return PartitionOffset(ErrorCode.none, offset=upper, leader_epoch=partition.leader_epoch)
        elif ts in (EARLIEST, EARLIEST_LOCAL):
            # Kafka answers epochForOffset(logStartOffset): the epoch of the last cache entry starting at
            # or before it -- with the become-leader entry above, the leader's epoch if there is none yet.
            start = log.log_start_offset
            entries = log.epoch_entries
            epoch = next((e for e, offset in reversed(entries) if offset <= start), -1)
            return PartitionOffset(ErrorCode.none, offset=start,
                                   leader_epoch=epoch if entries else partition.leader_epoch)
        elif ts == LATEST_TIERED or (ts == EARLIEST_PENDING_UPLOAD and ctx.version >= 11):
            pass  # no remote tier: nothing tiered or pending upload, offset -1, as Kafka answers without one
        elif ts == MAX_TIMESTAMP:
            offset, max_ts, batch_epoch = log.max_timestamp_offset()
            if 0 <= offset < upper:
                return PartitionOffset(ErrorCode.none, offset=offset, timestamp=max_ts, leader_epoch=batch_epoch)
        elif ts < 0:
            return PartitionOffset(ErrorCode.unsupported_version)
        else:
            found = log.fetch_offset_for_timestamp(ts)
            if found is not None and found[0] < upper:
                return PartitionOffset(ErrorCode.none, offset=found[0], timestamp=found[1], leader_epoch=found[2])
    except StorageError as e:
        return PartitionOffset(ErrorCode(e.error_code))
    return PartitionOffset(ErrorCode.none)


def handle_list_offsets(request: ListOffsetsRequest, ctx: RequestContext) -> ListOffsetsResponse:
    """A partition named more than once in the request, in one topic entry or across several, is
    looked up not at all: it gets one INVALID_REQUEST answer (Kafka's ListOffsetsRequest.duplicatePartitions
    and ReplicaManager.fetchOffset, which answers per distinct partition). So one request costs at
    most one lookup per distinct partition, however often it repeats one."""
    isolation: int = field(request, "isolation_level", 0)
    first: dict[tuple[str, int], PartitionQuery] = {}
    duplicated: set[tuple[str, int]] = set()
    for t in request.topics:
        for p in t.partitions:
            key = (t.name, p.partition_index)
            if key in first:
                duplicated.add(key)
            else:
                first[key] = p
    topics: dict[str, list[tuple[int, PartitionOffset]]] = {}
    describable = topic_authorization(ctx, AclOperation.DESCRIBE)  # KafkaApis: DESCRIBE, before existence
    for (name, index), query in first.items():
        if not describable(name):
            out = PartitionOffset(ErrorCode.topic_authorization_failed)
        elif (name, index) in duplicated:
            out = PartitionOffset(ErrorCode.invalid_request)
        else:
            out = _lookup(ctx, name, query, isolation)
        topics.setdefault(name, []).append((index, out))
    return _response(ctx, topics)


def _response(ctx: RequestContext, topics: dict[str, list[tuple[int, PartitionOffset]]]) -> ListOffsetsResponse:
    """The one place the answers become the kio response of the request's version."""
    cls: type[ListOffsetsResponse] = response_class(2, ctx.version)
    return build(cls, {"throttle_time": 0, "topics": [
        {"name": name, "partitions": [
            {"partition_index": index, "error_code": r.error, "timestamp": r.timestamp, "offset": r.offset,
             "leader_epoch": r.leader_epoch} for index, r in partitions]}
        for name, partitions in topics.items()]})
