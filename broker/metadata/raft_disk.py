"""The metadata quorum's disk: quorum-state and snapshot files, the images on disk, the batch writer of persist actions.

`MetadataLogWriter.write_batch` carries out the persist actions (raft.events) of one or more core
steps in order and makes them durable with ONE fsync of `__cluster_metadata-0` at the end, instead of
one per action. It is plain blocking file code: the driver (broker.metadata.quorum) runs it on its
own worker thread and executes the steps' other actions (sends, commits) only once it returned.

Why the order inside a batch is safe with one log fsync at the end:
- a quorum-state write is made durable when it is met (tmp file, fsync, rename, fsync of the
  directory), so it is on disk before any log entry that follows it in the batch (entries of an
  epoch never reach the disk before that epoch's quorum-state);
- a snapshot is made durable when it is met, before the AdvanceLogStartOffset that relies on it;
- log appends and truncations sit in the page cache until the final fsync; a crash before it loses
  them, which is a crash before the batch: nothing after the batch (a vote, an acknowledgement, a
  commit) has been sent or applied yet.

The metadata log is written inside the free-disk reserve (`samsa.min.free.disk.bytes`): the reserve
exists so that the control plane still works when data appends are refused (deletes, registrations,
elections). Which metadata writes the reserve still refuses is decided before the Raft core advances
(the driver's `write_nowait`); here a failing write is a real I/O error, and the driver treats it as
fatal, as Kafka does.
"""

from __future__ import annotations

import json
import logging
import os
import struct
import time
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

from samsa.broker.metadata.image import MetadataImage
from samsa.broker.metadata.records import decode_records
from samsa.kproto.checksum import crc32c
from samsa.raft import codec
from samsa.raft.events import (
    AdvanceLogStartOffset,
    AppendToLog,
    PersistQuorumState,
    PersistSnapshot,
    TruncateLog,
)
from samsa.raft.log import EntryKind, LogEntry, Snapshot, SnapshotId
from samsa.raft.voter_set import frame_snapshot, unframe_snapshot
from samsa.storage.disk_guard import DiskSpaceGuard
from samsa.storage.log import Log

logger = logging.getLogger(__name__)

QUORUM_STATE_FILE = "quorum-state"
SNAPSHOT_SUFFIX = ".checkpoint"
_SNAPSHOT_MAGIC = b"SAMSASNP"
_SNAPSHOT_HEADER = struct.Struct(">8sI")  # magic, crc32c of the data
READ_CHUNK_BYTES = 8 * 1024 * 1024

PersistAction = PersistQuorumState | AppendToLog | TruncateLog | PersistSnapshot | AdvanceLogStartOffset
PERSIST_ACTIONS = (PersistQuorumState, AppendToLog, TruncateLog, PersistSnapshot, AdvanceLogStartOffset)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_durably(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    _fsync_dir(path.parent)


# --- quorum-state (Kafka's file, JSON) ------------------------------------------------------------


def read_quorum_state(directory: Path) -> PersistQuorumState | None:
    path = directory / QUORUM_STATE_FILE
    try:
        body = json.loads(path.read_text())
        leader = int(body.get("leaderId", -1))
        voted = int(body.get("votedId", -1))
        return PersistQuorumState(int(body["leaderEpoch"]), None if voted < 0 else voted,
                                  None if leader < 0 else leader)
    except FileNotFoundError:
        return None
    except (ValueError, KeyError, TypeError) as e:
        # Written atomically (tmp + rename), so damage means a foreign edit: refuse to guess an epoch.
        raise SystemExit(f"{path} is damaged ({e}); refusing to start with an unknown quorum epoch") from e


def write_quorum_state(directory: Path, state: PersistQuorumState, voters: frozenset[int]) -> None:
    body = {
        "clusterId": "",
        "leaderId": -1 if state.leader_id is None else state.leader_id,
        "leaderEpoch": state.epoch,
        "votedId": -1 if state.voted_id is None else state.voted_id,
        "appliedOffset": 0,
        "currentVoters": [{"voterId": v} for v in sorted(voters)],
        "data_version": 0,
    }
    _write_durably(directory / QUORUM_STATE_FILE, json.dumps(body).encode())


# --- snapshots: <end offset>-<epoch>.checkpoint -----------------------------------------------------


def _snapshot_path(directory: Path, sid: SnapshotId) -> Path:
    return directory / f"{sid.end_offset:020d}-{sid.epoch:010d}{SNAPSHOT_SUFFIX}"


def write_snapshot(directory: Path, snapshot: Snapshot) -> None:
    # The voter set in force at the snapshot (KIP-853) is framed in front of the image, as FetchSnapshot sends it.
    body = frame_snapshot(snapshot.voters, snapshot.data)
    header = _SNAPSHOT_HEADER.pack(_SNAPSHOT_MAGIC, crc32c(body))
    _write_durably(_snapshot_path(directory, snapshot.snapshot_id), header + body)


def delete_snapshots_below(directory: Path, end_offset: int) -> None:
    for path in directory.glob("*" + SNAPSHOT_SUFFIX):
        found = _parse_snapshot_name(path)
        if found is not None and found.end_offset < end_offset:
            path.unlink(missing_ok=True)


def _parse_snapshot_name(path: Path) -> SnapshotId | None:
    stem = path.name[: -len(SNAPSHOT_SUFFIX)]
    offset, sep, epoch = stem.partition("-")
    if not sep or not offset.isdigit() or not epoch.isdigit():
        return None
    return SnapshotId(int(offset), int(epoch))


def latest_snapshot(directory: Path) -> Snapshot | None:
    """The newest snapshot with a valid checksum (a damaged one is skipped, and older ones tried)."""
    found = sorted(
        ((sid, p) for p in directory.glob("*" + SNAPSHOT_SUFFIX) if (sid := _parse_snapshot_name(p)) is not None),
        reverse=True,
    )
    for sid, path in found:
        raw = path.read_bytes()
        if len(raw) >= _SNAPSHOT_HEADER.size:
            magic, crc = _SNAPSHOT_HEADER.unpack_from(raw)
            data = raw[_SNAPSHOT_HEADER.size:]
            if magic == _SNAPSHOT_MAGIC and crc32c(data) == crc:
                try:
                    voters, image = unframe_snapshot(data)
                except ValueError:
                    pass  # damaged although its checksum matched: treated as damaged below
                else:
                    return Snapshot(sid, image, voters)
        logger.error("metadata snapshot %s is damaged; ignoring it", path)
    return None


def read_entries(log: Log, start: int) -> list[LogEntry]:
    entries: list[LogEntry] = []
    offset = start
    while offset < log.log_end_offset:
        data = log.read(offset, max_bytes=READ_CHUNK_BYTES, max_offset=None).read_bytes()
        if not data:
            break
        chunk = [e for e in codec.decode_entries(data) if e.offset >= offset]
        if not chunk:
            break
        entries += chunk
        offset = chunk[-1].offset + 1
    return entries


def image_from_snapshot(snapshot: Snapshot | None) -> MetadataImage:
    if snapshot is None:
        return MetadataImage()
    # A snapshot carries the voter set when the log had one, and with it kraft.version 1 (raft.reconfig).
    image = MetadataImage(kraft_version=1 if snapshot.voters else 0)
    return image.apply(decode_records(snapshot.data), snapshot.snapshot_id.end_offset - 1)


def provisional_image(snapshot: Snapshot | None, entries: Sequence[LogEntry]) -> MetadataImage:
    """Everything on local disk applied, committed or not: only for opening logs before catching up."""
    image = image_from_snapshot(snapshot)
    for entry in entries:
        if entry.kind == EntryKind.DATA:
            image = image.apply(decode_records(entry.payload), entry.offset)
    return image


# --- the batch writer ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BatchWritten:
    """What one write_batch did: how many actions, and whether it fsynced the log (at most once)."""

    action_count: int
    log_flushed: bool


class MetadataLogWriter:
    """Carries out persist actions against `__cluster_metadata-0` and the files beside it.

    Only one batch runs at a time (the driver's single worker thread, or inline before it starts), and
    while it runs the driver does not touch the log: the writer is the log's only mutator."""

    def __init__(self, log: Log, voters: frozenset[int], disk_guard: DiskSpaceGuard | None = None) -> None:
        self.log = log
        self.directory = log.directory
        self.voters = voters
        self._disk_guard = disk_guard
        self.batches_written = 0
        self.log_flushes = 0

    def write_batch(self, actions: Sequence[PersistAction]) -> BatchWritten:
        """Execute `actions` in order; durable when this returns. Raises OSError / StorageError."""
        log_dirty = False
        exempt = self._disk_guard.reserve_exempt() if self._disk_guard is not None else nullcontext()
        with exempt:
            for action in actions:
                match action:
                    case PersistQuorumState():
                        write_quorum_state(self.directory, action, self.voters)
                    case AppendToLog(entries=entries):
                        now = _now_ms()
                        self.log.append_as_follower(codec.encode_entries(entries, timestamp_ms=now), now_ms=now)
                        log_dirty = True
                    case TruncateLog(offset=offset):
                        self.log.truncate_to(offset)
                        log_dirty = True
                    case PersistSnapshot(snapshot=snapshot):
                        write_snapshot(self.directory, snapshot)
                    case AdvanceLogStartOffset(log_start_offset=offset):
                        self._advance_log_start(offset)
                        log_dirty = True
            if log_dirty:
                self.log.flush()
                self.log_flushes += 1
        self.batches_written += 1
        return BatchWritten(len(actions), log_dirty)

    def _advance_log_start(self, offset: int) -> None:
        log = self.log
        if offset >= log.log_end_offset:
            log.truncate_fully_and_start_at(offset)
        else:
            log.update_high_watermark(max(log.high_watermark, min(offset, log.log_end_offset)))
            log.maybe_increment_log_start_offset(offset)
        # The snapshot ending at `offset` was made durable before this action (PersistSnapshot, or the
        # one a follower installed): older ones are moot.
        delete_snapshots_below(self.directory, offset)


__all__ = [
    "PERSIST_ACTIONS",
    "BatchWritten",
    "MetadataLogWriter",
    "PersistAction",
    "image_from_snapshot",
    "latest_snapshot",
    "provisional_image",
    "read_entries",
    "read_quorum_state",
    "write_quorum_state",
    "write_snapshot",
]
