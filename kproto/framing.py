"""Kafka's frame layer: a 4-byte big-endian size prefix before every request and response (sans-IO)."""

from __future__ import annotations

import struct

from samsa.kproto.errors import ProtocolError

__all__ = ["SIZE_PREFIX_BYTES", "FrameBuffer", "FrameError", "FrameReader", "ReceiveBuffers", "frame"]

SIZE_PREFIX_BYTES = 4
_SIZE = struct.Struct(">i")


class FrameError(ProtocolError):
    """A negative or oversized frame size: the stream cannot be resynchronised, close the connection."""


def checked_frame_size(buf: bytes | bytearray, pos: int, max_frame_bytes: int) -> int:
    """The size prefix at `pos` (whole in `buf`), or FrameError when it is negative or over the limit."""
    (size,) = _SIZE.unpack_from(buf, pos)
    if size < 0:
        raise FrameError(f"negative frame size {size}")
    if size > max_frame_bytes:
        raise FrameError(f"frame of {size} bytes exceeds the limit of {max_frame_bytes}")
    return int(size)


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
        return checked_frame_size(self._buf, self._pos, self.max_frame_bytes)

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


# FrameBuffer: a frame up to this size gets its whole buffer as soon as its size prefix is in, so its bytes are
# received straight into place; a larger one starts at this much and doubles as its bytes arrive (4 bytes of a
# prefix cannot make us hold 100 MiB). Kafka's NetworkReceive allocates the announced size at once.
PREALLOCATE_BYTES = 4 * 1024 * 1024
# The least a connection's own buffer holds when bytes are left over from a receive (a partial frame).
MIN_OWN_BYTES = 64 * 1024


class ReceiveBuffers:
    """The buffers FrameBuffers of one event loop share: `scratch`, where every receive starts, and a few
    spare frame buffers, so a stream of large frames reuses memory rather than allocating (and zeroing,
    and faulting in) a fresh buffer per frame. Callbacks of one loop never run at once, so one set per
    loop (thread) is enough."""

    __slots__ = ("_spares", "scratch")

    SPARES = 2  # at most this many buffers, each at most PREALLOCATE_BYTES, kept besides the scratch

    def __init__(self, scratch_bytes: int) -> None:
        self.scratch = bytearray(scratch_bytes)
        self._spares: list[bytearray] = []

    def take(self, capacity: int) -> bytearray:
        """A buffer of at least `capacity` bytes (its contents are garbage)."""
        spares = self._spares
        for index, spare in enumerate(spares):
            if len(spare) >= capacity:
                return spares.pop(index)
        return bytearray(capacity)

    def give(self, buffer: bytearray) -> None:
        """`buffer` is no longer used: keep it for another frame if it is one worth keeping."""
        size = len(buffer)
        if MIN_OWN_BYTES <= size <= PREALLOCATE_BYTES:
            spares = self._spares
            if len(spares) < self.SPARES:
                spares.append(buffer)
            elif size > len(spares[0]):
                spares[0] = buffer
            spares.sort(key=len)


class FrameBuffer:
    """Splits a byte stream into frame payloads, the stream received straight into buffers it hands out
    (asyncio.BufferedProtocol: `get_buffer`, then `buffer_updated(n)`), not fed as bytes objects.

    A receive goes into the scratch buffer of `shared`, one buffer shared by every connection of the event
    loop (as uvloop reads into one buffer per loop): whole frames are copied out of it once, by `next_frame`.
    `release` must be called once the caller has taken what it will of a receive: what is left (a partial
    frame, or frames a muted connection does not take yet) moves into the connection's own buffer, sized for
    the whole frame once its size prefix is known (up to `preallocate_bytes`), and the next receives go
    straight after it, up to the frame's end. So a large frame, e.g. a Produce of 1 MiB decrypted by the TLS
    transport record by record, is received in place: no bytes object per read and no copy per append. The
    own buffer is handed back as soon as it is empty (to `shared`, which keeps a few for the next large
    frames): an idle connection holds nothing.

    A buffer handed out may still be exported (a memoryview of it) when `buffer_updated` runs, so buffers
    are never resized, only replaced or written in place.
    """

    __slots__ = ("_buf", "_end", "_pos", "_scratch", "_shared", "max_frame_bytes", "preallocate_bytes")

    def __init__(self, max_frame_bytes: int, shared: ReceiveBuffers) -> None:
        if max_frame_bytes < 0:
            raise ValueError("max_frame_bytes must be >= 0")
        self.max_frame_bytes = max_frame_bytes
        # How much of a frame's announced size may be allocated before its bytes arrive (0: grow as they do).
        self.preallocate_bytes = PREALLOCATE_BYTES
        self._shared = shared
        self._scratch = shared.scratch
        self._buf: bytearray | None = None  # holds the unread bytes _buf[_pos:_end]: the scratch or our own
        self._pos = 0
        self._end = 0

    @property
    def buffered_bytes(self) -> int:
        """Bytes received but not yet returned as part of a frame."""
        return self._end - self._pos

    def get_buffer(self) -> memoryview:
        """Where the next received bytes go (at least one byte); `buffer_updated` says how many went."""
        buf = self._buf
        if buf is None or self._pos == self._end:
            self._buf, self._pos, self._end = self._scratch, 0, 0
            return memoryview(self._scratch)
        if buf is self._scratch:  # release() was not called after the last receive: keep its bytes first
            self.release()
            buf = self._buf
            assert buf is not None
        size = self._valid_size()
        if size is not None and self._pos + SIZE_PREFIX_BYTES + size > self._end:
            # A frame not yet whole: receive up to its end only, so the next frame's bytes never have to be
            # moved out of this buffer (they start in the scratch buffer once this frame has been taken).
            whole_end = self._pos + SIZE_PREFIX_BYTES + size
            if whole_end > len(buf):
                buf = self._own(0)
                whole_end = SIZE_PREFIX_BYTES + size
            return memoryview(buf)[self._end:min(whole_end, len(buf))]
        if self._end == len(buf):
            buf = self._own(len(buf) + 1)
        return memoryview(buf)[self._end:]

    def buffer_updated(self, nbytes: int) -> None:
        self._end += nbytes

    def release(self) -> None:
        """The caller takes no more frames of this receive for now: keep what is left in our own buffer."""
        buf = self._buf
        if buf is None:
            return
        if self._pos == self._end:
            self._buf, self._pos, self._end = None, 0, 0
            if buf is not self._scratch:
                self._shared.give(buf)
        elif buf is self._scratch:
            self._own(0)

    def _own(self, at_least: int) -> bytearray:
        """Move the unread bytes to the front of our own buffer, one big enough for the frame they begin
        (as far as preallocate_bytes allows) and for `at_least` bytes."""
        buf = self._buf
        assert buf is not None
        held = self._end - self._pos
        capacity = max(MIN_OWN_BYTES, 2 * held, at_least - self._pos)
        size = self._valid_size()
        if size is not None:
            whole = SIZE_PREFIX_BYTES + size
            if whole > held:  # not yet whole: room for all of it if allowed, else grow by doubling
                capacity = max(held + 1, min(capacity if whole > self.preallocate_bytes else whole, whole))
        if buf is not self._scratch and self._pos == 0 and len(buf) >= capacity:
            return buf
        if buf is not self._scratch and len(buf) >= capacity:
            buf[:held] = buf[self._pos:self._end]  # same length: written in place, never resized
            own = buf
        else:
            own = self._shared.take(capacity)
            own[:held] = memoryview(buf)[self._pos:self._end]
            if buf is not self._scratch:
                self._shared.give(buf)
        self._buf, self._pos, self._end = own, 0, held
        return own

    def _valid_size(self) -> int | None:
        """The next frame's size if its prefix is in and acceptable (next_frame refuses a bad one)."""
        buf = self._buf
        if buf is None or self._end - self._pos < SIZE_PREFIX_BYTES:
            return None
        (size,) = _SIZE.unpack_from(buf, self._pos)
        return int(size) if 0 <= size <= self.max_frame_bytes else None

    def peek_frame_size(self) -> int | None:
        """Size of the next frame's payload once its prefix has arrived (validated like next_frame)."""
        buf = self._buf
        if buf is None or self._end - self._pos < SIZE_PREFIX_BYTES:
            return None
        return checked_frame_size(buf, self._pos, self.max_frame_bytes)

    def next_frame(self) -> bytes | None:
        """The next whole frame payload without its size prefix, or None until more is received."""
        size = self.peek_frame_size()
        if size is None:
            return None
        start = self._pos + SIZE_PREFIX_BYTES
        end = start + size
        if end > self._end:
            return None
        buf = self._buf
        assert buf is not None
        with memoryview(buf) as view, view[start:end] as part:
            payload = bytes(part)  # the one copy
        self._pos = end
        if end == self._end:
            self._pos = self._end = 0
            if buf is not self._scratch:
                self._buf = None  # an own buffer is handed back once empty
                self._shared.give(buf)
        return payload


def frame(payload: bytes | bytearray | memoryview) -> bytes:
    """Prefix `payload` with its 4-byte size."""
    return _SIZE.pack(len(payload)) + bytes(payload)
