"""Request/response headers and bodies, checked against kio's writer and kafka-python's encoder."""

from __future__ import annotations

import datetime
import io
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st
from kio.schema.api_versions.v0.response import ApiVersion as ApiVersionV0
from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.api_versions.v3.request import ApiVersionsRequest as ApiVersionsRequestV3
from kio.schema.api_versions.v3.response import ApiVersion, ApiVersionsResponse
from kio.schema.metadata.v1.request import MetadataRequest as MetadataRequestV1
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
from kio.serial import entity_writer
from kio.static.primitive import i16, i32

from samsa.kproto.errors import ErrorCode, InvalidRequestError, ProtocolError, UnsupportedVersionError
from samsa.kproto.framing import FrameReader
from samsa.kproto.messages import (
    API_KEYS,
    API_NAMES,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
    kio_version_range,
    parse_request_header,
    request_class,
    request_header_version,
    response_class,
    response_header_version,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # kafka-python reads its JSON schemas


def _header_bytes(api_key: int, version: int, correlation_id: int, client_id: bytes | None) -> bytes:
    out = struct.pack(">hhi", api_key, version, correlation_id)
    if client_id is None:
        return out + struct.pack(">h", -1)
    return out + struct.pack(">h", len(client_id)) + client_id


def _unframe(data: bytes) -> bytes:
    reader = FrameReader(max_frame_bytes=len(data))
    reader.feed(data)
    payload = reader.next_frame()
    assert payload is not None
    assert reader.buffered_bytes == 0
    return payload


def test_api_names_and_ranges() -> None:
    assert API_NAMES[0] == "produce"
    assert API_KEYS["api_versions"] == 18
    assert kio_version_range(18) == (0, 5)  # v5 from samsa.kproto.schema (kio has v0-4)
    assert kio_version_range(94) == (0, 0)
    assert kio_version_range(3) == (0, 13)
    assert kio_version_range(9999) is None


@pytest.mark.parametrize(
    ("api_key", "version", "request_header", "response_header"),
    [
        (18, 0, 1, 0),
        (18, 3, 2, 0),  # ApiVersions answers with header v0 even when flexible
        (18, 4, 2, 0),
        (18, 99, 2, 0),  # unknown newer version: extrapolated from v4
        (3, 8, 1, 0),
        (3, 9, 2, 1),  # Metadata is flexible from v9
        (0, 8, 1, 0),
        (0, 9, 2, 1),  # Produce flexible from v9
        (1, 11, 1, 0),
        (1, 12, 2, 1),  # Fetch flexible from v12
        (0, 0, 1, 0),  # below kio's minimum: as the minimum (v3, not flexible)
        (9999, 0, 1, 0),  # unknown API
    ],
)
def test_header_versions(api_key: int, version: int, request_header: int, response_header: int) -> None:
    assert request_header_version(api_key, version) == request_header
    assert response_header_version(api_key, version) == response_header


def test_kio_schemas_load_and_agree_on_flexibility() -> None:
    for api_key in API_NAMES:
        version_range = kio_version_range(api_key)
        assert version_range is not None
        for version in sorted(set(version_range)):  # every version: ~10 s of imports; the ends suffice
            request = request_class(api_key, version)
            response = response_class(api_key, version)
            assert request.__api_key__ == api_key == response.__api_key__
            assert request.__flexible__ == response.__flexible__
            assert request_header_version(api_key, version) == (2 if request.__flexible__ else 1)


def test_parse_header_v1() -> None:
    payload = _header_bytes(3, 8, 42, b"my-client") + b"body"
    header = parse_request_header(payload)
    assert (header.api_key, header.api_version, header.correlation_id) == (3, 8, 42)
    assert header.client_id == "my-client"
    assert header.size_bytes == len(payload) - 4
    assert header.header_version == 1


def test_parse_header_v1_null_client_id() -> None:
    header = parse_request_header(_header_bytes(3, 1, 7, None))
    assert header.client_id is None
    assert header.size_bytes == 10


def test_parse_header_v2_skips_tagged_fields() -> None:
    # two tagged fields: tag 0 with 3 bytes, tag 5 with 0 bytes
    tagged = b"\x02" + b"\x00\x03abc" + b"\x05\x00"
    payload = _header_bytes(3, 12, -5, b"c") + tagged + b"\x01"
    header = parse_request_header(payload)
    assert header.correlation_id == -5
    assert header.client_id == "c"
    assert header.header_version == 2
    assert header.size_bytes == len(payload) - 1


@pytest.mark.parametrize(
    "payload",
    [
        b"",
        b"\x00\x03\x00",
        _header_bytes(3, 1, 1, None)[:-1],  # truncated client_id length
        _header_bytes(3, 1, 1, b"abc")[:-1],  # truncated client_id
        struct.pack(">hhih", 3, 1, 1, -2),  # negative length other than -1
        _header_bytes(3, 1, 1, b"\xff\xfe"),  # not UTF-8
        _header_bytes(3, 12, 1, b"c"),  # header v2 without its tagged-field count
        _header_bytes(3, 12, 1, b"c") + b"\x01\x00\x05ab",  # tagged field runs past the end
        _header_bytes(3, 12, 1, b"c") + b"\xff\xff\xff\xff\xff\x01",  # over-long varint
    ],
)
def test_garbage_header_is_a_protocol_error(payload: bytes) -> None:
    with pytest.raises(InvalidRequestError):
        parse_request_header(payload)
    assert issubclass(InvalidRequestError, ProtocolError)


def test_unknown_version_still_yields_a_header() -> None:
    # ApiVersions v7 from a future client, with the flexible header it would send
    payload = _header_bytes(18, 7, 99, b"future") + b"\x00" + b"whatever body"
    header = parse_request_header(payload)
    assert (header.api_key, header.api_version, header.correlation_id) == (18, 7, 99)
    assert header.client_id == "future"
    with pytest.raises(UnsupportedVersionError):
        decode_request(header, payload)


def test_unknown_version_with_unreadable_rest_keeps_the_fixed_part() -> None:
    header = parse_request_header(struct.pack(">hhi", 18, 300, 12) + b"\x7f")
    assert (header.api_key, header.api_version, header.correlation_id) == (18, 300, 12)
    assert header.client_id is None
    header = parse_request_header(struct.pack(">hhi", 4242, 0, 13))
    assert (header.api_key, header.correlation_id) == (4242, 13)


def test_apiversions_fallback_response_is_v0_with_header_v0() -> None:
    header = parse_request_header(_header_bytes(18, 7, 99, b"future") + b"\x00")
    response = ApiVersionsResponseV0(
        error_code=ErrorCode.unsupported_version,
        api_keys=(ApiVersionV0(api_key=i16(18), min_version=i16(0), max_version=i16(4)),),
    )
    payload = _unframe(encode_response(header, response))
    # correlation id, then the v0 body: error_code, int32 array length, one entry; no tagged fields
    assert payload == struct.pack(">ihi3h", 99, 35, 1, 18, 0, 4)
    # a client that asked for v3 reads the fallback as v0, as Kafka's client does
    assert decode_response(18, 3, payload) == (99, response)


def _kio_bytes(entity: object) -> bytes:
    out = io.BytesIO()
    entity_writer(type(entity))(out, entity)  # type: ignore[type-var]
    return out.getvalue()


def test_decode_produce_v9_built_with_kio() -> None:
    request = ProduceRequest(
        transactional_id=None,
        acks=i16(-1),
        timeout=datetime.timedelta(milliseconds=1500),
        topic_data=(
            TopicProduceData(
                name="orders",  # type: ignore[arg-type]
                partition_data=(PartitionProduceData(index=i32(2), records=b"\x00batch"),),  # type: ignore[arg-type]
            ),
        ),
    )
    payload = _header_bytes(0, 9, 1, b"producer") + b"\x00" + _kio_bytes(request)
    header = parse_request_header(payload)
    assert decode_request(header, payload) == request
    # kio refuses writable buffers; decode_request takes any buffer
    for buffer in (bytearray(payload), memoryview(bytearray(payload)), memoryview(payload)):
        assert decode_request(parse_request_header(buffer), buffer) == request
    # and the client-side encoder makes the same frame
    assert _unframe(encode_request(request, correlation_id=1, client_id="producer")) == payload


def test_truncated_body_is_a_protocol_error() -> None:
    frame_bytes = encode_request(
        MetadataRequest(
            topics=(MetadataRequestTopic(topic_id=None, name="t"),),  # type: ignore[arg-type]
            allow_auto_topic_creation=True,
            include_topic_authorized_operations=False,
        ),
        correlation_id=3,
        client_id=None,
    )
    payload = _unframe(frame_bytes)
    header = parse_request_header(payload)
    for cut in range(header.size_bytes, len(payload)):
        with pytest.raises(InvalidRequestError):
            decode_request(header, payload[:cut])


@given(st.binary(max_size=64))
def test_random_bodies_never_escape_as_other_exceptions(body: bytes) -> None:
    for api_key, version in [(3, 12), (0, 9), (18, 3), (1, 11)]:
        payload = _header_bytes(api_key, version, 1, b"x") + (b"\x00" if version >= 9 else b"") + body
        try:
            decode_request(parse_request_header(payload), payload)
        except InvalidRequestError:
            pass


def test_kafka_python_requests_decode() -> None:
    from kafka.protocol.metadata import ApiVersionsRequest as KpApiVersions
    from kafka.protocol.metadata import MetadataRequest as KpMetadata
    from kafka.protocol.parser import KafkaProtocol

    protocol = KafkaProtocol(client_id="kp-client")
    request = KpApiVersions(version=3, client_software_name="kp", client_software_version="3.0")
    protocol.send_request(request, 7)
    protocol.send_request(KpMetadata(version=1, topics=["a", "b"]), 8)
    reader = FrameReader(max_frame_bytes=1000)
    reader.feed(protocol.send_bytes())
    first, second = reader.next_frame(), reader.next_frame()
    assert first is not None and second is not None

    header = parse_request_header(first)
    assert (header.api_key, header.api_version, header.correlation_id) == (18, 3, 7)
    assert header.client_id == "kp-client"
    assert decode_request(header, first) == ApiVersionsRequestV3(
        client_software_name="kp", client_software_version="3.0"
    )
    # and our client-side encoder writes the very same bytes as kafka-python
    ours = encode_request(
        ApiVersionsRequestV3(client_software_name="kp", client_software_version="3.0"),  # type: ignore[arg-type]
        correlation_id=7,
        client_id="kp-client",
    )
    assert _unframe(ours) == first
    ours = encode_request(MetadataRequestV1(topics=decode_request(parse_request_header(second), second).topics),
                          correlation_id=8, client_id="kp-client")  # fmt: skip
    assert _unframe(ours) == second
    header = parse_request_header(second)
    assert header.header_version == 1
    request = decode_request(header, second)
    assert isinstance(request, MetadataRequestV1)
    assert [t.name for t in request.topics or ()] == ["a", "b"]


def test_kafka_python_reads_our_apiversions_v3_response() -> None:
    from kafka.protocol.metadata import ApiVersionsResponse as KpApiVersionsResponse

    header = parse_request_header(_header_bytes(18, 3, 77, b"c") + b"\x00")
    response = ApiVersionsResponse(
        error_code=ErrorCode.none,
        api_keys=(
            ApiVersion(api_key=i16(0), min_version=i16(3), max_version=i16(12)),
            ApiVersion(api_key=i16(18), min_version=i16(0), max_version=i16(4)),
        ),
        throttle_time=datetime.timedelta(0),
    )
    data = encode_response(header, response)
    decoded = KpApiVersionsResponse.decode(data, version=3, header=True, framed=True)
    assert decoded._header.correlation_id == 77
    assert [(k.api_key, k.min_version, k.max_version) for k in decoded.api_keys] == [(0, 3, 12), (18, 0, 4)]
    # and our own client-side decoder agrees
    correlation_id, ours = decode_response(18, 3, _unframe(data))
    assert correlation_id == 77
    assert ours == response


@pytest.mark.parametrize(("version", "answer"), [
    (5, "000000050081010000000000"),  # REBOOTSTRAP_REQUIRED in v5, as Kafka 4.4 writes it (differential kip1242.py)
    (3, "00000005002a010000000000"),  # INVALID_REQUEST in v3
])
def test_an_apiversions_refusal_in_the_version_asked_is_read_in_that_version(version: int, answer: str) -> None:
    """Kafka's ApiVersionsResponse.parse: the version asked first, v0 only when that fails."""
    correlation_id, response = decode_response(18, version, bytes.fromhex(answer))
    assert correlation_id == 5 and type(response).__version__ == version
    assert response.api_keys == () and response.error_code != ErrorCode.none


@pytest.mark.parametrize("version", [1, 3, 5])
def test_an_unsupported_version_answer_in_v0_is_read_as_v0(version: int) -> None:
    """KIP-511: a broker that does not speak the version asked answers a v0 body naming its own range."""
    correlation_id, response = decode_response(18, version, bytes.fromhex("00000009002300000001001200000004"))
    assert correlation_id == 9 and type(response).__version__ == 0
    assert response.error_code == ErrorCode.unsupported_version
    assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [(18, 0, 4)]


def test_flexible_response_has_header_v1() -> None:
    from kio.schema.metadata.v12.response import MetadataResponse

    header = parse_request_header(_header_bytes(3, 12, 5, b"c") + b"\x00")
    response = MetadataResponse(
        throttle_time=datetime.timedelta(0),
        brokers=(),
        cluster_id=None,
        controller_id=i32(1),
        topics=(),  # type: ignore[arg-type]
    )
    payload = _unframe(encode_response(header, response))
    assert payload[:5] == struct.pack(">i", 5) + b"\x00"
    assert decode_response(3, 12, payload) == (5, response)


def test_encode_response_rejects_the_wrong_entity() -> None:
    header = parse_request_header(_header_bytes(3, 12, 5, b"c") + b"\x00")
    response = ApiVersionsResponseV0(error_code=ErrorCode.none, api_keys=())
    with pytest.raises(TypeError):
        encode_response(header, response)
    with pytest.raises(UnsupportedVersionError):
        request_class(3, 99)


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


@pytest.mark.parametrize(
    ("api_key", "version", "body"),
    [
        # kio 0.6.5's native reader allocates count * 8 bytes before checking the count: each of
        # these aborted the whole process ("memory allocation of 34359738360 bytes failed").
        (3, 12, _uvarint(2**32) + b"\x00" * 8),
        (3, 12, _uvarint(4_000_000_000) + b"\x00" * 8),
        (3, 12, bytes.fromhex("90f3d8df225e6d11dbd4b5b54b5b73751ebb22e4")),
        (3, 8, struct.pack(">i", 0x7FFFFFFF) + b"\x00" * 8),  # legacy array: 16 GiB
        (0, 9, b"\x00\x00\x01\x00\x00\x03\xe8" + _uvarint(2**32 - 1)),
        (1, 12, b"\x00" * 20 + _uvarint(3_000_000_000)),
    ],
)
def test_hostile_array_counts_are_rejected_before_kio_allocates(api_key: int, version: int, body: bytes) -> None:
    payload = _header_bytes(api_key, version, 1, b"x") + (b"\x00" if version >= 9 else b"") + body
    with pytest.raises(InvalidRequestError):
        decode_request(parse_request_header(payload), payload)


def test_array_count_up_to_remaining_bytes_is_checked_by_kio() -> None:
    # count == remaining bytes passes the guard only if the elements really are there
    body = struct.pack(">i", 3) + b"".join(struct.pack(">h", 1) + b"a" for _ in range(3))
    payload = _header_bytes(3, 1, 1, b"x") + body
    request = decode_request(parse_request_header(payload), payload)
    assert [t.name for t in request.topics] == ["a", "a", "a"]


def _fetch_response(records: object) -> object:
    from kio.schema.fetch.v12.response import FetchableTopicResponse, FetchResponse, PartitionData
    from kio.static.primitive import i64

    return FetchResponse(
        throttle_time=datetime.timedelta(0),
        error_code=ErrorCode.none,
        responses=(
            FetchableTopicResponse(
                topic="t",  # type: ignore[arg-type]
                partitions=(
                    PartitionData(
                        partition_index=i32(0),
                        error_code=ErrorCode.none,
                        high_watermark=i64(3),
                        aborted_transactions=None,
                        records=records,  # type: ignore[arg-type]
                    ),
                ),
            ),
        ),
    )


def test_fetch_response_parts_keep_large_records_by_reference() -> None:
    from samsa.kproto.messages import LARGE_WRITE_BYTES, encode_response_parts
    from samsa.kproto.records import decode_batches, encode_batch

    batch = encode_batch([(b"k", bytes(20_000), ())] * 2, timestamp_ms=0)
    assert len(batch) >= LARGE_WRITE_BYTES
    header = parse_request_header(_header_bytes(1, 12, 9, b"c") + b"\x00")
    segment = bytearray(b"junk" + batch + b"junk")  # records as a view into a larger buffer
    for records in (batch, memoryview(segment)[4 : 4 + len(batch)]):
        response = _fetch_response(records)
        parts = encode_response_parts(header, response)
        assert any(part is records for part in parts)  # not copied
        data = b"".join(parts)
        reference = io.BytesIO()
        reference.write(struct.pack(">i", 9) + b"\x00")
        entity_writer(type(response))(reference, _fetch_response(batch))  # type: ignore[type-var]
        assert data == struct.pack(">i", len(reference.getvalue())) + reference.getvalue()
        correlation_id, decoded = decode_response(1, 12, _unframe(data))
        assert correlation_id == 9
        fetched = decoded.responses[0].partitions[0].records
        assert [h.records_count for h, _ in decode_batches(fetched, max_decompressed_bytes=10**6)] == [2]


@pytest.mark.parametrize("code", [136, 0, 42])
def test_an_error_code_newer_than_kio_round_trips_in_unregister_controller(code: int) -> None:
    """Kafka 4.4's CONTROLLER_ID_NOT_REGISTERED (136) is not in kio 0.6.5's ErrorCode: written and read anyway."""
    from samsa.broker.wire import build

    request = build(request_class(94, 0), {"controller_id": 42})
    header = parse_request_header(memoryview(encode_request(request, correlation_id=9, client_id="t")[4:]))
    response = build(response_class(94, 0), {"throttle_time": 0, "error_code": code, "error_message": "m"})
    correlation_id, decoded = decode_response(94, 0, encode_response(header, response)[4:])
    assert correlation_id == 9
    assert (int(decoded.error_code), decoded.error_code.value, decoded.error_message) == (code, code, "m")
