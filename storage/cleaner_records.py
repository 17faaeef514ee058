"""Rewriting one stored record batch for the log cleaner: which records it holds, and the batch that keeps some.

Kafka's MemoryRecords.filterTo for magic v2, which we follow:
- a rewritten batch keeps its baseOffset, its lastOffsetDelta (so the batch's last offset and a producer's
  last sequence, baseSequence + lastOffsetDelta, survive even when the last record goes), producer id,
  epoch, base sequence, partition leader epoch, codec and its transactional/control/timestamp-type bits;
  each kept record keeps its offset delta; the CRC is recomputed;
- KIP-534: the first time a batch holding a tombstone (or a transaction marker whose data is gone) is
  rewritten, it gets the delete-horizon attribute bit and baseTimestamp = now + delete.retention.ms, the
  records' timestamp deltas being rebased on it so every record keeps its timestamp;
- a batch that must stay although none of its records do (the last batch of an active producer, the last
  batch of a cleaning round) becomes an empty batch: the header alone, recordsCount 0, both timestamps the
  batch's max timestamp (Kafka's MemoryRecords.writeEmptyHeader).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from samsa.kproto.batch import (
    BATCH_HEADER_BYTES,
    COMPRESSION_MASK,
    CONTROL_BIT,
    DELETE_HORIZON_BIT,
    LOG_OVERHEAD_BYTES,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    BatchHeader,
    CorruptBatchError,
    write_crc,
)
from samsa.kproto.compression import compress, decompress
from samsa.kproto.record_scan import read_varint

_HEADER = struct.Struct(">qiibIhiqqqhii")


class RawRecord(NamedTuple):
    """One record of a batch's (decompressed) records section, located but not copied."""

    offset: int
    timestamp_ms: int
    key: bytes | None
    has_value: bool
    tail_start: int  # position of offsetDelta: everything from here to `end` is copied as it is
    end: int


def delete_horizon_ms(header: BatchHeader) -> int | None:
    """KIP-534: the time after which this batch's tombstones and markers may go, if a cleaning set it."""
    return header.base_timestamp if header.attributes & DELETE_HORIZON_BIT else None


def records_section(batch: bytes, header: BatchHeader, max_bytes: int) -> bytes:
    """The records of a whole stored batch, decompressed (at most `max_bytes`; DecompressionError past it)."""
    body = memoryview(batch)[BATCH_HEADER_BYTES : header.size_bytes]
    if header.compression:
        return decompress(header.compression, body, max_bytes)
    return bytes(body)


def iter_raw_records(section: bytes, header: BatchHeader) -> Iterator[RawRecord]:
    """Each record's offset, timestamp, key and whether it has a value; CorruptBatchError if malformed.

    The one-byte varints (nearly all of them: lengths under 64, small deltas) are decoded inline; longer
    ones go through kproto's read_varint (the cleaner's per-record loop is its CPU cost)."""
    pos, end = 0, len(section)
    base_offset, base_ts = header.base_offset, header.base_timestamp
    for _ in range(header.records_count):
        b = section[pos] if pos < end else 0x80
        if b < 0x80:
            length, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            length, pos = read_varint(section, pos, end, 5)
        record_end = pos + length
        if length < 1 or record_end > end:
            raise CorruptBatchError(f"record length {length} runs past the batch at {header.base_offset}")
        pos += 1  # attributes
        fields = [0, 0, 0]  # timestampDelta, offsetDelta, keyLength
        tail_start = pos
        for i in range(3):
            if i == 1:
                tail_start = pos
            b = section[pos] if pos < record_end else 0x80
            if b < 0x80:
                fields[i], pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                fields[i], pos = read_varint(section, pos, record_end, 10 if i == 0 else 5)
        ts_delta, offset_delta, key_length = fields
        key: bytes | None = None
        if key_length >= 0:
            key = section[pos : pos + key_length]
            pos += key_length
        value_length, pos = read_varint(section, pos, record_end, 5)
        if pos > record_end or pos + max(value_length, 0) > record_end:
            raise CorruptBatchError(f"record fields run past its length in the batch at {header.base_offset}")
        yield RawRecord(base_offset + offset_delta, base_ts + ts_delta, key, value_length >= 0, tail_start,
                        record_end)
        pos = record_end
    if pos != end:
        raise CorruptBatchError(f"{end - pos} bytes after the last record of the batch at {header.base_offset}")


def _varint(out: bytearray, value: int) -> None:
    raw = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


def rebuild_batch(header: BatchHeader, section: bytes, kept: list[RawRecord], horizon_ms: int | None) -> bytes:
    """The batch holding only `kept` (records of `section`, in order), as Kafka's filterTo writes it.

    `horizon_ms`: the delete horizon to stamp (KIP-534), None to leave the batch without one.
    """
    if not kept:
        return empty_batch(header)
    base_ts = horizon_ms if horizon_ms is not None else kept[0].timestamp_ms
    body = bytearray()
    max_ts = -1
    for r in kept:
        rec = bytearray(b"\x00")  # attributes
        _varint(rec, r.timestamp_ms - base_ts)
        rec += section[r.tail_start : r.end]
        _varint(body, len(rec))
        body += rec
        max_ts = max(max_ts, r.timestamp_ms)
    if header.is_log_append_time:
        max_ts = header.max_timestamp
    codec = header.compression
    data = compress(codec, body) if codec else bytes(body)
    attributes = header.attributes & (COMPRESSION_MASK | TIMESTAMP_TYPE_BIT | TRANSACTIONAL_BIT | CONTROL_BIT)
    if horizon_ms is not None:
        attributes |= DELETE_HORIZON_BIT
    out = bytearray(BATCH_HEADER_BYTES + len(data))
    _HEADER.pack_into(out, 0, header.base_offset, len(out) - LOG_OVERHEAD_BYTES, header.partition_leader_epoch,
                      2, 0, attributes, header.last_offset_delta, base_ts, max_ts, header.producer_id,
                      header.producer_epoch, header.base_sequence, len(kept))
    out[BATCH_HEADER_BYTES:] = data
    write_crc(out)
    return bytes(out)


def empty_batch(header: BatchHeader) -> bytes:
    """The header of `header`'s batch with no records (Kafka's writeEmptyHeader): keeps the producer's
    id, epoch, sequence range and the batch's offsets, so producer state rebuilt from the log survives."""
    attributes = header.attributes & (TIMESTAMP_TYPE_BIT | TRANSACTIONAL_BIT | CONTROL_BIT)
    out = bytearray(BATCH_HEADER_BYTES)
    _HEADER.pack_into(out, 0, header.base_offset, BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES,
                      header.partition_leader_epoch, 2, 0, attributes, header.last_offset_delta,
                      header.max_timestamp, header.max_timestamp, header.producer_id, header.producer_epoch,
                      header.base_sequence, 0)
    write_crc(out)
    return bytes(out)
