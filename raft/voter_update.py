"""KIP-853 UpdateRaftVoter, the voter's side (Kafka 4.4: KafkaRaftClient.pollFollowerAsVoter,
shouldSendUpdateVoteRequest, maybeSendUpdateVoterRequest), and the leader's answer to it when a driver
delivers it to the core (tests/sim; Samsa's broker answers it in broker.handlers.raft_voters).

A voter following a known leader checks, once per fetch timeout, its own entry in the voter set in force:
when that entry is its (same id, and the same directory id or none recorded) but differs from what the
voter is -- its directory id, its controller listeners, the kraft.version range it supports -- it sends
the leader UpdateRaftVoter, and again every fetch timeout until the set it fetches says what it is. So a
static voter whose directory id the leader had not seen when it wrote the first VotersRecord gets it
recorded, and can then be removed by its replica key.

Kafka's rule needs kraft.version 1 in the log; a Samsa log is at kraft.version 1 from its first VotersRecord
(raft.reconfig writes the KRaftVersionRecord before it). Before that the voters are the static bootstrap
set, whose directory ids the leader takes from the voters' fetches (raft.reconfig.current_voter_set), so
nothing is sent. (Kafka 4.4 also sends it once per leader at kraft.version 0, for a later kraft.version
upgrade; a Samsa leader learns the same from the fetches, and still answers such a request as Kafka does:
raft.reconfig.update_voter keeps it in memory.)
"""

from __future__ import annotations

from samsa.raft import reconfig
from samsa.raft.core_view import RaftCoreView
from samsa.raft.events import Action
from samsa.raft.log import EntryKind, LogEntry
from samsa.raft.messages import ErrorCode, UpdateVoterRequest, UpdateVoterResponse
from samsa.raft.quorum_state import Follower, Leader
from samsa.raft.reconfig import local_voter_node
from samsa.raft.voter_set import ZERO_DIRECTORY_ID, VoterNode

__all__ = ["maybe_send_update_voter", "needs_update", "on_update_voter_request", "start_of_epoch_entries"]


def needs_update(core: RaftCoreView) -> bool:
    """Kafka: shouldSendUpdateVoteRequest at kraft.version 1 -- VoterSet.voterNodeNeedsUpdate(local node)."""
    voters = core.log.voter_set
    if voters is None or core.directory_id == ZERO_DIRECTORY_ID or not core.listeners:
        return False  # no VotersRecord yet, or nothing the leader would accept (it needs both)
    entry = voters.get(core.node_id)
    if entry is None or entry.directory_id not in (ZERO_DIRECTORY_ID, core.directory_id):
        return False  # not a voter, or the set's voter with this id is another replica
    return not _same(entry, local_voter_node(core))


def _same(a: VoterNode, b: VoterNode) -> bool:
    """Kafka's VoterNode.equals: endpoints compare as a map (by listener name), not in order."""
    return (a.voter_id, a.directory_id, sorted(a.endpoints), a.min_kraft_version, a.max_kraft_version) == \
        (b.voter_id, b.directory_id, sorted(b.endpoints), b.min_kraft_version, b.max_kraft_version)


def start_of_epoch_entries(core: RaftCoreView, epoch: int, offset: int) -> tuple[LogEntry, ...]:
    """Kafka: LeaderState.appendStartOfEpochControlRecords -- a new leader whose own entry differs from what it
    is appends the set with its entry updated, after its LeaderChange (it sends nobody UpdateRaftVoter)."""
    voters = core.log.voter_set
    if voters is None or not needs_update(core):
        return ()
    updated = voters.update_voter(local_voter_node(core))
    assert updated is not None, "needs_update found this replica's entry"
    return (LogEntry(offset, epoch, updated.encode(), EntryKind.VOTERS),)


def maybe_send_update_voter(core: RaftCoreView, follower: Follower) -> list[Action]:
    """A voter's follower tick: UpdateRaftVoter to the leader when its period is up and its entry differs."""
    if core.now_ms < follower.update_voter_due_ms or follower.leader_ended or not core.is_voter:
        return []
    follower.update_voter_due_ms = core.now_ms + core.config.fetch_timeout_ms
    if not needs_update(core):
        return []
    me = local_voter_node(core)
    return [core.request(follower.leader_id, UpdateVoterRequest(
        me.voter_id, me.directory_id, follower.epoch, me.endpoints, me.min_kraft_version, me.max_kraft_version))]


def on_update_voter_request(core: RaftCoreView, source: int, request: UpdateVoterRequest, cid: int
                            ) -> list[Action]:
    """Kafka: handleUpdateVoterRequest's checks, then raft.reconfig.update_voter; answered at the append."""
    s = core.state
    leader = core.leader_id
    error = ErrorCode.none
    actions: list[Action] = []
    if request.current_leader_epoch < core.epoch:
        error = ErrorCode.fenced_leader_epoch
    elif request.current_leader_epoch > core.epoch:
        error = ErrorCode.unknown_leader_epoch
    elif not isinstance(s, Leader):
        error = ErrorCode.not_leader_or_follower
    elif request.voter_directory_id == ZERO_DIRECTORY_ID or request.voter_id < 0 or not request.listeners:
        error = ErrorCode.invalid_request
    else:
        voter = VoterNode(request.voter_id, request.voter_directory_id, request.listeners,
                          request.min_kraft_version, request.max_kraft_version)
        result, actions = reconfig.update_voter(core, s, voter)
        if isinstance(result, reconfig.VoterChangeRefused):
            error = result.error_code
    answer = UpdateVoterResponse(error, -1 if leader is None else leader, core.epoch)
    return [*actions, core.respond(source, cid, answer)]
