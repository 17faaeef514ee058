"""Record batch v2 headers: parse, validate (magic, sizes, CRC32C) and the in-place rewrites a leader does.

Layout (Kafka's DefaultRecordBatch, all big-endian):

    offset  size  field
    0       8     baseOffset
    8       4     batchLength            (bytes after this field: total size = batchLength + 12)
    12      4     partitionLeaderEpoch
    16      1     magic                  (2)
    17      4     crc                    (CRC32C of everything from attributes to the end)
    21      2     attributes             (bits 0-2 codec, 3 timestamp type, 4 transactional, 5 control)
    23      4     lastOffsetDelta
    27      8     baseTimestamp
    35      8     maxTimestamp
    43      8     producerId
    51      2     producerEpoch
    53      4     baseSequence
    57      4     recordsCount
    61      ...   records

The CRC does not cover baseOffset, batchLength, partitionLeaderEpoch or magic, so a leader assigns
offsets and stamps its epoch without recomputing it.  Switching to LogAppendTime rewrites
attributes and maxTimestamp, which are covered, so that path recomputes the CRC (`stamp_batch`).

BatchHeader is the one header type of the code base (storage parses one on every append, read step and
recovery step): a NamedTuple, because building one costs ~0.4 us against ~1.3 us for a frozen slotted
dataclass (measured with timeit on parse_header of a 10-record batch, CPython 3.11).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import NamedTuple

from samsa.kproto.checksum import crc32c

BATCH_HEADER_BYTES = 61
LOG_OVERHEAD_BYTES = 12  # baseOffset + batchLength
MAGIC_V2 = 2
CRC_START = 21

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
NO_TIMESTAMP = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_BASE_OFFSET = struct.Struct(">q")
_LEADER_EPOCH = struct.Struct(">i")
_CRC = struct.Struct(">I")
_ATTRIBUTES = struct.Struct(">h")
_TIMESTAMP = struct.Struct(">q")
_SIZE_PREFIX = struct.Struct(">qi")
_BATCH_LENGTH = struct.Struct(">i")
_MIN_BATCH_LENGTH = BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES


class CorruptBatchError(ValueError):
    """The bytes are not a valid v2 record batch (Kafka: CORRUPT_MESSAGE / CorruptRecordException)."""


class UnsupportedMagicError(CorruptBatchError):
    """A batch with a magic byte other than 2 (Kafka 4 accepts only v2 from producers)."""


class BatchHeader(NamedTuple):
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
        return self.last_offset + 1

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
    def has_producer_id(self) -> bool:
        return self.producer_id >= 0

    @property
    def last_sequence(self) -> int:
        """Sequence of the last record; sequences wrap at 2**31 - 1 like Kafka's DefaultRecordBatch."""
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) % 0x80000000


_new_header = tuple.__new__  # a BatchHeader from a tuple, without NamedTuple's keyword-handling __new__


def parse_header(buf: bytes | bytearray | memoryview, position: int = 0) -> BatchHeader:
    """Parse the fixed 61-byte header at `position`. Checks sizes and magic, not the CRC."""
    if len(buf) - position < BATCH_HEADER_BYTES:
        raise CorruptBatchError(f"batch header needs {BATCH_HEADER_BYTES} bytes, have {len(buf) - position}")
    header = _new_header(BatchHeader, _HEADER.unpack_from(buf, position))
    if header.magic != MAGIC_V2:
        raise UnsupportedMagicError(f"unsupported magic {header.magic}")
    if header.batch_length < _MIN_BATCH_LENGTH:
        raise CorruptBatchError(f"batch length {header.batch_length} is smaller than a header")
    if header.last_offset_delta < 0 or header.records_count < 0:
        raise CorruptBatchError("negative lastOffsetDelta or record count")
    return header


def peek_size(buf: bytes | bytearray | memoryview, position: int = 0) -> int | None:
    """Total size of the batch at `position` from its first 12 bytes, or None if fewer are present."""
    if len(buf) - position < LOG_OVERHEAD_BYTES:
        return None
    _, batch_length = _SIZE_PREFIX.unpack_from(buf, position)
    return int(batch_length) + LOG_OVERHEAD_BYTES


def compute_crc(buf: bytes | bytearray | memoryview, position: int, size_bytes: int) -> int:
    view = memoryview(buf)[position + CRC_START : position + size_bytes]
    return int(crc32c(view))


def is_crc_valid(buf: bytes | bytearray | memoryview, header: BatchHeader, position: int = 0) -> bool:
    return compute_crc(buf, position, header.size_bytes) == header.crc


def iter_batches(buf: bytes | bytearray | memoryview, *, verify_crc: bool = True) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each batch in `buf`, which must hold whole batches and nothing else.

    Raises CorruptBatchError on a short, oversized, wrong-magic or bad-CRC batch.
    """
    position = 0
    end = len(buf)
    while position < end:
        header = parse_header(buf, position)
        if position + header.size_bytes > end:
            raise CorruptBatchError(
                f"batch at {position} claims {header.size_bytes} bytes, only {end - position} present"
            )
        if verify_crc and not is_crc_valid(buf, header, position):
            raise CorruptBatchError(f"CRC mismatch in batch at position {position}")
        yield position, header
        position += header.size_bytes


def write_crc(buf: bytearray | memoryview, position: int = 0) -> None:
    """Compute the CRC of the whole batch at `position` (its batchLength says how long) and write it."""
    (batch_length,) = _BATCH_LENGTH.unpack_from(buf, position + 8)
    _CRC.pack_into(buf, position + 17, compute_crc(buf, position, batch_length + LOG_OVERHEAD_BYTES))


def stamp_batch(
    header: bytearray | memoryview,
    position: int,
    base_offset: int,
    partition_leader_epoch: int,
    log_append_time_ms: int = NO_TIMESTAMP,
    body: bytes | bytearray | memoryview | None = None,
) -> None:
    """What a leader writes into a batch it appends: baseOffset and partitionLeaderEpoch (outside the CRC)
    and, when `log_append_time_ms` >= 0, the LogAppendTime attribute bit and maxTimestamp, with the CRC
    they change.  The one stamping path (storage/log.py's single-batch fast path inlines it, see there).

    `body`: the batch's bytes after its 61-byte header when `header` holds only the header (a header
    rewritten apart from a large body, which is then never copied); None when the whole batch is in `header`.
    """
    _BASE_OFFSET.pack_into(header, position, base_offset)
    _LEADER_EPOCH.pack_into(header, position + 12, partition_leader_epoch)
    if log_append_time_ms < 0:
        return
    (attributes,) = _ATTRIBUTES.unpack_from(header, position + 21)
    _ATTRIBUTES.pack_into(header, position + 21, attributes | TIMESTAMP_TYPE_BIT)
    _TIMESTAMP.pack_into(header, position + 35, log_append_time_ms)
    if body is None:
        write_crc(header, position)
    else:
        _CRC.pack_into(header, position + 17, _crc_with_header(memoryview(header)[position:], body))


def _crc_with_header(header: bytes | bytearray | memoryview, body: bytes | bytearray | memoryview) -> int:
    """CRC32C of header[21:61] followed by `body` (the batch's bytes after its 61-byte header)."""
    value = crc32c(memoryview(header)[CRC_START:BATCH_HEADER_BYTES])
    return int(crc32c(body, value=value))
