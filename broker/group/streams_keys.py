"""The keys of Kafka 4.4's streams-group records in `__consumer_offsets` (record types 17, 19..23), and the
kio codec of their values: an int16 record type, then the key struct (not flexible); a value is an int16
version (0), then the flexible value struct. The schemas are kio classes generated from Kafka 4.4.0's
group-coordinator JSON (`samsa.kproto.schema.COORDINATOR_RECORDS`); streams_records.py says what they hold."""

from __future__ import annotations

import io
import pkgutil
import struct
from dataclasses import dataclass
from functools import cache
from typing import Any

from kio.serial import entity_reader, entity_writer

from samsa.kproto._guard import check_entity
from samsa.kproto._writer import compiled_writer
from samsa.kproto.schema import COORDINATOR_RECORDS

STREAMS_GROUP_METADATA_KEY = 17
# 18 was StreamsGroupPartitionMetadata, which Kafka 4.4 neither writes nor has a schema for.
STREAMS_GROUP_MEMBER_METADATA_KEY = 19
STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA_KEY = 20
STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY = 21
STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY = 22
STREAMS_GROUP_TOPOLOGY_KEY = 23

VALUE_VERSION = 0
_I16 = struct.Struct(">h")


class CorruptStreamsRecordError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class StreamsGroupKey:
    """Any of Kafka's streams-group record keys: `record_type` says which; `member_id` is "" for the
    group-level ones (17, 20, 23)."""

    record_type: int
    group_id: str
    member_id: str = ""


def is_streams_record_type(record_type: int) -> bool:
    return record_type in COORDINATOR_RECORDS


@cache
def record_classes(record_type: int) -> tuple[Any, Any]:
    """The kio (key, value) classes of a streams-group record type."""
    key_path, value_path = COORDINATOR_RECORDS[record_type]
    return pkgutil.resolve_name(key_path), pkgutil.resolve_name(value_path)


def _read(cls: Any, data: bytes) -> Any:
    view = memoryview(data).toreadonly()
    try:
        check_entity(cls, view, 2)  # kio's native reader must never see a corrupt count
        value, _size = entity_reader(cls)(view, 2)
    except Exception as e:
        raise CorruptStreamsRecordError(f"cannot decode {cls.__name__}: {type(e).__name__}: {e}") from e
    return value


def encode_key(key: StreamsGroupKey) -> bytes:
    cls = record_classes(key.record_type)[0]
    out = io.BytesIO()
    out.write(_I16.pack(key.record_type))
    if "member_id" in cls.__dataclass_fields__:
        entity_writer(cls)(out, cls(group_id=key.group_id, member_id=key.member_id))
    else:
        entity_writer(cls)(out, cls(group_id=key.group_id))
    return out.getvalue()


def decode_key(data: bytes) -> StreamsGroupKey:
    record_type = _I16.unpack_from(data)[0]
    key = _read(record_classes(record_type)[0], data)
    return StreamsGroupKey(record_type, key.group_id, getattr(key, "member_id", ""))


def encode_value(value: Any) -> bytes:
    """The version, then the value: kio's bytes, by kproto's compiled writer of the kio class (several times
    faster than kio's `entity_writer`, which a change of a large group would feel)."""
    out = io.BytesIO()
    out.write(_I16.pack(VALUE_VERSION))
    cls: Any = type(value)
    compiled_writer(cls)(out, value)
    return out.getvalue()


def decode_value(cls: Any, data: bytes) -> Any:
    if len(data) < 2 or _I16.unpack_from(data)[0] != VALUE_VERSION:
        raise CorruptStreamsRecordError(f"unknown {cls.__name__} version")
    return _read(cls, data)
