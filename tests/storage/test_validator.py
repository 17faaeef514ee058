"""storage.validator (Kafka's LogValidator): every probe of issue 15 part 1 and its siblings, good batches of
every codec, record_errors, timestamps, recompression to the topic's codec, and the native record walk
against the pure-Python one."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from samsa.kproto import record_scan as krecords
from samsa.kproto.batch import CorruptBatchError, parse_header
from samsa.kproto.compression import Codec
from samsa.kproto.errors import ErrorCode
from samsa.kproto.record_scan import scan_records
from samsa.kproto.records import Record, decode_batch_records, encode_batch
from samsa.storage.validator import (
    LogValidatorConfig,
    ValidatedBatch,
    ValidationFailure,
    is_large,
    validate_batch,
)

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fuzz"))
import record_corpus

NOW = 1_700_000_000_000
TOPIC_CONFIG = {
    "max.message.bytes": "1048588",
    "cleanup.policy": "delete",
    "message.timestamp.type": "CreateTime",
    "message.timestamp.before.max.ms": str(2**63 - 1),
    "message.timestamp.after.max.ms": "3600000",
    "compression.type": "producer",
    "compression.gzip.level": "-1",
    "compression.lz4.level": "9",
    "compression.zstd.level": "3",
}


def config(**overrides: str) -> LogValidatorConfig:
    return LogValidatorConfig.from_topic_config("t-0", {**TOPIC_CONFIG, **overrides}, 64 << 20)


@pytest.mark.parametrize("probe", record_corpus.PROBES, ids=lambda p: p.name)
def test_each_malformed_probe_is_refused_with_kafkas_code(probe: record_corpus.Probe) -> None:
    overrides = {"cleanup.policy": "compact"} if probe.compacted else {}
    if "too_old" in probe.name:
        overrides["message.timestamp.before.max.ms"] = str(7 * 24 * 3600 * 1000)
    result = validate_batch(probe.build(NOW), config(**overrides), NOW)
    assert isinstance(result, ValidationFailure), result
    assert result.error_code == probe.expected, result
    assert tuple(e.batch_index for e in result.record_errors) == probe.record_error_indexes


@pytest.mark.parametrize("codec", list(Codec))
def test_good_batches_pass_as_they_came(codec: Codec) -> None:
    data = encode_batch([(b"k%d" % i, b"v" * i, [("h", b"x")]) for i in range(50)], timestamp_ms=NOW,
                        compression=codec)
    result = validate_batch(data, config(), NOW)
    assert isinstance(result, ValidatedBatch) and result.records is data and not result.recompressed


def test_null_keys_are_fine_unless_compacted() -> None:
    data = encode_batch([(None, b"a", ()), (b"k", b"b", ())], timestamp_ms=NOW)
    assert isinstance(validate_batch(data, config(), NOW), ValidatedBatch)
    refused = validate_batch(data, config(**{"cleanup.policy": "compact,delete"}), NOW)
    assert isinstance(refused, ValidationFailure) and refused.error_code == ErrorCode.invalid_record
    assert [e.batch_index for e in refused.record_errors] == [0]
    assert "Compacted topic cannot accept message without key" in refused.record_errors[0].message


def test_timestamps_are_checked_per_record_not_from_the_header() -> None:
    # maxTimestamp in the header says NOW; the third record is two hours ahead.
    records = [Record(i, NOW + (2 * 3600 * 1000 if i == 2 else 0), None, b"v") for i in range(4)]
    data = bytearray(encode_batch(records, timestamp_ms=NOW))
    data[35:43] = NOW.to_bytes(8, "big")
    record_corpus.fix_crc(data)
    refused = validate_batch(bytes(data), config(), NOW)
    assert isinstance(refused, ValidationFailure) and refused.error_code == ErrorCode.invalid_timestamp
    assert [e.batch_index for e in refused.record_errors] == [2]
    assert f"should be within [{NOW - (2**63 - 1)}, {NOW + 3600000}]" in refused.record_errors[0].message
    # LogAppendTime topics do not look at the producer's timestamps at all.
    assert isinstance(validate_batch(bytes(data), config(**{"message.timestamp.type": "LogAppendTime"}), NOW),
                      ValidatedBatch)


def test_a_producer_may_not_send_log_append_time() -> None:
    data = bytearray(encode_batch([(None, b"v", ())], timestamp_ms=NOW))
    data[22] |= 0x08
    record_corpus.fix_crc(data)
    refused = validate_batch(bytes(data), config(**{"message.timestamp.type": "LogAppendTime"}), NOW)
    assert isinstance(refused, ValidationFailure) and refused.error_code == ErrorCode.invalid_timestamp


def test_batch_level_refusals() -> None:
    good = encode_batch([(None, b"v", ())], timestamp_ms=NOW)
    control = bytearray(good)
    control[22] |= 0x20
    record_corpus.fix_crc(control)
    bad_crc = bytearray(good)
    bad_crc[-1] ^= 1
    cases = {
        b"": ErrorCode.invalid_record,
        good[:40]: ErrorCode.invalid_record,
        good + good: ErrorCode.invalid_record,
        bytes(control): ErrorCode.invalid_record,
        bytes(bad_crc): ErrorCode.corrupt_message,
        encode_batch([(None, b"v", ())], timestamp_ms=NOW, base_offset=3): ErrorCode.invalid_record,
    }
    for data, code in cases.items():
        result = validate_batch(data, config(), NOW)
        assert isinstance(result, ValidationFailure) and result.error_code == code, (data[:30], result)
    big = validate_batch(encode_batch([(None, b"x" * 5000, ())], timestamp_ms=NOW),
                         config(**{"max.message.bytes": "2000"}), NOW)
    assert isinstance(big, ValidationFailure) and big.error_code == ErrorCode.message_too_large


@pytest.mark.parametrize(("topic_codec", "codec"), [("zstd", Codec.NONE), ("gzip", Codec.ZSTD),
                                                    ("uncompressed", Codec.LZ4), ("snappy", Codec.GZIP),
                                                    ("lz4", Codec.SNAPPY)])
def test_topic_compression_type_recompresses(topic_codec: str, codec: Codec) -> None:
    records = [(b"k%d" % i, b"value-%d" % i * 30, [("h", b"%d" % i)]) for i in range(40)]
    data = encode_batch(records, timestamp_ms=NOW - 5, compression=codec, producer_id=7, producer_epoch=2,
                        base_sequence=11)
    result = validate_batch(data, config(**{"compression.type": topic_codec}), NOW)
    assert isinstance(result, ValidatedBatch) and result.recompressed
    header = parse_header(result.records)
    expected = {"zstd": Codec.ZSTD, "gzip": Codec.GZIP, "uncompressed": Codec.NONE, "snappy": Codec.SNAPPY,
                "lz4": Codec.LZ4}[topic_codec]
    assert header.compression == expected
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 2, 11)
    assert (header.records_count, header.last_offset_delta) == (40, 39)
    assert [(r.offset, r.key, r.value, r.timestamp_ms) for r in
            decode_batch_records(result.records, max_decompressed_bytes=1 << 20)] == [
        (i, k, v, NOW - 5) for i, (k, v, _) in enumerate(records)]
    # The rewritten batch is itself valid (CRC included).
    again = validate_batch(result.records, config(**{"compression.type": topic_codec}), NOW)
    assert isinstance(again, ValidatedBatch) and not again.recompressed


def test_zstd_level_is_used() -> None:
    data = encode_batch([(None, bytes(range(256)) * 40, ())] * 20, timestamp_ms=NOW)
    low = validate_batch(data, config(**{"compression.type": "zstd", "compression.zstd.level": "1"}), NOW)
    high = validate_batch(data, config(**{"compression.type": "zstd", "compression.zstd.level": "19"}), NOW)
    assert isinstance(low, ValidatedBatch) and isinstance(high, ValidatedBatch)
    assert low.records != high.records


def test_is_large() -> None:
    assert not is_large(encode_batch([(None, b"v" * 1000, ())] * 100, timestamp_ms=NOW))
    assert is_large(encode_batch([(None, b"", ())] * 5000, timestamp_ms=NOW))
    assert is_large(encode_batch([(None, random.Random(1).randbytes(100_000), ())], timestamp_ms=NOW,
                                 compression=Codec.GZIP))


# --- the native walk answers exactly as the Python one ------------------------------------------------


def _outcome(fn: krecords._ScanRecords, data: bytes, count: int) -> object:
    try:
        return fn(data, 61, len(data), count)
    except CorruptBatchError as e:
        return ("error", str(e))


@pytest.mark.skipif(krecords.native_scan_records is None, reason="the C extension was not built (no compiler)")
def test_native_walk_matches_python_on_mutated_batches() -> None:
    native = krecords.native_scan_records
    assert native is not None
    rng = random.Random(15)
    seeds = [encode_batch([(rng.choice([None, b"k"]), rng.randbytes(rng.randrange(200)),
                            [("h", b"x")] * rng.randrange(3)) for _ in range(rng.randrange(1, 6))], timestamp_ms=NOW)
             for _ in range(20)]
    seeds += [p.build(NOW) for p in record_corpus.PROBES if parse_header(p.build(NOW)).compression == 0]
    checked = 0
    for case in range(20_000):
        data = rng.choice(seeds)
        section = bytearray(data[61:])
        for _ in range(rng.randrange(1, 4)):
            section = record_corpus.mutate(rng, section)
        mutated = data[:61] + bytes(section)
        count = parse_header(data).records_count + rng.choice((0, 0, 0, 1, -1))
        python = _outcome(scan_records, mutated, count)
        assert _outcome(native, mutated, count) == python, (case, mutated.hex())
        checked += 1
    assert checked == 20_000


# --- corrupt compressed payloads are refused cheaply ---------------------------------------------------


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.LZ4, Codec.ZSTD])
def test_cramjam_still_says_full_buffer_when_the_output_does_not_fit(codec: Codec) -> None:
    """validator._decompress refuses any other error on its first buffer as corrupt: if cramjam's wording
    changed, valid batches larger than the first buffer would be refused, so this pins it."""
    import cramjam

    from samsa.kproto.compression import compress
    from samsa.storage.validator import CRAMJAM_FULL_BUFFER_MESSAGE

    into = {Codec.GZIP: cramjam.gzip.decompress_into, Codec.LZ4: cramjam.lz4.decompress_into,
            Codec.ZSTD: cramjam.zstd.decompress_into}[codec]
    with pytest.raises(cramjam.DecompressionError, match=CRAMJAM_FULL_BUFFER_MESSAGE):
        into(compress(codec, bytes(1_000_000)), bytearray(65536))


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.LZ4, Codec.ZSTD, Codec.SNAPPY])
def test_corrupt_payloads_are_corrupt_message_and_big_valid_ones_pass(codec: Codec) -> None:
    rng = random.Random(int(codec))
    good = encode_batch([(None, bytes(2_000_000), ())], timestamp_ms=NOW, compression=codec)
    result = validate_batch(good, config(), NOW)  # decompresses to 2 MB: past the first buffer
    assert isinstance(result, ValidatedBatch)
    for _ in range(30):  # a stream cut short is corrupt in every codec (bytes flipped may still decode)
        body = good[61:61 + rng.randrange(1, len(good) - 61)]
        junk = record_corpus.batch(bytes(body), 1, timestamp_ms=NOW, codec=int(codec), precompressed=True)
        answer = validate_batch(junk, config(), NOW)
        assert isinstance(answer, ValidationFailure)
        assert answer.error_code in (ErrorCode.corrupt_message, ErrorCode.invalid_record)
