"""The KRaft RPCs the core sends and receives, as small frozen values (one partition each).

Each class mirrors the partition-level data of Kafka's schema (kio.schema.<api>.v<n>) with the same
field names, flattened to the single `__cluster_metadata-0` partition, so the driver converts them to
and from kio's wire classes field by field:

    VoteRequest / VoteResponse                       kio.schema.vote.v2              (KIP-595, KIP-996)
    BeginQuorumEpochRequest / Response               kio.schema.begin_quorum_epoch.v1
    EndQuorumEpochRequest / Response                 kio.schema.end_quorum_epoch.v1
    FetchRequest / FetchResponse                     kio.schema.fetch.v17            (replica fetch)
    FetchSnapshotRequest / FetchSnapshotResponse     kio.schema.fetch_snapshot.v1    (KIP-630)
    DescribeQuorumResponse (answered by RaftCore.describe_quorum, not stepped)  describe_quorum.v2
    UpdateVoterRequest / UpdateVoterResponse         kio.schema.update_raft_voter.v0 (KIP-853)

Who sent a message and which request a response answers travel beside it (`Received.source`,
`correlation_id`), as they do in Kafka's request header.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from samsa.raft.log import LogEntry, SnapshotId
from samsa.raft.voter_set import ZERO_DIRECTORY_ID, VoterEndpoint

__all__ = [
    "NO_EPOCH",
    "NO_LEADER",
    "BeginQuorumEpochRequest",
    "BeginQuorumEpochResponse",
    "DescribeQuorumResponse",
    "EndQuorumEpochRequest",
    "EndQuorumEpochResponse",
    "EpochEndOffset",
    "ErrorCode",
    "FetchRequest",
    "FetchResponse",
    "FetchSnapshotRequest",
    "FetchSnapshotResponse",
    "RaftMessage",
    "RaftRequest",
    "RaftResponse",
    "ReplicaDescription",
    "UpdateVoterRequest",
    "UpdateVoterResponse",
    "VoteRequest",
    "VoteResponse",
]

NO_LEADER = -1  # Kafka's "leader_id = -1 if unknown"
NO_EPOCH = -1


@dataclass(frozen=True, slots=True)
class VoteRequest:
    """vote.v2 PartitionData; `replica_epoch` is the epoch the candidate asks votes for."""

    replica_id: int
    replica_epoch: int
    last_offset_epoch: int
    last_offset: int
    pre_vote: bool


@dataclass(frozen=True, slots=True)
class VoteResponse:
    error_code: ErrorCode
    leader_id: int
    leader_epoch: int
    vote_granted: bool


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochRequest:
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class BeginQuorumEpochResponse:
    error_code: ErrorCode
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class EndQuorumEpochRequest:
    """end_quorum_epoch.v1; preferred_candidates is ordered best first (ReplicaInfo.candidate_id)."""

    leader_id: int
    leader_epoch: int
    preferred_candidates: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class EndQuorumEpochResponse:
    error_code: ErrorCode
    leader_id: int
    leader_epoch: int


@dataclass(frozen=True, slots=True)
class FetchRequest:
    """fetch.v17 with ReplicaState.replica_id and one FetchPartition.

    `fetch_offset` is the follower's durable log end offset: the leader counts it as acknowledged.
    """

    replica_id: int
    current_leader_epoch: int
    fetch_offset: int
    last_fetched_epoch: int
    log_start_offset: int
    max_wait_ms: int
    replica_directory_id: uuid.UUID = ZERO_DIRECTORY_ID  # v17 (KIP-853); zero: none


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    epoch: int = NO_EPOCH
    end_offset: int = -1


@dataclass(frozen=True, slots=True)
class FetchResponse:
    """fetch.v17 PartitionData: exactly one of records, diverging_epoch, snapshot_id is meaningful."""

    error_code: ErrorCode
    leader_id: int  # current_leader.leader_id
    leader_epoch: int  # current_leader.leader_epoch
    high_watermark: int
    log_start_offset: int
    records: tuple[LogEntry, ...] = ()
    diverging_epoch: EpochEndOffset | None = None
    snapshot_id: SnapshotId | None = None


@dataclass(frozen=True, slots=True)
class FetchSnapshotRequest:
    replica_id: int
    current_leader_epoch: int
    snapshot_id: SnapshotId
    position: int
    max_bytes: int


@dataclass(frozen=True, slots=True)
class FetchSnapshotResponse:
    """fetch_snapshot.v1 PartitionSnapshot; `unaligned_records` is a chunk of the snapshot bytes."""

    error_code: ErrorCode
    leader_id: int
    leader_epoch: int
    snapshot_id: SnapshotId
    size: int
    position: int
    unaligned_records: bytes


@dataclass(frozen=True, slots=True)
class ReplicaDescription:
    """describe_quorum.v2 ReplicaState; timestamps are in the driver's now_ms clock (-1: never)."""

    replica_id: int
    log_end_offset: int
    last_fetch_timestamp: int
    last_caught_up_timestamp: int
    replica_directory_id: uuid.UUID = ZERO_DIRECTORY_ID


@dataclass(frozen=True, slots=True)
class DescribeQuorumResponse:
    """describe_quorum.v2 PartitionData, for kafka-metadata-quorum.sh describe --status --replication."""

    error_code: ErrorCode
    leader_id: int
    leader_epoch: int
    high_watermark: int
    current_voters: tuple[ReplicaDescription, ...]
    observers: tuple[ReplicaDescription, ...]


@dataclass(frozen=True, slots=True)
class UpdateVoterRequest:
    """update_raft_voter.v0: a voter tells the leader what it is -- its replica key, its listeners and the
    kraft.version range it supports -- so that its entry in the voter set says so (KIP-853)."""

    voter_id: int
    voter_directory_id: uuid.UUID
    current_leader_epoch: int
    listeners: tuple[VoterEndpoint, ...]
    min_kraft_version: int
    max_kraft_version: int


@dataclass(frozen=True, slots=True)
class UpdateVoterResponse:
    error_code: ErrorCode
    leader_id: int  # current_leader.leader_id
    leader_epoch: int  # current_leader.leader_epoch


RaftRequest = (
    VoteRequest | BeginQuorumEpochRequest | EndQuorumEpochRequest | FetchRequest | FetchSnapshotRequest
)
RaftResponse = (
    VoteResponse | BeginQuorumEpochResponse | EndQuorumEpochResponse | FetchResponse | FetchSnapshotResponse
)
# UpdateRaftVoter is not one of the quorum's own RPCs in Samsa's driver (the controller listener's handler answers
# it, broker.handlers.raft_voters), but the core sends it and, for a driver that delivers it (tests/sim), answers it.
RaftMessage = RaftRequest | RaftResponse | UpdateVoterRequest | UpdateVoterResponse
