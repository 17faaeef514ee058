"""Replaying transactional offset commits from one `__consumer_offsets` log (the group loader skips them).

Kafka's GroupMetadataManager loads them with the log: a TxnOffsetCommit batch carries the producer's id,
its offsets wait per producer id until that producer's marker, and only a COMMIT marker applies them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from samsa.broker.group.records import (
    CorruptRecordError,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_offset_commit_value,
)
from samsa.broker.group.records import decode_key as decode_group_key
from samsa.kproto.batch import CorruptBatchError, iter_batches
from samsa.kproto.records import ControlType, decode_batches, decode_control_record
from samsa.storage.log import Log

logger = logging.getLogger(__name__)

LOAD_READ_BYTES = 1 << 20

# (group id, topic, partition, value) of one transactional offset commit
OffsetCommit = tuple[str, str, int, OffsetCommitValue]


def replay_transactional_offsets(log: Log, name: str, pending: dict[int, list[OffsetCommit]],
                                 on_commit: Callable[[str, str, int, OffsetCommitValue], None]) -> None:
    """Scan `log` (named `name` in warnings): commits of an open transaction are added to `pending`
    under their producer id; a COMMIT marker hands that producer's to `on_commit`, an ABORT drops them."""
    offset, end = log.log_start_offset, log.log_end_offset
    while offset < end:
        data = log.read(offset, max_bytes=LOAD_READ_BYTES, max_offset=end).read_bytes()
        last = offset - 1
        try:
            # Headers only: the (many) plain offset commits are the group loader's, not decoded here.
            batches = [(header, position) for position, header in iter_batches(data, verify_crc=False)]
        except CorruptBatchError as e:
            logger.warning("stopping the replay of %s at %d: %s", name, offset, e)
            break
        for header, position in batches:
            last = header.last_offset
            if not header.is_transactional or header.base_offset < offset:
                continue
            try:
                ((_, records),) = decode_batches(data[position : position + header.size_bytes],
                                                 max_decompressed_bytes=LOAD_READ_BYTES * 16)
            except (CorruptBatchError, ValueError) as e:
                logger.warning("skipping an unreadable transactional batch at %d: %s", header.base_offset, e)
                continue
            if header.is_control:
                done = pending.pop(header.producer_id, [])
                try:
                    committed = bool(records) and decode_control_record(records[0]).type == ControlType.COMMIT
                except CorruptBatchError:
                    committed = False
                if committed:
                    for group_id, t, p, value in done:
                        on_commit(group_id, t, p, value)
                continue
            for record in records:
                try:
                    key = decode_group_key(record.key) if record.key is not None else None
                    if isinstance(key, OffsetCommitKey) and record.value is not None:
                        pending.setdefault(header.producer_id, []).append(
                            (key.group_id, key.topic, key.partition, decode_offset_commit_value(record.value)))
                except (CorruptRecordError, ValueError, UnicodeDecodeError) as e:
                    logger.warning("skipping an unreadable transactional offset commit at %d: %s",
                                   record.offset, e)
        if last < offset:
            break
        offset = last + 1
