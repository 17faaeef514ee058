"""What storage needs beyond kproto.batch: the per-record timestamps of a stored batch."""

from __future__ import annotations

import struct
from collections.abc import Iterator

import cramjam

from samsa.kproto.batch import BATCH_HEADER_BYTES, BatchHeader

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_U32 = struct.Struct(">I")


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = 0
    raw = 0
    while True:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")
    return (raw >> 1) ^ -(raw & 1), pos


def _decompress(codec: int, data: bytes) -> bytes:
    if codec == 1:
        return bytes(cramjam.gzip.decompress(data))
    if codec == 2:
        if data.startswith(_XERIAL_MAGIC):  # the Java client's xerial snappy framing
            out = bytearray()
            pos = 16
            while pos + 4 <= len(data):
                (n,) = _U32.unpack_from(data, pos)
                out += bytes(cramjam.snappy.decompress_raw(data[pos + 4 : pos + 4 + n]))
                pos += 4 + n
            return bytes(out)
        return bytes(cramjam.snappy.decompress_raw(data))
    if codec == 3:
        return bytes(cramjam.lz4.decompress(data))
    if codec == 4:
        return bytes(cramjam.zstd.decompress(data))
    raise ValueError(f"unknown compression codec {codec}")


def record_timestamps(batch: bytes, header: BatchHeader) -> Iterator[tuple[int, int]]:
    """Yield (offset, timestamp_ms) for each record of a whole batch. Raises ValueError if undecodable."""
    if header.is_log_append_time:
        for delta in range(header.last_offset_delta + 1):
            yield header.base_offset + delta, header.max_timestamp
        return
    body = batch[BATCH_HEADER_BYTES:]
    if header.compression:
        body = _decompress(header.compression, body)
    pos = 0
    for _ in range(header.records_count):
        length, pos = _varint(body, pos)
        start = pos
        pos += 1  # attributes
        ts_delta, pos = _varint(body, pos)
        offset_delta, pos = _varint(body, pos)
        yield header.base_offset + offset_delta, header.base_timestamp + ts_delta
        pos = start + length
