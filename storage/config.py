"""Per-log configuration: Kafka's topic configs in snake_case, with Kafka's defaults."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    retention_ms: int = 604800000  # -1 = unlimited
    retention_bytes: int = -1  # -1 = unlimited
    message_timestamp_type: str = "CreateTime"  # or "LogAppendTime"
    flush_messages: int = 9223372036854775807
    flush_ms: int = 9223372036854775807
    file_delete_delay_ms: int = 60000
    cleanup_policy: str = "delete"
    min_free_disk_bytes: int = 0  # free-disk reserve; appends refused below it
    # the log cleaner's topic configs (compacted topics; see storage/cleaner.py)
    delete_retention_ms: int = 86400000  # tombstones and empty-transaction markers live this long once cleaned
    min_compaction_lag_ms: int = 0  # a segment is cleanable once its newest record is this old
    max_compaction_lag_ms: int = 9223372036854775807  # a log is cleaned once its oldest dirty record is this old
    min_cleanable_dirty_ratio: float = 0.5  # dirty bytes / cleanable bytes that make a log eligible

    @property
    def log_append_time(self) -> bool:
        return self.message_timestamp_type == "LogAppendTime"

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy
