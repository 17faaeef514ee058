"""Helpers for the log cleaner tests: keyed batches, transactions, full reads and the read_committed view."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from samsa.kproto.batch import BatchHeader
from samsa.kproto.records import ControlType, decode_batches, encode_batch, encode_control_batch
from samsa.storage import Log, LogConfig
from samsa.storage.cleaner import Cleaner, CleanResult
from samsa.storage.cleaner_manager import cleanable_range
from samsa.storage.cleaner_swap import SwapStep
from samsa.storage.txn_index import AbortedTxn, TransactionIndex, last_stable_offset

NOW_MS = 1_700_000_000_000
DAY_MS = 86_400_000


def compact_config(**kw: int | float | str) -> LogConfig:
    base: dict[str, int | float | str] = dict(segment_bytes=400, retention_ms=-1, file_delete_delay_ms=0,
                                              cleanup_policy="compact", index_interval_bytes=100,
                                              delete_retention_ms=DAY_MS)
    base.update(kw)
    return LogConfig(**base)  # type: ignore[arg-type]


def kv(pairs: Sequence[tuple[bytes, bytes | None]], *, ts: int = NOW_MS, pid: int = -1, epoch: int = -1,
       seq: int = -1, txn: bool = False) -> bytes:
    return encode_batch([(k, v, ()) for k, v in pairs], timestamp_ms=ts, producer_id=pid, producer_epoch=epoch,
                        base_sequence=seq, is_transactional=txn)


def marker(pid: int, epoch: int, *, commit: bool, ts: int = NOW_MS) -> bytes:
    return encode_control_batch(ControlType.COMMIT if commit else ControlType.ABORT, producer_id=pid,
                                producer_epoch=epoch, coordinator_epoch=0, timestamp_ms=ts)


def write_marker(log: Log, pid: int, epoch: int, *, commit: bool, ts: int = NOW_MS) -> None:
    """A COMMIT/ABORT marker as the broker writes it (broker/replica_manager.py): an abort also gets its
    entry in the segment's `.txnindex`."""
    entry = log.producer_state(pid)
    first = entry.current_txn_first_offset if entry is not None else None
    index = TransactionIndex.open(log.directory, log.segments, log.log_end_offset)
    info = log.append_as_leader(marker(pid, epoch, commit=commit, ts=ts), leader_epoch=0, now_ms=ts)
    if not commit and first is not None:
        lso = last_stable_offset(log.producer_states.values(), info.last_offset + 1)
        index.append(log.active_segment.base_offset, AbortedTxn(pid, first, info.last_offset, lso))


@dataclass(frozen=True)
class Rec:
    offset: int
    key: bytes | None
    value: bytes | None
    header: BatchHeader


def read_batches(log: Log, upto: int | None = None) -> list[tuple[BatchHeader, list[Rec]]]:
    """Every batch from the log start to `upto` (the log end), through Log.read like a fetch."""
    out: list[tuple[BatchHeader, list[Rec]]] = []
    offset = log.log_start_offset
    end = log.log_end_offset if upto is None else upto
    while offset < end:
        info = log.read(offset, max_bytes=1 << 20, max_offset=end)
        data = info.read_bytes()
        if not data:
            break
        for h, records in decode_batches(data, max_decompressed_bytes=1 << 24):
            out.append((h, [Rec(r.offset, r.key, r.value, h) for r in records]))
            offset = h.next_offset
    return out


def read_all(log: Log) -> list[Rec]:
    return [r for _, recs in read_batches(log) for r in recs if not r.header.is_control]


def read_committed(log: Log) -> list[Rec]:
    """What a read_committed consumer sees: batches below the last stable offset, less those of aborted
    transactions (Kafka's fetcher: aborted producer ids from the txn index, dropped until their marker)."""
    lso = last_stable_offset(log.producer_states.values(), log.high_watermark)
    index = TransactionIndex.open(log.directory, log.segments, log.log_end_offset)
    aborted = sorted(index.collect_aborted_transactions(log.log_start_offset, log.log_end_offset),
                     key=lambda t: t.first_offset)
    active: set[int] = set()
    out: list[Rec] = []
    for h, recs in read_batches(log, lso):
        while aborted and aborted[0].first_offset <= h.last_offset:
            active.add(aborted.pop(0).producer_id)
        if h.is_control:
            if recs and recs[0].key is not None and recs[0].key[2:4] == b"\x00\x00":
                active.discard(h.producer_id)
            continue
        if h.is_transactional and h.producer_id in active:
            continue
        out.extend(recs)
    return out


def latest(records: Sequence[Rec]) -> dict[bytes, bytes | None]:
    out: dict[bytes, bytes | None] = {}
    for r in records:
        if r.key is not None:
            out[r.key] = r.value
    return out


def clean(log: Log, now_ms: int, *, map_bytes: int = 1 << 20, first_dirty: int | None = None,
          stop_after: SwapStep | None = None) -> CleanResult:
    r = cleanable_range(log, first_dirty, now_ms)
    return Cleaner(map_bytes).clean(log, r.first_dirty_offset, r.first_uncleanable_offset, now_ms,
                                    stop_after=stop_after)


def open_compact(directory: Path, config: LogConfig | None = None, now_ms: int = NOW_MS) -> Log:
    """Open a log whose high watermark is its log end (as if checkpointed so)."""
    log = Log.open(directory, config or compact_config(), now_ms=now_ms)
    log.update_high_watermark(log.log_end_offset)
    return log
