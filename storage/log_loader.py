"""Opening a partition's log: stray files, recovery after a crash, rebuilding the epoch cache and producer state.

Kafka's LogLoader: segments below the recovery point are trusted (their indexes rebuilt if damaged),
everything above it is scanned, and a crash-cut tail is truncated away.
"""

from __future__ import annotations

import bisect
import logging
from pathlib import Path

from samsa.kproto.batch import BATCH_HEADER_BYTES, CorruptBatchError, parse_header
from samsa.storage.checkpoint import LEADER_EPOCH_CHECKPOINT, CorruptCheckpointError, read_epoch_checkpoint
from samsa.storage.config import LogConfig
from samsa.storage.local_log import DELETED_SUFFIX, LocalLog
from samsa.storage.producer_state import SNAPSHOT_SUFFIX
from samsa.storage.segment import LogSegment

logger = logging.getLogger(__name__)


def load(log: LocalLog, names: list[str], config: LogConfig, now_ms: int, recovery_point: int | None,
          log_start_offset: int | None, high_watermark: int | None) -> None:
    """Fill a freshly built `log` from its directory listing `names`: stray files removed, segments
    recovered from `recovery_point` on, bounds clamped, then the epoch cache and producer state."""
    io = log._io
    names = finish_swaps(log, names)
    log_bases: set[int] = set()
    for name in names:
        if name.endswith((DELETED_SUFFIX, ".tmp", ".cleaned", ".swap")):
            io.unlink(log.directory / name)
        elif name.endswith(".log") and name[:-4].isdigit():
            log_bases.add(int(name[:-4]))
    for name in names:  # index files whose segment is gone
        stem, _, ext = name.partition(".")
        if ext in ("index", "timeindex") and stem.isdigit() and int(stem) not in log_bases:
            io.unlink(log.directory / name)

    rp = recovery_point if recovery_point is not None else -1
    if not log_bases:
        base = log_start_offset if log_start_offset is not None else 0
        log._add_segment(LogSegment.create(log.directory, base, log._cache, config, created_ms=now_ms))
    else:
        for base in sorted(log_bases):
            seg = LogSegment(log.directory, base, log._cache, config, created_ms=now_ms, size_bytes=-1)
            seg.size_bytes = io.size(seg.log_path)
            seg.tail_loaded = seg.size_bytes == 0
            log._add_segment(seg)
        _recover_log(log, rp)

    leo = log.log_end_offset
    first_base = log._segments[0].base_offset
    start = max(log_start_offset if log_start_offset is not None else first_base, first_base)
    log.log_start_offset = min(start, leo)
    log.recovery_point = max(min(rp, leo), log.log_start_offset) if rp >= 0 else log.log_start_offset
    hw = high_watermark if high_watermark is not None else log.log_start_offset
    log.high_watermark = min(max(hw, log.log_start_offset), leo)
    if log._offline_reason is not None:
        return
    _load_epoch_cache(log, LEADER_EPOCH_CHECKPOINT in names)
    rebuild_producer_state(log, names if any(name.endswith(SNAPSHOT_SUFFIX) for name in names) else [])


def _swap_next_offset(log: LocalLog, path: Path) -> int | None:
    """The offset after the last whole batch of a `.log.swap` file (its base if it has none), None if unreadable."""
    io = log._io
    try:
        fd = io.open(path, write=False)
    except OSError:
        return None
    try:
        size = io.fsize(fd)
        pos = 0
        next_offset = int(path.name.partition(".")[0])
        while pos + BATCH_HEADER_BYTES <= size:
            try:
                header = parse_header(io.pread(fd, BATCH_HEADER_BYTES, pos))
            except CorruptBatchError:
                break
            if pos + header.size_bytes > size:
                break
            next_offset = header.next_offset
            pos += header.size_bytes
        return next_offset
    finally:
        io.close(fd)


def finish_swaps(log: LocalLog, names: list[str]) -> list[str]:
    """Kafka's LogLoader for an interrupted cleaner swap (storage/cleaner_swap.py describes the steps).

    `.cleaned` files are deleted: that swap never committed and the old segments are whole.  A
    `<base>.log.swap` committed its swap: every other segment whose base lies in [base, its next offset)
    is deleted (its data is in the swap segment), then the `<base>.*.swap` files take their final names.
    Index `.swap` files without their `.log.swap` are deleted (the swap had not committed).  Returns the
    directory listing afterwards.
    """
    io = log._io
    directory = log.directory
    swap_logs = sorted(int(n[: -len(".log.swap")]) for n in names
                       if n.endswith(".log.swap") and n[: -len(".log.swap")].isdigit())
    if not any(n.endswith((".cleaned", ".swap")) for n in names):
        return names
    for name in names:
        if name.endswith(".cleaned"):
            io.unlink(directory / name)
        elif name.endswith(".swap") and not name.endswith(".log.swap"):
            stem = name.partition(".")[0]
            if not stem.isdigit() or int(stem) not in swap_logs:
                io.unlink(directory / name)
    for base in swap_logs:
        stem = f"{base:020d}"
        swap_path = directory / f"{stem}.log.swap"
        end = _swap_next_offset(log, swap_path)
        if end is None:
            continue
        for name in names:
            old_stem, _, ext = name.partition(".")
            if ext in ("log", "index", "timeindex", "txnindex") and old_stem.isdigit() \
                    and base <= int(old_stem) < max(end, base + 1):
                logger.info("%s: deleting %s, replaced by the cleaned segment %s.log.swap", directory.name, name, stem)
                io.unlink(directory / name)
        for name in io.listdir(directory):
            if name.startswith(stem + ".") and name.endswith(".swap"):
                io.rename(directory / name, directory / name[: -len(".swap")])
        logger.info("%s: completed the interrupted swap of the cleaned segment %s", directory.name, stem)
    io.fsync_dir(directory)
    return io.listdir(directory)


def _recover_log(log: LocalLog, rp: int) -> None:
    """Kafka's recoverLog: trust what is below the recovery point, scan everything after it.

    Damage in data below the recovery point (which was fsynced) takes the partition offline.
    Damage above it (a crash cut the tail) is truncated away, with every later segment.
    """
    segs = log._segments
    first_unflushed = max(0, bisect.bisect_right(log._bases, rp) - 1) if rp >= 0 else 0
    for seg in segs[:first_unflushed]:
        if not seg.indexes_sane():
            logger.warning("%s: rebuilding damaged index files", seg.log_path)
            _, error = seg.recover()
            if error is not None:
                log._go_offline(f"corrupt closed segment {seg.log_path}: {error}")
                return
    for i in range(first_unflushed, len(segs)):
        seg = segs[i]
        if rp >= 0 and seg.indexes_sane():
            try:
                seg.load_tail()
                if seg.next_offset <= rp:
                    continue  # fully flushed; no scan needed
            except (CorruptBatchError, ValueError, OSError):
                pass
        valid_bytes, error = seg.recover()
        if error is None:
            continue
        if seg.next_offset < rp:
            log._go_offline(f"corrupt segment {seg.log_path} below the recovery point {rp}: {error}")
            return
        dropped = segs[i + 1 :]
        logger.warning("%s: truncating to %d bytes after a crash (%s); dropping %d later segments",
                       seg.log_path, valid_bytes, error, len(dropped))
        seg.truncate_to_position(valid_bytes)
        for later in dropped:
            for path in later.paths:
                log._cache.close_path(path)
                log._io.unlink(path)
        del segs[i + 1 :]
        del log._bases[i + 1 :]
        break
    last = segs[-1]
    if not last.tail_loaded:
        last.load_tail()


def _load_epoch_cache(log: LocalLog, exists: bool = True) -> None:
    path = log._epochs._path
    try:
        entries = read_epoch_checkpoint(log._io, path) if exists else None
    except CorruptCheckpointError as e:
        logger.warning("%s is corrupt (%s): rebuilding it from the log", path, e)
        entries = None
    if entries is None:
        log._epochs.reset([])
        for _, header in log._iter_headers_from(log._segments[0].base_offset):
            log._epochs.assign(header.partition_leader_epoch, header.base_offset, flush=False)
        if exists or log._epochs.entries:  # a new, empty log needs no file (and no fsync) yet
            log._epochs.flush()
    else:
        log._epochs.reset(entries)
        log._epochs.truncate_from_end(log.log_end_offset)
    log._epochs.truncate_from_start(log.log_start_offset)


def rebuild_producer_state(log: LocalLog, names: list[str] | None = None) -> None:
    """Newest good snapshot at or below the log end, then replay the batches after it.

    `names`: the directory listing if the caller has one ([] when it holds no snapshot).
    """
    leo = log.log_end_offset
    snap = log._producers.load_latest_snapshot(log._io, log.directory, leo, names)
    start = snap if snap is not None else log._segments[0].base_offset
    for _, header in log._iter_headers_from(start):
        log._producers.update(header)
