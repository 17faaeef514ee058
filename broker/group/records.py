"""Kafka's `__consumer_offsets` record formats, so Kafka's own tools can read what Samsa writes.

Keys start with an int16 record type (Kafka's CoordinatorRecordType; "key version" in older code):

    0, 1   OffsetCommitKey    group string, topic string, partition int32          (we write 1)
    2      GroupMetadataKey   group string
    17, 19..23  Kafka 4.4's streams-group records (StreamsGroupKey: streams_keys.py, streams_records.py)
    32001  Samsa's ResetAuditKey  group string, timestamp int64, id string  -- our own, see below
    32002  Samsa's StreamsGroupSnapshotKey  group string  -- our own streams-group record of before Samsa
           wrote Kafka's: read on load and tombstoned, never written (streams_records.py)

Values (int16 version first; a tombstone is a null value):

    OffsetCommitValue v0: offset int64, metadata string, commit_timestamp int64
                      v1: v0 + expire_timestamp int64
                      v2: like v0
                      v3: offset int64, leader_epoch int32, metadata string, commit_timestamp int64 (we write 3)
                      v4: v3, flexible (compact strings, tagged fields)
    GroupMetadataValue v0: protocol_type string, generation int32, protocol string?, leader string?,
                          members [member_id, client_id, client_host, session_timeout int32,
                                   subscription bytes, assignment bytes]
                       v1: members + rebalance_timeout int32 (after client_host)
                       v2: + current_state_timestamp int64 (after leader)
                       v3: members + group_instance_id string? (after member_id)           (we write 3)

Audit records of `samsa groups reset-offsets` (and any other generation -1 commit that moves an
offset) are stored in the same partition as the group's offsets, under record type 32001, far
above the types Kafka uses; Kafka's loader skips record types it does not know.  The key is
unique per record, so compaction never merges two audit records; the value is version 0 followed
by a JSON object (who, when, what, from, to, why).  Choosing the offsets topic over a file in the
data directory keeps the audit trail with the offsets it explains (and replicated with them later).

A poison-record skip (`samsa groups skip`, `samsa.broker.poison`) commits the offset after the skipped
records with a commit metadata string `samsa-skip:{json}` (count, first and last skipped offsets,
quarantine topic, reason, operator); the broker audits such a commit like a reset, with kind "skip".
"""

from __future__ import annotations

import json
import struct
import uuid
from dataclasses import dataclass
from typing import Any

from samsa.broker.group import streams_keys
from samsa.broker.group.streams_keys import StreamsGroupKey

OFFSET_COMMIT_KEY_V0 = 0
OFFSET_COMMIT_KEY_V1 = 1
GROUP_METADATA_KEY = 2
RESET_AUDIT_KEY = 32001
STREAMS_GROUP_SNAPSHOT_KEY = 32002  # Samsa's own, read only: a streams group's state (streams_records.py)

OFFSET_COMMIT_VALUE_VERSION = 3
GROUP_METADATA_VALUE_VERSION = 3

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")


class CorruptRecordError(ValueError):
    pass


# --- writing -------------------------------------------------------------------------------------

def _str(value: str) -> bytes:
    data = value.encode()
    return _I16.pack(len(data)) + data


def _nstr(value: str | None) -> bytes:
    return _I16.pack(-1) if value is None else _str(value)


def _bytes(value: bytes) -> bytes:
    return _I32.pack(len(value)) + value


@dataclass(frozen=True, slots=True)
class OffsetCommitKey:
    group_id: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class OffsetCommitValue:
    offset: int
    leader_epoch: int
    metadata: str
    commit_timestamp_ms: int
    expire_timestamp_ms: int | None = None


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    group_id: str


@dataclass(frozen=True, slots=True)
class MemberMetadata:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    protocol_type: str
    generation_id: int
    protocol_name: str | None
    leader_id: str | None
    current_state_timestamp_ms: int
    members: tuple[MemberMetadata, ...]


@dataclass(frozen=True, slots=True)
class ResetAuditKey:
    group_id: str
    timestamp_ms: int
    audit_id: str


@dataclass(frozen=True, slots=True)
class StreamsGroupSnapshotKey:
    group_id: str


Key = OffsetCommitKey | GroupMetadataKey | ResetAuditKey | StreamsGroupSnapshotKey


def encode_key(key: Key) -> bytes:
    match key:
        case OffsetCommitKey():
            return _I16.pack(OFFSET_COMMIT_KEY_V1) + _str(key.group_id) + _str(key.topic) + _I32.pack(key.partition)
        case GroupMetadataKey():
            return _I16.pack(GROUP_METADATA_KEY) + _str(key.group_id)
        case ResetAuditKey():
            return _I16.pack(RESET_AUDIT_KEY) + _str(key.group_id) + _I64.pack(key.timestamp_ms) + _str(key.audit_id)
        case StreamsGroupSnapshotKey():
            return _I16.pack(STREAMS_GROUP_SNAPSHOT_KEY) + _str(key.group_id)


def encode_offset_commit_value(value: OffsetCommitValue) -> bytes:
    if value.expire_timestamp_ms is not None:
        return (_I16.pack(1) + _I64.pack(value.offset) + _str(value.metadata) + _I64.pack(value.commit_timestamp_ms)
                + _I64.pack(value.expire_timestamp_ms))
    return (_I16.pack(OFFSET_COMMIT_VALUE_VERSION) + _I64.pack(value.offset) + _I32.pack(value.leader_epoch)
            + _str(value.metadata) + _I64.pack(value.commit_timestamp_ms))


def encode_group_metadata_value(value: GroupMetadataValue) -> bytes:
    out = [_I16.pack(GROUP_METADATA_VALUE_VERSION), _str(value.protocol_type), _I32.pack(value.generation_id),
           _nstr(value.protocol_name), _nstr(value.leader_id), _I64.pack(value.current_state_timestamp_ms),
           _I32.pack(len(value.members))]
    for m in value.members:
        out += [_str(m.member_id), _nstr(m.group_instance_id), _str(m.client_id), _str(m.client_host),
                _I32.pack(m.rebalance_timeout_ms), _I32.pack(m.session_timeout_ms), _bytes(m.subscription),
                _bytes(m.assignment)]
    return b"".join(out)


SKIP_METADATA_PREFIX = "samsa-skip:"


def encode_skip_metadata(skip: dict[str, Any]) -> str:
    return SKIP_METADATA_PREFIX + json.dumps(skip, sort_keys=True, separators=(",", ":"))


def decode_skip_metadata(metadata: str | None) -> dict[str, Any] | None:
    """The skip descriptor a commit's metadata carries, or None (any other metadata, or not a JSON object)."""
    if not metadata or not metadata.startswith(SKIP_METADATA_PREFIX):
        return None
    try:
        # confluent-kafka (Python) sends a TopicPartition's metadata with its C string's terminating NUL
        value = json.loads(metadata[len(SKIP_METADATA_PREFIX):].rstrip("\x00"))
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def encode_audit_value(audit: dict[str, Any]) -> bytes:
    return _I16.pack(0) + json.dumps(audit, sort_keys=True).encode()


# --- reading -------------------------------------------------------------------------------------

class _Reader:
    __slots__ = ("buf", "flexible", "pos")

    def __init__(self, buf: bytes, flexible: bool = False) -> None:
        self.buf = buf
        self.pos = 0
        self.flexible = flexible

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise CorruptRecordError("record is truncated")
        data = self.buf[self.pos:self.pos + n]
        self.pos += n
        return data

    def i16(self) -> int:
        return int(_I16.unpack(self._take(2))[0])

    def i32(self) -> int:
        return int(_I32.unpack(self._take(4))[0])

    def i64(self) -> int:
        return int(_I64.unpack(self._take(8))[0])

    def uvarint(self) -> int:
        shift = value = 0
        while True:
            b = self._take(1)[0]
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                return value
            shift += 7
            if shift > 35:
                raise CorruptRecordError("varint too long")

    def nstr(self) -> str | None:
        n = self.uvarint() - 1 if self.flexible else self.i16()
        return None if n < 0 else self._take(n).decode()

    def str(self) -> str:
        value = self.nstr()
        if value is None:
            raise CorruptRecordError("null string where one is required")
        return value

    def bytes(self) -> bytes:
        n = self.uvarint() - 1 if self.flexible else self.i32()
        return b"" if n < 0 else self._take(n)

    def array_len(self) -> int:
        return self.uvarint() - 1 if self.flexible else self.i32()

    def skip_tags(self) -> None:
        if self.flexible:
            for _ in range(self.uvarint()):
                self.uvarint()
                self._take(self.uvarint())


def decode_key(data: bytes) -> Key | ConsumerGroupKey | StreamsGroupKey | None:
    """The key of a `__consumer_offsets` record, or None for record types this broker ignores."""
    r = _Reader(data)
    record_type = r.i16()
    if record_type in (OFFSET_COMMIT_KEY_V0, OFFSET_COMMIT_KEY_V1):
        return OffsetCommitKey(r.str(), r.str(), r.i32())
    if record_type == GROUP_METADATA_KEY:
        return GroupMetadataKey(r.str())
    if record_type == RESET_AUDIT_KEY:
        return ResetAuditKey(r.str(), r.i64(), r.str())
    if record_type == STREAMS_GROUP_SNAPSHOT_KEY:
        return StreamsGroupSnapshotKey(r.str())
    if record_type in (CONSUMER_GROUP_METADATA_KEY, CONSUMER_GROUP_PARTITION_METADATA_KEY,
                       CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY):
        return ConsumerGroupKey(record_type, r.str())
    if record_type in (CONSUMER_GROUP_MEMBER_METADATA_KEY, CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY,
                       CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY, CONSUMER_GROUP_REGULAR_EXPRESSION_KEY):
        return ConsumerGroupKey(record_type, r.str(), r.str())
    if streams_keys.is_streams_record_type(record_type):
        return streams_keys.decode_key(data)
    return None


def decode_offset_commit_value(data: bytes) -> OffsetCommitValue:
    r = _Reader(data)
    version = r.i16()
    if version in (0, 2):
        offset, metadata, ts = r.i64(), r.str(), r.i64()
        return OffsetCommitValue(offset, -1, metadata, ts)
    if version == 1:
        offset, metadata, ts, expire = r.i64(), r.str(), r.i64(), r.i64()
        return OffsetCommitValue(offset, -1, metadata, ts, expire)
    if version in (3, 4):
        r.flexible = version >= 4
        offset, epoch, metadata, ts = r.i64(), r.i32(), r.str(), r.i64()
        return OffsetCommitValue(offset, epoch, metadata, ts)
    raise CorruptRecordError(f"unknown OffsetCommitValue version {version}")


def decode_group_metadata_value(data: bytes) -> GroupMetadataValue:
    r = _Reader(data)
    version = r.i16()
    if not 0 <= version <= 4:
        raise CorruptRecordError(f"unknown GroupMetadataValue version {version}")
    r.flexible = version >= 4
    protocol_type = r.str()
    generation = r.i32()
    protocol = r.nstr()
    leader = r.nstr()
    state_ts = r.i64() if version >= 2 else -1
    members = []
    for _ in range(r.array_len()):
        member_id = r.str()
        instance_id = r.nstr() if version >= 3 else None
        client_id = r.str()
        client_host = r.str()
        rebalance_timeout = r.i32() if version >= 1 else -1
        session_timeout = r.i32()
        subscription = r.bytes()
        assignment = r.bytes()
        r.skip_tags()
        if rebalance_timeout < 0:
            rebalance_timeout = session_timeout
        members.append(MemberMetadata(member_id, instance_id, client_id, client_host, rebalance_timeout,
                                      session_timeout, subscription, assignment))
    return GroupMetadataValue(protocol_type, generation, protocol, leader, state_ts, tuple(members))


def decode_audit_value(data: bytes) -> dict[str, Any]:
    r = _Reader(data)
    if r.i16() != 0:
        raise CorruptRecordError("unknown audit record version")
    value = json.loads(data[2:])
    if not isinstance(value, dict):
        raise CorruptRecordError("audit record is not a JSON object")
    return value


def java_string_hash(value: str) -> int:
    """Java's String.hashCode (UTF-16 code units, 32-bit signed overflow)."""
    h = 0
    data = value.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for_group(group_id: str, partitions: int) -> int:
    """Kafka's Utils.abs(groupId.hashCode) % offsets.topic.num.partitions (abs(MIN_VALUE) is 0 there)."""
    h = java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % partitions


# --- KIP-848 consumer groups ---------------------------------------------------------------------
#
# Kafka 4.1's records of a consumer group (the "consumer" group protocol), keys non-flexible (the
# int16 record type, then the fields), values version 0 and flexible (compact strings and arrays,
# tagged fields; a topic is its 16-byte id):
#
#     3  ConsumerGroupMetadataKey            group          -> epoch int32 (+ tagged MetadataHash int64)
#     4  ConsumerGroupPartitionMetadataKey   group          -> [topic_id, topic_name, num_partitions, [rack]]
#                                                              (read and tombstoned, no longer written by 4.1)
#     5  ConsumerGroupMemberMetadataKey      group, member  -> instance_id?, rack_id?, client_id, client_host,
#                                                              [subscribed topic], regex?, rebalance_timeout,
#                                                              server_assignor? (+ tagged classic metadata)
#     6  ConsumerGroupTargetAssignmentMetadataKey group     -> assignment_epoch int32
#     7  ConsumerGroupTargetAssignmentMemberKey group, member -> [topic_id, [partition]]
#     8  ConsumerGroupCurrentMemberAssignmentKey group, member -> member_epoch, previous_member_epoch,
#                                                              state int8, [assigned], [pending revocation]
#                                                              (assignment_records.py: Kafka 4.3+'s
#                                                              per-partition assignment epochs, KIP-1251)

CONSUMER_GROUP_METADATA_KEY = 3
CONSUMER_GROUP_PARTITION_METADATA_KEY = 4
CONSUMER_GROUP_MEMBER_METADATA_KEY = 5
CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY = 6
CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY = 7
CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY = 8
# 16  ConsumerGroupRegularExpressionKey  group, regex  -> [topic name], version int64 (the metadata image's
#                                                         offset), timestamp int64 (Kafka 4.0+)
CONSUMER_GROUP_REGULAR_EXPRESSION_KEY = 16

# topic id (str of a UUID) -> partitions
TopicPartitions = dict[str, frozenset[int]]


@dataclass(frozen=True, slots=True)
class ConsumerGroupKey:
    """Any of the consumer group record keys: `record_type` says which; `member_id` is "" for the
    group-level ones (3, 4, 6), and the regular expression for 16."""

    record_type: int
    group_id: str
    member_id: str = ""


@dataclass(frozen=True, slots=True)
class ConsumerGroupMemberMetadataValue:
    instance_id: str | None
    rack_id: str | None
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    rebalance_timeout_ms: int
    server_assignor: str | None
    # Tag 0, ClassicMemberMetadata: (session timeout, [(protocol name, metadata)]) of a classic member.
    classic: tuple[int, tuple[tuple[str, bytes], ...]] | None = None


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _cstr(value: str | None) -> bytes:
    if value is None:
        return b"\x00"
    data = value.encode()
    return _uvarint(len(data) + 1) + data


def _ctopics(topics: TopicPartitions) -> bytes:
    out = [_uvarint(len(topics) + 1)]
    for topic_id in sorted(topics):
        parts = sorted(topics[topic_id])
        out += [uuid.UUID(topic_id).bytes, _uvarint(len(parts) + 1), b"".join(_I32.pack(p) for p in parts), b"\x00"]
    return b"".join(out)


def encode_consumer_group_key(key: ConsumerGroupKey) -> bytes:
    member = _str(key.member_id) if key.record_type in (CONSUMER_GROUP_MEMBER_METADATA_KEY,
                                                        CONSUMER_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY,
                                                        CONSUMER_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY,
                                                        CONSUMER_GROUP_REGULAR_EXPRESSION_KEY) else b""
    return _I16.pack(key.record_type) + _str(key.group_id) + member


def encode_epoch_value(epoch: int) -> bytes:
    """ConsumerGroupMetadataValue or ConsumerGroupTargetAssignmentMetadataValue (both one int32)."""
    return _I16.pack(0) + _I32.pack(epoch) + b"\x00"


def encode_consumer_group_metadata_value(epoch: int, metadata_hash: int) -> bytes:
    """ConsumerGroupMetadataValue: the group epoch, and (Kafka 4.1+, KIP-1101) tag 0, the hash of the subscribed
    topics, written only when not 0."""
    if metadata_hash == 0:
        return encode_epoch_value(epoch)
    return _I16.pack(0) + _I32.pack(epoch) + b"\x01" + _uvarint(0) + _uvarint(8) + _I64.pack(metadata_hash)


def encode_target_metadata_value(epoch: int, timestamp_ms: int) -> bytes:
    """ConsumerGroupTargetAssignmentMetadataValue: the epoch, and (Kafka 4.3+, KIP-1263) tag 0, the time the
    assignment was computed, written only when not 0 as Kafka writes a tagged field at its default."""
    if timestamp_ms == 0:
        return encode_epoch_value(epoch)
    return _I16.pack(0) + _I32.pack(epoch) + b"\x01" + _uvarint(0) + _uvarint(8) + _I64.pack(timestamp_ms)


def encode_member_metadata_value(value: ConsumerGroupMemberMetadataValue) -> bytes:
    names = value.subscribed_topic_names
    return b"".join([
        _I16.pack(0), _cstr(value.instance_id), _cstr(value.rack_id), _cstr(value.client_id),
        _cstr(value.client_host), _uvarint(len(names) + 1), *(_cstr(n) for n in names),
        _cstr(value.subscribed_topic_regex), _I32.pack(value.rebalance_timeout_ms), _cstr(value.server_assignor),
        _classic_tag(value.classic)])


def _cbytes(value: bytes) -> bytes:
    return _uvarint(len(value) + 1) + value


def _classic_tag(classic: tuple[int, tuple[tuple[str, bytes], ...]] | None) -> bytes:
    """The value's tagged fields: none, or tag 0 (ClassicMemberMetadata, itself flexible)."""
    if classic is None:
        return b"\x00"
    session_timeout_ms, protocols = classic
    body = b"".join([_I32.pack(session_timeout_ms), _uvarint(len(protocols) + 1),
                     *(_cstr(name) + _cbytes(metadata) + b"\x00" for name, metadata in protocols), b"\x00"])
    return b"\x01" + _uvarint(0) + _uvarint(len(body)) + body


def _read_classic(data: bytes) -> tuple[int, tuple[tuple[str, bytes], ...]]:
    r = _Reader(data, flexible=True)
    session_timeout_ms = r.i32()
    protocols = []
    for _ in range(r.array_len()):
        name = r.str()
        protocols.append((name, r.bytes()))
        r.skip_tags()
    r.skip_tags()
    return session_timeout_ms, tuple(protocols)


def encode_regular_expression_value(topics: tuple[str, ...], version: int, timestamp_ms: int) -> bytes:
    """ConsumerGroupRegularExpressionValue: the topics a regex resolved to (sorted, as Kafka writes them)."""
    names = sorted(topics)
    return b"".join([_I16.pack(0), _uvarint(len(names) + 1), *(_cstr(n) for n in names), _I64.pack(version),
                     _I64.pack(timestamp_ms), b"\x00"])


def decode_regular_expression_value(data: bytes) -> tuple[tuple[str, ...], int, int]:
    r = _flexible(data)
    topics = tuple(r.str() for _ in range(r.array_len()))
    version, timestamp_ms = r.i64(), r.i64()
    r.skip_tags()
    return topics, version, timestamp_ms


def encode_target_assignment_member_value(partitions: TopicPartitions) -> bytes:
    return _I16.pack(0) + _ctopics(partitions) + b"\x00"


def _flexible(data: bytes) -> _Reader:
    r = _Reader(data, flexible=True)
    if r.i16() != 0:
        raise CorruptRecordError("unknown consumer group record value version")
    return r


def _read_topics(r: _Reader) -> TopicPartitions:
    topics: TopicPartitions = {}
    for _ in range(r.array_len()):
        topic_id = str(uuid.UUID(bytes=r._take(16)))
        topics[topic_id] = frozenset(r.i32() for _ in range(r.array_len()))
        r.skip_tags()
    return topics


def decode_epoch_value(data: bytes) -> int:
    r = _flexible(data)
    epoch = r.i32()
    r.skip_tags()
    return epoch


def decode_target_metadata_value(data: bytes) -> tuple[int, int]:
    """(assignment epoch, assignment timestamp ms; 0 when the record has no tag 0); also reads a
    ConsumerGroupMetadataValue as (group epoch, metadata hash), of the same shape."""
    r = _flexible(data)
    epoch, timestamp_ms = r.i32(), 0
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        body = r._take(size)
        if tag == 0 and size == 8:
            timestamp_ms = _I64.unpack(body)[0]
    return epoch, timestamp_ms


def decode_member_metadata_value(data: bytes) -> ConsumerGroupMemberMetadataValue:
    r = _flexible(data)
    instance_id, rack_id, client_id, client_host = r.nstr(), r.nstr(), r.str(), r.str()
    names = tuple(r.str() for _ in range(r.array_len()))
    regex = r.nstr()
    rebalance_timeout_ms = r.i32()
    assignor = r.nstr()
    classic = None
    for _ in range(r.uvarint()):
        tag, size = r.uvarint(), r.uvarint()
        field_bytes = r._take(size)
        if tag == 0:
            classic = _read_classic(field_bytes)
    return ConsumerGroupMemberMetadataValue(instance_id, rack_id, client_id, client_host, names, regex,
                                            rebalance_timeout_ms, assignor, classic)


def decode_target_assignment_member_value(data: bytes) -> TopicPartitions:
    r = _flexible(data)
    topics = _read_topics(r)
    r.skip_tags()
    return topics
