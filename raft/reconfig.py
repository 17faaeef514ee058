"""KIP-853 voter changes on the leader: AddRaftVoter and RemoveRaftVoter (Kafka: AddVoterHandler,
RemoveVoterHandler and LeaderState's voter-change state).

One change at a time: a change is refused while another is under way or its VotersRecord is uncommitted,
and until the leader has committed an entry of its own epoch (its high watermark is established). An add
goes in two steps, because Kafka asks the new voter for its ApiVersions first (its kraft.version range):
`begin_add_voter` runs the checks and marks the change pending, the driver asks, and `complete_add_voter`
checks that the new voter is a caught-up observer and appends the VotersRecord. A remove appends at once.
The leader uses the new set as soon as the record is in its log (raft.log); the change is done when the
high watermark passes the record (`on_high_watermark`), and a leader no longer in the set then resigns.

kraft.version (KIP-853): a quorum whose log has no voter records runs kraft.version 0 -- its voters are the
static controller.quorum.voters -- and refuses AddRaftVoter and RemoveRaftVoter with UNSUPPORTED_VERSION, as
Kafka 4.4 does for a quorum formatted without --standalone / --initial-controllers. `upgrade_kraft_version`
(UpdateFeatures kraft.version=1, Kafka: LeaderState.maybeAppendUpgradedKRaftVersion) appends the
KRaftVersionRecord and the first VotersRecord; from then on the quorum is at kraft.version 1 for good. A log
written by an older Samsa, which wrote both records with its first voter change, stays at 1.

Functions over the core (typed against raft.core_view.RaftCoreView), like raft.replication.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from samsa.raft.core_view import RaftCoreView
from samsa.raft.events import Action
from samsa.raft.log import EntryKind, LogEntry
from samsa.raft.messages import ErrorCode
from samsa.raft.quorum_state import Leader, VoterChange
from samsa.raft.voter_set import (
    KRAFT_VERSION_MAX,
    KRAFT_VERSION_MIN,
    ZERO_DIRECTORY_ID,
    VoterNode,
    VoterSet,
    encode_kraft_version,
    replica_key_text,
)

__all__ = [
    "CAUGHT_UP_FETCH_WINDOW_MS",
    "VoterChangeAppended",
    "VoterChangeCall",
    "VoterChangeRefused",
    "abort_voter_change",
    "begin_add_voter",
    "complete_add_voter",
    "current_voter_set",
    "kraft_version",
    "local_voter_node",
    "on_high_watermark",
    "remove_voter",
    "update_voter",
    "upgrade_kraft_version",
]

# Kafka: LeaderState.isReplicaCaughtUp -- an observer that caught up once and fetched within the hour.
CAUGHT_UP_FETCH_WINDOW_MS = 3_600_000


@dataclass(frozen=True, slots=True)
class VoterChangeRefused:
    error_code: ErrorCode
    message: str | None


@dataclass(frozen=True, slots=True)
class VoterChangeAppended:
    """The VotersRecord is at `offset`: the change is done once an entry past it is committed."""

    offset: int
    epoch: int


# What RaftCore.change_voters runs: one of the operations below, bound to its arguments.
VoterChangeCall = Callable[[RaftCoreView, Leader],
                           tuple["VoterChangeAppended | VoterChangeRefused | None", list[Action]]]


def kraft_version(core: RaftCoreView) -> int:
    """Kafka: KRaftControlRecordStateMachine.lastKraftVersion -- the kraft.version in the log, committed or not.
    Samsa writes the KRaftVersionRecord only together with the first VotersRecord, so a voter set in the log
    (or in the snapshot) means kraft.version 1, and none means 0."""
    return 0 if core.log.voter_set is None else 1


def local_voter_node(core: RaftCoreView) -> VoterNode:
    """Kafka: QuorumState.localVoterNodeOrThrow -- this replica's key, listeners and kraft.version range."""
    return VoterNode(core.node_id, core.directory_id, core.listeners, KRAFT_VERSION_MIN, KRAFT_VERSION_MAX)


def current_voter_set(core: RaftCoreView, leader: Leader) -> VoterSet:
    """The set in the log, or (none yet) the bootstrap voters with the directory ids this leader has seen
    in their fetches, and the leader's own entry saying what it is: what the first VotersRecord a Samsa
    cluster writes is made from."""
    stored = core.log.voter_set
    if stored is not None:
        return stored
    voters = []
    for v in (leader.volatile_voters or core.bootstrap_voters).voters:
        directory = v.directory_id
        replica = leader.replicas.get(v.voter_id)
        if v.voter_id == core.node_id:
            voters.append(VoterNode(v.voter_id, core.directory_id, core.listeners or v.endpoints,
                                    KRAFT_VERSION_MIN, KRAFT_VERSION_MAX))
            continue
        if directory == ZERO_DIRECTORY_ID and replica is not None:
            directory = replica.directory_id
        voters.append(VoterNode(v.voter_id, directory, v.endpoints, v.min_kraft_version, v.max_kraft_version))
    return VoterSet(tuple(voters))


def _pending(core: RaftCoreView, leader: Leader) -> bool:
    """Kafka: LeaderState.isOperationPending, which first expires a change past its deadline."""
    change = leader.voter_change
    if change is not None and core.now_ms >= change.deadline_ms:
        leader.voter_change = None
    return leader.voter_change is not None


def _common_refusal(core: RaftCoreView, leader: Leader, operation: str = "") -> VoterChangeRefused | None:
    """`operation` ("adding" / "removing") words the kraft.version 0 refusal; UpdateRaftVoter has none."""
    if _pending(core, leader):
        return VoterChangeRefused(ErrorCode.request_timed_out,
                                  "Request timed out waiting for leader to handle previous voter change request")
    # Kafka's leader has no high watermark until it commits an entry of its epoch (its LeaderChange).
    if core.high_watermark <= leader.epoch_start_offset:
        return VoterChangeRefused(ErrorCode.request_timed_out,
                                  "Request timed out waiting for leader to establish HWM and fence previous "
                                  "voter changes")
    if operation and kraft_version(core) == 0:
        return VoterChangeRefused(ErrorCode.unsupported_version,
                                  f"Cluster doesn't support {operation} voter because the kraft.version feature is 0")
    offset = core.log.voter_set_offset
    at = -1 if offset is None else offset  # the bootstrap voters stand before the log, like Kafka's 0-0.checkpoint
    if at >= core.high_watermark:
        return VoterChangeRefused(ErrorCode.request_timed_out,
                                  f"Request timed out waiting for voters to commit the latest voter change at "
                                  f"Optional[{at}] with HWM {core.high_watermark}")
    return None


def begin_add_voter(core: RaftCoreView, leader: Leader, voter_id: int, directory_id: uuid.UUID,
                    timeout_ms: int) -> tuple[VoterChangeRefused | None, list[Action]]:
    """Kafka: AddVoterHandler.handleAddVoterRequest up to its ApiVersions request. None: ask the new voter
    for its ApiVersions, then call complete_add_voter (or abort_voter_change)."""
    refused = _common_refusal(core, leader, "adding")
    if refused is not None:
        return refused, []
    voters = current_voter_set(core, leader)
    if voter_id in voters.ids:
        return VoterChangeRefused(ErrorCode.duplicate_voter,
                                  f"The voter id for {replica_key_text(voter_id, directory_id)} is already part "
                                  f"of the set of voters {voters.keys_text()}."), []
    leader.voter_change = VoterChange(True, voter_id, directory_id, core.now_ms + timeout_ms)
    return None, []


def complete_add_voter(core: RaftCoreView, leader: Leader, voter: VoterNode, api_versions_error: ErrorCode,
                       kraft_versions: tuple[int, int] | None
                       ) -> tuple[VoterChangeAppended | VoterChangeRefused, list[Action]]:
    """Kafka: AddVoterHandler.handleApiVersionsResponse. `kraft_versions` is the new voter's supported
    kraft.version range from its ApiVersions answer (None: it lists no kraft.version)."""
    change = leader.voter_change
    if change is None or not change.adding or change.voter_id != voter.voter_id or change.offset is not None:
        # Expired (or replaced) while the ApiVersions request was out: Kafka answers it REQUEST_TIMED_OUT.
        return VoterChangeRefused(ErrorCode.request_timed_out, None), []
    key = voter.key_text()
    if api_versions_error != ErrorCode.none:
        leader.voter_change = None
        return VoterChangeRefused(ErrorCode.request_timed_out,
                                  f"Aborted add voter operation for since API_VERSIONS returned an error "
                                  f"{api_versions_error.name.upper()}"), []
    finalized = kraft_version(core)  # 1: begin_add_voter refused kraft.version 0
    if kraft_versions is None or not kraft_versions[0] <= finalized <= kraft_versions[1]:
        leader.voter_change = None
        shown = "(min: 0, max: 0)" if kraft_versions is None else f"(min: {kraft_versions[0]}, max: {kraft_versions[1]}"
        return VoterChangeRefused(ErrorCode.invalid_request,
                                  f"Aborted add voter operation for {key} since the kraft.version range {shown} "
                                  f"doesn't support the finalized version {finalized}"), []
    replica = leader.replicas.get(voter.voter_id)
    caught_up = (replica is not None and voter.voter_id not in core.config.voters
                 and replica.directory_id == voter.directory_id
                 and replica.last_caught_up_ms >= 0 and replica.last_fetch_ms >= 0
                 and replica.last_fetch_ms > core.now_ms - CAUGHT_UP_FETCH_WINDOW_MS)
    if not caught_up:
        leader.voter_change = None
        return VoterChangeRefused(ErrorCode.request_timed_out,
                                  f"Aborted add voter operation for {key} since it is lagging behind"), []
    voters = current_voter_set(core, leader).add_voter(
        VoterNode(voter.voter_id, voter.directory_id, voter.endpoints, kraft_versions[0], kraft_versions[1]))
    assert voters is not None, "begin_add_voter checked that the id is not a voter"
    appended, actions = _append_voters(core, leader, voters)
    change.offset = appended.offset
    return appended, actions


def remove_voter(core: RaftCoreView, leader: Leader, voter_id: int, directory_id: uuid.UUID
                 ) -> tuple[VoterChangeAppended | VoterChangeRefused, list[Action]]:
    """Kafka: RemoveVoterHandler.handleRemoveVoterRequest."""
    refused = _common_refusal(core, leader, "removing")
    if refused is not None:
        return refused, []
    voters = current_voter_set(core, leader)
    remaining = voters.remove_voter(voter_id, directory_id)
    if remaining is None:
        return VoterChangeRefused(ErrorCode.voter_not_found,
                                  f"Cannot remove voter {replica_key_text(voter_id, directory_id)} from the set "
                                  f"of voters {voters.keys_text()}"), []
    appended, actions = _append_voters(core, leader, remaining)
    leader.voter_change = VoterChange(False, voter_id, directory_id, core.now_ms + core.config.request_timeout_ms,
                                      appended.offset)
    return appended, actions


def update_voter(core: RaftCoreView, leader: Leader, voter: VoterNode
                 ) -> tuple[VoterChangeAppended | VoterChangeRefused, list[Action]]:
    """Kafka: UpdateVoterHandler -- a voter tells the leader its listeners and kraft.version range (and its
    directory id, where the set has none). Answered at once, without waiting for the commit; no messages."""
    refused = _common_refusal(core, leader)
    if refused is not None:
        return VoterChangeRefused(refused.error_code, None), []
    finalized = kraft_version(core)
    if not voter.min_kraft_version <= finalized <= voter.max_kraft_version:
        return VoterChangeRefused(ErrorCode.invalid_request, None), []
    current = current_voter_set(core, leader)
    if finalized == 0:
        # Kafka 4.4 at kraft.version 0: the leader keeps what the voter says in memory (its "volatile voters",
        # VoterSet.updateVoterIgnoringDirectoryId), for a later upgrade, and writes nothing.
        old = current.get(voter.voter_id)
        if old is None:
            return VoterChangeRefused(ErrorCode.voter_not_found, None), []
        leader.volatile_voters = VoterSet(tuple(voter if v.voter_id == voter.voter_id else v for v in current.voters))
        return VoterChangeRefused(ErrorCode.none, None), []
    updated = current.update_voter(voter)
    if updated is None:
        return VoterChangeRefused(ErrorCode.voter_not_found, None), []
    return _append_voters(core, leader, updated)


def upgrade_kraft_version(core: RaftCoreView, leader: Leader, level: int, validate_only: bool
                          ) -> tuple[VoterChangeAppended | VoterChangeRefused | None, list[Action]]:
    """Kafka: KafkaRaftClient.upgradeKRaftVersion / LeaderState.maybeAppendUpgradedKRaftVersion, for
    UpdateFeatures kraft.version (UPGRADE): None when there is nothing to write (the level is already in force,
    or validate_only), else the KRaftVersionRecord and the VotersRecord of the static voters, appended. A voter
    the leader has not heard from (no fetch, no UpdateRaftVoter) has no known directory id or kraft.version
    range -- in Kafka (0, 0) -- so the upgrade waits for every voter (INVALID_UPDATE_VERSION meanwhile)."""
    current = kraft_version(core)
    if level == current:
        return None, []
    if level < current:
        return VoterChangeRefused(ErrorCode.invalid_update_version,
                                  f"Invalid upgrade of kraft.version from version KRAFT_VERSION_{current} to "
                                  f"KRAFT_VERSION_{level} because the new version is a downgrade"), []
    voters = current_voter_set(core, leader)
    if any(v.directory_id == ZERO_DIRECTORY_ID or not v.min_kraft_version <= level <= v.max_kraft_version
           for v in voters.voters):
        return VoterChangeRefused(ErrorCode.invalid_update_version,
                                  f"Invalid upgrade of kraft.version to KRAFT_VERSION_{level} because not all of "
                                  f"the voters support it"), []
    if validate_only:
        return None, []
    return _append_voters(core, leader, voters)


def _append_voters(core: RaftCoreView, leader: Leader, voters: VoterSet
                   ) -> tuple[VoterChangeAppended, list[Action]]:
    """Kafka: LeaderState.appendVotersRecord; the first VotersRecord of a Samsa log follows a
    KRaftVersionRecord (kraft.version 1), as in a Kafka log formatted with dynamic voters."""
    base = core.log.end_offset
    entries: list[LogEntry] = []
    if core.log.voter_set is None:
        entries.append(LogEntry(base, leader.epoch, encode_kraft_version(1), EntryKind.KRAFT_VERSION))
    entries.append(LogEntry(base + len(entries), leader.epoch, voters.encode(), EntryKind.VOTERS))
    actions = core.leader_append(leader, tuple(entries))
    return VoterChangeAppended(entries[-1].offset, leader.epoch), actions


def abort_voter_change(core: RaftCoreView, leader: Leader, voter_id: int) -> tuple[None, list[Action]]:
    """The driver could not complete an add (the new voter's ApiVersions failed to arrive)."""
    change = leader.voter_change
    if change is not None and change.voter_id == voter_id and change.offset is None:
        leader.voter_change = None
    return None, []


def on_high_watermark(core: RaftCoreView, leader: Leader) -> None:
    """Kafka: the handlers' highWatermarkUpdated -- a change is done once its record is committed; a leader
    that removed itself then resigns."""
    change = leader.voter_change
    if change is None or change.offset is None or core.high_watermark <= change.offset:
        return
    leader.voter_change = None
    if not change.adding and not core.is_voter:
        leader.resign_requested = True
