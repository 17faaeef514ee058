"""The metadata quorum: a sans-IO KRaft core (KIP-595, KIP-630 snapshots, KIP-996 pre-vote, KIP-853 voters).

    core = RaftCore(node_id, QuorumConfig(voters=frozenset({1, 2, 3})), random.Random(seed), now_ms,
                    quorum_state=..., snapshot=..., entries=...)      # what survived on disk
    actions = core.step(Tick() | Received(source, message, correlation_id) | Resign() | TakeSnapshot(...), now_ms)
    result, actions = core.propose([payload, ...], now_ms)           # Appended | NotLeader | Busy
    core.next_deadline_ms()                                           # when to step(Tick()) next
    core.describe_quorum()                                            # DescribeQuorum, on the leader

The driver executes actions in order; persist actions are durable before anything after them runs
(raft.events has the contract). Modules: messages (the RPCs), events (inputs, actions), log (the
in-memory log + epoch cache), quorum_state (roles and config), core (the state machine), election
(Vote, BeginQuorumEpoch, EndQuorumEpoch), replication (Fetch, FetchSnapshot, high watermark,
check-quorum), voter_set (KIP-853: the voters as VotersRecord / KRaftVersionRecord control records),
reconfig (the leader's AddRaftVoter / RemoveRaftVoter / UpdateRaftVoter rules, run by core.change_voters),
voter_update (a voter's own UpdateRaftVoter, sent while its entry in the voter set is not what it is),
core_view (the Protocol election and replication see the core through), invariants (InvariantViolation),
codec and batch_codec (the wire and on-disk encodings).

Where the driver is: not here. The production driver is samsa.broker.metadata.quorum (MetadataQuorum),
with its disk writer in samsa.broker.metadata.raft_disk. It lives in the broker because it needs what
only the broker has: its event loop (timers, the worker thread that writes and fsyncs one step's
persist actions, then the sends), its listeners and node clients for the Raft RPCs, the
`__cluster_metadata-0` log in the broker's data directory, and the metadata image the committed entries
are applied to. This package stays sans-IO so a deterministic simulator (tests/sim) drives the same core.
"""

from samsa.raft.core import RaftCore
from samsa.raft.events import (
    Action,
    AdvanceLogStartOffset,
    Appended,
    AppendToLog,
    BecomeFollower,
    BecomeLeader,
    Busy,
    CommitUpTo,
    Input,
    LoadSnapshot,
    NotLeader,
    PersistQuorumState,
    PersistSnapshot,
    ProposeResult,
    Received,
    Resign,
    Send,
    TakeSnapshot,
    Tick,
    TruncateLog,
)
from samsa.raft.log import EntryKind, LogEntry, Snapshot, SnapshotId
from samsa.raft.quorum_state import QuorumConfig

__all__ = [
    "Action",
    "AdvanceLogStartOffset",
    "AppendToLog",
    "Appended",
    "BecomeFollower",
    "BecomeLeader",
    "Busy",
    "CommitUpTo",
    "EntryKind",
    "Input",
    "LoadSnapshot",
    "LogEntry",
    "NotLeader",
    "PersistQuorumState",
    "PersistSnapshot",
    "ProposeResult",
    "QuorumConfig",
    "RaftCore",
    "Received",
    "Resign",
    "Send",
    "Snapshot",
    "SnapshotId",
    "TakeSnapshot",
    "Tick",
    "TruncateLog",
]
