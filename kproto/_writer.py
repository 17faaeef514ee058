"""Compiled writers for kio entities: the bytes of kio's `entity_writer`, with far less work per field.

kio's writer calls one function and writes one small bytes object per field, checking phantom types
on the way. A response's fixed-width fields mostly come in runs (a Produce partition's error code,
base offset, log append time and log start offset), so this module generates, once per entity class,
a function that packs each run with one precompiled `struct.Struct` and writes strings, arrays and
nested entities inline. The schemas stay kio's: fields, their Kafka types, tags and defaults are read
from kio's generated classes, and whatever is rare (primitive arrays, nullable structs, tagged-field
payloads) is handed to kio's own field writers. tests/kproto/test_kproto_writer.py checks the bytes
against kio's for every response class, with generated values.
"""

from __future__ import annotations

import dataclasses
import io
import struct
from collections.abc import Callable
from functools import cache
from typing import Any

from kio.serial._implicit_defaults import get_tagged_field_default
from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    classify_field,
    get_field_tag,
    is_optional,
)
from kio.serial._serialize import get_field_writer
from kio.static.constants import uuid_zero

# Something with .write(bytes) (kproto.messages' _Parts, io.BytesIO); writes of large records go by reference.
EntityWriter = Callable[[Any, Any], None]

# kafka_type -> (struct code, expression of the value `v` it packs); for the non-null fixed-width types.
_FIXED: dict[str, tuple[str, str]] = {
    "int8": ("b", "{v}"),
    "int16": ("h", "{v}"),
    "int32": ("i", "{v}"),
    "int64": ("q", "{v}"),
    "uint8": ("B", "{v}"),
    "uint16": ("H", "{v}"),
    "uint32": ("I", "{v}"),
    "uint64": ("Q", "{v}"),
    "float64": ("d", "{v}"),
    "bool": ("?", "{v}"),
    "error_code": ("h", "{v}.value"),
    "timedelta_i32": ("i", "round({v}.total_seconds() * 1000)"),
    "timedelta_i64": ("q", "round({v}.total_seconds() * 1000)"),
    "datetime_i64": ("q", "round({v}.timestamp() * 1000)"),
    "uuid": ("16s", "(_UUID_ZERO if {v} is None else {v}.bytes)"),
}
_NULLABLE_DATETIME = ("q", "(-1 if {v} is None else round({v}.timestamp() * 1000))")

_SMALL_VARINTS = tuple(bytes((n,)) for n in range(128))
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


def _uvarint(n: int) -> bytes:
    if n < 128:
        return _SMALL_VARINTS[n]
    out = bytearray()
    while n >= 128:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _compact_string(w: Callable[[Any], Any], value: str | bytes) -> None:
    if value is None:
        raise TypeError("Unexpectedly received None value")
    data = value.encode() if isinstance(value, str) else value
    w(_uvarint(len(data) + 1))
    w(data)


def _nullable_compact_string(w: Callable[[Any], Any], value: str | bytes | None) -> None:
    if value is None:
        w(b"\x00")
        return
    data = value.encode() if isinstance(value, str) else value
    w(_uvarint(len(data) + 1))
    w(data)


def _legacy_string(w: Callable[[Any], Any], value: str | None, nullable: bool) -> None:
    if value is None:
        if not nullable:
            raise TypeError("Unexpectedly received None value")
        w(_INT16.pack(-1))
        return
    data = value.encode()
    w(_INT16.pack(len(data)))
    w(data)


def _legacy_bytes(w: Callable[[Any], Any], value: bytes | None, nullable: bool) -> None:
    if value is None:
        if not nullable:
            raise TypeError("Unexpectedly received None value")
        w(_INT32.pack(-1))
        return
    w(_INT32.pack(len(value)))
    w(value)


def _tagged_fields(cls: Any) -> list[tuple[int, dataclasses.Field[Any], Any, Any]]:
    tagged = []
    for f in dataclasses.fields(cls):
        tag = get_field_tag(f)
        if tag is not None:
            writer = get_field_writer(f, flexible=True, is_request_header=False, is_tag=True)
            tagged.append((int(tag), f, writer, get_tagged_field_default(f)))
    return sorted(tagged, key=lambda t: t[0])


def _write_tags(out: Any, entity: Any, tagged: list[tuple[int, dataclasses.Field[Any], Any, Any]]) -> None:
    """kio's tagged-field section: the fields whose value differs from their default, in tag order."""
    present = []
    for tag, f, writer, implicit_default in tagged:
        value = getattr(entity, f.name)
        if value == f.default or (f.default is dataclasses.MISSING and value == implicit_default):
            continue
        buffer = io.BytesIO()
        writer(buffer, value)
        present.append((tag, buffer.getvalue()))
    out.write(_uvarint(len(present)))
    for tag, encoded in present:
        out.write(_uvarint(tag))
        out.write(_uvarint(len(encoded)))
        out.write(encoded)


@cache
def compiled_writer(cls: Any) -> EntityWriter:
    """A function `write(out, entity)` giving exactly kio's `entity_writer(cls)` bytes."""
    flexible = bool(cls.__flexible__)
    env: dict[str, Any] = {
        "_UUID_ZERO": uuid_zero.bytes, "_uv": _uvarint, "_cstr": _compact_string,
        "_ncstr": _nullable_compact_string, "_lstr": _legacy_string, "_lbytes": _legacy_bytes,
        "_write_tags": _write_tags, "_i32": _INT32.pack,
    }
    lines = ["def write(out, e):", "    w = out.write"]
    run_codes: list[str] = []
    run_values: list[str] = []

    def flush_run() -> None:
        if run_codes:
            name = f"_s{len(env)}"
            env[name] = struct.Struct(">" + "".join(run_codes)).pack
            lines.append(f"    w({name}({', '.join(run_values)}))")
            run_codes.clear()
            run_values.clear()

    for f in dataclasses.fields(cls):
        if get_field_tag(f) is not None:
            continue
        v = f"e.{f.name}"
        kind = classify_field(f)
        optional = is_optional(f)
        kafka_type = f.metadata.get("kafka_type")
        if isinstance(kind, PrimitiveField) and kafka_type in _FIXED and (not optional or kafka_type == "uuid"):
            code, expr = _FIXED[kafka_type]
            run_codes.append(code)
            run_values.append(expr.format(v=v))
            continue
        if isinstance(kind, PrimitiveField) and kafka_type == "datetime_i64" and optional:
            code, expr = _NULLABLE_DATETIME
            run_codes.append(code)
            run_values.append(expr.format(v=v))
            continue
        flush_run()
        if isinstance(kind, PrimitiveField) and kafka_type in ("string", "bytes", "records"):
            if flexible:
                lines.append(f"    {'_ncstr' if optional else '_cstr'}(w, {v})")
            elif kafka_type == "string":
                lines.append(f"    _lstr(w, {v}, {optional})")
            else:
                lines.append(f"    _lbytes(w, {v}, {optional})")
        elif isinstance(kind, EntityField) and not optional:
            name = f"_e{len(env)}"
            env[name] = compiled_writer(kind.type_)
            lines.append(f"    {name}(out, {v})")
        elif isinstance(kind, EntityTupleField):
            name = f"_e{len(env)}"
            env[name] = compiled_writer(kind.type_)
            lines.append(f"    v = {v}")
            null, length = ('b"\\x00"', "_uv(len(v) + 1)") if flexible else ("_i32(-1)", "_i32(len(v))")
            lines.append(f"    if v is None:\n        w({null})\n    else:\n        w({length})")
            lines.append(f"        for x in v:\n            {name}(out, x)")
        else:
            # Rare shapes (primitive arrays, nullable structs): kio's own field writer.
            name = f"_f{len(env)}"
            env[name] = get_field_writer(f, flexible=flexible, is_request_header=False, is_tag=False)
            lines.append(f"    {name}(out, {v})")
    flush_run()
    if flexible:
        tagged = _tagged_fields(cls)
        if tagged:
            env["_tagged"] = tagged
            lines.append("    _write_tags(out, e, _tagged)")
        else:
            lines.append('    w(b"\\x00")')
    source = "\n".join(lines) + "\n"
    exec(compile(source, f"<kproto writer for {cls.__qualname__} v{getattr(cls, '__version__', '?')}>", "exec"),
         env)
    writer: EntityWriter = env["write"]
    return writer
