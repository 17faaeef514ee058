"""The cleaner's key -> latest offset map over the dirty part of a log, bounded in entries (Kafka's SkimpyOffsetMap).

Kafka sizes the map in bytes: each slot holds a 16-byte MD5 of the key and an 8-byte offset, 24 bytes,
so log.cleaner.dedupe.buffer.size / log.cleaner.threads bytes give that many slots, of which at most
log.cleaner.io.buffer.load.factor (0.9) are filled.  We keep the same figure as the bound on entries
(a Python dict spends more than 24 bytes per entry, but the count, and so the memory, stays bounded by the
configured budget).  Keys are stored as their MD5 digest, as in Kafka: two keys colliding is as unlikely
here as there.  When the map is full the cleaner stops mapping and cleans only up to the last offset it
mapped (`latest_offset`); the next cleaning goes on from there.

Two stores behind one class: the native OffsetTable (samsa.storage._cleaner_native, an open-addressing table
of 24-byte slots that grows up to the budget, which the cleaner's native walks fill and read without the GIL),
and a dict, the pure-Python reference (no C compiler at install, SAMSA_PURE_PYTHON=1, or native=False).
"""

from __future__ import annotations

import hashlib
import os

try:
    from samsa.storage._cleaner_native import OffsetTable
except ImportError:  # built without a C compiler
    OffsetTable = None  # type: ignore[assignment,misc]

SLOT_BYTES = 24  # Kafka: a 16-byte MD5 hash + an 8-byte offset
DEFAULT_LOAD_FACTOR = 0.9  # log.cleaner.io.buffer.load.factor


def native_available() -> bool:
    """True when the cleaner's native walks are built and not switched off (SAMSA_PURE_PYTHON=1)."""
    return OffsetTable is not None and not os.environ.get("SAMSA_PURE_PYTHON")


class OffsetMap:
    """Key digest -> the latest offset seen for it; `put` refuses new keys past `capacity`."""

    __slots__ = ("_map", "capacity", "latest_offset", "slots", "table")

    def __init__(self, memory_bytes: int, load_factor: float = DEFAULT_LOAD_FACTOR, *,
                 native: bool | None = None) -> None:
        self.slots = max(1, memory_bytes // SLOT_BYTES)
        self.capacity = max(1, int(self.slots * load_factor))
        self._map: dict[bytes, int] = {}
        use_native = native_available() if native is None else native and OffsetTable is not None
        # the native store, which the cleaner's native walks use; None: the dict
        self.table = OffsetTable(max(self.slots, self.capacity), self.capacity) if use_native else None
        self.latest_offset = -1  # every offset up to here has been mapped (Kafka's OffsetMap.latestOffset)

    @staticmethod
    def digest(key: bytes) -> bytes:
        return hashlib.md5(key, usedforsecurity=False).digest()

    def __len__(self) -> int:
        return len(self.table) if self.table is not None else len(self._map)

    @property
    def full(self) -> bool:
        return len(self) >= self.capacity

    def put(self, key: bytes, offset: int) -> bool:
        """Map `key` to `offset`; False (and nothing changed) if `key` is new and the map is full."""
        if self.table is not None:
            return self.table.put(key, offset)
        d = self.digest(key)
        m = self._map
        if d not in m and len(m) >= self.capacity:
            return False
        m[d] = offset
        return True

    def get(self, key: bytes) -> int:
        """The latest offset mapped for `key`, -1 if none."""
        if self.table is not None:
            return self.table.get(key)
        return self._map.get(self.digest(key), -1)

    def update_latest_offset(self, offset: int) -> None:
        if offset > self.latest_offset:
            self.latest_offset = offset

    def clear(self) -> None:
        if self.table is not None:
            self.table.clear()
        self._map.clear()
        self.latest_offset = -1

    @property
    def utilization(self) -> float:
        return len(self) / self.slots
