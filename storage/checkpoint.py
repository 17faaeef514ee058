"""Kafka's text checkpoint files: `leader-epoch-checkpoint` and the data-dir offset checkpoints.

Format (Kafka's CheckpointFile): a version line `0`, a count line, then one entry per line —
`epoch start_offset` for the epoch cache, `topic partition offset` for replication-offset-checkpoint,
recovery-point-offset-checkpoint and log-start-offset-checkpoint.  Written to `<name>.tmp`, fsynced
and renamed, like Kafka.  A file that does not parse raises CorruptCheckpointError; callers fall back
to rebuilding what it held.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from pathlib import Path

from samsa.storage.file_io import FileIO

CHECKPOINT_VERSION = 0
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
REPLICATION_OFFSET_CHECKPOINT = "replication-offset-checkpoint"
RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"


class CorruptCheckpointError(ValueError):
    pass


def _parse(data: bytes, fields: int) -> list[list[str]]:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CorruptCheckpointError("not utf-8") from e
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2 or lines[0].strip() != str(CHECKPOINT_VERSION):
        raise CorruptCheckpointError(f"bad version line in {lines[:1]!r}")
    try:
        count = int(lines[1])
    except ValueError as e:
        raise CorruptCheckpointError("bad count line") from e
    if count != len(lines) - 2:
        raise CorruptCheckpointError(f"count {count} but {len(lines) - 2} entries")
    rows = [line.split(" ") for line in lines[2:]]
    for row in rows:
        if len(row) != fields:
            raise CorruptCheckpointError(f"bad entry {row!r}")
    return rows


def _format(rows: Iterable[str]) -> bytes:
    body = list(rows)
    return ("\n".join([str(CHECKPOINT_VERSION), str(len(body)), *body]) + "\n").encode()


def read_epoch_checkpoint(file_io: FileIO, path: Path) -> list[tuple[int, int]] | None:
    """(epoch, start_offset) entries, None if the file is missing; CorruptCheckpointError if damaged."""
    data = file_io.read_file(path)
    if data is None:
        return None
    try:
        entries = [(int(e), int(o)) for e, o in _parse(data, 2)]
    except ValueError as e:
        raise CorruptCheckpointError(str(e)) from e
    for (e1, o1), (e2, o2) in itertools.pairwise(entries):
        if e2 <= e1 or o2 < o1:
            raise CorruptCheckpointError("epoch entries not monotonic")
    return entries


def write_epoch_checkpoint(file_io: FileIO, path: Path, entries: Iterable[tuple[int, int]]) -> None:
    file_io.write_file_atomic(path, _format(f"{e} {o}" for e, o in entries))


def read_offset_checkpoint(file_io: FileIO, path: Path) -> dict[tuple[str, int], int] | None:
    data = file_io.read_file(path)
    if data is None:
        return None
    try:
        return {(t, int(p)): int(o) for t, p, o in _parse(data, 3)}
    except ValueError as e:
        raise CorruptCheckpointError(str(e)) from e


def write_offset_checkpoint(file_io: FileIO, path: Path, offsets: dict[tuple[str, int], int]) -> None:
    file_io.write_file_atomic(path, _format(f"{t} {p} {o}" for (t, p), o in sorted(offsets.items())))
