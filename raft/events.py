"""What the driver feeds the Raft core (inputs) and what the core asks the driver to do (actions).

The driver executes a step's actions in list order, and the actions of one step before those of the
next. Every Persist*/AppendToLog/TruncateLog/AdvanceLogStartOffset action must be durable (fsynced)
before the driver executes any later action: that is how "persist before you send" holds — a vote
grant is sent after its PersistQuorumState, a follower's Fetch acknowledging an offset after the
AppendToLog that wrote it. A driver with a slow disk simply holds later actions back; it may keep
stepping the core meanwhile (the new actions queue behind). There is no completion input: a persist
action is complete when the driver moves past it. A crash loses the queue, never a durable write.

A driver may batch: take every queued action, carry out the persist actions among them in order and
make them durable together (one fsync of the log), then execute the others in order. That only
delays non-persist actions, never moves one ahead of a persist action queued before it, so the
contract holds. The production driver does exactly this, off the event loop:
broker/metadata/quorum.py (MetadataQuorum) with its writer in broker/metadata/raft_disk.py.

A driver loop, in short:

    core = RaftCore(node_id, config, rng, now_ms, quorum_state=..., snapshot=..., entries=...)
    queue.extend(core.step(Tick(), now_ms))          # then: every message, timer and snapshot
    # executor, in order: PersistQuorumState / AppendToLog / TruncateLog / PersistSnapshot /
    #   AdvanceLogStartOffset -> write + fsync; Send -> encode (kio) and send; CommitUpTo /
    #   LoadSnapshot -> the state machine; BecomeLeader / BecomeFollower -> the controller.
    # timer: step(Tick()) at core.next_deadline_ms().
"""

from __future__ import annotations

from dataclasses import dataclass

from samsa.raft.log import LogEntry, Snapshot
from samsa.raft.messages import RaftMessage

__all__ = [
    "Action",
    "AdvanceLogStartOffset",
    "AppendToLog",
    "Appended",
    "BecomeFollower",
    "BecomeLeader",
    "Busy",
    "CommitUpTo",
    "Input",
    "LoadSnapshot",
    "NotLeader",
    "PersistQuorumState",
    "PersistSnapshot",
    "ProposeResult",
    "Received",
    "Resign",
    "Send",
    "TakeSnapshot",
    "Tick",
    "TruncateLog",
]

# -- inputs ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Tick:
    """Time passed; the core fires whichever of its timers are due at `now_ms` (see next_deadline_ms)."""


@dataclass(frozen=True, slots=True)
class Received:
    """A message from `source`. A response carries the correlation_id of the Send it answers.

    Correlation ids start over when a RaftCore is constructed: like Kafka's, they belong to a
    connection, and a response to a request sent before a restart must never be delivered after it.
    """

    source: int
    message: RaftMessage
    correlation_id: int


@dataclass(frozen=True, slots=True)
class Resign:
    """Graceful shutdown of the leader: hand over with EndQuorumEpoch (a no-op on a non-leader)."""


@dataclass(frozen=True, slots=True)
class TakeSnapshot:
    """The state machine's image of every entry below `end_offset` (<= what CommitUpTo delivered)."""

    end_offset: int
    data: bytes


Input = Tick | Received | Resign | TakeSnapshot

# -- actions -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PersistQuorumState:
    """Kafka's quorum-state file: (epoch, voted_id, leader_id); None when unknown."""

    epoch: int
    voted_id: int | None
    leader_id: int | None


@dataclass(frozen=True, slots=True)
class AppendToLog:
    entries: tuple[LogEntry, ...]


@dataclass(frozen=True, slots=True)
class TruncateLog:
    """Delete every entry at or above `offset`."""

    offset: int


@dataclass(frozen=True, slots=True)
class PersistSnapshot:
    snapshot: Snapshot


@dataclass(frozen=True, slots=True)
class AdvanceLogStartOffset:
    """Entries below `log_start_offset` are covered by the latest snapshot and may be deleted."""

    log_start_offset: int


@dataclass(frozen=True, slots=True)
class Send:
    """Send `message` to `destination`; a request's response must come back with this correlation_id."""

    destination: int
    message: RaftMessage
    correlation_id: int


@dataclass(frozen=True, slots=True)
class CommitUpTo:
    """The high watermark advanced: apply `entries` (control entries included) to the state machine."""

    high_watermark: int
    entries: tuple[LogEntry, ...]


@dataclass(frozen=True, slots=True)
class LoadSnapshot:
    """Replace the state machine's image with `snapshot` (a follower caught up by FetchSnapshot)."""

    snapshot: Snapshot


@dataclass(frozen=True, slots=True)
class BecomeLeader:
    epoch: int


@dataclass(frozen=True, slots=True)
class BecomeFollower:
    """This node is not the leader of `epoch`; `leader_id` is the leader if known."""

    epoch: int
    leader_id: int | None


Action = (
    PersistQuorumState
    | AppendToLog
    | TruncateLog
    | PersistSnapshot
    | AdvanceLogStartOffset
    | Send
    | CommitUpTo
    | LoadSnapshot
    | BecomeLeader
    | BecomeFollower
)

# -- propose results ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Appended:
    """Proposed entries got offsets base_offset..last_offset in `epoch`; committed once CommitUpTo
    delivers an entry at last_offset with this epoch (a later leader may truncate them instead)."""

    base_offset: int
    last_offset: int
    epoch: int


@dataclass(frozen=True, slots=True)
class NotLeader:
    leader_id: int | None
    epoch: int


@dataclass(frozen=True, slots=True)
class Busy:
    """More than max_uncommitted_count entries wait for the high watermark; retry later."""

    uncommitted_count: int


ProposeResult = Appended | NotLeader | Busy
