"""The replica manager: one `Partition` per hosted topic-partition, kept in step with the metadata image.

Mirrors Kafka's ReplicaManager/Partition: a broker hosts the partitions whose replica list names it
and leads those whose leader it is. A leader tracks each follower's log end offset (learned from the
follower's fetches), advances the high watermark to the smallest log end offset of the in-sync
replicas (the ISR committed in the metadata image: never one that is still being changed), wakes
long-polling fetches and acks=all produces when it moves, and asks the controller to shrink the ISR
when a follower lags longer than replica.lag.time.max.ms and to expand it when a follower has caught
up (AlterPartition). Followers fetch from their leader (broker.replica_fetcher).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from samsa.broker.config import BrokerConfig, log_config_for
from samsa.broker.log_pacer import Created, LogPacer, StepDone
from samsa.broker.metadata.image import MetadataImage, PartitionImage
from samsa.broker.metadata.log import METADATA_TOPIC
from samsa.kproto.errors import ErrorCode
from samsa.kproto.records import ControlType, encode_control_batch
from samsa.storage.config import LogConfig
from samsa.storage.errors import InvalidProducerEpochError, KafkaStorageError
from samsa.storage.log import Log, LogAppendInfo
from samsa.storage.log_manager import LogManager
from samsa.storage.txn_index import AbortedTxn, TransactionIndex

logger = logging.getLogger(__name__)


def _report_failure(future: asyncio.Future[None]) -> None:
    if not future.cancelled() and future.exception() is not None:
        # the renamed directories stay; the next start removes them (LogManager.load_logs)
        logger.error("removing deleted partition logs failed: %s", future.exception())


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class FollowerState:
    """What the leader knows of one follower (Kafka: Replica)."""

    log_end_offset: int = -1
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    leader_end_offset_at_last_fetch: int = -1


@dataclass(eq=False, slots=True)
class Partition:
    topic: str
    partition_id: int
    topic_id: str
    log: Log
    leader_id: int
    leader_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    partition_epoch: int = 0
    node_id: int = -1
    _waiters: set[anyio.Event] = field(default_factory=set)
    _txn_index: TransactionIndex | None = None
    followers: dict[int, FollowerState] = field(default_factory=dict)
    # the log end offset when this broker became leader in leader_epoch: a follower joins the ISR only
    # once it has reached it (Kafka's leaderEpochStartOffset)
    leader_epoch_start_offset: int = 0
    # an AlterPartition in flight for this partition (the ISR it asked for), None when none is
    pending_isr: tuple[int, ...] | None = None
    pending_since_ms: int = 0
    # Replicas an AlterPartition asked to add whose outcome the metadata has not shown yet: an answer
    # lost to a timeout may hide an expansion the controller committed. The high watermark waits for
    # them while they keep up (see maximal_isr).
    possibly_added: set[int] = field(default_factory=set)
    # Idempotent producers whose batch this leader refused NOT_ENOUGH_REPLICAS before appending it:
    # producer id -> (epoch, the first refused sequence, when in ms); see broker/handlers/produce.py.
    refused_sequences: dict[int, tuple[int, int, int]] = field(default_factory=dict)
    lag_max_ms: int = 30_000
    # The first unstable offset (the earliest open transaction's first offset, None: none open) and the
    # producer-state txn_version it was computed at: every fetch reports the last stable offset, and
    # recomputing it walks every producer of the partition.
    _first_unstable: int | None = None
    _first_unstable_version: int = 0

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.node_id

    # --- transactions (issue 5) ---------------------------------------------------------------

    @property
    def txn_index(self) -> TransactionIndex:
        index = self._txn_index
        first_base = self.log.segments[0].base_offset
        if index is None:
            index = TransactionIndex.open(self.log.directory, self.log.segments, self.log.log_end_offset)
            self._txn_index = index
        index.delete_below(first_base)
        return index

    def take_dirty_txn_index_files(self) -> list[Path]:
        return self._txn_index.take_dirty() if self._txn_index is not None else []

    @property
    def last_stable_offset(self) -> int:
        """min(first unstable offset, high watermark) (Kafka's UnifiedLog.lastStableOffset); the first
        unstable offset is recomputed only when an open transaction began or ended."""
        log = self.log
        version = log.producer_txn_version
        if version != self._first_unstable_version:
            self._first_unstable = log.first_unstable_offset()
            self._first_unstable_version = version
        first = self._first_unstable
        high_watermark = log.high_watermark
        return high_watermark if first is None or first >= high_watermark else first

    def aborted_transactions(self, start_offset: int, upper_offset: int) -> list[AbortedTxn]:
        return self.txn_index.collect_aborted_transactions(start_offset, upper_offset)

    def write_txn_marker(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, committed: bool,
                         now: int, transaction_version: int = 0) -> LogAppendInfo:
        """Append a COMMIT/ABORT control batch; an abort also gets an entry in the aborted-transaction index.

        Raises StorageError (e.g. InvalidProducerEpochError for a marker older than the producer's epoch). A
        transaction version 2 marker (WriteTxnMarkers v2, KIP-1228) must be newer than the epoch of the
        producer's open transaction: its coordinator bumps the epoch before writing the markers, so an equal
        epoch there is a marker of an older transaction, refused as Kafka 4.4's ProducerAppendInfo does. With
        no transaction open, an equal epoch is the coordinator's retry of a marker written already (its answer
        lost, or the coordinator moved): written again, as Kafka does (KAFKA-19999).
        """
        entry = self.log.producer_state(producer_id)
        if (transaction_version >= 2 and entry is not None and producer_epoch == entry.producer_epoch
                and entry.current_txn_first_offset is not None):
            raise InvalidProducerEpochError(f"producer {producer_id}: transaction version {transaction_version} "
                                            f"marker epoch {producer_epoch} is not newer than its transaction's")
        first_offset = entry.current_txn_first_offset if entry is not None else None
        index = self.txn_index  # opened before the append, so the new entry is not read back twice
        batch = encode_control_batch(ControlType.COMMIT if committed else ControlType.ABORT,
                                     producer_id=producer_id, producer_epoch=producer_epoch,
                                     coordinator_epoch=coordinator_epoch, timestamp_ms=now)
        info = self.append_as_leader(bytearray(batch), now)
        if not committed and first_offset is not None:
            index.append(self.log.active_segment.base_offset,
                         AbortedTxn(producer_id, first_offset, info.last_offset, self.last_stable_offset))
        return info

    def append_as_leader(self, records: bytearray, now: int) -> LogAppendInfo:
        info = self.log.append_as_leader(records, leader_epoch=self.leader_epoch, now_ms=now)
        if not info.duplicate:
            self.maybe_advance_high_watermark()  # at once when this broker is the only in-sync replica
            self.log.maybe_flush(now)
            self.wake_waiters()
        return info

    # --- replication, leader side -----------------------------------------------------------------

    def maximal_isr(self, now: int) -> set[int]:
        """The ISR as it may be once pending changes land (Kafka's maximalIsr): the committed ISR, plus
        the replicas an expansion in flight adds, plus those an earlier expansion may have added that
        still keep up. A shrink takes effect only once committed. The high watermark is computed over
        this set: a replica the controller puts in the ISR must hold everything acknowledged, or its
        election would lose acknowledged records."""
        members = set(self.isr)
        if self.pending_isr is not None:
            members.update(self.pending_isr)
        for replica in self.possibly_added:
            state = self.followers.get(replica)
            if state is not None and now - state.last_caught_up_ms <= self.lag_max_ms:
                members.add(replica)
        return members

    def maybe_advance_high_watermark(self) -> bool:
        """The smallest log end offset over the maximal ISR (this leader's included); never backwards."""
        log = self.log
        hw = log.log_end_offset
        for replica in self.maximal_isr(int(time.time() * 1000)):
            if replica == self.node_id:
                continue
            state = self.followers.get(replica)
            hw = min(hw, state.log_end_offset if state is not None else -1)
        if hw > log.high_watermark:
            log.advance_high_watermark(hw)
            return True
        return False

    def update_follower(self, replica: int, fetch_offset: int, now: int) -> bool:
        """A follower fetched at `fetch_offset` (so it holds everything below it); True if the high
        watermark moved. Kafka's Replica.updateFetchState for the caught-up time."""
        state = self.followers.get(replica)
        if state is None:
            state = self.followers[replica] = FollowerState()
        leo = self.log.log_end_offset
        if fetch_offset >= leo:
            state.last_caught_up_ms = now
        elif fetch_offset >= state.leader_end_offset_at_last_fetch >= 0:
            state.last_caught_up_ms = max(state.last_caught_up_ms, state.last_fetch_ms)
        state.log_end_offset = fetch_offset
        state.last_fetch_ms = now
        state.leader_end_offset_at_last_fetch = leo
        if self.maybe_advance_high_watermark():
            self.wake_waiters()
            return True
        return False

    def divergence(self, last_fetched_epoch: int, fetch_offset: int) -> tuple[int, int] | None:
        """(epoch, end offset) where a follower's log stops agreeing with ours, or None if it agrees:
        its last fetched epoch must end, in our history, at or after its fetch offset (Kafka's
        Partition.validateLastFetchedEpoch)."""
        if last_fetched_epoch < 0:
            return None
        log = self.log
        epoch, end_offset = log.end_offset_for_epoch(last_fetched_epoch)
        if epoch < 0:
            latest = log.latest_epoch()
            if latest is not None and last_fetched_epoch > latest:
                # the follower saw an epoch we never wrote in: we agree at most up to our own end
                epoch, end_offset = latest, log.log_end_offset
            else:
                # nothing in common that we know of: the follower starts again from our log start
                epoch, end_offset = -1, log.log_start_offset
        if epoch != last_fetched_epoch or end_offset < fetch_offset:
            return epoch, end_offset
        return None

    def isr_change(self, now: int, lag_max_ms: int, live: set[int]) -> tuple[int, ...] | None:
        """The ISR this leader should ask for, or None: followers that have not caught up within
        lag_max_ms leave (Kafka's maybeShrinkIsr), followers at or past the high watermark and this
        epoch's start come back (maybeExpandIsr)."""
        self.lag_max_ms = lag_max_ms
        if not self.is_leader or self.pending_isr is not None:
            return None
        hw = self.log.high_watermark
        isr = [self.node_id]
        for replica in self.replicas:
            if replica == self.node_id:
                continue
            state = self.followers.get(replica)
            if replica in self.isr:
                if state is None:
                    # no fetch since this broker became leader: a full lag period from now
                    state = self.followers[replica] = FollowerState(last_caught_up_ms=now)
                if now - state.last_caught_up_ms <= lag_max_ms:
                    isr.append(replica)
            elif (state is not None and replica in live and state.log_end_offset >= hw
                  and state.log_end_offset >= self.leader_epoch_start_offset
                  and now - state.last_caught_up_ms <= lag_max_ms):
                isr.append(replica)
        ordered = tuple(r for r in self.replicas if r in isr)
        return None if set(ordered) == set(self.isr) else ordered

    def leader_error(self, node_id: int, current_leader_epoch: int) -> ErrorCode | None:
        """KIP-320's check (Kafka's Partition.checkCurrentLeaderEpoch) then leadership: the error a
        leader-only request gets, or None. current_leader_epoch -1 means the client did not say."""
        if current_leader_epoch >= 0 and current_leader_epoch != self.leader_epoch:
            return (ErrorCode.fenced_leader_epoch if current_leader_epoch < self.leader_epoch
                    else ErrorCode.unknown_leader_epoch)
        if self.leader_id != node_id:
            return ErrorCode.not_leader_or_follower
        return None

    async def wait_replicated(self, end_offset: int, leader_epoch: int, min_isr: int, timeout_s: float) -> ErrorCode:
        """The wait acks=all makes, for the broker's own writes (the coordinators'): until the high
        watermark reaches `end_offset` (an append's last offset + 1) while this broker still leads in
        `leader_epoch`. NONE; NOT_ENOUGH_REPLICAS_AFTER_APPEND when the ISR fell below `min_isr` meanwhile;
        NOT_LEADER_OR_FOLLOWER when leadership moved (the write may be truncated away); REQUEST_TIMED_OUT."""
        with anyio.move_on_after(max(0.0, timeout_s)):
            while True:
                if self.leader_id != self.node_id or self.leader_epoch != leader_epoch:
                    return ErrorCode.not_leader_or_follower
                if self.log.high_watermark >= end_offset:
                    return ErrorCode.none if len(self.isr) >= min_isr else ErrorCode.not_enough_replicas_after_append
                event = anyio.Event()
                self.add_waiter(event)
                try:
                    await event.wait()
                finally:
                    self.remove_waiter(event)
        return ErrorCode.request_timed_out

    def add_waiter(self, event: anyio.Event) -> None:
        self._waiters.add(event)

    def remove_waiter(self, event: anyio.Event) -> None:
        self._waiters.discard(event)

    def wake_waiters(self) -> None:
        if self._waiters:
            waiters, self._waiters = self._waiters, set()
            for event in waiters:
                event.set()


class ReplicaManager:
    def __init__(self, config: BrokerConfig, log_manager: LogManager) -> None:
        self.config = config
        self._node_id = config.node_id
        self.log_manager = log_manager
        self._partitions: dict[tuple[str, int], Partition] = {}
        self._topic_configs: dict[str, LogConfig] = {}
        self._image = MetadataImage()
        self.on_followers_changed: Callable[[], None] | None = None  # the replica fetcher manager listens
        # the coordinators listen: partitions whose logs were created after apply_image returned
        self.on_partitions_created: Callable[[], None] | None = None
        # new and deleted logs, at once or in steps (a change of thousands must not hold the loop)
        self._pacer = LogPacer(self._create_one, self._detach_one, self._finish_deletes, self._after_step)
        # Kafka's ReplicaManager IsrShrinksPerSec / IsrExpandsPerSec: this leader's ISR changes committed.
        self.isr_shrinks = 0
        self.isr_expands = 0

    def get_partition(self, topic: str, partition_id: int) -> Partition | None:
        return self._partitions.get((topic, partition_id))

    def missing_error(self, topic: str, partition_id: int) -> ErrorCode:
        """The error for a partition this broker does not host (Kafka's getPartitionOrError): another
        broker's partition is NOT_LEADER_OR_FOLLOWER (the client refreshes metadata), else unknown."""
        found = self._image.topics_by_name.get(topic)
        if found is not None and partition_id in found.partitions:
            return ErrorCode.not_leader_or_follower
        return ErrorCode.unknown_topic_or_partition

    def partitions(self) -> Iterator[Partition]:
        return iter(self._partitions.values())

    def apply_image(self, image: MetadataImage) -> None:
        """Create, update and delete partitions so that they match `image`."""
        self._image = image
        now = now_ms()
        wanted: set[tuple[str, int]] = set()
        new_logs: list[tuple[str, int]] = []
        for topic in image.topics_by_name.values():
            overrides = image.topic_configs(topic.name)
            log_config = log_config_for(self.config, overrides)
            config_changed = self._topic_configs.get(topic.name) != log_config
            self._topic_configs[topic.name] = log_config
            for pid, p in topic.partitions.items():
                if self._node_id not in p.replicas:
                    continue  # another broker's replica
                key = (topic.name, pid)
                wanted.add(key)
                existing = self._partitions.get(key)
                if existing is None:
                    if self._pacer.creating(key):
                        continue  # queued by an earlier image: a later step creates it
                    if self.log_manager.get_log(topic.name, pid) is None or self._pacer.deleting(key):
                        new_logs.append(key)  # created below, at once or in steps
                        continue
                    log = self.log_manager.get_or_create_log(topic.name, pid, log_config, now)
                    self._partitions[key] = self._partition(topic.name, topic.topic_id, p, log)
                else:
                    if existing.topic_id != topic.topic_id:
                        # Same name, new topic: the old one was deleted and recreated.
                        self._drop(key)
                        log = self.log_manager.get_or_create_log(topic.name, pid, log_config, now)
                        self._partitions[key] = self._partition(topic.name, topic.topic_id, p, log)
                        continue
                    self._update(existing, p)
                    if config_changed:
                        existing.log.update_config(log_config)
        gone = [k for k in self._partitions if k not in wanted]
        for key in gone:
            partition = self._partitions.pop(key)
            partition.wake_waiters()
            logger.info("deleted partition %s-%d", *key)
        for name in [n for n in self._topic_configs if n not in image.topics_by_name]:
            del self._topic_configs[name]
        self._pacer.submit(new_logs, gone)
        if self.on_followers_changed is not None:
            self.on_followers_changed()

    @property
    def image(self) -> MetadataImage:
        """The image the partitions follow (the last one applied)."""
        return self._image

    def _create_one(self, key: tuple[str, int]) -> Created | None:
        """Create a waiting log and its partition, if the current image still assigns it here."""
        topic = self._image.topics_by_name.get(key[0])
        p = topic.partitions.get(key[1]) if topic is not None else None
        if topic is None or p is None or self._node_id not in p.replicas or key in self._partitions:
            return None  # deleted or moved away meanwhile, or created by a later image
        log_config = self._topic_configs.get(topic.name)
        if log_config is None:
            log_config = log_config_for(self.config, self._image.topic_configs(topic.name))
        try:
            log = self.log_manager.get_or_create_log(topic.name, key[1], log_config, now_ms())
        except (KafkaStorageError, OSError) as e:
            # Not hosted (its requests answer NOT_LEADER_OR_FOLLOWER); the rest of the change goes on
            # rather than the metadata apply (or a later step) failing half-way.
            logger.error("could not create the log of %s-%d: %s", key[0], key[1], e)
            return None
        self._partitions[key] = self._partition(topic.name, topic.topic_id, p, log)
        return Created(follower=p.leader != self._node_id, internal=topic.name.startswith("__"))

    def _detach_one(self, key: tuple[str, int]) -> Path | None:
        if key in self._partitions:
            return None  # hosted again (a later image): the log stays
        try:
            return self.log_manager.detach_log(*key)
        except (KafkaStorageError, OSError) as e:
            logger.error("could not delete the log of %s-%d: %s (the next start removes it)", key[0], key[1], e)
            return None

    def _finish_deletes(self, doomed: list[Path]) -> None:
        """Sync the data directory and remove the renamed directories on a worker thread (nothing
        refers to them any more): an fsync or the removal of thousands of files never holds the loop."""
        if not doomed:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.log_manager.finish_deletes(doomed)
            return
        loop.run_in_executor(None, self.log_manager.finish_deletes, doomed).add_done_callback(_report_failure)

    def _after_step(self, step: StepDone) -> None:
        # the listeners walk every partition: told when a step concerns them, and at the end
        if self.on_followers_changed is not None and (step.finished or step.followers):
            self.on_followers_changed()
        if self.on_partitions_created is not None and (step.finished or step.internal):
            self.on_partitions_created()

    def close(self) -> None:
        """Stop creating and deleting logs (the log manager is closing)."""
        self._pacer.close()

    def _update(self, existing: Partition, p: PartitionImage) -> None:
        node = self._node_id
        new_term = p.leader != existing.leader_id or p.leader_epoch != existing.leader_epoch
        pending = existing.pending_isr
        if (not new_term and p.leader == node and pending is not None and set(pending) == set(p.isr)
                and set(p.isr) != set(existing.isr)):
            # The AlterPartition this leader asked for was committed (Kafka counts at its success).
            if len(p.isr) < len(existing.isr):
                self.isr_shrinks += 1
            else:
                self.isr_expands += 1
        existing.leader_id = p.leader
        existing.leader_epoch = p.leader_epoch
        existing.replicas = p.replicas
        existing.isr = p.isr
        if p.partition_epoch != existing.partition_epoch:
            existing.pending_isr = None  # the controller decided (ours or another change)
            # An expansion asked for against an older partition epoch can no longer be committed.
            existing.possibly_added.clear()
        existing.partition_epoch = p.partition_epoch
        if new_term:
            existing.followers.clear()
            existing.pending_isr = None
            existing.possibly_added.clear()
            if p.leader == node:
                # Kafka's makeLeader: followers' positions are unknown until they fetch in this epoch,
                # and the epoch starts at our log end.
                existing.leader_epoch_start_offset = existing.log.log_end_offset
                existing.log.assign_epoch_start_offset(p.leader_epoch)
            existing.wake_waiters()  # long polls and acks=all waits re-check their leadership
        if p.leader == node and existing.maybe_advance_high_watermark():
            existing.wake_waiters()  # a smaller ISR may let the high watermark move

    def _partition(self, topic: str, topic_id: str, p: PartitionImage, log: Log) -> Partition:
        partition = Partition(topic, p.partition_id, topic_id, log, p.leader, p.leader_epoch, p.replicas, p.isr,
                              p.partition_epoch, self._node_id)
        if p.leader == self._node_id:
            partition.leader_epoch_start_offset = log.log_end_offset
            if p.leader_epoch > 0:  # epoch 0 of a new topic needs no entry (or a file) before data
                log.assign_epoch_start_offset(p.leader_epoch)
            partition.maybe_advance_high_watermark()  # a sole in-sync replica: everything is committed
        return partition

    def leader_partitions(self) -> list[Partition]:
        return [p for p in self._partitions.values() if p.leader_id == self._node_id]

    def follower_partitions(self) -> list[Partition]:
        """Hosted partitions another live broker leads: what this broker's fetchers replicate."""
        return [p for p in self._partitions.values() if p.leader_id != self._node_id and p.leader_id >= 0]

    def _drop(self, key: tuple[str, int]) -> None:
        partition = self._partitions.pop(key)
        partition.wake_waiters()
        self.log_manager.delete_log(*key)
        logger.info("deleted partition %s-%d", *key)

    def unknown_logs(self, image: MetadataImage) -> list[tuple[str, int]]:
        """Logs on disk that the image does not know (left over from a deleted topic)."""
        known = {(t.name, pid) for t in image.topics_by_name.values() for pid, p in t.partitions.items()
                 if self._node_id in p.replicas}
        return [
            (topic, pid)
            for topic, pid, _ in self.log_manager.all_logs()
            if topic != METADATA_TOPIC and (topic, pid) not in known
        ]
