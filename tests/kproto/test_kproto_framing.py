"""FrameReader: any split of the stream yields the same frames; bad sizes close the connection."""

from __future__ import annotations

import struct
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from samsa.kproto.framing import FrameError, FrameReader, frame


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    chunks = []
    previous = 0
    for point in [*points, len(data)]:
        chunks.append(data[previous:point])
        previous = point
    return chunks


@given(
    payloads=st.lists(st.binary(max_size=300), max_size=20),
    cuts=st.lists(st.integers(min_value=0, max_value=10_000), max_size=40),
)
def test_any_chunking_yields_the_same_frames(payloads: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(frame(p) for p in payloads)
    reader = FrameReader(max_frame_bytes=300)
    received = []
    for chunk in _split(stream, cuts):
        reader.feed(chunk)
        while (payload := reader.next_frame()) is not None:
            received.append(payload)
    assert received == payloads
    assert reader.buffered_bytes == 0


@given(payload=st.binary(min_size=1, max_size=50), keep=st.integers(min_value=0, max_value=53))
def test_partial_frame_is_not_returned(payload: bytes, keep: int) -> None:
    data = frame(payload)
    keep = min(keep, len(data) - 1)
    reader = FrameReader(max_frame_bytes=100)
    reader.feed(memoryview(data)[:keep])
    assert reader.next_frame() is None
    assert reader.buffered_bytes == keep
    reader.feed(bytearray(data[keep:]))
    assert reader.next_frame() == payload


def test_frame_prefix_is_big_endian_size() -> None:
    assert frame(b"abc") == b"\x00\x00\x00\x03abc"
    assert frame(b"") == b"\x00\x00\x00\x00"


def test_negative_size_is_a_frame_error() -> None:
    reader = FrameReader(max_frame_bytes=100)
    reader.feed(struct.pack(">i", -1))
    with pytest.raises(FrameError):
        reader.next_frame()


def test_oversized_frame_fails_as_soon_as_the_prefix_arrives() -> None:
    reader = FrameReader(max_frame_bytes=10)
    reader.feed(struct.pack(">i", 11))
    with pytest.raises(FrameError):
        reader.next_frame()


def test_limit_can_be_raised_after_the_first_request() -> None:
    reader = FrameReader(max_frame_bytes=10)
    reader.feed(frame(b"0123456789") + frame(b"x" * 1000))
    assert reader.next_frame() == b"0123456789"
    with pytest.raises(FrameError):
        reader.next_frame()
    reader.max_frame_bytes = 100 * 1024 * 1024
    assert reader.next_frame() == b"x" * 1000


def test_many_small_feeds_are_not_quadratic() -> None:
    # 2 MiB byte by byte into one frame, then 100k tiny frames fed in one go.
    big = frame(b"y" * (2 * 1024 * 1024))
    reader = FrameReader(max_frame_bytes=4 * 1024 * 1024)
    started = time.perf_counter()
    for i in range(0, len(big), 16):
        reader.feed(big[i : i + 16])
        assert reader.next_frame() is None or i + 16 >= len(big)
    small = frame(b"ab") * 100_000
    reader.feed(small)
    count = 0
    while reader.next_frame() is not None:
        count += 1
    elapsed = time.perf_counter() - started
    assert count == 100_000
    assert elapsed < 20.0, elapsed  # ~0.3 s alone; quadratic copying would take hours
