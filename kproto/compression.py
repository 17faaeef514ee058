"""Record-batch compression codecs as Kafka writes them, with a hard bound on decompressed size.

Formats (what Kafka's Java client writes and reads):
  gzip    a gzip stream (java.util.zip.GZIPOutputStream); several members are read as one stream
  snappy  xerial snappy-java's stream format (SnappyOutputStream): the 8-byte magic
          b"\\x82SNAPPY\\x00", int32 version, int32 compatible version, then blocks of
          int32 big-endian length + raw snappy.  A stream without the magic is read as one raw
          snappy block, as SnappyInputStream does; we always write xerial, 32 KiB blocks
  lz4     the LZ4 frame format (KafkaLZ4BlockOutputStream): we write exactly Kafka's frames --
          independent 64 KiB blocks, no block or content checksum, no content size; any valid frame
          is read
  zstd    a zstd frame (level 3, Kafka's default)

A decompression bomb raises DecompressionError before more than `max_bytes` + 1 bytes of output
are allocated: output goes into a preallocated buffer that grows by x4 up to that bound, and
cramjam stops writing when the buffer is full.
"""

from __future__ import annotations

import struct
from enum import IntEnum

import cramjam

from samsa.kproto.batch import CorruptBatchError

__all__ = ["Codec", "DecompressionError", "compress", "decompress"]


class Codec(IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


class DecompressionError(CorruptBatchError):
    """Compressed records that are corrupt, of an unknown codec, or larger than allowed (CORRUPT_MESSAGE)."""


class DecompressionLimitError(DecompressionError):
    """The records decompress to more than the allowed number of bytes (a decompression bomb)."""


XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = struct.Struct(">8sii")
_XERIAL_VERSION = 1
_XERIAL_BLOCK_BYTES = 32 * 1024
_INT32 = struct.Struct(">i")

LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_BLOCK_BYTES = 64 * 1024
_LZ4_FLG = 0x60  # version 01, independent blocks, no checksums, no content size, no dictionary
_LZ4_BD = 0x40  # maximum block size 64 KiB
_LZ4_UNCOMPRESSED_BIT = 0x80000000
_UINT32_LE = struct.Struct("<I")

_ZSTD_LEVEL = 3
_FIRST_GUESS_MIN_BYTES = 64 * 1024
FULL_BUFFER_MESSAGE = "failed to write whole buffer"  # cramjam's words for "the output did not fit"


# --- xxHash32, only for the 1-byte LZ4 frame-descriptor checksum ----------------------------------

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def _xxh32_short(data: bytes, seed: int = 0) -> int:
    """xxHash32 of fewer than 16 bytes (the frame descriptor is 2)."""
    assert len(data) < 16
    acc = (seed + _P5 + len(data)) & _M32
    pos = 0
    while pos + 4 <= len(data):
        (lane,) = _UINT32_LE.unpack_from(data, pos)
        acc = (_rotl32((acc + lane * _P3) & _M32, 17) * _P4) & _M32
        pos += 4
    for byte in data[pos:]:
        acc = (_rotl32((acc + byte * _P5) & _M32, 11) * _P1) & _M32
    acc ^= acc >> 15
    acc = (acc * _P2) & _M32
    acc ^= acc >> 13
    acc = (acc * _P3) & _M32
    acc ^= acc >> 16
    return acc


_LZ4_HEADER = LZ4_MAGIC + bytes([_LZ4_FLG, _LZ4_BD, (_xxh32_short(bytes([_LZ4_FLG, _LZ4_BD])) >> 8) & 0xFF])


# --- compress ------------------------------------------------------------------------------------


def _lz4_frame(data: bytes) -> bytes:
    """Kafka's LZ4 frame at the default level: cramjam's block compressor takes no level (its `mode` and
    `compression` arguments change nothing in 2.14), so compression.lz4.level is not applied."""
    parts = [_LZ4_HEADER]
    view = memoryview(data)
    for start in range(0, len(data), _LZ4_BLOCK_BYTES):
        block = view[start : start + _LZ4_BLOCK_BYTES]
        packed = bytes(cramjam.lz4.compress_block(block, store_size=False))
        if len(packed) < len(block):
            parts += (_UINT32_LE.pack(len(packed)), packed)
        else:
            parts += (_UINT32_LE.pack(len(block) | _LZ4_UNCOMPRESSED_BIT), bytes(block))
    parts.append(b"\x00\x00\x00\x00")  # end mark
    return b"".join(parts)


def _xerial(data: bytes) -> bytes:
    parts = [_XERIAL_HEADER.pack(XERIAL_MAGIC, _XERIAL_VERSION, _XERIAL_VERSION)]
    view = memoryview(data)
    for start in range(0, len(data), _XERIAL_BLOCK_BYTES):
        packed = bytes(cramjam.snappy.compress_raw(view[start : start + _XERIAL_BLOCK_BYTES]))
        parts += (_INT32.pack(len(packed)), packed)
    return b"".join(parts)


def compress(codec: int, data: bytes | bytearray | memoryview, level: int | None = None) -> bytes:
    """Compress a records section the way Kafka's producer does for `codec`; `level` as the topic's
    compression.gzip.level (-1: zlib's default, as Java's Deflater) / .zstd.level. Snappy has no level, and
    LZ4 is written at its default (see _lz4_frame)."""
    data = bytes(data)
    if codec == Codec.NONE:
        return data
    if codec == Codec.GZIP:
        if level is not None and level >= 0:
            return bytes(cramjam.gzip.compress(data, level=level))
        return bytes(cramjam.gzip.compress(data))
    if codec == Codec.SNAPPY:
        return _xerial(data)
    if codec == Codec.LZ4:
        return _lz4_frame(data)
    if codec == Codec.ZSTD:
        return bytes(cramjam.zstd.compress(data, level=_ZSTD_LEVEL if level is None else level))
    raise ValueError(f"unknown compression codec {codec}")


# --- decompress ----------------------------------------------------------------------------------


def _bomb(max_bytes: int) -> DecompressionLimitError:
    return DecompressionLimitError(f"records decompress to more than {max_bytes} bytes")


def _into_bounded(decompress_into: object, data: bytes | memoryview, max_bytes: int, name: str) -> bytearray:
    """Stream-decompress into a buffer that grows x4 up to max_bytes + 1; past that it is a bomb."""
    assert callable(decompress_into)
    limit = max_bytes + 1
    capacity = min(limit, max(_FIRST_GUESS_MIN_BYTES, 8 * len(data)))
    while True:
        out = bytearray(capacity)
        try:
            written = int(decompress_into(data, out))
        except cramjam.DecompressionError as e:
            # Only "the output does not fit" is worth a larger buffer; anything else is corrupt data at
            # once: retrying every error x4 up to the limit cost 0.1-0.5 s of CPU, GIL held, for 400
            # bytes of junk. (cramjam's wording is pinned by tests/storage/test_validator.py.)
            if FULL_BUFFER_MESSAGE not in str(e):
                raise DecompressionError(f"corrupt {name} data: {e}") from e
            if capacity < limit:
                capacity = min(limit, capacity * 4)
                continue
            raise _bomb(max_bytes) from e
        if written < capacity:
            del out[written:]
            return out
        if capacity >= limit:
            raise _bomb(max_bytes)
        capacity = min(limit, capacity * 4)


def _snappy_raw(block: bytes | memoryview, budget: int, max_bytes: int) -> bytes:
    try:
        size = int(cramjam.snappy.decompress_raw_len(block))
    except cramjam.DecompressionError as e:
        raise DecompressionError(f"corrupt snappy block: {e}") from e
    if size > budget:
        raise _bomb(max_bytes)
    out = bytearray(size)
    try:
        written = int(cramjam.snappy.decompress_raw_into(block, out))
    except cramjam.DecompressionError as e:
        raise DecompressionError(f"corrupt snappy block: {e}") from e
    if written != size:
        raise DecompressionError(f"snappy block declared {size} bytes, produced {written}")
    return bytes(out)


def _snappy(data: bytes | memoryview, max_bytes: int) -> bytes:
    if bytes(data[: len(XERIAL_MAGIC)]) != XERIAL_MAGIC:
        return _snappy_raw(data, max_bytes, max_bytes)
    if len(data) < _XERIAL_HEADER.size:
        raise DecompressionError("truncated xerial snappy header")
    parts: list[bytes] = []
    total = 0
    pos = _XERIAL_HEADER.size
    end = len(data)
    while pos < end:
        if pos + 4 > end:
            raise DecompressionError("truncated xerial snappy block length")
        (length,) = _INT32.unpack_from(data, pos)
        pos += 4
        if length < 0 or pos + length > end:
            raise DecompressionError(f"xerial snappy block of {length} bytes, {end - pos} present")
        part = _snappy_raw(data[pos : pos + length], max_bytes - total, max_bytes)
        total += len(part)
        parts.append(part)
        pos += length
    return b"".join(parts)


def decompress(codec: int, data: bytes | bytearray | memoryview, max_bytes: int) -> bytes:
    """Decompress a records section; DecompressionError if corrupt or larger than `max_bytes`."""
    out = decompress_buffer(codec, data, max_bytes)
    return out if isinstance(out, bytes) else bytes(out)


def decompress_buffer(codec: int, data: bytes | bytearray | memoryview, max_bytes: int) -> bytes | bytearray:
    """decompress() without its last copy: the output buffer as it came (the produce path's validator)."""
    if isinstance(data, bytearray):
        data = bytes(data)
    if codec == Codec.NONE:
        if len(data) > max_bytes:
            raise _bomb(max_bytes)
        return bytes(data)
    if codec == Codec.GZIP:
        return _into_bounded(cramjam.gzip.decompress_into, data, max_bytes, "gzip")
    if codec == Codec.SNAPPY:
        return _snappy(data, max_bytes)
    if codec == Codec.LZ4:
        return _into_bounded(cramjam.lz4.decompress_into, data, max_bytes, "lz4")
    if codec == Codec.ZSTD:
        return _into_bounded(cramjam.zstd.decompress_into, data, max_bytes, "zstd")
    raise DecompressionError(f"unknown compression codec {codec}")
