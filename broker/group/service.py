"""The group coordinator's shell: `__consumer_offsets` (create, append, load) and the timer task.

Like Kafka, the internal topic is created on first use (FindCoordinator or any group request),
with offsets.topic.num.partitions partitions, compaction, and a replication factor no larger than
the live brokers.  A group's coordinator is the leader of partition
abs(java hashCode(group_id)) % partitions.  Records the coordinator produces are appended (one
batch per partition) before the request that caused them is answered; at start-up every partition
is replayed into the coordinator.

A write that a client is told succeeded (an offset commit, a group's assignment, a deletion) is
replicated first, as Kafka's coordinators write with acks=-1: `persist_replicated` waits until the
partition's high watermark passes it, up to offsets.commit.timeout.ms. Kafka's answers when it cannot:
COORDINATOR_NOT_AVAILABLE (too few in-sync replicas, or the time ran out) and NOT_COORDINATOR
(leadership moved); both make the client find the coordinator and retry.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Protocol, TypeVar

import anyio

from samsa.broker.group.batches import encode_batch
from samsa.broker.group.coordinator import GroupConfig, GroupCoordinator, GroupRecord, Pending
from samsa.broker.group.records import (
    CorruptRecordError,
    GroupMetadataKey,
    OffsetCommitKey,
    ResetAuditKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_key,
    partition_for_group,
)
from samsa.broker.internal_topic import (
    INTERNAL_SEGMENT_BYTES,
    InternalTopic,
    InternalTopicBroker,
    config_int,
    replay,
)
from samsa.kproto.errors import ErrorCode
from samsa.storage.log import Log

if TYPE_CHECKING:
    from samsa.broker.metadata.image import MetadataImage
    from samsa.broker.replica_manager import Partition

logger = logging.getLogger(__name__)

T = TypeVar("T")

OFFSETS_TOPIC = "__consumer_offsets"
TICK_INTERVAL_S = 0.1
# A delayed JoinGroup/SyncGroup is always completed by the coordinator's own deadlines; this bound
# only guards against a bug leaving a connection muted forever.
MAX_DELAYED_OPERATION_S = 30 * 60
DEFAULT_OFFSETS_RETENTION_CHECK_INTERVAL_MS = 600_000
DEFAULT_COMMIT_TIMEOUT_MS = 5000


class GroupBroker(InternalTopicBroker, Protocol):
    """What the group coordinator's shell uses of its broker (samsa.broker.broker.Broker is one)."""

    def topic_config(self, topic: str) -> Mapping[str, str]: ...


def now_ms() -> int:
    return int(time.time() * 1000)


def group_config(broker: GroupBroker) -> GroupConfig:
    return GroupConfig(
        min_session_timeout_ms=config_int(broker, "group.min.session.timeout.ms", 6000),
        max_session_timeout_ms=config_int(broker, "group.max.session.timeout.ms", 1_800_000),
        initial_rebalance_delay_ms=config_int(broker, "group.initial.rebalance.delay.ms", 3000),
        max_size=config_int(broker, "group.max.size", 2**31 - 1),
        offsets_retention_ms=config_int(broker, "offsets.retention.minutes", 10080) * 60_000,
        offset_metadata_max_bytes=config_int(broker, "offset.metadata.max.bytes", 4096),
    )


class GroupService:
    def __init__(self, broker: GroupBroker) -> None:
        self.broker = broker
        self.coordinator = GroupCoordinator(group_config(broker))
        self.num_partitions = config_int(broker, "offsets.topic.num.partitions", 50)
        self.topic = InternalTopic(broker, OFFSETS_TOPIC, self.num_partitions, "offsets.topic.replication.factor",
                                   {"cleanup.policy": "compact", "compression.type": "producer",
                                    "segment.bytes": str(INTERNAL_SEGMENT_BYTES)}, partition_for_group)
        self.retention_check_interval_ms = config_int(broker, "offsets.retention.check.interval.ms",
                                                       DEFAULT_OFFSETS_RETENTION_CHECK_INTERVAL_MS)
        self.commit_timeout_ms = config_int(broker, "offsets.commit.timeout.ms", DEFAULT_COMMIT_TIMEOUT_MS)
        self.load()

    # --- the internal topic -------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return self.topic.partition_for(group_id)

    def ensure_offsets_topic(self) -> ErrorCode:
        return self.topic.ensure()

    def coordinator_error(self, group_id: str) -> ErrorCode:
        """NONE when this broker coordinates `group_id` (creating the internal topic if needed)."""
        return self.topic.coordinator_error(group_id)

    # --- persistence --------------------------------------------------------------------------

    def persist(self) -> ErrorCode:
        """Append what the coordinator produced; an error means the last change may not be durable."""
        return self._append()[0]

    async def persist_replicated(self) -> ErrorCode:
        """Append what the coordinator produced and wait until every in-sync replica has it (see the
        module docstring): NONE, COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR."""
        error, appended = self._append()
        if error != ErrorCode.none:
            return error
        deadline = time.monotonic() + self.commit_timeout_ms / 1000
        min_isr = int(self.broker.topic_config(OFFSETS_TOPIC)["min.insync.replicas"])
        for partition, end_offset, epoch in appended:
            got = await partition.wait_replicated(end_offset, epoch, min_isr, deadline - time.monotonic())
            if got == ErrorCode.not_leader_or_follower:
                return ErrorCode.not_coordinator
            if got != ErrorCode.none:
                logger.info("group records in %s-%d not replicated: %s", OFFSETS_TOPIC, partition.partition_id,
                            got.name)
                return ErrorCode.coordinator_not_available
        return ErrorCode.none

    def _append(self) -> tuple[ErrorCode, list[tuple[Partition, int, int]]]:
        """Append the coordinator's records; the error, and (partition, end offset, leader epoch) of each
        append that was made."""
        appended: list[tuple[Partition, int, int]] = []
        records = self.coordinator.drain_records()
        if not records:
            return ErrorCode.none, appended
        by_partition: dict[int, list[GroupRecord]] = {}
        for record in records:
            by_partition.setdefault(self.partition_for(record.group_id), []).append(record)
        error = ErrorCode.none
        now = now_ms()
        for index, group_records in by_partition.items():
            partition = self.broker.replica_manager.get_partition(OFFSETS_TOPIC, index)
            if partition is None:
                logger.error("cannot store %d group records: %s-%d is missing", len(group_records), OFFSETS_TOPIC,
                             index)
                error = ErrorCode.coordinator_not_available
                continue
            batch = encode_batch([(r.key, r.value) for r in group_records], now)
            try:
                info = partition.append_as_leader(batch, now)
            except Exception as e:  # StorageError and friends: the client retries against us
                logger.error("appending group records to %s-%d failed: %s", OFFSETS_TOPIC, index, e)
                error = ErrorCode.coordinator_not_available
                continue
            appended.append((partition, info.last_offset + 1, partition.leader_epoch))
        return error, appended

    def append_audit(self, group_id: str, key: ResetAuditKey, value: bytes) -> None:
        """Queue an offset-reset audit record for __consumer_offsets (`samsa groups history` reads it back
        from the log)."""
        self.coordinator._records.append(GroupRecord(group_id, encode_key(key), value))

    def load(self) -> None:
        started = time.monotonic()
        now = now_ms()
        count = 0
        loaded = 0
        for _index, partition in self.topic.partitions_to_load():
            loaded += 1
            count += self._load_partition(partition.log, now)
        if not loaded:
            return
        self.coordinator.finish_loading(now)
        logger.info("loaded %d group records (%d groups) from %s in %.2f s", count, len(self.coordinator.groups),
                    OFFSETS_TOPIC, time.monotonic() - started)

    def on_metadata(self, image: MetadataImage) -> None:
        """Replay __consumer_offsets partitions this broker has come to lead (Kafka: onElection) and
        forget the groups of those it no longer leads (onResignation), so that a later return of the
        leadership replays the log rather than trusting state another coordinator has moved on from."""
        lost = self.topic.take_lost()
        if lost:
            count = self.coordinator.unload(lambda group_id: self.partition_for(group_id) in lost)
            logger.info("unloaded %d groups of %s partitions %s: led elsewhere now", count, OFFSETS_TOPIC,
                        sorted(lost))
        if OFFSETS_TOPIC in image.topics_by_name:
            self.load()

    def _load_partition(self, log: Log, now: int) -> int:
        count = 0
        for record_offset, key, value in replay(log):
            count += 1
            try:
                decoded = decode_key(key)
                match decoded:
                    case OffsetCommitKey():
                        self.coordinator.load_offset(
                            decoded.group_id, decoded.topic, decoded.partition,
                            None if value is None else decode_offset_commit_value(value), now)
                    case GroupMetadataKey():
                        self.coordinator.load_group(
                            decoded.group_id, None if value is None else decode_group_metadata_value(value), now)
                    case ResetAuditKey():
                        pass  # the audit trail lives in the log; the CLI reads it from there
                    case None:
                        pass  # a record type of a newer Kafka (KIP-848 groups, share groups): not ours
            except (CorruptRecordError, ValueError, UnicodeDecodeError) as e:
                logger.warning("skipping an unreadable %s record at offset %d: %s", OFFSETS_TOPIC,
                               record_offset, e)
        return count

    # --- delayed operations and timers --------------------------------------------------------

    async def wait(self, pending: Pending[T], on_timeout: Callable[[], T]) -> T:
        if pending.result is None:
            event = anyio.Event()
            pending.on_done(event.set)
            with anyio.move_on_after(MAX_DELAYED_OPERATION_S):
                await event.wait()
        if pending.result is None:
            logger.error("a delayed group operation was never completed")
            return on_timeout()
        return pending.result

    async def run(self) -> None:
        """Fire the coordinator's timers and expire offsets; runs for the life of the server."""
        last_expiry = now_ms()
        while True:
            await anyio.sleep(TICK_INTERVAL_S)
            try:
                now = now_ms()
                self.coordinator.tick(now)
                if now - last_expiry >= self.retention_check_interval_ms:
                    last_expiry = now
                    expired = self.coordinator.expire_offsets(now)
                    if expired:
                        logger.info("expired %d committed offsets", expired)
                self.persist()
            except Exception:
                logger.exception("group coordinator timer failed")
