"""A fast record batch v2 header view for storage's hot paths.

kproto.batch.parse_header builds a frozen dataclass, which costs ~5-10 us per batch in CPython; storage
parses a header on every append, read step and recovery step, so it uses this NamedTuple (same field
names and properties as kproto's BatchHeader, same validation) instead.  Layout: see kproto/batch.py.
"""

from __future__ import annotations

import struct
from typing import NamedTuple

from samsa.kproto.batch import (
    BATCH_HEADER_BYTES,
    COMPRESSION_MASK,
    CONTROL_BIT,
    LOG_OVERHEAD_BYTES,
    MAGIC_V2,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    CorruptBatchError,
    UnsupportedMagicError,
    compute_crc,
)

_HEADER = struct.Struct(">qiibIhiqqqhii")
_MIN_BATCH_LENGTH = BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES


class Header(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD_BYTES

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def is_log_append_time(self) -> bool:
        return bool(self.attributes & TIMESTAMP_TYPE_BIT)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % 0x80000000


def read_header(buf: bytes | bytearray | memoryview, position: int = 0) -> Header:
    """Parse and sanity-check the 61-byte header at `position` (sizes, magic; not the CRC)."""
    if len(buf) - position < BATCH_HEADER_BYTES:
        raise CorruptBatchError(f"batch header needs {BATCH_HEADER_BYTES} bytes, have {len(buf) - position}")
    h = Header._make(_HEADER.unpack_from(buf, position))
    if h.magic != MAGIC_V2:
        raise UnsupportedMagicError(f"unsupported magic {h.magic}")
    if h.batch_length < _MIN_BATCH_LENGTH:
        raise CorruptBatchError(f"batch length {h.batch_length} is smaller than a header")
    if h.last_offset_delta < 0 or h.records_count < 0:
        raise CorruptBatchError("negative lastOffsetDelta or record count")
    return h


def is_crc_valid(buf: bytes | bytearray | memoryview, header: Header, position: int = 0) -> bool:
    return compute_crc(buf, position, header.size_bytes) == header.crc
