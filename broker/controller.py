"""The controller: validates metadata changes and turns them into records on the metadata quorum.

Every node with the controller role has one; only the active controller (the Raft leader) can
write, and a write is done when the quorum commits it. A mutating method validates against the
current image, proposes its records as one entry, and returns a `Pending` result: `await` it for
the commit (NotControllerError if leadership was lost meanwhile), or check `.done` — a one-voter
quorum commits before the method returns. Errors a client should see are Kafka error codes as values.

This module holds the image the controller decides on, the write path, producer-id blocks and
AlterPartition; its parts decide the rest through the ControllerCore interface (Kafka's split):
broker.cluster_control (brokers), broker.topic_control (topics and configs), broker.reassignment
(elections and reassignments).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import TypeVar

from samsa.broker.cluster_control import ClusterControl
from samsa.broker.config import BrokerConfig
from samsa.broker.controller_registrations import ControllerRegistrations
from samsa.broker.controller_types import (
    MAX_RECORDS_PER_USER_OP,
    AlterPartitionChange,
    AlterPartitionResult,
    ConfigChange,
    HeartbeatResult,
    PartitionsSpec,
    Pending,
    TooManyRecordsError,
    TopicResult,
    TopicSpec,
    new_topic_id,
)
from samsa.broker.metadata.image import MetadataImage
from samsa.broker.metadata.quorum import MetadataQuorum, NotControllerError
from samsa.broker.metadata.records import MetadataRecord, ProducerIdsRecord
from samsa.broker.reassignment import ReassignmentControl, isr_change
from samsa.broker.security.acl_control import AclControl
from samsa.broker.topic_control import TopicControl
from samsa.kproto.errors import ErrorCode

__all__ = [
    "MAX_RECORDS_PER_USER_OP",
    "PRODUCER_ID_BLOCK_SIZE",
    "AlterPartitionChange",
    "AlterPartitionResult",
    "ConfigChange",
    "Controller",
    "HeartbeatResult",
    "PartitionsSpec",
    "Pending",
    "TooManyRecordsError",
    "TopicResult",
    "TopicSpec",
    "new_topic_id",
]

logger = logging.getLogger(__name__)
T = TypeVar("T")

# Producer ids are handed out from blocks recorded in the metadata log (Kafka's AllocateProducerIds,
# KIP-730): a block is persisted before any id in it is used, so ids are never reused, even across
# restarts (a restart abandons the rest of the current block).
PRODUCER_ID_BLOCK_SIZE = 1000


class Controller:
    def __init__(self, config: BrokerConfig, quorum: MetadataQuorum) -> None:
        self._config = config
        self._quorum = quorum
        self.node_id = config.node_id
        self._working: MetadataImage | None = None  # committed image + uncommitted own writes
        self._working_epoch = -1
        self._uncommitted = 0
        # the parts, each deciding through this controller's ControllerCore interface
        self.cluster = ClusterControl(self, self.node_id)
        self.topics = TopicControl(self, self.node_id)
        # ElectLeaders, partition reassignments and the leader balancer (broker.reassignment)
        self.reassignments = ReassignmentControl(self)
        # CreateAcls / DeleteAcls (broker.security.acl_control)
        self.acls = AclControl(self)
        # KIP-919 registrations and UnregisterController (broker.controller_registrations)
        self.registrations = ControllerRegistrations(self, quorum, self.node_id)

    # --- the ControllerCore interface ----------------------------------------------------------------

    @property
    def config(self) -> BrokerConfig:
        return self._config

    @property
    def image(self) -> MetadataImage:
        """What the controller decides on: the committed image plus its own writes still waiting for
        their commit (Kafka's controller keeps uncommitted state the same way), so two requests in
        flight together cannot both take the same producer-id block or create the same topic."""
        working = self._working
        if working is not None and self._working_epoch == self._quorum.epoch and self._quorum.is_leader:
            return working
        return self._quorum.image

    @property
    def active(self) -> bool:
        return self._quorum.is_leader

    def _write(self, records: Sequence[MetadataRecord]) -> asyncio.Future[int] | int | None:
        if not records:
            return None
        base = self.image
        result = self._quorum.write_nowait(records)
        if isinstance(result, int):
            return result  # committed at once (one voter): the quorum's image has it
        self._working = base.apply(records, base.offset + 1)
        self._working_epoch = self._quorum.epoch
        self._uncommitted += 1
        result.add_done_callback(self._committed)
        return result

    def _committed(self, _future: asyncio.Future[int]) -> None:
        self._uncommitted -= 1
        if self._uncommitted == 0 or _future.cancelled() or _future.exception() is not None:
            # all in: the committed image is the whole truth again (or leadership was lost with it)
            self._working = None

    def commit(self, value: T, records: Sequence[MetadataRecord]) -> Pending[T]:
        return Pending(value, self._write(records))

    def require_active(self) -> None:
        if not self._quorum.is_leader:
            raise NotControllerError(self._quorum.leader_id)

    def unclean_allowed(self, image: MetadataImage, topic: str) -> bool:
        value = image.topic_configs(topic).get("unclean.leader.election.enable")
        if value is None:
            value = self._config.get("unclean.leader.election.enable")
        return str(value).lower() == "true"

    # --- producer ids (Kafka's AllocateProducerIds, KIP-730) ---------------------------------------

    def allocate_producer_ids(self, broker_id: int, broker_epoch: int) -> Pending[tuple[int, int]]:
        """A block of PRODUCER_ID_BLOCK_SIZE ids, recorded before any of them is used."""
        self.require_active()
        start = self.image.next_producer_id
        end = start + PRODUCER_ID_BLOCK_SIZE
        return self.commit((start, PRODUCER_ID_BLOCK_SIZE), [ProducerIdsRecord(broker_id, broker_epoch, end)])

    # --- brokers (broker.cluster_control) ------------------------------------------------------------

    @property
    def unclean_elections(self) -> int:
        return self.cluster.unclean_elections

    def live_brokers(self) -> tuple[int, ...]:
        return self.image.live_brokers()

    def register_broker(self, broker_id: int, incarnation_id: str, host: str, port: int,
                        rack: str | None, now_ms: float, listeners: str = "") -> Pending[int]:
        return self.cluster.register_broker(broker_id, incarnation_id, host, port, rack, now_ms, listeners)

    def heartbeat(self, broker_id: int, broker_epoch: int, metadata_offset: int, want_fence: bool,
                  want_shut_down: bool, now_ms: float) -> tuple[ErrorCode, Pending[HeartbeatResult] | None]:
        return self.cluster.heartbeat(broker_id, broker_epoch, metadata_offset, want_fence, want_shut_down, now_ms)

    def fence_expired_brokers(self, now_ms: float) -> Pending[list[int]] | None:
        return self.cluster.fence_expired_brokers(now_ms)

    def unregister_broker(self, broker_id: int) -> tuple[ErrorCode, Pending[None] | None]:
        return self.cluster.unregister_broker(broker_id)

    # --- partition leaders and ISR (AlterPartition, for partition leaders) -------------------------

    def alter_partition(
        self, broker_id: int, broker_epoch: int, changes: Sequence[AlterPartitionChange]
    ) -> tuple[ErrorCode, Pending[list[AlterPartitionResult]] | None]:
        """A leader asks to change its partitions' ISR (Kafka: ReplicationControlManager.alterPartition).

        Each change names the leader epoch and partition epoch it was computed from; a stale one is
        refused (FENCED_LEADER_EPOCH / INVALID_UPDATE_VERSION) so two leaders cannot race. The new ISR
        must hold the leader, name only assigned replicas, and only live (unfenced) brokers. A partition
        named twice in one request gets INVALID_REQUEST the second time, so the records of one request
        are at most one per partition of the cluster.
        """
        self.require_active()
        image = self.image
        registration = image.brokers.get(broker_id)
        if registration is None or registration.broker_epoch != broker_epoch:
            return ErrorCode.stale_broker_epoch, None
        live = set(image.live_brokers())
        results: list[AlterPartitionResult] = []
        records: list[MetadataRecord] = []
        seen: set[tuple[str, int]] = set()
        for change in changes:
            topic = image.topics_by_id.get(change.topic_id)
            p = topic.partitions.get(change.partition_id) if topic is not None else None
            if (change.topic_id, change.partition_id) in seen:
                # Both would be decided on the same image and written as two records: one request
                # could then inflate one entry without bound. The first change stands.
                results.append(AlterPartitionResult(change, ErrorCode.invalid_request))
                continue
            seen.add((change.topic_id, change.partition_id))
            if topic is None:
                results.append(AlterPartitionResult(change, ErrorCode.unknown_topic_id))
                continue
            if p is None:
                results.append(AlterPartitionResult(change, ErrorCode.unknown_topic_or_partition))
                continue
            error = ErrorCode.none
            if p.leader != broker_id:
                error = ErrorCode.not_leader_or_follower
            elif change.leader_epoch != p.leader_epoch:
                error = ErrorCode.fenced_leader_epoch
            elif change.partition_epoch != p.partition_epoch:
                error = ErrorCode.invalid_update_version
            elif broker_id not in change.new_isr or not set(change.new_isr) <= set(p.replicas):
                error = ErrorCode.invalid_request
            elif not set(change.new_isr) <= live | {broker_id}:
                error = ErrorCode.ineligible_replica
            if error != ErrorCode.none:
                results.append(AlterPartitionResult(change, error, p.leader, p.leader_epoch, p.isr,
                                                    p.partition_epoch))
                continue
            new_isr = tuple(change.new_isr)
            if new_isr != p.isr:
                # a reassignment under way may complete in the same record (broker.reassignment)
                record = isr_change(image, topic.topic_id, p, new_isr)
                records.append(record)
                epoch = p.partition_epoch + 1
                if record.leader is not None and record.leader != broker_id:
                    results.append(AlterPartitionResult(change, ErrorCode.new_leader_elected))  # as Kafka
                    continue
                new_isr = record.isr if record.isr is not None else p.isr
            else:
                epoch = p.partition_epoch
            results.append(AlterPartitionResult(change, ErrorCode.none, p.leader, p.leader_epoch, new_isr, epoch))
        return ErrorCode.none, self.commit(results, records)

    # --- topics and configs (broker.topic_control) ---------------------------------------------------

    def create_topics(self, specs: Sequence[TopicSpec], *, validate_only: bool) -> Pending[list[TopicResult]]:
        return self.topics.create_topics(specs, validate_only=validate_only)

    def delete_topics(self, names: Sequence[str]) -> Pending[list[tuple[str, str | None, ErrorCode]]]:
        return self.topics.delete_topics(names)

    def create_partitions_many(
        self, specs: Sequence[PartitionsSpec], *, validate_only: bool
    ) -> Pending[list[tuple[str, ErrorCode, str | None]]]:
        return self.topics.create_partitions(specs, validate_only=validate_only)

    def create_partitions(
        self, name: str, count: int, assignments: Sequence[tuple[int, ...]] | None, *, validate_only: bool
    ) -> Pending[tuple[ErrorCode, str | None]]:
        """One topic's CreatePartitions: (error, message)."""
        try:
            pending = self.topics.create_partitions([PartitionsSpec(name, count, assignments)],
                                                    validate_only=validate_only)
        except TooManyRecordsError as e:
            return Pending((e.error_code, e.message), None)
        return pending.map(lambda results: (results[0][1], results[0][2]))

    def alter_topic_configs(
        self, name: str, changes: Mapping[str, str | None], *, replace_all: bool, validate_only: bool
    ) -> Pending[tuple[ErrorCode, str | None]]:
        return self.topics.alter_topic_configs(name, changes, replace_all=replace_all, validate_only=validate_only)

    def alter_configs(
        self, resources: Sequence[ConfigChange], *, replace_all: bool, validate_only: bool
    ) -> Pending[list[tuple[ErrorCode, str | None]]]:
        """AlterConfigs / IncrementalAlterConfigs as one operation (broker.topic_control.alter_configs)."""
        return self.topics.alter_configs(resources, replace_all=replace_all, validate_only=validate_only)

    def alter_broker_configs(
        self, resource_name: str, changes: Mapping[str, str | None], *, replace_all: bool, validate_only: bool
    ) -> Pending[tuple[ErrorCode, str | None]]:
        return self.topics.alter_broker_configs(resource_name, changes, replace_all=replace_all,
                                                validate_only=validate_only)
