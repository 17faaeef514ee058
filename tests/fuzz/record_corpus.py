"""Malformed v2 batches with a consistent header (batchLength, recordsCount = lastOffsetDelta + 1, CRC32C):
the probes of issue 15 part 1 and their siblings, and a record-level mutator for the fuzzer.

Everything here is built by hand (own varint writer, own header packing) so it does not share code with
what it tests.
"""

from __future__ import annotations

import random
import struct
from collections.abc import Callable
from dataclasses import dataclass

import cramjam
import crc32c

HEADER = struct.Struct(">qiibIhiqqqhii")
INVALID_RECORD, CORRUPT_MESSAGE, INVALID_TIMESTAMP = 87, 2, 32


def varint(value: int) -> bytes:
    raw = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)
    return bytes(out)


def record_body(offset_delta: int, key: bytes | None, value: bytes | None, *, timestamp_delta: int = 0,
                headers: tuple[tuple[bytes, bytes | None], ...] = ()) -> bytes:
    """A record's fields after its length varint."""
    out = bytearray(b"\x00") + varint(timestamp_delta) + varint(offset_delta)
    for field in (key, value):
        out += varint(-1) if field is None else varint(len(field)) + field
    out += varint(len(headers))
    for hk, hv in headers:
        out += varint(len(hk)) + hk + (varint(-1) if hv is None else varint(len(hv)) + hv)
    return bytes(out)


def record(offset_delta: int, key: bytes | None, value: bytes | None, **kw: object) -> bytes:
    body = record_body(offset_delta, key, value, **kw)  # type: ignore[arg-type]
    return varint(len(body)) + body


def batch(section: bytes, count: int, *, timestamp_ms: int, codec: int = 0, max_timestamp_ms: int | None = None,
          last_offset_delta: int | None = None, producer_id: int = -1, base_sequence: int = -1,
          precompressed: bool = False) -> bytes:
    """A v2 batch around `section` (records, compressed with `codec` here) with a header consistent with
    `count` and a correct CRC, whatever the section holds."""
    if precompressed:
        pass
    elif codec == 1:
        section = bytes(cramjam.gzip.compress(section))
    elif codec == 4:
        section = bytes(cramjam.zstd.compress(section))
    elif codec != 0:
        raise ValueError(codec)
    out = bytearray(61) + section
    HEADER.pack_into(out, 0, 0, len(out) - 12, -1, 2, 0, codec,
                     count - 1 if last_offset_delta is None else last_offset_delta, timestamp_ms,
                     timestamp_ms if max_timestamp_ms is None else max_timestamp_ms, producer_id,
                     0 if producer_id >= 0 else -1, base_sequence, count)
    struct.pack_into(">I", out, 17, crc32c.crc32c(bytes(out[21:])))
    return bytes(out)


@dataclass(frozen=True)
class Probe:
    name: str
    build: Callable[[int], bytes]  # now_ms -> the batch
    expected: int  # Kafka's error code
    compacted: bool = False
    record_error_indexes: tuple[int, ...] = ()
    kafka_accepts: bool = False  # Samsa is stricter than Kafka here (see storage/validator.py)
    kafka_answers: int | None = None  # Kafka 4.1.2 answers another code (a Kafka quirk; see the differential test)


def _cut_after_offset_delta(now: int) -> bytes:
    good = record_body(0, None, b"v")
    cut = good[:3]  # attributes, timestampDelta, offsetDelta
    return batch(varint(len(good)) + cut, 1, timestamp_ms=now)


PROBES: tuple[Probe, ...] = (
    Probe("record_length_past_end", lambda now: batch(varint(100) + record_body(0, None, b"v"), 1, timestamp_ms=now),
          INVALID_RECORD),
    Probe("header_count_2_31_minus_1", lambda now: batch(
        (lambda b: varint(len(b)) + b)(b"\x00" + varint(0) + varint(0) + varint(-1) + varint(1) + b"v"
                                       + varint(2**31 - 1)), 1, timestamp_ms=now), INVALID_RECORD),
    Probe("record_cut_after_offset_delta", _cut_after_offset_delta, INVALID_RECORD),
    Probe("record_length_shorter_than_fields", lambda now: batch(
        (lambda b: varint(len(b) - 2) + b)(record_body(0, None, b"value")), 1, timestamp_ms=now), INVALID_RECORD),
    Probe("trailing_bytes_after_last_record", lambda now: batch(record(0, None, b"v") + b"\x00\x00", 1,
                                                                timestamp_ms=now), INVALID_RECORD),
    Probe("fewer_records_than_count", lambda now: batch(record(0, None, b"v"), 2, timestamp_ms=now), INVALID_RECORD),
    Probe("varint_of_six_bytes", lambda now: batch(b"\xff\xff\xff\xff\xff\x01" + record_body(0, None, b"v"), 1,
                                                   timestamp_ms=now), INVALID_RECORD, kafka_answers=-1),
    Probe("negative_record_length", lambda now: batch(varint(-5) + record_body(0, None, b"v"), 1, timestamp_ms=now),
          INVALID_RECORD),
    Probe("zero_record_length", lambda now: batch(varint(0) + record_body(0, None, b"v"), 1, timestamp_ms=now),
          INVALID_RECORD),
    Probe("negative_header_count", lambda now: batch(
        (lambda b: varint(len(b)) + b)(b"\x00" + varint(0) + varint(0) + varint(-1) + varint(1) + b"v" + varint(-1)),
        1, timestamp_ms=now), INVALID_RECORD),
    Probe("negative_header_key_length", lambda now: batch(
        (lambda b: varint(len(b)) + b)(b"\x00" + varint(0) + varint(0) + varint(-1) + varint(1) + b"v" + varint(1)
                                       + varint(-1) + varint(-1)), 1, timestamp_ms=now), INVALID_RECORD),
    Probe("key_length_past_record", lambda now: batch(
        (lambda b: varint(len(b)) + b)(b"\x00" + varint(0) + varint(0) + varint(50) + b"k" + varint(-1)
                                       + varint(0)), 1, timestamp_ms=now), INVALID_RECORD),
    Probe("value_length_past_record", lambda now: batch(
        (lambda b: varint(len(b)) + b)(b"\x00" + varint(0) + varint(0) + varint(-1) + varint(40) + b"v"
                                       + varint(0)), 1, timestamp_ms=now), INVALID_RECORD),
    Probe("header_value_past_record", lambda now: batch(
        (lambda b: varint(len(b)) + b)(b"\x00" + varint(0) + varint(0) + varint(-1) + varint(1) + b"v" + varint(1)
                                       + varint(1) + b"h" + varint(30) + b"x"), 1, timestamp_ms=now),
          INVALID_RECORD),
    Probe("record_cut_in_zstd_batch", lambda now: batch(record(0, None, b"v") + varint(9) + b"\x00\x00", 2,
                                                        timestamp_ms=now, codec=4), INVALID_RECORD),
    Probe("trailing_bytes_in_gzip_batch", lambda now: batch(record(0, None, b"v") + b"\x07", 1, timestamp_ms=now,
                                                            codec=1), INVALID_RECORD),
    Probe("second_record_timestamp_in_future", lambda now: batch(
        record(0, None, b"a") + record(1, None, b"b", timestamp_delta=48 * 3600 * 1000), 2, timestamp_ms=now),
          INVALID_TIMESTAMP, record_error_indexes=(1,)),
    Probe("second_record_timestamp_too_old", lambda now: batch(
        record(0, None, b"a") + record(1, None, b"b", timestamp_delta=-(400 * 24 * 3600 * 1000)), 2,
        timestamp_ms=now), INVALID_TIMESTAMP, record_error_indexes=(1,)),
    Probe("compacted_null_key_in_second_record", lambda now: batch(
        record(0, b"k", b"a") + record(1, None, b"b"), 2, timestamp_ms=now), INVALID_RECORD, compacted=True,
          record_error_indexes=(1,)),
    Probe("compacted_null_key_in_zstd_batch", lambda now: batch(
        record(0, None, b"a") + record(1, b"k", b"b") + record(2, None, b"c"), 3, timestamp_ms=now, codec=4),
          INVALID_RECORD, compacted=True, record_error_indexes=(0, 2)),
    Probe("count_not_last_offset_delta_plus_one", lambda now: batch(
        record(0, None, b"a") + record(1, None, b"b"), 2, timestamp_ms=now, last_offset_delta=5), INVALID_RECORD),
    Probe("producer_id_without_sequence", lambda now: batch(record(0, None, b"a"), 1, timestamp_ms=now,
                                                            producer_id=5, base_sequence=-1), INVALID_RECORD),
    Probe("garbage_zstd_payload", lambda now: batch(b"\x28\xb5\x2f\xfd" + b"junk" * 4, 1, timestamp_ms=now, codec=4,
                                                    precompressed=True), CORRUPT_MESSAGE, kafka_answers=-1),
    Probe("offset_deltas_with_a_gap", lambda now: batch(record(0, None, b"a") + record(5, None, b"b"), 2,
                                                        timestamp_ms=now), INVALID_RECORD, kafka_accepts=True),
    Probe("offset_deltas_reversed_in_zstd_batch", lambda now: batch(record(1, None, b"a") + record(0, None, b"b"), 2,
                                                                    timestamp_ms=now, codec=4), INVALID_RECORD,
          kafka_accepts=True),
)


def fix_crc(data: bytearray) -> None:
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21:])))


def mutate(rng: random.Random, section: bytearray) -> bytearray:
    """One record-level mutation of an uncompressed records section (the caller re-frames the batch)."""
    out = bytearray(section)
    op = rng.randrange(7)
    if not out:
        return bytearray(rng.randbytes(rng.randrange(1, 8)))
    pos = rng.randrange(len(out))
    if op == 0:  # flip bits
        out[pos] ^= 1 << rng.randrange(8)
    elif op == 1:  # an interesting varint at a random place
        value = rng.choice((-1, 0, 1, -2, 63, 64, 127, 128, 2**31 - 1, -(2**31), 2**16, len(out), -len(out)))
        out[pos:pos + rng.randrange(1, 3)] = varint(value)
    elif op == 2:  # cut
        del out[pos:]
    elif op == 3:  # insert bytes
        out[pos:pos] = rng.randbytes(rng.randrange(1, 5))
    elif op == 4:  # delete a run
        del out[pos:pos + rng.randrange(1, 6)]
    elif op == 5:  # a continuation byte run (long varints)
        out[pos:pos] = b"\xff" * rng.randrange(1, 11)
    else:  # duplicate a slice
        end = min(len(out), pos + rng.randrange(1, 20))
        out[pos:pos] = out[pos:end]
    return out
