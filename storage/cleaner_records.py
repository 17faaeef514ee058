"""Rewriting one stored record batch for the log cleaner: which records it holds, and the batch that keeps some.

Kafka's MemoryRecords.filterTo for magic v2, which we follow:
- a rewritten batch keeps its baseOffset, its lastOffsetDelta (so the batch's last offset and a producer's
  last sequence, baseSequence + lastOffsetDelta, survive even when the last record goes), producer id,
  epoch, base sequence, partition leader epoch, codec and its transactional/control/timestamp-type bits;
  each kept record keeps its offset delta; the CRC is recomputed;
- KIP-534: the first time a batch holding a tombstone (or a transaction marker whose data is gone) is
  rewritten, it gets the delete-horizon attribute bit and baseTimestamp = now + delete.retention.ms, the
  records' timestamp deltas being rebased on it so every record keeps its timestamp;
- a batch that must stay although none of its records do (the last batch of an active producer, the last
  batch of a cleaning round) becomes an empty batch: the header alone, recordsCount 0, both timestamps the
  batch's max timestamp (Kafka's MemoryRecords.writeEmptyHeader).

`SegmentReader` reads a segment's batches in chunks for the cleaner's walks (native or Python).
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from typing import NamedTuple

from samsa.kproto.batch import (
    BATCH_HEADER_BYTES,
    COMPRESSION_MASK,
    CONTROL_BIT,
    DELETE_HORIZON_BIT,
    LOG_OVERHEAD_BYTES,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    BatchHeader,
    CorruptBatchError,
    is_crc_valid,
    parse_header,
    write_crc,
)
from samsa.kproto.compression import compress, decompress
from samsa.kproto.record_scan import read_varint
from samsa.storage.file_io import FileIO

_HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_READ_BYTES = 4096  # a header-only walk's read when batches outgrow the read chunk


class RawRecord(NamedTuple):
    """One record of a batch's (decompressed) records section, located but not copied."""

    offset: int
    timestamp_ms: int
    key: bytes | None
    has_value: bool
    tail_start: int  # position of offsetDelta: everything from here to `end` is copied as it is
    end: int


def delete_horizon_ms(header: BatchHeader) -> int | None:
    """KIP-534: the time after which this batch's tombstones and markers may go, if a cleaning set it."""
    return header.base_timestamp if header.attributes & DELETE_HORIZON_BIT else None


def records_section(batch: bytes, header: BatchHeader, max_bytes: int) -> bytes:
    """The records of a whole stored batch, decompressed (at most `max_bytes`; DecompressionError past it)."""
    body = memoryview(batch)[BATCH_HEADER_BYTES : header.size_bytes]
    if header.compression:
        return decompress(header.compression, body, max_bytes)
    return bytes(body)


def iter_raw_records(section: bytes, header: BatchHeader) -> Iterator[RawRecord]:
    """Each record's offset, timestamp, key and whether it has a value; CorruptBatchError if malformed.

    The one-byte varints (nearly all of them: lengths under 64, small deltas) are decoded inline; longer
    ones go through kproto's read_varint (the cleaner's per-record loop is its CPU cost)."""
    pos, end = 0, len(section)
    base_offset, base_ts = header.base_offset, header.base_timestamp
    for _ in range(header.records_count):
        b = section[pos] if pos < end else 0x80
        if b < 0x80:
            length, pos = (b >> 1) ^ -(b & 1), pos + 1
        else:
            length, pos = read_varint(section, pos, end, 5)
        record_end = pos + length
        if length < 1 or record_end > end:
            raise CorruptBatchError(f"record length {length} runs past the batch at {header.base_offset}")
        pos += 1  # attributes
        fields = [0, 0, 0]  # timestampDelta, offsetDelta, keyLength
        tail_start = pos
        for i in range(3):
            if i == 1:
                tail_start = pos
            b = section[pos] if pos < record_end else 0x80
            if b < 0x80:
                fields[i], pos = (b >> 1) ^ -(b & 1), pos + 1
            else:
                fields[i], pos = read_varint(section, pos, record_end, 10 if i == 0 else 5)
        ts_delta, offset_delta, key_length = fields
        key: bytes | None = None
        if key_length >= 0:
            key = section[pos : pos + key_length]
            pos += key_length
        value_length, pos = read_varint(section, pos, record_end, 5)
        if pos > record_end or pos + max(value_length, 0) > record_end:
            raise CorruptBatchError(f"record fields run past its length in the batch at {header.base_offset}")
        yield RawRecord(base_offset + offset_delta, base_ts + ts_delta, key, value_length >= 0, tail_start,
                        record_end)
        pos = record_end
    if pos != end:
        raise CorruptBatchError(f"{end - pos} bytes after the last record of the batch at {header.base_offset}")


def _varint(out: bytearray, value: int) -> None:
    raw = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    while raw >= 0x80:
        out.append((raw & 0x7F) | 0x80)
        raw >>= 7
    out.append(raw)


def rebuild_batch(header: BatchHeader, section: bytes, kept: list[RawRecord], horizon_ms: int | None) -> bytes:
    """The batch holding only `kept` (records of `section`, in order), as Kafka's filterTo writes it.

    `horizon_ms`: the delete horizon to stamp (KIP-534), None to leave the batch without one.
    """
    if not kept:
        return empty_batch(header)
    base_ts = horizon_ms if horizon_ms is not None else kept[0].timestamp_ms
    body = bytearray()
    max_ts = -1
    for r in kept:
        rec = bytearray(b"\x00")  # attributes
        _varint(rec, r.timestamp_ms - base_ts)
        rec += section[r.tail_start : r.end]
        _varint(body, len(rec))
        body += rec
        max_ts = max(max_ts, r.timestamp_ms)
    if header.is_log_append_time:
        max_ts = header.max_timestamp
    return pack_batch(header, body, len(kept), base_ts, max_ts, horizon_ms is not None)


def pack_batch(header: BatchHeader, body: bytes | bytearray, records_count: int, base_ts: int, max_ts: int,
               horizon: bool) -> bytes:
    """`header`'s batch around `body` (records, compressed here with the batch's codec): rebuild_batch's
    last step, also used for the records the native filter kept."""
    codec = header.compression
    data = compress(codec, body) if codec else bytes(body)
    attributes = header.attributes & (COMPRESSION_MASK | TIMESTAMP_TYPE_BIT | TRANSACTIONAL_BIT | CONTROL_BIT)
    if horizon:
        attributes |= DELETE_HORIZON_BIT
    out = bytearray(BATCH_HEADER_BYTES + len(data))
    _HEADER.pack_into(out, 0, header.base_offset, len(out) - LOG_OVERHEAD_BYTES, header.partition_leader_epoch,
                      2, 0, attributes, header.last_offset_delta, base_ts, max_ts, header.producer_id,
                      header.producer_epoch, header.base_sequence, records_count)
    out[BATCH_HEADER_BYTES:] = data
    write_crc(out)
    return bytes(out)


def empty_batch(header: BatchHeader) -> bytes:
    """The header of `header`'s batch with no records (Kafka's writeEmptyHeader): keeps the producer's
    id, epoch, sequence range and the batch's offsets, so producer state rebuilt from the log survives."""
    attributes = header.attributes & (TIMESTAMP_TYPE_BIT | TRANSACTIONAL_BIT | CONTROL_BIT)
    out = bytearray(BATCH_HEADER_BYTES)
    _HEADER.pack_into(out, 0, header.base_offset, BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES,
                      header.partition_leader_epoch, 2, 0, attributes, header.last_offset_delta,
                      header.max_timestamp, header.max_timestamp, header.producer_id, header.producer_epoch,
                      header.base_sequence, 0)
    write_crc(out)
    return bytes(out)


class SegmentReader:
    """The batches of the file open at `fd`, from `start` up to `size`, read `chunk_bytes` at a time (the read
    half of log.cleaner.io.buffer.size per cleaner thread, as Kafka's Cleaner splits it), a read growing to
    hold a larger batch (Kafka grows its read buffer up to max.message.bytes).

    Two ways through: `next_batch` parses, checks and returns one batch (the Python walk); a native walk
    takes `buf` from `rel`, handles whole batches and reports where it stopped (`advance`); when it stopped at
    a batch not whole in the buffer, `refill` reads it in.
    """

    __slots__ = ("_chunk", "_fd", "_io", "_throttle", "buf", "buf_start", "pos", "size")

    def __init__(self, io: FileIO, fd: int, size: int, chunk_bytes: int, start: int = 0,
                 throttle: Callable[[int], None] | None = None) -> None:
        self._io, self._fd, self.size, self._chunk, self._throttle = io, fd, size, max(chunk_bytes, 1), throttle
        self.buf = b""
        self.buf_start = self.pos = start

    @property
    def done(self) -> bool:
        return self.pos >= self.size

    @property
    def rel(self) -> int:
        """The position in `buf` of the next batch."""
        return self.pos - self.buf_start

    def advance(self, rel: int) -> None:
        self.pos = self.buf_start + rel

    def _read(self, n: int) -> None:
        self.buf = self._io.pread(self._fd, n, self.pos)
        self.buf_start = self.pos
        if self._throttle is not None:
            self._throttle(len(self.buf))

    def _peek_size(self) -> int | None:
        rel = self.rel
        if len(self.buf) - rel < LOG_OVERHEAD_BYTES:
            return None
        return int.from_bytes(self.buf[rel + 8 : rel + 12], "big", signed=True) + LOG_OVERHEAD_BYTES

    def refill(self) -> bool:
        """Read so that `buf` holds the whole batch at `pos`; False if it cannot (`next_batch` says why)."""
        remaining = self.size - self.pos
        n = self._peek_size()
        if n is None:  # not even the batch's size in the buffer: a chunk first
            self._read(min(self._chunk, remaining))
            n = self._peek_size()
            if n is None:
                return False
        if n > remaining:
            return False
        if len(self.buf) - self.rel < n:
            self._chunk = max(self._chunk, n)  # grown for the rest of the segment, as Kafka's read buffer
            self._read(min(self._chunk, remaining))
        return len(self.buf) - self.rel >= max(n, BATCH_HEADER_BYTES)

    def refill_header(self) -> bool:
        """For a walk that reads headers only and may have jumped past `buf`: read at `pos`, one page when it
        jumped (the batches are larger than the buffer), else a chunk; False if not even a header is left."""
        jumped = self.rel > len(self.buf)
        self._read(min(self.size - self.pos, HEADER_READ_BYTES if jumped else self._chunk))
        return len(self.buf) >= BATCH_HEADER_BYTES

    def next_batch(self) -> tuple[BatchHeader, bytes]:
        """The batch at `pos`, CRC-checked; CorruptBatchError on a bad header, a torn batch or a CRC mismatch."""
        pos, size = self.pos, self.size
        if len(self.buf) - self.rel < BATCH_HEADER_BYTES:
            self._read(min(self._chunk, size - pos))
            if len(self.buf) < BATCH_HEADER_BYTES:
                raise CorruptBatchError(f"torn batch header at position {pos}")
        h = parse_header(self.buf, self.rel)
        n = h.size_bytes
        if pos + n > size:
            raise CorruptBatchError(f"batch at position {pos} runs past the end of the segment")
        if len(self.buf) - self.rel < n:
            self._read(max(min(self._chunk, size - pos), n))
        rel = self.rel
        data = self.buf[rel : rel + n]
        if len(data) < n or not is_crc_valid(data, h):
            raise CorruptBatchError(f"CRC mismatch or short read in batch at position {pos}")
        self.pos += n
        return h, data
