"""Fetch (key 1), v4-v18.

v4 adds isolation_level, last_stable_offset and aborted_transactions; v5 log_start_offset; v7 fetch
sessions (KIP-227: we answer session_id 0, i.e. every fetch is a full one, which clients accept);
v9 current_leader_epoch (KIP-320); v11 rack_id/preferred_read_replica; v12 is flexible and adds
diverging_epoch; v13 identifies topics by topic_id (KIP-516); v15 moves replica_id into
replica_state; v16-v17 add node_endpoints and replica_directory_id tags; v18 adds the replica's
high_watermark tag (KIP-1166, for KRaft voters: a broker's answer does not use it).

A follower's fetch (replica_id >= 0) is how replication works: the leader records the follower's
position (its fetch offset), which may advance the high watermark, answers a last_fetched_epoch that
its own epoch history contradicts with diverging_epoch (the follower truncates there, KIP-595's check
as Kafka's replicas use it since 2.7), and returns records up to its log end rather than the high
watermark.

A consumer's fetch returns whole batches starting with the batch that contains fetch_offset, never past the high
watermark (read_committed: the last stable offset, with the aborted transactions in that range; the last
stable offset is reported at either isolation level, as Kafka does), at
least one batch for the first partition with data (so a large record never blocks a consumer), and
waits up to max_wait_ms for min_bytes.

Whatever max_bytes a client asks, the broker's `fetch.max.bytes` caps the response (and min_bytes with
it), for consumers and followers alike, as Kafka's KafkaApis does; the first batch still goes out
whole however large it is ("at least one batch"), so a big record never blocks a reader. A follower
asks for `replica.fetch.response.max.bytes` itself (broker.replica_fetcher).

Record bytes are not read into the response when they are large: a partition's records of at least
FILE_SEND_MIN_BYTES, and every one once the response holds RESPONSE_MEMORY_BYTES in memory, go as a
FileRecords slice of the segment that the connection sends in bounded chunks as the socket drains
(broker/connection.py), so many slow readers of a large partition hold descriptors, not bytes.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NotRequired, TypedDict

import anyio

from samsa.broker.context import ApiSpec, RequestContext
from samsa.broker.replica_manager import Partition
from samsa.broker.security.acl_requests import fetch_readable
from samsa.broker.wire import build, field, ms
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import LARGE_WRITE_BYTES, response_class
from samsa.storage.errors import StorageError
from samsa.storage.file_records import FileRecords
from samsa.storage.log import FetchDataInfo

if TYPE_CHECKING:
    from kio.schema.fetch import v4, v5, v6, v7, v8, v9, v10, v11, v12, v13, v14, v15, v16, v17, v18
    FetchRequest = (v4.FetchRequest | v5.FetchRequest | v6.FetchRequest | v7.FetchRequest | v8.FetchRequest
                    | v9.FetchRequest | v10.FetchRequest | v11.FetchRequest | v12.FetchRequest | v13.FetchRequest
                    | v14.FetchRequest | v15.FetchRequest | v16.FetchRequest | v17.FetchRequest | v18.FetchRequest)
    FetchResponse = (v4.FetchResponse | v5.FetchResponse | v6.FetchResponse | v7.FetchResponse | v8.FetchResponse
                     | v9.FetchResponse | v10.FetchResponse | v11.FetchResponse | v12.FetchResponse | v13.FetchResponse
                     | v14.FetchResponse | v15.FetchResponse | v16.FetchResponse | v17.FetchResponse
                     | v18.FetchResponse)

    # The response at once, or a long poll that answers later (Kafka's DelayedFetch).
    FetchAnswer = FetchResponse | Awaitable[FetchResponse]

API = ApiSpec(key=1, min_version=4, max_version=18)

ZERO_UUID = uuid.UUID(int=0)
READ_COMMITTED = 1
# A partition's records this large are sent from the segment file, not read into memory...
FILE_SEND_MIN_BYTES = 64 * 1024
# ... and so is every partition's (of at least LARGE_WRITE_BYTES) once a response holds this much in memory.
RESPONSE_MEMORY_BYTES = 1024 * 1024
# The response encoder keeps parts of at least LARGE_WRITE_BYTES by reference; a FileRecords must be one.
assert FILE_SEND_MIN_BYTES >= LARGE_WRITE_BYTES


# A partition's answer is a TypedDict, not a dataclass: it is the very dict `build` reads, so typing it
# costs the fetch path no object per partition.
class AbortedTransaction(TypedDict):
    producer_id: int
    first_offset: int


class EpochEndOffset(TypedDict):
    epoch: int
    end_offset: int


class LeaderIdAndEpoch(TypedDict):
    leader_id: int
    leader_epoch: int


class PartitionData(TypedDict):
    """One partition's answer (a PartitionData before it is built for the version)."""

    partition_index: int
    error_code: ErrorCode
    high_watermark: int
    last_stable_offset: int
    log_start_offset: int
    aborted_transactions: list[AbortedTransaction] | None
    preferred_read_replica: int
    records: bytes | FileRecords
    diverging_epoch: NotRequired[EpochEndOffset]  # v12+ (a follower's fetch)
    current_leader: NotRequired[LeaderIdAndEpoch]  # v12+ (KIP-951)


class FetchableTopic(TypedDict):
    """One topic's answers (a FetchableTopicResponse: `topic` before v13, `topic_id` from v13, each the key
    the request named it by; `build` keeps the one the version has)."""

    topic: str | uuid.UUID
    topic_id: str | uuid.UUID
    partitions: list[PartitionData]


def _records(data: FetchDataInfo, held: list[int]) -> bytes | FileRecords:
    """The bytes of a read, or a FileRecords slice of the segment when they are large (see the module
    docstring); `held` counts the bytes the response already holds in memory (one element, updated)."""
    size = data.size_bytes
    if size == 0:
        return b""
    if len(data.regions) == 1 and size >= LARGE_WRITE_BYTES and (
            size >= FILE_SEND_MIN_BYTES or held[0] >= RESPONSE_MEMORY_BYTES):
        region = data.regions[0]  # its fd is valid only until the next storage call: take one of our own now
        try:
            return FileRecords.slice_of(region.fd, region.position, region.size_bytes)
        except StorageError:
            pass  # no descriptor to spare (EMFILE): serving the bytes from memory beats failing the fetch
    held[0] += size
    return data.read_bytes()


@dataclass(slots=True)
class _Wanted:
    key: str | uuid.UUID  # topic name (before v13) or topic id, as the request named it
    partition_id: int
    partition: Partition | None
    error: ErrorCode
    fetch_offset: int
    current_leader_epoch: int
    partition_max_bytes: int
    last_fetched_epoch: int = -1


def _resolve(request: FetchRequest, ctx: RequestContext, replica: int = -1
             ) -> list[tuple[str | uuid.UUID, list[_Wanted]]]:
    broker = ctx.broker
    readable = fetch_readable(ctx, replica)  # KafkaApis: CLUSTER_ACTION for a follower, READ per topic
    by_id = ctx.version >= 13
    image = broker.image
    out: list[tuple[str | uuid.UUID, list[_Wanted]]] = []
    for t in request.topics:
        key: str | uuid.UUID
        name: str | None
        if by_id:  # the request was decoded with this version's class: v13+ topics have topic_id only
            topic_id: uuid.UUID = field(t, "topic_id")
            key = topic_id
            topic = image.topics_by_id.get(str(topic_id))
            name = topic.name if topic is not None else None
            missing = ErrorCode.unknown_topic_id
        else:
            key = name = field(t, "topic")
            missing = ErrorCode.unknown_topic_or_partition
        wanted = []
        for p in t.partitions:
            partition = broker.replica_manager.get_partition(name, p.partition) if name is not None else None
            error = ErrorCode.none
            if name is not None and not readable(name):
                partition, error = None, ErrorCode.topic_authorization_failed  # before existence: no leak
            elif partition is None:
                error = missing if name is None else broker.replica_manager.missing_error(name, p.partition)
            wanted.append(_Wanted(key, p.partition, partition, error, p.fetch_offset,
                                  field(p, "current_leader_epoch", -1), p.partition_max_bytes,
                                  field(p, "last_fetched_epoch", -1)))
        out.append((key, wanted))
    return out


def _read_for_follower(w: _Wanted, ctx: RequestContext, budget: int, first: bool, replica: int,
                       result: PartitionData, held: list[int]) -> PartitionData:
    p = w.partition
    assert p is not None
    log = p.log
    result["high_watermark"] = log.high_watermark
    result["log_start_offset"] = log.log_start_offset
    if replica not in p.replicas:
        result["error_code"] = ErrorCode.not_leader_or_follower
        return result
    diverging = p.divergence(w.last_fetched_epoch, w.fetch_offset)
    if diverging is not None:
        # The follower's log diverges from ours after (epoch, end_offset): it truncates there.
        result["diverging_epoch"] = {"epoch": diverging[0], "end_offset": diverging[1]}
        return result
    if not log.log_start_offset <= w.fetch_offset <= log.log_end_offset:
        result["error_code"] = ErrorCode.offset_out_of_range
        return result
    if p.update_follower(replica, w.fetch_offset, ctx.now_ms):
        result["high_watermark"] = log.high_watermark
    try:
        data = log.read(w.fetch_offset, max_bytes=max(0, min(w.partition_max_bytes, budget)), max_offset=None,
                        min_one_batch=first)
        result["records"] = _records(data, held)
    except StorageError as e:
        result["error_code"] = ErrorCode(e.error_code)
    result["last_stable_offset"] = log.high_watermark
    return result


def _read(w: _Wanted, ctx: RequestContext, budget: int, first: bool, isolation: int, replica: int,
          held: list[int]) -> PartitionData:
    result: PartitionData = {
        "partition_index": w.partition_id,
        "error_code": w.error,
        "high_watermark": -1,
        "last_stable_offset": -1,
        "log_start_offset": -1,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": b"",
    }
    p = w.partition
    if p is None or w.error != ErrorCode.none:
        return result
    error = p.leader_error(ctx.broker.node_id, w.current_leader_epoch)
    if error is None and replica < 0 and ctx.broker.lifecycle.presumed_fenced():
        error = ErrorCode.not_leader_or_follower  # perhaps deposed without knowing yet (see presumed_fenced)
    if error is not None:
        result["error_code"] = error
        return result
    if replica >= 0:
        return _read_for_follower(w, ctx, budget, first, replica, result, held)
    log = p.log
    high_watermark = log.high_watermark
    # Reported whatever the isolation level, as Kafka does (a read_uncommitted fetch still reads up to the
    # high watermark); cached by the partition until a transaction begins or ends.
    last_stable = p.last_stable_offset
    result["current_leader"] = {"leader_id": p.leader_id, "leader_epoch": p.leader_epoch}
    try:
        data = log.read(
            w.fetch_offset,
            max_bytes=max(0, min(w.partition_max_bytes, budget)),
            max_offset=last_stable if isolation == READ_COMMITTED else high_watermark,
            min_one_batch=first,
        )
        records = _records(data, held)
        aborted: list[AbortedTransaction] | None = None
        if isolation == READ_COMMITTED:
            # Aborted transactions overlapping what is returned, so the client drops their records.
            aborted = [{"producer_id": a.producer_id, "first_offset": a.first_offset}
                       for a in p.aborted_transactions(w.fetch_offset, last_stable)] if records else []
    except StorageError as e:
        result["error_code"] = ErrorCode(e.error_code)
        return result
    result["high_watermark"] = high_watermark
    result["last_stable_offset"] = last_stable
    result["log_start_offset"] = log.log_start_offset
    result["records"] = records
    result["aborted_transactions"] = aborted
    return result


def _collect(
    resolved: Sequence[tuple[str | uuid.UUID, list[_Wanted]]], ctx: RequestContext, max_bytes: int, isolation: int,
    replica: int = -1,
) -> tuple[list[FetchableTopic], int, bool]:
    total = 0
    any_error = False
    responses: list[FetchableTopic] = []
    held = [0]
    for key, wanted in resolved:
        partitions: list[PartitionData] = []
        for w in wanted:
            r = _read(w, ctx, max_bytes - total, total == 0, isolation, replica, held)
            total += len(r["records"])
            any_error = any_error or r["error_code"] != ErrorCode.none
            partitions.append(r)
        responses.append({"topic": key, "topic_id": key, "partitions": partitions})
    return responses, total, any_error


def handle_fetch(request: FetchRequest, ctx: RequestContext) -> FetchAnswer:
    """The response, when it can be given at once (data is there, or max_wait is 0); else a coroutine
    that long-polls up to max_wait for min_bytes. The server answers the first kind without a task."""
    cls: type[FetchResponse] = response_class(1, ctx.version)
    session_id: int = field(request, "session_id", 0)
    session_epoch: int = field(request, "session_epoch", -1)
    if session_id != 0:
        # We never hand out sessions, so an incremental fetch names one we don't know.
        return build(cls, {"error_code": ErrorCode.fetch_session_id_not_found, "session_id": 0, "responses": ()})
    del session_epoch
    max_wait_ms = ms(request.max_wait)
    min_bytes: int = request.min_bytes
    # KafkaApis: min(request max_bytes, fetch.max.bytes), and min_bytes no larger than that.
    max_bytes: int = min(field(request, "max_bytes", 0x7FFFFFFF), ctx.broker.config.get_int("fetch.max.bytes"))
    min_bytes = min(min_bytes, max_bytes)
    isolation: int = field(request, "isolation_level", 0)
    replica_state = field(request, "replica_state", None)
    replica = int(replica_state.replica_id) if replica_state is not None else int(field(request, "replica_id", -1))
    resolved = _resolve(request, ctx, replica)
    responses, total, any_error = _collect(resolved, ctx, max_bytes, isolation, replica)
    if max_wait_ms > 0 and total < min_bytes and not any_error:
        return _long_poll(cls, resolved, ctx, max_wait_ms, min_bytes, max_bytes, isolation, replica)
    return build(cls, {"throttle_time": 0, "error_code": ErrorCode.none, "session_id": 0, "responses": responses})


async def _long_poll(cls: type[FetchResponse], resolved: Sequence[tuple[str | uuid.UUID, list[_Wanted]]],
                     ctx: RequestContext, max_wait_ms: int, min_bytes: int, max_bytes: int, isolation: int,
                     replica: int) -> FetchResponse:
    """Kafka's DelayedFetch: read again whenever a partition wakes us, until min_bytes, an error, or max_wait."""
    responses: list[FetchableTopic] = []
    total = 0
    partitions = [w.partition for _, ws in resolved for w in ws if w.partition is not None]
    with anyio.move_on_after(max_wait_ms / 1000):
        while total < min_bytes:
            event = anyio.Event()
            for p in partitions:
                p.add_waiter(event)
            try:
                await event.wait()
            finally:
                for p in partitions:
                    p.remove_waiter(event)
            responses, total, any_error = _collect(resolved, ctx, max_bytes, isolation, replica)
            if any_error:
                break
    if not responses:  # nothing woke us before max_wait: read once more for the answer
        responses, total, any_error = _collect(resolved, ctx, max_bytes, isolation, replica)
    return build(cls, {"throttle_time": 0, "error_code": ErrorCode.none, "session_id": 0, "responses": responses})
