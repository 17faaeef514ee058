"""Produce (key 0), v3-v12.

v3 requires record batches v2 and adds transactional_id; v5 adds log_start_offset; v8 adds
record_errors and error_message; v9 is flexible; v10 adds current_leader/node_endpoints tags
(KIP-951); v11-v12 change only client behaviour (v12: transactions V2, not advertised here).
A request with acks=0 gets no response at all, as in Kafka.
"""

from __future__ import annotations

import logging
from typing import Any

from broker.context import RequestContext
from broker.replica_manager import Partition
from broker.wire import build
from kproto.batch import BATCH_HEADER_BYTES, COMPRESSION_MASK, CorruptBatchError, UnsupportedMagicError, iter_batches
from kproto.compression import decompress
from kproto.errors import ErrorCode
from kproto.messages import response_class
from storage.errors import StorageError

logger = logging.getLogger(__name__)

_MAX_CODEC = 4


def _result(error: ErrorCode, message: str | None = None, base_offset: int = -1, append_time: int = -1,
            log_start: int = -1) -> dict[str, Any]:
    return {
        "error_code": error,
        "error_message": message,
        "base_offset": base_offset,
        "log_append_time": append_time if append_time >= 0 else None,
        "log_start_offset": log_start,
        "record_errors": (),
    }


def _validate(partition: Partition, records: bytes, acks: int, ctx: RequestContext) -> dict[str, Any] | None:
    topic_config = ctx.broker.topic_config(partition.topic)
    max_message_bytes = int(topic_config["max.message.bytes"])
    try:
        batches = list(iter_batches(records, verify_crc=True))
    except UnsupportedMagicError as e:
        return _result(ErrorCode.invalid_record, f"Produce requests need record batches v2: {e}")
    except CorruptBatchError as e:
        if len(records) > max_message_bytes:
            return _result(ErrorCode.message_too_large, f"Message batch size is {len(records)} bytes")
        return _result(ErrorCode.corrupt_message, str(e))
    if len(batches) != 1:
        return _result(ErrorCode.invalid_record,
                       "Produce requests with version 3+ must contain exactly one record batch")
    _, header = batches[0]
    if header.size_bytes > max_message_bytes:
        return _result(ErrorCode.message_too_large,
                       f"The batch is {header.size_bytes} bytes, larger than max.message.bytes={max_message_bytes}")
    if header.attributes & COMPRESSION_MASK > _MAX_CODEC:
        return _result(ErrorCode.corrupt_message, "unknown compression codec")
    if header.compression:
        # Kafka decompresses every compressed batch it accepts (LogValidator). We check that it
        # decompresses, within a bound, so a corrupt or bomb batch is refused here and never reaches
        # a consumer; records are not re-parsed one by one (the CRC already covers their bytes).
        position = batches[0][0]
        section = memoryview(records)[position + BATCH_HEADER_BYTES : position + header.size_bytes]
        try:
            decompress(header.compression, section, ctx.broker.config.get_int("samsa.max.decompressed.batch.bytes"))
        except CorruptBatchError as e:
            return _result(ErrorCode.corrupt_message, f"cannot decompress the batch: {e}")
    if header.is_control:
        return _result(ErrorCode.invalid_record, "Clients may not produce control batches")
    if header.records_count == 0 or header.records_count != header.last_offset_delta + 1:
        return _result(ErrorCode.invalid_record, "record count does not match lastOffsetDelta")
    if header.is_transactional:
        # Only for a partition added to the producer's ongoing transaction (KIP-890 part 1's check).
        error = ctx.broker.txn.verify_produce(header.producer_id, header.producer_epoch, partition.topic,
                                              partition.partition_id)
        if error != ErrorCode.none:
            return _result(error, "the partition is not part of the producer's ongoing transaction"
                           if error == ErrorCode.invalid_txn_state else None)
    if topic_config["message.timestamp.type"].lower() == "createtime":
        after = int(topic_config["message.timestamp.after.max.ms"])
        before = int(topic_config["message.timestamp.before.max.ms"])
        if header.max_timestamp - ctx.now_ms > after or (
            header.base_timestamp >= 0 and ctx.now_ms - header.base_timestamp > before
        ):
            return _result(ErrorCode.invalid_timestamp,
                           "Timestamp of the batch is out of range (message.timestamp.before/after.max.ms)")
    if acks == -1:
        min_isr = int(topic_config["min.insync.replicas"])
        if len(partition.isr) < min_isr:
            return _result(ErrorCode.not_enough_replicas,
                           f"The size of the current ISR {len(partition.isr)} is insufficient to satisfy "
                           f"the min.isr requirement of {min_isr}")
    return None


def _append(ctx: RequestContext, topic: str, index: int, records: bytes | None, acks: int) -> dict[str, Any]:
    partition = ctx.broker.replica_manager.get_partition(topic, index)
    if partition is None:
        return _result(ErrorCode.unknown_topic_or_partition)
    if partition.leader_id != ctx.broker.node_id:
        return _result(ErrorCode.not_leader_or_follower)
    if not records:
        return _result(ErrorCode.corrupt_message, "empty records")
    problem = _validate(partition, records, acks, ctx)
    if problem is not None:
        return problem
    try:
        info = partition.append_as_leader(bytearray(records), ctx.now_ms)
    except StorageError as e:
        return _result(ErrorCode(e.error_code), str(e) or None)
    return _result(ErrorCode.none, None, info.first_offset, info.log_append_time_ms, info.log_start_offset)


def handle_produce(request: Any, ctx: RequestContext) -> Any:
    acks = request.acks
    responses = []
    for topic in request.topic_data:
        partitions = []
        for data in topic.partition_data:
            if acks not in (0, 1, -1):
                result = _result(ErrorCode.invalid_required_acks)
            else:
                result = _append(ctx, topic.name, data.index, data.records, acks)
            partitions.append({"index": data.index, **result})
        responses.append({"name": topic.name, "partition_responses": partitions})
    if acks == 0:
        return None
    return build(response_class(0, ctx.version), {"responses": responses, "throttle_time": 0})
