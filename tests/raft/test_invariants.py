"""The Raft core's safety invariants raise InvariantViolation, so they hold under `python -O` too."""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap

import pytest

from samsa.raft import LogEntry, PersistQuorumState, QuorumConfig, RaftCore, Received, Send, Tick
from samsa.raft.invariants import InvariantViolation
from samsa.raft.log import RaftLog
from samsa.raft.messages import BeginQuorumEpochRequest, EpochEndOffset, ErrorCode, FetchRequest, FetchResponse


def _single_voter_leader() -> RaftCore:
    core = RaftCore(1, QuorumConfig(voters=frozenset({1})), random.Random(0), 0)
    core.step(Tick(), 0)
    assert core.leader_id == 1 and core.epoch == 1
    return core


def _follower_with_two_committed_entries() -> tuple[RaftCore, int]:
    """Node 2 of {1, 2, 3}, following 1 in epoch 1, its two entries committed; returns the core and the
    correlation id of its fetch in flight."""
    entries = [LogEntry(0, 1, b"a"), LogEntry(1, 1, b"b")]
    core = RaftCore(2, QuorumConfig(voters=frozenset({1, 2, 3})), random.Random(0), 0,
                    quorum_state=PersistQuorumState(1, None, 1), entries=entries)
    fetch = next(a for a in core.step(Tick(), 0) if isinstance(a, Send) and isinstance(a.message, FetchRequest))
    actions = core.step(Received(1, FetchResponse(ErrorCode.none, 1, 1, 2, 0), fetch.correlation_id), 1)
    assert core.high_watermark == 2
    again = next(a for a in actions if isinstance(a, Send) and isinstance(a.message, FetchRequest))
    return core, again.correlation_id


def test_two_leaders_in_one_epoch_raise() -> None:
    core = _single_voter_leader()
    with pytest.raises(InvariantViolation, match="two leaders in epoch 1"):
        core.step(Received(2, BeginQuorumEpochRequest(2, 1), 0), 1)


def test_a_leader_asking_to_truncate_committed_entries_raises() -> None:
    core, cid = _follower_with_two_committed_entries()
    diverging = FetchResponse(ErrorCode.none, 1, 1, 2, 0, diverging_epoch=EpochEndOffset(0, 0))
    with pytest.raises(InvariantViolation, match="committed entries are never truncated"):
        core.step(Received(1, diverging, cid), 2)
    assert core.log.end_offset == 2  # nothing was cut


def test_time_going_backwards_raises() -> None:
    core = _single_voter_leader()
    core.step(Tick(), 10)
    with pytest.raises(InvariantViolation, match="time went backwards"):
        core.step(Tick(), 9)
    with pytest.raises(InvariantViolation, match="time went backwards"):
        core.propose([b"x"], 9)


def test_the_log_stays_contiguous_and_its_epochs_never_go_back() -> None:
    log = RaftLog(None, [LogEntry(0, 2, b"a")])
    with pytest.raises(InvariantViolation, match="contiguous"):
        log.append([LogEntry(2, 2, b"gap")])
    with pytest.raises(InvariantViolation, match="epoch 1 after one of epoch 2"):
        log.append([LogEntry(1, 1, b"older epoch")])
    with pytest.raises(InvariantViolation):
        log.truncate_to(5)
    assert log.end_offset == 1


def test_the_checks_survive_python_dash_o() -> None:
    script = textwrap.dedent("""
        import random
        assert False, "this line vanishes under -O"
        from samsa.raft import QuorumConfig, RaftCore, Received, Tick
        from samsa.raft.invariants import InvariantViolation
        from samsa.raft.log import LogEntry, RaftLog
        from samsa.raft.messages import BeginQuorumEpochRequest
        core = RaftCore(1, QuorumConfig(voters=frozenset({1})), random.Random(0), 0)
        core.step(Tick(), 0)
        log = RaftLog(None, [LogEntry(0, 2, b"a")])
        for check in (lambda: core.step(Received(2, BeginQuorumEpochRequest(2, 1), 0), 1),
                      lambda: core.step(Tick(), 0),
                      lambda: log.append([LogEntry(2, 2, b"gap")])):
            try:
                check()
            except InvariantViolation as e:
                print("refused:", e)
            else:
                print("accepted")
    """)
    done = subprocess.run([sys.executable, "-O", "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert len(lines) == 3 and all(line.startswith("refused:") for line in lines), done.stdout
