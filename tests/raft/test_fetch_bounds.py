"""The Raft leader's Fetch answers are bounded in bytes (Kafka's MAX_FETCH_SIZE_BYTES), and observers that stop
fetching are forgotten (OBSERVER_SESSION_TIMEOUT_MS), whatever replica ids reach the controller listener."""

from __future__ import annotations

import random

from samsa.raft.core import RaftCore
from samsa.raft.events import Received, Send, Tick
from samsa.raft.log import RaftLog
from samsa.raft.messages import FetchRequest, FetchResponse
from samsa.raft.quorum_state import Leader, QuorumConfig


def _leader(config: QuorumConfig) -> tuple[RaftCore, int]:
    core = RaftCore(1, config, random.Random(1), 0)
    now = 0
    while not isinstance(core.state, Leader):
        now += 100
        core.step(Tick(), now)
        assert now < 60_000, "a single voter did not elect itself"
    return core, now


def _fetch(core: RaftCore, source: int, offset: int, epoch: int, now: int) -> FetchResponse:
    actions = core.step(Received(source, FetchRequest(source, core.epoch, offset, epoch, 0, 0), 7), now)
    (response,) = [a.message for a in actions if isinstance(a, Send) and isinstance(a.message, FetchResponse)]
    return response


def test_a_fetch_answer_holds_at_most_fetch_max_bytes_but_always_one_entry() -> None:
    core, now = _leader(QuorumConfig(voters=frozenset({1}), fetch_max_bytes=10_000))
    start = core.log.end_offset
    core.propose([b"x" * 4_000] * 10, now)
    core.propose([b"y" * 50_000], now)
    first = _fetch(core, 100, start, core.epoch, now)
    assert [len(e.payload) for e in first.records] == [4_000, 4_000]  # a third would pass 10,000 bytes
    at_big = start + 10
    big = _fetch(core, 100, at_big, core.epoch, now)
    assert [len(e.payload) for e in big.records] == [50_000]  # alone over the bound: still sent


def test_the_log_read_bound() -> None:
    from samsa.raft.log import LogEntry

    log = RaftLog(None, [LogEntry(i, 1, b"z" * 100) for i in range(10)])
    assert len(log.read(0, 64)) == 10
    assert len(log.read(0, 64, 250)) == 2
    assert len(log.read(0, 64, 1)) == 1
    assert len(log.read(0, 3, 10_000)) == 3


def test_observers_that_stopped_fetching_are_forgotten() -> None:
    config = QuorumConfig(voters=frozenset({1}), observer_session_timeout_ms=1_000)
    core, now = _leader(config)
    end = core.log.end_offset
    for replica_id in range(100, 110):
        _fetch(core, replica_id, end, core.epoch, now)
    state = core.state
    assert isinstance(state, Leader) and set(range(100, 110)) <= set(state.replicas)
    now += 500
    _fetch(core, 105, end, core.epoch, now)  # still fetching
    now += 800
    _fetch(core, 200, end, core.epoch, now)  # a new id: the silent ones are dropped
    assert isinstance(core.state, Leader)
    assert set(core.state.replicas) == {105, 200}
