"""The free-disk reserve: appends are refused with KAFKA_STORAGE_ERROR before the disk fills up.

statvfs is not called on every append: the guard keeps an estimate (last reading minus bytes appended
since) and re-reads when the interval has passed or the estimate gets near the reserve.  One guard is
shared by every log of a data directory.

The metadata log writes inside the reserve (`reserve_exempt`): the reserve is there so that the control
plane keeps working — elections, broker registrations, topic deletion — while data appends are refused.
The exemption belongs to the calling thread (the metadata driver's writer), so data appends running
meanwhile on other threads are still refused.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from samsa.storage.errors import KafkaStorageError
from samsa.storage.file_io import FileIO

DEFAULT_RECHECK_INTERVAL_MS = 1000


class DiskSpaceGuard:
    def __init__(self, file_io: FileIO, path: Path, min_free_bytes: int = 0,
                 recheck_interval_ms: int = DEFAULT_RECHECK_INTERVAL_MS) -> None:
        self.file_io = file_io
        self.path = path
        self.min_free_bytes = min_free_bytes
        self.recheck_interval_ms = recheck_interval_ms
        self._estimate_bytes = -1
        self._checked_ms: int | None = None
        self._local = threading.local()

    @contextmanager
    def reserve_exempt(self) -> Iterator[None]:
        """Appends by this thread inside the block pass below the reserve (they still count in the
        estimate); a real ENOSPC still fails them."""
        before = getattr(self._local, "exempt", False)
        self._local.exempt = True
        try:
            yield
        finally:
            self._local.exempt = before

    @property
    def exempt(self) -> bool:
        return bool(getattr(self._local, "exempt", False))

    def below_reserve(self, incoming_bytes: int, now_ms: int) -> bool:
        """Whether an append of `incoming_bytes` would be refused now, from a fresh reading of the free
        space (for rare callers such as metadata writes; an unreadable disk counts as yes)."""
        self._checked_ms = None
        try:
            self._check(incoming_bytes, now_ms, 0, consume=False)
        except KafkaStorageError:
            return True
        return False

    def check(self, incoming_bytes: int, now_ms: int, min_free_bytes: int = 0) -> None:
        """Raise KafkaStorageError if appending `incoming_bytes` would go below the reserve."""
        if self.exempt:
            self._estimate_bytes -= incoming_bytes
            return
        self._check(incoming_bytes, now_ms, min_free_bytes, consume=True)

    def _check(self, incoming_bytes: int, now_ms: int, min_free_bytes: int, *, consume: bool) -> None:
        reserve = max(self.min_free_bytes, min_free_bytes)
        if reserve <= 0:
            return
        if (
            self._checked_ms is None
            or now_ms - self._checked_ms >= self.recheck_interval_ms
            or self._estimate_bytes - incoming_bytes < reserve
        ):
            try:
                self._estimate_bytes = self.file_io.disk_free_bytes(self.path)
            except OSError as e:
                raise KafkaStorageError(f"cannot read free space of {self.path}: {e}") from e
            self._checked_ms = now_ms
        if self._estimate_bytes - incoming_bytes < reserve:
            raise KafkaStorageError(
                f"free disk space {self._estimate_bytes} bytes minus {incoming_bytes} would go below the "
                f"reserve of {reserve} bytes"
            )
        if consume:
            self._estimate_bytes -= incoming_bytes
