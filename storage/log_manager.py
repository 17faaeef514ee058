"""All partition logs of one data directory, their shared fd cache and the data-dir checkpoint files.

Kafka's LogManager: `<topic>-<partition>` directories (the partition follows the last '-'),
replication-offset-checkpoint (high watermarks), recovery-point-offset-checkpoint and
log-start-offset-checkpoint, deletion by renaming to `<dir>.<uuidhex>-delete` first.
"""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterable
from pathlib import Path

from samsa.storage.checkpoint import (
    LOG_START_OFFSET_CHECKPOINT,
    RECOVERY_POINT_CHECKPOINT,
    REPLICATION_OFFSET_CHECKPOINT,
    CorruptCheckpointError,
    read_offset_checkpoint,
    write_offset_checkpoint,
)
from samsa.storage.config import LogConfig
from samsa.storage.disk_guard import DiskSpaceGuard
from samsa.storage.errors import KafkaStorageError
from samsa.storage.file_io import FileIO, OsFileIO
from samsa.storage.handle_cache import HandleCache
from samsa.storage.log import Log

logger = logging.getLogger(__name__)

DELETE_DIR_SUFFIX = "-delete"


def parse_log_dir_name(name: str) -> tuple[str, int] | None:
    """`my.topic-name-3` -> ("my.topic-name", 3); None for anything that is not a partition directory."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not topic or not partition.isdigit() or "." in partition:
        return None
    return topic, int(partition)


def log_dir_name(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


class LogManager:
    def __init__(self, data_dir: Path, *, max_open_files: int = 1000, file_io: FileIO | None = None,
                 min_free_disk_bytes: int = 0) -> None:
        self.data_dir = data_dir
        self.file_io: FileIO = file_io if file_io is not None else OsFileIO()
        self.handle_cache = HandleCache(self.file_io, max_open_files)
        self.disk_guard = DiskSpaceGuard(self.file_io, data_dir, min_free_disk_bytes)
        self._logs: dict[tuple[str, int], Log] = {}
        self._pending_dir_deletes: list[tuple[int, Path]] = []
        self._checkpoint_lock = threading.Lock()
        self.file_io.mkdir(data_dir)

    def _read_checkpoint(self, name: str) -> dict[tuple[str, int], int]:
        path = self.data_dir / name
        try:
            return read_offset_checkpoint(self.file_io, path) or {}
        except CorruptCheckpointError as e:
            # Kafka refuses to start here; we fall back to full recovery / a conservative value instead
            logger.warning("%s is corrupt (%s): ignoring it", path, e)
            return {}

    def load_logs(self, configs: Callable[[str], LogConfig], now_ms: int) -> None:
        """Open every `<topic>-<partition>` directory; finish deletions a crash interrupted."""
        recovery_points = self._read_checkpoint(RECOVERY_POINT_CHECKPOINT)
        high_watermarks = self._read_checkpoint(REPLICATION_OFFSET_CHECKPOINT)
        log_starts = self._read_checkpoint(LOG_START_OFFSET_CHECKPOINT)
        for name in sorted(self.file_io.listdir(self.data_dir)):
            path = self.data_dir / name
            if name.endswith(DELETE_DIR_SUFFIX):
                self.file_io.rmtree(path)
                continue
            parsed = parse_log_dir_name(name)
            if parsed is None or parsed in self._logs:
                continue
            topic, _partition = parsed
            try:
                self._logs[parsed] = Log.open(
                    path, configs(topic), now_ms=now_ms, file_io=self.file_io, handle_cache=self.handle_cache,
                    recovery_point=recovery_points.get(parsed), log_start_offset=log_starts.get(parsed),
                    high_watermark=high_watermarks.get(parsed), disk_guard=self.disk_guard,
                )
            except NotADirectoryError:
                continue

    def get_log(self, topic: str, partition: int) -> Log | None:
        return self._logs.get((topic, partition))

    def get_or_create_log(self, topic: str, partition: int, config: LogConfig, now_ms: int) -> Log:
        key = (topic, partition)
        log = self._logs.get(key)
        if log is None:
            if "/" in topic or topic in (".", ".."):
                raise KafkaStorageError(f"illegal topic name {topic!r}")
            log = Log.open(self.data_dir / log_dir_name(topic, partition), config, now_ms=now_ms,
                           file_io=self.file_io, handle_cache=self.handle_cache, disk_guard=self.disk_guard)
            self._logs[key] = log
        return log

    def delete_log(self, topic: str, partition: int, now_ms: int | None = None) -> None:
        """Forget the log and rename its directory to `<dir>.<uuidhex>-delete`.

        The directory is removed by run_retention after file.delete.delay.ms (at once when now_ms is None)
        or at the next load_logs if the process stops first.
        """
        log = self._logs.pop((topic, partition), None)
        if log is None:
            return
        log.close_for_delete()
        doomed = log.directory.with_name(f"{log.directory.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        self.file_io.rename(log.directory, doomed)
        self.file_io.fsync_dir(self.data_dir)
        if now_ms is None:
            self.file_io.rmtree(doomed)
        else:
            self._pending_dir_deletes.append((now_ms + log.config.file_delete_delay_ms, doomed))

    def detach_log(self, topic: str, partition: int) -> Path | None:
        """The first half of a batched delete_log: forget the log and rename its directory to
        `<dir>.<uuidhex>-delete`, without syncing the data directory; finish_deletes then syncs it
        once for the whole batch (deleting thousands of partitions synced it once per partition)."""
        log = self._logs.pop((topic, partition), None)
        if log is None:
            return None
        log.close_for_delete()
        doomed = log.directory.with_name(f"{log.directory.name}.{uuid.uuid4().hex}{DELETE_DIR_SUFFIX}")
        self.file_io.rename(log.directory, doomed)
        return doomed

    def finish_deletes(self, doomed: Iterable[Path]) -> None:
        """Sync the data directory once (the renames of detach_log are durable), then remove the renamed
        directories (a crash before that leaves them to the next load_logs)."""
        paths = list(doomed)
        if not paths:
            return
        self.file_io.fsync_dir(self.data_dir)
        for path in paths:
            self.file_io.rmtree(path)

    def all_logs(self) -> Iterable[tuple[str, int, Log]]:
        return [(t, p, log) for (t, p), log in self._logs.items()]

    # -- checkpoints --------------------------------------------------------------------------------------

    def checkpoint_high_watermarks(self) -> None:
        """Write replication-offset-checkpoint, recovery-point-offset-checkpoint and log-start-offset-checkpoint."""
        logs = list(self._logs.items())
        with self._checkpoint_lock:
            write_offset_checkpoint(self.file_io, self.data_dir / REPLICATION_OFFSET_CHECKPOINT,
                                    {k: log.high_watermark for k, log in logs})
            write_offset_checkpoint(self.file_io, self.data_dir / RECOVERY_POINT_CHECKPOINT,
                                    {k: log.recovery_point for k, log in logs})
            write_offset_checkpoint(self.file_io, self.data_dir / LOG_START_OFFSET_CHECKPOINT,
                                    {k: log.log_start_offset for k, log in logs})

    def checkpoint_recovery_points(self) -> None:
        logs = list(self._logs.items())
        with self._checkpoint_lock:
            write_offset_checkpoint(self.file_io, self.data_dir / RECOVERY_POINT_CHECKPOINT,
                                    {k: log.recovery_point for k, log in logs})

    # -- periodic work ------------------------------------------------------------------------------------

    def remove_expired_producers(self, now_ms: int, expiration_ms: int) -> int:
        removed = 0
        for log in list(self._logs.values()):
            if not log.closed and log.offline_reason is None:
                removed += log.remove_expired_producers(now_ms, expiration_ms)
        return removed

    def run_retention(self, now_ms: int) -> int:
        deleted = 0
        for log in list(self._logs.values()):
            deleted += log.delete_old_segments(now_ms)
        keep = []
        for due_ms, path in self._pending_dir_deletes:
            if now_ms >= due_ms:
                self.file_io.rmtree(path)
            else:
                keep.append((due_ms, path))
        self._pending_dir_deletes = keep
        return deleted

    def flush_dirty(self, now_ms: int) -> None:
        """Flush logs whose flush.messages / flush.ms is due or that rolled; meant for a worker thread."""
        flushed = False
        for log in list(self._logs.values()):
            if not log.closed and log.offline_reason is None and log.needs_flush(now_ms):
                try:
                    log.maybe_flush(now_ms)
                    flushed = True
                except KafkaStorageError as e:
                    logger.error("flush of %s failed: %s", log.directory, e)
        if flushed:
            self.checkpoint_recovery_points()

    def close(self) -> None:
        """Clean shutdown: close every log (snapshots, fsync), then write the checkpoints."""
        for log in list(self._logs.values()):
            try:
                log.close()
            except KafkaStorageError as e:
                logger.error("close of %s failed: %s", log.directory, e)
        self.checkpoint_high_watermarks()
        for _, path in self._pending_dir_deletes:
            self.file_io.rmtree(path)
        self._pending_dir_deletes.clear()
        self.handle_cache.close_all()
