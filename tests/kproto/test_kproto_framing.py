"""FrameReader and FrameBuffer: any split of the stream yields the same frames; bad sizes close the connection."""

from __future__ import annotations

import struct
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from samsa.kproto.framing import FrameBuffer, FrameError, FrameReader, ReceiveBuffers, frame


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


# --- FrameBuffer: the stream received into the buffers it hands out (asyncio.BufferedProtocol) ----------------


def _receive(buffer: FrameBuffer, data: bytes, most: int) -> int:
    """What a transport does: ask for a buffer, write up to `most` bytes of `data` into it, report them."""
    into = buffer.get_buffer()
    assert len(into) > 0
    n = min(len(into), len(data), most)
    into[:n] = data[:n]
    into.release()
    buffer.buffer_updated(n)
    return n


@given(
    payloads=st.lists(st.binary(max_size=300), max_size=20),
    reads=st.lists(st.integers(min_value=1, max_value=700), min_size=1, max_size=40),
    muted=st.lists(st.booleans(), max_size=40),
    big=st.integers(min_value=0, max_value=3),
)
def test_frame_buffer_any_receive_sizes_and_pauses_yield_the_same_frames(
        payloads: list[bytes], reads: list[int], muted: list[bool], big: int) -> None:
    # Frames of up to 300 bytes and `big` frames larger than the scratch buffer (which is 256 bytes here); the
    # taker sometimes takes nothing after a receive (a muted connection), leaving frames for later.
    payloads = payloads + [bytes([i]) * (1000 + 300 * i) for i in range(big)]
    stream = b"".join(frame(p) for p in payloads)
    shared = ReceiveBuffers(256)
    buffer = FrameBuffer(max_frame_bytes=5000, shared=shared)
    other = FrameBuffer(max_frame_bytes=5000, shared=shared)  # shares the scratch buffer between our receives
    received: list[bytes] = []
    sent = 0
    step = 0
    while sent < len(stream) or buffer.buffered_bytes:
        if sent < len(stream):
            sent += _receive(buffer, stream[sent:], reads[step % len(reads)])
        if not (muted and muted[step % len(muted)]) or sent == len(stream):
            while (payload := buffer.next_frame()) is not None:
                received.append(payload)
        buffer.release()
        _receive(other, b"\xff" * 256, 256)  # another connection's receive overwrites the scratch
        other.release()
        step += 1
    assert received == payloads
    assert buffer.buffered_bytes == 0


def test_frame_buffer_receives_a_large_frame_in_place_up_to_its_end() -> None:
    shared = ReceiveBuffers(64)
    buffer = FrameBuffer(max_frame_bytes=10_000, shared=shared)
    data = frame(b"a" * 5000) + frame(b"next")
    sent = _receive(buffer, data, 64)
    assert buffer.next_frame() is None
    buffer.release()
    into = buffer.get_buffer()  # the rest of the frame, not beyond: the next frame starts in the scratch again
    assert len(into) == 5004 - 64
    into.release()
    sent += _receive(buffer, data[sent:], 10_000)
    assert sent == 5004
    assert buffer.next_frame() == b"a" * 5000
    buffer.release()
    _receive(buffer, data[sent:], 100)
    assert buffer.next_frame() == b"next"


def test_frame_buffer_grows_a_frame_past_the_preallocation_as_its_bytes_arrive() -> None:
    buffer = FrameBuffer(max_frame_bytes=100 * 1024 * 1024, shared=ReceiveBuffers(1024))
    buffer.preallocate_bytes = 0
    _receive(buffer, struct.pack(">i", 100 * 1024 * 1024), 4)  # 4 bytes announce 100 MiB
    buffer.release()
    assert len(buffer.get_buffer()) < 1024 * 1024  # not the announced size at once


def test_frame_buffer_refuses_a_bad_prefix_and_holds_nothing_when_empty() -> None:
    buffer = FrameBuffer(max_frame_bytes=10, shared=ReceiveBuffers(64))
    _receive(buffer, struct.pack(">i", 11), 4)
    with pytest.raises(FrameError):
        buffer.next_frame()
    empty = FrameBuffer(max_frame_bytes=10, shared=ReceiveBuffers(64))
    _receive(empty, frame(b"ok"), 64)
    assert empty.next_frame() == b"ok"
    empty.release()
    assert empty.buffered_bytes == 0 and empty._buf is None
