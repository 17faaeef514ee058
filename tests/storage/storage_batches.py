"""A small record batch v2 encoder for storage tests (varint records, CRC32C)."""

from __future__ import annotations

import struct
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import crc32c

from samsa.storage import Log, LogConfig

_HEADER = struct.Struct(">qiibIhiqqqhii")


def _varint(n: int) -> bytes:
    z = (n << 1) ^ (n >> 63)
    out = bytearray()
    while True:
        b = z & 0x7F
        z >>= 7
        if z:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _record(offset_delta: int, ts_delta: int, key: bytes | None, value: bytes) -> bytes:
    body = bytearray(b"\x00")
    body += _varint(ts_delta)
    body += _varint(offset_delta)
    if key is None:
        body += _varint(-1)
    else:
        body += _varint(len(key)) + key
    body += _varint(len(value)) + value
    body += _varint(0)
    return _varint(len(body)) + bytes(body)


def make_batch(
    values: Sequence[bytes],
    *,
    base_offset: int = 0,
    timestamps: Sequence[int] | None = None,
    base_timestamp: int = 1_700_000_000_000,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    attributes: int = 0,
    leader_epoch: int = -1,
    keys: Sequence[bytes | None] | None = None,
) -> bytes:
    """One v2 batch holding `values` (CreateTime, uncompressed unless attributes say otherwise)."""
    assert values
    if timestamps is None:
        timestamps = [base_timestamp] * len(values)
    first_ts = timestamps[0]
    pairs = enumerate(zip(values, timestamps, strict=True))
    records = b"".join(_record(i, ts - first_ts, keys[i] if keys else None, v) for i, (v, ts) in pairs)
    last_delta = len(values) - 1
    body_after_crc = struct.pack(">hiqqqhii", attributes, last_delta, first_ts, max(timestamps), producer_id,
                                 producer_epoch, base_sequence, len(values)) + records
    crc = crc32c.crc32c(body_after_crc)
    batch_length = 4 + 1 + 4 + len(body_after_crc)
    return struct.pack(">qiibI", base_offset, batch_length, leader_epoch, 2, crc) + body_after_crc


def make_control_batch(*, producer_id: int, producer_epoch: int, commit: bool = True, base_offset: int = 0,
                       timestamp: int = 1_700_000_000_000) -> bytes:
    key = struct.pack(">hh", 0, 1 if commit else 0)
    value = struct.pack(">hi", 0, 0)
    return make_batch([value], keys=[key], base_offset=base_offset, timestamps=[timestamp],
                      producer_id=producer_id, producer_epoch=producer_epoch, attributes=0x30)


def decode_values(data: bytes) -> list[tuple[int, bytes]]:
    """(offset, value) for every record of whole uncompressed batches in `data`."""
    out = []
    pos = 0
    while pos < len(data):
        (base_offset, batch_length, _ple, magic, _crc, _attr, _lod, _bts, _mts, _pid, _pe, _bs,
         count) = _HEADER.unpack_from(data, pos)
        assert magic == 2
        end = pos + 12 + batch_length
        rp = pos + 61
        for _ in range(count):
            length, rp = _read_varint(data, rp)
            rec_end = rp + length
            rp += 1
            _, rp = _read_varint(data, rp)
            od, rp = _read_varint(data, rp)
            klen, rp = _read_varint(data, rp)
            if klen > 0:
                rp += klen
            vlen, rp = _read_varint(data, rp)
            out.append((base_offset + od, data[rp : rp + vlen]))
            rp = rec_end
        pos = end
    return out


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = raw = 0
    while True:
        b = buf[pos]
        pos += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7


NOW_MS = 1_700_000_000_000


def open_log(directory: Path, config: LogConfig | None = None, *, now_ms: int = NOW_MS, **kwargs: Any) -> Log:
    return Log.open(directory, config or LogConfig(), now_ms=now_ms, **kwargs)


def compress_batch(batch: bytes, codec: int) -> bytes:
    """Re-encode an uncompressed batch with codec 1 gzip, 2 snappy (xerial framing), 3 lz4 or 4 zstd."""
    import cramjam

    records = batch[61:]
    if codec == 1:
        body = bytes(cramjam.gzip.compress(records))
    elif codec == 2:
        block = bytes(cramjam.snappy.compress_raw(records))
        body = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1) + struct.pack(">I", len(block)) + block
    elif codec == 3:
        body = bytes(cramjam.lz4.compress(records))
    else:
        body = bytes(cramjam.zstd.compress(records))
    fields = list(_HEADER.unpack_from(batch, 0))
    fields[5] |= codec  # attributes
    after_crc = struct.pack(">hiqqqhii", *fields[5:13]) + body
    return struct.pack(">qiibI", fields[0], 9 + len(after_crc), fields[2], 2, crc32c.crc32c(after_crc)) + after_crc
