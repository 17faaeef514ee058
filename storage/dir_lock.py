"""The `.lock` file that makes a data directory belong to one process (Kafka's FileLock on `<log.dir>/.lock`).

Two brokers on one directory would both append at the same offsets and overwrite each other's
acknowledged records; Kafka refuses to start the second ("Failed to acquire lock on file .lock").
The lock is an exclusive, non-blocking flock(2) held on an open descriptor for the broker's lifetime,
so the kernel releases it when the process dies, however it dies: no stale lock after a SIGKILL.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

LOCK_FILE_NAME = ".lock"


class DataDirLockedError(Exception):
    """Another process (or another open in this one) holds the directory's lock."""


class DataDirLock:
    """Holds `<data_dir>/.lock` until `release`; a second acquirer gets DataDirLockedError at once."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / LOCK_FILE_NAME
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise DataDirLockedError(
                f"Failed to acquire lock on file {self.path}: the data directory {data_dir} is in use by "
                f"another Samsa process{f' (pid {holder})' if holder else ''}"
            ) from None
        # The pid is only a hint for the message above; the flock is what excludes.
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd: int | None = fd

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def _read_holder(fd: int) -> str:
    try:
        return os.pread(fd, 32, 0).decode(errors="replace").strip()
    except OSError:
        return ""
