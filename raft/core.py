"""RaftCore: the sans-IO KRaft state machine — `step(input, now_ms) -> list[Action]`.

Mirrors Kafka's KafkaRaftClient (KIP-595 pull-based Raft, KIP-630 snapshots, KIP-996 pre-vote), minus
the I/O: the driver delivers messages, ticks and snapshots, and executes the returned actions in order
(see raft.events for the durability contract). Elections live here; fetch handling on both sides lives
in raft.replication.
"""

from __future__ import annotations

import dataclasses
import random
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

from samsa.raft import election, reconfig, replication, voter_update
from samsa.raft.events import (
    Action,
    AdvanceLogStartOffset,
    Appended,
    AppendToLog,
    BecomeFollower,
    BecomeLeader,
    Busy,
    Input,
    NotLeader,
    PersistQuorumState,
    ProposeResult,
    Received,
    Resign,
    Send,
    TakeSnapshot,
    Tick,
    TruncateLog,
)
from samsa.raft.invariants import InvariantViolation
from samsa.raft.log import LogEntry, RaftLog, Snapshot
from samsa.raft.messages import (
    NO_LEADER,
    BeginQuorumEpochRequest,
    BeginQuorumEpochResponse,
    DescribeQuorumResponse,
    EndQuorumEpochRequest,
    EndQuorumEpochResponse,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
    RaftMessage,
    ReplicaDescription,
    UpdateVoterRequest,
    UpdateVoterResponse,
    VoteRequest,
    VoteResponse,
)
from samsa.raft.quorum_state import (
    Candidate,
    EpochState,
    Follower,
    Leader,
    Prospective,
    QuorumConfig,
    ReplicaState,
    Resigned,
    Unattached,
)
from samsa.raft.reconfig import VoterChangeAppended, VoterChangeRefused
from samsa.raft.voter_set import ZERO_DIRECTORY_ID, VoterEndpoint, VoterNode, VoterSet

__all__ = ["RaftCore"]


@dataclass(frozen=True, slots=True)
class _Inflight:
    destination: int
    sent_ms: int


class RaftCore:
    """One member (voter or observer) of the metadata quorum.

    The driver uses step, propose, next_deadline_ms, describe_quorum and the read-only epoch,
    leader_id, high_watermark, is_voter, state and log. The other methods without an underscore are
    for raft.election and raft.replication, which see the core through raft.core_view.RaftCoreView.
    """

    def __init__(
        self,
        node_id: int,
        config: QuorumConfig,
        rng: random.Random,
        now_ms: int,
        *,
        quorum_state: PersistQuorumState | None = None,
        snapshot: Snapshot | None = None,
        entries: Sequence[LogEntry] = (),
        directory_id: uuid.UUID = ZERO_DIRECTORY_ID,
        bootstrap_voters: VoterSet | None = None,
        listeners: tuple[VoterEndpoint, ...] | None = None,
    ) -> None:
        """Start from what survived on disk; the driver has already loaded `snapshot` into its state
        machine, and should call step(Tick()) at once: a follower's first fetch goes out then, and the
        first actions may clean up the log (entries a snapshot made moot when a crash interrupted it).

        `config.voters` are the voters the cluster was formed with (`bootstrap_voters` adds their
        listeners); the latest voter set in the log or snapshot (KIP-853) replaces them from then on, and
        `self.config.voters` is always the set in force. `directory_id` is this replica's (meta.properties),
        `listeners` its controller listeners (default: its own bootstrap entry's), which a voter makes its entry
        in the voter set say (raft.voter_update)."""
        self.node_id = node_id
        self.directory_id = directory_id
        self.bootstrap_voters = bootstrap_voters or VoterSet(
            tuple(VoterNode(v, directory_id if v == node_id else ZERO_DIRECTORY_ID) for v in config.voters))
        if self.bootstrap_voters.ids != config.voters:
            raise InvariantViolation(f"bootstrap voters {sorted(self.bootstrap_voters.ids)} != {sorted(config.voters)}")
        own = self.bootstrap_voters.get(node_id)
        self.listeners = listeners if listeners is not None else own.endpoints if own is not None else ()
        self._bootstrap_config = config
        self.config = config
        self.rng = rng
        self.log = RaftLog(snapshot, entries)
        self._voters_generation = -1
        self._sync_voters()
        # What a crash in the middle of installing a snapshot left behind: the driver deletes it too.
        self._startup_actions: list[Action] = []
        if entries and entries[-1].offset >= self.log.end_offset:
            self._startup_actions.append(TruncateLog(self.log.end_offset))
        if entries and entries[0].offset < self.log.log_start_offset:
            self._startup_actions.append(AdvanceLogStartOffset(self.log.log_start_offset))
        self.high_watermark = self.log.log_start_offset  # all we know is committed after a restart
        self.applied_offset = self.high_watermark  # CommitUpTo has delivered everything below this
        self.now_ms = now_ms
        self._next_correlation_id = 0
        self._inflight: dict[int, _Inflight] = {}
        self._fetch_cid: int | None = None  # the one fetch/fetch-snapshot a follower has in flight
        self._fetch_due_ms = now_ms
        q = quorum_state or PersistQuorumState(0, None, None)
        self._persisted = (q.epoch, q.voted_id, q.leader_id)
        self._notified: tuple[bool, int, int | None] = (False, q.epoch, q.leader_id)
        self.state: EpochState
        alone = self.config.voters == {node_id}  # a one-voter quorum elects itself at once
        if q.leader_id == node_id:
            # A restarted leader cannot resume: its unflushed tail may be gone (Kafka: ResignedState).
            self.state = Resigned(q.epoch, now_ms if alone else self.election_deadline(now_ms))
        elif q.leader_id is not None:
            self.state = Follower(q.epoch, q.leader_id, q.voted_id, now_ms + config.fetch_timeout_ms)
        else:
            deadline = now_ms if alone else self.election_deadline(now_ms)
            self.state = Unattached(q.epoch, q.voted_id, deadline)

    # -- queries ---------------------------------------------------------------------------------

    @property
    def epoch(self) -> int:
        return self.state.epoch

    @property
    def is_voter(self) -> bool:
        """Kafka: QuorumState.isVoter -- this replica's key (id and directory id) is in the voter set in force:
        a node with a voter's id but another directory (its disk was replaced) is an observer."""
        return self.voter_set().is_voter(self.node_id, self.directory_id)

    @property
    def leader_id(self) -> int | None:
        match self.state:
            case Leader():
                return self.node_id
            case Follower(leader_ended=False):
                return self.state.leader_id
            case _:
                return None

    def describe_quorum(self) -> DescribeQuorumResponse:
        """Answer DescribeQuorum (only the leader knows the replicas: others say NOT_LEADER_OR_FOLLOWER)."""
        s = self.state
        if not isinstance(s, Leader):
            leader = self.leader_id
            return DescribeQuorumResponse(
                ErrorCode.not_leader_or_follower, NO_LEADER if leader is None else leader, self.epoch, -1, (), ()
            )

        def describe(replica_id: int) -> ReplicaDescription:
            # kraft.version 0 (no voter set in the log): Kafka 4.4 lists the static voters without a directory id
            static = self.log.voter_set is None and replica_id in self.config.voters
            if replica_id == self.node_id:
                return ReplicaDescription(replica_id, self.log.end_offset, self.now_ms, self.now_ms,
                                          ZERO_DIRECTORY_ID if static else self.directory_id)
            r = s.replicas[replica_id]
            directory = ZERO_DIRECTORY_ID if static else r.directory_id
            voter = voters.get(replica_id)
            if voter is not None and voter.directory_id != ZERO_DIRECTORY_ID and not static:
                directory = voter.directory_id
            return ReplicaDescription(replica_id, r.end_offset, r.last_fetch_ms, r.last_caught_up_ms, directory)

        voters = reconfig.current_voter_set(self, s)

        observers = sorted(set(s.replicas) - self.config.voters)
        return DescribeQuorumResponse(
            ErrorCode.none,
            self.node_id,
            s.epoch,
            self.high_watermark,
            tuple(describe(v) for v in sorted(self.config.voters)),
            tuple(describe(o) for o in observers),
        )

    def next_deadline_ms(self) -> int:
        """When the driver should next step(Tick()) if nothing else happens."""
        s = self.state
        match s:
            case Unattached():
                if self.is_voter:
                    return s.election_deadline_ms
                return self._fetch_resend_ms()
            case Prospective() | Candidate() | Resigned():
                return s.election_deadline_ms
            case Follower():
                if s.leader_ended:
                    return s.fetch_deadline_ms
                return min(s.fetch_deadline_ms, self._fetch_resend_ms(), s.update_voter_due_ms)
            case Leader():
                return replication.leader_deadline_ms(self, s)

    def _fetch_resend_ms(self) -> int:
        if self._fetch_cid is None:
            return self._fetch_due_ms
        return self._inflight[self._fetch_cid].sent_ms + self.config.request_timeout_ms

    # -- the entry points ------------------------------------------------------------------------

    def step(self, event: Input, now_ms: int) -> list[Action]:
        if now_ms < self.now_ms:
            raise InvariantViolation(f"time went backwards: {now_ms} < {self.now_ms}")
        self.now_ms = now_ms
        actions: list[Action] = self._startup_actions
        self._startup_actions = []
        match event:
            case Tick():
                actions += self._on_tick()
            case Received():
                actions += self._on_received(event)
            case Resign():
                actions += election.resign(self) if isinstance(self.state, Leader) else []
            case TakeSnapshot():
                actions += replication.take_snapshot(self, event)
        actions += self._after_voter_change()
        self._check_invariants()
        return _coalesce(actions)

    def propose(self, payloads: Sequence[bytes], now_ms: int) -> tuple[ProposeResult, list[Action]]:
        """Append entries on the leader; they are committed when CommitUpTo covers them."""
        if now_ms < self.now_ms:
            raise InvariantViolation(f"time went backwards: {now_ms} < {self.now_ms}")
        self.now_ms = now_ms
        s = self.state
        if not isinstance(s, Leader):
            return NotLeader(self.leader_id, self.epoch), []
        uncommitted = self.log.end_offset - self.high_watermark
        if uncommitted + len(payloads) > self.config.max_uncommitted_count:
            return Busy(uncommitted), []
        base = self.log.end_offset
        entries = tuple(LogEntry(base + i, s.epoch, p) for i, p in enumerate(payloads))
        actions = self.leader_append(s, entries)
        actions += self._after_voter_change()
        self._check_invariants()
        return Appended(base, base + len(entries) - 1, s.epoch), actions

    # -- voter changes (KIP-853; the rules are raft.reconfig's) ---------------------------------

    def change_voters(self, change: reconfig.VoterChangeCall, now_ms: int
                      ) -> tuple[VoterChangeAppended | VoterChangeRefused | NotLeader | None, list[Action]]:
        """Run one of raft.reconfig's leader operations (begin_add_voter, complete_add_voter, remove_voter,
        update_voter, abort_voter_change) on this leader; a follower answers NotLeader."""
        self._advance_clock(now_ms)
        s = self.state
        if not isinstance(s, Leader):
            return NotLeader(self.leader_id, self.epoch), []
        result, actions = change(self, s)
        actions += self._after_voter_change()
        self._check_invariants()
        return result, actions

    def voter_set(self) -> VoterSet:
        """The voter set in force (the bootstrap voters until the log has one)."""
        return self.log.voter_set or self.bootstrap_voters

    def _advance_clock(self, now_ms: int) -> None:
        if now_ms < self.now_ms:
            raise InvariantViolation(f"time went backwards: {now_ms} < {self.now_ms}")
        self.now_ms = now_ms

    def _sync_voters(self) -> None:
        """Make config.voters the set in force, once the log's voter set changed (KIP-853: at once, on
        append and on truncation); a leader starts tracking a new voter's fetches."""
        if self._voters_generation == self.log.voters_generation:
            return
        self._voters_generation = self.log.voters_generation
        voters = self.log.voter_set
        ids = voters.ids if voters is not None else self._bootstrap_config.voters
        if ids != self.config.voters:
            self.config = dataclasses.replace(self._bootstrap_config, voters=ids)
        s = self.state if hasattr(self, "state") else None
        if isinstance(s, Leader):
            for v in ids - {self.node_id}:
                s.replicas.setdefault(v, ReplicaState(last_fetch_ms=self.now_ms))
            s.begin_quorum_pending &= ids  # a removed voter is no longer told of this epoch

    def _after_voter_change(self) -> list[Action]:
        """What a change of the voter set asks of this node at the end of a step: a node no longer a voter
        stops standing for election; a leader removed from the committed set resigns (Kafka: requestResign)."""
        self._sync_voters()
        s = self.state
        if isinstance(s, Leader) and s.resign_requested:
            return election.resign(self)
        if not self.is_voter and isinstance(s, Prospective | Candidate):
            return self.transition(Unattached(s.epoch, s.voted_id if isinstance(s, Prospective) else self.node_id,
                                              self.election_deadline(self.now_ms)))
        return []

    # -- messages --------------------------------------------------------------------------------

    def _on_received(self, r: Received) -> list[Action]:
        m = r.message
        match m:
            case VoteRequest():
                return election.on_vote_request(self, r.source, m, r.correlation_id)
            case BeginQuorumEpochRequest():
                return election.on_begin_quorum_epoch(self, r.source, m, r.correlation_id)
            case EndQuorumEpochRequest():
                return election.on_end_quorum_epoch(self, r.source, m, r.correlation_id)
            case FetchRequest():
                return replication.on_fetch_request(self, r.source, m, r.correlation_id)
            case FetchSnapshotRequest():
                return replication.on_fetch_snapshot_request(self, r.source, m, r.correlation_id)
            case UpdateVoterRequest():
                return voter_update.on_update_voter_request(self, r.source, m, r.correlation_id)
        # A response: only the answer to a request of the current state counts (Kafka: RequestManager),
        # so duplicated, reordered or pre-transition responses are dropped here.
        inflight = self._inflight.pop(r.correlation_id, None)
        if inflight is None or inflight.destination != r.source:
            return []
        if r.correlation_id == self._fetch_cid:
            self._fetch_cid = None
        actions = self._maybe_handle_common_response(m.leader_id, m.leader_epoch)
        if actions is not None:
            return actions
        match m:
            case VoteResponse():
                return election.on_vote_response(self, r.source, m)
            case BeginQuorumEpochResponse():
                if isinstance(self.state, Leader) and m.error_code == ErrorCode.none:
                    self.state.begin_quorum_pending.discard(r.source)
                return []
            case EndQuorumEpochResponse():
                return []
            case FetchResponse():
                return replication.on_fetch_response(self, r.source, m)
            case FetchSnapshotResponse():
                return replication.on_fetch_snapshot_response(self, r.source, m)
            case UpdateVoterResponse():
                return []  # an error is retried at the next period, if the entry still differs (as Kafka)
        raise InvariantViolation(f"unexpected message {m!r}")

    def _maybe_handle_common_response(self, leader_id: int, leader_epoch: int) -> list[Action] | None:
        """A response that reveals a newer epoch, or the leader of ours, moves us there first."""
        leader = None if leader_id == NO_LEADER else leader_id
        if leader_epoch > self.epoch:
            return self._follow_or_unattach(leader_epoch, leader)
        if leader_epoch == self.epoch and leader is not None and leader != self.node_id:
            match self.state:
                case Prospective(leader_id=None) | Unattached() | Candidate():
                    return self.become_follower(leader_epoch, leader)
                case Prospective():
                    # It already knew that leader and timed out on it: news of it is no reason to go
                    # back (Kafka: maybeTransition only when !quorum.hasLeader()).
                    return None
                case Leader() | Resigned():
                    raise InvariantViolation(f"two leaders in epoch {leader_epoch}: {self.node_id} and {leader}")
        return None

    def _follow_or_unattach(self, epoch: int, leader: int | None) -> list[Action]:
        if epoch <= self.epoch:
            raise InvariantViolation(f"epoch {epoch} is not newer than {self.epoch}")
        if leader is not None:
            return self.become_follower(epoch, leader)
        return self.transition(Unattached(epoch, None, self.election_deadline(self.now_ms)))

    # -- leader appends (propose, election) ----------------------------------------------------

    def begin_quorum_epoch(self, voter: int) -> Send:
        return self.request(voter, BeginQuorumEpochRequest(self.node_id, self.epoch))

    def leader_append(self, leader: Leader, entries: tuple[LogEntry, ...]) -> list[Action]:
        self.log.append(entries)
        self._sync_voters()  # KIP-853: a VotersRecord counts from its append, for the high watermark too
        actions: list[Action] = [AppendToLog(entries)]
        actions += replication.maybe_advance_high_watermark(self, leader)
        actions += replication.complete_parked_fetches(self, leader, expired_only=False)
        return actions

    # -- timers ----------------------------------------------------------------------------------

    def _on_tick(self) -> list[Action]:
        s = self.state
        now = self.now_ms
        self._expire_inflight()
        match s:
            case Unattached():
                if self.is_voter:
                    return election.become_prospective(self) if now >= s.election_deadline_ms else []
                return self._maybe_send_fetch()
            case Prospective():
                return election.prospective_lost(self) if now >= s.election_deadline_ms else []
            case Candidate() | Resigned():
                if now < s.election_deadline_ms:
                    return []
                if not self.is_voter:  # removed from the voters (KIP-853): it now only follows
                    return self.transition(Unattached(s.epoch, self.node_id, self.election_deadline(now)))
                return election.become_prospective(self)
            case Follower():
                if now >= s.fetch_deadline_ms:
                    if self.is_voter:
                        return election.become_prospective(self)
                    return self.transition(Unattached(s.epoch, s.voted_id, self.election_deadline(now)))
                if s.leader_ended:
                    return []
                return voter_update.maybe_send_update_voter(self, s) + self._maybe_send_fetch()
            case Leader():
                return replication.on_leader_tick(self, s)

    def _expire_inflight(self) -> None:
        """Forget requests unanswered for two request timeouts: their answers count as lost (this bounds
        the table while, say, BeginQuorumEpoch is retried to a voter that is down)."""
        horizon = self.now_ms - 2 * self.config.request_timeout_ms
        for cid in [c for c, f in self._inflight.items() if f.sent_ms <= horizon]:
            del self._inflight[cid]
            if cid == self._fetch_cid:
                self._fetch_cid = None

    def _maybe_send_fetch(self) -> list[Action]:
        """A follower keeps exactly one fetch in flight; an observer without a leader asks any voter."""
        if self.now_ms < self._fetch_resend_ms():
            return []
        if self._fetch_cid is not None:
            self._inflight.pop(self._fetch_cid, None)  # timed out: its late answer is ignored
            self._fetch_cid = None
        s = self.state
        if isinstance(s, Follower):
            return [replication.next_fetch(self, s)]
        voters = sorted(self.config.voters - {self.node_id})
        send = self.request(self.rng.choice(voters), replication.fetch_request(self))
        self._fetch_cid = send.correlation_id
        return [send]

    def election_deadline(self, now_ms: int) -> int:
        t = self.config.election_timeout_ms
        return now_ms + t + self.rng.randrange(t)

    def backoff_deadline(self) -> int:
        return self.now_ms + self.rng.randrange(1, self.config.election_backoff_max_ms + 1)

    # -- transitions -----------------------------------------------------------------------------

    def become_follower(self, epoch: int, leader_id: int) -> list[Action]:
        if leader_id == self.node_id:
            raise InvariantViolation(f"{self.node_id} cannot follow itself in epoch {epoch}")
        if epoch < self.epoch:
            raise InvariantViolation(f"epoch went backwards: {self.epoch} -> {epoch}")
        s = self.state
        voted = None
        if epoch == s.epoch:
            if isinstance(s, Unattached | Prospective | Follower):
                voted = s.voted_id
            elif isinstance(s, Candidate):
                voted = self.node_id
        actions = self.transition(Follower(epoch, leader_id, voted, self.now_ms + self.config.fetch_timeout_ms))
        self._fetch_due_ms = self.now_ms
        return actions + self._maybe_send_fetch()

    def transition(self, new: EpochState) -> list[Action]:
        """Enter `new`: persist the election state first, then notify, then answer parked fetches."""
        old = self.state
        if new.epoch < old.epoch:
            raise InvariantViolation(f"epoch went backwards: {old.epoch} -> {new.epoch}")
        if not (self.is_voter or isinstance(new, Unattached | Follower | Resigned)):
            raise InvariantViolation(
                f"observer {self.node_id} cannot become {type(new).__name__}: an observer only follows")
        self.state = new
        self._inflight.clear()  # responses to the old state's requests are now meaningless
        self._fetch_cid = None
        self._fetch_due_ms = self.now_ms
        actions: list[Action] = []
        triple = self._election_state()
        if triple != self._persisted:
            self._persisted = triple
            actions.append(PersistQuorumState(*triple))
        notified = (isinstance(new, Leader), new.epoch, self.leader_id)
        if notified != self._notified:
            self._notified = notified
            if isinstance(new, Leader):
                actions.append(BecomeLeader(new.epoch))
            else:
                actions.append(BecomeFollower(new.epoch, self.leader_id))
        if isinstance(old, Leader):
            actions += replication.reject_parked_fetches(self, old)
        return actions

    def _election_state(self) -> tuple[int, int | None, int | None]:
        s = self.state
        match s:
            case Unattached():
                return s.epoch, s.voted_id, None
            case Prospective():
                return self._persisted if self._persisted[0] == s.epoch else (s.epoch, s.voted_id, s.leader_id)
            case Candidate():
                return s.epoch, self.node_id, None
            case Leader() | Resigned():
                return s.epoch, self.node_id, self.node_id
            case Follower():
                return s.epoch, s.voted_id, s.leader_id

    # -- sending ---------------------------------------------------------------------------------

    def request(self, destination: int, message: RaftMessage) -> Send:
        cid = self._next_correlation_id
        self._next_correlation_id += 1
        self._inflight[cid] = _Inflight(destination, self.now_ms)
        return Send(destination, message, cid)

    def respond(self, destination: int, cid: int, message: RaftMessage) -> Send:
        return Send(destination, message, cid)

    def request_fetch(self, destination: int, message: RaftMessage) -> Send:
        """Send the follower's single in-flight fetch or fetch-snapshot request."""
        send = self.request(destination, message)
        self._fetch_cid = send.correlation_id
        return send

    def retry_fetch_later(self) -> None:
        self._fetch_due_ms = self.now_ms + self.config.retry_backoff_ms

    def on_leader_resigned(self) -> list[Action]:
        """The leader of our epoch is gone (it resigned): voters stand, observers look for the next."""
        s = self.state
        assert isinstance(s, Follower)
        if self.is_voter:
            s.leader_ended = True
            s.fetch_deadline_ms = min(s.fetch_deadline_ms, self.backoff_deadline())
            return []
        return self.transition(Unattached(s.epoch, s.voted_id, self.election_deadline(self.now_ms)))

    # -- invariants ------------------------------------------------------------------------------

    def _check_invariants(self) -> None:
        # Kafka's RaftEventSimulationTest checks these after every event; we check them after every step.
        log = self.log
        if not log.log_start_offset <= self.high_watermark <= log.end_offset:
            raise InvariantViolation(f"high watermark {self.high_watermark} outside the log "
                                     f"[{log.log_start_offset}, {log.end_offset}]")
        if self.applied_offset != self.high_watermark:
            raise InvariantViolation(f"applied {self.applied_offset} != high watermark {self.high_watermark}: "
                                     "every commit is handed to the state machine")
        if self._persisted[0] != self.epoch:
            raise InvariantViolation(f"epoch {self.epoch} not persisted (last persisted {self._persisted[0]}): "
                                     "an epoch is persisted before anything happens in it")
        if len(self._inflight) > 4 * len(self.config.voters) + 1:
            raise InvariantViolation(f"{len(self._inflight)} requests in flight: the table is bounded")
        if isinstance(self.state, Leader) and log.last_fetched_epoch != self.epoch:
            raise InvariantViolation(f"leader of epoch {self.epoch} ends its log with epoch {log.last_fetched_epoch}")


def _coalesce(actions: list[Action]) -> list[Action]:
    """Drop a PersistQuorumState that the next one overwrites with nothing but notifications between
    them (one fsync instead of two when, say, a vote request both raises the epoch and gets our vote;
    never across a Send or a log write, which must follow the state it was made in), and all but the
    last BecomeLeader/BecomeFollower of a step (the driver only needs where we ended up)."""
    notifications = [i for i, a in enumerate(actions) if isinstance(a, BecomeLeader | BecomeFollower)]
    if len(notifications) > 1:
        stale = set(notifications[:-1])
        actions = [a for i, a in enumerate(actions) if i not in stale]
    out: list[Action] = []
    for action in actions:
        if isinstance(action, PersistQuorumState):
            i = len(out) - 1
            while i >= 0 and isinstance(out[i], BecomeLeader | BecomeFollower):
                i -= 1
            if i >= 0 and isinstance(out[i], PersistQuorumState):
                del out[i]
        out.append(action)
    return out
