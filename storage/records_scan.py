"""What storage needs beyond kproto.batch: the per-record timestamps of a stored batch."""

from __future__ import annotations

import struct
from collections.abc import Iterator

import cramjam

from samsa.kproto.batch import BATCH_HEADER_BYTES, BatchHeader
from samsa.kproto.record_scan import read_varint

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_U32 = struct.Struct(">I")


def _decompress(codec: int, data: bytes) -> bytes:
    # Not kproto.compression.decompress: that one bounds its output by growing a buffer x4 and
    # decompressing again, which a batch already accepted into the log does not need to pay.
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
    pos, end = 0, len(body)
    for _ in range(header.records_count):
        length, pos = read_varint(body, pos, end, 10)
        start = pos
        pos += 1  # attributes
        ts_delta, pos = read_varint(body, pos, end, 10)
        offset_delta, pos = read_varint(body, pos, end, 10)
        yield header.base_offset + offset_delta, header.base_timestamp + ts_delta
        pos = start + length
