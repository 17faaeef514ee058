"""A hypothesis state machine: appends with repeated keys and tombstones, committed and aborted transactions,
cleanings (some crashed between swap steps) at random points, close-and-reopen, against a model (issue 16).

Invariants, after every step:
- every record read back is the one the model wrote at that offset, and offsets strictly increase;
- read_committed sees each key's latest committed value, and never a record of an aborted or open transaction;
- a key whose latest committed record is a tombstone reads as absent or None, and its tombstone is gone only
  if delete.retention.ms passed since the first cleaning that could have covered it;
- right after a cleaning, nothing at or above its first uncleanable offset changed.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import hypothesis.strategies as st
from cleaner_fixtures import NOW_MS, compact_config, kv, read_all, read_committed, write_marker
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from samsa.storage import Log
from samsa.storage.cleaner import Cleaner
from samsa.storage.cleaner_manager import cleanable_range
from samsa.storage.cleaner_swap import SwapStep

RETENTION_MS = 1000
KEYS = [b"a", b"b", b"c", b"d", b"e"]
PIDS = [10, 11]


class CleanerModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="samsa-cleaner-sm-"))
        self.directory = self.tmp / "t-0"
        self.now = NOW_MS
        # offset -> (key, value, producer id of its transaction or None)
        self.records: dict[int, tuple[bytes, bytes | None, int | None]] = {}
        self.open_txn: dict[int, list[int]] = {}  # pid -> offsets of its transaction in progress
        self.aborted: set[int] = set()
        self.seq = dict.fromkeys(PIDS, 0)
        self.first_clean_ms: dict[int, int] = {}  # tombstone offset -> first cleaning that could cover it
        self.first_dirty: int | None = None
        self.counter = 0

    @initialize(segment_bytes=st.sampled_from([180, 300, 700]))
    def setup(self, segment_bytes: int) -> None:
        self.config = compact_config(segment_bytes=segment_bytes, delete_retention_ms=RETENTION_MS,
                                     index_interval_bytes=64)
        self.log = Log.open(self.directory, self.config, now_ms=self.now)

    def teardown(self) -> None:
        if hasattr(self, "log"):
            self.log.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- the model ----------------------------------------------------------------------------------------

    def _visible(self, offset: int) -> bool:
        pid = self.records[offset][2]
        return pid is None or (offset not in self.aborted and offset not in self.open_txn.get(pid, []))

    def _latest_committed(self) -> dict[bytes, tuple[int, bytes | None]]:
        """Each key's latest visible record below the last stable offset (what read_committed reaches)."""
        lso = min((offsets[0] for offsets in self.open_txn.values() if offsets), default=self.log.log_end_offset)
        out: dict[bytes, tuple[int, bytes | None]] = {}
        for offset in sorted(self.records):
            if offset < lso and self._visible(offset):
                key, value, _ = self.records[offset]
                out[key] = (offset, value)
        return out

    def _sync_hw(self) -> None:
        self.log.update_high_watermark(self.log.log_end_offset)

    # -- rules --------------------------------------------------------------------------------------------

    @rule(key=st.sampled_from(KEYS), tombstone=st.booleans(), count=st.integers(1, 3))
    def append(self, key: bytes, tombstone: bool, count: int) -> None:
        pairs = []
        for i in range(count):
            self.counter += 1
            pairs.append((KEYS[(KEYS.index(key) + i) % len(KEYS)], None if tombstone and i == 0 else
                          b"v%d" % self.counter))
        info = self.log.append_as_leader(kv(pairs, ts=self.now), leader_epoch=0, now_ms=self.now)
        for i, (k, v) in enumerate(pairs):
            self.records[info.first_offset + i] = (k, v, None)
        self._sync_hw()

    @rule(pid=st.sampled_from(PIDS), key=st.sampled_from(KEYS))
    def append_transactional(self, pid: int, key: bytes) -> None:
        self.counter += 1
        value = b"t%d" % self.counter
        info = self.log.append_as_leader(kv([(key, value)], ts=self.now, pid=pid, epoch=0, seq=self.seq[pid],
                                            txn=True), leader_epoch=0, now_ms=self.now)
        self.seq[pid] += 1
        self.records[info.first_offset] = (key, value, pid)
        self.open_txn.setdefault(pid, []).append(info.first_offset)
        self._sync_hw()

    @precondition(lambda self: any(self.open_txn.values()))
    @rule(data=st.data(), commit=st.booleans())
    def end_transaction(self, data: st.DataObject, commit: bool) -> None:
        pid = data.draw(st.sampled_from(sorted(p for p, offsets in self.open_txn.items() if offsets)))
        write_marker(self.log, pid, 0, commit=commit, ts=self.now)
        offsets = self.open_txn.pop(pid)
        if not commit:
            self.aborted.update(offsets)
        self._sync_hw()

    @rule()
    def roll(self) -> None:
        self.log.roll(self.now)

    @rule(ms=st.sampled_from([0, 300, RETENTION_MS, 3 * RETENTION_MS]))
    def advance_time(self, ms: int) -> None:
        self.now += ms

    @rule(map_slots=st.sampled_from([2, 4, 1 << 14]), stop_after=st.sampled_from([None, None, *SwapStep]),
          from_checkpoint=st.booleans())
    def clean(self, map_slots: int, stop_after: SwapStep | None, from_checkpoint: bool) -> None:
        r = cleanable_range(self.log, self.first_dirty if from_checkpoint else None, self.now)
        bound = r.first_uncleanable_offset
        for offset, (_, value, _) in self.records.items():
            if value is None and offset < bound:
                self.first_clean_ms.setdefault(offset, self.now)
        above = [(x.offset, x.key, x.value) for x in read_all(self.log) if x.offset >= bound]
        result = Cleaner(map_slots * 24).clean(self.log, r.first_dirty_offset, bound, self.now, stop_after=stop_after)
        if stop_after is not None:
            self.log.close_for_delete()  # a crash between swap steps
            self._reopen()
            self.first_dirty = None
        else:
            self.first_dirty = result.end_offset
        assert [(x.offset, x.key, x.value) for x in read_all(self.log) if x.offset >= bound] == above

    @rule()
    def close_and_reopen(self) -> None:
        self.log.close()
        self._reopen()

    def _reopen(self) -> None:
        self.log = Log.open(self.directory, self.config, now_ms=self.now)
        self._sync_hw()

    # -- invariants ---------------------------------------------------------------------------------------

    @invariant()
    def records_are_the_ones_written(self) -> None:
        if not hasattr(self, "log"):
            return
        read = read_all(self.log)
        offsets = [r.offset for r in read]
        assert offsets == sorted(set(offsets))
        for r in read:
            key, value, _ = self.records[r.offset]
            assert (r.key, r.value) == (key, value), r.offset

    @invariant()
    def read_committed_sees_the_latest_committed_values(self) -> None:
        if not hasattr(self, "log"):
            return
        seen = read_committed(self.log)
        assert all(self._visible(r.offset) for r in seen), [r.offset for r in seen if not self._visible(r.offset)]
        view: dict[bytes, tuple[int, bytes | None]] = {}
        for r in seen:
            assert r.key is not None
            view[r.key] = (r.offset, r.value)
        for key, (offset, value) in self._latest_committed().items():
            if value is not None:
                assert view.get(key) == (offset, value), key
            elif key in view:
                assert view[key] == (offset, None), key
            else:  # the tombstone is gone: only after delete.retention.ms since a cleaning covered it
                first = self.first_clean_ms.get(offset)
                assert first is not None and self.now >= first + RETENTION_MS, (key, offset)


TestCleanerModel = CleanerModel.TestCase
TestCleanerModel.settings = settings(max_examples=25, stateful_step_count=30, deadline=None,
                                     suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
