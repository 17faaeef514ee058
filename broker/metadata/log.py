"""The local `__cluster_metadata` log: metadata records appended as record batches, always fsynced.

This is the single-node stand-in for the Raft-replicated log (issue 6 replaces *how* records are
committed, not the records or the image): `append` writes one batch per call, so a group of
records lands atomically, and `replay` rebuilds the image at start-up.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

from broker.metadata.image import MetadataImage
from broker.metadata.records import MetadataRecord, decode_record, encode_record
from kproto.records import decode_batches, encode_batch
from storage.config import LogConfig
from storage.log import Log

METADATA_TOPIC = "__cluster_metadata"
METADATA_PARTITION = 0
METADATA_LOG_CONFIG = LogConfig(segment_bytes=64 * 1024 * 1024, retention_ms=-1, retention_bytes=-1)
_MAX_BATCH_BYTES = 64 * 1024 * 1024


def _now_ms() -> int:
    return int(time.time() * 1000)


def read_image(log: Log) -> MetadataImage:
    image = MetadataImage()
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, max_bytes=_MAX_BATCH_BYTES, max_offset=None).read_bytes()
        if not data:
            break
        for header, records in decode_batches(data, max_decompressed_bytes=_MAX_BATCH_BYTES):
            if header.last_offset < offset:
                continue
            image = image.apply((decode_record(r.value or b"") for r in records), header.last_offset)
            offset = header.next_offset
    return image


def replay(data_dir: Path) -> MetadataImage:
    """Read the image from the metadata log under `data_dir` without keeping it open."""
    directory = data_dir / f"{METADATA_TOPIC}-{METADATA_PARTITION}"
    if not directory.exists():
        return MetadataImage()
    log = Log.open(directory, METADATA_LOG_CONFIG, now_ms=_now_ms())
    try:
        return read_image(log)
    finally:
        log.close()


class MetadataLog:
    """Appends metadata records and publishes each new image to the broker."""

    def __init__(self, log: Log, image: MetadataImage) -> None:
        self._log = log
        self.image = image

    def append(self, records: Sequence[MetadataRecord]) -> MetadataImage:
        """Persist `records` as one batch (fsynced), apply them, and return the new image."""
        now_ms = _now_ms()
        batch = encode_batch([(None, encode_record(r), ()) for r in records], timestamp_ms=now_ms)
        info = self._log.append_as_leader(batch, leader_epoch=0, now_ms=now_ms)
        self._log.flush()
        self._log.update_high_watermark(self._log.log_end_offset)
        self.image = self.image.apply(records, info.last_offset)
        return self.image


__all__ = ["METADATA_LOG_CONFIG", "METADATA_TOPIC", "MetadataLog", "read_image", "replay"]
