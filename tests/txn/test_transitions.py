"""The transaction coordinator's event table: Kafka's valid previous states, and nothing else, even under `-O`."""

from __future__ import annotations

import itertools
import subprocess
import sys

import pytest

from samsa.broker.txn.state import (
    TRANSITIONS,
    VALID_PREVIOUS_STATES,
    IllegalTxnTransition,
    TransactionCoordinator,
    TransactionMetadata,
    TransactionState,
    TxnConfig,
    TxnEvent,
)
from samsa.kproto.errors import ErrorCode

S = TransactionState

# Kafka's TransactionState.validPreviousStates, written out independently of the table.
KAFKA_VALID_PREVIOUS = {
    S.EMPTY: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.ONGOING: {S.ONGOING, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_COMMIT: {S.ONGOING},
    # Kafka 4's transactions V2 may abort with nothing added (an epoch bump): from Empty and Complete* too
    S.PREPARE_ABORT: {S.ONGOING, S.PREPARE_EPOCH_FENCE, S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.COMPLETE_COMMIT: {S.PREPARE_COMMIT},
    S.COMPLETE_ABORT: {S.PREPARE_ABORT},
    S.DEAD: {S.EMPTY, S.COMPLETE_COMMIT, S.COMPLETE_ABORT},
    S.PREPARE_EPOCH_FENCE: {S.ONGOING},
}


def test_the_event_table_allows_exactly_kafkas_steps() -> None:
    assert VALID_PREVIOUS_STATES == KAFKA_VALID_PREVIOUS


@pytest.mark.parametrize(("state", "event"), list(itertools.product(S, TxnEvent)))
def test_a_pair_the_table_lacks_raises_and_changes_nothing(state: TransactionState, event: TxnEvent) -> None:
    md = TransactionMetadata("t", 1, 0, 1000, state, {("a", 0)}, 5, 5)
    if (state, event) in TRANSITIONS:
        md.transition(event, now_ms=9)
        assert (md.state, md.last_update_ms) == (TRANSITIONS[(state, event)], 9)
        return
    with pytest.raises(IllegalTxnTransition):
        md.transition(event, now_ms=9)
    assert (md.state, md.last_update_ms) == (state, 5)


def test_a_fenced_ongoing_transaction_walks_fence_then_abort() -> None:
    ids = itertools.count(1000)
    c = TransactionCoordinator(TxnConfig(max_timeout_ms=60_000), lambda: next(ids))
    result, _ = c.init_producer_id("t", 10_000, -1, -1, now_ms=0)
    assert c.add_partitions("t", result.producer_id, result.producer_epoch, [("a", 0)], now_ms=1) == ErrorCode.none
    again, aborting = c.init_producer_id("t", 10_000, -1, -1, now_ms=2)
    assert again.error == ErrorCode.concurrent_transactions
    assert aborting is not None and aborting.state is S.PREPARE_ABORT
    assert aborting.producer_epoch == result.producer_epoch + 1
    c.complete("t", now_ms=3)
    assert c.transactions["t"].state is S.COMPLETE_ABORT


def test_an_illegal_event_raises_under_python_dash_o() -> None:
    code = (
        "from samsa.broker.txn.state import IllegalTxnTransition, TransactionMetadata, TransactionState, TxnEvent\n"
        "assert False, 'asserts are on'\n"
        "md = TransactionMetadata('t', 1, 0, 1000, TransactionState.EMPTY)\n"
        "try:\n"
        "    md.transition(TxnEvent.MARKERS_WRITTEN, 1)\n"
        "except IllegalTxnTransition as e:\n"
        "    print('raised:', e)\n"
    )
    out = subprocess.run([sys.executable, "-O", "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "raised: markers written in state Empty"
