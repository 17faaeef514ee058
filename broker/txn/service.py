"""The transaction coordinator's shell: `__transaction_state` (create, append, load), markers, timers.

Like Kafka, the internal topic is created on first use (FindCoordinator for a transactional id, or
InitProducerId), with transaction.state.log.num.partitions partitions, compaction and a replication
factor no larger than the live brokers; the coordinator of an id is the leader of partition
abs(java hashCode(id)) % partitions.  A state change is appended before the request that caused it
is answered.  Markers go straight to the partition leaders through the replica manager (one process:
Kafka's TransactionMarkerChannelManager without the network hop), in Kafka's order:
persist Prepare*, write every marker, persist Complete*.  A transaction left in Prepare* (a marker
write failed, or the broker stopped in between) is completed by the timer, also after a restart.

Transactional offset commits (TxnOffsetCommit) are appended to the group's `__consumer_offsets`
partition as a transactional batch with the producer's id and epoch (as Kafka's group coordinator
does; a stale epoch is fenced by the log's producer state) and wait here, per producer id; the markers
go to that partition too.  Only a COMMIT hands them to the group coordinator.  The group loader skips
transactional batches; at start-up this shell replays them, applying those followed by a COMMIT
marker and keeping those of a transaction still open.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections import defaultdict
from typing import TYPE_CHECKING, Protocol

import anyio
import anyio.to_thread

from samsa.broker.group.batches import encode_batch
from samsa.broker.group.coordinator import OffsetAndMetadata
from samsa.broker.group.records import (
    OffsetCommitKey,
    OffsetCommitValue,
    encode_offset_commit_value,
)
from samsa.broker.group.records import encode_key as encode_group_key
from samsa.broker.group.service import coordinator_append_error
from samsa.broker.internal_topic import (
    INTERNAL_SEGMENT_BYTES,
    InternalTopic,
    InternalTopicBroker,
    config_int,
    replay,
)
from samsa.broker.txn.marker_channel import TransactionMarkerChannelManager
from samsa.broker.txn.offset_replay import OffsetCommit, replay_transactional_offsets
from samsa.broker.txn.records import (
    CorruptTxnRecordError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    partition_for_transactional_id,
)
from samsa.broker.txn.state import (
    NO_PRODUCER_ID,
    EndTxnResult,
    InitResult,
    TransactionCoordinator,
    TransactionMetadata,
    TransactionState,
    TxnConfig,
)
from samsa.broker.txn.verification import RemoteVerifier, produce_error
from samsa.kproto.errors import ErrorCode
from samsa.kproto.records import encode_batch as encode_producer_batch
from samsa.storage.errors import StorageError
from samsa.storage.txn_index import fsync_files

if TYPE_CHECKING:
    from samsa.broker.group.service import GroupService
    from samsa.broker.lifecycle import ProducerIdManager
    from samsa.broker.metadata.image import MetadataImage
    from samsa.broker.security.client import ClientSecurity

logger = logging.getLogger(__name__)

TRANSACTION_STATE_TOPIC = "__transaction_state"
OFFSETS_TOPIC = "__consumer_offsets"
DEFAULT_TIMER_INTERVAL_MS = 1000  # how often timed-out transactions are looked for (Kafka: 10 s)
DEFAULT_ID_EXPIRATION_CHECK_MS = 3_600_000


class TxnBroker(InternalTopicBroker, Protocol):
    """What the transaction coordinator's shell uses of its broker (samsa.broker.broker.Broker is one)."""

    @property
    def producer_ids(self) -> ProducerIdManager: ...
    @property
    def groups(self) -> GroupService: ...
    @property
    def inter_broker_security(self) -> ClientSecurity | None: ...


def now_ms() -> int:
    return int(time.time() * 1000)



class TxnService:
    def __init__(self, broker: TxnBroker) -> None:
        self.broker = broker
        config = TxnConfig(
            max_timeout_ms=config_int(broker, "transaction.max.timeout.ms", 900_000),
            transactional_id_expiration_ms=config_int(broker, "transactional.id.expiration.ms", 604_800_000),
        )
        self.coordinator = TransactionCoordinator(config, broker.producer_ids.generate)
        self.num_partitions = config_int(broker, "transaction.state.log.num.partitions", 50)
        self.topic = InternalTopic(broker, TRANSACTION_STATE_TOPIC, self.num_partitions,
                                   "transaction.state.log.replication.factor",
                                   {"cleanup.policy": "compact", "compression.type": "uncompressed",
                                    "segment.bytes": str(config_int(broker, "transaction.state.log.segment.bytes",
                                                                    INTERNAL_SEGMENT_BYTES)),
                                    "min.insync.replicas": "1"},
                                   partition_for_transactional_id)
        self.timer_interval_ms = config_int(
            broker, "transaction.abort.timed.out.transaction.cleanup.interval.ms", DEFAULT_TIMER_INTERVAL_MS)
        self.id_expiration_check_ms = config_int(
            broker, "transaction.remove.expired.transaction.cleanup.interval.ms", DEFAULT_ID_EXPIRATION_CHECK_MS)
        # producer id -> offsets committed in its open transaction, per group
        self.pending_offsets: dict[int, dict[str, dict[tuple[str, int], OffsetAndMetadata]]] = {}
        # Markers for partitions other brokers lead go out as WriteTxnMarkers; each answer finishes
        # what it completes at once, without waiting for the timer.
        self.markers = TransactionMarkerChannelManager(broker, lambda: self.tick(now_ms()))
        # Produce v12+ to partitions this broker leads, for transactions other brokers coordinate
        self.remote = RemoteVerifier(broker, self.partition_for)
        self.load()

    # --- the internal topic -------------------------------------------------------------------

    def partition_for(self, transactional_id: str) -> int:
        return self.topic.partition_for(transactional_id)

    def coordinator_error(self, transactional_id: str) -> ErrorCode:
        """NONE when this broker coordinates `transactional_id` (creating the internal topic if needed)."""
        return self.topic.coordinator_error(transactional_id)

    def is_local_coordinator(self, transactional_id: str) -> bool:
        """This broker leads the __transaction_state partition of `transactional_id` (no side effects)."""
        partition = self.broker.replica_manager.get_partition(TRANSACTION_STATE_TOPIC,
                                                              self.partition_for(transactional_id))
        return partition is not None and partition.leader_id == self.broker.node_id

    def coordinator_epoch(self, transactional_id: str) -> int:
        partition = self.broker.replica_manager.get_partition(TRANSACTION_STATE_TOPIC,
                                                              self.partition_for(transactional_id))
        return partition.leader_epoch if partition is not None else 0

    # --- persistence --------------------------------------------------------------------------

    def _snapshot(self, transactional_id: str) -> TransactionMetadata | None:
        """The transaction as it is now (what the log holds), to put back if the next write fails."""
        md = self.coordinator.transactions.get(transactional_id)
        return None if md is None else dataclasses.replace(md, partitions=set(md.partitions))

    def _restore(self, transactional_id: str, before: TransactionMetadata | None) -> None:
        """A state change whose record could not be written is undone (Kafka's pending transition is
        dropped), so memory never runs ahead of __transaction_state: a retried EndTxn is then taken anew
        instead of finding a Prepare* that no log holds."""
        md = self.coordinator.transactions.get(transactional_id)
        if md is None or before is None:
            return
        for f in dataclasses.fields(md):
            setattr(md, f.name, getattr(before, f.name))

    def persist(self, now: int) -> ErrorCode:
        """Append the state of every changed transaction; an error means it may not be durable."""
        changed = self.coordinator.drain_changed()
        by_partition: dict[int, list[tuple[bytes | None, bytes | None]]] = {}
        for transactional_id in changed:
            md = self.coordinator.transactions.get(transactional_id)
            value = encode_value(md) if md is not None else None
            by_partition.setdefault(self.partition_for(transactional_id), []).append(
                (encode_key(transactional_id), value))
        error = ErrorCode.none
        for index, records in by_partition.items():
            partition = self.broker.replica_manager.get_partition(TRANSACTION_STATE_TOPIC, index)
            if partition is None:
                logger.error("cannot store %d transaction records: %s-%d is missing", len(records),
                             TRANSACTION_STATE_TOPIC, index)
                error = ErrorCode.coordinator_not_available
                continue
            try:
                partition.append_as_leader(encode_batch(records, now), now)
            except StorageError as e:
                logger.error("appending transaction records to %s-%d failed: %s", TRANSACTION_STATE_TOPIC, index, e)
                error = ErrorCode.coordinator_not_available
        return error

    def on_metadata(self, image: MetadataImage) -> None:
        """Replay __transaction_state partitions this broker has come to lead (Kafka: onElection) and
        forget the transactions of those it no longer leads (onResignation)."""
        lost = self.topic.take_lost()
        if lost:
            count = self.coordinator.unload(lambda tid: self.partition_for(tid) in lost)
            logger.info("unloaded %d transactional ids of %s partitions %s: led elsewhere now", count,
                        TRANSACTION_STATE_TOPIC, sorted(lost))
        if TRANSACTION_STATE_TOPIC in image.topics_by_name:
            self.load()

    def load(self) -> None:
        started = time.monotonic()
        count = 0
        loaded = 0
        for _index, partition in self.topic.partitions_to_load():
            loaded += 1
            for record_offset, key, value in replay(partition.log):
                count += 1
                try:
                    transactional_id = decode_key(key)
                    if transactional_id is not None:
                        md = None if value is None else decode_value(transactional_id, value)
                        self.coordinator.load(transactional_id, md)
                except (CorruptTxnRecordError, UnicodeDecodeError) as e:
                    logger.warning("skipping an unreadable %s record at offset %d: %s", TRANSACTION_STATE_TOPIC,
                                   record_offset, e)
        if not loaded:
            return
        self._load_offsets()
        pending = self.coordinator.pending()
        logger.info("loaded %d transaction records (%d transactional ids, %d with markers to write) from %s in "
                    "%.2f s", count, len(self.coordinator.transactions), len(pending), TRANSACTION_STATE_TOPIC,
                    time.monotonic() - started)
        # Kafka's TransactionStateManager completes Prepare* transactions right after loading.
        now = now_ms()
        for md in pending:
            self.finish(md, now)

    def _load_offsets(self) -> None:
        """Replay transactional offset commits from `__consumer_offsets` (the group loader skips them)."""
        topic = self.broker.image.topics_by_name.get(OFFSETS_TOPIC)
        if topic is None:
            return
        now = now_ms()
        coordinator = self.broker.groups.coordinator
        pending: dict[int, list[OffsetCommit]] = {}
        for index in sorted(topic.partitions):
            partition = self.broker.replica_manager.get_partition(OFFSETS_TOPIC, index)
            if partition is None:
                continue
            replay_transactional_offsets(partition.log, f"{OFFSETS_TOPIC}-{index}", pending,
                                         lambda g, t, p, value: coordinator.load_offset(g, t, p, value, now))
        for producer_id, commits in pending.items():
            md = self.coordinator.by_producer_id(producer_id)
            if md is not None and not (md.state is TransactionState.ONGOING or md.pending_markers):
                continue  # a transaction this coordinator has finished: its marker is in the log already
            # Held until the transaction's marker reaches this partition, whichever broker coordinates it
            # (an abort marker drops them).
            held = self.pending_offsets.setdefault(producer_id, {})
            for group_id, t, p, value in commits:
                held.setdefault(group_id, {})[(t, p)] = OffsetAndMetadata(
                    value.offset, value.leader_epoch, value.metadata, value.commit_timestamp_ms,
                    value.expire_timestamp_ms)

    # --- markers ------------------------------------------------------------------------------

    def write_markers(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, committed: bool,
                      partitions: list[tuple[str, int]], now: int, transaction_version: int = 0
                      ) -> dict[tuple[str, int], ErrorCode]:
        """Kafka's WriteTxnMarkers on partitions this broker leads (NOT_LEADER_OR_FOLLOWER for others); a
        transaction version 2 marker must be newer than the producer's epoch (KIP-1228).
        Offsets the transaction committed through this broker's group coordinator take effect when the
        marker reaches their __consumer_offsets partition."""
        results: dict[tuple[str, int], ErrorCode] = {}
        rm = self.broker.replica_manager
        for topic, index in partitions:
            partition = rm.get_partition(topic, index)
            if partition is None:
                results[(topic, index)] = ErrorCode.unknown_topic_or_partition
                continue
            if partition.leader_id != self.broker.node_id:
                results[(topic, index)] = ErrorCode.not_leader_or_follower
                continue
            try:
                partition.write_txn_marker(producer_id, producer_epoch, coordinator_epoch, committed, now,
                                           transaction_version)
                results[(topic, index)] = ErrorCode.none
            except StorageError as e:
                results[(topic, index)] = ErrorCode(e.error_code)
        if any(topic == OFFSETS_TOPIC and error == ErrorCode.none for (topic, _), error in results.items()):
            self._complete_offsets(producer_id, committed, now)
        return results

    def _write_all_markers(self, producer_id: int, producer_epoch: int, coordinator_epoch: int, committed: bool,
                           partitions: list[tuple[str, int]], now: int, transaction_version: int
                           ) -> dict[tuple[str, int], ErrorCode]:
        """The coordinator's markers: written here for the partitions this broker leads, sent to the
        leader for the others. A partition whose leader has not answered yet reads NOT_LEADER_OR_FOLLOWER
        (the transaction stays pending; the timer calls again, and so does each answer)."""
        image = self.broker.image
        local: list[tuple[str, int]] = []
        results: dict[tuple[str, int], ErrorCode] = {}
        to_send: dict[int, list[tuple[str, int]]] = defaultdict(list)
        for topic, index in partitions:
            partition = self.broker.replica_manager.get_partition(topic, index)
            if partition is not None and partition.leader_id == self.broker.node_id:
                local.append((topic, index))
                continue
            key = (producer_id, producer_epoch, committed, topic, index)
            answered = self.markers.answer(key)
            if answered is not None and answered != ErrorCode.not_leader_or_follower:
                results[(topic, index)] = answered
                continue
            found = image.topics_by_name.get(topic)
            p = found.partitions.get(index) if found is not None else None
            if p is None:
                results[(topic, index)] = ErrorCode.unknown_topic_or_partition
                continue
            results[(topic, index)] = ErrorCode.not_leader_or_follower
            leader = image.brokers.get(p.leader)
            if leader is not None and not leader.fenced and not self.markers.in_flight(key):
                to_send[leader.broker_id].append((topic, index))
        results.update(self.write_markers(producer_id, producer_epoch, coordinator_epoch, committed, local, now,
                                          transaction_version))
        for leader_id, tps in to_send.items():
            self.markers.send(leader_id, producer_id, producer_epoch, coordinator_epoch, committed, tps,
                              transaction_version)
        return results

    def _complete_offsets(self, producer_id: int, committed: bool, now: int) -> None:
        pending = self.pending_offsets.pop(producer_id, None)
        if not pending or not committed:
            return
        groups = self.broker.groups
        for group_id, offsets in pending.items():
            groups.coordinator.commit_offsets(group_id, "", offsets, now)
        if groups.persist() != ErrorCode.none:
            logger.error("transactional offsets of producer %d could not be stored", producer_id)

    def finish(self, md: TransactionMetadata, now: int) -> ErrorCode:
        """Write the markers of a Prepare* transaction (already persisted), then persist Complete*.

        A deleted topic's partition is skipped (Kafka drops markers for partitions that are gone), and so
        is one whose producer state already has a newer epoch (only this coordinator bumps a transactional
        producer's epoch, so that partition's transaction was completed by a later marker); any other
        failure leaves the transaction in Prepare* for the timer to retry.
        """
        assert md.pending_markers
        committed = md.state is TransactionState.PREPARE_COMMIT
        results = self._write_all_markers(md.producer_id, md.producer_epoch,
                                          self.coordinator_epoch(md.transactional_id), committed,
                                          sorted(md.partitions), now, md.client_transaction_version)
        done = (ErrorCode.none, ErrorCode.unknown_topic_or_partition, ErrorCode.invalid_producer_epoch)
        failed = {tp: e for tp, e in results.items() if e not in done}
        if failed:
            logger.warning("transaction %s: markers not written yet: %s", md.transactional_id,
                           {f"{t}-{p}": e.name for (t, p), e in failed.items()})
            return ErrorCode.coordinator_load_in_progress
        self.markers.forget(md.producer_id)
        self.coordinator.complete(md.transactional_id, now)
        return self.persist(now)

    def _prepare_and_finish(self, md: TransactionMetadata, now: int) -> ErrorCode:
        error = self.persist(now)
        if error != ErrorCode.none:
            return error
        return self.finish(md, now)

    # --- requests -----------------------------------------------------------------------------

    def init_producer_id(self, transactional_id: str, timeout_ms: int, producer_id: int, producer_epoch: int,
                         now: int) -> InitResult:
        error = self.coordinator_error(transactional_id)
        if error != ErrorCode.none:
            return InitResult(error)
        if not self.broker.producer_ids.available(2):
            return InitResult(ErrorCode.coordinator_load_in_progress)  # a producer id block is on its way
        result, aborting = self.coordinator.init_producer_id(transactional_id, timeout_ms, producer_id,
                                                             producer_epoch, now)
        if aborting is not None:
            # The previous instance left a transaction open: abort it with a bumped epoch (fencing that
            # instance), then bump again for the caller, without making it retry.
            if self._prepare_and_finish(aborting, now) != ErrorCode.none:
                return InitResult(ErrorCode.concurrent_transactions)
            result, aborting = self.coordinator.init_producer_id(transactional_id, timeout_ms, producer_id,
                                                                 producer_epoch, now)
            if producer_id >= 0 and result.error == ErrorCode.producer_fenced:
                # KIP-360 caller whose epoch we just bumped: it is still the current instance.
                result, aborting = self.coordinator.init_producer_id(transactional_id, timeout_ms, -1, -1, now)
            assert aborting is None
        if result.error == ErrorCode.none and self.persist(now) != ErrorCode.none:
            return InitResult(ErrorCode.coordinator_not_available)
        return result

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: list[tuple[str, int]], now: int, transaction_version: int = 0) -> ErrorCode:
        error = self.coordinator_error(transactional_id)
        if error != ErrorCode.none:
            return error
        before = self._snapshot(transactional_id)
        error = self.coordinator.add_partitions(transactional_id, producer_id, producer_epoch, partitions, now,
                                                transaction_version)
        if error == ErrorCode.none and self.persist(now) != ErrorCode.none:
            self._restore(transactional_id, before)
            return ErrorCode.coordinator_not_available
        return error

    def check_add(self, transactional_id: str, producer_id: int, producer_epoch: int) -> ErrorCode:
        error = self.coordinator_error(transactional_id)
        if error != ErrorCode.none:
            return error
        return self.coordinator.check_add(transactional_id, producer_id, producer_epoch)

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool,
                now: int, transaction_version: int = 0) -> EndTxnResult:
        """EndTxn; `transaction_version` 2 (EndTxn v5+) takes Kafka's V2 rules (`end_txn_v2`): the answer then
        carries the producer id and epoch the client goes on with."""
        error = self.coordinator_error(transactional_id)
        if error != ErrorCode.none:
            return EndTxnResult(error)
        before = self._snapshot(transactional_id)
        if transaction_version >= 2:
            result = self.coordinator.end_txn_v2(transactional_id, producer_id, producer_epoch, committed, now)
        else:
            error, md = self.coordinator.end_txn(transactional_id, producer_id, producer_epoch, committed, now)
            result = EndTxnResult(error, md)
        md = result.preparing
        if md is None:
            return result
        if self.persist(now) != ErrorCode.none:
            self._restore(transactional_id, before)
            return EndTxnResult(ErrorCode.coordinator_not_available)
        # The outcome is decided once Prepare* is stored; markers still unwritten are retried by the timer,
        # and the client sees CONCURRENT_TRANSACTIONS until then, as with Kafka's pending markers.
        self.finish(md, now)
        if transaction_version < 2:
            return EndTxnResult(ErrorCode.none)
        if md.next_producer_id != NO_PRODUCER_ID:  # the epoch overflowed: the next id, once complete
            return EndTxnResult(ErrorCode.none, None, md.next_producer_id, 0)
        return EndTxnResult(ErrorCode.none, None, md.producer_id, md.producer_epoch)

    def txn_offset_commit(self, transactional_id: str, group_id: str, producer_id: int, producer_epoch: int,
                          offsets: dict[tuple[str, int], OffsetAndMetadata], implicit_add: bool = False) -> ErrorCode:
        """`implicit_add` (TxnOffsetCommit v5+, transactions V2): the group's __consumer_offsets partition is
        added to the transaction here, the client sends no AddOffsetsToTxn."""
        error = self.verify_txn_offset_commit(transactional_id, group_id, producer_id, producer_epoch, implicit_add)
        if error != ErrorCode.none:
            return error
        groups = self.broker.groups
        index = groups.partition_for(group_id)
        partition = self.broker.replica_manager.get_partition(OFFSETS_TOPIC, index)
        if partition is None:
            return ErrorCode.coordinator_not_available
        # Written with acks=-1 like a consumer's commit: refused before anything is written when the ISR is
        # under min.insync.replicas (Kafka answers NOT_ENOUGH_REPLICAS as COORDINATOR_NOT_AVAILABLE).
        refused = groups.min_isr_error(partition, len(offsets))
        if refused != ErrorCode.none:
            return refused
        records = [(encode_group_key(OffsetCommitKey(group_id, t, p)),
                    encode_offset_commit_value(OffsetCommitValue(o.offset, o.leader_epoch, o.metadata,
                                                                 o.commit_timestamp_ms, o.expire_timestamp_ms)), ())
                   for (t, p), o in offsets.items()]
        now = now_ms()
        batch = encode_producer_batch(records, timestamp_ms=now, producer_id=producer_id,
                                      producer_epoch=producer_epoch, is_transactional=True)
        try:
            partition.append_as_leader(bytearray(batch), now)
        except StorageError as e:
            logger.error("appending transactional offsets to %s-%d failed: %s", OFFSETS_TOPIC, index, e)
            return coordinator_append_error(ErrorCode(e.error_code))
        self.pending_offsets.setdefault(producer_id, {}).setdefault(group_id, {}).update(offsets)
        return ErrorCode.none

    def verify_txn_offset_commit(self, transactional_id: str, group_id: str, producer_id: int, producer_epoch: int,
                                 implicit_add: bool = False) -> ErrorCode:
        """The transaction's part of a TxnOffsetCommit, before the group checks the member (Kafka's
        CoordinatorRuntime.scheduleTransactionalWriteOperation verifies, or with `implicit_add` adds, the group's
        partition first): a commit the group then refuses has still added the partition."""
        index = self.broker.groups.partition_for(group_id)
        if implicit_add:
            added: ErrorCode | None
            if self.is_local_coordinator(transactional_id):
                added = self.add_partitions(transactional_id, producer_id, producer_epoch, [(OFFSETS_TOPIC, index)],
                                            now_ms(), transaction_version=2)
            else:
                added = self.remote.add(transactional_id, producer_id, producer_epoch, OFFSETS_TOPIC, index)
            if added is None:
                return ErrorCode.coordinator_load_in_progress  # retried by the client while the coordinator adds it
            if added != ErrorCode.none:
                return added
        if self.is_local_coordinator(transactional_id):
            md = self.coordinator.transactions.get(transactional_id)
            if md is None or md.producer_id != producer_id:
                return ErrorCode.invalid_producer_id_mapping
            if md.producer_epoch != producer_epoch:
                return ErrorCode.producer_fenced
            if md.state is not TransactionState.ONGOING or (OFFSETS_TOPIC, index) not in md.partitions:
                return ErrorCode.invalid_txn_state
        # else another broker coordinates the transaction: the group coordinator takes the offsets as
        # Kafka's does without KIP-890's verification, and they count once that broker's marker lands.
        return ErrorCode.none

    def verify_produce(self, producer_id: int, producer_epoch: int, topic: str, partition: int,
                       transactional_id: str | None = None, implicit_add: bool = False) -> ErrorCode:
        """A transactional batch is accepted only for a partition of the producer's ongoing transaction.

        `implicit_add` (Produce v12+, transactions V2, KIP-890 part 2): the leader adds the partition to
        the transaction for the client, as Kafka's AddPartitionsToTxnManager does with verify_only=false.
        Otherwise (v3-v11) the partition must have been added already (KIP-890 part 1's verification).
        A transaction another broker coordinates is checked there (`remote`); its answers are Produce's
        errors: a fenced epoch INVALID_PRODUCER_EPOCH, a busy or moving coordinator NOT_ENOUGH_REPLICAS, which
        every producer retries (Kafka maps KIP-890's coordinator errors the same way)."""
        if transactional_id is not None and not self.is_local_coordinator(transactional_id):
            return self.remote.verify(transactional_id, producer_id, producer_epoch, topic, partition, implicit_add)
        if implicit_add and transactional_id is not None:
            error = self.add_partitions(transactional_id, producer_id, producer_epoch, [(topic, partition)],
                                        now_ms(), transaction_version=2)
            return produce_error(error)
        md = self.coordinator.by_producer_id(producer_id)
        if md is None:
            return ErrorCode.invalid_producer_id_mapping
        if producer_epoch != md.producer_epoch:
            return ErrorCode.invalid_producer_epoch
        if md.state is not TransactionState.ONGOING or (topic, partition) not in md.partitions:
            return ErrorCode.invalid_txn_state
        return ErrorCode.none

    # --- timers -------------------------------------------------------------------------------

    def tick(self, now: int) -> None:
        for md in self.coordinator.pending():
            self.finish(md, now)
        for md in self.coordinator.abort_timed_out(now):
            logger.info("aborting transaction %s of producer %d: older than its timeout of %d ms",
                        md.transactional_id, md.producer_id, md.timeout_ms)
            self._prepare_and_finish(md, now)

    def expire(self, now: int) -> None:
        expired = self.coordinator.expire_transactional_ids(now)
        if expired:
            logger.info("expired %d transactional ids", len(expired))
            self.persist(now)

    async def run(self) -> None:
        """Abort timed-out transactions, retry unwritten markers, expire ids, fsync new aborted-transaction
        index entries (in a worker thread); runs for the life of the server."""
        last_expiry = now_ms()
        while True:
            await anyio.sleep(self.timer_interval_ms / 1000)
            try:
                now = now_ms()
                self.tick(now)
                if now - last_expiry >= self.id_expiration_check_ms:
                    last_expiry = now
                    self.expire(now)
                partitions = self.broker.replica_manager.partitions()
                dirty = [path for p in partitions for path in p.take_dirty_txn_index_files()]
                if dirty:
                    await anyio.to_thread.run_sync(fsync_files, dirty)
            except Exception:
                logger.exception("transaction coordinator timer failed")
