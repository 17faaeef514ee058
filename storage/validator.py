"""Validation of a client's batch before a leader appends it (Kafka's LogValidator and analyzeAndValidateRecords).

One path for every batch, compressed or not, compacted topic or not: the batch-level checks Kafka makes in
UnifiedLog.analyzeAndValidateRecords (base offset 0, max.message.bytes, CRC32C, codec) and in
LogValidator.validateBatch (offset range against the record count, no control batches, a sequence with a
producer id), then every record is walked (DefaultRecord.readFrom's framing: lengths, varints, header
counts, key/value lengths, no trailing bytes) and checked (offset deltas 0..n-1, null keys on compacted
topics, CreateTime timestamps within message.timestamp.before/after.max.ms).  Kafka's answers:

    framing, offsets, count, control, base offset      INVALID_RECORD (87), no record_errors
    CRC mismatch, unknown codec, undecodable payload   CORRUPT_MESSAGE (2)
    null key on a compacted topic                      INVALID_RECORD with record_errors
    timestamp out of range                             INVALID_TIMESTAMP (32) with record_errors

Stricter than Kafka: offset deltas that are not 0..n-1 are refused (Kafka rewrites a compressed batch
and stores an uncompressed one as it came, so a consumer would read offsets outside the batch).

When the topic's compression.type names a codec and the batch uses another, the records are written
again with the topic's codec and level (LogValidator.buildRecordsAndAssignOffsets); otherwise the bytes
are appended as they came.  Pure: no I/O, time is a parameter, so the produce handler may run it on a
worker thread for a large batch (see `is_large`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from samsa.kproto.batch import (
    BATCH_HEADER_BYTES,
    COMPRESSION_MASK,
    BatchHeader,
    CorruptBatchError,
    UnsupportedMagicError,
    is_crc_valid,
    parse_header,
    peek_size,
)
from samsa.kproto.compression import (
    FULL_BUFFER_MESSAGE,
    Codec,
    DecompressionError,
    decompress_buffer,
)
from samsa.kproto.errors import ErrorCode
from samsa.kproto.record_scan import scan_records_impl
from samsa.kproto.records import Record, decode_batch_records, encode_batch

__all__ = [
    "LARGE_BATCH_BYTES",
    "LARGE_BATCH_RECORDS",
    "LogValidatorConfig",
    "RecordError",
    "ValidatedBatch",
    "ValidationFailure",
    "is_large",
    "validate_batch",
]

_MAX_CODEC = Codec.ZSTD
NO_TIMESTAMP = -1
# Above either bound a batch is validated off the event loop (the handler decides; this module only says).
# 4096 records take ~4 ms in the pure-Python walk; a compressed batch of 64 KiB may hold megabytes.
LARGE_BATCH_RECORDS = 4096
LARGE_BATCH_BYTES = 64 * 1024

CRAMJAM_FULL_BUFFER_MESSAGE = FULL_BUFFER_MESSAGE  # (kproto.compression decides "corrupt" vs "grow" by it)
_CODECS = {"uncompressed": Codec.NONE, "gzip": Codec.GZIP, "snappy": Codec.SNAPPY, "lz4": Codec.LZ4,
           "zstd": Codec.ZSTD}
_LEVEL_KEYS = {Codec.GZIP: "compression.gzip.level", Codec.LZ4: "compression.lz4.level",
               Codec.ZSTD: "compression.zstd.level"}


@dataclass(frozen=True, slots=True)
class LogValidatorConfig:
    """What LogValidator reads from the topic's configs (and the broker's decompression bound)."""

    topic_partition: str
    max_message_bytes: int
    compacted: bool
    create_time: bool  # message.timestamp.type=CreateTime
    timestamp_before_max_ms: int
    timestamp_after_max_ms: int
    target_codec: int | None  # None: compression.type=producer (keep the producer's codec)
    compression_level: int | None  # compression.<codec>.level of the target codec, if it has one
    max_decompressed_bytes: int

    @classmethod
    def from_topic_config(cls, topic_partition: str, config: Mapping[str, str],
                          max_decompressed_bytes: int) -> LogValidatorConfig:
        codec_name = config.get("compression.type", "producer").lower()
        target = _CODECS.get(codec_name)
        level_key = _LEVEL_KEYS.get(target) if target is not None else None
        level = int(config[level_key]) if level_key is not None and level_key in config else None
        return cls(
            topic_partition=topic_partition,
            max_message_bytes=int(config["max.message.bytes"]),
            compacted="compact" in config["cleanup.policy"],
            create_time=config["message.timestamp.type"].lower() == "createtime",
            timestamp_before_max_ms=int(config["message.timestamp.before.max.ms"]),
            timestamp_after_max_ms=int(config["message.timestamp.after.max.ms"]),
            target_codec=target,
            compression_level=level,
            max_decompressed_bytes=max_decompressed_bytes,
        )


@dataclass(frozen=True, slots=True)
class RecordError:
    """Kafka's ProduceResponse record_errors entry: the record's index in the batch and why."""

    batch_index: int
    message: str


@dataclass(frozen=True, slots=True)
class ValidationFailure:
    error_code: ErrorCode
    message: str | None
    # Kafka answers request-shape problems (ProduceRequest.validateRecords) without the log start
    # offset, and what the log refuses with it.
    with_log_start: bool = True
    record_errors: tuple[RecordError, ...] = ()


@dataclass(frozen=True, slots=True)
class ValidatedBatch:
    records: bytes  # to append: the producer's bytes, or the batch written again in the topic's codec
    header: BatchHeader  # of `records`
    recompressed: bool


def is_large(records: bytes) -> bool:
    """Whether validating `records` may hold a thread for milliseconds (many records, or compressed and big)."""
    if len(records) < BATCH_HEADER_BYTES:
        return False
    count = int.from_bytes(records[57:61], "big", signed=True)
    codec = records[22] & COMPRESSION_MASK
    return count > LARGE_BATCH_RECORDS or (codec != 0 and len(records) > LARGE_BATCH_BYTES)


def _shape(records: bytes, config: LogValidatorConfig) -> BatchHeader | ValidationFailure:
    """ProduceRequest.validateRecords: exactly one whole v2 batch (answered without a log start offset)."""
    size = peek_size(records, 0)
    if len(records) < BATCH_HEADER_BYTES or size is None or size > len(records):
        if len(records) > config.max_message_bytes:
            return ValidationFailure(ErrorCode.message_too_large, f"Message batch size is {len(records)} bytes",
                                     with_log_start=False)
        return ValidationFailure(ErrorCode.invalid_record, "The record batch is truncated", with_log_start=False)
    try:
        header = parse_header(records)
    except UnsupportedMagicError as e:
        return ValidationFailure(ErrorCode.invalid_record, f"Produce requests need record batches v2: {e}",
                                 with_log_start=False)
    except CorruptBatchError as e:
        return ValidationFailure(ErrorCode.invalid_record, str(e), with_log_start=False)
    if header.size_bytes != len(records):
        return ValidationFailure(ErrorCode.invalid_record,
                                 "Produce requests with version 3+ must contain exactly one record batch",
                                 with_log_start=False)
    return header


def _batch_checks(records: bytes, header: BatchHeader, config: LogValidatorConfig) -> ValidationFailure | None:
    """UnifiedLog.analyzeAndValidateRecords, then LogValidator.validateBatch, in Kafka's order."""
    tp = config.topic_partition
    if header.base_offset != 0:
        return ValidationFailure(ErrorCode.invalid_record, f"The baseOffset of the record batch in the append "
                                 f"to {tp} should be 0, but it is {header.base_offset}")
    if header.size_bytes > config.max_message_bytes:
        return ValidationFailure(ErrorCode.message_too_large, f"The record batch size in the append to {tp} is "
                                 f"{header.size_bytes} bytes which exceeds the maximum configured value of "
                                 f"{config.max_message_bytes}.", with_log_start=False)
    if not is_crc_valid(records, header):
        return ValidationFailure(ErrorCode.corrupt_message,
                                 f"Record is corrupt (stored crc = {header.crc}) in topic partition {tp}.",
                                 with_log_start=False)
    if header.compression > _MAX_CODEC:
        return ValidationFailure(ErrorCode.corrupt_message, f"Unknown compression type id {header.compression}",
                                 with_log_start=False)
    count = header.records_count
    if count <= 0:
        return ValidationFailure(ErrorCode.invalid_record,
                                 f"Invalid reported count for record batch: {count} in topic partition {tp}")
    if count != header.last_offset_delta + 1:
        return ValidationFailure(ErrorCode.invalid_record, f"Inconsistent batch offset range [0, "
                                 f"{header.last_offset_delta}] and count of records {count} in topic partition {tp}")
    if header.is_control:
        return ValidationFailure(ErrorCode.invalid_record,
                                 f"Clients are not allowed to write control records in topic partition {tp}")
    if header.has_producer_id and header.base_sequence < 0:
        return ValidationFailure(ErrorCode.invalid_record, f"Invalid sequence number {header.base_sequence} in "
                                 f"record batch with producerId {header.producer_id} in topic partition {tp}")
    return None


def validate_batch(records: bytes, config: LogValidatorConfig, now_ms: int) -> ValidatedBatch | ValidationFailure:
    """Kafka's checks of one produced partition's records, with Kafka's error codes; the batch to append."""
    shaped = _shape(records, config)
    if isinstance(shaped, ValidationFailure):
        return shaped
    header = shaped
    problem = _batch_checks(records, header, config)
    if problem is not None:
        return problem
    codec = header.compression
    try:
        if codec == Codec.NONE:
            data: bytes | bytearray = records
            start, end = BATCH_HEADER_BYTES, len(records)
        else:
            data = decompress_buffer(codec, memoryview(records)[BATCH_HEADER_BYTES:], config.max_decompressed_bytes)
            start, end = 0, len(data)
    except DecompressionError as e:
        return ValidationFailure(ErrorCode.corrupt_message, f"Failed to decompress record stream: {e}")
    try:
        min_delta, max_delta, _, contiguous, null_key = scan_records_impl(data, start, end, header.records_count)
    except CorruptBatchError as e:
        return ValidationFailure(ErrorCode.invalid_record, f"{e} in topic partition {config.topic_partition}")
    if not contiguous:
        return ValidationFailure(ErrorCode.invalid_record, f"The offset deltas of the records in the append to "
                                 f"{config.topic_partition} are not 0..{header.last_offset_delta} in order")
    if (null_key and config.compacted) or _timestamps_may_fail(header, config, now_ms, min_delta, max_delta):
        failure = _record_errors(records, header, config, now_ms)
        if failure is not None:
            return failure
    target = config.target_codec
    if target is None or target == codec:
        return ValidatedBatch(records, header, recompressed=False)
    return _recompress(records, header, config, target)


def _timestamps_may_fail(header: BatchHeader, config: LogValidatorConfig, now_ms: int, min_delta: int,
                         max_delta: int) -> bool:
    if header.is_log_append_time:
        return True  # a producer may not set LogAppendTime: Kafka refuses it record by record
    if not config.create_time:
        return False
    base = header.base_timestamp
    return (now_ms - (base + min_delta) > config.timestamp_before_max_ms
            or (base + max_delta) - now_ms > config.timestamp_after_max_ms)


def _record_errors(records: bytes, header: BatchHeader, config: LogValidatorConfig,
                   now_ms: int) -> ValidationFailure | None:
    """LogValidator.validateRecord for each record (key first, then timestamp); processRecordErrors's answer."""
    tp = config.topic_partition
    before, after = config.timestamp_before_max_ms, config.timestamp_after_max_ms
    errors: list[RecordError] = []
    any_timestamp = False
    decoded = decode_batch_records(records, max_decompressed_bytes=config.max_decompressed_bytes, verify_crc=False)
    for index, record in enumerate(decoded):
        if config.compacted and record.key is None:
            errors.append(RecordError(index, f"Compacted topic cannot accept message without key in topic "
                                             f"partition {tp}."))
        elif config.create_time and record.timestamp_ms != NO_TIMESTAMP:
            if now_ms - record.timestamp_ms > before or record.timestamp_ms - now_ms > after:
                any_timestamp = True
                errors.append(RecordError(index, f"Timestamp {record.timestamp_ms} of message with offset "
                                                 f"{record.offset} is out of range. The timestamp should be within "
                                                 f"[{now_ms - before}, {now_ms + after}]"))
        elif header.is_log_append_time:
            any_timestamp = True
            errors.append(RecordError(index, "Invalid timestamp type in message. Producer should not set "
                                             "timestamp type to LogAppendTime."))
    if not errors:
        return None
    if any_timestamp:
        return ValidationFailure(ErrorCode.invalid_timestamp,
                                 "One or more records have been rejected due to invalid timestamp",
                                 record_errors=tuple(errors))
    shown = ", ".join(f"RecordError(batchIndex={e.batch_index}, message='{e.message}')" for e in errors[:3])
    return ValidationFailure(ErrorCode.invalid_record, f"One or more records have been rejected due to "
                             f"{len(errors)} record errors in total, and only showing the first three errors at "
                             f"most: [{shown}]", record_errors=tuple(errors))


def _recompress(records: bytes, header: BatchHeader, config: LogValidatorConfig, target: int) -> ValidatedBatch:
    """The records written again in the topic's codec (offset deltas 0..n-1, the records' own timestamps, the
    producer's id, epoch, sequence and transactional flag kept), as LogValidator.buildRecordsAndAssignOffsets."""
    decoded = decode_batch_records(records, max_decompressed_bytes=config.max_decompressed_bytes, verify_crc=False)
    if header.is_log_append_time:  # (refused above; kept for a caller that validates LogAppendTime batches)
        decoded = [Record(r.offset, header.max_timestamp, r.key, r.value, r.headers) for r in decoded]
    rebuilt = encode_batch(
        decoded,
        base_offset=0,
        timestamp_ms=header.base_timestamp,
        compression=target,
        compression_level=config.compression_level,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        is_transactional=header.is_transactional,
        partition_leader_epoch=header.partition_leader_epoch,
    )
    return ValidatedBatch(rebuilt, parse_header(rebuilt), recompressed=True)

