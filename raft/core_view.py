"""RaftCoreView: what raft.election and raft.replication need from the core, as a typing.Protocol.

The two modules are functions over the core (to keep each module readable); typing them against this
narrow view rather than RaftCore keeps the imports one way: core -> election, replication -> core_view.
RaftCore satisfies it structurally; mypy checks that at every call that passes `self`.
"""

from __future__ import annotations

import uuid
from typing import Protocol

from samsa.raft.events import Action, Send
from samsa.raft.log import LogEntry, RaftLog
from samsa.raft.messages import RaftMessage
from samsa.raft.quorum_state import EpochState, Leader, QuorumConfig
from samsa.raft.voter_set import VoterEndpoint, VoterSet

__all__ = ["RaftCoreView"]


class RaftCoreView(Protocol):
    """The RaftCore's state and helpers that elections and replication read and call."""

    node_id: int
    directory_id: uuid.UUID
    bootstrap_voters: VoterSet
    listeners: tuple[VoterEndpoint, ...]  # this replica's controller listeners (KIP-853)
    config: QuorumConfig
    log: RaftLog
    state: EpochState
    now_ms: int
    high_watermark: int
    applied_offset: int  # CommitUpTo has delivered everything below this

    @property
    def epoch(self) -> int: ...

    @property
    def is_voter(self) -> bool: ...

    def voter_set(self) -> VoterSet: ...

    @property
    def leader_id(self) -> int | None: ...

    # -- transitions and timers ------------------------------------------------------------------

    def transition(self, new: EpochState) -> list[Action]: ...

    def become_follower(self, epoch: int, leader_id: int) -> list[Action]: ...

    def on_leader_resigned(self) -> list[Action]: ...

    def election_deadline(self, now_ms: int) -> int: ...

    def backoff_deadline(self) -> int: ...

    # -- appending and sending -------------------------------------------------------------------

    def leader_append(self, leader: Leader, entries: tuple[LogEntry, ...]) -> list[Action]: ...

    def begin_quorum_epoch(self, voter: int) -> Send: ...

    def request(self, destination: int, message: RaftMessage) -> Send: ...

    def respond(self, destination: int, cid: int, message: RaftMessage) -> Send: ...

    def request_fetch(self, destination: int, message: RaftMessage) -> Send: ...

    def retry_fetch_later(self) -> None: ...
