"""The file interface storage does all its I/O through: the OS implementation and a fault-injecting one.

Everything is fd based (pread/pwrite at explicit positions) so segments never depend on a shared
file position and the fd of a segment can be handed to the broker for sendfile.

`FaultyFileIO` runs on a real directory but remembers, per file, the bytes that were durable at the
last fsync.  `power_loss(rng)` then does what a power cut may do to a file: keep the durable bytes,
keep a random part of the unsynced tail and append random garbage.  It can also refuse writes past a
byte budget (ENOSPC, with a torn partial write), fail the next write with EIO, and report a made-up
free-disk figure.
"""

from __future__ import annotations

import errno
import os
import random
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

Buffer = bytes | bytearray | memoryview


class FileIO(Protocol):
    def open(self, path: Path, *, write: bool) -> int:
        """Open `path`; with write=True create it if missing (never truncates)."""
        ...

    def close(self, fd: int) -> None: ...

    def pread(self, fd: int, size: int, position: int) -> bytes: ...

    def pwrite(self, fd: int, data: Buffer, position: int) -> None:
        """Write all of `data` at `position` or raise OSError."""
        ...

    def pwritev(self, fd: int, buffers: Sequence[Buffer], position: int) -> None: ...

    def fsync(self, fd: int) -> None: ...

    def ftruncate(self, fd: int, size: int) -> None: ...

    def fsize(self, fd: int) -> int: ...

    def size(self, path: Path) -> int:
        """Size of the file at `path`, -1 if it does not exist."""
        ...

    def mtime_ms(self, path: Path) -> int: ...

    def listdir(self, path: Path) -> list[str]: ...

    def mkdir(self, path: Path) -> None: ...

    def rename(self, src: Path, dst: Path) -> None: ...

    def unlink(self, path: Path) -> None:
        """Remove a file; no error if it is already gone."""
        ...

    def rmtree(self, path: Path) -> None: ...

    def fsync_dir(self, path: Path) -> None: ...

    def disk_free_bytes(self, path: Path) -> int: ...

    def read_file(self, path: Path) -> bytes | None:
        """Whole content of a small file, None if it does not exist."""
        ...

    def write_file_atomic(self, path: Path, data: bytes, *, sync: bool = True) -> None:
        """Replace `path` with `data` via a temporary file and a rename (fsynced when sync)."""
        ...


class OsFileIO:
    """The real thing: thin wrappers over os.*."""

    def open(self, path: Path, *, write: bool) -> int:
        if write:
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        return os.open(path, os.O_RDONLY | os.O_CLOEXEC)

    def close(self, fd: int) -> None:
        os.close(fd)

    def pread(self, fd: int, size: int, position: int) -> bytes:
        return os.pread(fd, size, position)

    def pwrite(self, fd: int, data: Buffer, position: int) -> None:
        written = os.pwrite(fd, data, position)
        if written == len(data):
            return
        view = memoryview(data)[written:]
        position += written
        while view:
            written = os.pwrite(fd, view, position)
            view = view[written:]
            position += written

    def pwritev(self, fd: int, buffers: Sequence[Buffer], position: int) -> None:
        total = sum(map(len, buffers))
        written = os.pwritev(fd, buffers, position)
        if written < total:  # short write (signal, nearly full disk): finish it piecewise
            self.pwrite(fd, b"".join(bytes(b) for b in buffers)[written:], position + written)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def ftruncate(self, fd: int, size: int) -> None:
        os.ftruncate(fd, size)

    def fsize(self, fd: int) -> int:
        return os.fstat(fd).st_size

    def size(self, path: Path) -> int:
        try:
            return os.stat(path).st_size
        except FileNotFoundError:
            return -1

    def mtime_ms(self, path: Path) -> int:
        return os.stat(path).st_mtime_ns // 1_000_000

    def listdir(self, path: Path) -> list[str]:
        return os.listdir(path)

    def mkdir(self, path: Path) -> None:
        os.makedirs(path, exist_ok=True)

    def rename(self, src: Path, dst: Path) -> None:
        os.rename(src, dst)

    def unlink(self, path: Path) -> None:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass

    def rmtree(self, path: Path) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def fsync_dir(self, path: Path) -> None:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def disk_free_bytes(self, path: Path) -> int:
        st = os.statvfs(path)
        return st.f_bavail * st.f_frsize

    def read_file(self, path: Path) -> bytes | None:
        try:
            with open(path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def write_file_atomic(self, path: Path, data: bytes, *, sync: bool = True) -> None:
        tmp = path.with_name(path.name + ".tmp")
        fd = self.open(tmp, write=True)
        try:
            self.ftruncate(fd, 0)
            self.pwrite(fd, data, 0)
            if sync:
                self.fsync(fd)
        finally:
            self.close(fd)
        self.rename(tmp, path)
        if sync:
            self.fsync_dir(path.parent)


def raw_pwrite(file_io: FileIO) -> Callable[[int, Buffer, int], int] | None:
    """os.pwrite itself if `file_io.pwrite` is OsFileIO's (not overridden), else None.

    For the append path, which saves a Python call per write this way: it checks the count returned and
    finishes a short write with file_io.pwrite.  Any other FileIO (fault injection) is always called.
    """
    return os.pwrite if getattr(type(file_io), "pwrite", None) is OsFileIO.pwrite else None


class FaultyFileIO(OsFileIO):
    """OsFileIO that remembers what was fsynced and can simulate power loss, full disks and I/O errors."""

    def __init__(self) -> None:
        self._fd_paths: dict[int, str] = {}
        self.durable: dict[str, bytes] = {}  # path -> content at last fsync
        self.write_budget_bytes: int | None = None  # None: unlimited; else ENOSPC once exhausted
        self.free_bytes: int | None = None  # what disk_free_bytes reports, None: the real figure
        self.fail_next_write = False
        self.fail_fsync = False
        self.written_bytes = 0
        self.fsync_count = 0

    def _track(self, path: str) -> None:
        if path not in self.durable:
            # a file we have not seen: whatever is on disk now counts as durable
            try:
                with open(path, "rb") as f:
                    self.durable[path] = f.read()
            except FileNotFoundError:
                self.durable[path] = b""

    def open(self, path: Path, *, write: bool) -> int:
        self._track(str(path))
        fd = super().open(path, write=write)
        self._fd_paths[fd] = str(path)
        return fd

    def close(self, fd: int) -> None:
        self._fd_paths.pop(fd, None)
        super().close(fd)

    def _charge(self, size: int) -> int:
        if self.fail_next_write:
            self.fail_next_write = False
            raise OSError(errno.EIO, "injected I/O error")
        if self.write_budget_bytes is None:
            return size
        allowed = min(size, self.write_budget_bytes)
        self.write_budget_bytes -= allowed
        return allowed

    def pwrite(self, fd: int, data: Buffer, position: int) -> None:
        allowed = self._charge(len(data))
        super().pwrite(fd, memoryview(data)[:allowed], position)
        self.written_bytes += allowed
        if allowed < len(data):
            raise OSError(errno.ENOSPC, "injected: no space left on device")

    def pwritev(self, fd: int, buffers: Sequence[Buffer], position: int) -> None:
        self.pwrite(fd, b"".join(bytes(b) for b in buffers), position)

    def fsync(self, fd: int) -> None:
        if self.fail_fsync:
            raise OSError(errno.EIO, "injected fsync failure")
        super().fsync(fd)
        self.fsync_count += 1
        path = self._fd_paths.get(fd)
        if path is not None:
            size = os.fstat(fd).st_size
            self.durable[path] = os.pread(fd, size, 0) if size else b""

    def rename(self, src: Path, dst: Path) -> None:
        super().rename(src, dst)
        # renames are modelled as durable at once (write_file_atomic fsyncs the data before renaming)
        if str(src) in self.durable:
            self.durable[str(dst)] = self.durable.pop(str(src))
        for fd, p in self._fd_paths.items():
            if p == str(src):
                self._fd_paths[fd] = str(dst)

    def unlink(self, path: Path) -> None:
        super().unlink(path)
        self.durable.pop(str(path), None)

    def rmtree(self, path: Path) -> None:
        super().rmtree(path)
        prefix = str(path) + os.sep
        for p in [p for p in self.durable if p.startswith(prefix)]:
            del self.durable[p]

    def disk_free_bytes(self, path: Path) -> int:
        if self.free_bytes is not None:
            return self.free_bytes
        return super().disk_free_bytes(path)

    def write_file_atomic(self, path: Path, data: bytes, *, sync: bool = True) -> None:
        super().write_file_atomic(path, data, sync=sync)
        if not sync:
            self._track(str(path))

    def power_loss(self, rng: random.Random, *, max_garbage_bytes: int = 64) -> list[str]:
        """Close every fd this object opened, then damage each file's unsynced part as a power cut may.

        Each tracked file keeps its longest prefix shared with the durable copy, plus a random part of
        the rest, plus (sometimes) random garbage.  Returns the paths that changed.
        """
        for fd in list(self._fd_paths):
            self.close(fd)
        changed = []
        for path, durable in sorted(self.durable.items()):
            try:
                with open(path, "rb") as f:
                    current = f.read()
            except FileNotFoundError:
                continue
            if current == durable:
                continue
            common = 0
            limit = min(len(current), len(durable))
            while common < limit and current[common] == durable[common]:
                common += 1
            if len(current) < len(durable) and common == len(current):
                kept = durable  # an unsynced truncation may be undone
            else:
                cut = rng.randint(common, len(current))
                kept = current[:cut]
            if rng.random() < 0.5:
                kept += rng.randbytes(rng.randint(1, max_garbage_bytes))
            with open(path, "wb") as f:
                f.write(kept)
            self.durable[path] = kept
            changed.append(path)
        return changed
