"""Produce (key 0), v3-v12.

v3 requires record batches v2 and adds transactional_id; v5 adds log_start_offset; v8 adds
record_errors and error_message; v9 is flexible; v10 adds current_leader/node_endpoints tags
(KIP-951); v11-v12 change only client behaviour (v12: transactions V2, not advertised here).
A request with acks=0 gets no response at all, as in Kafka.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio

from samsa.broker.context import RequestContext
from samsa.broker.handlers.metadata import INTERNAL_TOPICS
from samsa.broker.replica_manager import Partition
from samsa.broker.wire import build, ms
from samsa.kproto.batch import (
    BATCH_HEADER_BYTES,
    COMPRESSION_MASK,
    CorruptBatchError,
    UnsupportedMagicError,
    is_crc_valid,
    iter_batches,
    peek_size,
)
from samsa.kproto.errors import ErrorCode
from samsa.kproto.messages import response_class
from samsa.kproto.records import decode_batch_records, scan_batch_records
from samsa.storage.errors import StorageError

logger = logging.getLogger(__name__)

_MAX_CODEC = 4


def _result(error: ErrorCode, message: str | None = None, base_offset: int = -1, append_time: int = -1,
            log_start: int = -1, record_errors: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {
        "error_code": error,
        "error_message": message,
        "base_offset": base_offset,
        "log_append_time": append_time if append_time >= 0 else None,
        "log_start_offset": log_start,
        "record_errors": record_errors or (),
    }


def _record_errors(records: bytes, limit: int, bad: Any) -> list[dict[str, Any]]:
    """Kafka's record_errors: the index within the batch and a message for each record `bad` refuses."""
    out = []
    for index, record in enumerate(decode_batch_records(records, max_decompressed_bytes=limit)):
        message = bad(record)
        if message is not None:
            out.append({"batch_index": index, "batch_index_error_message": message})
    return out


def _validate(partition: Partition, records: bytes, acks: int, ctx: RequestContext,
              transactional_id: str | None = None) -> dict[str, Any] | None:
    """Kafka's ProduceRequest.validateRecords and LogValidator checks, with Kafka's error codes.

    Request-shape problems (no batch, a torn batch, several batches, magic < 2) are INVALID_RECORD
    without a log start offset, as Kafka answers them before touching the log; a CRC mismatch is
    CORRUPT_MESSAGE; LogValidator's refusals (base offset, timestamps, keys of a compacted topic)
    report the partition's log start offset, and per-record problems are listed in record_errors.
    """
    topic_config = ctx.broker.topic_config(partition.topic)
    max_message_bytes = int(topic_config["max.message.bytes"])
    limit = ctx.broker.config.get_int("samsa.max.decompressed.batch.bytes")
    log_start = partition.log.log_start_offset
    size = peek_size(records, 0)
    if len(records) < BATCH_HEADER_BYTES or size is None or size > len(records):
        if len(records) > max_message_bytes:
            return _result(ErrorCode.message_too_large, f"Message batch size is {len(records)} bytes")
        return _result(ErrorCode.invalid_record, "The record batch is truncated")
    try:
        batches = list(iter_batches(records, verify_crc=False))
    except UnsupportedMagicError as e:
        return _result(ErrorCode.invalid_record, f"Produce requests need record batches v2: {e}")
    except CorruptBatchError as e:
        return _result(ErrorCode.invalid_record, str(e))
    if len(batches) != 1:
        return _result(ErrorCode.invalid_record,
                       "Produce requests with version 3+ must contain exactly one record batch")
    _, header = batches[0]
    if header.size_bytes > max_message_bytes:
        return _result(ErrorCode.message_too_large,
                       f"The batch is {header.size_bytes} bytes, larger than max.message.bytes={max_message_bytes}")
    if not is_crc_valid(records, header):
        return _result(ErrorCode.corrupt_message, "Record batch is corrupt (CRC mismatch)")
    if header.attributes & COMPRESSION_MASK > _MAX_CODEC:
        return _result(ErrorCode.corrupt_message, "unknown compression codec")
    if header.base_offset != 0:
        return _result(ErrorCode.invalid_record,
                       f"The baseOffset of the record batch in the append to {partition.topic}-"
                       f"{partition.partition_id} should be 0, but it is {header.base_offset}", log_start=log_start)
    compacted = "compact" in topic_config["cleanup.policy"]
    if header.compression or compacted:
        # Kafka decompresses every compressed batch it accepts (LogValidator). We check that the records
        # parse within a bound, so a corrupt or bomb batch is refused here and never reaches a consumer.
        try:
            scan = scan_batch_records(records, max_decompressed_bytes=limit, verify_crc=False)
        except CorruptBatchError as e:
            return _result(ErrorCode.corrupt_message, f"cannot read the batch's records: {e}")
        if scan.count != header.records_count or not scan.offsets_contiguous:
            return _result(ErrorCode.invalid_record, "The batch's records do not match its header (count or "
                           "offset deltas)", log_start=log_start)
        if compacted and scan.has_null_key:
            message = f"Compacted topic cannot accept message without key in topic partition {partition.topic}-" \
                      f"{partition.partition_id}."
            errors = _record_errors(records, limit, lambda r: message if r.key is None else None)
            return _result(ErrorCode.invalid_record, message, log_start=log_start, record_errors=errors)
    if header.is_control:
        return _result(ErrorCode.invalid_record, "Clients may not produce control batches", log_start=log_start)
    if header.records_count == 0 or header.records_count != header.last_offset_delta + 1:
        return _result(ErrorCode.invalid_record, "record count does not match lastOffsetDelta", log_start=log_start)
    if header.is_transactional:
        # Only for a partition added to the producer's ongoing transaction (KIP-890 part 1's check).
        error = ctx.broker.txn.verify_produce(header.producer_id, header.producer_epoch, partition.topic,
                                              partition.partition_id, transactional_id)
        if error != ErrorCode.none:
            return _result(error, "the partition is not part of the producer's ongoing transaction"
                           if error == ErrorCode.invalid_txn_state else None)
    if topic_config["message.timestamp.type"].lower() == "createtime":
        after = int(topic_config["message.timestamp.after.max.ms"])
        before = int(topic_config["message.timestamp.before.max.ms"])
        now = ctx.now_ms
        if header.max_timestamp - now > after or (header.base_timestamp >= 0 and now - header.base_timestamp > before):
            def bad(r: Any) -> str | None:
                if r.timestamp_ms - now > after or now - r.timestamp_ms > before:
                    return (f"Timestamp {r.timestamp_ms} of message with offset {r.offset} is out of range. The "
                            f"timestamp should be within [{now - before}, {now + after}]")
                return None

            errors = _record_errors(records, limit, bad)
            return _result(ErrorCode.invalid_timestamp,
                           errors[0]["batch_index_error_message"] if errors else "Timestamp out of range",
                           log_start=log_start, record_errors=errors)
    if acks == -1:
        min_isr = int(topic_config["min.insync.replicas"])
        if len(partition.isr) < min_isr:
            return _result(ErrorCode.not_enough_replicas,
                           f"The size of the current ISR {len(partition.isr)} is insufficient to satisfy "
                           f"the min.isr requirement of {min_isr}", log_start=log_start)
    return None


def _append(ctx: RequestContext, topic: str, index: int, records: bytes | None, acks: int,
            transactional_id: str | None = None) -> dict[str, Any]:
    partition = ctx.broker.replica_manager.get_partition(topic, index)
    if partition is None:
        return _result(ctx.broker.replica_manager.missing_error(topic, index))
    if topic in INTERNAL_TOPICS:
        # Only the coordinators write their own topics (through the replica manager, not this handler).
        return _result(ErrorCode.invalid_topic_exception, f"Cannot append to internal topic {topic}")
    if partition.leader_id != ctx.broker.node_id or ctx.broker.lifecycle.presumed_fenced():
        return _result(ErrorCode.not_leader_or_follower)
    if not records:
        return _result(ErrorCode.invalid_record, "The record set is empty")
    problem = _validate(partition, records, acks, ctx, transactional_id)
    if problem is not None:
        return problem
    try:
        info = partition.append_as_leader(bytearray(records), ctx.now_ms)
    except StorageError as e:
        error = ErrorCode(e.error_code)
        # Kafka reports the log start offset with producer-state refusals, not with storage failures.
        log_start = -1 if error == ErrorCode.kafka_storage_error else partition.log.log_start_offset
        return _result(error, str(e) or None, log_start=log_start)
    result = _result(ErrorCode.none, None, info.first_offset, info.log_append_time_ms, info.log_start_offset)
    if acks == -1 and partition.log.high_watermark <= info.last_offset:
        # acks=all: answered once every in-sync replica has the batch (Kafka's DelayedProduce)
        min_isr = int(ctx.broker.topic_config(topic)["min.insync.replicas"])
        result["_wait"] = (partition, info.last_offset + 1, min_isr, partition.leader_epoch)
    return result


async def _await_replication(ctx: RequestContext, waits: list[dict[str, Any]], timeout_ms: int) -> None:
    """Complete acks=all answers: the high watermark passes the batch (then NOT_ENOUGH_REPLICAS_AFTER_APPEND
    if the ISR shrank below min.insync.replicas meanwhile), leadership moves (NOT_LEADER_OR_FOLLOWER), or
    the request's timeout passes (REQUEST_TIMED_OUT; the records may still be committed later)."""
    node = ctx.broker.node_id
    pending = list(waits)
    with anyio.move_on_after(max(0, timeout_ms) / 1000):
        while pending:
            still: list[dict[str, Any]] = []
            for result in pending:
                partition, needed, min_isr, epoch = result["_wait"]
                if partition.leader_id != node or partition.leader_epoch != epoch:
                    result["error_code"] = ErrorCode.not_leader_or_follower
                elif partition.log.high_watermark >= needed:
                    if len(partition.isr) < min_isr:
                        result["error_code"] = ErrorCode.not_enough_replicas_after_append
                else:
                    still.append(result)
            pending = still
            if not pending:
                break
            event = anyio.Event()
            partitions = {r["_wait"][0] for r in pending}
            for p in partitions:
                p.add_waiter(event)
            try:
                await event.wait()
            finally:
                for p in partitions:
                    p.remove_waiter(event)
    for result in pending:
        result["error_code"] = ErrorCode.request_timed_out
    for result in waits:
        del result["_wait"]
        if result["error_code"] != ErrorCode.none:
            result["base_offset"] = -1


def handle_produce(request: Any, ctx: RequestContext) -> Any:
    acks = request.acks
    responses = []
    leaders: set[int] = set()
    waits: list[dict[str, Any]] = []
    for topic in request.topic_data:
        partitions = []
        for data in topic.partition_data:
            if acks not in (0, 1, -1):
                result = _result(ErrorCode.invalid_required_acks)
            else:
                result = _append(ctx, topic.name, data.index, data.records, acks, request.transactional_id)
            if result["error_code"] == ErrorCode.not_leader_or_follower and ctx.version >= 10:
                leader = _current_leader(ctx, topic.name, data.index)
                if leader is not None:
                    result["current_leader"] = {"leader_id": leader[0], "leader_epoch": leader[1]}
                    leaders.add(leader[0])
            if "_wait" in result:
                waits.append(result)
            partitions.append(result)
            result["index"] = data.index
        responses.append({"name": topic.name, "partition_responses": partitions})
    if acks == 0:
        return None
    if waits:
        return _respond_after_replication(ctx, request, waits, responses, leaders)
    return _response(ctx, responses, leaders)


async def _respond_after_replication(ctx: RequestContext, request: Any, waits: list[dict[str, Any]],
                                     responses: list[dict[str, Any]], leaders: set[int]) -> Any:
    await _await_replication(ctx, waits, ms(request.timeout))
    return _response(ctx, responses, leaders)


def _response(ctx: RequestContext, responses: list[dict[str, Any]], leaders: set[int]) -> Any:
    # KIP-951: the new leaders' endpoints, so the client redirects without a metadata round trip.
    image = ctx.broker.image
    endpoints = [{"node_id": b.broker_id, "host": b.host, "port": b.port, "rack": b.rack}
                 for node in sorted(leaders) if (b := image.brokers.get(node)) is not None]
    return build(response_class(0, ctx.version), {"responses": responses, "throttle_time": 0,
                                                  "node_endpoints": endpoints})


def _current_leader(ctx: RequestContext, topic: str, index: int) -> tuple[int, int] | None:
    found = ctx.broker.image.topics_by_name.get(topic)
    p = found.partitions.get(index) if found is not None else None
    if p is None or p.leader < 0 or p.leader == ctx.broker.node_id:
        return None
    return p.leader, p.leader_epoch
