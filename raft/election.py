"""Elections (KIP-595 Vote, KIP-996 pre-vote) and epoch handover (BeginQuorumEpoch, EndQuorumEpoch).

Functions over a RaftCore, like raft.replication, typed against the narrow raft.core_view.RaftCoreView
so they need not import raft.core (which calls them). A voter whose timer fires becomes Prospective and
asks for pre-votes for epoch + 1 without bumping its epoch; with a majority it becomes Candidate
(persisting its vote for itself), and with a majority of votes Leader: it appends a LeaderChange entry
and announces itself with BeginQuorumEpoch. A leader that resigns sends EndQuorumEpoch naming its
preferred successors. Every vote is persisted before it is answered.
"""

from __future__ import annotations

from samsa.raft import voter_update
from samsa.raft.core_view import RaftCoreView
from samsa.raft.events import Action
from samsa.raft.invariants import InvariantViolation
from samsa.raft.log import EntryKind, LogEntry
from samsa.raft.messages import (
    NO_LEADER,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    ErrorCode,
    VoteRequest,
    VoteResponse,
)
from samsa.raft.quorum_state import Candidate, Follower, Leader, Prospective, ReplicaState, Resigned, Unattached

# -- voting --------------------------------------------------------------------------------------------


def on_vote_request(core: RaftCoreView, source: int, req: VoteRequest, cid: int) -> list[Action]:
    actions: list[Action] = []
    # KIP-853 (Kafka 3.9+): no voter-set check on either side. The voter set in a replica's log may lag the
    # candidate's (a voter added in a record it has not fetched yet must still vote, or a two-voter set after
    # an add could never elect); the candidate only counts the answers of the voters it asked.
    if req.replica_epoch < core.epoch:
        return [core.respond(source, cid, _vote_response(core, False, ErrorCode.fenced_leader_epoch))]
    log_ok = (req.last_offset_epoch, req.last_offset) >= (core.log.last_fetched_epoch, core.log.end_offset)
    if req.pre_vote and req.replica_epoch - 1 > core.epoch:
        # The sender already holds a higher epoch (a pre-vote asks for its epoch + 1): it lost an
        # election there and can never follow us back in ours, so we move up to it, as etcd-raft does
        # when it meets a higher term. This happens once per such epoch, not once per pre-vote round.
        actions += core.transition(Unattached(req.replica_epoch - 1, None, core.election_deadline(core.now_ms)))
    if req.pre_vote:
        # KIP-996: a pre-vote changes nothing here, whatever its epoch.
        return [*actions, core.respond(source, cid, _vote_response(core, _can_grant_pre_vote(core, req, log_ok)))]
    if req.replica_epoch > core.epoch:
        actions += core.transition(Unattached(req.replica_epoch, None, core.election_deadline(core.now_ms)))
    granted = False
    s = core.state
    match s:
        case Unattached() | Prospective() if s.voted_id is not None:
            granted = s.voted_id == req.replica_id  # the same vote again (a retried request)
        case Unattached() | Prospective():
            if log_ok and not (isinstance(s, Prospective) and s.leader_id is not None):
                granted = True
                deadline = core.election_deadline(core.now_ms)
                actions += core.transition(Unattached(s.epoch, req.replica_id, deadline))
        case Follower():
            granted = False  # there is a leader in this epoch
        case Candidate() | Leader() | Resigned():
            granted = False  # voted for itself
    # The vote is durable (PersistQuorumState above) before this response leaves.
    actions.append(core.respond(source, cid, _vote_response(core, granted)))
    return actions


def _can_grant_pre_vote(core: RaftCoreView, req: VoteRequest, log_ok: bool) -> bool:
    s = core.state
    if not log_ok:
        return False
    match s:
        case Leader():
            return False
        case Follower():
            # Do not help anyone disrupt a leader we still hear from (KIP-996).
            return s.leader_ended or core.now_ms >= s.fetch_deadline_ms
        case Unattached() if req.replica_epoch == s.epoch and s.voted_id is not None:
            return s.voted_id == req.replica_id
        case _:
            return True


def _vote_response(core: RaftCoreView, granted: bool, error: ErrorCode = ErrorCode.none) -> VoteResponse:
    return VoteResponse(error, _known_leader_or_none(core), core.epoch, granted)


def _known_leader_or_none(core: RaftCoreView) -> int:
    leader = core.leader_id
    return NO_LEADER if leader is None else leader


def on_vote_response(core: RaftCoreView, source: int, resp: VoteResponse) -> list[Action]:
    s = core.state
    if not isinstance(s, Prospective | Candidate):
        return []
    (s.granted if resp.vote_granted else s.rejected).add(source)
    if len(s.granted) >= core.config.majority:
        return become_candidate(core) if isinstance(s, Prospective) else _become_leader(core)
    if len(s.rejected) >= core.config.majority:
        if isinstance(s, Prospective):
            return prospective_lost(core)
        # Lost this round; back off before the next one (Kafka: election backoff).
        s.election_deadline_ms = min(s.election_deadline_ms, core.backoff_deadline())
    return []


def prospective_lost(core: RaftCoreView) -> list[Action]:
    """Kafka: prospectiveTransitionAfterElectionLoss — back to the leader we knew (fetching will tell
    whether it is alive), else Unattached for a backoff before the next pre-vote round."""
    s = core.state
    assert isinstance(s, Prospective)
    if s.leader_id is not None:
        return core.become_follower(s.epoch, s.leader_id)
    return core.transition(Unattached(s.epoch, s.voted_id, core.backoff_deadline()))


def become_prospective(core: RaftCoreView) -> list[Action]:
    if not core.is_voter:
        raise InvariantViolation(f"observer {core.node_id} stood for election")
    s = core.state
    voted = s.voted_id if isinstance(s, Unattached | Prospective | Follower) else None
    if isinstance(s, Candidate | Resigned):
        voted = core.node_id
    leader = None
    if isinstance(s, Follower) and not s.leader_ended:
        leader = s.leader_id  # kept: if the election fails we go back to it
    new = Prospective(s.epoch, voted, leader, core.election_deadline(core.now_ms), granted={core.node_id})
    actions = core.transition(new)
    if len(new.granted) >= core.config.majority:
        return actions + become_candidate(core)
    request = _vote_request(core, new.epoch + 1, pre_vote=True)
    actions += [core.request(v, request) for v in sorted(core.config.voters - {core.node_id})]
    return actions


def become_candidate(core: RaftCoreView) -> list[Action]:
    new = Candidate(core.epoch + 1, core.election_deadline(core.now_ms), granted={core.node_id})
    actions = core.transition(new)  # persists the vote for ourselves first
    if len(new.granted) >= core.config.majority:
        return actions + _become_leader(core)
    request = _vote_request(core, new.epoch, pre_vote=False)
    actions += [core.request(v, request) for v in sorted(core.config.voters - {core.node_id})]
    return actions


def _vote_request(core: RaftCoreView, epoch: int, pre_vote: bool) -> VoteRequest:
    return VoteRequest(core.node_id, epoch, core.log.last_fetched_epoch, core.log.end_offset, pre_vote)


def _become_leader(core: RaftCoreView) -> list[Action]:
    s = core.state
    assert isinstance(s, Candidate)
    if len(s.granted) < core.config.majority:
        raise InvariantViolation(
            f"leader of epoch {s.epoch} with {len(s.granted)} votes of {core.config.majority} needed")
    others = core.config.voters - {core.node_id}
    leader = Leader(
        epoch=s.epoch,
        epoch_start_offset=core.log.end_offset,
        # Every voter gets a full check-quorum period from the election on.
        replicas={v: ReplicaState(last_fetch_ms=core.now_ms) for v in others},
        begin_quorum_pending=set(others),
        begin_quorum_retry_ms=core.now_ms + core.config.request_timeout_ms,
    )
    actions = core.transition(leader)
    # Kafka's LeaderChange control record: the high watermark can only reach entries of this epoch.
    change = LogEntry(core.log.end_offset, s.epoch, f"leader={core.node_id}".encode(), EntryKind.LEADER_CHANGE)
    # KIP-853: and the voter set with its own entry updated, if that entry is not what this leader is.
    own = voter_update.start_of_epoch_entries(core, s.epoch, change.offset + 1)
    actions += core.leader_append(leader, (change, *own))
    actions += [core.begin_quorum_epoch(v) for v in sorted(others)]
    return actions


# -- BeginQuorumEpoch / EndQuorumEpoch ---------------------------------------------------------


def on_begin_quorum_epoch(core: RaftCoreView, source: int, req: BeginQuorumEpochRequest, cid: int) -> list[Action]:
    actions: list[Action] = []
    if req.leader_epoch > core.epoch:
        actions += core.become_follower(req.leader_epoch, req.leader_id)
    elif req.leader_epoch == core.epoch:
        s = core.state
        match s:
            case Leader() | Resigned():
                if req.leader_id != core.node_id:
                    raise InvariantViolation(f"two leaders in epoch {core.epoch}: {core.node_id} and {req.leader_id}")
            case Follower():
                if s.leader_id != req.leader_id:
                    raise InvariantViolation(f"two leaders in epoch {core.epoch}: {s.leader_id} and {req.leader_id}")
            case Unattached() | Prospective() | Candidate():
                actions += core.become_follower(req.leader_epoch, req.leader_id)
    error = ErrorCode.fenced_leader_epoch if req.leader_epoch < core.epoch else ErrorCode.none
    response = BeginQuorumEpochResponse(error, _known_leader_or_none(core), core.epoch)
    return [*actions, core.respond(source, cid, response)]


def on_end_quorum_epoch(core: RaftCoreView, source: int, req: EndQuorumEpochRequest, cid: int) -> list[Action]:
    actions: list[Action] = []
    if req.leader_epoch > core.epoch:
        actions += core.transition(Unattached(req.leader_epoch, None, core.election_deadline(core.now_ms)))
    s = core.state
    if req.leader_epoch == core.epoch and core.is_voter:
        # The preferred successors stand first (Kafka: endQuorumBackoff by position).
        if core.node_id in req.preferred_candidates:
            position = req.preferred_candidates.index(core.node_id)
            deadline = core.now_ms + position * core.config.election_backoff_max_ms // 2
        else:
            deadline = core.election_deadline(core.now_ms)
        match s:
            case Follower() if s.leader_id == req.leader_id:
                s.leader_ended = True
                s.fetch_deadline_ms = min(s.fetch_deadline_ms, deadline)
            case Prospective() if s.leader_id == req.leader_id:
                s.leader_id = None  # no going back to a leader that resigned
                s.election_deadline_ms = min(s.election_deadline_ms, deadline)
            case Unattached() | Prospective():
                s.election_deadline_ms = min(s.election_deadline_ms, deadline)
            case _:
                pass
    error = ErrorCode.fenced_leader_epoch if req.leader_epoch < core.epoch else ErrorCode.none
    response = EndQuorumEpochResponse(error, _known_leader_or_none(core), core.epoch)
    return [*actions, core.respond(source, cid, response)]


def resign(core: RaftCoreView) -> list[Action]:
    s = core.state
    assert isinstance(s, Leader)
    # Best successors first: longest logs (Kafka: nonLeaderVotersByDescendingFetchOffset).
    successors = sorted(s.replicas, key=lambda v: (-s.replicas[v].end_offset, v))
    successors = [v for v in successors if v in core.config.voters]
    actions = core.transition(Resigned(s.epoch, core.election_deadline(core.now_ms)))
    request = EndQuorumEpochRequest(core.node_id, s.epoch, tuple(successors))
    actions += [core.request(v, request) for v in sorted(core.config.voters - {core.node_id})]
    return actions
