"""Kafka's frame layer: a 4-byte big-endian size prefix before every request and response (sans-IO)."""

from __future__ import annotations

import struct

from samsa.kproto.errors import ProtocolError

__all__ = ["SIZE_PREFIX_BYTES", "FrameError", "FrameReader", "frame"]

SIZE_PREFIX_BYTES = 4
_SIZE = struct.Struct(">i")


class FrameError(ProtocolError):
    """A negative or oversized frame size: the stream cannot be resynchronised, close the connection."""


class FrameReader:
    """Splits a byte stream, fed in arbitrary chunks, into frame payloads.

    The buffer is a bytearray with a read position; consumed bytes are dropped only once they are at
    least half the buffer, so many small feeds and many small frames both cost amortised O(n). A
    `bytes` chunk fed while nothing is buffered (the common case: a receive buffer holding whole
    frames) is kept as it is, not copied; it becomes a bytearray only if more must be appended to it.
    """

    __slots__ = ("_buf", "_pos", "max_frame_bytes")

    def __init__(self, max_frame_bytes: int) -> None:
        if max_frame_bytes < 0:
            raise ValueError("max_frame_bytes must be >= 0")
        self.max_frame_bytes = max_frame_bytes
        self._buf: bytes | bytearray = b""
        self._pos = 0

    @property
    def buffered_bytes(self) -> int:
        """Bytes fed but not yet returned as part of a frame."""
        return len(self._buf) - self._pos

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        if self._pos == len(self._buf) and type(data) is bytes:
            self._buf, self._pos = data, 0
            return
        if type(self._buf) is bytes:
            self._buf, self._pos = bytearray(memoryview(self._buf)[self._pos:]), 0
        self._buf += data  # a bytearray here

    def peek_frame_size(self) -> int | None:
        """Size of the next frame's payload once its prefix has arrived (validated like next_frame)."""
        if len(self._buf) - self._pos < SIZE_PREFIX_BYTES:
            return None
        (size,) = _SIZE.unpack_from(self._buf, self._pos)
        if size < 0:
            raise FrameError(f"negative frame size {size}")
        if size > self.max_frame_bytes:
            raise FrameError(f"frame of {size} bytes exceeds the limit of {self.max_frame_bytes}")
        return int(size)

    def next_frame(self) -> bytes | None:
        """The next whole frame payload without its size prefix, or None until more data is fed."""
        size = self.peek_frame_size()
        if size is None:
            return None
        start = self._pos + SIZE_PREFIX_BYTES
        end = start + size
        if end > len(self._buf):
            return None
        buf = self._buf
        if type(buf) is bytes:
            payload = buf[start:end]  # one copy, as below
            self._pos = end
            if end == len(buf):
                self._buf, self._pos = b"", 0
            return payload
        with memoryview(buf) as view, view[start:end] as part:
            payload = bytes(part)  # one copy; the views are released before the buffer is resized
        self._pos = end
        assert isinstance(buf, bytearray)
        if self._pos == len(buf):
            buf.clear()
            self._pos = 0
        elif self._pos >= len(buf) // 2:
            del buf[: self._pos]
            self._pos = 0
        return payload


def frame(payload: bytes | bytearray | memoryview) -> bytes:
    """Prefix `payload` with its 4-byte size."""
    return _SIZE.pack(len(payload)) + bytes(payload)
