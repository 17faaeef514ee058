"""The per-record validation walk of a produced batch (scan_records), in Python and as its native twin.

The produce path walks every record of every batch (storage.validator), so this is the hot loop of Kafka's
LogValidator; the C extension samsa.kproto._records_native gives the same answers and messages ~100 times
faster, and the Python here is the fallback (and the reference the tests hold the C against).
"""

from __future__ import annotations

import os
from collections.abc import Callable

from samsa.kproto.batch import CorruptBatchError

__all__ = ["native_scan_records", "read_varint", "scan_records", "scan_records_impl"]

_MASK32, _MASK64 = 2**32 - 1, 2**64 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


def read_varint(data: bytes | bytearray | memoryview, pos: int, end: int, max_bytes: int) -> tuple[int, int]:
    """A zigzag varint of at most `max_bytes` bytes (5: int32, 10: int64) at `pos`.

    Bits past the type's width are dropped, as Java's shifts into an int or a long drop them
    (ByteUtils.readUnsignedVarint/readUnsignedVarlong), so we accept and refuse exactly what Kafka does.
    """
    raw = 0
    shift = 0
    limit = pos + max_bytes
    while True:
        if pos >= end:
            raise CorruptBatchError("record ends inside a varint")
        if pos >= limit:
            raise CorruptBatchError(f"varint longer than {max_bytes} bytes")
        byte = data[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if byte < 0x80:
            break
        shift += 7
    raw &= _MASK32 if max_bytes == 5 else _MASK64
    return (raw >> 1) ^ -(raw & 1), pos


def scan_records(
    data: bytes | bytearray | memoryview, pos: int, end: int, count: int
) -> tuple[int, int, int, bool, bool]:
    """Validate `count` records in data[pos:end] exactly as decoding does, building nothing.

    Returns (min timestamp delta, max timestamp delta, index of the first record with the max delta,
    offset deltas are 0..count-1, some key is null); raises CorruptBatchError for what Kafka's
    DefaultRecord.readFrom refuses, and for bytes left after the last record.  The produce path runs this
    on every batch, so it is written for speed: reads inside a record are not bounded by the record's end
    (only by the data's, through IndexError); any field running past the record's declared length
    leaves `pos` past its end, which the per-record length check then refuses.  A native twin
    (samsa.kproto._records_native) gives the same answers; see `scan_records_impl` below.
    """
    min_delta = _INT64_MAX
    max_delta = _INT64_MIN
    max_index = -1
    contiguous = True
    null_key = False
    read = read_varint
    try:
        for index in range(count):
            b = data[pos]
            if b < 0x80:
                length = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                length, pos = read(data, pos, end, 5)
            record_end = pos + length
            if length <= 0 or record_end > end:
                raise CorruptBatchError(f"Invalid record size: expected {length} bytes in record payload, "
                                        f"but the buffer has only {end - pos} remaining bytes")
            b = data[pos + 1]  # after the attributes byte
            if b < 0x80:
                delta = (b >> 1) ^ -(b & 1)
                pos += 2
            else:
                delta, pos = read(data, pos + 1, record_end, 10)
            b = data[pos]
            if b < 0x80:
                if (b >> 1) ^ -(b & 1) != index:
                    contiguous = False
                pos += 1
            else:
                offset_delta, pos = read(data, pos, record_end, 5)
                if offset_delta != index:
                    contiguous = False
            b = data[pos]
            if b < 0x80:
                key_length = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                key_length, pos = read(data, pos, record_end, 5)
            if key_length >= 0:
                pos += key_length
            else:
                null_key = True
            b = data[pos]
            if b < 0x80:
                value_length = (b >> 1) ^ -(b & 1)
                pos += 1
            else:
                value_length, pos = read(data, pos, record_end, 5)
            if value_length > 0:
                pos += value_length
            b = data[pos]
            if b == 0:
                pos += 1
            else:
                if b < 0x80:
                    header_count = (b >> 1) ^ -(b & 1)
                    pos += 1
                else:
                    header_count, pos = read(data, pos, record_end, 5)
                if header_count < 0:
                    raise CorruptBatchError(f"Found invalid number of record headers {header_count}")
                if header_count > record_end - pos:
                    raise CorruptBatchError(f"Found invalid number of record headers. {header_count} is larger "
                                            "than the remaining size of the record")
                for _ in range(header_count):
                    key_size, pos = read(data, pos, record_end, 5)
                    if key_size < 0:
                        raise CorruptBatchError(f"Invalid negative header key size {key_size}")
                    value_size, pos = read(data, pos + key_size, record_end, 5)
                    if value_size > 0:
                        pos += value_size
            if pos != record_end:
                raise CorruptBatchError(f"Invalid record size: expected to read {length} bytes in record "
                                        f"payload, but instead read {length + pos - record_end}")
            if delta < min_delta:
                min_delta = delta
            if delta > max_delta:
                max_delta = delta
                max_index = index
    except IndexError:
        raise CorruptBatchError("Incorrect declared batch size, premature EOF reached") from None
    if pos != end:
        raise CorruptBatchError("Incorrect declared batch size, records still remaining in file")
    return min_delta, max_delta, max_index, contiguous, null_key


# The native twin when it was built (pyproject's optional ext-module), else the Python above; SAMSA_PURE_PYTHON=1
# forces the Python walk (tests run both).
_ScanRecords = Callable[[bytes | bytearray | memoryview, int, int, int], tuple[int, int, int, bool, bool]]
scan_records_impl: _ScanRecords = scan_records
native_scan_records: _ScanRecords | None = None
try:
    from samsa.kproto._records_native import scan_records as native_scan_records
except ImportError:  # no C compiler when it was installed
    pass
if native_scan_records is not None and not os.environ.get("SAMSA_PURE_PYTHON"):
    scan_records_impl = native_scan_records
