"""Request/response headers and message bodies: (api_key, api_version) -> kio schema, parse and encode.

Header versions follow Kafka's ApiMessageType: a request uses header v2 when its schema version is
flexible (KIP-482), else v1; a response uses header v1 when flexible, else v0 -- except ApiVersions,
whose response header is always v0 so a client can read it before it knows what the broker speaks
(KIP-511).  ControlledShutdown v0's request header v0 is not supported (Kafka 4 dropped that API).
"""

from __future__ import annotations

import functools
import io
import struct
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pkgutil import resolve_name
from typing import Any

from kio.index import load_request_schema, load_response_schema
from kio.schema.errors import ErrorCode
from kio.schema.index import api_key_map, schema_name_map
from kio.serial import entity_reader, entity_writer

from samsa.kproto._guard import check_entity
from samsa.kproto._writer import compiled_writer
from samsa.kproto.errors import InvalidRequestError, NewerErrorCode, ProtocolError, UnsupportedVersionError
from samsa.kproto.framing import SIZE_PREFIX_BYTES
from samsa.kproto.schema import EXTRA_API_KEYS, EXTRA_SCHEMAS

__all__ = [
    "API_KEYS",
    "API_NAMES",
    "API_VERSIONS_KEY",
    "RequestHeader",
    "ResponseHeader",
    "decode_request",
    "decode_response",
    "encode_request",
    "encode_response",
    "encode_response_parts",
    "is_flexible",
    "kio_version_range",
    "parse_request_header",
    "parse_response_header",
    "request_class",
    "request_header_version",
    "response_class",
    "response_header_version",
]

API_NAMES: Mapping[int, str] = {**api_key_map, **EXTRA_API_KEYS}
API_KEYS: Mapping[str, int] = {name: key for key, name in API_NAMES.items()}
API_VERSIONS_KEY = 18

_FIXED_HEADER = struct.Struct(">hhi")  # api_key, api_version, correlation_id
_INT16 = struct.Struct(">h")
# Responses whose top-level error code may be newer than kio's ErrorCode (kio 0.6.5 stops at 133), by
# (api_key, version): where the code sits after the response header. kio's reader refuses an unknown code, so
# it is read here and the entity carries it as a NewerErrorCode (UnregisterController's
# CONTROLLER_ID_NOT_REGISTERED, 136: after throttle_time_ms).
_NEWER_ERROR_CODE_AT: dict[tuple[int, int], int] = {(94, 0): 4}
_INT32 = struct.Struct(">i")
_MAX_TAGGED_FIELDS = 1 << 16  # a bound on loop work for hostile input; Kafka's headers have none


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    size_bytes: int  # bytes of the header in the frame payload: the body starts here
    header_version: int = 1


@dataclass(frozen=True, slots=True)
class ResponseHeader:
    correlation_id: int
    size_bytes: int
    header_version: int = 0


# --- schema lookup -------------------------------------------------------------------------------


@functools.cache
def kio_version_range(api_key: int) -> tuple[int, int] | None:
    """(min, max) versions with request and response schemas, or None for an unknown API.

    The schemas are kio's, then the ones kio's generator made from a newer Kafka
    (``samsa.kproto.schema``); together they cover a contiguous range.
    """
    name = API_NAMES.get(api_key)
    if name is None:
        return None
    versions = sorted({*schema_name_map.get(name, {}), *EXTRA_SCHEMAS.get(name, {})})
    return versions[0], versions[-1]


def _schema_class(api_key: int, api_version: int, response: bool) -> type[Any]:
    version_range = kio_version_range(api_key)
    if version_range is None or not version_range[0] <= api_version <= version_range[1]:
        raise UnsupportedVersionError(api_key, api_version)
    extra = EXTRA_SCHEMAS.get(API_NAMES[api_key], {}).get(api_version)
    if extra is not None:
        cls: type[Any] = resolve_name(extra[1] if response else extra[0])
        return cls
    if response:
        return load_response_schema(api_key, api_version)
    return load_request_schema(api_key, api_version)


@functools.cache
def request_class(api_key: int, api_version: int) -> type[Any]:
    """The kio request entity class; UnsupportedVersionError if there is none."""
    return _schema_class(api_key, api_version, response=False)


@functools.cache
def response_class(api_key: int, api_version: int) -> type[Any]:
    """The kio response entity class; UnsupportedVersionError if there is none."""
    return _schema_class(api_key, api_version, response=True)


@functools.cache
def is_flexible(api_key: int, api_version: int) -> bool:
    """Whether the request (and response) schema uses KIP-482 compact encodings and tagged fields.

    For a version kio does not know the answer is extrapolated from the nearest known version
    (flexibility, once introduced, is never removed), so an unsupported header can still be parsed.
    An unknown API is taken as non-flexible.
    """
    version_range = kio_version_range(api_key)
    if version_range is None:
        return False
    low, high = version_range
    nearest = min(max(api_version, low), high)
    return bool(request_class(api_key, nearest).__flexible__)


def request_header_version(api_key: int, api_version: int) -> int:
    return 2 if is_flexible(api_key, api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    if api_key == API_VERSIONS_KEY:
        return 0
    return 1 if is_flexible(api_key, api_version) else 0


# --- primitive readers for headers ---------------------------------------------------------------


def _read_uvarint(buf: bytes | bytearray | memoryview, pos: int) -> tuple[int, int]:
    value = 0
    shift = 0
    end = len(buf)
    while True:
        if pos >= end:
            raise InvalidRequestError("truncated varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift >= 35:
            raise InvalidRequestError("varint longer than 5 bytes")


def _skip_tagged_fields(buf: bytes | bytearray | memoryview, pos: int) -> int:
    count, pos = _read_uvarint(buf, pos)
    if count > _MAX_TAGGED_FIELDS:
        raise InvalidRequestError(f"{count} tagged fields")
    for _ in range(count):
        _, pos = _read_uvarint(buf, pos)  # tag
        size, pos = _read_uvarint(buf, pos)
        pos += size
        if pos > len(buf):
            raise InvalidRequestError("tagged field runs past the end of the header")
    return pos


def _read_client_id(buf: bytes | bytearray | memoryview, pos: int) -> tuple[str | None, int]:
    # client_id stays a nullable int16-length string in header v2 ("flexibleVersions": "none").
    if pos + 2 > len(buf):
        raise InvalidRequestError("truncated client_id length")
    (length,) = _INT16.unpack_from(buf, pos)
    pos += 2
    if length == -1:
        return None, pos
    if length < 0:
        raise InvalidRequestError(f"client_id length {length}")
    if pos + length > len(buf):
        raise InvalidRequestError("truncated client_id")
    try:
        client_id = bytes(buf[pos : pos + length]).decode("utf-8")
    except UnicodeDecodeError as e:
        raise InvalidRequestError("client_id is not UTF-8") from e
    return client_id, pos + length


# --- requests ------------------------------------------------------------------------------------


def parse_request_header(payload: bytes | bytearray | memoryview) -> RequestHeader:
    """Parse a request header from a frame payload.

    The fixed part (api_key, api_version, correlation_id) is read first, so even a request for an
    unknown API or version yields a header the broker can answer.  For a known (api_key, version) a
    malformed client_id or tagged-field section raises InvalidRequestError; for an unknown one the
    header is returned with what could be read (client_id None, size_bytes 8 if nothing more).
    """
    if len(payload) < _FIXED_HEADER.size:
        raise InvalidRequestError(f"request header needs {_FIXED_HEADER.size} bytes, have {len(payload)}")
    api_key, api_version, correlation_id = _FIXED_HEADER.unpack_from(payload, 0)
    header_version = request_header_version(api_key, api_version)
    version_range = kio_version_range(api_key)
    known = version_range is not None and version_range[0] <= api_version <= version_range[1]
    try:
        client_id, pos = _read_client_id(payload, _FIXED_HEADER.size)
        if header_version >= 2:
            pos = _skip_tagged_fields(payload, pos)
    except InvalidRequestError:
        if known:
            raise
        return RequestHeader(api_key, api_version, correlation_id, None, _FIXED_HEADER.size, header_version)
    return RequestHeader(api_key, api_version, correlation_id, client_id, pos, header_version)


def _readonly(payload: bytes | bytearray | memoryview) -> bytes | memoryview:
    # kio's native reader refuses writable buffers ("Received writable byte buffer"); a read-only
    # view of the same memory avoids a copy.
    if isinstance(payload, bytes):
        return payload
    view = memoryview(payload)
    return view if view.readonly else view.toreadonly()


def decode_request(header: RequestHeader, payload: bytes | bytearray | memoryview) -> Any:
    """Decode the request body after the header; InvalidRequestError on a malformed body.

    Trailing bytes after the body are ignored, as Kafka's RequestContext does.
    """
    cls = request_class(header.api_key, header.api_version)
    payload = _readonly(payload)
    check_entity(cls, payload, header.size_bytes)  # kio's native reader must never see hostile counts
    try:
        value, _size = entity_reader(cls)(payload, header.size_bytes)
    except ProtocolError:
        raise
    except Exception as e:  # kio's native reader raises DecodeError, ValueError, UnicodeDecodeError...
        raise InvalidRequestError(f"cannot decode {cls.__name__} v{header.api_version}: {type(e).__name__}: {e}") from e
    return value


def _check_entity(entity: object, api_key: int, api_version: int, kind: str) -> None:
    cls: Any = type(entity)
    if getattr(cls, "__api_key__", None) != api_key:
        raise TypeError(f"{cls.__name__} is not a {kind} for api_key {api_key}")
    # ApiVersions may answer any version with v0 (KIP-511's fallback), so only its key must match.
    if api_key != API_VERSIONS_KEY and getattr(cls, "__version__", None) != api_version:
        raise TypeError(f"{cls.__name__} is v{cls.__version__}, the request was v{api_version}")


class _Parts:
    """A write target for kio's writer that keeps large writes (record batches) by reference.

    Small writes are coalesced into bytearrays; a write of at least LARGE_WRITE_BYTES is appended
    as the object itself, so a Fetch response's records -- bytes or a memoryview of a segment --
    reach the socket (sendmsg/writev) without being copied into the response.
    """

    __slots__ = ("_small", "parts", "size")

    def __init__(self) -> None:
        self.parts: list[bytes | bytearray | memoryview] = []
        self._small = bytearray()
        self.size = 0

    def write(self, data: bytes | bytearray | memoryview) -> int:
        length = len(data)
        self.size += length
        if length >= LARGE_WRITE_BYTES:
            if self._small:
                self.parts.append(self._small)
                self._small = bytearray()
            self.parts.append(data)
        else:
            self._small += data
        return length

    def finish(self) -> list[bytes | bytearray | memoryview]:
        if self._small:
            self.parts.append(self._small)
            self._small = bytearray()
        return self.parts


LARGE_WRITE_BYTES = 8 * 1024


def encode_response_parts(header: RequestHeader, response: object) -> list[bytes | bytearray | memoryview]:
    """The response frame as a list of buffers to write in order (for sendmsg/writev).

    Record batches of at least LARGE_WRITE_BYTES are the very objects in the response, not copies:
    they must not change until the parts are sent.
    """
    _check_entity(response, header.api_key, header.api_version, "response")
    cls: Any = type(response)
    out = _Parts()
    out.write(b"\x00\x00\x00\x00")  # the size prefix, patched below
    header_version = response_header_version(header.api_key, int(cls.__version__))
    out.write(_INT32.pack(header.correlation_id))
    if header_version >= 1:
        out.write(b"\x00")  # no tagged fields
    compiled_writer(cls)(out, response)  # kio's bytes, compiled (kproto/_writer.py)
    parts = out.finish()
    first = parts[0]
    assert isinstance(first, bytearray) and len(first) >= SIZE_PREFIX_BYTES
    _INT32.pack_into(first, 0, out.size - SIZE_PREFIX_BYTES)
    return parts


def encode_response(header: RequestHeader, response: object) -> bytes:
    """The whole response frame: size prefix, response header (v0/v1 per API and version), body."""
    return b"".join(encode_response_parts(header, response))


# --- the client side: for tests, the CLI and broker-to-broker requests ----------------------------


def encode_request(request: object, *, correlation_id: int, client_id: str | None) -> bytes:
    """The whole request frame for a kio request entity: size prefix, header v1/v2, body."""
    cls: Any = type(request)
    api_key = int(cls.__api_key__)
    api_version = int(cls.__version__)
    request_class(api_key, api_version)  # UnsupportedVersionError for something that is not a request
    out = io.BytesIO()
    out.write(b"\x00\x00\x00\x00")
    out.write(_FIXED_HEADER.pack(api_key, api_version, correlation_id))
    if client_id is None:
        out.write(_INT16.pack(-1))
    else:
        encoded = client_id.encode("utf-8")
        out.write(_INT16.pack(len(encoded)))
        out.write(encoded)
    if request_header_version(api_key, api_version) >= 2:
        out.write(b"\x00")
    entity_writer(cls)(out, request)
    size = out.tell() - SIZE_PREFIX_BYTES
    out.seek(0)
    out.write(_INT32.pack(size))
    return out.getvalue()


def parse_response_header(
    api_key: int, api_version: int, payload: bytes | bytearray | memoryview
) -> ResponseHeader:
    header_version = response_header_version(api_key, api_version)
    if len(payload) < 4:
        raise InvalidRequestError("response header needs 4 bytes")
    (correlation_id,) = _INT32.unpack_from(payload, 0)
    pos = 4
    if header_version >= 1:
        pos = _skip_tagged_fields(payload, pos)
    return ResponseHeader(correlation_id, pos, header_version)


def _whole_entity(cls: type[Any], payload: bytes | bytearray | memoryview, pos: int) -> bool:
    """Whether the payload from `pos` on is exactly one well-formed `cls`."""
    try:
        return check_entity(cls, payload, pos) == len(payload)
    except InvalidRequestError:
        return False


def decode_response(api_key: int, api_version: int, payload: bytes | bytearray | memoryview) -> tuple[int, Any]:
    """(correlation_id, kio response entity) from a response frame payload."""
    payload = _readonly(payload)
    header = parse_response_header(api_key, api_version, payload)
    cls = response_class(api_key, api_version)
    if api_key == API_VERSIONS_KEY and api_version > 0 and not _whole_entity(cls, payload, header.size_bytes):
        # A broker that does not speak this ApiVersions version answers with a v0 body and an error
        # code (KIP-511); other refusals (INVALID_REQUEST, REBOOTSTRAP_REQUIRED) come in the version asked.
        # Kafka's client (ApiVersionsResponse.parse) reads the version asked, then v0 if that fails.
        cls = response_class(api_key, 0)
    newer: int | None = None
    at = _NEWER_ERROR_CODE_AT.get((api_key, api_version))
    if at is not None and len(payload) >= header.size_bytes + at + 2:
        (code,) = _INT16.unpack_from(payload, header.size_bytes + at)
        if code not in ErrorCode._value2member_map_:
            newer = code
            patched = bytearray(payload)
            patched[header.size_bytes + at:header.size_bytes + at + 2] = b"\0\0"
            payload = memoryview(bytes(patched))
    check_entity(cls, payload, header.size_bytes)
    try:
        value, _size = entity_reader(cls)(payload, header.size_bytes)
    except Exception as e:
        raise InvalidRequestError(f"cannot decode {cls.__name__}: {type(e).__name__}: {e}") from e
    if newer is not None:
        value = replace(value, error_code=NewerErrorCode(newer))
    return header.correlation_id, value
