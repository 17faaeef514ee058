"""The transaction coordinator's core: one `TransactionMetadata` per transactional id, and its state table.

A pure state machine (time is the `now_ms` argument; producer ids come from a callback): it decides,
the shell (`broker/txn/service.py`) persists to `__transaction_state` and writes the markers.
Mirrors Kafka's TransactionCoordinator / TransactionMetadata for transactions V1 (KIP-98): the client
adds partitions explicitly (AddPartitionsToTxn / AddOffsetsToTxn), EndTxn moves the transaction to
Prepare*, the markers are written to every partition, then Complete*; and for transactions V2 (KIP-890
part 2, EndTxn v5+): the partition leaders add partitions for the client, and every transaction end
bumps the epoch (`end_txn_v2`).  Fencing follows KIP-360 and
KIP-588: every InitProducerId bumps the epoch; an ongoing transaction found there is aborted with a
bumped epoch first (PrepareEpochFence), so the old producer instance is fenced.

Every state change is an event of TRANSITIONS, (state, event) -> state, Kafka's
TransactionState.validPreviousStates with the cause of each step named; an event the table lacks in
the transaction's state raises IllegalTxnTransition, also under `python -O`:

    event               from                                   to
    INIT_PRODUCER_ID    Empty, CompleteCommit, CompleteAbort   Empty
    ADD_PARTITIONS      Ongoing, Empty, Complete*              Ongoing
    END_COMMIT          Ongoing                                PrepareCommit
    END_ABORT           Ongoing                                PrepareAbort
    END_ABORT_EMPTY     Empty, CompleteCommit, CompleteAbort   PrepareAbort   (V2: no partitions, epoch bump)
    FENCE_EPOCH         Ongoing                                PrepareEpochFence
    ABORT_FENCED        PrepareEpochFence                      PrepareAbort
    MARKERS_WRITTEN     PrepareCommit / PrepareAbort           CompleteCommit / CompleteAbort
    EXPIRE_ID           Empty, CompleteCommit, CompleteAbort   Dead
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from enum import Enum, IntEnum

from samsa.kproto.errors import ErrorCode

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
# Kafka bumps to a new producer id when the epoch would reach Short.MaxValue (RecordBatch.NO_PRODUCER_EPOCH
# is -1, and the last usable epoch is 32766 so a timeout abort can still bump once).
MAX_PRODUCER_EPOCH = 32766


class TransactionState(IntEnum):
    """The byte Kafka stores in TransactionLogValue.TransactionStatus."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def kafka_name(self) -> str:
        """The name DescribeTransactions / ListTransactions use (Kafka's TransactionState.stateName)."""
        return _NAMES[self]


S = TransactionState
_NAMES = {
    S.EMPTY: "Empty", S.ONGOING: "Ongoing", S.PREPARE_COMMIT: "PrepareCommit", S.PREPARE_ABORT: "PrepareAbort",
    S.COMPLETE_COMMIT: "CompleteCommit", S.COMPLETE_ABORT: "CompleteAbort", S.DEAD: "Dead",
    S.PREPARE_EPOCH_FENCE: "PrepareEpochFence",
}
STATE_BY_NAME = {name: state for state, name in _NAMES.items()}



class TxnEvent(Enum):
    INIT_PRODUCER_ID = "InitProducerId"  # a new epoch for a producer with no open transaction
    ADD_PARTITIONS = "AddPartitionsToTxn"  # (or AddOffsetsToTxn) the transaction is open
    END_COMMIT = "EndTxn(commit)"
    END_ABORT = "EndTxn(abort)"
    END_ABORT_EMPTY = "EndTxn(abort, V2, nothing added)"  # transactions V2 bump the epoch even so
    FENCE_EPOCH = "fence epoch"  # InitProducerId or the timeout found the transaction open: bump first
    ABORT_FENCED = "abort fenced"  # ... then abort it with the bumped epoch
    MARKERS_WRITTEN = "markers written"  # every partition has the marker
    EXPIRE_ID = "expire transactional id"  # idle past transactional.id.expiration.ms


_DONE = (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT)
TRANSITIONS: dict[tuple[TransactionState, TxnEvent], TransactionState] = {
    **{(s, TxnEvent.INIT_PRODUCER_ID): S.EMPTY for s in _DONE},
    **{(s, TxnEvent.ADD_PARTITIONS): S.ONGOING for s in (S.ONGOING, *_DONE)},
    (S.ONGOING, TxnEvent.END_COMMIT): S.PREPARE_COMMIT,
    (S.ONGOING, TxnEvent.END_ABORT): S.PREPARE_ABORT,
    **{(s, TxnEvent.END_ABORT_EMPTY): S.PREPARE_ABORT for s in _DONE},
    (S.ONGOING, TxnEvent.FENCE_EPOCH): S.PREPARE_EPOCH_FENCE,
    (S.PREPARE_EPOCH_FENCE, TxnEvent.ABORT_FENCED): S.PREPARE_ABORT,
    (S.PREPARE_COMMIT, TxnEvent.MARKERS_WRITTEN): S.COMPLETE_COMMIT,
    (S.PREPARE_ABORT, TxnEvent.MARKERS_WRITTEN): S.COMPLETE_ABORT,
    **{(s, TxnEvent.EXPIRE_ID): S.DEAD for s in _DONE},
}

# The table read by target (Kafka's TransactionState.validPreviousStates).
VALID_PREVIOUS_STATES: dict[TransactionState, frozenset[TransactionState]] = {
    target: frozenset(s for (s, _), t in TRANSITIONS.items() if t is target) for target in TransactionState
}


class IllegalTxnTransition(RuntimeError):
    """An event the table does not allow in the transaction's state: a coordinator bug, never a client's doing."""


def next_state(state: TransactionState, event: TxnEvent) -> TransactionState:
    try:
        return TRANSITIONS[(state, event)]
    except KeyError:
        raise IllegalTxnTransition(f"{event.value} in state {state.kafka_name}") from None


TopicPartition = tuple[str, int]


@dataclass(slots=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TransactionState = S.EMPTY
    partitions: set[TopicPartition] = field(default_factory=set)
    start_ms: int = -1
    last_update_ms: int = -1
    last_producer_epoch: int = NO_PRODUCER_EPOCH  # not persisted (Kafka keeps it in memory too)
    # Transactions V2 (KIP-890 part 2): the version the client's last request spoke (Kafka's
    # clientTransactionVersion), and the producer ids of an epoch overflow at a transaction's end: the id the
    # Prepare* markers carry moves to `next_producer_id` (epoch 0) when the transaction completes.
    client_transaction_version: int = 0
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID

    def transition(self, event: TxnEvent, now_ms: int) -> None:
        """Move by TRANSITIONS; an event it does not allow here raises IllegalTxnTransition."""
        self.state = next_state(self.state, event)
        self.last_update_ms = now_ms

    @property
    def pending_markers(self) -> bool:
        return self.state in (S.PREPARE_COMMIT, S.PREPARE_ABORT)


@dataclass(frozen=True, slots=True)
class TxnConfig:
    max_timeout_ms: int = 900_000  # transaction.max.timeout.ms
    transactional_id_expiration_ms: int = 7 * 24 * 3600 * 1000  # transactional.id.expiration.ms


@dataclass(frozen=True, slots=True)
class InitResult:
    error: ErrorCode
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


@dataclass(frozen=True, slots=True)
class EndTxnResult:
    """EndTxn's answer: the error, the transaction whose markers the shell must now write (in Prepare*), and
    the producer id and epoch v5+ returns (-1 unless the answer is NONE)."""

    error: ErrorCode
    preparing: TransactionMetadata | None = None
    producer_id: int = NO_PRODUCER_ID
    producer_epoch: int = NO_PRODUCER_EPOCH


class TransactionCoordinator:
    """Every method returns an error value; `changed` collects the ids whose state must be persisted."""

    def __init__(self, config: TxnConfig, generate_producer_id: Callable[[], int]) -> None:
        self.config = config
        self._generate_producer_id = generate_producer_id
        self.transactions: dict[str, TransactionMetadata] = {}
        self._by_producer_id: dict[int, TransactionMetadata] = {}
        self.changed: list[str] = []

    # --- helpers ------------------------------------------------------------------------------

    def _changed(self, md: TransactionMetadata) -> None:
        if md.transactional_id not in self.changed:
            self.changed.append(md.transactional_id)

    def unload(self, owned: Callable[[str], bool]) -> int:
        """Forget the transactional ids `owned` picks (their partition moved to another broker)."""
        gone = [t for t in self.transactions if owned(t)]
        for transactional_id in gone:
            md = self.transactions.pop(transactional_id)
            if self._by_producer_id.get(md.producer_id) is md:
                del self._by_producer_id[md.producer_id]
        return len(gone)

    def drain_changed(self) -> list[str]:
        changed, self.changed = self.changed, []
        return changed

    def _index(self, md: TransactionMetadata, old_producer_id: int = NO_PRODUCER_ID) -> None:
        if self._by_producer_id.get(old_producer_id) is md:
            del self._by_producer_id[old_producer_id]
        self._by_producer_id[md.producer_id] = md

    def by_producer_id(self, producer_id: int) -> TransactionMetadata | None:
        return self._by_producer_id.get(producer_id)

    def _check_producer(self, md: TransactionMetadata | None, producer_id: int, producer_epoch: int) -> ErrorCode:
        if md is None or md.state is S.DEAD or md.producer_id != producer_id:
            return ErrorCode.invalid_producer_id_mapping
        if producer_epoch != md.producer_epoch:
            return ErrorCode.producer_fenced
        return ErrorCode.none

    def _bump_epoch(self, md: TransactionMetadata) -> None:
        md.last_producer_epoch = md.producer_epoch
        if md.producer_epoch >= MAX_PRODUCER_EPOCH:
            old = md.producer_id
            md.producer_id = self._generate_producer_id()
            md.producer_epoch = 0
            md.last_producer_epoch = NO_PRODUCER_EPOCH
            self._index(md, old)
        else:
            md.producer_epoch += 1

    def _fence(self, md: TransactionMetadata, now_ms: int) -> None:
        """An open transaction is aborted by the coordinator (InitProducerId, timeout): the epoch is bumped so
        that the producer instance is fenced (PrepareEpochFence); a V2 transaction's abort bumps once more,
        as each V2 transaction end does (Kafka's prepareAbortOrCommit after prepareFenceProducerEpoch). The
        producer id stays (the markers must carry the id the batches have), so the epoch may reach 32767,
        the one Kafka keeps for this; the next InitProducerId then moves to a new id."""
        md.transition(TxnEvent.FENCE_EPOCH, now_ms)
        md.last_producer_epoch = md.producer_epoch
        bump = 2 if md.client_transaction_version >= 2 else 1
        md.producer_epoch = min(md.producer_epoch + bump, MAX_PRODUCER_EPOCH + 1)
        md.transition(TxnEvent.ABORT_FENCED, now_ms)
        self._changed(md)

    # --- InitProducerId -----------------------------------------------------------------------

    def init_producer_id(self, transactional_id: str, timeout_ms: int, expected_producer_id: int,
                         expected_epoch: int, now_ms: int) -> tuple[InitResult, TransactionMetadata | None]:
        """(result, metadata of a transaction that must be aborted first, in PrepareAbort).

        With an ongoing transaction the epoch is bumped and the transaction moves to PrepareAbort;
        the shell writes its abort markers, calls `complete`, and then calls this again.
        """
        if not transactional_id:
            return InitResult(ErrorCode.invalid_request), None
        if timeout_ms <= 0 or timeout_ms > self.config.max_timeout_ms:
            return InitResult(ErrorCode.invalid_transaction_timeout), None
        md = self.transactions.get(transactional_id)
        if md is None or md.state is S.DEAD:
            md = TransactionMetadata(transactional_id, self._generate_producer_id(), 0, timeout_ms,
                                     S.EMPTY, set(), -1, now_ms)
            self.transactions[transactional_id] = md
            self._index(md)
            self._changed(md)
            return InitResult(ErrorCode.none, md.producer_id, md.producer_epoch), None
        if md.pending_markers or md.state is S.PREPARE_EPOCH_FENCE:
            return InitResult(ErrorCode.concurrent_transactions), None
        if expected_producer_id != NO_PRODUCER_ID:
            # KIP-360: a producer that knows its id and epoch may only bump its own current epoch; a
            # retry of a bump that already happened gets the same answer again.
            if expected_producer_id != md.producer_id:
                return InitResult(ErrorCode.producer_fenced), None
            if expected_epoch == md.last_producer_epoch and md.state is not S.ONGOING:
                return InitResult(ErrorCode.none, md.producer_id, md.producer_epoch), None
            if expected_epoch != md.producer_epoch:
                return InitResult(ErrorCode.producer_fenced), None
        if md.state is S.ONGOING:
            self._fence(md, now_ms)
            return InitResult(ErrorCode.concurrent_transactions), md
        self._bump_epoch(md)
        md.timeout_ms = timeout_ms
        md.partitions = set()
        md.transition(TxnEvent.INIT_PRODUCER_ID, now_ms)
        self._changed(md)
        return InitResult(ErrorCode.none, md.producer_id, md.producer_epoch), None

    # --- AddPartitionsToTxn / AddOffsetsToTxn -------------------------------------------------

    def check_add(self, transactional_id: str, producer_id: int, producer_epoch: int) -> ErrorCode:
        md = self.transactions.get(transactional_id)
        error = self._check_producer(md, producer_id, producer_epoch)
        if error != ErrorCode.none:
            return error
        assert md is not None
        if md.pending_markers or md.state is S.PREPARE_EPOCH_FENCE:
            return ErrorCode.concurrent_transactions
        return ErrorCode.none

    def add_partitions(self, transactional_id: str, producer_id: int, producer_epoch: int,
                       partitions: Iterable[TopicPartition], now_ms: int, transaction_version: int = 0) -> ErrorCode:
        """`transaction_version` 2: a partition leader adds them for the client (KIP-890 part 2's implicit add)."""
        error = self.check_add(transactional_id, producer_id, producer_epoch)
        if error != ErrorCode.none:
            return error
        md = self.transactions[transactional_id]
        if md.client_transaction_version != transaction_version and md.state is not S.ONGOING:
            md.client_transaction_version = transaction_version
        wanted = set(partitions)
        if md.state is S.ONGOING and wanted <= md.partitions:
            return ErrorCode.none
        if md.state is not S.ONGOING:
            md.partitions = set()
            md.start_ms = now_ms
        md.partitions |= wanted
        md.transition(TxnEvent.ADD_PARTITIONS, now_ms)
        self._changed(md)
        return ErrorCode.none

    # --- EndTxn -------------------------------------------------------------------------------

    def end_txn(self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool,
                now_ms: int) -> tuple[ErrorCode, TransactionMetadata | None]:
        """(error, metadata now in Prepare* whose markers the shell must write)."""
        md = self.transactions.get(transactional_id)
        error = self._check_producer(md, producer_id, producer_epoch)
        if error != ErrorCode.none:
            return error, None
        assert md is not None
        match md.state:
            case S.ONGOING:
                md.transition(TxnEvent.END_COMMIT if committed else TxnEvent.END_ABORT, now_ms)
                self._changed(md)
                return ErrorCode.none, md
            case S.COMPLETE_COMMIT:
                return (ErrorCode.none if committed else ErrorCode.invalid_txn_state), None
            case S.COMPLETE_ABORT:
                return (ErrorCode.invalid_txn_state if committed else ErrorCode.none), None
            case S.PREPARE_COMMIT:
                return (ErrorCode.concurrent_transactions if committed else ErrorCode.invalid_txn_state), None
            case S.PREPARE_ABORT:
                return (ErrorCode.invalid_txn_state if committed else ErrorCode.concurrent_transactions), None
            case S.PREPARE_EPOCH_FENCE:
                return ErrorCode.producer_fenced, None
            case _:
                return ErrorCode.invalid_txn_state, None

    def end_txn_v2(self, transactional_id: str, producer_id: int, producer_epoch: int, committed: bool,
                   now_ms: int) -> EndTxnResult:
        """EndTxn v5+ (transactions V2, KIP-890 part 2): every transaction end bumps the epoch, returned to the
        client, and the markers carry the bumped epoch, so a late batch of the ended transaction is fenced.

        Kafka's rules (TransactionCoordinator.endTransaction, TV2): a retry is the request with the epoch
        just before the bump; an abort is also taken with no open transaction (Empty, Complete*: an epoch
        bump without markers); in Complete*, a retry of the same outcome answers NONE with the current ids.
        """
        md = self.transactions.get(transactional_id)
        if md is None or md.state is S.DEAD:
            return EndTxnResult(ErrorCode.invalid_producer_id_mapping)
        retry_on_overflow = (md.previous_producer_id == producer_id and producer_epoch == MAX_PRODUCER_EPOCH
                             and md.producer_epoch == 0)
        retry_on_bump = md.producer_epoch == producer_epoch + 1
        if md.producer_id != producer_id and not retry_on_overflow:
            return EndTxnResult(ErrorCode.invalid_producer_id_mapping)
        match md.state:
            case S.ONGOING | S.EMPTY:
                valid_epoch = producer_epoch == md.producer_epoch
            case S.PREPARE_COMMIT | S.PREPARE_ABORT:
                valid_epoch = retry_on_bump
            case _:
                valid_epoch = retry_on_bump or retry_on_overflow or producer_epoch == md.producer_epoch
        if not valid_epoch:
            return EndTxnResult(ErrorCode.producer_fenced)
        retry = retry_on_bump or retry_on_overflow
        current = EndTxnResult(ErrorCode.none, None, md.producer_id, md.producer_epoch)
        match md.state:
            case S.ONGOING:
                return self._prepare_v2(md, committed, now_ms)
            case S.COMPLETE_COMMIT if committed:
                return current if retry else EndTxnResult(ErrorCode.invalid_txn_state)
            case S.COMPLETE_ABORT if not committed:
                return current if retry else self._prepare_v2(md, False, now_ms)
            case S.COMPLETE_COMMIT | S.EMPTY if not committed and not retry:
                return self._prepare_v2(md, False, now_ms)
            case S.PREPARE_COMMIT if committed:
                return EndTxnResult(ErrorCode.concurrent_transactions)
            case S.PREPARE_ABORT if not committed:
                return EndTxnResult(ErrorCode.concurrent_transactions)
            case _:
                return EndTxnResult(ErrorCode.invalid_txn_state)

    def _prepare_v2(self, md: TransactionMetadata, committed: bool, now_ms: int) -> EndTxnResult:
        if md.state is S.ONGOING:
            md.transition(TxnEvent.END_COMMIT if committed else TxnEvent.END_ABORT, now_ms)
        else:  # an abort with nothing added: the epoch bump alone, no markers
            md.partitions = set()
            md.start_ms = now_ms
            md.transition(TxnEvent.END_ABORT_EMPTY, now_ms)
        md.client_transaction_version = 2
        md.last_producer_epoch = md.producer_epoch
        if md.producer_epoch >= MAX_PRODUCER_EPOCH:
            md.next_producer_id = self._generate_producer_id()
        md.producer_epoch += 1
        self._changed(md)
        return EndTxnResult(ErrorCode.none, md, md.producer_id, md.producer_epoch)

    def complete(self, transactional_id: str, now_ms: int) -> None:
        """Every marker of a Prepare* transaction is written: move it to Complete*. A V2 transaction whose
        epoch overflowed moves to its next producer id, at epoch 0 (Kafka's prepareComplete)."""
        md = self.transactions[transactional_id]
        assert md.pending_markers, md.state
        md.transition(TxnEvent.MARKERS_WRITTEN, now_ms)
        md.partitions = set()
        if md.next_producer_id != NO_PRODUCER_ID:
            old = md.producer_id
            md.previous_producer_id, md.producer_id = old, md.next_producer_id
            md.next_producer_id = NO_PRODUCER_ID
            md.producer_epoch = 0
            self._index(md, old)
        self._changed(md)

    # --- timers -------------------------------------------------------------------------------

    def abort_timed_out(self, now_ms: int) -> list[TransactionMetadata]:
        """Ongoing transactions past transaction.timeout.ms, fenced (epoch bump) and moved to PrepareAbort."""
        out = []
        for md in self.transactions.values():
            if md.state is S.ONGOING and md.start_ms + md.timeout_ms <= now_ms:
                self._fence(md, now_ms)
                out.append(md)
        return out

    def pending(self) -> list[TransactionMetadata]:
        """Transactions whose markers are still to be written (after a load or a failed write)."""
        return [md for md in self.transactions.values() if md.pending_markers]

    def expire_transactional_ids(self, now_ms: int) -> list[str]:
        """Idle ids past transactional.id.expiration.ms become Dead; the shell writes their tombstones."""
        expired = []
        limit = self.config.transactional_id_expiration_ms
        for md in list(self.transactions.values()):
            if md.state in (S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT) and md.last_update_ms + limit <= now_ms:
                md.transition(TxnEvent.EXPIRE_ID, now_ms)
                del self.transactions[md.transactional_id]
                # persist writes a tombstone for it (no metadata any more), so compaction of
                # __transaction_state removes the id (Kafka's TransactionStateManager.removeExpiredTransactionalIds)
                self._changed(md)
                if self._by_producer_id.get(md.producer_id) is md:
                    del self._by_producer_id[md.producer_id]
                expired.append(md.transactional_id)
        return expired

    # --- loading ------------------------------------------------------------------------------

    def load(self, transactional_id: str, md: TransactionMetadata | None) -> None:
        """Apply one `__transaction_state` record (None: a tombstone); later records win."""
        old = self.transactions.pop(transactional_id, None)
        if old is not None and self._by_producer_id.get(old.producer_id) is old:
            del self._by_producer_id[old.producer_id]
        if md is not None and md.state is not S.DEAD:
            self.transactions[transactional_id] = md
            self._by_producer_id[md.producer_id] = md
