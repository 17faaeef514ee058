"""The roles of a quorum member (Kafka: QuorumState and its EpochState classes) and the quorum config.

    Unattached  --election timeout-->       Prospective   (voters only; KIP-996 pre-vote)
    Prospective --majority of pre-votes-->  Candidate     (epoch + 1, votes for itself)
    Prospective --rejected / timeout-->     Follower of the leader it knew, else Unattached (backoff)
    Candidate   --majority of votes-->      Leader        (appends LeaderChange, BeginQuorumEpoch)
    Candidate   --rejected / timeout-->     Prospective   (after a backoff; no epoch bump)
    Leader      --check-quorum / Resign-->  Resigned      (EndQuorumEpoch to the voters)
    Resigned    --election timeout-->       Prospective
    Follower    --fetch timeout-->          Prospective   (observers: Unattached, then ask any voter)
    any         --higher epoch seen-->      Follower (leader known) or Unattached
    not leader  --leader of our epoch known-->  Follower
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from samsa.raft.invariants import InvariantViolation
from samsa.raft.log import SnapshotId
from samsa.raft.voter_set import ZERO_DIRECTORY_ID, VoterSet

__all__ = [
    "Candidate",
    "EpochState",
    "Follower",
    "Leader",
    "ParkedFetch",
    "Prospective",
    "QuorumConfig",
    "ReplicaState",
    "Resigned",
    "SnapshotFetch",
    "Unattached",
    "VoterChange",
]


@dataclass(frozen=True, slots=True)
class QuorumConfig:
    """Timeouts follow Kafka's controller.quorum.* settings; every bound is named."""

    voters: frozenset[int]
    election_timeout_ms: int = 1000  # randomized in [t, 2t) like Kafka
    election_backoff_max_ms: int = 1000
    fetch_timeout_ms: int = 2000
    request_timeout_ms: int = 1000
    fetch_max_wait_ms: int = 500  # the leader parks an empty fetch this long (long poll)
    fetch_max_entries_count: int = 64
    # A Fetch answer holds at most this many bytes of entries (at least one entry): Kafka's
    # KafkaRaftClient.MAX_FETCH_SIZE_BYTES. 64 entries of 10,000 records each could be ~100 MB.
    fetch_max_bytes: int = 8 * 1024 * 1024
    # An observer (a replica id that is not a voter) not heard from this long is forgotten, so every id
    # that ever fetched does not stay in the leader's state (Kafka: LeaderState's OBSERVER_SESSION_TIMEOUT_MS).
    observer_session_timeout_ms: int = 300_000
    snapshot_chunk_bytes: int = 64 * 1024
    max_uncommitted_count: int = 4096  # propose() answers Busy beyond this
    retry_backoff_ms: int = 100  # before re-fetching after an error response

    def __post_init__(self) -> None:
        if not self.voters:
            raise InvariantViolation("a quorum needs at least one voter")
        if not self.fetch_max_wait_ms < self.request_timeout_ms < self.fetch_timeout_ms:
            raise InvariantViolation("fetch_max_wait_ms < request_timeout_ms < fetch_timeout_ms does not hold")

    @property
    def majority(self) -> int:
        return len(self.voters) // 2 + 1

    @property
    def check_quorum_timeout_ms(self) -> int:
        return self.fetch_timeout_ms * 3 // 2  # Kafka: LeaderState's checkQuorumTimer


@dataclass(slots=True)
class Unattached:
    """Epoch known, leader not; `voted_id` is the candidate this voter granted its vote in `epoch`."""

    epoch: int
    voted_id: int | None
    election_deadline_ms: int


@dataclass(slots=True)
class Prospective:
    """Asking for pre-votes for epoch + 1 without bumping the epoch (KIP-996)."""

    epoch: int
    voted_id: int | None
    leader_id: int | None  # the leader this node was following, if any: kept, not persisted anew
    election_deadline_ms: int
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)


@dataclass(slots=True)
class Candidate:
    epoch: int
    election_deadline_ms: int
    granted: set[int] = field(default_factory=set)
    rejected: set[int] = field(default_factory=set)


@dataclass(slots=True)
class ReplicaState:
    """What the leader knows of a replica (Kafka: LeaderState.ReplicaState)."""

    end_offset: int = 0
    last_fetch_ms: int = -1
    last_caught_up_ms: int = -1
    last_sent_high_watermark: int = -1  # so a fetch is parked only if the replica is fully up to date
    directory_id: uuid.UUID = ZERO_DIRECTORY_ID  # what its last Fetch said (v17, KIP-853); zero: unknown


@dataclass(frozen=True, slots=True)
class ParkedFetch:
    """An empty fetch the leader holds until new entries, a new high watermark, or the deadline."""

    correlation_id: int
    fetch_offset: int
    last_fetched_epoch: int
    deadline_ms: int


@dataclass(slots=True)
class VoterChange:
    """The one voter change a leader has under way (Kafka: AddVoterHandlerState / RemoveVoterHandlerState).

    An add waits for the new voter's ApiVersions (offset None) before its VotersRecord is appended; either
    is done when the high watermark passes `offset`, or abandoned at `deadline_ms`."""

    adding: bool
    voter_id: int
    directory_id: uuid.UUID
    deadline_ms: int
    offset: int | None = None


@dataclass(slots=True)
class Leader:
    epoch: int
    epoch_start_offset: int  # offset of this epoch's LeaderChange entry
    replicas: dict[int, ReplicaState]  # voters (but self) and observers that fetched
    begin_quorum_pending: set[int]  # voters that have not acknowledged this epoch yet
    begin_quorum_retry_ms: int
    parked: dict[int, ParkedFetch] = field(default_factory=dict)
    voter_change: VoterChange | None = None
    resign_requested: bool = False  # removed from the committed voter set (KIP-853): hand over
    # kraft.version 0: the static voters as their UpdateRaftVoter requests described them, kept in memory for
    # a kraft.version upgrade (Kafka: LeaderState's volatile voters)
    volatile_voters: VoterSet | None = None


@dataclass(slots=True)
class SnapshotFetch:
    snapshot_id: SnapshotId
    received: bytearray = field(default_factory=bytearray)


@dataclass(slots=True)
class Follower:
    epoch: int
    leader_id: int
    voted_id: int | None
    fetch_deadline_ms: int  # fetch timeout: no successful fetch since then → new election
    leader_ended: bool = False  # the leader said it resigned (EndQuorumEpoch or a fetch error)
    snapshot_fetch: SnapshotFetch | None = None
    # A voter checks its own entry in the voter set this often (KIP-853; Kafka 4.4's FollowerState
    # updateVoterSetPeriodTimer, one fetch timeout, first due one fetch timeout after it starts following).
    update_voter_due_ms: int = -1

    def __post_init__(self) -> None:
        if self.update_voter_due_ms < 0:
            self.update_voter_due_ms = self.fetch_deadline_ms


@dataclass(slots=True)
class Resigned:
    epoch: int
    election_deadline_ms: int


EpochState = Unattached | Prospective | Candidate | Leader | Follower | Resigned
