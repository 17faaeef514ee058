"""`__transaction_state` records in Kafka's format (TransactionLogKey / TransactionLogValue version 0).

Key:   version i16 = 0 | transactional_id string
Value: version i16 = 0 | producer_id i64 | producer_epoch i16 | transaction_timeout_ms i32 | state i8
       | partitions: nullable array of (topic string, partition_ids array of i32)
       | last_update_timestamp_ms i64 | start_timestamp_ms i64
A null value is a tombstone (the id expired).  Strings are i16-length-prefixed UTF-8, arrays
i32-count-prefixed (non-flexible), as Kafka's generated TransactionLogValue writes them.  A transactions V2
transaction is written as version 1 (flexible, as Kafka 4 writes it) with its tagged fields: 0
PreviousProducerId, 1 NextProducerId (an epoch overflow in flight), 2 ClientTransactionVersion.
"""

from __future__ import annotations

import struct

from samsa.broker.group.records import java_string_hash
from samsa.broker.txn.state import TransactionMetadata, TransactionState

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_VALUE_HEAD = struct.Struct(">hqhib")
_TIMES = struct.Struct(">qq")
_I64 = struct.Struct(">q")
_DEFAULTS = {0: _I64.pack(-1), 1: _I64.pack(-1), 2: _I16.pack(0)}  # the tagged fields' defaults


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


def _put_uvarint(out: bytearray, value: int) -> None:
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _encode_v1(md: TransactionMetadata) -> bytes:
    out = bytearray(_VALUE_HEAD.pack(1, md.producer_id, md.producer_epoch, md.timeout_ms, int(md.state)))
    if md.state is TransactionState.EMPTY:
        out.append(0)  # a null compact array
    else:
        by_topic: dict[str, list[int]] = {}
        for topic, partition in sorted(md.partitions):
            by_topic.setdefault(topic, []).append(partition)
        _put_uvarint(out, len(by_topic) + 1)
        for topic, ids in by_topic.items():
            name = topic.encode()
            _put_uvarint(out, len(name) + 1)
            out += name
            _put_uvarint(out, len(ids) + 1)
            out += b"".join(_I32.pack(i) for i in ids)
            out.append(0)  # no tagged fields
    out += _TIMES.pack(md.last_update_ms, md.start_ms)
    tags = [(tag, data) for tag, data in ((0, _I64.pack(md.previous_producer_id)), (1, _I64.pack(md.next_producer_id)),
                                          (2, _I16.pack(md.client_transaction_version)))
            if data != _DEFAULTS[tag]]
    _put_uvarint(out, len(tags))
    for tag, data in tags:
        _put_uvarint(out, tag)
        _put_uvarint(out, len(data))
        out += data
    return bytes(out)


def encode_value(md: TransactionMetadata) -> bytes:
    if md.client_transaction_version >= 2:
        return _encode_v1(md)
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
            tagged: dict[int, bytes] = {}
        else:
            pos, partitions, last_update_ms, start_ms = _decode_flexible_tail(data, pos)
            tagged = _tagged_fields(data, pos)
        md = TransactionMetadata(transactional_id, producer_id, epoch, timeout_ms, TransactionState(state),
                                 partitions, start_ms, last_update_ms)
        if len(tagged.get(0, b"")) == 8:
            md.previous_producer_id = _I64.unpack(tagged[0])[0]
        if len(tagged.get(1, b"")) == 8:
            md.next_producer_id = _I64.unpack(tagged[1])[0]
        if len(tagged.get(2, b"")) == 2:
            md.client_transaction_version = _I16.unpack(tagged[2])[0]
        return md
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


def _tagged_fields(data: bytes, pos: int) -> dict[int, bytes]:
    """The top-level tagged fields after the timestamps (absent in a value cut short: none)."""
    out: dict[int, bytes] = {}
    if pos >= len(data):
        return out
    count, pos = _uvarint(data, pos)
    for _ in range(count):
        tag, pos = _uvarint(data, pos)
        size, pos = _uvarint(data, pos)
        out[tag] = data[pos : pos + size]
        pos += size
    return out
