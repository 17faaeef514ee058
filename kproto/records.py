"""Records inside v2 record batches: decode, encode, and the control records of transactions.

Record layout (Kafka's DefaultRecord; varints are zigzag, like protobuf's sint32/sint64):

    length          varint   bytes after this field
    attributes      int8     unused, 0
    timestampDelta  varlong  from the batch's baseTimestamp
    offsetDelta     varint   from the batch's baseOffset
    keyLength       varint   -1 for a null key
    key             bytes
    valueLength     varint   -1 for a null value
    value           bytes
    headerCount     varint
    headers         keyLength varint, key (UTF-8), valueLength varint (-1: null), value

Decoding validates what Kafka's DefaultRecord.readFrom does: varint lengths (at most 5 bytes for a
varint, 10 for a varlong), that each record's fields fill exactly its declared length, non-negative
header counts, non-null header keys, and that the batch holds exactly recordsCount records.  Header
keys that are not UTF-8 are decoded with U+FFFD, as Kafka's Utils.utf8 does; they are not an error.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import IntEnum

from samsa.kproto import batch as _batch
from samsa.kproto.batch import (
    BATCH_HEADER_BYTES,
    CONTROL_BIT,
    TRANSACTIONAL_BIT,
    BatchHeader,
    CorruptBatchError,
    parse_header,
)
from samsa.kproto.compression import Codec, compress, decompress
from samsa.kproto.record_scan import read_varint as _read_varint
from samsa.kproto.record_scan import scan_records_impl

__all__ = [
    "ControlRecord",
    "ControlType",
    "Header",
    "Record",
    "RecordInput",
    "RecordsScan",
    "decode_batch_records",
    "decode_batches",
    "decode_control_record",
    "encode_batch",
    "encode_control_batch",
    "encode_control_record",
    "scan_batch_records",
]

_HEADER_STRUCT = struct.Struct(">qiibIhiqqqhii")
_INT16 = struct.Struct(">h")
_CONTROL_KEY = struct.Struct(">hh")  # version, type
_END_TXN_VALUE = struct.Struct(">hi")  # version, coordinatorEpoch
_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1


@dataclass(frozen=True, slots=True)
class Header:
    key: str
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Record:
    offset: int
    timestamp_ms: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()


# (key, value, headers) as a producer gives them; headers as (key, value) pairs or Header values.
RecordInput = tuple[bytes | None, bytes | None, Sequence[tuple[str, bytes | None] | Header]]


# --- varints -------------------------------------------------------------------------------------


def _write_varint(out: bytearray, value: int) -> None:
    raw = (value << 1) ^ (value >> 63)  # zigzag over 64 bits; also correct for int32 values
    raw &= 0xFFFFFFFFFFFFFFFF
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


# --- decode --------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecordsScan:
    """What a leader's validation needs from a batch's records (Kafka's LogValidator), without Records."""

    count: int
    max_timestamp_ms: int  # over the records' own timestamps; NO_TIMESTAMP (-1) for an empty batch
    offset_of_max_timestamp: int  # baseOffset + index of the first record carrying it; -1 for an empty batch
    offsets_contiguous: bool  # offset deltas are exactly 0, 1, ..., count - 1
    has_null_key: bool  # a compacted topic refuses such a batch (INVALID_RECORD)
    min_timestamp_ms: int = -1  # over the records' own timestamps; NO_TIMESTAMP (-1) for an empty batch


def _walk_records(data: bytes, header: BatchHeader, build: bool) -> tuple[list[Record], RecordsScan]:
    """Parse every record in `data` (the decompressed records section), validating as Kafka does.

    With build=False no Record objects are made: the broker's produce path only needs the scan.
    The one-byte varint case is inlined (byte < 0x80); at the end of the data, 0x80 sends it to
    _read_varint, which raises.
    """
    records: list[Record] = []
    pos = 0
    end = len(data)
    base_offset = header.base_offset
    base_timestamp = header.base_timestamp
    append_time = header.max_timestamp if header.is_log_append_time else None
    max_timestamp = -1
    offset_of_max = -1
    contiguous = True
    null_key = False
    for index in range(header.records_count):
        byte = data[pos] if pos < end else 0x80
        if byte < 0x80:
            length, pos = (byte >> 1) ^ -(byte & 1), pos + 1
        else:
            length, pos = _read_varint(data, pos, end, 5)
        record_end = pos + length
        if length < 0 or record_end > end:
            raise CorruptBatchError(f"record of {length} bytes, {end - pos} present")
        pos += 1  # attributes
        byte = data[pos] if pos < record_end else 0x80
        if byte < 0x80:
            timestamp_delta, pos = (byte >> 1) ^ -(byte & 1), pos + 1
        else:
            timestamp_delta, pos = _read_varint(data, pos, record_end, 10)
        byte = data[pos] if pos < record_end else 0x80
        if byte < 0x80:
            offset_delta, pos = (byte >> 1) ^ -(byte & 1), pos + 1
        else:
            offset_delta, pos = _read_varint(data, pos, record_end, 5)
        byte = data[pos] if pos < record_end else 0x80
        if byte < 0x80:
            key_length, pos = (byte >> 1) ^ -(byte & 1), pos + 1
        else:
            key_length, pos = _read_varint(data, pos, record_end, 5)
        key = None
        if key_length >= 0:
            if pos + key_length > record_end:
                raise CorruptBatchError("record key runs past the record")
            if build:
                key = data[pos : pos + key_length]
            pos += key_length
        else:
            null_key = True
        value_length, pos = _read_varint(data, pos, record_end, 5)
        value = None
        if value_length >= 0:
            if pos + value_length > record_end:
                raise CorruptBatchError("record value runs past the record")
            if build:
                value = data[pos : pos + value_length]
            pos += value_length
        byte = data[pos] if pos < record_end else 0x80
        if byte < 0x80:
            header_count, pos = (byte >> 1) ^ -(byte & 1), pos + 1
        else:
            header_count, pos = _read_varint(data, pos, record_end, 5)
        if header_count < 0:
            raise CorruptBatchError(f"invalid number of record headers {header_count}")
        header_list = []
        for _ in range(header_count):
            key_size, pos = _read_varint(data, pos, record_end, 5)
            if key_size < 0:
                raise CorruptBatchError("null header key")
            if pos + key_size > record_end:
                raise CorruptBatchError("header key runs past the record")
            key_start = pos
            pos += key_size
            value_size, pos = _read_varint(data, pos, record_end, 5)
            header_value = None
            if value_size >= 0:
                if pos + value_size > record_end:
                    raise CorruptBatchError("header value runs past the record")
                header_value = data[pos : pos + value_size] if build else None
                pos += value_size
            if build:
                # Kafka decodes header keys leniently (Utils.utf8: malformed bytes become U+FFFD)
                header_key = data[key_start : key_start + key_size].decode("utf-8", "replace")
                header_list.append(Header(header_key, header_value))
        if pos != record_end:
            raise CorruptBatchError(f"record declared {length} bytes, its fields fill {length - (record_end - pos)}")
        timestamp = base_timestamp + timestamp_delta
        if timestamp > max_timestamp:
            max_timestamp = timestamp
            offset_of_max = base_offset + offset_delta
        if offset_delta != index:
            contiguous = False
        if build:
            records.append(
                Record(
                    base_offset + offset_delta,
                    append_time if append_time is not None else timestamp,
                    key,
                    value,
                    tuple(header_list),
                )
            )
    if pos != end:
        raise CorruptBatchError(f"batch declares {header.records_count} records, {end - pos} bytes remain after them")
    return records, RecordsScan(header.records_count, max_timestamp, offset_of_max, contiguous, null_key)


def _decode_records(data: bytes, header: BatchHeader) -> list[Record]:
    return _walk_records(data, header, build=True)[0]


def _records_section(
    buf: bytes | bytearray | memoryview, position: int, header: BatchHeader, max_decompressed_bytes: int
) -> bytes:
    view = memoryview(buf)[position + BATCH_HEADER_BYTES : position + header.size_bytes]
    if header.compression == Codec.NONE:
        return bytes(view)
    return decompress(header.compression, view, max_decompressed_bytes)


def decode_batch_records(
    batch: bytes | bytearray | memoryview, *, max_decompressed_bytes: int, verify_crc: bool = True
) -> list[Record]:
    """The records of the one batch at the start of `batch` (trailing bytes are ignored).

    Raises CorruptBatchError (DecompressionError for compression problems, including more than
    `max_decompressed_bytes` of decompressed records) on anything Kafka would call CORRUPT_MESSAGE.
    """
    header = parse_header(batch)
    if header.size_bytes > len(batch):
        raise CorruptBatchError(f"batch claims {header.size_bytes} bytes, only {len(batch)} present")
    if verify_crc and not _batch.is_crc_valid(batch, header):
        raise CorruptBatchError("CRC mismatch")
    return _decode_records(_records_section(batch, 0, header, max_decompressed_bytes), header)


def scan_batch_records(
    batch: bytes | bytearray | memoryview, *, max_decompressed_bytes: int, verify_crc: bool = True
) -> RecordsScan:
    """Validate every record of the batch at the start of `batch` like decode_batch_records, without
    building Records; returns what a leader checks (count, timestamps, offset deltas, null keys)."""
    header = parse_header(batch)
    if header.size_bytes > len(batch):
        raise CorruptBatchError(f"batch claims {header.size_bytes} bytes, only {len(batch)} present")
    if verify_crc and not _batch.is_crc_valid(batch, header):
        raise CorruptBatchError("CRC mismatch")
    if header.compression == Codec.NONE:
        data, start, end = batch, BATCH_HEADER_BYTES, header.size_bytes
    else:
        data = _records_section(batch, 0, header, max_decompressed_bytes)
        start, end = 0, len(data)
    min_delta, max_delta, max_index, contiguous, null_key = scan_records_impl(data, start, end, header.records_count)
    if max_index < 0:
        return RecordsScan(0, -1, -1, True, False, -1)
    base = header.base_timestamp
    return RecordsScan(header.records_count, base + max_delta, header.base_offset + max_index, contiguous, null_key,
                       base + min_delta)


def decode_batches(
    buf: bytes | bytearray | memoryview,
    *,
    max_decompressed_bytes: int,
    verify_crc: bool = True,
    allow_partial_tail: bool = False,
) -> Iterator[tuple[BatchHeader, list[Record]]]:
    """Each batch's header and records, in order.

    `max_decompressed_bytes` bounds each batch.  With `allow_partial_tail` a truncated last batch
    is skipped silently, as a consumer must for a Fetch response cut at its byte limit.
    """
    position = 0
    end = len(buf)
    while position < end:
        if allow_partial_tail:
            size = _batch.peek_size(buf, position)
            if size is None or position + max(size, BATCH_HEADER_BYTES) > end:
                return
        header = parse_header(buf, position)
        if position + header.size_bytes > end:
            raise CorruptBatchError(f"batch at {position} claims {header.size_bytes} bytes, {end - position} present")
        if verify_crc and not _batch.is_crc_valid(buf, header, position):
            raise CorruptBatchError(f"CRC mismatch in batch at position {position}")
        yield header, _decode_records(_records_section(buf, position, header, max_decompressed_bytes), header)
        position += header.size_bytes


# --- encode --------------------------------------------------------------------------------------


def _encode_record(
    out: bytearray,
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[tuple[str, bytes | None] | Header],
) -> None:
    body = bytearray(b"\x00")  # attributes
    _write_varint(body, timestamp_delta)
    _write_varint(body, offset_delta)
    for field in (key, value):
        if field is None:
            body.append(0x01)  # zigzag(-1)
        else:
            _write_varint(body, len(field))
            body += field
    _write_varint(body, len(headers))
    for item in headers:
        header_key, header_value = (item.key, item.value) if isinstance(item, Header) else item
        encoded_key = header_key.encode("utf-8")
        _write_varint(body, len(encoded_key))
        body += encoded_key
        if header_value is None:
            body.append(0x01)
        else:
            _write_varint(body, len(header_value))
            body += header_value
    _write_varint(out, len(body))
    out += body


def encode_batch(
    records: Sequence[RecordInput] | Sequence[Record],
    *,
    base_offset: int = 0,
    timestamp_ms: int,
    compression: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    partition_leader_epoch: int = -1,
    compression_level: int | None = None,
) -> bytes:
    """One v2 record batch with a correct CRC32C, as a producer (or a leader, for markers) writes it.

    (key, value, headers) tuples get consecutive offsets from `base_offset` and timestamp
    `timestamp_ms`; Record values keep their own offset (relative to `base_offset`) and timestamp.
    baseTimestamp is the first record's timestamp, as in Kafka's MemoryRecordsBuilder.
    """
    body = bytearray()
    timestamps: list[int] = []
    offset_deltas: list[int] = []
    first_timestamp: int | None = None
    headers: Sequence[tuple[str, bytes | None] | Header]
    items: Sequence[RecordInput | Record] = records
    for index, item in enumerate(items):
        if isinstance(item, Record):
            offset_delta = item.offset - base_offset
            timestamp = item.timestamp_ms
            key, value, headers = item.key, item.value, item.headers
        else:
            offset_delta = index
            timestamp = timestamp_ms
            key, value, headers = item
        if first_timestamp is None:
            first_timestamp = timestamp
        if not 0 <= offset_delta <= _INT32_MAX:
            raise ValueError(f"offset delta {offset_delta} out of range")
        _encode_record(body, offset_delta, timestamp - first_timestamp, key, value, headers)
        timestamps.append(timestamp)
        offset_deltas.append(offset_delta)
    base_timestamp = timestamp_ms if first_timestamp is None else first_timestamp
    max_timestamp = max(timestamps, default=timestamp_ms)
    last_offset_delta = max(offset_deltas, default=0)
    section = compress(compression, body, compression_level) if compression else bytes(body)
    attributes = (compression & _batch.COMPRESSION_MASK) | (TRANSACTIONAL_BIT if is_transactional else 0)
    attributes |= CONTROL_BIT if is_control else 0
    batch = bytearray(BATCH_HEADER_BYTES + len(section))
    _HEADER_STRUCT.pack_into(
        batch,
        0,
        base_offset,
        len(batch) - _batch.LOG_OVERHEAD_BYTES,
        partition_leader_epoch,
        _batch.MAGIC_V2,
        0,
        attributes,
        last_offset_delta,
        base_timestamp,
        max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        len(offset_deltas),
    )
    batch[BATCH_HEADER_BYTES:] = section
    _batch.write_crc(batch)
    return bytes(batch)


# --- control records (KIP-98 transaction markers; KRaft's are types 2..6) ------------------------


class ControlType(IntEnum):
    ABORT = 0
    COMMIT = 1
    LEADER_CHANGE = 2
    SNAPSHOT_HEADER = 3
    SNAPSHOT_FOOTER = 4
    KRAFT_VERSION = 5
    KRAFT_VOTERS = 6


@dataclass(frozen=True, slots=True)
class ControlRecord:
    type: int  # a ControlType value; unknown types are kept as ints, as Kafka does
    version: int
    coordinator_epoch: int | None  # COMMIT/ABORT only


def encode_control_record(control_type: ControlType, coordinator_epoch: int) -> tuple[bytes, bytes]:
    """(key, value) of a COMMIT or ABORT marker (ControlRecordType + EndTxnMarker, both version 0)."""
    if control_type not in (ControlType.ABORT, ControlType.COMMIT):
        raise ValueError(f"{control_type!r} is not a transaction marker")
    return _CONTROL_KEY.pack(0, control_type), _END_TXN_VALUE.pack(0, coordinator_epoch)


def decode_control_record(record: Record) -> ControlRecord:
    """The control record in a control batch; CorruptBatchError if its key or marker is malformed."""
    if record.key is None or len(record.key) < _CONTROL_KEY.size:
        raise CorruptBatchError("control record key needs 4 bytes")
    version, control_type = _CONTROL_KEY.unpack_from(record.key)
    if version < 0:
        raise CorruptBatchError(f"control record key version {version}")
    epoch = None
    if control_type in (ControlType.ABORT, ControlType.COMMIT):
        if record.value is None or len(record.value) < _END_TXN_VALUE.size:
            raise CorruptBatchError("end transaction marker value needs 6 bytes")
        marker_version, epoch = _END_TXN_VALUE.unpack_from(record.value)
        if marker_version < 0:
            raise CorruptBatchError(f"end transaction marker version {marker_version}")
    return ControlRecord(control_type, version, epoch)


def encode_control_batch(
    control_type: ControlType,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp_ms: int,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
) -> bytes:
    """A transactional control batch holding one COMMIT or ABORT marker (as WriteTxnMarkers appends)."""
    key, value = encode_control_record(control_type, coordinator_epoch)
    return encode_batch(
        [(key, value, ())],
        base_offset=base_offset,
        timestamp_ms=timestamp_ms,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=-1,
        is_transactional=True,
        is_control=True,
        partition_leader_epoch=partition_leader_epoch,
    )
