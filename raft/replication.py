"""Pull-based replication (KIP-595) and snapshot transfer (KIP-630), leader and follower sides.

Functions over a RaftCore rather than methods on it, to keep each module readable (typed against
raft.core_view.RaftCoreView, so the imports point one way). The leader answers
Fetch with records, a diverging epoch (the follower truncates), or a snapshot id (the follower fetches
the snapshot in chunks); it parks an empty fetch until there is something new (Kafka's fetch
purgatory), counts durable follower offsets into the high watermark, and resigns when a majority of
voters stops fetching (check-quorum).
"""

from __future__ import annotations

import dataclasses

from samsa.raft import election, reconfig
from samsa.raft.core_view import RaftCoreView
from samsa.raft.events import (
    Action,
    AdvanceLogStartOffset,
    AppendToLog,
    CommitUpTo,
    LoadSnapshot,
    PersistSnapshot,
    Send,
    TakeSnapshot,
    TruncateLog,
)
from samsa.raft.invariants import InvariantViolation
from samsa.raft.log import Diverging, NeedSnapshot, Snapshot, SnapshotId, Valid
from samsa.raft.messages import (
    NO_LEADER,
    EpochEndOffset,
    ErrorCode,
    FetchRequest,
    FetchResponse,
    FetchSnapshotRequest,
    FetchSnapshotResponse,
)
from samsa.raft.quorum_state import Follower, Leader, ParkedFetch, ReplicaState, SnapshotFetch, Unattached
from samsa.raft.voter_set import frame_snapshot, unframe_snapshot

_NEVER_MS = 2**62

# -- leader side ---------------------------------------------------------------------------------------


def _leader_only_error(core: RaftCoreView, request_epoch: int) -> ErrorCode | None:
    """Kafka: KafkaRaftClient.validateLeaderOnlyRequest."""
    if request_epoch < core.epoch:
        return ErrorCode.fenced_leader_epoch
    if request_epoch > core.epoch:
        return ErrorCode.unknown_leader_epoch
    if not isinstance(core.state, Leader):
        return ErrorCode.not_leader_or_follower
    return None


def _error_fetch_response(core: RaftCoreView, error: ErrorCode) -> FetchResponse:
    leader = core.leader_id
    return FetchResponse(
        error,
        NO_LEADER if leader is None else leader,
        core.epoch,
        core.high_watermark,
        core.log.log_start_offset,
    )


def on_fetch_request(core: RaftCoreView, source: int, req: FetchRequest, cid: int) -> list[Action]:
    error = _leader_only_error(core, req.current_leader_epoch)
    if error is not None:
        return [core.respond(source, cid, _error_fetch_response(core, error))]
    leader = core.state
    assert isinstance(leader, Leader)
    leader.parked.pop(source, None)  # the follower gave up on it and asked again
    leader.begin_quorum_pending.discard(source)  # fetching in our epoch: it knows we lead
    if source in core.config.voters and not core.voter_set().is_voter(source, req.replica_directory_id):
        # Kafka 4.4's LeaderState.getOrCreateReplicaState: a replica with a voter's id but not its directory id
        # (the voter's disk replaced) is an observer: its fetches neither acknowledge for the voter nor count
        # for check-quorum. It is answered, and finds out from its log that it is not the voter.
        return [_answer_fetch(core, leader, source, cid, req.fetch_offset, req.last_fetched_epoch)]
    replica = leader.replicas.get(source)
    if replica is None:
        _forget_expired_observers(core, leader)
        replica = leader.replicas[source] = ReplicaState()
    replica.last_fetch_ms = core.now_ms
    replica.directory_id = req.replica_directory_id
    actions: list[Action] = []
    hw_before = core.high_watermark
    if isinstance(core.log.validate_offset_and_epoch(req.fetch_offset, req.last_fetched_epoch), Valid):
        # The follower only fetches from offsets it has made durable: this acknowledges them.
        if req.fetch_offset > core.log.end_offset:
            raise InvariantViolation(f"valid fetch offset {req.fetch_offset} past the log end {core.log.end_offset}")
        replica.end_offset = req.fetch_offset
        if req.fetch_offset == core.log.end_offset:
            replica.last_caught_up_ms = core.now_ms
        if source in core.config.voters:
            actions += maybe_advance_high_watermark(core, leader)
        nothing_new = req.fetch_offset == core.log.end_offset and replica.last_sent_high_watermark == hw_before
        if nothing_new and core.high_watermark == hw_before and req.max_wait_ms > 0:
            wait_ms = min(req.max_wait_ms, core.config.fetch_max_wait_ms)
            parked = ParkedFetch(cid, req.fetch_offset, req.last_fetched_epoch, core.now_ms + wait_ms)
            leader.parked[source] = parked
            return actions
    actions.append(_answer_fetch(core, leader, source, cid, req.fetch_offset, req.last_fetched_epoch))
    return actions


def _forget_expired_observers(core: RaftCoreView, leader: Leader) -> None:
    """Drop observers not heard from for observer_session_timeout_ms (checked when a new id appears, so the
    work is paid only by growth)."""
    expired_before = core.now_ms - core.config.observer_session_timeout_ms
    for replica_id in [r for r, state in leader.replicas.items()
                       if r not in core.config.voters and state.last_fetch_ms < expired_before]:
        del leader.replicas[replica_id]


def _answer_fetch(
    core: RaftCoreView, leader: Leader, source: int, cid: int, fetch_offset: int, last_fetched_epoch: int
) -> Send:
    log = core.log
    base = FetchResponse(ErrorCode.none, core.node_id, leader.epoch, core.high_watermark, log.log_start_offset)
    match log.validate_offset_and_epoch(fetch_offset, last_fetched_epoch):
        case Diverging(epoch, end_offset):
            response = dataclasses.replace(base, diverging_epoch=EpochEndOffset(epoch, end_offset))
        case NeedSnapshot(snapshot_id):
            response = dataclasses.replace(base, snapshot_id=snapshot_id)
        case Valid():
            records = log.read(fetch_offset, core.config.fetch_max_entries_count, core.config.fetch_max_bytes)
            response = dataclasses.replace(base, records=records)
            leader.replicas[source].last_sent_high_watermark = core.high_watermark
    return core.respond(source, cid, response)


def maybe_advance_high_watermark(core: RaftCoreView, leader: Leader) -> list[Action]:
    """Kafka: LeaderState.maybeUpdateHighWatermark — the majority's durable offset, once it covers an
    entry of the current epoch (the LeaderChange record at epoch_start_offset)."""
    # KIP-853: the voters in force, which need not include the leader (it removed itself, uncommitted yet).
    offsets = [core.log.end_offset if v == core.node_id else leader.replicas[v].end_offset
               for v in core.config.voters]
    offsets.sort(reverse=True)
    majority_offset = offsets[core.config.majority - 1]
    if majority_offset <= core.high_watermark or majority_offset <= leader.epoch_start_offset:
        return []
    core.high_watermark = majority_offset
    reconfig.on_high_watermark(core, leader)
    return commit(core) + complete_parked_fetches(core, leader, expired_only=False)


def commit(core: RaftCoreView) -> list[Action]:
    """Hand the newly committed entries to the state machine."""
    start = core.applied_offset
    if not core.log.log_start_offset <= start <= core.high_watermark:
        raise InvariantViolation(f"applied offset {start} outside [{core.log.log_start_offset}, {core.high_watermark}]")
    if start == core.high_watermark:
        return []
    entries = core.log.read(start, core.high_watermark - start)
    if len(entries) != core.high_watermark - start:
        raise InvariantViolation(f"{len(entries)} entries in [{start}, {core.high_watermark}): the log has a hole")
    core.applied_offset = core.high_watermark
    return [CommitUpTo(core.high_watermark, entries)]


def complete_parked_fetches(core: RaftCoreView, leader: Leader, *, expired_only: bool) -> list[Action]:
    actions: list[Action] = []
    for source in sorted(leader.parked):
        parked = leader.parked[source]
        if expired_only and parked.deadline_ms > core.now_ms:
            continue
        del leader.parked[source]
        actions.append(
            _answer_fetch(core, leader, source, parked.correlation_id, parked.fetch_offset, parked.last_fetched_epoch)
        )
    return actions


def reject_parked_fetches(core: RaftCoreView, old: Leader) -> list[Action]:
    """We stopped leading: tell the parked followers at once rather than let them time out."""
    response = _error_fetch_response(core, ErrorCode.not_leader_or_follower)
    actions: list[Action] = [core.respond(s, old.parked[s].correlation_id, response) for s in sorted(old.parked)]
    old.parked.clear()
    return actions


def _check_quorum_fail_ms(core: RaftCoreView, leader: Leader) -> int:
    """When the leader will have heard from fewer than a majority of voters within the timeout."""
    needed = core.config.majority - (1 if core.is_voter else 0)  # the leader counts itself, if a voter
    if needed == 0:
        return _NEVER_MS
    last = sorted((leader.replicas[v].last_fetch_ms for v in core.config.voters if v != core.node_id), reverse=True)
    return last[needed - 1] + core.config.check_quorum_timeout_ms


def leader_deadline_ms(core: RaftCoreView, leader: Leader) -> int:
    deadlines = [_check_quorum_fail_ms(core, leader)]
    deadlines += [p.deadline_ms for p in leader.parked.values()]
    if leader.begin_quorum_pending:
        deadlines.append(leader.begin_quorum_retry_ms)
    return min(deadlines)


def on_leader_tick(core: RaftCoreView, leader: Leader) -> list[Action]:
    if core.now_ms >= _check_quorum_fail_ms(core, leader):
        return election.resign(core)  # we may be the minority side of a partition (check-quorum)
    actions = complete_parked_fetches(core, leader, expired_only=True)
    if leader.begin_quorum_pending and core.now_ms >= leader.begin_quorum_retry_ms:
        leader.begin_quorum_retry_ms = core.now_ms + core.config.request_timeout_ms
        actions += [core.begin_quorum_epoch(v) for v in sorted(leader.begin_quorum_pending)]
    return actions


def on_fetch_snapshot_request(core: RaftCoreView, source: int, req: FetchSnapshotRequest, cid: int) -> list[Action]:
    error = _leader_only_error(core, req.current_leader_epoch)
    snapshot = core.log.snapshot
    if error is None and (snapshot is None or snapshot.snapshot_id != req.snapshot_id):
        error = ErrorCode.snapshot_not_found
    if error is None and snapshot is not None and not 0 <= req.position <= snapshot_size(snapshot):
        error = ErrorCode.position_out_of_range
    leader = NO_LEADER if core.leader_id is None else core.leader_id
    if error is not None or snapshot is None:
        response = FetchSnapshotResponse(
            error or ErrorCode.snapshot_not_found, leader, core.epoch, req.snapshot_id, -1, -1, b""
        )
        return [core.respond(source, cid, response)]
    state = core.state
    assert isinstance(state, Leader)
    state.replicas.setdefault(source, ReplicaState()).last_fetch_ms = core.now_ms
    size = min(req.max_bytes, core.config.snapshot_chunk_bytes)
    raw = frame_snapshot(snapshot.voters, snapshot.data)  # KIP-853: the voter set travels with the snapshot
    chunk = raw[req.position : req.position + size]
    response = FetchSnapshotResponse(
        ErrorCode.none, leader, core.epoch, snapshot.snapshot_id, len(raw), req.position, chunk
    )
    return [core.respond(source, cid, response)]


def snapshot_size(snapshot: Snapshot) -> int:
    return len(frame_snapshot(snapshot.voters, snapshot.data))


def take_snapshot(core: RaftCoreView, event: TakeSnapshot) -> list[Action]:
    if event.end_offset > core.applied_offset:
        raise InvariantViolation(f"snapshot to {event.end_offset} past the applied offset {core.applied_offset}: "
                                 "a snapshot holds only committed, applied entries")
    log = core.log
    if event.end_offset <= log.log_start_offset:
        return []
    voters = log.voter_set_at(event.end_offset)
    snapshot = Snapshot(SnapshotId(event.end_offset, log.epoch_at(event.end_offset - 1)), event.data,
                        voters.encode() if voters is not None else b"")
    log.install_snapshot(snapshot)
    return [PersistSnapshot(snapshot), AdvanceLogStartOffset(event.end_offset)]


# -- follower side -------------------------------------------------------------------------------------


def fetch_request(core: RaftCoreView) -> FetchRequest:
    log = core.log
    return FetchRequest(
        replica_id=core.node_id,
        current_leader_epoch=core.epoch,
        fetch_offset=log.end_offset,
        last_fetched_epoch=log.last_fetched_epoch,
        log_start_offset=log.log_start_offset,
        max_wait_ms=core.config.fetch_max_wait_ms,
        replica_directory_id=core.directory_id,
    )


def next_fetch(core: RaftCoreView, follower: Follower) -> Send:
    sf = follower.snapshot_fetch
    if sf is None:
        return core.request_fetch(follower.leader_id, fetch_request(core))
    request = FetchSnapshotRequest(
        core.node_id, follower.epoch, sf.snapshot_id, len(sf.received), core.config.snapshot_chunk_bytes
    )
    return core.request_fetch(follower.leader_id, request)


def on_fetch_response(core: RaftCoreView, source: int, resp: FetchResponse) -> list[Action]:
    s = core.state
    if isinstance(s, Unattached):
        core.retry_fetch_later()  # an observer asked a voter that knows no leader either
        return []
    if not isinstance(s, Follower) or source != s.leader_id:
        return []
    if resp.error_code != ErrorCode.none:
        if resp.error_code == ErrorCode.not_leader_or_follower and resp.leader_id == NO_LEADER:
            return core.on_leader_resigned()
        core.retry_fetch_later()
        return []
    s.fetch_deadline_ms = core.now_ms + core.config.fetch_timeout_ms
    log = core.log
    actions: list[Action] = []
    if resp.diverging_epoch is not None:
        offset = log.truncation_offset_for(Diverging(resp.diverging_epoch.epoch, resp.diverging_epoch.end_offset))
        if offset < core.high_watermark:
            raise InvariantViolation(f"truncation to {offset} below the high watermark {core.high_watermark}: "
                                     "committed entries are never truncated")
        if offset < log.end_offset:
            log.truncate_to(offset)
            actions.append(TruncateLog(offset))
    elif resp.snapshot_id is not None:
        s.snapshot_fetch = SnapshotFetch(resp.snapshot_id)
    else:
        if resp.records:
            # One fetch in flight, sent from our log end: the records continue our log exactly.
            if resp.records[0].offset != log.end_offset:
                raise InvariantViolation(
                    f"fetched records start at {resp.records[0].offset}, the log ends at {log.end_offset}")
            log.append(resp.records)
            actions.append(AppendToLog(resp.records))
        actions += _maybe_advance_follower_high_watermark(core, resp.high_watermark)
    # Ordered after the AppendToLog / TruncateLog above: the fetch offset it reports is durable.
    actions.append(next_fetch(core, s))
    return actions


def _maybe_advance_follower_high_watermark(core: RaftCoreView, leader_high_watermark: int) -> list[Action]:
    new = min(leader_high_watermark, core.log.end_offset)
    if new <= core.high_watermark:
        return []
    core.high_watermark = new
    return commit(core)


def on_fetch_snapshot_response(core: RaftCoreView, source: int, resp: FetchSnapshotResponse) -> list[Action]:
    s = core.state
    if not isinstance(s, Follower) or source != s.leader_id or s.snapshot_fetch is None:
        return []
    sf = s.snapshot_fetch
    if resp.error_code != ErrorCode.none or resp.snapshot_id != sf.snapshot_id or resp.position != len(sf.received):
        s.snapshot_fetch = None  # start over from a Fetch: the leader may have a newer snapshot
        core.retry_fetch_later()
        return []
    s.fetch_deadline_ms = core.now_ms + core.config.fetch_timeout_ms
    sf.received += resp.unaligned_records
    if len(sf.received) > resp.size:
        raise InvariantViolation(f"{len(sf.received)} snapshot bytes received of {resp.size}")
    actions: list[Action] = []
    if len(sf.received) == resp.size:
        try:
            voters, data = unframe_snapshot(bytes(sf.received))
        except ValueError:
            s.snapshot_fetch = None  # damaged in transit: fetch it again
            core.retry_fetch_later()
            return []
        actions += _install_snapshot(core, s, Snapshot(sf.snapshot_id, data, voters))
    actions.append(next_fetch(core, s))
    return actions


def _install_snapshot(core: RaftCoreView, follower: Follower, snapshot: Snapshot) -> list[Action]:
    log = core.log
    end = snapshot.snapshot_id.end_offset
    # The leader sends a snapshot only past our log end, so it is past our high watermark too.
    if end <= core.high_watermark:
        raise InvariantViolation(f"snapshot to {end} at or below the high watermark {core.high_watermark}")
    # The snapshot is durable before any entry goes: a crash in between must not lose committed
    # entries this follower may have acknowledged (a restart drops what the snapshot makes moot).
    actions: list[Action] = [PersistSnapshot(snapshot)]
    if not log.extends(snapshot.snapshot_id) and log.end_offset > log.log_start_offset:
        log.truncate_to(log.log_start_offset)  # nothing after the snapshot was validated
        actions.append(TruncateLog(log.log_start_offset))
    log.install_snapshot(snapshot)
    actions.append(AdvanceLogStartOffset(end))
    follower.snapshot_fetch = None
    core.high_watermark = end
    core.applied_offset = end
    actions.append(LoadSnapshot(snapshot))
    return actions
