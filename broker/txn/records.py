"""`__transaction_state` records in Kafka's format (TransactionLogKey / TransactionLogValue version 0).

Key:   version i16 = 0 | transactional_id string
Value: version i16 = 0 | producer_id i64 | producer_epoch i16 | transaction_timeout_ms i32 | state i8
       | partitions: nullable array of (topic string, partition_ids array of i32)
       | last_update_timestamp_ms i64 | start_timestamp_ms i64
A null value is a tombstone (the id expired).  Version 1 (flexible, tagged previous/next producer ids
for transactions V2) is read too, ignoring its tagged fields.  Strings are i16-length-prefixed UTF-8,
arrays i32-count-prefixed (non-flexible), as Kafka's generated TransactionLogValue writes them.
"""

from __future__ import annotations

import struct

from samsa.broker.group.records import java_string_hash
from samsa.broker.txn.state import TransactionMetadata, TransactionState

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_VALUE_HEAD = struct.Struct(">hqhib")
_TIMES = struct.Struct(">qq")


class CorruptTxnRecordError(ValueError):
    pass


def partition_for_transactional_id(transactional_id: str, partitions: int) -> int:
    """Kafka's Utils.abs(transactionalId.hashCode) % transaction.state.log.num.partitions."""
    h = java_string_hash(transactional_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


def _string(value: str) -> bytes:
    data = value.encode()
    return _I16.pack(len(data)) + data


def encode_key(transactional_id: str) -> bytes:
    return _I16.pack(0) + _string(transactional_id)


def decode_key(data: bytes) -> str | None:
    """The transactional id, or None for a key version this broker does not know."""
    try:
        (version,) = _I16.unpack_from(data, 0)
        if version != 0:
            return None
        (length,) = _I16.unpack_from(data, 2)
        if length < 0 or 4 + length != len(data):
            raise CorruptTxnRecordError("bad transactional id length")
        return data[4 : 4 + length].decode()
    except struct.error as e:
        raise CorruptTxnRecordError(str(e)) from e


def encode_value(md: TransactionMetadata) -> bytes:
    out = bytearray(_VALUE_HEAD.pack(0, md.producer_id, md.producer_epoch, md.timeout_ms, int(md.state)))
    if md.state is TransactionState.EMPTY:
        out += _I32.pack(-1)
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(md.partitions):
            by_topic.setdefault(topic, []).append(partition)
        out += _I32.pack(len(by_topic))
        for topic, ids in by_topic.items():
            out += _string(topic) + _I32.pack(len(ids))
            out += b"".join(_I32.pack(i) for i in ids)
    out += _TIMES.pack(md.last_update_ms, md.start_ms)
    return bytes(out)


def decode_value(transactional_id: str, data: bytes) -> TransactionMetadata:
    try:
        version, producer_id, epoch, timeout_ms, state = _VALUE_HEAD.unpack_from(data, 0)
        if version not in (0, 1):
            raise CorruptTxnRecordError(f"unknown TransactionLogValue version {version}")
        pos = _VALUE_HEAD.size
        partitions: set[tuple[str, int]] = set()
        if version == 0:
            (count,) = _I32.unpack_from(data, pos)
            pos += 4
            for _ in range(max(count, 0)):
                (length,) = _I16.unpack_from(data, pos)
                topic = data[pos + 2 : pos + 2 + length].decode()
                pos += 2 + length
                (n,) = _I32.unpack_from(data, pos)
                pos += 4
                for _ in range(n):
                    partitions.add((topic, _I32.unpack_from(data, pos)[0]))
                    pos += 4
            last_update_ms, start_ms = _TIMES.unpack_from(data, pos)
        else:
            pos, partitions, last_update_ms, start_ms = _decode_flexible_tail(data, pos)
        return TransactionMetadata(transactional_id, producer_id, epoch, timeout_ms, TransactionState(state),
                                   partitions, start_ms, last_update_ms)
    except (struct.error, ValueError, IndexError) as e:
        raise CorruptTxnRecordError(str(e)) from e


def _uvarint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        b = data[pos]
        pos += 1
        value |= (b & 0x7F) << shift
        if not b & 0x80:
            return value, pos
        shift += 7


def _decode_flexible_tail(data: bytes, pos: int) -> tuple[int, set[tuple[str, int]], int, int]:
    partitions: set[tuple[str, int]] = set()
    count, pos = _uvarint(data, pos)
    for _ in range(count - 1 if count else 0):
        length, pos = _uvarint(data, pos)
        topic = data[pos : pos + length - 1].decode()
        pos += length - 1
        n, pos = _uvarint(data, pos)
        for _ in range(n - 1 if n else 0):
            partitions.add((topic, _I32.unpack_from(data, pos)[0]))
            pos += 4
        tags, pos = _uvarint(data, pos)
        for _ in range(tags):
            _, pos = _uvarint(data, pos)
            size, pos = _uvarint(data, pos)
            pos += size
    last_update_ms, start_ms = _TIMES.unpack_from(data, pos)
    return pos + _TIMES.size, partitions, last_update_ms, start_ms
