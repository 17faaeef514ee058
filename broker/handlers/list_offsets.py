"""ListOffsets (key 2), v1-v10.

v1 returns one offset per partition; v2 adds isolation_level; v4 adds current_leader_epoch and the
returned leader_epoch (KIP-320); v6 is flexible; v7 allows -3 (max timestamp, KIP-734); v8 -4
(earliest local, KIP-405); v9 -5 (earliest pending upload); v10 adds a timeout (KIP-1075).
Without tiered storage, earliest-local equals earliest and nothing is pending upload.
"""

from __future__ import annotations

from typing import Any

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.wire import build, field
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class
from samsa.storage.errors import StorageError

API = ApiSpec(key=2, min_version=1, max_version=10)

LATEST = -1
EARLIEST = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
EARLIEST_PENDING_UPLOAD = -5
READ_COMMITTED = 1


def _lookup(ctx: RequestContext, topic: str, p: Any, isolation: int) -> dict[str, Any]:
    out: dict[str, Any] = {"partition_index": p.partition_index, "error_code": ErrorCode.none,
                           "timestamp": -1, "offset": -1, "leader_epoch": -1}
    partition = ctx.broker.replica_manager.get_partition(topic, p.partition_index)
    if partition is None:
        out["error_code"] = ctx.broker.replica_manager.missing_error(topic, p.partition_index)
        return out
    error = partition.leader_error(ctx.broker.node_id, field(p, "current_leader_epoch", -1))
    if error is not None:
        out["error_code"] = error
        return out
    log = partition.log
    # read_committed sees up to the last stable offset (the first offset of the earliest open transaction)
    upper = partition.last_stable_offset if isolation == READ_COMMITTED else log.high_watermark
    ts = p.timestamp
    try:
        if ts == LATEST:
            # Kafka's leader assigns its epoch in the epoch cache when it becomes leader, so the cache's
            # latest epoch, which Kafka answers, is the current leader epoch (also for an empty log).
            out.update(offset=upper, leader_epoch=partition.leader_epoch)
        elif ts in (EARLIEST, EARLIEST_LOCAL):
            # Kafka answers epochForOffset(logStartOffset): the epoch of the last cache entry starting at
            # or before it -- with the become-leader entry above, the leader's epoch if there is none yet.
            start = log.log_start_offset
            entries = log.epoch_entries
            epoch = next((e for e, offset in reversed(entries) if offset <= start), -1)
            out.update(offset=start, leader_epoch=epoch if entries else partition.leader_epoch)
        elif ts == EARLIEST_PENDING_UPLOAD:
            pass  # no remote tier, so nothing is pending upload: offset -1, as Kafka answers without one
        elif ts == MAX_TIMESTAMP:
            offset, max_ts, batch_epoch = log.max_timestamp_offset()
            if 0 <= offset < upper:
                out.update(offset=offset, timestamp=max_ts, leader_epoch=batch_epoch)
        elif ts < 0:
            out["error_code"] = ErrorCode.invalid_request
        else:
            found = log.fetch_offset_for_timestamp(ts)
            if found is not None and found[0] < upper:
                out.update(offset=found[0], timestamp=found[1], leader_epoch=found[2])
    except StorageError as e:
        out["error_code"] = ErrorCode(e.error_code)
    return out


def handle_list_offsets(request: Any, ctx: RequestContext) -> Any:
    """A partition named more than once in the request, in one topic entry or across several, is
    looked up not at all: it gets one INVALID_REQUEST answer (Kafka's ListOffsetsRequest.duplicatePartitions
    and ReplicaManager.fetchOffset, which answers per distinct partition). So one request costs at
    most one lookup per distinct partition, however often it repeats one."""
    isolation = field(request, "isolation_level", 0)
    first: dict[tuple[str, int], Any] = {}
    duplicated: set[tuple[str, int]] = set()
    for t in request.topics:
        for p in t.partitions:
            key = (t.name, p.partition_index)
            if key in first:
                duplicated.add(key)
            else:
                first[key] = p
    topics: dict[str, list[dict[str, Any]]] = {}
    for (name, index), p in first.items():
        if (name, index) in duplicated:
            out: dict[str, Any] = {"partition_index": index, "error_code": ErrorCode.invalid_request,
                                   "timestamp": -1, "offset": -1, "leader_epoch": -1}
        else:
            out = _lookup(ctx, name, p, isolation)
        topics.setdefault(name, []).append(out)
    return build(response_class(2, ctx.version), {"throttle_time": 0, "topics": [
        {"name": name, "partitions": partitions} for name, partitions in topics.items()]})
