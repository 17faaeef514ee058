"""Retention deleting segments is logged once per pass at INFO: the topic-partition, how many segments and bytes
went, why (Kafka's "retention time / size / log start offset breach") and the new log start offset."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from storage_batches import NOW_MS, make_batch, open_log

from samsa.storage import LogConfig


def test_retention_logs_segments_bytes_reason_and_log_start(log_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = open_log(log_dir, LogConfig(segment_bytes=400, retention_ms=1000, file_delete_delay_ms=0))
    for i in range(20):
        log.append_as_leader(make_batch([b"v1", b"v2"], base_timestamp=NOW_MS + i), leader_epoch=0, now_ms=NOW_MS)
    log.update_high_watermark(40)
    doomed = log.segments[:-1]
    expected_bytes = sum(s.size_bytes for s in doomed)
    with caplog.at_level(logging.INFO, logger="samsa.storage.log"):
        assert log.delete_old_segments(NOW_MS + 500) == 0  # nothing old enough: nothing logged
        assert caplog.records == []
        deleted = log.delete_old_segments(NOW_MS + 5000)
    assert deleted == len(doomed) > 1
    (record,) = caplog.records
    assert record.levelno == logging.INFO
    assert record.getMessage() == (
        f"{log_dir.name}: deleted {deleted} segment(s), {expected_bytes} bytes, due to retention time 1000ms breach; "
        f"log start offset is now {log.log_start_offset}")
    assert log.log_start_offset == log.segments[0].base_offset > 0


def test_size_retention_names_retention_bytes(log_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    log = open_log(log_dir, LogConfig(segment_bytes=400, retention_ms=-1, retention_bytes=800, file_delete_delay_ms=0))
    for i in range(20):
        log.append_as_leader(make_batch([b"v1", b"v2"], base_timestamp=NOW_MS + i), leader_epoch=0, now_ms=NOW_MS)
    log.update_high_watermark(40)
    with caplog.at_level(logging.INFO, logger="samsa.storage.log"):
        assert log.delete_old_segments(NOW_MS) > 0
    (record,) = caplog.records
    assert "due to retention size 800 bytes breach" in record.getMessage()
