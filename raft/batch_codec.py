"""Raft log entries as v2 record batches, both ways: the Fetch records and the log on disk.

Kafka: KafkaMetadataLog over UnifiedLog, BatchBuilder and RecordsIterator. Consecutive DATA entries of
one epoch share a batch, one record each (key null, value the payload), partition_leader_epoch the
epoch; a LEADER_CHANGE entry is a control batch of its own holding one LEADER_CHANGE control record
whose value is Kafka's LeaderChangeMessage (MemoryRecords.withLeaderChangeMessage). KIP-853's
KRAFT_VERSION and VOTERS entries are control batches of one KRAFT_VERSION / KRAFT_VOTERS control record
each, whose value is the entry's payload (KRaftVersionRecord / VotersRecord bytes).
"""

from __future__ import annotations

import io
import re
import struct
from collections.abc import Iterator, Sequence

from kio.schema.errors import ErrorCode
from kio.schema.leader_change_message.v0.data import LeaderChangeMessage
from kio.schema.types import BrokerId
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16

from samsa.kproto._guard import check_entity
from samsa.kproto.batch import CorruptBatchError
from samsa.kproto.records import ControlType, Record, RecordInput, decode_batches, decode_control_record, encode_batch
from samsa.raft.invariants import InvariantViolation
from samsa.raft.log import EntryKind, LogEntry
from samsa.raft.voter_set import VoterSet, decode_kraft_version

__all__ = ["MAX_DECOMPRESSED_BATCH_BYTES", "CodecError", "decode_entries", "encode_entries"]

# A compressed batch from a peer never inflates past this (we write uncompressed batches ourselves).
MAX_DECOMPRESSED_BATCH_BYTES = 64 * 1024 * 1024

_CONTROL_KEY = struct.Struct(">hh")  # ControlRecordType key: version 0, type
_LEADER_CHANGE_KEY = _CONTROL_KEY.pack(0, ControlType.LEADER_CHANGE)
# KIP-853 control entries: their control type, and the check that a payload is one.
_KIP853_TYPES = {EntryKind.KRAFT_VERSION: ControlType.KRAFT_VERSION, EntryKind.VOTERS: ControlType.KRAFT_VOTERS}
_KIP853_KINDS = {t: k for k, t in _KIP853_TYPES.items()}


class CodecError(Exception):
    """A message the core must not see. For a request, `error_code` is what to answer with (top-level,
    see codec.error_response); for a response or record batches it says why it was dropped."""

    def __init__(self, error_code: ErrorCode, message: str) -> None:
        super().__init__(f"{error_code.name}: {message}")
        self.error_code = error_code


def encode_entries(entries: Sequence[LogEntry], *, timestamp_ms: int = 0) -> bytes:
    """Record batches holding `entries` (consecutive offsets, nondecreasing epochs), in order."""
    return b"".join(_encode_batch(batch, timestamp_ms) for batch in _batches(entries))


def _batches(entries: Sequence[LogEntry]) -> Iterator[Sequence[LogEntry]]:
    """Runs of DATA entries of one epoch; each LEADER_CHANGE entry alone (a control batch holds one record)."""
    start = 0
    for i in range(1, len(entries) + 1):
        if i == len(entries) or _starts_batch(entries[i - 1], entries[i]):
            yield entries[start:i]
            start = i


def _starts_batch(previous: LogEntry, entry: LogEntry) -> bool:
    if entry.offset != previous.offset + 1:
        raise InvariantViolation(f"entry {entry.offset} after {previous.offset}: entries are contiguous")
    if entry.epoch < previous.epoch:
        raise InvariantViolation(f"entry of epoch {entry.epoch} after one of epoch {previous.epoch}")
    return entry.kind != EntryKind.DATA or previous.kind != EntryKind.DATA or entry.epoch != previous.epoch


def _encode_batch(batch: Sequence[LogEntry], timestamp_ms: int) -> bytes:
    first = batch[0]
    records: list[RecordInput]
    if first.kind == EntryKind.LEADER_CHANGE:
        records = [(_LEADER_CHANGE_KEY, _leader_change_value(first.payload), ())]
    elif first.kind in _KIP853_TYPES:
        records = [(_CONTROL_KEY.pack(0, _KIP853_TYPES[first.kind]), first.payload, ())]
    else:
        records = [(None, e.payload, ()) for e in batch]
    return encode_batch(
        records,
        base_offset=first.offset,
        timestamp_ms=timestamp_ms,
        is_control=first.kind != EntryKind.DATA,
        partition_leader_epoch=first.epoch,
    )


def decode_entries(data: bytes | bytearray | memoryview) -> list[LogEntry]:
    """The entries in `data`, the inverse of encode_entries.

    A truncated last batch is ignored (a Fetch response may end inside one); a corrupt complete batch
    (CRC, layout), an unknown control record, a null value or entries that do not follow each other
    (offsets +1, epochs nondecreasing) raise CodecError(CORRUPT_MESSAGE).
    """
    entries: list[LogEntry] = []
    try:
        for header, records in decode_batches(
            data, max_decompressed_bytes=MAX_DECOMPRESSED_BATCH_BYTES, allow_partial_tail=True
        ):
            epoch = header.partition_leader_epoch
            for record in records:
                entry = _entry(record, epoch, header.is_control)
                if entries and (entry.offset != entries[-1].offset + 1 or entry.epoch < entries[-1].epoch):
                    raise CodecError(ErrorCode.corrupt_message, f"{entry.offset}@{epoch} after {entries[-1]}")
                entries.append(entry)
    except CorruptBatchError as e:
        raise CodecError(ErrorCode.corrupt_message, str(e)) from e
    return entries


def _entry(record: Record, epoch: int, is_control: bool) -> LogEntry:
    if is_control:
        control = decode_control_record(record)
        if record.value is None:
            raise CodecError(ErrorCode.corrupt_message, f"null value at offset {record.offset}")
        kind = _KIP853_KINDS.get(ControlType(control.type)) if control.type in _KIP853_KINDS else None
        if kind is not None:
            return LogEntry(record.offset, epoch, _checked_kip853_value(kind, bytes(record.value), record.offset),
                            kind)
        if control.type != ControlType.LEADER_CHANGE:
            raise CodecError(ErrorCode.corrupt_message, f"control record type {control.type} at {record.offset}")
        return LogEntry(record.offset, epoch, _leader_change_payload(bytes(record.value)), EntryKind.LEADER_CHANGE)
    if record.value is None:
        raise CodecError(ErrorCode.corrupt_message, f"null value at offset {record.offset}")
    return LogEntry(record.offset, epoch, bytes(record.value), EntryKind.DATA)


def _checked_kip853_value(kind: EntryKind, value: bytes, offset: int) -> bytes:
    try:
        if kind == EntryKind.VOTERS:
            VoterSet.decode(value)
        else:
            decode_kraft_version(value)
    except ValueError as e:
        raise CodecError(ErrorCode.corrupt_message, f"{kind.name} control record at {offset}: {e}") from e
    return value


# The core's LEADER_CHANGE payload is b"leader=<id>"; on the wire and on disk it is Kafka's
# LeaderChangeMessage (v0, flexible), so Kafka's kafka-dump-log and replicas read it as their own.
_LEADER_PAYLOAD = re.compile(rb"leader=(-?\d+)")


def _leader_change_value(payload: bytes) -> bytes:
    found = _LEADER_PAYLOAD.fullmatch(payload)
    if found is None:
        raise CodecError(ErrorCode.corrupt_message, f"not a leader change payload: {payload[:40]!r}")
    message = LeaderChangeMessage(version=i16(0), leader_id=BrokerId(int(found.group(1))), voters=(),
                                  granting_voters=())
    out = io.BytesIO()
    entity_writer(LeaderChangeMessage)(out, message)
    return out.getvalue()


def _leader_change_payload(value: bytes) -> bytes:
    try:
        check_entity(LeaderChangeMessage, value, 0)
        message, _size = entity_reader(LeaderChangeMessage)(value, 0)
    except Exception as e:
        raise CodecError(ErrorCode.corrupt_message, f"unreadable LeaderChangeMessage: {e}") from e
    return f"leader={int(message.leader_id)}".encode()
