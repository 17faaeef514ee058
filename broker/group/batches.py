"""Record batches v2 for `__consumer_offsets`: the coordinator writes uncompressed batches of
key/value records and reads them back at start-up.  (Small on purpose: only what the coordinator
writes; kproto's general record codec can replace it.)"""

from __future__ import annotations

import struct
from collections.abc import Iterator

from samsa.kproto.checksum import crc32c

_HEADER = struct.Struct(">qiibIhiqqqhii")
_HEADER_BYTES = 61
_CRC_START = 21
_COMPRESSION_MASK = 0x07
_CONTROL_BIT = 0x20
_TRANSACTIONAL_BIT = 0x10


def _varint(value: int) -> bytes:
    v = (value << 1) ^ (value >> 63)  # zigzag
    out = bytearray()
    while v & ~0x7F:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _read_varint(buf: bytes, pos: int) -> tuple[int, int]:
    shift = raw = 0
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


def encode_batch(records: list[tuple[bytes | None, bytes | None]], timestamp_ms: int) -> bytearray:
    """One uncompressed batch (base offset 0: the leader assigns offsets) of (key, value) records."""
    body = bytearray()
    for delta, (key, value) in enumerate(records):
        rec = bytearray(b"\x00")  # attributes
        rec += _varint(0)  # timestamp delta
        rec += _varint(delta)
        rec += _varint(-1) if key is None else _varint(len(key)) + key
        rec += _varint(-1) if value is None else _varint(len(value)) + value
        rec += _varint(0)  # headers
        body += _varint(len(rec)) + rec
    count = len(records)
    header = _HEADER.pack(0, _HEADER_BYTES - 12 + len(body), -1, 2, 0, 0, count - 1, timestamp_ms, timestamp_ms,
                          -1, -1, -1, count)
    batch = bytearray(header) + body
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[_CRC_START:])))
    return batch


def iter_records(data: bytes) -> Iterator[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record in uncompressed, non-control, non-transactional batches; stops at a
    torn tail."""
    pos = 0
    while pos + _HEADER_BYTES <= len(data):
        (base_offset, length, _epoch, magic, _crc, attributes, _lod, _bt, _mt, _pid, _pe, _seq,
         count) = _HEADER.unpack_from(data, pos)
        end = pos + 12 + length
        if end > len(data) or magic != 2:
            return
        if attributes & _COMPRESSION_MASK or attributes & (_CONTROL_BIT | _TRANSACTIONAL_BIT):
            # Transactional offset commits count only once committed: broker/txn replays them (issue 5).
            pos = end
            continue
        rp = pos + _HEADER_BYTES
        for _ in range(count):
            size, rp = _read_varint(data, rp)
            next_rp = rp + size
            rp += 1  # attributes
            _, rp = _read_varint(data, rp)
            delta, rp = _read_varint(data, rp)
            klen, rp = _read_varint(data, rp)
            key = None if klen < 0 else data[rp:rp + klen]
            rp += max(klen, 0)
            vlen, rp = _read_varint(data, rp)
            value = None if vlen < 0 else data[rp:rp + vlen]
            yield base_offset + delta, key, value
            rp = next_rp
        pos = end
