"""Record batches of the coordinators' internal topics: uncompressed key/value batches written with
kproto's encoder, and the lenient reader the coordinators replay their topics with at start-up."""

from __future__ import annotations

from collections.abc import Iterator

from samsa.kproto.batch import (
    BATCH_HEADER_BYTES,
    COMPRESSION_MASK,
    CONTROL_BIT,
    TRANSACTIONAL_BIT,
    CorruptBatchError,
    parse_header,
)
from samsa.kproto.record_scan import read_varint
from samsa.kproto.records import encode_batch as encode_record_batch

_VARLONG_BYTES = 10


def encode_batch(records: list[tuple[bytes | None, bytes | None]], timestamp_ms: int) -> bytearray:
    """One uncompressed batch (base offset 0: the leader assigns offsets) of (key, value) records; a
    bytearray, so the leader stamps it in place."""
    return bytearray(encode_record_batch([(key, value, ()) for key, value in records], timestamp_ms=timestamp_ms))


def iter_records(data: bytes) -> Iterator[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record in uncompressed, non-control, non-transactional batches; stops at a
    torn tail (or a batch that is not a v2 batch)."""
    pos = 0
    while pos + BATCH_HEADER_BYTES <= len(data):
        try:
            header = parse_header(data, pos)
        except CorruptBatchError:
            return
        end = pos + header.size_bytes
        if end > len(data):
            return
        if header.attributes & COMPRESSION_MASK or header.attributes & (CONTROL_BIT | TRANSACTIONAL_BIT):
            # Transactional offset commits count only once committed: broker/txn replays them (issue 5).
            pos = end
            continue
        rp = pos + BATCH_HEADER_BYTES
        for _ in range(header.records_count):
            size, rp = read_varint(data, rp, end, _VARLONG_BYTES)
            next_rp = rp + size
            rp += 1  # attributes
            _, rp = read_varint(data, rp, end, _VARLONG_BYTES)
            delta, rp = read_varint(data, rp, end, _VARLONG_BYTES)
            klen, rp = read_varint(data, rp, end, _VARLONG_BYTES)
            key = None if klen < 0 else data[rp:rp + klen]
            rp += max(klen, 0)
            vlen, rp = read_varint(data, rp, end, _VARLONG_BYTES)
            value = None if vlen < 0 else data[rp:rp + vlen]
            yield header.base_offset + delta, key, value
            rp = next_rp
        pos = end
