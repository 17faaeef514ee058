"""A length pre-check of request/response bodies before kio's native reader sees them.

kio 0.6.5's native reader sizes an array's allocation from the declared element count before it
checks the count against the bytes present, so four hostile bytes (a compact array count near
2**32) abort the whole process with "memory allocation failed".  Kafka's generated parsers reject
such a message first ("Tried to allocate a collection of size N, but there are only M bytes
remaining"); this module does the same walk, driven by kio's own dataclass metadata (the same
classification kio's writer uses), and raises InvalidRequestError instead.

Every field is checked: fixed sizes, string/bytes lengths, array counts (at most one element per
remaining byte, as in Kafka), nullable-struct markers, tagged-field sections (known tags are
checked inside their declared size), and unsigned varints (at most 5 bytes, at most 32 bits).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import fields, is_dataclass
from types import EllipsisType, NoneType, UnionType
from typing import Any, Union, get_args, get_origin

from samsa.kproto.errors import InvalidRequestError

__all__ = ["check_entity"]

# skip(buf, pos, end) -> new pos; raises InvalidRequestError
Skipper = Callable[[Any, int, int], int]
# read(buf, pos, end) -> (length or -1 for null, new pos)
LengthReader = Callable[[Any, int, int], tuple[int, int]]

_FIXED_BYTES = {
    "bool": 1,
    "int8": 1,
    "uint8": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "uint32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "uint64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_MAX_TAGGED_FIELDS = 1 << 16


def read_uvarint(buf: Any, pos: int, end: int) -> tuple[int, int]:
    """A Kafka unsigned varint (at most 5 bytes, at most 32 bits) at `pos`; returns (value, new pos)."""
    value = 0
    shift = 0
    while True:
        if pos >= end:
            raise InvalidRequestError("truncated varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            break
        shift += 7
        if shift >= 35:
            raise InvalidRequestError("varint longer than 5 bytes")
    if value > 0xFFFFFFFF:
        raise InvalidRequestError(f"unsigned varint {value} exceeds 32 bits")
    return value, pos


def _fixed(size: int) -> Skipper:
    def skip(buf: Any, pos: int, end: int) -> int:
        pos += size
        if pos > end:
            raise InvalidRequestError("truncated fixed-size field")
        return pos

    return skip


def _compact_length(nullable: bool, what: str) -> LengthReader:
    def read(buf: Any, pos: int, end: int) -> tuple[int, int]:
        value, pos = read_uvarint(buf, pos, end)
        if value == 0:
            if not nullable:
                raise InvalidRequestError(f"null {what} in a non-nullable field")
            return -1, pos
        return value - 1, pos

    return read


def _legacy_length(nullable: bool, what: str, struct_: struct.Struct) -> LengthReader:
    def read(buf: Any, pos: int, end: int) -> tuple[int, int]:
        if pos + struct_.size > end:
            raise InvalidRequestError(f"truncated {what} length")
        (value,) = struct_.unpack_from(buf, pos)
        pos += struct_.size
        if value < 0:
            if value != -1 or not nullable:
                raise InvalidRequestError(f"{what} length {value}")
            return -1, pos
        return int(value), pos

    return read


def _sized(read_length: LengthReader, what: str) -> Skipper:
    def skip(buf: Any, pos: int, end: int) -> int:
        length, pos = read_length(buf, pos, end)
        if length > 0:
            pos += length
            if pos > end:
                raise InvalidRequestError(f"{what} of {length} bytes runs past the end")
        return pos

    return skip


def _array(read_length: LengthReader, item: Skipper) -> Skipper:
    def skip(buf: Any, pos: int, end: int) -> int:
        count, pos = read_length(buf, pos, end)
        if count > end - pos:
            raise InvalidRequestError(f"array of {count} elements, only {end - pos} bytes remaining")
        for _ in range(count):
            pos = item(buf, pos, end)
        return pos

    return skip


def _nullable_entity(inner: Skipper) -> Skipper:
    def skip(buf: Any, pos: int, end: int) -> int:
        if pos >= end:
            raise InvalidRequestError("truncated nullable struct marker")
        marker = buf[pos]
        pos += 1
        if marker == 0xFF:  # int8 -1: null (KIP-893)
            return pos
        if marker != 1:
            raise InvalidRequestError(f"nullable struct marker {marker}")
        return inner(buf, pos, end)

    return skip


def _is_optional(field_type: Any) -> bool:
    if get_origin(field_type) is tuple:
        field_type = get_args(field_type)[0]
    return get_origin(field_type) in (UnionType, Union) and NoneType in get_args(field_type)


def _strip_optional(field_type: Any) -> Any:
    if get_origin(field_type) in (UnionType, Union):
        (inner,) = [arg for arg in get_args(field_type) if arg is not NoneType]
        return inner
    return field_type


def _primitive(kafka_type: str, flexible: bool, nullable: bool) -> Skipper:
    size = _FIXED_BYTES.get(kafka_type)
    if size is not None:
        return _fixed(size)
    if kafka_type in ("string", "bytes", "records"):
        if flexible:
            return _sized(_compact_length(nullable, kafka_type), kafka_type)
        struct_ = _INT16 if kafka_type == "string" else _INT32
        return _sized(_legacy_length(nullable, kafka_type, struct_), kafka_type)
    raise NotImplementedError(f"no length check for kafka_type {kafka_type!r}")


def _field_skipper(field: Any, flexible: bool, is_tag: bool, is_client_id: bool) -> Skipper:
    if is_client_id:  # RequestHeader.client_id is always a legacy nullable string
        return _sized(_legacy_length(True, "string", _INT16), "string")
    field_type = field.type
    optional = False if is_tag else _is_optional(field_type)
    inner_type = _strip_optional(field_type)
    is_array = get_origin(inner_type) is tuple
    if is_array:
        args = get_args(inner_type)
        if len(args) != 2 or not isinstance(args[1], EllipsisType):
            raise NotImplementedError(f"unexpected tuple type {inner_type}")
        element = _strip_optional(args[0])
        if is_dataclass(element):
            item = _entity_skipper(element)
        else:
            item = _primitive(field.metadata["kafka_type"], flexible, nullable=False)
        read_length = _compact_length(optional, "array") if flexible else _legacy_length(optional, "array", _INT32)
        return _array(read_length, item)
    if is_dataclass(inner_type):
        inner = _entity_skipper(inner_type)
        return _nullable_entity(inner) if optional else inner
    return _primitive(field.metadata["kafka_type"], flexible, optional)


_SKIPPERS: dict[Any, Skipper] = {}


def _entity_skipper(entity_type: Any) -> Skipper:
    skipper = _SKIPPERS.get(entity_type)
    if skipper is None:
        skipper = _SKIPPERS[entity_type] = _build_entity_skipper(entity_type)
    return skipper


def _build_entity_skipper(entity_type: Any) -> Skipper:
    flexible = bool(entity_type.__flexible__)
    is_request_header = entity_type.__name__ == "RequestHeader"
    plain: list[Skipper] = []
    tagged: dict[int, Skipper] = {}
    for field in fields(entity_type):
        tag = field.metadata.get("tag")
        is_client_id = is_request_header and field.name == "client_id"
        skipper = _field_skipper(field, flexible, is_tag=tag is not None, is_client_id=is_client_id)
        if tag is None:
            plain.append(skipper)
        else:
            tagged[int(tag)] = skipper
    plain_tuple = tuple(plain)

    if not flexible:

        def skip_plain(buf: Any, pos: int, end: int) -> int:
            for skipper in plain_tuple:
                pos = skipper(buf, pos, end)
            return pos

        return skip_plain

    def skip_flexible(buf: Any, pos: int, end: int) -> int:
        for skipper in plain_tuple:
            pos = skipper(buf, pos, end)
        count, pos = read_uvarint(buf, pos, end)
        if count > _MAX_TAGGED_FIELDS or count > end - pos:
            raise InvalidRequestError(f"{count} tagged fields")
        for _ in range(count):
            tag, pos = read_uvarint(buf, pos, end)
            size, pos = read_uvarint(buf, pos, end)
            field_end = pos + size
            if field_end > end:
                raise InvalidRequestError(f"tagged field {tag} of {size} bytes runs past the end")
            known = tagged.get(tag)
            if known is not None and known(buf, pos, field_end) != field_end:
                raise InvalidRequestError(f"tagged field {tag} does not fill its {size} bytes")
            pos = field_end
        return pos

    return skip_flexible


def check_entity(entity_type: type[Any], buf: Any, pos: int) -> int:
    """Walk an encoded `entity_type` at `pos`; return where it ends. InvalidRequestError if malformed."""
    return _entity_skipper(entity_type)(buf, pos, len(buf))
