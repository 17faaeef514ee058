"""`__consumer_offsets` record formats and the group -> partition mapping (Kafka's, byte for byte)."""

from __future__ import annotations

import struct

import pytest

from samsa.broker.group.batches import encode_batch, iter_records
from samsa.broker.group.consumer_protocol import assigned_partitions, subscribed_topics
from samsa.broker.group.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadata,
    OffsetCommitKey,
    OffsetCommitValue,
    ResetAuditKey,
    decode_audit_value,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_audit_value,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
    java_string_hash,
    partition_for_group,
)


@pytest.mark.parametrize(("group", "java_hash", "partition"), [
    # String.hashCode() and abs(hash) % 50 as printed by a JVM
    ("my-group", -1906497762, 12),
    ("Ünïcödé-gröup", 1187605582, 32),
    ("console-consumer-12345", 158455506, 6),
    ("", 0, 0),
    ("polygenelubricants", -(2**31), 0),  # Integer.MIN_VALUE: Kafka's Utils.abs gives 0
])
def test_partition_for_group_matches_java(group: str, java_hash: int, partition: int) -> None:
    assert java_string_hash(group) == java_hash
    assert partition_for_group(group, 50) == partition


def test_offset_commit_key_and_value_layout() -> None:
    key = encode_key(OffsetCommitKey("g", "t", 3))
    assert key == struct.pack(">hh", 1, 1) + b"g" + struct.pack(">h", 1) + b"t" + struct.pack(">i", 3)
    value = encode_offset_commit_value(OffsetCommitValue(42, 7, "meta", 1000))
    assert value == struct.pack(">hqi", 3, 42, 7) + struct.pack(">h", 4) + b"meta" + struct.pack(">q", 1000)
    assert decode_key(key) == OffsetCommitKey("g", "t", 3)
    assert decode_offset_commit_value(value) == OffsetCommitValue(42, 7, "meta", 1000)
    # version 1 (an explicit expiry) and version 0 as older Kafkas wrote them
    v1 = encode_offset_commit_value(OffsetCommitValue(5, -1, "", 10, 99))
    assert decode_offset_commit_value(v1) == OffsetCommitValue(5, -1, "", 10, 99)
    v0 = struct.pack(">hq", 0, 8) + struct.pack(">h", 0) + struct.pack(">q", 11)
    assert decode_offset_commit_value(v0) == OffsetCommitValue(8, -1, "", 11)


def test_group_metadata_round_trip() -> None:
    value = GroupMetadataValue("consumer", 4, "range", "m-1", 123, (
        MemberMetadata("m-1", None, "c1", "/127.0.0.1", 30000, 10000, b"sub", b"asg"),
        MemberMetadata("m-2", "static-2", "c2", "/10.0.0.2", 30000, 10000, b"", b""),
    ))
    encoded = encode_group_metadata_value(value)
    assert encoded[:2] == b"\x00\x03"
    assert decode_group_metadata_value(encoded) == value
    assert decode_key(encode_key(GroupMetadataKey("g"))) == GroupMetadataKey("g")
    empty = GroupMetadataValue("consumer", 5, None, None, 9, ())
    assert decode_group_metadata_value(encode_group_metadata_value(empty)) == empty


def test_audit_records_and_unknown_types() -> None:
    key = ResetAuditKey("g", 1000, "abc")
    assert decode_key(encode_key(key)) == key
    audit = {"who": "me", "why": "because", "changes": [{"topic": "t", "partition": 0, "from": 1, "to": 0}]}
    assert decode_audit_value(encode_audit_value(audit)) == audit
    assert decode_key(struct.pack(">h", 9) + b"whatever") is None  # a share group record type: skipped


def test_batches_round_trip() -> None:
    batch = encode_batch([(b"k1", b"v1"), (b"k2", None)], 1234)
    assert list(iter_records(bytes(batch))) == [(0, b"k1", b"v1"), (1, b"k2", None)]
    from samsa.kproto.batch import is_crc_valid, parse_header

    assert is_crc_valid(batch, parse_header(batch))


def test_consumer_protocol_parsing() -> None:
    sub = struct.pack(">hi", 1, 2) + struct.pack(">h", 1) + b"a" + struct.pack(">h", 1) + b"b" + struct.pack(">i", -1)
    assert subscribed_topics(sub) == {"a", "b"}
    asg = struct.pack(">hi", 0, 1) + struct.pack(">h", 1) + b"a" + struct.pack(">iii", 2, 0, 5) + struct.pack(">i", -1)
    assert assigned_partitions(asg) == [("a", [0, 5])]
    assert assigned_partitions(b"") == []
    assert subscribed_topics(b"\x00") is None
