"""Record batches: round trips, Kafka's validations, and two independent oracles.

Oracles: kafka-python 3's DefaultRecordBatchBuilder / DefaultRecordBatch (pure Python, gzip and --
with a raw-snappy shim under its own xerial framing -- snappy), and Apache Kafka's kafka-clients
(MemoryRecords, the reference Kafka's version: compat-tests/KAFKA_VERSION) run through `java`, for every codec,
when java and the jars are present.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import types
from collections.abc import Sequence
from pathlib import Path

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.kproto import batch as kbatch
from samsa.kproto.batch import CorruptBatchError, iter_batches, parse_header
from samsa.kproto.compression import Codec, DecompressionError
from samsa.kproto.records import (
    ControlRecord,
    ControlType,
    Header,
    Record,
    RecordInput,
    RecordsScan,
    decode_batch_records,
    decode_batches,
    decode_control_record,
    encode_batch,
    encode_control_batch,
    scan_batch_records,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # kafka-python reads its JSON schemas

MAX = 16 * 1024 * 1024
NOW_MS = 1_700_000_000_000

headers_st = st.lists(st.tuples(st.text(max_size=10), st.one_of(st.none(), st.binary(max_size=20))), max_size=3)
record_st = st.tuples(
    st.one_of(st.none(), st.binary(max_size=40)),
    st.one_of(st.none(), st.binary(max_size=200)),
    headers_st,
)


def _expected(records: Sequence[RecordInput], base_offset: int, timestamp_ms: int) -> list[Record]:
    return [
        Record(
            base_offset + i,
            timestamp_ms,
            key,
            value,
            tuple(h if isinstance(h, Header) else Header(*h) for h in headers),
        )
        for i, (key, value, headers) in enumerate(records)
    ]


@given(
    records=st.lists(record_st, min_size=1, max_size=12),
    codec=st.sampled_from(list(Codec)),
    base_offset=st.integers(min_value=0, max_value=2**62),
    timestamp_ms=st.integers(min_value=-1, max_value=2**50),
)
def test_round_trip(records: list[RecordInput], codec: Codec, base_offset: int, timestamp_ms: int) -> None:
    data = encode_batch(records, base_offset=base_offset, timestamp_ms=timestamp_ms, compression=codec)
    [(position, header)] = list(iter_batches(data))  # CRC checked
    assert position == 0 and header.size_bytes == len(data)
    assert header.compression == codec
    assert header.records_count == len(records)
    assert header.last_offset_delta == len(records) - 1
    assert header.base_timestamp == header.max_timestamp == timestamp_ms
    assert decode_batch_records(data, max_decompressed_bytes=MAX) == _expected(records, base_offset, timestamp_ms)


@given(
    deltas=st.lists(
        st.tuples(st.integers(min_value=0, max_value=1000), st.integers(min_value=-(10**6), max_value=10**6)),
        min_size=1,
        max_size=10,
    )
)
def test_record_values_keep_their_offsets_and_timestamps(deltas: list[tuple[int, int]]) -> None:
    # offsets may have gaps (compaction); timestamps may go backwards (negative deltas)
    offset = 500
    records = []
    for gap, ts_delta in deltas:
        records.append(Record(offset, NOW_MS + ts_delta, b"k", b"v", (Header("h", b"x"),)))
        offset += gap + 1
    data = encode_batch(records, base_offset=500, timestamp_ms=0, compression=Codec.ZSTD)
    header = parse_header(data)
    assert header.base_timestamp == records[0].timestamp_ms
    assert header.max_timestamp == max(r.timestamp_ms for r in records)
    assert header.last_offset == records[-1].offset
    assert decode_batch_records(data, max_decompressed_bytes=MAX) == records


def test_producer_fields_and_attributes() -> None:
    data = encode_batch(
        [(b"k", b"v", [("a", None)]), (None, None, ())],
        base_offset=7,
        timestamp_ms=NOW_MS,
        compression=Codec.LZ4,
        producer_id=99,
        producer_epoch=3,
        base_sequence=2**31 - 1,
        is_transactional=True,
        partition_leader_epoch=12,
    )
    header = parse_header(data)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (99, 3, 2**31 - 1)
    assert header.is_transactional and not header.is_control
    assert header.partition_leader_epoch == 12
    assert header.last_sequence == 0  # wraps like Kafka's DefaultRecordBatch


def test_empty_batch() -> None:
    data = encode_batch([], timestamp_ms=NOW_MS)
    header = parse_header(data)
    assert header.records_count == 0
    assert decode_batch_records(data, max_decompressed_bytes=MAX) == []


def test_leader_rewrites_keep_the_batch_valid() -> None:
    data = bytearray(encode_batch([(b"k", b"v", ())] * 3, timestamp_ms=NOW_MS, compression=Codec.GZIP))
    kbatch.stamp_batch(data, 0, 1000, 4)
    records = decode_batch_records(data, max_decompressed_bytes=MAX)  # CRC checked
    assert [r.offset for r in records] == [1000, 1001, 1002]
    assert parse_header(data).partition_leader_epoch == 4
    kbatch.stamp_batch(data, 0, 1000, 4, NOW_MS + 5)
    # LogAppendTime: every record reports the batch's max timestamp, as Kafka's DefaultRecordBatch does
    assert {r.timestamp_ms for r in decode_batch_records(data, max_decompressed_bytes=MAX)} == {NOW_MS + 5}
    # a header stamped apart from its body gets the same CRC as the whole batch stamped in place
    header = bytearray(data[:kbatch.BATCH_HEADER_BYTES])
    kbatch.stamp_batch(header, 0, 7, 9, NOW_MS + 6, body=memoryview(data)[kbatch.BATCH_HEADER_BYTES:])
    kbatch.stamp_batch(data, 0, 7, 9, NOW_MS + 6)
    assert header == data[:kbatch.BATCH_HEADER_BYTES]
    assert kbatch.is_crc_valid(data, parse_header(data))


def test_decode_batches_iterates_and_may_skip_a_partial_tail() -> None:
    first = encode_batch([(b"a", b"1", ())], base_offset=0, timestamp_ms=NOW_MS)
    second = encode_batch([(b"b", b"2", ()), (b"c", b"3", ())], base_offset=1, timestamp_ms=NOW_MS, compression=2)
    stream = first + second
    assert [[r.offset for r in records] for _, records in decode_batches(stream, max_decompressed_bytes=MAX)] == [
        [0],
        [1, 2],
    ]
    for cut in (len(first) + 5, len(first) + 20, len(stream) - 1):
        with pytest.raises(CorruptBatchError):
            list(decode_batches(stream[:cut], max_decompressed_bytes=MAX))
        partial = list(decode_batches(stream[:cut], max_decompressed_bytes=MAX, allow_partial_tail=True))
        assert [h.base_offset for h, _ in partial] == [0]


def test_scan_reports_what_a_leader_validates() -> None:
    records = [
        Record(10, NOW_MS + 5, b"a", b"1"),
        Record(11, NOW_MS + 9, None, b"2"),
        Record(13, NOW_MS + 9, b"c", None),  # a gap: offsets not contiguous
    ]
    scan = scan_batch_records(
        encode_batch(records, base_offset=10, timestamp_ms=0, compression=Codec.SNAPPY), max_decompressed_bytes=MAX
    )
    assert scan == RecordsScan(
        count=3,
        max_timestamp_ms=NOW_MS + 9,
        offset_of_max_timestamp=11,
        offsets_contiguous=False,
        has_null_key=True,
        min_timestamp_ms=NOW_MS + 5,
    )
    scan = scan_batch_records(encode_batch([(b"k", b"v", ())] * 4, timestamp_ms=NOW_MS), max_decompressed_bytes=MAX)
    assert (scan.count, scan.offsets_contiguous, scan.has_null_key) == (4, True, False)
    assert (scan.max_timestamp_ms, scan.offset_of_max_timestamp) == (NOW_MS, 0)


# --- validation -----------------------------------------------------------------------------------


def _rebuild(header_fields: dict[str, int], body: bytes, attributes: int = 0) -> bytes:
    """A batch with a hand-made records section and a correct CRC."""
    data = bytearray(
        struct.pack(
            ">qiibIhiqqqhii",
            0,
            61 + len(body) - 12,
            -1,
            2,
            0,
            attributes,
            header_fields.get("last_offset_delta", 0),
            NOW_MS,
            NOW_MS,
            -1,
            -1,
            -1,
            header_fields.get("records_count", 1),
        )
        + body
    )
    struct.pack_into(">I", data, 17, kbatch.compute_crc(data, 0, len(data)))
    return bytes(data)


def _record_body(fields: bytes) -> bytes:
    return bytes([len(fields) << 1]) + fields  # zigzag length, short records only


@pytest.mark.parametrize(
    ("body", "count"),
    [
        (_record_body(b"\x00\x00\x00\x01\x01\x00"), 2),  # one record, count says two
        (_record_body(b"\x00\x00\x00\x01\x01\x00") + b"\x00", 1),  # trailing byte after the records
        (_record_body(b"\x00\x00\x00\x01\x01\x00\x00"), 1),  # fields shorter than the record length
        (_record_body(b"\x00\x00\x00\x01\x01"), 1),  # header count missing
        (_record_body(b"\x00\x00\x00\x01\x01\x01"), 1),  # header count -1
        (_record_body(b"\x00\x00\x00\x01\x01\x02\x01\x01"), 1),  # null header key
        (_record_body(b"\x00\x00\x00\x02\xff\xfe\x01\x00"), 1),  # key is 1 byte but 2 declared...
        (_record_body(b"\x00\x00\x00\x10ab\x01\x00"), 1),  # key length 8, only a few bytes
        (_record_body(b"\x00\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01\x00\x01\x01\x00"), 1),  # 11-byte varlong
        (_record_body(b"\x00\x00\xff\xff\xff\xff\xff\x01\x01\x01\x00"), 1),  # 6-byte varint
        (b"\x80", 1),  # truncated record length
        (b"\x7f", 1),  # negative record length
    ],
)
def test_malformed_records_are_corrupt(body: bytes, count: int) -> None:
    with pytest.raises(CorruptBatchError):
        decode_batch_records(_rebuild({"records_count": count}, body), max_decompressed_bytes=MAX)


def test_well_formed_hand_made_record_decodes() -> None:
    # the same builder, with a valid record, so the cases above fail for the reason they name
    data = _rebuild({"records_count": 1}, _record_body(b"\x00\x00\x00\x04ab\x01\x02\x02h\x01"))
    assert decode_batch_records(data, max_decompressed_bytes=MAX) == [
        Record(0, NOW_MS, b"ab", None, (Header("h", None),))
    ]


def test_header_key_that_is_not_utf8_is_replaced_like_kafka_does() -> None:
    data = _rebuild({"records_count": 1}, _record_body(b"\x00\x00\x00\x01\x01\x02\x04\xff\xfe\x01"))
    [record] = decode_batch_records(data, max_decompressed_bytes=MAX)
    assert record.headers == (Header("\ufffd\ufffd", None),)


def test_crc_mismatch() -> None:
    data = bytearray(encode_batch([(b"k", b"value", ())], timestamp_ms=NOW_MS))
    data[data.index(b"value") + 4] ^= 0x03
    with pytest.raises(CorruptBatchError, match="CRC"):
        decode_batch_records(data, max_decompressed_bytes=MAX)
    assert decode_batch_records(data, max_decompressed_bytes=MAX, verify_crc=False)[0].value == b"valuf"


@given(records=st.lists(record_st, min_size=1, max_size=5), flips=st.lists(st.integers(min_value=0), max_size=4))
@settings(max_examples=200)
def test_damaged_records_with_a_valid_crc_never_escape_as_other_errors(
    records: list[RecordInput], flips: list[int]
) -> None:
    data = bytearray(encode_batch(records, timestamp_ms=NOW_MS))
    for flip in flips:
        position = 61 + flip % (len(data) - 61)
        data[position] = (data[position] + 1 + flip) % 256
    struct.pack_into(">I", data, 17, kbatch.compute_crc(data, 0, len(data)))
    try:
        decoded = decode_batch_records(data, max_decompressed_bytes=MAX)
    except CorruptBatchError:
        with pytest.raises(CorruptBatchError):  # the scan refuses exactly what decoding refuses
            scan_batch_records(data, max_decompressed_bytes=MAX)
    else:
        scan = scan_batch_records(data, max_decompressed_bytes=MAX)
        assert scan.count == len(decoded)
        assert scan.has_null_key == any(r.key is None for r in decoded)


def test_decompressed_size_is_bounded() -> None:
    data = encode_batch([(None, bytes(100_000), ())], timestamp_ms=NOW_MS, compression=Codec.ZSTD)
    assert len(data) < 1000
    with pytest.raises(DecompressionError):
        decode_batch_records(data, max_decompressed_bytes=50_000)
    assert decode_batch_records(data, max_decompressed_bytes=200_000)[0].value == bytes(100_000)


# --- control records ------------------------------------------------------------------------------


@pytest.mark.parametrize("control_type", [ControlType.COMMIT, ControlType.ABORT])
def test_control_batch(control_type: ControlType) -> None:
    data = encode_control_batch(
        control_type, producer_id=5, producer_epoch=2, coordinator_epoch=9, timestamp_ms=NOW_MS, base_offset=40
    )
    header = parse_header(data)
    assert header.is_control and header.is_transactional
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (5, 2, -1)
    [record] = decode_batch_records(data, max_decompressed_bytes=MAX)
    assert record.offset == 40
    assert record.key == struct.pack(">hh", 0, control_type)
    assert record.value == struct.pack(">hi", 0, 9)
    assert decode_control_record(record) == ControlRecord(control_type, 0, 9)


def test_control_record_validation() -> None:
    with pytest.raises(CorruptBatchError):
        decode_control_record(Record(0, 0, b"\x00", None, ()))
    with pytest.raises(CorruptBatchError):
        decode_control_record(Record(0, 0, b"\x00\x00\x00\x01", b"\x00\x00", ()))
    # other control types (KRaft's) are returned with their type and no coordinator epoch
    assert decode_control_record(Record(0, 0, b"\x00\x00\x00\x02", b"whatever", ())) == ControlRecord(2, 0, None)


# --- oracle: kafka-python -------------------------------------------------------------------------


@pytest.fixture
def kafka_python_snappy(monkeypatch: pytest.MonkeyPatch) -> None:
    """kafka-python's own xerial framing over cramjam's raw snappy (python-snappy is not installed)."""
    import kafka.codec

    shim = types.SimpleNamespace(
        compress=lambda b: bytes(cramjam.snappy.compress_raw(b)),
        decompress=lambda b: bytes(cramjam.snappy.decompress_raw(b)),
    )
    monkeypatch.setattr(kafka.codec, "snappy", shim)


@pytest.mark.usefixtures("kafka_python_snappy")
@given(records=st.lists(record_st, min_size=1, max_size=8), codec=st.sampled_from([0, 1, 2]))
@settings(max_examples=60)
def test_kafka_python_batches_decode(records: list[RecordInput], codec: int) -> None:
    from kafka.record.default_records import DefaultRecordBatchBuilder

    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=False, producer_id=-1, producer_epoch=-1,
        base_sequence=-1, batch_size=10**7,
    )  # fmt: skip
    for offset, (key, value, headers) in enumerate(records):
        builder.append(offset, timestamp=NOW_MS + offset, key=key, value=value, headers=list(headers))
    data = bytes(builder.build())
    decoded = decode_batch_records(data, max_decompressed_bytes=MAX)
    assert [(r.offset, r.timestamp_ms, r.key, r.value, r.headers) for r in decoded] == [
        (i, NOW_MS + i, key, value, tuple(Header(*h) for h in headers))
        for i, (key, value, headers) in enumerate(records)
    ]


@pytest.mark.usefixtures("kafka_python_snappy")
@given(records=st.lists(record_st, min_size=1, max_size=8), codec=st.sampled_from([0, 1, 2]))
@settings(max_examples=60)
def test_our_batches_read_by_kafka_python(records: list[RecordInput], codec: int) -> None:
    from kafka.record.default_records import DefaultRecordBatch

    data = encode_batch(records, base_offset=10, timestamp_ms=NOW_MS, compression=codec, producer_id=1,
                        producer_epoch=0, base_sequence=0)  # fmt: skip
    theirs = DefaultRecordBatch(bytearray(data))
    assert theirs.validate_crc()
    assert theirs.compression_type == codec
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in theirs] == [
        (10 + i, NOW_MS, key, value, [tuple(h) for h in headers]) for i, (key, value, headers) in enumerate(records)
    ]


# --- oracle: Apache Kafka's kafka-clients ---------------------------------------------------------

_ORACLE = Path(__file__).parent / "oracle" / "RecordsOracle.java"
_BIG = b"abcdefgh" * 20000
# the records RecordsOracle.java builds; ours must decode Kafka's and Kafka must read ours the same
_ORACLE_RECORDS = [
    Record(100, 1700000000000, b"k0", b"v0", (Header("h1", b"hv"), Header("h2", None))),
    Record(101, 1700000000005, None, b"v1"),
    Record(102, 1699999999990, b"k2", None),
    Record(103, 1700000000010, b"big", _BIG, (Header("\u00fc-key", b"\x00\xff"),)),
]


def _kafka_jars() -> str | None:
    """kafka-clients and its codecs: the Java client's jars, else the reference broker's (make compat-deps)."""
    compat = Path(__file__).resolve().parents[2] / "compat-tests"
    for lib in (compat / "java" / "target" / "lib", compat / "oracle" / "lib"):
        if any(lib.glob("kafka-clients-*.jar")):
            return str(lib / "*")
    return None


def _oracle_lines(records: Sequence[Record], codec: int) -> list[str]:
    lines = [
        f"batch 100 103 4 {codec} false false 1234 5 42 {max(r.timestamp_ms for r in records)}",
    ]
    for r in records:
        line = f"record {r.offset} {r.timestamp_ms} {r.key.hex() if r.key is not None else '-'} "
        line += f"{r.value.hex() if r.value is not None else '-'} {len(r.headers)}"
        for h in r.headers:
            line += f" {h.key.encode().hex()} {h.value.hex() if h.value is not None else '-'}"
        lines.append(line)
    return lines


@pytest.mark.skipif(shutil.which("java") is None, reason="java not installed")
def test_apache_kafka_reads_ours_and_we_read_apache_kafkas(tmp_path: Path) -> None:
    classpath = _kafka_jars()
    if classpath is None:
        pytest.skip("kafka-clients jars not present (make compat-deps)")
    ours = []
    for codec in Codec:
        path = tmp_path / f"ours-{codec.value}.bin"
        batch = encode_batch(
            _ORACLE_RECORDS,
            base_offset=100,
            timestamp_ms=0,
            compression=codec,
            producer_id=1234,
            producer_epoch=5,
            base_sequence=42,
            partition_leader_epoch=7,
        )
        path.write_bytes(batch)
        ours.append(str(path))
    kafka_dir = tmp_path / "kafka"
    kafka_dir.mkdir()
    java = ["java", "-Xshare:auto", "-XX:TieredStopAtLevel=1", "-cp", classpath, str(_ORACLE)]
    out = subprocess.run(
        [*java, "write", str(kafka_dir), "read", *ours], check=True, capture_output=True, text=True, timeout=120
    )
    expected = [line for codec in Codec for line in _oracle_lines(_ORACLE_RECORDS, codec)]
    assert out.stdout.splitlines() == expected

    for codec, name in zip(Codec, ["none", "gzip", "snappy", "lz4", "zstd"], strict=True):
        data = (kafka_dir / f"{name}.bin").read_bytes()
        [(header, records)] = list(decode_batches(data, max_decompressed_bytes=MAX))
        assert header.compression == codec
        assert (header.producer_id, header.producer_epoch, header.base_sequence) == (1234, 5, 42)
        assert header.partition_leader_epoch == 7
        assert records == _ORACLE_RECORDS
