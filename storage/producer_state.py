"""Idempotent-producer state per producer id, and its `.snapshot` files (Kafka's ProducerStateManager).

Each entry remembers the producer epoch and the last 5 batches (sequence range, offsets, the batch's
CRC32C and base timestamp), so a retried batch is answered with its original offsets, a sequence gap is
refused, and a "retry" that reuses a remembered sequence with different records is refused with
INVALID_RECORD (stricter than Kafka, which answers it with the original offset: the seeds' "reject
conflicting bytes for the same sequence").

The batch CRC is the natural checksum: it is already in every header, the produce path has verified it,
and it covers attributes through the records but not the base offset or partition leader epoch the
broker rewrites, so the client's batch and the log's copy (leader, follower, recovery replay) carry the
same value.  Only when the CRCs differ is more work done: a client may re-encode a retry with new batch
timestamps (kafkajs stamps Date.now() into baseTimestamp/maxTimestamp at every encode when the messages
carry none), so the retry's CRC is recomputed with the original batch's two timestamps; equal, it is the
same records (keys, values, headers, timestamp deltas) and a duplicate.  On a LogAppendTime topic the log's
copy is restamped (its CRC and max timestamp are the broker's), so there the checksum is unknown (-1) on
every replica and a duplicate is answered as Kafka does.

Snapshot file `<20-digit offset>.snapshot` — our own checksummed format (Kafka's keeps only the last
batch per producer; we keep all 5 so retries stay recognisable across restarts; Kafka's tools do not
read either version).  Big-endian:

    magic b"SMPS" | version i16 = 2 | crc u32 (CRC32C of everything after it)
    offset i64 (state reflects the log below this offset) | producer count i32
    per producer: producer_id i64, producer_epoch i16, last_timestamp i64, coordinator_epoch i32,
                  current_txn_first_offset i64 (-1: none), batch count i8,
                  per batch: first_seq i32, last_seq i32, first_offset i64, last_offset i64, timestamp i64,
                             batch_crc i64 (the batch's CRC32C; -1: unknown), base_timestamp i64

Version 1 (written before the checksums) is the same without batch_crc and base_timestamp; it still
loads, its batches with an unknown checksum.
"""

from __future__ import annotations

import itertools
import struct
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from samsa.kproto.batch import (
    CONTROL_BIT,
    DELETE_HORIZON_BIT,
    NO_PRODUCER_EPOCH,
    NO_SEQUENCE,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    BatchHeader,
)
from samsa.kproto.checksum import crc32c
from samsa.storage.errors import InvalidProducerEpochError, InvalidRecordError, OutOfOrderSequenceError
from samsa.storage.file_io import FileIO

NUM_BATCHES_TO_RETAIN = 5
SNAPSHOT_SUFFIX = ".snapshot"
_MAGIC = b"SMPS"
_VERSION = 2
_PREFIX = struct.Struct(">4shI")
_BODY_HEAD = struct.Struct(">qi")
_PRODUCER = struct.Struct(">qhqiqb")
_BATCH_BY_VERSION = {1: struct.Struct(">iiqqq"), 2: struct.Struct(">iiqqqqq")}
_BATCH = _BATCH_BY_VERSION[_VERSION]
_TIMESTAMPS = struct.Struct(">qq")  # baseTimestamp, maxTimestamp
# Positions in a batch v2: the CRC covers [_CRC_START, end), the batch timestamps [_TIMESTAMPS_START, _TIMESTAMPS_END).
_CRC_START, _TIMESTAMPS_START, _TIMESTAMPS_END = 21, 27, 43
UNKNOWN_CRC = -1
_RESTAMPED = TIMESTAMP_TYPE_BIT | DELETE_HORIZON_BIT  # the broker rewrote the batch's timestamps
_INT32_MAX = 0x7FFFFFFF
_new_tuple = tuple.__new__


class CorruptSnapshotError(ValueError):
    pass


class BatchMetadata(NamedTuple):
    """One of a producer's last batches.  A NamedTuple (built on every idempotent append, where a frozen
    dataclass's __init__ costs ~1 us)."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    timestamp_ms: int
    crc: int = UNKNOWN_CRC  # the batch's CRC32C; UNKNOWN_CRC: not known (LogAppendTime, version 1 snapshot)
    base_timestamp_ms: int = -1


def restamped_crc(records: bytes | bytearray | memoryview, position: int, h: BatchHeader, base_timestamp_ms: int,
                  max_timestamp_ms: int) -> int:
    """The CRC the batch `h` at `position` of `records` would have with these batch timestamps."""
    view = memoryview(records)[position : position + h.size_bytes]
    crc = crc32c(view[_CRC_START:_TIMESTAMPS_START])
    crc = crc32c(_TIMESTAMPS.pack(base_timestamp_ms, max_timestamp_ms), crc)
    return int(crc32c(view[_TIMESTAMPS_END:], crc))


def replayed(producer_id: int, h: BatchHeader, original: BatchMetadata,
             records: bytes | bytearray | memoryview | None, position: int) -> BatchMetadata:
    """`original` if `h` (at `position` of `records`, when given) holds the same records; InvalidRecordError
    if not.  Unknown checksums are not compared (Kafka's answer)."""
    if original.crc == UNKNOWN_CRC or original.crc == h.crc:
        return original
    if records is not None and restamped_crc(records, position, h, original.base_timestamp_ms,
                                             original.timestamp_ms) == original.crc:
        return original  # the same records, re-encoded with new batch timestamps
    raise InvalidRecordError(
        f"producer {producer_id} epoch {h.producer_epoch}: sequence {original.first_seq}..{original.last_seq} "
        f"was written at offset {original.first_offset} with different records (CRC {original.crc:#010x}, "
        f"this batch {h.crc:#010x}); a retry must resend the same records"
    )


@dataclass(slots=True)
class ProducerStateEntry:
    """State of one producer id.  Treat as read-only outside storage."""

    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    batches: deque[BatchMetadata] = field(default_factory=lambda: deque(maxlen=NUM_BATCHES_TO_RETAIN))
    last_timestamp_ms: int = -1
    coordinator_epoch: int = -1
    current_txn_first_offset: int | None = None

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, producer_epoch: int, first_seq: int, last_seq: int) -> BatchMetadata | None:
        if producer_epoch != self.producer_epoch:
            return None
        for b in self.batches:
            if b.first_seq == first_seq and b.last_seq == last_seq:
                return b
        return None


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    return next_seq == last_seq + 1 or (next_seq == 0 and last_seq == _INT32_MAX)


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


# Values of ProducerStateManager.txn_version, unique across all managers (a partition's cache keyed by one
# stays right even if its log's manager were replaced).
_TXN_VERSIONS = itertools.count(1)


class ProducerStateManager:
    def __init__(self) -> None:
        self.producers: dict[int, ProducerStateEntry] = {}
        # Changes whenever a producer's open transaction may have begun or ended (its
        # current_txn_first_offset set or cleared, the state cleared or loaded): the key under which
        # callers cache the first unstable offset, which would otherwise walk every producer.
        self.txn_version = next(_TXN_VERSIONS)

    # -- leader validation --------------------------------------------------------------------------------

    def check_duplicate(self, header: BatchHeader, records: bytes | bytearray | memoryview | None = None,
                        position: int = 0) -> BatchMetadata | None:
        """The original batch if `header` (the batch at `position` of `records`) is a retry of it; raises
        InvalidRecordError if the retry's records differ from the original's (see `replayed`)."""
        if header.producer_id < 0 or header.base_sequence == NO_SEQUENCE or header.is_control:
            return None
        entry = self.producers.get(header.producer_id)
        if entry is None:
            return None
        dup = entry.find_duplicate(header.producer_epoch, header.base_sequence, header.last_sequence)
        return None if dup is None else replayed(header.producer_id, header, dup, records, position)

    def check_append(self, h: BatchHeader, records: bytes | bytearray | None = None) -> BatchMetadata | None:
        """check_duplicate(h), then validate((h,)) if it is not a duplicate, in one go for the leader's
        single-batch append (`records`: the batch's bytes): the original batch if h is a retry, None if h may
        be appended; raises InvalidRecordError for a retry with different records (see check_duplicate), and
        InvalidProducerEpochError / OutOfOrderSequenceError like validate().  Changes nothing."""
        pid = h.producer_id
        if pid < 0:
            return None
        entry = self.producers.get(pid)
        epoch = h.producer_epoch
        base_seq = h.base_sequence
        if entry is None:  # no duplicate; validate() compares with NO_PRODUCER_EPOCH and NO_SEQUENCE
            if epoch < NO_PRODUCER_EPOCH:
                raise InvalidProducerEpochError(
                    f"producer {pid}: epoch {epoch} is older than current epoch {NO_PRODUCER_EPOCH}"
                )
            return None
        cur_epoch = entry.producer_epoch
        no_seq = base_seq == NO_SEQUENCE or h.attributes & CONTROL_BIT
        if not no_seq and epoch == cur_epoch:
            last_seq = (base_seq + h.last_offset_delta) % 0x80000000
            for b in entry.batches:
                if b.first_seq == base_seq and b.last_seq == last_seq:
                    return b if b.crc == h[4] else replayed(pid, h, b, records, 0)  # (h[4]: h.crc)
        if epoch < cur_epoch:
            raise InvalidProducerEpochError(f"producer {pid}: epoch {epoch} is older than current epoch {cur_epoch}")
        if no_seq:
            return None
        if epoch != cur_epoch:
            if base_seq != 0 and cur_epoch != NO_PRODUCER_EPOCH:
                raise OutOfOrderSequenceError(
                    f"producer {pid}: new epoch {epoch} must start at sequence 0, got {base_seq}"
                )
        elif cur_epoch != NO_PRODUCER_EPOCH:
            cur_last_seq = entry.batches[-1].last_seq if entry.batches else NO_SEQUENCE
            if not _in_sequence(cur_last_seq, base_seq):
                raise OutOfOrderSequenceError(
                    f"producer {pid} epoch {epoch}: sequence {base_seq} does not follow {cur_last_seq}"
                )
        return None

    def validate(self, headers: Iterable[BatchHeader]) -> None:
        """Kafka's ProducerAppendInfo checks for client appends: fencing and sequence continuity.

        Raises InvalidProducerEpochError / OutOfOrderSequenceError; changes nothing.
        """
        staged: dict[int, tuple[int, int]] = {}  # producer id -> (epoch, last seq) after earlier batches
        for h in headers:
            pid = h.producer_id
            if pid < 0:
                continue
            entry = self.producers.get(pid)
            if pid in staged:
                cur_epoch, cur_last_seq = staged[pid]
            elif entry is not None:
                cur_epoch, cur_last_seq = entry.producer_epoch, entry.last_seq
            else:
                cur_epoch, cur_last_seq = NO_PRODUCER_EPOCH, NO_SEQUENCE
            if h.producer_epoch < cur_epoch:
                raise InvalidProducerEpochError(
                    f"producer {pid}: epoch {h.producer_epoch} is older than current epoch {cur_epoch}"
                )
            if h.is_control or h.base_sequence == NO_SEQUENCE:
                staged[pid] = (h.producer_epoch, cur_last_seq if h.producer_epoch == cur_epoch else NO_SEQUENCE)
                continue
            if h.producer_epoch != cur_epoch:
                if h.base_sequence != 0 and cur_epoch != NO_PRODUCER_EPOCH:
                    raise OutOfOrderSequenceError(
                        f"producer {pid}: new epoch {h.producer_epoch} must start at sequence 0, "
                        f"got {h.base_sequence}"
                    )
            elif cur_epoch != NO_PRODUCER_EPOCH and not _in_sequence(cur_last_seq, h.base_sequence):
                raise OutOfOrderSequenceError(
                    f"producer {pid} epoch {h.producer_epoch}: sequence {h.base_sequence} "
                    f"does not follow {cur_last_seq}"
                )
            staged[pid] = (h.producer_epoch, h.last_sequence)

    # -- updates ------------------------------------------------------------------------------------------

    def update(self, h: BatchHeader) -> None:
        """Apply a batch that is now in the log (leader, follower or recovery replay).

        The leader passes the header as the client sent it (h.crc the client's CRC) with the offsets and
        epoch as written; followers and recovery pass the log's header."""
        pid = h.producer_id
        if pid < 0:
            return
        entry = self.producers.get(pid)
        if entry is None:
            entry = ProducerStateEntry(producer_id=pid)
            self.producers[pid] = entry
        if h.producer_epoch != entry.producer_epoch:
            if h.producer_epoch < entry.producer_epoch:
                return  # a follower or replay seeing an old epoch: Kafka only logs this
            entry.producer_epoch = h.producer_epoch
            entry.batches.clear()
        entry.last_timestamp_ms = h.max_timestamp
        attributes = h.attributes
        if attributes & CONTROL_BIT:
            if entry.current_txn_first_offset is not None:
                entry.current_txn_first_offset = None
                self.txn_version = next(_TXN_VERSIONS)
            return
        base_seq = h.base_sequence
        if base_seq != NO_SEQUENCE:
            delta = h.last_offset_delta
            entry.batches.append(_new_tuple(BatchMetadata, (  # h.last_sequence, h.last_offset, inline;
                base_seq, (base_seq + delta) % 0x80000000, h.base_offset, h.base_offset + delta, h.max_timestamp,
                # a LogAppendTime stamp changes the CRC (follower, recovery), and so does the log cleaner (a
                # batch it emptied holds fewer records than offsets; one it stamped has a delete horizon): the
                # client's is unknown then
                UNKNOWN_CRC if attributes & _RESTAMPED or h[12] != delta + 1 else h[4],  # h[12]: records_count
                h[7])))  # h[7]: base_timestamp
        if attributes & TRANSACTIONAL_BIT and entry.current_txn_first_offset is None:
            entry.current_txn_first_offset = h.base_offset
            self.txn_version = next(_TXN_VERSIONS)

    def clear(self) -> None:
        self.producers.clear()
        self.txn_version = next(_TXN_VERSIONS)

    def first_unstable_offset(self) -> int | None:
        """The first offset of the earliest open transaction, None when none is open (Kafka's
        ProducerStateManager.firstUnstableOffset, before the high watermark caps it)."""
        first: int | None = None
        for entry in self.producers.values():
            offset = entry.current_txn_first_offset
            if offset is not None and (first is None or offset < first):
                first = offset
        return first

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """Forget producers idle for `expiration_ms` (Kafka's producer.id.expiration.ms), keeping any with an
        open transaction. Their next batch is then treated like a new producer's (any sequence accepted
        for a fresh epoch), as in Kafka. Returns how many were removed."""
        expired = [
            pid for pid, e in self.producers.items()
            if e.current_txn_first_offset is None and now_ms - e.last_timestamp_ms >= expiration_ms
        ]
        for pid in expired:
            del self.producers[pid]
        return len(expired)

    # -- snapshots ----------------------------------------------------------------------------------------

    def encode_snapshot(self, offset: int) -> bytes:
        parts = [_BODY_HEAD.pack(offset, len(self.producers))]
        for e in self.producers.values():
            txn = -1 if e.current_txn_first_offset is None else e.current_txn_first_offset
            parts.append(_PRODUCER.pack(e.producer_id, e.producer_epoch, e.last_timestamp_ms,
                                        e.coordinator_epoch, txn, len(e.batches)))
            parts.extend(_BATCH.pack(*b) for b in e.batches)
        body = b"".join(parts)
        return _PREFIX.pack(_MAGIC, _VERSION, crc32c(body)) + body

    @staticmethod
    def decode_snapshot(data: bytes) -> tuple[int, dict[int, ProducerStateEntry]]:
        try:
            magic, version, crc = _PREFIX.unpack_from(data, 0)
            batch_struct = _BATCH_BY_VERSION.get(version)
            if magic != _MAGIC or batch_struct is None:
                raise CorruptSnapshotError("bad magic or version")
            body = memoryview(data)[_PREFIX.size :]
            if crc32c(body) != crc:
                raise CorruptSnapshotError("checksum mismatch")
            offset, count = _BODY_HEAD.unpack_from(body, 0)
            pos = _BODY_HEAD.size
            producers: dict[int, ProducerStateEntry] = {}
            for _ in range(count):
                pid, epoch, ts, coord, txn, nbatches = _PRODUCER.unpack_from(body, pos)
                pos += _PRODUCER.size
                entry = ProducerStateEntry(pid, epoch, last_timestamp_ms=ts, coordinator_epoch=coord,
                                           current_txn_first_offset=None if txn < 0 else txn)
                for _ in range(nbatches):  # (a version 1 batch has no crc: BatchMetadata's default)
                    entry.batches.append(BatchMetadata(*batch_struct.unpack_from(body, pos)))
                    pos += batch_struct.size
                producers[pid] = entry
            if pos != len(body):
                raise CorruptSnapshotError("trailing bytes")
            return int(offset), producers
        except struct.error as e:
            raise CorruptSnapshotError(str(e)) from e

    def write_snapshot(self, file_io: FileIO, directory: Path, offset: int, *, sync: bool = False) -> None:
        file_io.write_file_atomic(snapshot_path(directory, offset), self.encode_snapshot(offset), sync=sync)

    @staticmethod
    def list_snapshots(file_io: FileIO, directory: Path, names: list[str] | None = None) -> list[int]:
        offsets = []
        for name in names if names is not None else file_io.listdir(directory):
            if name.endswith(SNAPSHOT_SUFFIX):
                stem = name[: -len(SNAPSHOT_SUFFIX)]
                if stem.isdigit():
                    offsets.append(int(stem))
        return sorted(offsets)

    def load_latest_snapshot(self, file_io: FileIO, directory: Path, max_offset: int,
                             names: list[str] | None = None) -> int | None:
        """Load the newest good snapshot at or below `max_offset`; delete corrupt ones and newer ones.

        Returns the snapshot's offset (state then reflects the log below it), None if there is none.
        """
        self.clear()
        for offset in reversed(self.list_snapshots(file_io, directory, names)):
            path = snapshot_path(directory, offset)
            if offset > max_offset:
                file_io.unlink(path)
                continue
            data = file_io.read_file(path)
            try:
                if data is None:
                    raise CorruptSnapshotError("vanished")
                snap_offset, producers = self.decode_snapshot(data)
                if snap_offset != offset:
                    raise CorruptSnapshotError("offset does not match the file name")
            except CorruptSnapshotError:
                file_io.unlink(path)
                continue
            self.producers = producers
            self.txn_version = next(_TXN_VERSIONS)
            return offset
        return None

    @classmethod
    def delete_snapshots_below(cls, file_io: FileIO, directory: Path, offset: int) -> None:
        """Remove snapshots older than `offset`, always keeping the newest one."""
        offsets = cls.list_snapshots(file_io, directory)
        for o in offsets[:-1]:
            if o < offset:
                file_io.unlink(snapshot_path(directory, o))

    @classmethod
    def delete_snapshots_above(cls, file_io: FileIO, directory: Path, offset: int) -> None:
        for o in cls.list_snapshots(file_io, directory):
            if o > offset:
                file_io.unlink(snapshot_path(directory, o))
