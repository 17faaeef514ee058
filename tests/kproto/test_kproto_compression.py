"""Codecs: round trips, Kafka's exact framing, reference CLIs, truncation, and the decompression bound."""

from __future__ import annotations

import gzip
import random
import resource
import shutil
import struct
import subprocess
import time
import zlib

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from samsa.kproto.batch import CorruptBatchError
from samsa.kproto.compression import (
    LZ4_MAGIC,
    XERIAL_MAGIC,
    Codec,
    DecompressionError,
    DecompressionLimitError,
    compress,
    decompress,
)

CODECS = list(Codec)
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # kafka-python reads its JSON schemas

MiB = 1024 * 1024
GiB = 1024 * MiB


def _compressible(size: int) -> bytes:
    return (b"kafka record payload %d " * (size // 20 + 1))[:size]


@given(codec=st.sampled_from(CODECS), data=st.binary(max_size=5000))
def test_round_trip(codec: Codec, data: bytes) -> None:
    assert decompress(codec, compress(codec, data), max_bytes=len(data)) == data


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("size", [0, 1, 32 * 1024, 64 * 1024, 64 * 1024 + 1, 300_000])
def test_round_trip_across_block_boundaries(codec: Codec, size: int) -> None:
    data = _compressible(size)
    packed = compress(codec, data)
    assert decompress(codec, packed, max_bytes=size) == data
    assert decompress(codec, memoryview(packed), max_bytes=size) == data
    if size:
        with pytest.raises(DecompressionLimitError):
            decompress(codec, packed, max_bytes=size - 1)


def test_errors_are_corrupt_batch_errors() -> None:
    # the broker maps CorruptBatchError to CORRUPT_MESSAGE; a bomb is one of them
    assert issubclass(DecompressionLimitError, DecompressionError)
    assert issubclass(DecompressionError, CorruptBatchError)


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
def test_truncated_streams_are_rejected(codec: Codec) -> None:
    packed = compress(codec, _compressible(100_000))
    for cut in (1, 5, len(packed) // 2, len(packed) - 5):
        with pytest.raises(DecompressionError):
            decompress(codec, packed[:cut], max_bytes=MiB)


@pytest.mark.parametrize("codec", [Codec.GZIP, Codec.SNAPPY, Codec.LZ4, Codec.ZSTD])
@given(garbage=st.binary(max_size=200))
@settings(max_examples=50)
def test_garbage_is_a_decompression_error(codec: Codec, garbage: bytes) -> None:
    try:
        decompress(codec, garbage, max_bytes=64 * 1024)
    except DecompressionError:
        pass


def test_unknown_codec() -> None:
    with pytest.raises(DecompressionError):
        decompress(5, b"x", max_bytes=10)
    with pytest.raises(ValueError):
        compress(7, b"x")


# --- Kafka's framing ------------------------------------------------------------------------------


def test_lz4_frame_is_shaped_like_kafkas() -> None:
    packed = compress(Codec.LZ4, _compressible(200_000))
    # magic, FLG 0x60 (v01, independent blocks, no checksums/size), BD 0x40 (64 KiB), HC 0x82:
    # the same 7 bytes KafkaLZ4BlockOutputStream writes
    assert packed[:7] == LZ4_MAGIC + b"\x60\x40\x82"
    assert packed.endswith(b"\x00\x00\x00\x00")
    assert bytes(cramjam.lz4.decompress(packed)) == _compressible(200_000)


def test_lz4_incompressible_blocks_are_stored() -> None:
    data = random.Random(1).randbytes(70_000)  # two blocks, neither compressible
    packed = compress(Codec.LZ4, data)
    (first_block,) = struct.unpack_from("<I", packed, 7)
    assert first_block == 0x80000000 | 65536  # stored uncompressed, high bit set
    assert decompress(Codec.LZ4, packed, max_bytes=len(data)) == data


def test_snappy_is_written_as_xerial_and_raw_is_read() -> None:
    data = _compressible(100_000)
    packed = compress(Codec.SNAPPY, data)
    magic, version, compatible = struct.unpack_from(">8sii", packed)
    assert (magic, version, compatible) == (XERIAL_MAGIC, 1, 1)
    # blocks of 32 KiB uncompressed, like snappy-java's default
    (first_block,) = struct.unpack_from(">i", packed, 16)
    assert bytes(cramjam.snappy.decompress_raw(packed[20 : 20 + first_block])) == data[: 32 * 1024]
    # raw snappy (no xerial header) is accepted, as SnappyInputStream does
    raw = bytes(cramjam.snappy.compress_raw(data))
    assert decompress(Codec.SNAPPY, raw, max_bytes=len(data)) == data
    # an empty xerial stream is just the header
    assert compress(Codec.SNAPPY, b"") == packed[:16]
    assert decompress(Codec.SNAPPY, packed[:16], max_bytes=0) == b""


def test_snappy_xerial_matches_kafka_pythons_independent_framing(monkeypatch: pytest.MonkeyPatch) -> None:
    import types

    import kafka.codec

    shim = types.SimpleNamespace(
        compress=lambda b: bytes(cramjam.snappy.compress_raw(b)),
        decompress=lambda b: bytes(cramjam.snappy.decompress_raw(b)),
    )
    monkeypatch.setattr(kafka.codec, "snappy", shim)
    data = _compressible(100_000)
    assert kafka.codec.snappy_encode(data) == compress(Codec.SNAPPY, data)
    assert kafka.codec.snappy_decode(compress(Codec.SNAPPY, data)) == data


def test_gzip_multi_member_stream() -> None:
    data = gzip.compress(b"first ") + gzip.compress(b"second")
    assert decompress(Codec.GZIP, data, max_bytes=100) == b"first second"


@pytest.mark.parametrize(
    ("codec", "command"),
    [(Codec.LZ4, ["lz4"]), (Codec.ZSTD, ["zstd"]), (Codec.GZIP, ["gzip"])],
)
def test_reference_cli_interop(codec: Codec, command: list[str]) -> None:
    if shutil.which(command[0]) is None:
        pytest.skip(f"{command[0]} not installed")
    data = _compressible(150_000)
    theirs = subprocess.run([*command, "-c"], input=data, capture_output=True, check=True).stdout
    assert decompress(codec, theirs, max_bytes=len(data)) == data
    ours = compress(codec, data)
    back = subprocess.run([*command, "-d", "-c"], input=ours, capture_output=True, check=True).stdout
    assert back == data


# --- decompression bombs --------------------------------------------------------------------------


def _gzip_bomb(segments: int) -> bytes:
    """A valid gzip member of `segments` MiB of zeros, built from one full-flushed deflate segment."""
    deflater = zlib.compressobj(9, zlib.DEFLATED, -15)
    segment = deflater.compress(bytes(MiB)) + deflater.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    zeros = bytes(MiB)
    for _ in range(segments):
        crc = zlib.crc32(zeros, crc)
    body = segment * segments + b"\x03\x00"  # a final, empty fixed-Huffman block
    trailer = struct.pack("<II", crc, (segments * MiB) & 0xFFFFFFFF)
    return b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff" + body + trailer


def _lz4_bomb(blocks: int) -> bytes:
    block = bytes(cramjam.lz4.compress_block(bytes(64 * 1024), store_size=False))
    return LZ4_MAGIC + b"\x60\x40\x82" + (struct.pack("<I", len(block)) + block) * blocks + b"\x00\x00\x00\x00"


def _zstd_bomb(mebibytes: int) -> bytes:
    compressor = cramjam.zstd.Compressor()
    zeros = bytes(MiB)
    for _ in range(mebibytes):
        compressor.compress(zeros)
    return bytes(compressor.finish())


def test_bomb_builders_make_valid_streams() -> None:
    # the 1 GiB bombs below are these, scaled up; at 4 MiB they decompress to the zeros they claim
    assert decompress(Codec.GZIP, _gzip_bomb(4), max_bytes=4 * MiB) == bytes(4 * MiB)
    assert gzip.decompress(_gzip_bomb(4)) == bytes(4 * MiB)
    assert decompress(Codec.LZ4, _lz4_bomb(64), max_bytes=4 * MiB) == bytes(4 * MiB)
    assert decompress(Codec.ZSTD, _zstd_bomb(4), max_bytes=4 * MiB) == bytes(4 * MiB)


def _peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


@pytest.mark.parametrize(
    ("codec", "build"),
    [
        (Codec.GZIP, lambda: _gzip_bomb(1024)),
        (Codec.LZ4, lambda: _lz4_bomb(16 * 1024)),
        (Codec.ZSTD, lambda: _zstd_bomb(1024)),
    ],
)
def test_one_gib_of_zeros_is_refused_quickly_in_small_memory(codec: Codec, build: object) -> None:
    assert callable(build)
    bomb = build()
    assert len(bomb) < 8 * MiB
    peak_before = _peak_rss_bytes()
    started = time.perf_counter()
    with pytest.raises(DecompressionLimitError):
        decompress(codec, bomb, max_bytes=MiB)
    assert time.perf_counter() - started < 2.0  # ~ms alone; generous for a loaded CI box
    assert _peak_rss_bytes() - peak_before < 64 * MiB


def test_snappy_bombs_are_refused_before_allocating() -> None:
    # a raw block that declares 4 GiB - 1 of output in a few bytes
    claim = b"\xff\xff\xff\xff\x0f" + b"\x00" * 10
    with pytest.raises(DecompressionLimitError):
        decompress(Codec.SNAPPY, claim, max_bytes=MiB)
    # xerial: many blocks, each under the limit, adding up past it
    block = bytes(cramjam.snappy.compress_raw(bytes(32 * 1024)))
    stream = XERIAL_MAGIC + struct.pack(">ii", 1, 1) + (struct.pack(">i", len(block)) + block) * 64
    assert decompress(Codec.SNAPPY, stream, max_bytes=2 * MiB) == bytes(2 * MiB)
    with pytest.raises(DecompressionLimitError):
        decompress(Codec.SNAPPY, stream, max_bytes=2 * MiB - 1)


def test_uncompressed_is_bounded_too() -> None:
    with pytest.raises(DecompressionLimitError):
        decompress(Codec.NONE, b"abc", max_bytes=2)


@pytest.mark.parametrize("codec", [1, 3, 4])
def test_corrupt_data_is_refused_at_the_first_buffer(codec: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Junk is corrupt at once, not retried with ever larger buffers up to the limit (CPU with the GIL held)."""
    import cramjam

    from samsa.kproto import compression

    calls = []
    name = {1: "gzip", 3: "lz4", 4: "zstd"}[codec]
    real = getattr(cramjam, name).decompress_into

    def counting(data: object, out: bytearray) -> int:
        calls.append(len(out))
        return int(real(data, out))

    monkeypatch.setattr(getattr(cramjam, name), "decompress_into", counting)
    junk = bytes(range(256)) + b"\x00" * 144
    with pytest.raises(compression.DecompressionError):
        compression.decompress(codec, junk, 64 << 20)
    assert len(calls) == 1
