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
(leadership moved, or the disk refused the write); both make the client find the coordinator and retry.

Memory never runs ahead of the log: a change whose records were not appended (the disk refused them,
or the ISR was already below min.insync.replicas, which Kafka checks before it appends) is reverted to
the `snapshot` taken before it, as Kafka 4's CoordinatorRuntime reverts a failed write.  A change that
was appended but not replicated in time stays, as in Kafka: this leader's log holds it, and a retry
of the client's request writes the same thing again.

A timer's write (a session expired and the group is now Empty) has no client to answer: its failed
GroupMetadata record is kept and appended again on the next tick until the log has it or a newer one
supersedes it, as Kafka's CoordinatorTimer reschedules a failed timer write.  Offset expiry removes
offsets (and the group they leave empty) only once their tombstones are written, so a failed run
leaves memory as the log is and the next run tries again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, TypeVar

import anyio

from samsa.broker.group import consumer_offsets, migration
from samsa.broker.group import offsets as offset_manager
from samsa.broker.group.batches import encode_batch
from samsa.broker.group.classic_members import TopicCatalog
from samsa.broker.group.consumer_config import ConsumerGroupConfig
from samsa.broker.group.consumer_coordinator import ConsumerGroupCoordinator
from samsa.broker.group.consumer_group import ConsumerGroup
from samsa.broker.group.coordinator import GroupConfig, GroupCoordinator, GroupRecord, OffsetAndMetadata, Pending
from samsa.broker.group.migration import MigrationPolicy
from samsa.broker.group.records import (
    ConsumerGroupKey,
    CorruptRecordError,
    GroupMetadataKey,
    OffsetCommitKey,
    ResetAuditKey,
    StreamsGroupSnapshotKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
    encode_key,
    partition_for_group,
)
from samsa.broker.group.streams_config import StreamsGroupConfig
from samsa.broker.group.streams_coordinator import StreamsGroupCoordinator
from samsa.broker.group.streams_group import StreamsGroup
from samsa.broker.group.streams_keys import StreamsGroupKey
from samsa.broker.group_configs import GROUP_RESOURCE
from samsa.broker.internal_topic import (
    INTERNAL_SEGMENT_BYTES,
    InternalTopic,
    InternalTopicBroker,
    config_int,
    replay,
)
from samsa.kproto.errors import ErrorCode
from samsa.storage.errors import KafkaStorageError
from samsa.storage.log import Log

if TYPE_CHECKING:
    from samsa.broker.metadata.image import MetadataImage
    from samsa.broker.replica_manager import Partition
    from samsa.broker.topic_settings import TopicSettings

logger = logging.getLogger(__name__)

_GROUP_METADATA_KEY_TYPE = encode_key(GroupMetadataKey(""))[:2]

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

    def topic_settings(self, topic: str) -> TopicSettings: ...


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


def consumer_group_config(broker: GroupBroker) -> ConsumerGroupConfig:
    try:
        assignors = broker.config.get_list("group.consumer.assignors")
    except KeyError:
        assignors = ("uniform", "range")
    return ConsumerGroupConfig(
        session_timeout_ms=config_int(broker, "group.consumer.session.timeout.ms", 45_000),
        heartbeat_interval_ms=config_int(broker, "group.consumer.heartbeat.interval.ms", 5_000),
        max_size=config_int(broker, "group.consumer.max.size", 2**31 - 1),
        assignors=tuple(_assignor_name(a) for a in assignors),
        group_configs=lambda group_id: broker.image.configs.get((GROUP_RESOURCE, group_id), {}),
        assignment_interval_ms=lambda: _assignment_interval_ms(broker),
    )


def streams_group_config(broker: GroupBroker) -> StreamsGroupConfig:
    """Kafka's group.streams.* broker configs (a dynamic assignment interval is read at start only)."""
    def clamp(key: str, default: int, lower: int, upper: int) -> int:
        return min(max(config_int(broker, key, default), config_int(broker, f"group.streams.min.{key[14:]}", lower)),
                   config_int(broker, f"group.streams.max.{key[14:]}", upper))
    return StreamsGroupConfig(
        session_timeout_ms=clamp("group.streams.session.timeout.ms", 45_000, 45_000, 60_000),
        heartbeat_interval_ms=clamp("group.streams.heartbeat.interval.ms", 5_000, 5_000, 15_000),
        max_size=config_int(broker, "group.streams.max.size", 2**31 - 1),
        num_standby_replicas=config_int(broker, "group.streams.num.standby.replicas", 0),
        max_standby_replicas=config_int(broker, "group.streams.max.standby.replicas", 2),
        initial_rebalance_delay_ms=config_int(broker, "group.streams.initial.rebalance.delay.ms", 3_000),
        assignment_interval_ms=clamp("group.streams.assignment.interval.ms", 1_000, 0, 15_000),
        acceptable_recovery_lag=config_int(broker, "group.streams.acceptable.recovery.lag", 10_000),
        rack_aware_assignment_tags=tuple(t.strip() for t in _config_str(
            broker, "group.streams.rack.aware.assignment.tags", "").split(",") if t.strip()),
        group_configs=lambda group_id: broker.image.configs.get((GROUP_RESOURCE, group_id), {}))


def _assignment_interval_ms(broker: GroupBroker) -> int:
    """group.consumer.assignment.interval.ms as it is now (dynamic), clamped into the min/max bounds as Kafka's
    GroupCoordinatorConfig clamps a dynamic value."""
    lower = config_int(broker, "group.consumer.min.assignment.interval.ms", 0)
    upper = config_int(broker, "group.consumer.max.assignment.interval.ms", 15_000)
    return min(max(config_int(broker, "group.consumer.assignment.interval.ms", 1_000), lower), upper)


def _config_str(broker: GroupBroker, key: str, default: str) -> str:
    try:
        return broker.config.get(key)
    except KeyError:
        return default


def _assignor_name(value: str) -> str:
    """An assignor's name; Kafka's config also takes its class (org.apache...UniformAssignor: uniform)."""
    name = value.strip().rsplit(".", 1)[-1]
    return name[:-len("Assignor")].lower() if name.endswith("Assignor") else name.lower()


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Groups before a change, for `persist_replicated` to revert to. (Reset audits live only in the log:
    a refused append drops them with the rest of the change.)"""

    groups: list[offset_manager.GroupSnapshot]
    consumer_groups: tuple[tuple[str, ConsumerGroup | None], ...] = ()  # KIP-848 groups before the change
    streams_groups: tuple[tuple[str, StreamsGroup | None], ...] = ()  # KIP-1071 groups before the change


class GroupService:
    def __init__(self, broker: GroupBroker) -> None:
        self.broker = broker
        self.coordinator = GroupCoordinator(group_config(broker))
        # KIP-848 consumer groups: their records go out with the classic coordinator's, in order.
        self.consumer = ConsumerGroupCoordinator(consumer_group_config(broker), self.coordinator.emit,
                                                 self._classic_group_in_use, self._upgrade, self._downgrade)
        # KIP-1071 streams groups: their records go out with the classic coordinator's, in order.
        self.streams = StreamsGroupCoordinator(
            streams_group_config(broker), lambda g: g in self.consumer.groups or self._classic_group_in_use(g),
            self.coordinator.emit)
        self.migration_policy = MigrationPolicy.parse(_config_str(broker, "group.consumer.migration.policy",
                                                                  MigrationPolicy.BIDIRECTIONAL.value))
        self.num_partitions = config_int(broker, "offsets.topic.num.partitions", 50)
        segment_bytes = config_int(broker, "offsets.topic.segment.bytes", INTERNAL_SEGMENT_BYTES)
        self.topic = InternalTopic(broker, OFFSETS_TOPIC, self.num_partitions, "offsets.topic.replication.factor",
                                   {"cleanup.policy": "compact", "compression.type": "producer",
                                    "segment.bytes": str(segment_bytes)}, partition_for_group)
        self.last_load_records = 0  # records the last load replayed (bounded by live keys once compacted)
        self.retention_check_interval_ms = config_int(broker, "offsets.retention.check.interval.ms",
                                                       DEFAULT_OFFSETS_RETENTION_CHECK_INTERVAL_MS)
        self.commit_timeout_ms = config_int(broker, "offsets.commit.timeout.ms", DEFAULT_COMMIT_TIMEOUT_MS)
        # group id -> a timer's GroupMetadata record the log refused, appended again on the next tick.
        self._unstored: dict[str, GroupRecord] = {}
        # partition -> (end offset of an append, its groups' offsets before it), oldest first, until the
        # high watermark passes it: OffsetFetch answers the offsets as of the high watermark.
        self._unreplicated: dict[int, list[tuple[int, offset_manager.GroupSnapshot]]] = {}
        # A timer due before the next tick, set to fire at its time (see _fire_soon_timers) and when.
        self._soon: asyncio.TimerHandle | None = None
        self._soon_ms = 0
        self.load()

    def _upgrade(self, group_id: str, catalog: TopicCatalog, now: int) -> ConsumerGroup | None:
        return migration.upgrade(self.coordinator, self.consumer, group_id, catalog, self.migration_policy, now)

    def _downgrade(self, group: ConsumerGroup, leaving_member_id: str | None, now: int) -> bool:
        return migration.downgrade(self.coordinator, self.consumer, group, leaving_member_id, self.broker.image,
                                   self.migration_policy, now)

    def _classic_group_in_use(self, group_id: str) -> bool:
        """A classic group with members (or mid-rebalance) keeps its id from the consumer protocol; an
        empty one (or one that only holds offsets) is taken over, as Kafka converts an empty classic group."""
        group = self.coordinator.groups.get(group_id)
        return group is not None and bool(group.members) and group_id not in self.consumer.groups

    def delete_groups(self, group_ids: list[str], now: int) -> dict[str, ErrorCode]:
        """DeleteGroups for classic and consumer groups alike: only an empty group goes, with its offsets."""
        consumer = [g for g in group_ids if self.consumer.is_consumer_group(g) or self.streams.is_streams_group(g)]
        results = self.coordinator.delete_groups([g for g in group_ids if g not in consumer], now)
        for group_id in consumer:
            results[group_id] = (self.streams.delete_group(group_id) if self.streams.is_streams_group(group_id)
                                 else self.consumer.delete_group(group_id))
            if results[group_id] == ErrorCode.none and group_id in self.coordinator.groups:
                self.coordinator.delete_groups([group_id], now)  # the offsets it leaves
        return results

    # --- the internal topic -------------------------------------------------------------------

    def partition_for(self, group_id: str) -> int:
        return self.topic.partition_for(group_id)

    def ensure_offsets_topic(self) -> ErrorCode:
        return self.topic.ensure()

    def coordinator_error(self, group_id: str) -> ErrorCode:
        """NONE when this broker coordinates `group_id` (creating the internal topic if needed)."""
        return self.topic.coordinator_error(group_id)

    # --- persistence --------------------------------------------------------------------------

    def snapshot(self, group_ids: list[str], membership: bool = False) -> Snapshot:
        """The groups as they are now, as the log holds them: taken right before a change, in the same
        step of the event loop as the change and its append. `membership`: the change may add, replace
        or remove members (JoinGroup, LeaveGroup), so they are put back too."""
        return Snapshot([offset_manager.snapshot(self.coordinator.groups, g, membership) for g in group_ids])

    def consumer_snapshot(self, group_id: str) -> Snapshot:
        """A KIP-848 group as it is now, put back if the records of the change about to be made cannot be
        appended (`persist_replicated(before)`)."""
        return Snapshot([offset_manager.snapshot(self.coordinator.groups, group_id, membership=True)],
                        (self.consumer.snapshot(group_id),))

    def streams_snapshot(self, group_id: str) -> Snapshot:
        """A KIP-1071 group as it is now, put back if the records of its change cannot be appended."""
        return Snapshot([], streams_groups=(self.streams.snapshot(group_id),))

    def classic_join_to_consumer_group(self, group_id: str, now: int) -> bool:
        """Whether a classic JoinGroup goes to the KIP-848 group of that id (it has members: the joining member
        becomes a classic member of it, KIP-848's online migration). An empty consumer group turns into a
        classic one instead (its records are tombstoned, its offsets stay), as Kafka converts it."""
        if not self.consumer.is_consumer_group(group_id):
            return False
        self.consumer.fire_timers(group_id, now)
        self.persist()
        if self.consumer.has_members(group_id):
            return True
        if self.consumer.is_consumer_group(group_id):
            self.consumer.delete_group(group_id)
        return False

    def classic_request_to_consumer_group(self, group_id: str, now: int) -> bool:
        """Whether a SyncGroup, Heartbeat or LeaveGroup goes to the KIP-848 group of that id (after its timers,
        which may have turned it back into a classic group)."""
        if not self.consumer.is_consumer_group(group_id):
            return False
        self.consumer.fire_timers(group_id, now)
        self.persist()
        return self.consumer.is_consumer_group(group_id)

    def delete_offsets(self, group_id: str, partitions: list[tuple[str, int]],
                       now: int) -> tuple[ErrorCode, dict[tuple[str, int], ErrorCode]]:
        if self.consumer.is_consumer_group(group_id):
            return consumer_offsets.delete_offsets(self.coordinator, self.consumer, group_id, partitions, now)
        return self.coordinator.delete_offsets(group_id, partitions, now)

    def fire_timers(self, group_id: str, now: int) -> None:
        """Fire a group's due timers and write what they produced (retried if it fails), so that a request's
        snapshot taken next holds only the request's own change."""
        self.coordinator.fire_timers(group_id, now)
        self.persist()

    def persist(self) -> ErrorCode:
        """Append what the coordinator produced; an error means the last change may not be durable."""
        errors, _appended = self._append(None)
        return _first_error(errors.values())

    async def persist_replicated(self, before: Snapshot | None = None) -> ErrorCode:
        """Append what the coordinator produced and wait until every in-sync replica has it (see the
        module docstring): NONE, COORDINATOR_NOT_AVAILABLE or NOT_COORDINATOR. The groups of `before`
        whose records could not be appended are put back as they were."""
        return _first_error((await self.persist_replicated_by_partition(before)).values())

    async def persist_replicated_by_partition(self, before: Snapshot | None = None) -> dict[int, ErrorCode]:
        """`persist_replicated`, answered per __consumer_offsets partition written (DeleteGroups answers
        each group by its own partition, as Kafka's coordinator shards do)."""
        errors, appended = self._append(before)
        if not appended:
            return errors
        deadline = time.monotonic() + self.commit_timeout_ms / 1000
        min_isr = self.broker.topic_settings(OFFSETS_TOPIC).min_insync_replicas
        for index, (partition, end_offset, epoch) in appended.items():
            got = await partition.wait_replicated(end_offset, epoch, min_isr, deadline - time.monotonic())
            if got == ErrorCode.not_leader_or_follower:
                errors[index] = ErrorCode.not_coordinator
            elif got != ErrorCode.none:
                logger.info("group records in %s-%d not replicated: %s", OFFSETS_TOPIC, partition.partition_id,
                            got.name)
                errors[index] = ErrorCode.coordinator_not_available
        return errors

    def _append(self, before: Snapshot | None, retry_unstored: bool = False
                ) -> tuple[dict[int, ErrorCode], dict[int, tuple[Partition, int, int]]]:
        """Append the coordinator's records (and, on the timer's tick, the timer writes that failed before):
        the error of each partition written to, and (partition, end offset, leader epoch) of each append
        that was made. The groups of `before` in a partition whose append was not made are reverted; the
        timer writes in it are kept for the next tick."""
        errors: dict[int, ErrorCode] = {}
        appended: dict[int, tuple[Partition, int, int]] = {}
        by_partition: dict[int, list[GroupRecord]] = {}
        records = self.coordinator.drain_records()
        if retry_unstored:  # older than anything drained: they go first
            records[:0], self._unstored = list(self._unstored.values()), {}
        for record in records:
            by_partition.setdefault(self.partition_for(record.group_id), []).append(record)
        now = now_ms()
        for index, group_records in by_partition.items():
            errors[index] = self._append_partition(index, group_records, now)
            if errors[index] == ErrorCode.none:
                partition = self.broker.replica_manager.get_partition(OFFSETS_TOPIC, index)
                assert partition is not None
                appended[index] = (partition, partition.log.log_end_offset, partition.leader_epoch)
        for index, group_records in by_partition.items():
            for record in group_records:
                if not _is_group_metadata(record):
                    continue
                if errors[index] == ErrorCode.none:
                    self._unstored.pop(record.group_id, None)  # written, or superseded by a newer record
                elif record.by_timer and record.value is not None:
                    self._unstored[record.group_id] = record
        if before is not None:
            failed = {index for index, error in errors.items() if error != ErrorCode.none}
            for group in before.groups:
                index = self.partition_for(group.group_id)
                if index in failed:
                    offset_manager.revert(self.coordinator.groups, group)
                elif index in appended:
                    self._unreplicated.setdefault(index, []).append((appended[index][1], group))
            for consumer_group in before.consumer_groups:
                if self.partition_for(consumer_group[0]) in failed:
                    self.consumer.revert(consumer_group)
            for streams_group in before.streams_groups:
                if self.partition_for(streams_group[0]) in failed:
                    self.streams.revert(streams_group)
            for index in appended:
                self._committed_entries(index)  # forget what the high watermark has passed
        return errors, appended

    def committed_offsets(self, group_id: str) -> dict[tuple[str, int], OffsetAndMetadata]:
        """A group's offsets as of its partition's high watermark (what OffsetFetch answers): a change
        appended but not yet on every in-sync replica is not shown, as Kafka 4's coordinator reads its
        timeline data structures at the last committed offset. A leader that dies before replicating it
        leaves a new leader whose log lacks it, so no client saw an offset that is then lost."""
        index = self.partition_for(group_id)
        for _end_offset, before in self._committed_entries(index):
            if before.group_id == group_id:
                return dict(before.offsets)  # the oldest change not yet committed: what was there before it
        return self.coordinator.committed_offsets(group_id)

    def _committed_entries(self, index: int) -> list[tuple[int, offset_manager.GroupSnapshot]]:
        entries = self._unreplicated.get(index)
        if not entries:
            return []
        partition = self.broker.replica_manager.get_partition(OFFSETS_TOPIC, index)
        high_watermark = partition.log.high_watermark if partition is not None else 0
        entries[:] = [e for e in entries if e[0] > high_watermark]
        if not entries:
            del self._unreplicated[index]
        return entries

    def _append_partition(self, index: int, group_records: list[GroupRecord], now: int) -> ErrorCode:
        partition = self.broker.replica_manager.get_partition(OFFSETS_TOPIC, index)
        if partition is None:
            logger.error("cannot store %d group records: %s-%d is missing", len(group_records), OFFSETS_TOPIC, index)
            return ErrorCode.coordinator_not_available
        refused = self.min_isr_error(partition, len(group_records))
        if refused != ErrorCode.none:
            return refused
        try:
            partition.append_as_leader(encode_batch([(r.key, r.value) for r in group_records], now), now)
        except KafkaStorageError as e:
            # Kafka's GroupCoordinatorService.normalizeException: a storage error is NOT_COORDINATOR.
            logger.error("appending group records to %s-%d failed: %s", OFFSETS_TOPIC, index, e)
            return ErrorCode.not_coordinator
        except Exception as e:  # any other StorageError and friends: the client retries against us
            logger.error("appending group records to %s-%d failed: %s", OFFSETS_TOPIC, index, e)
            return ErrorCode.coordinator_not_available
        return ErrorCode.none

    def min_isr_error(self, partition: Partition, record_count: int) -> ErrorCode:
        """The coordinators write with acks=-1, so Kafka refuses the append before writing anything when the
        ISR is below min.insync.replicas (NOT_ENOUGH_REPLICAS, which GroupCoordinatorService answers as
        COORDINATOR_NOT_AVAILABLE, for OffsetCommit and TxnOffsetCommit alike)."""
        min_isr = self.broker.topic_settings(OFFSETS_TOPIC).min_insync_replicas
        if len(partition.isr) >= min_isr:
            return ErrorCode.none
        logger.warning("not storing %d group records: %s-%d has %d in-sync replicas, fewer than %d", record_count,
                       OFFSETS_TOPIC, partition.partition_id, len(partition.isr), min_isr)
        return ErrorCode.coordinator_not_available

    def expire_offsets(self, now: int) -> int:
        """Write the tombstones of expired offsets (and of the groups they leave empty), then remove what
        was written: a partition that refused them keeps its offsets until the next run."""
        with consumer_offsets.subscribed_offsets_hidden(self.coordinator, self.consumer):
            expiries = self.coordinator.expire_offsets(now)
        errors, _appended = self._append(None, retry_unstored=True)
        expired = 0
        for expiry in expiries:
            if errors.get(self.partition_for(expiry.group_id), ErrorCode.none) == ErrorCode.none:
                self.coordinator.apply_expiry(expiry, now)
                expired += len(expiry.partitions)
        return expired

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
        self.last_load_records = count
        self.coordinator.finish_loading(now)
        self.consumer.finish_loading(self.broker.image, now)
        self.streams.finish_loading(now)
        logger.info("loaded %d group records (%d groups) from %s in %.2f s", count, len(self.coordinator.groups),
                    OFFSETS_TOPIC, time.monotonic() - started)

    def on_metadata(self, image: MetadataImage) -> None:
        """Replay __consumer_offsets partitions this broker has come to lead (Kafka: onElection) and
        forget the groups of those it no longer leads (onResignation), so that a later return of the
        leadership replays the log rather than trusting state another coordinator has moved on from."""
        lost = self.topic.take_lost()
        if lost:
            # A timer write still to retry belongs to the new leader now: it replays the log and decides.
            self._unstored = {g: r for g, r in self._unstored.items() if self.partition_for(g) not in lost}
            for index in lost:
                self._unreplicated.pop(index, None)
            count = self.coordinator.unload(lambda group_id: self.partition_for(group_id) in lost)
            count += self.consumer.unload(lambda group_id: self.partition_for(group_id) in lost)
            count += self.streams.unload(lambda group_id: self.partition_for(group_id) in lost)
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
                    case ConsumerGroupKey():
                        self.consumer.replay(decoded.record_type, decoded.group_id, decoded.member_id, value)
                    case StreamsGroupKey():
                        self.streams.replay(decoded, value)
                    case StreamsGroupSnapshotKey():
                        self.streams.replay_legacy(decoded.group_id, value)
                    case None:
                        pass  # a record type of a newer Kafka (KIP-848 groups, share groups): not ours
            except (CorruptRecordError, ValueError, UnicodeDecodeError) as e:
                logger.warning("skipping an unreadable %s record at offset %d: %s", OFFSETS_TOPIC,
                               record_offset, e)
        return count

    # --- delayed operations and timers --------------------------------------------------------

    async def wait(self, pending: Pending[T], on_timeout: Callable[[], T]) -> T:
        if pending.result is None:
            self._fire_soon_timers()
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
                expire = now - last_expiry >= self.retention_check_interval_ms
                if expire:
                    last_expiry = now
                self.on_tick(now, expire)
            except Exception:
                logger.exception("group coordinator timer failed")

    def _fire_soon_timers(self) -> None:
        """A timer due before the next tick fires at its time: the initial join of a new group with
        group.initial.rebalance.delay.ms=0 completes 1 ms after its first JoinGroup (Kafka: at once, after
        the requests already queued), not up to a tick later."""
        deadline = self.coordinator.next_deadline_ms()
        if deadline is None:
            return
        delay_ms = deadline - now_ms()
        if delay_ms >= TICK_INTERVAL_S * 1000 or (self._soon is not None and self._soon_ms <= deadline):
            return
        if self._soon is not None:
            self._soon.cancel()
        self._soon_ms = deadline
        self._soon = asyncio.get_running_loop().call_later(max(delay_ms, 0) / 1000, self._on_soon_timer)

    def _on_soon_timer(self) -> None:
        self._soon = None
        try:
            self.on_tick(now_ms())
            self._fire_soon_timers()  # a timer the tick set again (a member joined during the last round)
        except Exception:
            logger.exception("group coordinator timer failed")

    def on_tick(self, now: int, expire_offsets: bool = False) -> None:
        """One tick of the timer: fire every due timer, expire offsets when it is time, and write what
        they produced together with the timer writes that failed before."""
        self.coordinator.tick(now)
        self.consumer.tick(now)
        self.streams.tick(self.broker.image, now)
        if expire_offsets:
            expired = self.expire_offsets(now)
            if expired:
                logger.info("expired %d committed offsets", expired)
        self._append(None, retry_unstored=True)

def coordinator_append_error(error: ErrorCode) -> ErrorCode:
    """What a coordinator answers for an append that failed with `error` (Kafka's
    GroupCoordinatorService.normalizeException): the client finds the coordinator again and retries."""
    if error in (ErrorCode.unknown_topic_or_partition, ErrorCode.not_enough_replicas, ErrorCode.request_timed_out):
        return ErrorCode.coordinator_not_available
    if error in (ErrorCode.not_leader_or_follower, ErrorCode.kafka_storage_error):
        return ErrorCode.not_coordinator
    if error in (ErrorCode.message_too_large, ErrorCode.record_list_too_large, ErrorCode.invalid_fetch_size):
        return ErrorCode.unknown_server_error
    return error


def _is_group_metadata(record: GroupRecord) -> bool:
    """A GroupMetadata record or tombstone (its key's first two bytes are its type)."""
    return record.key[:2] == _GROUP_METADATA_KEY_TYPE


def _first_error(errors: Iterable[ErrorCode]) -> ErrorCode:
    return next((e for e in errors if e != ErrorCode.none), ErrorCode.none)
