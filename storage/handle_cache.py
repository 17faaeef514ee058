"""An LRU of open file descriptors with a cap, so ten thousand partitions fit in a small `ulimit -n`.

Files are opened lazily on first use and the least recently used fd is closed when the cap is hit.
A fd handed out is therefore valid only until the next call into storage.  The lock makes `get`
safe from a flush thread, though flush opens its own fds anyway.

`releases` counts the fds that left the cache (closed, evicted or detached): a caller may keep using an
fd it got while that count is unchanged, without asking again (the append path does, to skip the lookup
and the LRU update).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from pathlib import Path

from samsa.storage.file_io import FileIO, OsFileIO

DEFAULT_MAX_OPEN_FILES = 1000


class HandleCache:
    def __init__(self, file_io: FileIO | None = None, max_open_files: int = DEFAULT_MAX_OPEN_FILES) -> None:
        assert max_open_files >= 2
        self.file_io: FileIO = file_io if file_io is not None else OsFileIO()
        self.max_open_files = max_open_files
        self._open: OrderedDict[str, tuple[int, bool]] = OrderedDict()  # path -> (fd, writable)
        self._lock = threading.Lock()
        self.opens_count = 0
        self.releases = 0  # fds closed, evicted or detached so far (see the module docstring)

    def __len__(self) -> int:
        return len(self._open)

    def get(self, path: Path, *, write: bool = False) -> int:
        key = str(path)
        entry = self._open.get(key)
        if entry is not None and (entry[1] or not write):
            try:
                self._open.move_to_end(key)  # hot path: no lock (atomic under the GIL)
                return entry[0]
            except KeyError:
                pass  # evicted by another thread meanwhile
        with self._lock:
            entry = self._open.get(key)
            if entry is not None:
                fd, writable = entry
                if writable or not write:
                    self._open.move_to_end(key)
                    return fd
                del self._open[key]
                self.releases += 1
                self.file_io.close(fd)
            while len(self._open) >= self.max_open_files:
                _, (old_fd, _) = self._open.popitem(last=False)
                self.releases += 1
                self.file_io.close(old_fd)
            fd = self.file_io.open(path, write=write)
            self.opens_count += 1
            self._open[key] = (fd, write)
            return fd

    def detach(self, path: Path) -> int | None:
        """Remove `path` from the cache without closing its fd; the caller now owns the fd."""
        with self._lock:
            entry = self._open.pop(str(path), None)
            self.releases += 1
        return entry[0] if entry is not None else None

    def close_path(self, path: Path) -> None:
        with self._lock:
            entry = self._open.pop(str(path), None)
            if entry is not None:
                self.releases += 1
                self.file_io.close(entry[0])

    def close_under(self, directory: Path) -> None:
        prefix = str(directory).rstrip("/") + "/"
        with self._lock:
            for key in [k for k in self._open if k.startswith(prefix)]:
                fd, _ = self._open.pop(key)
                self.releases += 1
                self.file_io.close(fd)

    def close_all(self) -> None:
        with self._lock:
            while self._open:
                _, (fd, _) = self._open.popitem()
                self.releases += 1
                self.file_io.close(fd)
