"""A hypothesis state machine driving Log against a plain in-memory model of batches."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule
from storage_batches import NOW_MS, decode_values, make_batch

from samsa.kproto.batch import iter_batches
from samsa.storage import HandleCache, Log, LogConfig, OffsetOutOfRangeError


class LogModel(RuleBasedStateMachine):
    """Model: a list of batches (base offset, values, timestamp), a log start and a high watermark."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="samsa-sm-"))
        self.directory = self.tmp / "t-0"
        self.batches: list[tuple[int, list[bytes], int]] = []
        self.log_start = 0
        self.leo = 0
        self.hw = 0
        self.now_ms = NOW_MS
        self.epoch = 0
        self.counter = 0

    @initialize(segment_bytes=st.sampled_from([200, 500, 2000]), index_interval=st.sampled_from([1, 60, 4096]),
                index_bytes=st.sampled_from([24, 120, 10 << 20]), max_open=st.sampled_from([2, 3, 1000]))
    def setup(self, segment_bytes: int, index_interval: int, index_bytes: int, max_open: int) -> None:
        self.config = LogConfig(segment_bytes=segment_bytes, index_interval_bytes=index_interval,
                                segment_index_bytes=index_bytes, retention_ms=-1, file_delete_delay_ms=0)
        self.max_open = max_open
        self.cache = HandleCache(max_open_files=max_open)
        self.log = Log.open(self.directory, self.config, now_ms=self.now_ms, handle_cache=self.cache)

    def teardown(self) -> None:
        if hasattr(self, "log"):
            self.log.close()
            self.cache.close_all()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- helpers ------------------------------------------------------------------------------------------

    def _records_from(self, offset: int) -> list[tuple[int, bytes]]:
        out = []
        for base, vals, _ in self.batches:
            if base + len(vals) - 1 >= offset:
                out.extend((base + i, v) for i, v in enumerate(vals))
        return out

    # -- rules --------------------------------------------------------------------------------------------

    @rule(n=st.integers(1, 6), size=st.integers(0, 80), as_bytearray=st.booleans(), new_epoch=st.booleans())
    def append(self, n: int, size: int, as_bytearray: bool, new_epoch: bool) -> None:
        if new_epoch:
            self.epoch += 1
        vals = [f"{self.counter}-{i}".encode() + b"x" * size for i in range(n)]
        self.counter += 1
        self.now_ms += 1
        batch = make_batch(vals, base_timestamp=self.now_ms, base_offset=999)
        info = self.log.append_as_leader(bytearray(batch) if as_bytearray else batch, leader_epoch=self.epoch,
                                         now_ms=self.now_ms)
        assert (info.first_offset, info.last_offset) == (self.leo, self.leo + n - 1)
        self.batches.append((self.leo, vals, self.now_ms))
        self.leo += n

    @rule(pick=st.integers(0, 1 << 16), max_bytes=st.integers(0, 3000), bounded=st.booleans())
    def read(self, pick: int, max_bytes: int, bounded: bool) -> None:
        offset = _between(pick, self.log_start, self.leo)
        max_offset = self.hw if bounded else None
        info = self.log.read(offset, max_bytes=max_bytes, max_offset=max_offset)
        got = decode_values(info.read_bytes())
        limit = self.hw if bounded else self.leo
        expected = [r for r in self._records_from(offset) if r[0] < limit]
        if not got:
            # nothing only when no whole batch holding `offset` lies below the limit
            holding = [b for b in self.batches if b[0] + len(b[1]) - 1 >= offset]
            assert not holding or holding[0][0] + len(holding[0][1]) > limit or offset >= limit
            return
        assert got == expected[: len(got)]
        holding = next(b for b in self.batches if b[0] + len(b[1]) - 1 >= offset)
        assert got[0][0] == holding[0]  # starts with the batch holding the fetch offset
        assert got[-1][0] < limit
        assert info.first_offset == got[0][0]
        batches = list(iter_batches(info.read_bytes()))
        assert info.size_bytes <= max_bytes or len(batches) == 1
        if len(expected) > len(got):  # stopped early: the next batch would not fit or is in the next segment
            next_batch = next(b for b in self.batches if b[0] == expected[len(got)][0])
            next_segment = any(got[-1][0] < s.base_offset <= next_batch[0] for s in self.log.segments)
            assert next_segment or (
                info.size_bytes + len(make_batch(next_batch[1], base_timestamp=next_batch[2])) > max_bytes)

    @rule(pick=st.integers(0, 2))
    def out_of_range(self, pick: int) -> None:
        offset = [self.log_start - 1, self.leo + 1, self.leo + 100][pick]
        try:
            self.log.read(offset, max_bytes=100, max_offset=None)
        except OffsetOutOfRangeError:
            return
        raise AssertionError(f"read at {offset} outside [{self.log_start}, {self.leo}] did not fail")

    @rule()
    def roll(self) -> None:
        self.now_ms += 1
        self.log.roll(self.now_ms)

    @rule(pick=st.integers(0, 1 << 16))
    def update_high_watermark(self, pick: int) -> None:
        hw = _between(pick, self.log_start, self.leo)
        self.log.update_high_watermark(hw)
        self.hw = hw

    @rule(pick=st.integers(0, 1 << 16))
    def truncate_to(self, pick: int) -> None:
        offset = _between(pick, max(0, self.log_start - 2), self.leo + 1)
        self.log.truncate_to(offset)
        if offset >= self.leo:
            return
        if offset < self.log_start:
            self.batches, self.log_start, self.leo, self.hw = [], offset, offset, offset
            return
        kept = [b for b in self.batches if b[0] + len(b[1]) - 1 < offset]
        removed = self.batches[len(kept):]
        self.batches = kept
        self.leo = removed[0][0] if removed else self.leo
        self.hw = min(self.hw, self.leo)
        self.log_start = min(self.log_start, self.leo)

    @rule(pick=st.integers(0, 50))
    def truncate_fully(self, pick: int) -> None:
        offset = self.leo + pick
        self.log.truncate_fully_and_start_at(offset)
        self.batches, self.log_start, self.leo, self.hw = [], offset, offset, offset

    @rule(pick=st.integers(0, 1 << 16))
    def delete_records(self, pick: int) -> None:
        offset = _between(pick, self.log_start, self.hw)
        changed = self.log.maybe_increment_log_start_offset(offset)
        assert changed == (offset > self.log_start)
        self.log_start = max(self.log_start, offset)

    @rule(retention_bytes=st.sampled_from([0, 300, 1000]))
    def retention(self, retention_bytes: int) -> None:
        self.log.update_config(LogConfig(**{**_config_dict(self.config), "retention_bytes": retention_bytes}))
        self.log.delete_old_segments(self.now_ms)
        self.log.update_config(self.config)
        new_start = self.log.log_start_offset
        assert self.log_start <= new_start <= max(self.hw, self.log_start)
        self.log_start = new_start
        self.batches = [b for b in self.batches if b[0] + len(b[1]) > new_start]

    @rule(clean=st.booleans())
    def reopen(self, clean: bool) -> None:
        if clean:
            self.log.close()
            recovery_point = self.log.recovery_point
        else:  # a process crash: nothing flushed or snapshotted, but the page cache keeps every write
            recovery_point = self.log.recovery_point
            self.cache.close_all()
        self.cache.close_all()
        self.cache = HandleCache(max_open_files=self.max_open)
        self.log = Log.open(self.directory, self.config, now_ms=self.now_ms, handle_cache=self.cache,
                            recovery_point=recovery_point, log_start_offset=self.log_start, high_watermark=self.hw)

    @rule()
    def flush(self) -> None:
        self.log.flush()
        assert self.log.recovery_point == self.leo

    # -- invariants ---------------------------------------------------------------------------------------

    @invariant()
    def bounds_match(self) -> None:
        if not hasattr(self, "log"):
            return
        assert self.log.log_end_offset == self.leo
        assert self.log.log_start_offset == self.log_start
        assert self.log.high_watermark == self.hw
        assert self.log.offline_reason is None

    @precondition(lambda self: hasattr(self, "log"))
    @invariant()
    def whole_log_reads_back(self) -> None:
        got: list[tuple[int, bytes]] = []
        offset = self.log_start
        while offset < self.leo:
            info = self.log.read(offset, max_bytes=700, max_offset=None)
            chunk = decode_values(info.read_bytes())
            assert chunk, f"no data at {offset} below the log end {self.leo}"
            got.extend(chunk)
            offset = chunk[-1][0] + 1
        expected = self._records_from(self.log_start)
        assert got == expected


def _between(pick: int, low: int, high: int) -> int:
    return low + pick % (high - low + 1)


def _config_dict(config: LogConfig) -> dict[str, object]:
    return {name: getattr(config, name) for name in LogConfig.__dataclass_fields__}


TestLogStateMachine = LogModel.TestCase
TestLogStateMachine.settings = settings(max_examples=60, stateful_step_count=40, deadline=None,
                                        suppress_health_check=[HealthCheck.too_slow])
