"""A coordinator's internal topic (`__consumer_offsets`, `__transaction_state`): create, locate, replay.

Both coordinators, like Kafka's, create their topic on first use with a replication factor no larger
than the live brokers, are coordinator for a key where they lead the key's partition, and at start-up
(or on becoming leader) replay each partition they lead from its log start to its log end.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Protocol

from samsa.broker.controller import TopicSpec
from samsa.broker.group.batches import iter_records
from samsa.kproto.errors import ErrorCode

if TYPE_CHECKING:
    from samsa.broker.config import BrokerConfig
    from samsa.broker.controller import Controller, TopicResult
    from samsa.broker.metadata.image import BrokerImage, MetadataImage
    from samsa.broker.replica_manager import Partition, ReplicaManager
    from samsa.storage.log import Log

logger = logging.getLogger(__name__)

LOAD_READ_BYTES = 1 << 20  # how much of an internal topic's log a replay reads at a time
INTERNAL_SEGMENT_BYTES = 100 * 1024 * 1024  # Kafka's offsets.topic.segment.bytes / transaction.state.log.segment.bytes


class InternalTopicBroker(Protocol):
    """What an internal topic uses of its broker (samsa.broker.broker.Broker is one)."""

    @property
    def node_id(self) -> int: ...
    @property
    def config(self) -> BrokerConfig: ...
    @property
    def image(self) -> MetadataImage: ...
    @property
    def controller(self) -> Controller: ...
    @property
    def replica_manager(self) -> ReplicaManager: ...
    def create_topics_soon(self, specs: Sequence[TopicSpec]) -> list[TopicResult] | None: ...
    def partition_leader(self, topic: str, partition: int) -> tuple[ErrorCode, BrokerImage | None]: ...


def config_int(broker: InternalTopicBroker, key: str, default: int) -> int:
    """A broker config as an int, `default` where the broker's config does not define `key`."""
    try:
        return broker.config.get_int(key)
    except KeyError:
        return default


class InternalTopic:
    """One coordinator's topic: `partition_of(key, partitions)` maps a group or transactional id to its
    partition; `replication_factor_key` names the config (Kafka: offsets.topic.replication.factor,
    transaction.state.log.replication.factor); `configs` are the topic configs it is created with."""

    def __init__(self, broker: InternalTopicBroker, name: str, num_partitions: int, replication_factor_key: str,
                 configs: Mapping[str, str], partition_of: Callable[[str, int], int]) -> None:
        self.broker = broker
        self.name = name
        self.num_partitions = num_partitions
        self._replication_factor_key = replication_factor_key
        self._configs = dict(configs)
        self._partition_of = partition_of
        self.loaded: set[int] = set()  # partitions replayed into the coordinator

    def partition_for(self, key: str) -> int:
        topic = self.broker.image.topics_by_name.get(self.name)
        partitions = len(topic.partitions) if topic is not None else self.num_partitions
        return self._partition_of(key, partitions)

    def ensure(self) -> ErrorCode:
        """NONE once the topic exists (created now if need be); COORDINATOR_NOT_AVAILABLE until then."""
        if self.name in self.broker.image.topics_by_name:
            return ErrorCode.none
        live = len(self.broker.controller.live_brokers())
        rf = max(1, min(config_int(self.broker, self._replication_factor_key, 3), live))
        results = self.broker.create_topics_soon([TopicSpec(self.name, self.num_partitions, rf,
                                                            configs=dict(self._configs))])
        if results is None:
            return ErrorCode.coordinator_not_available  # being created through the active controller
        (result,) = results
        if result.error_code not in (ErrorCode.none, ErrorCode.topic_already_exists):
            logger.error("could not create %s: %s %s", self.name, result.error_code.name, result.error_message)
            return ErrorCode.coordinator_not_available
        logger.info("created %s with %d partitions", self.name, self.num_partitions)
        return ErrorCode.none

    def coordinator_error(self, key: str) -> ErrorCode:
        """NONE when this broker coordinates `key` (creating the topic if needed)."""
        error = self.ensure()
        if error != ErrorCode.none:
            return error
        index = self.partition_for(key)
        partition = self.broker.replica_manager.get_partition(self.name, index)
        if partition is None or partition.leader_id != self.broker.node_id:
            # Another broker leads the partition (FindCoordinator names it), or nobody does yet.
            error, _node = self.broker.partition_leader(self.name, index)
            return ErrorCode.not_coordinator if error == ErrorCode.none else error
        return ErrorCode.none

    def partitions_to_load(self) -> Iterator[tuple[int, Partition]]:
        """The partitions this broker leads and has not replayed yet (marked loaded as they are yielded)."""
        topic = self.broker.image.topics_by_name.get(self.name)
        if topic is None:
            return
        for index in sorted(topic.partitions):
            partition = self.broker.replica_manager.get_partition(self.name, index)
            if partition is None or index in self.loaded or partition.leader_id != self.broker.node_id:
                continue
            self.loaded.add(index)
            yield index, partition

    def take_lost(self) -> set[int]:
        """Loaded partitions this broker no longer leads (Kafka: onResignation), forgotten as loaded."""
        lost = set()
        for index in self.loaded:
            partition = self.broker.replica_manager.get_partition(self.name, index)
            if partition is None or partition.leader_id != self.broker.node_id:
                lost.add(index)
        self.loaded -= lost
        return lost


def replay(log: Log) -> Iterator[tuple[int, bytes, bytes | None]]:
    """(offset, key, value) of each keyed record from the log start to the log end (Kafka loads to the
    log end: a new leader's high watermark lags its log); stops at a read that makes no progress."""
    offset = log.log_start_offset
    end = log.log_end_offset
    while offset < end:
        data = log.read(offset, max_bytes=LOAD_READ_BYTES, max_offset=end).read_bytes()
        if not data:
            break
        last = offset - 1
        for record_offset, key, value in iter_records(data):
            last = record_offset
            if record_offset < offset or key is None:
                continue
            yield record_offset, key, value
        if last < offset:
            break
        offset = last + 1
