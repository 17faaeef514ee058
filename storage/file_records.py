"""Record bytes left in a segment file until they are sent: a Fetch response part that is never read whole.

Kafka's FileRecords: a Fetch response names a slice of a segment, and the network layer moves it to the
socket in bounded chunks as the socket drains (broker/connection.py says why not sendfile). So a slow
reader of a large partition holds a file descriptor, a position and at most one chunk, not the
response's bytes.

The slice owns a duplicate of the segment's descriptor: the handle cache may close or evict its own
(a descriptor it hands out is valid only until the next storage call), retention may delete the file
and the cleaner may replace it, while the open descriptor keeps the bytes readable. A truncation
below the slice (a follower truncating to its leader) makes the file shorter than the slice; the
sender then cannot finish the frame it announced and must close the connection (`read_chunk` returns
b"" there).
"""

from __future__ import annotations

import os

from samsa.storage.errors import KafkaStorageError

__all__ = ["FileRecords"]


class FileRecords:
    """`size_bytes` bytes of a file from `position`, sent front to back; `len()` is the whole size,
    so a response encoder counts it like the bytes it stands for."""

    __slots__ = ("_end", "_fd", "_next", "size_bytes")

    def __init__(self, fd: int, position: int, size_bytes: int) -> None:
        """Takes ownership of `fd` (closed by `close`)."""
        assert position >= 0 and size_bytes >= 0
        self._fd = fd
        self._next = position
        self._end = position + size_bytes
        self.size_bytes = size_bytes

    @classmethod
    def slice_of(cls, fd: int, position: int, size_bytes: int) -> FileRecords:
        """A slice of the file open at `fd` (which stays the caller's), through a descriptor of its own."""
        try:
            own = os.dup(fd)
        except OSError as e:
            raise KafkaStorageError(f"cannot hold a segment open for sending: {e}") from e
        return cls(own, position, size_bytes)

    def __len__(self) -> int:
        return self.size_bytes

    def __repr__(self) -> str:
        return f"FileRecords(size_bytes={self.size_bytes}, remaining_bytes={self.remaining_bytes})"

    @property
    def remaining_bytes(self) -> int:
        return self._end - self._next

    def read_chunk(self, max_bytes: int) -> bytes:
        """Up to `max_bytes` of what is left, and moves past them; b"" if the file ends before the slice."""
        want = min(max_bytes, self._end - self._next)
        if want <= 0 or self._fd < 0:
            return b""
        data = os.pread(self._fd, want, self._next)
        self._next += len(data)
        return data

    def read_all(self) -> bytes:
        """Everything left, in memory (for callers that need the bytes, such as in-process tests)."""
        parts = []
        while self.remaining_bytes > 0:
            chunk = self.read_chunk(self.remaining_bytes)
            if not chunk:
                raise KafkaStorageError("segment shorter than the slice read from it")
            parts.append(chunk)
        return b"".join(parts)

    def close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)

    def __del__(self) -> None:
        # A response dropped unsent (its connection closed) still gives its descriptor back.
        self.close()
