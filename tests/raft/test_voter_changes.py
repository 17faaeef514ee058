"""KIP-853 voter changes in the Raft core: the voter set in the log, AddRaftVoter's and RemoveRaftVoter's rules.

A small in-memory network drives real RaftCores (no I/O, no wall clock): every Send is delivered at once,
timers fire when the test advances the clock. The rules and messages are Kafka's (AddVoterHandler,
RemoveVoterHandler, VoterSet); see raft.reconfig.
"""

from __future__ import annotations

import base64
import random
import shutil
import subprocess
import uuid
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest

from samsa.raft import reconfig
from samsa.raft.batch_codec import decode_entries, encode_entries
from samsa.raft.core import RaftCore
from samsa.raft.events import (
    Action,
    CommitUpTo,
    LoadSnapshot,
    PersistQuorumState,
    Received,
    Send,
    TakeSnapshot,
    Tick,
)
from samsa.raft.log import EntryKind, LogEntry, RaftLog, Snapshot, SnapshotId
from samsa.raft.messages import (
    ErrorCode,
    FetchRequest,
    UpdateVoterRequest,
    UpdateVoterResponse,
    VoteRequest,
    VoteResponse,
)
from samsa.raft.quorum_state import Follower, Leader, QuorumConfig
from samsa.raft.reconfig import VoterChangeAppended, VoterChangeRefused
from samsa.raft.voter_set import (
    ZERO_DIRECTORY_ID,
    VoterEndpoint,
    VoterNode,
    VoterSet,
    encode_kraft_version,
    frame_snapshot,
    unframe_snapshot,
)

ORACLE = Path(__file__).resolve().parents[2] / "compat-tests" / "oracle"


def directory(node_id: int) -> uuid.UUID:
    return uuid.UUID(int=1000 + node_id)


def endpoint(node_id: int) -> tuple[VoterEndpoint, ...]:
    return (VoterEndpoint("CONTROLLER", "127.0.0.1", 9000 + node_id),)


class Network:
    """Cores 1..n; `voters` form the cluster, the others are observers. Everything on disk is kept per node
    (the log is the core's own, the commits are counted) so a node can be restarted from it."""

    def __init__(self, voters: set[int], observers: set[int] = frozenset(), seed: int = 7,  # type: ignore[assignment]
                 kraft_version: int = 1) -> None:
        """`kraft_version` 1: the first leader upgrades the static quorum (UpdateFeatures kraft.version=1)
        before run_until_leader returns, so voters can be changed; 0 leaves it static."""
        self.kraft_version = kraft_version
        self.now = 0
        self.voters = frozenset(voters)
        self.seed = seed
        self.cores: dict[int, RaftCore] = {}
        self.committed: dict[int, list[LogEntry]] = {}
        self.down: set[int] = set()
        self.delivers: Callable[[Send], bool] = lambda send: True
        for n in sorted(voters | set(observers)):
            self.start(n)

    def start(self, n: int, entries: tuple[LogEntry, ...] = (), snapshot: Snapshot | None = None,
              quorum_state: PersistQuorumState | None = None) -> None:
        bootstrap = VoterSet(tuple(VoterNode(v, ZERO_DIRECTORY_ID, endpoint(v)) for v in self.voters))
        self.cores[n] = RaftCore(n, QuorumConfig(voters=self.voters), random.Random(self.seed * 100 + n), self.now,
                                 directory_id=directory(n), bootstrap_voters=bootstrap, entries=entries,
                                 snapshot=snapshot, quorum_state=quorum_state)
        self.committed.setdefault(n, [])
        self.down.discard(n)
        self.feed(n, self.cores[n].step(Tick(), self.now))

    def feed(self, n: int, actions: list[Action]) -> None:
        queue = [(n, a) for a in actions]
        while queue:
            source, action = queue.pop(0)
            if isinstance(action, CommitUpTo):
                self.committed[source] += action.entries
            elif isinstance(action, LoadSnapshot):
                self.committed[source] = []
            elif isinstance(action, Send) and action.destination in self.cores and action.destination not in self.down \
                    and source not in self.down and self.delivers(action):
                core = self.cores[action.destination]
                received = Received(source, action.message, action.correlation_id)
                queue += [(action.destination, a) for a in core.step(received, self.now)]

    def run(self, ms: int) -> None:
        for _ in range(ms // 10):
            self.now += 10
            for n, core in sorted(self.cores.items()):
                if n not in self.down and core.next_deadline_ms() <= self.now:
                    self.feed(n, core.step(Tick(), self.now))

    def leader(self) -> RaftCore:
        leaders = [c for n, c in self.cores.items() if isinstance(c.state, Leader) and n not in self.down]
        assert len(leaders) == 1, [(n, type(c.state).__name__) for n, c in self.cores.items()]
        return leaders[0]

    def run_until_leader(self, limit_ms: int = 20_000) -> RaftCore:
        for _ in range(limit_ms // 10):
            self.run(10)
            leaders = [c for n, c in self.cores.items() if isinstance(c.state, Leader) and n not in self.down]
            if leaders and leaders[0].high_watermark > leaders[0].state.epoch_start_offset:  # type: ignore[union-attr]
                if self.kraft_version and reconfig.kraft_version(leaders[0]) == 0:
                    self.upgrade(leaders[0])
                    continue
                return leaders[0]
        raise AssertionError("no leader committed its epoch")

    def upgrade(self, leader: RaftCore) -> None:
        """UpdateFeatures kraft.version=1 once every voter has fetched; the records commit before it returns."""
        state = leader.state
        assert isinstance(state, Leader)
        _run_until(self, "every voter fetched", lambda: all(
            v.directory_id != ZERO_DIRECTORY_ID for v in reconfig.current_voter_set(leader, state).voters))
        result, actions = leader.change_voters(partial(reconfig.upgrade_kraft_version, level=1, validate_only=False),
                                               self.now)
        assert isinstance(result, VoterChangeAppended), result
        self.feed(leader.node_id, actions)
        _run_until(self, "the upgrade committed", lambda: leader.high_watermark > result.offset)

    def add_voter(self, n: int, directory_id: uuid.UUID | None = None,
                  kraft: tuple[int, int] | None = (0, 1)) -> VoterChangeAppended | VoterChangeRefused:
        leader = self.leader()
        key = directory(n) if directory_id is None else directory_id
        refused, _ = leader.change_voters(partial(reconfig.begin_add_voter, voter_id=n, directory_id=key,
                                                  timeout_ms=30_000), self.now)
        if refused is not None:
            assert isinstance(refused, VoterChangeRefused)
            return refused
        voter = VoterNode(n, key, endpoint(n))
        result, actions = leader.change_voters(partial(reconfig.complete_add_voter, voter=voter,
                                                       api_versions_error=ErrorCode.none, kraft_versions=kraft),
                                               self.now)
        self.feed(leader.node_id, actions)
        assert isinstance(result, VoterChangeAppended | VoterChangeRefused)
        return result

    def remove_voter(self, n: int, directory_id: uuid.UUID | None = None) -> VoterChangeAppended | VoterChangeRefused:
        leader = self.leader()
        result, actions = leader.change_voters(partial(
            reconfig.remove_voter, voter_id=n, directory_id=directory(n) if directory_id is None else directory_id),
            self.now)
        self.feed(leader.node_id, actions)
        assert isinstance(result, VoterChangeAppended | VoterChangeRefused)
        return result


def test_an_added_voter_counts_at_once_everywhere_and_the_change_commits() -> None:
    net = Network({1, 2, 3}, {4})
    leader = net.run_until_leader()
    net.run(1000)  # the observer finds the leader and catches up
    result = net.add_voter(4)
    assert isinstance(result, VoterChangeAppended)
    assert leader.config.voters == {1, 2, 3, 4}  # the leader uses the new set from the append
    assert leader.log.entry(result.offset).kind == EntryKind.VOTERS
    net.run(1000)
    assert leader.high_watermark > result.offset
    assert isinstance(leader.state, Leader) and leader.state.voter_change is None
    for core in net.cores.values():
        assert core.config.voters == {1, 2, 3, 4}
        assert core.voter_set().get(4) == VoterNode(4, directory(4), endpoint(4), 0, 1)
    assert net.cores[4].is_voter
    described = leader.describe_quorum()
    assert [r.replica_id for r in described.current_voters] == [1, 2, 3, 4]
    assert described.observers == ()
    # The static voters got the directory ids their fetches carried.
    assert {r.replica_id: r.replica_directory_id for r in described.current_voters} == {
        n: directory(n) for n in (1, 2, 3, 4)}


def test_a_change_is_refused_while_another_is_under_way_or_uncommitted() -> None:
    net = Network({1, 2, 3}, {4, 5})
    leader = net.run_until_leader()
    net.run(1000)
    net.down = {1, 2, 3} - {leader.node_id}  # the followers stop answering: nothing more commits
    first = net.add_voter(4)
    assert isinstance(first, VoterChangeAppended)
    assert net.add_voter(5) == VoterChangeRefused(
        ErrorCode.request_timed_out, "Request timed out waiting for leader to handle previous voter change request")
    net.now += leader.config.request_timeout_ms * 30 + 1  # the first change's deadline passes (uncommitted)
    refused = net.remove_voter(leader.node_id)
    assert refused == VoterChangeRefused(
        ErrorCode.request_timed_out,
        f"Request timed out waiting for voters to commit the latest voter change at Optional[{first.offset}] with "
        f"HWM {leader.high_watermark}")


def test_a_new_leader_refuses_until_it_committed_its_epoch() -> None:
    # Only votes are delivered: the new leader's LeaderChange entry cannot commit without a fetch.
    fresh = Network({1, 2, 3}, seed=11)
    fresh.delivers = lambda send: isinstance(send.message, VoteRequest | VoteResponse)
    for _ in range(2000):
        fresh.run(10)
        leaders = [c for c in fresh.cores.values() if isinstance(c.state, Leader)]
        if leaders:
            break
    assert leaders, "no leader elected"
    new = leaders[0]
    assert isinstance(new.state, Leader) and new.high_watermark <= new.state.epoch_start_offset
    refused, _ = new.change_voters(partial(reconfig.begin_add_voter, voter_id=4, directory_id=directory(4),
                                           timeout_ms=30_000), fresh.now)
    assert refused == VoterChangeRefused(
        ErrorCode.request_timed_out,
        "Request timed out waiting for leader to establish HWM and fence previous voter changes")


def test_add_refusals_duplicate_lagging_and_kraft_version() -> None:
    net = Network({1, 2, 3}, {4})
    net.run_until_leader()
    net.run(1000)
    dup = net.add_voter(2)
    assert isinstance(dup, VoterChangeRefused) and dup.error_code == ErrorCode.duplicate_voter
    assert dup.message == (f"The voter id for ReplicaKey(id=2, directoryId={_b64(directory(2))}) is "
                           "already part of the set of voters [" + ", ".join(
                               f"ReplicaKey(id={n}, directoryId={_b64(directory(n))})" for n in (1, 2, 3))
                           + "].")
    # Node 9 never fetched: not a caught-up observer.
    lagging = net.add_voter(9)
    assert lagging == VoterChangeRefused(
        ErrorCode.request_timed_out,
        f"Aborted add voter operation for ReplicaKey(id=9, directoryId={_b64(directory(9))}) since it is "
        "lagging behind")
    # Node 4 fetches with another directory: another replica key, so not that observer either.
    other = uuid.UUID(int=77)
    wrong_dir = net.add_voter(4, directory_id=other)
    assert isinstance(wrong_dir, VoterChangeRefused) and wrong_dir.error_code == ErrorCode.request_timed_out
    old = net.add_voter(4, kraft=(0, 0))
    assert old == VoterChangeRefused(
        ErrorCode.invalid_request,
        f"Aborted add voter operation for ReplicaKey(id=4, directoryId={_b64(directory(4))}) since the "
        "kraft.version range (min: 0, max: 0 doesn't support the finalized version 1")
    assert net.leader().config.voters == {1, 2, 3}  # nothing was appended but the upgrade's VotersRecord
    assert [e.kind for e in net.leader().log.entries].count(EntryKind.VOTERS) == 1


def test_remove_refusals_and_a_removed_follower_becomes_an_observer() -> None:
    net = Network({1, 2, 3})
    leader = net.run_until_leader()
    net.run(500)
    follower = next(n for n in (1, 2, 3) if n != leader.node_id)
    refused = net.remove_voter(follower, directory_id=uuid.UUID(int=5))
    assert isinstance(refused, VoterChangeRefused) and refused.error_code == ErrorCode.voter_not_found
    assert refused.message is not None and refused.message.startswith(
        f"Cannot remove voter ReplicaKey(id={follower}, directoryId={_b64(uuid.UUID(int=5))}) from")
    assert net.remove_voter(42).error_code == ErrorCode.voter_not_found  # type: ignore[union-attr]
    removed = net.remove_voter(follower)
    assert isinstance(removed, VoterChangeAppended)
    assert leader.config.voters == {1, 2, 3} - {follower}
    net.run(2000)
    assert not net.cores[follower].is_voter
    assert isinstance(net.cores[follower].state, Follower)  # it keeps replicating, as an observer
    described = leader.describe_quorum()
    assert [r.replica_id for r in described.observers] == [follower]
    # Producing goes on with two voters.
    result, actions = leader.propose([b"after"], net.now)
    net.feed(leader.node_id, actions)
    net.run(500)
    assert leader.high_watermark > result.last_offset  # type: ignore[union-attr]


def test_a_removed_leader_resigns_once_the_change_commits_and_the_rest_elect() -> None:
    net = Network({1, 2, 3})
    leader = net.run_until_leader()
    net.run(500)
    old = leader.node_id
    removed = net.remove_voter(old)
    assert isinstance(removed, VoterChangeAppended)
    assert not leader.is_voter  # from the append; it still leads until the change commits
    net.run(6000)
    assert not isinstance(net.cores[old].state, Leader)
    new = net.leader()
    assert new.node_id != old and new.config.voters == {1, 2, 3} - {old}
    assert net.cores[old].leader_id == new.node_id  # the old leader follows, as an observer
    assert new.voter_set().ids == {1, 2, 3} - {old}


def test_a_restarted_node_and_a_truncated_log_use_the_set_in_their_log() -> None:
    net = Network({1, 2, 3}, {4})
    leader = net.run_until_leader()
    net.run(1000)
    added = net.add_voter(4)
    assert isinstance(added, VoterChangeAppended)
    net.run(1000)
    entries = tuple(net.cores[4].log.entries)
    net.start(4, entries=entries)  # a restart from its log
    assert net.cores[4].is_voter and net.cores[4].config.voters == {1, 2, 3, 4}
    # Truncating the VotersRecord away goes back to the previous set (KIP-853).
    log = RaftLog(None, entries)
    assert log.voter_set is not None and log.voter_set.ids == {1, 2, 3, 4}
    log.truncate_to(added.offset)
    assert log.voter_set is not None and log.voter_set.ids == {1, 2, 3}  # the upgrade's VotersRecord
    assert leader.is_voter


def test_a_snapshot_carries_the_voter_set_to_a_new_replica() -> None:
    net = Network({1, 2, 3}, {4})
    leader = net.run_until_leader()
    net.run(1000)
    assert isinstance(net.add_voter(4), VoterChangeAppended)
    net.run(1000)
    for core in net.cores.values():
        net.feed(core.node_id, core.step(TakeSnapshot(core.high_watermark, b"[]"), net.now))
    assert leader.log.snapshot is not None and VoterSet.decode(leader.log.snapshot.voters).ids == {1, 2, 3, 4}
    net.start(5)  # a new node formed with the old voters: the snapshot tells it the current set
    net.run(2000)
    assert net.cores[5].log.log_start_offset == leader.log.log_start_offset
    assert net.cores[5].config.voters == {1, 2, 3, 4}
    assert not net.cores[5].is_voter


def test_voter_records_round_trip_through_batches_and_snapshot_frames() -> None:
    voters = VoterSet((VoterNode(2, directory(2), endpoint(2)), VoterNode(1, ZERO_DIRECTORY_ID, endpoint(1), 0, 1)))
    assert [v.voter_id for v in voters.voters] == [1, 2]
    assert VoterSet.decode(voters.encode()) == voters
    entries = [LogEntry(0, 1, b"leader=1", EntryKind.LEADER_CHANGE), LogEntry(1, 1, b"x"),
               LogEntry(2, 1, voters.encode(), EntryKind.VOTERS), LogEntry(3, 1, b"y")]
    assert decode_entries(encode_entries(entries)) == entries
    framed = frame_snapshot(voters.encode(), b"[1]")
    assert unframe_snapshot(framed) == (voters.encode(), b"[1]")
    assert unframe_snapshot(b"[1]") == (b"", b"[1]")
    log = RaftLog(Snapshot(SnapshotId(5, 1), b"[]", voters.encode()), ())
    assert log.voter_set == voters and log.voter_set_offset == -1


def _b64(u: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(u.bytes).decode().rstrip("=")


def test_update_voter_fills_in_a_directory_id_and_listeners() -> None:
    """Kafka: UpdateVoterHandler -- the voter with that id (and directory id, or none known) gets the new
    listeners and kraft.version range; an unknown voter or a range without the finalized level is refused."""
    net = Network({1, 2, 3})
    leader = net.run_until_leader()
    net.run(500)
    follower = next(n for n in (1, 2, 3) if n != leader.node_id)
    moved = VoterNode(follower, directory(follower), (VoterEndpoint("CONTROLLER", "10.0.0.9", 9999),), 0, 1)

    def update(voter: VoterNode) -> object:
        result, actions = leader.change_voters(partial(reconfig.update_voter, voter=voter), net.now)
        net.feed(leader.node_id, actions)
        return result

    assert update(VoterNode(42, directory(42), endpoint(42))) == VoterChangeRefused(ErrorCode.voter_not_found, None)
    assert update(VoterNode(follower, uuid.UUID(int=9), endpoint(follower))) == VoterChangeRefused(
        ErrorCode.voter_not_found, None)
    old_range = VoterNode(follower, directory(follower), endpoint(follower), 0, 0)
    assert update(old_range) == VoterChangeRefused(ErrorCode.invalid_request, None)
    # The follower really moved (else its own UpdateRaftVoter would put its real listener back: see below).
    net.cores[follower].listeners = moved.endpoints
    assert isinstance(update(moved), VoterChangeAppended)
    net.run(500)
    assert leader.voter_set().get(follower) == moved
    assert net.cores[follower].voter_set().get(follower) == moved


@pytest.mark.slow
@pytest.mark.skipif(not (shutil.which("java") and any((ORACLE / "lib").glob("kafka_*.jar"))),
                    reason="Kafka jars (compat-tests/oracle/lib) or java missing")
def test_kafka_dump_log_reads_our_voter_records(tmp_path: Path) -> None:
    """Kafka's own DumpLogSegments decodes Samsa's KIP-853 control batches as KRaftVersion and KRaftVoters."""
    voters = VoterSet((VoterNode(1, directory(1), endpoint(1)), VoterNode(4, directory(4), endpoint(4))))
    entries = [LogEntry(0, 1, b"leader=1", EntryKind.LEADER_CHANGE),
               LogEntry(1, 1, encode_kraft_version(1), EntryKind.KRAFT_VERSION),
               LogEntry(2, 1, voters.encode(), EntryKind.VOTERS)]
    segment = tmp_path / "__cluster_metadata-0" / "00000000000000000000.log"
    segment.parent.mkdir()
    segment.write_bytes(encode_entries(entries, timestamp_ms=1))
    run = [str(ORACLE / "kafka-run.sh"), "org.apache.kafka.tools.DumpLogSegments", "--files", str(segment),
           "--print-data-log"]
    out = subprocess.run(run, capture_output=True, text=True, timeout=300, check=True).stdout
    assert 'KRaftVersion {"version":0,"kRaftVersion":1}' in out
    assert (f'"voterId":4,"voterDirectoryId":"{_b64(directory(4))}","endpoints":[{{"name":"CONTROLLER",'
            f'"host":"127.0.0.1","port":9004}}]') in out
    assert out.count("isvalid: true") == 3


def test_an_uncommitted_removal_is_undone_when_a_new_leader_truncates_it() -> None:
    """KIP-853: the set in force is the latest in the log, committed or not; the leader that appended a removal
    and crashed before it committed goes back to the previous set when the new leader truncates the record."""
    net = Network({1, 2, 3})
    leader = net.run_until_leader()
    net.run(500)
    old = leader.node_id
    followers = sorted({1, 2, 3} - {old})
    net.down = set(followers)  # the removal reaches no one
    removed = net.remove_voter(followers[0])
    assert isinstance(removed, VoterChangeAppended)
    assert leader.config.voters == {old, followers[1]}
    epoch, entries = leader.epoch, tuple(leader.log.entries)
    net.down = {old}  # the leader crashes; the two others elect a leader among the three voters they know
    new = None
    for _ in range(1000):
        net.run(10)
        leaders = [c for n, c in net.cores.items() if n != old and isinstance(c.state, Leader)]
        if leaders and leaders[0].high_watermark > leaders[0].state.epoch_start_offset:  # type: ignore[union-attr]
            new = leaders[0]
            break
    assert new is not None and new.config.voters == {1, 2, 3}
    net.start(old, entries=entries, quorum_state=PersistQuorumState(epoch, old, old))
    restarted = net.cores[old]
    assert restarted.config.voters == {old, followers[1]}  # its log still holds the removal
    net.run(3000)
    assert restarted.log.voter_set is not None and restarted.config.voters == {1, 2, 3}
    assert restarted.leader_id == new.node_id
    assert restarted.log.end_offset <= removed.offset or restarted.log.entry(removed.offset).kind != EntryKind.VOTERS


# -- UpdateRaftVoter, the voter's side (raft.voter_update; Kafka 4.4's pollFollowerAsVoter) ----------------


def _run_until(net: Network, what: str, done: Callable[[], bool], limit_ms: int = 30_000) -> None:
    """Advance the simulated clock until `done` (a bound on simulated time, not on the machine's)."""
    for _ in range(limit_ms // 10):
        if done():
            return
        net.run(10)
    raise AssertionError(f"{what}: not within {limit_ms} ms of simulated time")


def _without_3s_directory() -> tuple[Network, RaftCore, list[UpdateVoterRequest]]:
    """Voter 3 is down while 1 and 2 elect a leader, which so never sees 3's directory id in a fetch; the first
    VotersRecord is written with no directory id for 3 -- as an older Samsa did with its first voter change
    (today's kraft.version upgrade waits for every voter) -- and node 4 is added. Then 3 comes back."""
    net = Network({1, 2, 3}, {4}, kraft_version=0)
    net.down.add(3)
    leader = net.run_until_leader()
    state = leader.state
    assert isinstance(state, Leader)
    appended, actions = reconfig._append_voters(leader, state, reconfig.current_voter_set(leader, state))
    net.feed(leader.node_id, actions)
    _run_until(net, "the older Samsa's first VotersRecord committed", lambda: leader.high_watermark > appended.offset)
    _run_until(net, "the observer caught up", lambda: 4 in state.replicas and state.replicas[4].last_caught_up_ms >= 0)
    assert isinstance(net.add_voter(4), VoterChangeAppended)
    _run_until(net, "the add committed", lambda: leader.log.voter_set_offset is not None
               and leader.high_watermark > leader.log.voter_set_offset)
    entry = leader.voter_set().get(3)
    assert entry is not None and entry.directory_id == ZERO_DIRECTORY_ID
    # The bug this fixes: with no directory id recorded, no replica key removes voter 3.
    refused = net.remove_voter(3)
    assert isinstance(refused, VoterChangeRefused) and refused.error_code == ErrorCode.voter_not_found
    sent: list[UpdateVoterRequest] = []

    def record(send: Send) -> bool:
        if isinstance(send.message, UpdateVoterRequest):
            sent.append(send.message)
        return True

    net.delivers = record
    net.down.discard(3)
    return net, leader, sent


def test_a_voter_without_its_directory_id_in_the_set_sends_update_raft_voter_and_gets_it() -> None:
    net, leader, sent = _without_3s_directory()
    _run_until(net, "3's directory id in the leader's set",
               lambda: (v := leader.voter_set().get(3)) is not None and v.directory_id == directory(3))
    assert sent and sent[0] == UpdateVoterRequest(3, directory(3), leader.epoch, endpoint(3), 0, 1)
    assert all(m.voter_id == 3 for m in sent)
    _run_until(net, "the update committed and fetched by 3",
               lambda: leader.high_watermark > (leader.log.voter_set_offset or 0)
               and net.cores[3].voter_set() == leader.voter_set())
    expected = VoterSet(tuple(VoterNode(n, directory(n), endpoint(n), 0, 1) for n in (1, 2, 3, 4)))
    for core in net.cores.values():
        assert core.voter_set() == expected
    assert {r.replica_id: r.replica_directory_id for r in leader.describe_quorum().current_voters} == {
        n: directory(n) for n in (1, 2, 3, 4)}
    # Once the set says what every voter is, nobody sends it any more.
    count = len(sent)
    net.run(10_000)
    assert len(sent) == count
    # And 3 can now be removed by its replica key.
    removed = net.remove_voter(3)
    assert isinstance(removed, VoterChangeAppended)
    _run_until(net, "the removal committed", lambda: leader.high_watermark > removed.offset)
    assert leader.voter_set().ids == {1, 2, 4}


def test_update_raft_voter_is_retried_every_fetch_timeout_until_the_set_matches() -> None:
    net, leader, sent = _without_3s_directory()
    lost: list[int] = []

    def lose_the_first_two(send: Send) -> bool:
        if isinstance(send.message, UpdateVoterRequest):
            sent.append(send.message)
            if len(lost) < 2:
                lost.append(net.now)
                return False
        return True

    net.delivers = lose_the_first_two
    _run_until(net, "3's directory id in the leader's set",
               lambda: (v := leader.voter_set().get(3)) is not None and v.directory_id == directory(3))
    assert len(sent) == 3
    fetch_timeout = net.cores[3].config.fetch_timeout_ms
    assert lost[1] - lost[0] == fetch_timeout  # the period (Kafka 4.4: controller.quorum.fetch.timeout.ms)


def test_the_leader_answers_update_raft_voter_with_kafkas_checks() -> None:
    """The core's answer to an UpdateRaftVoter it is given (as tests/sim delivers them): epoch checks first,
    then raft.reconfig.update_voter; the answer carries the leader and its epoch."""
    net = Network({1, 2, 3})
    leader = net.run_until_leader()
    net.run(500)
    follower = next(n for n in (1, 2, 3) if n != leader.node_id)

    def ask(core: RaftCore, epoch: int, voter_id: int = follower, dir_id: uuid.UUID | None = None
            ) -> UpdateVoterResponse:
        request = UpdateVoterRequest(voter_id, directory(voter_id) if dir_id is None else dir_id, epoch,
                                     endpoint(voter_id), 0, 1)
        actions = core.step(Received(follower, request, 77), net.now)
        answers = [a.message for a in actions if isinstance(a, Send) and a.correlation_id == 77]
        assert len(answers) == 1 and isinstance(answers[0], UpdateVoterResponse)
        return answers[0]

    epoch = leader.epoch
    assert ask(leader, epoch - 1) == UpdateVoterResponse(ErrorCode.fenced_leader_epoch, leader.node_id, epoch)
    assert ask(leader, epoch + 1) == UpdateVoterResponse(ErrorCode.unknown_leader_epoch, leader.node_id, epoch)
    assert ask(net.cores[follower], epoch) == UpdateVoterResponse(ErrorCode.not_leader_or_follower,
                                                                  leader.node_id, epoch)
    assert ask(leader, epoch, dir_id=ZERO_DIRECTORY_ID).error_code == ErrorCode.invalid_request
    assert ask(leader, epoch, voter_id=42).error_code == ErrorCode.voter_not_found
    assert ask(leader, epoch) == UpdateVoterResponse(ErrorCode.none, leader.node_id, epoch)
    assert leader.log.voter_set is not None and leader.log.voter_set.get(follower) == VoterNode(
        follower, directory(follower), endpoint(follower), 0, 1)


def test_update_raft_voter_on_the_wire() -> None:
    """The driver sends the core's UpdateVoterRequest as UpdateRaftVoter v0 and reads its answer back."""
    from samsa.kproto.messages import response_class
    from samsa.kproto.wire import build
    from samsa.raft import codec

    request = UpdateVoterRequest(3, directory(3), 7, endpoint(3), 0, 1)
    wire = codec.encode_request(request, cluster_id="c1")
    assert type(wire).__api_key__ == 82 and type(wire).__version__ == 0  # type: ignore[attr-defined]
    assert (wire.cluster_id, wire.current_leader_epoch, wire.voter_id, wire.voter_directory_id) == (  # type: ignore[attr-defined]
        "c1", 7, 3, directory(3))
    assert [(e.name, e.host, e.port) for e in wire.listeners] == [("CONTROLLER", "127.0.0.1", 9003)]  # type: ignore[attr-defined]
    feature = wire.k_raft_version_feature  # type: ignore[attr-defined]
    assert (feature.min_supported_version, feature.max_supported_version) == (0, 1)
    answer = build(response_class(82, 0), {"throttle_time": 0, "error_code": ErrorCode.fenced_leader_epoch,
                                           "current_leader": {"leader_id": 2, "leader_epoch": 8, "host": "h",
                                                              "port": 1}})
    assert codec.decode_response(answer) == UpdateVoterResponse(ErrorCode.fenced_leader_epoch, 2, 8)


def test_a_new_leader_whose_entry_differs_appends_the_set_with_it_updated_after_its_leader_change() -> None:
    """Kafka: LeaderState.appendStartOfEpochControlRecords -- a leader sends itself no UpdateRaftVoter."""
    net = Network({1, 2, 3}, {4})
    leader = net.run_until_leader()
    state = leader.state
    assert isinstance(state, Leader)
    _run_until(net, "the observer caught up", lambda: 4 in state.replicas and state.replicas[4].last_caught_up_ms >= 0)
    assert isinstance(net.add_voter(4), VoterChangeAppended)
    _run_until(net, "the add committed", lambda: leader.high_watermark > (leader.log.voter_set_offset or 0))
    mover = next(n for n in (1, 2, 3) if n != leader.node_id)
    moved = (VoterEndpoint("CONTROLLER", "10.0.0.7", 9999),)
    net.cores[mover].listeners = moved  # it restarted with another listener, say, and as a follower it
    net.delivers = lambda send: not isinstance(send.message, UpdateVoterRequest)  # would tell the leader: not now
    for _ in range(30):  # take leaders down until the mover is elected
        current = net.leader()
        if current.node_id == mover:
            break
        net.down.add(current.node_id)
        _run_until(net, "another leader", lambda: any(
            isinstance(c.state, Leader) and n not in net.down for n, c in net.cores.items()))
        net.down.discard(current.node_id)
        net.run(3000)
    new = net.leader()
    assert new.node_id == mover
    s = new.state
    assert isinstance(s, Leader)
    assert new.log.entry(s.epoch_start_offset).kind == EntryKind.LEADER_CHANGE
    entry = new.log.entry(s.epoch_start_offset + 1)
    assert entry.kind == EntryKind.VOTERS
    assert VoterSet.decode(entry.payload).get(mover) == VoterNode(mover, directory(mover), moved, 0, 1)
    _run_until(net, "every node has it", lambda: all(c.voter_set().get(mover) == VoterNode(
        mover, directory(mover), moved, 0, 1) for n, c in net.cores.items() if n not in net.down))


# -- kraft.version (KIP-853): a static quorum runs 0 until it is upgraded -------------------------------


def test_a_static_quorum_runs_kraft_version_0_and_refuses_voter_changes_as_kafka() -> None:
    net = Network({1, 2, 3}, {4}, kraft_version=0)
    leader = net.run_until_leader()
    net.run(1000)
    assert reconfig.kraft_version(leader) == 0
    # Kafka 4.4's DescribeQuorum lists a static voter without a directory id (measured on the 4.4.0 broker)
    assert {r.replica_directory_id for r in leader.describe_quorum().current_voters} == {ZERO_DIRECTORY_ID}
    # Kafka 4.4's AddVoterHandler / RemoveVoterHandler, after the pending-change and high-watermark checks.
    assert net.add_voter(4) == VoterChangeRefused(
        ErrorCode.unsupported_version, "Cluster doesn't support adding voter because the kraft.version feature is 0")
    follower = min({1, 2, 3} - {leader.node_id})
    assert net.remove_voter(follower) == VoterChangeRefused(
        ErrorCode.unsupported_version, "Cluster doesn't support removing voter because the kraft.version feature is 0")
    assert all(e.kind == EntryKind.DATA or e.kind not in (EntryKind.VOTERS, EntryKind.KRAFT_VERSION)
               for e in leader.log.entries)
    assert all(c.log.voter_set is None for c in net.cores.values())


def _upgrade(leader: RaftCore, validate_only: bool = False) -> object:
    state = leader.state
    assert isinstance(state, Leader)
    return leader.change_voters(partial(reconfig.upgrade_kraft_version, level=1, validate_only=validate_only),
                                leader.now_ms)


def test_the_kraft_version_upgrade_waits_for_every_voter_then_writes_both_records() -> None:
    net = Network({1, 2, 3}, kraft_version=0)
    net.down.add(3)
    leader = net.run_until_leader()
    net.run(500)
    result, actions = _upgrade(leader)  # type: ignore[misc]
    assert result == VoterChangeRefused(
        ErrorCode.invalid_update_version,
        "Invalid upgrade of kraft.version to KRAFT_VERSION_1 because not all of the voters support it")
    assert actions == []
    net.down.discard(3)
    net.run(2000)  # 3 fetches: the leader now knows its directory id
    end = leader.log.end_offset
    assert _upgrade(leader, validate_only=True) == (None, [])
    assert leader.log.end_offset == end
    result, actions = _upgrade(leader)  # type: ignore[misc]
    assert isinstance(result, VoterChangeAppended)
    net.feed(leader.node_id, actions)
    assert leader.log.entry(result.offset - 1).kind == EntryKind.KRAFT_VERSION
    assert leader.log.entry(result.offset).kind == EntryKind.VOTERS
    net.run(1000)
    for core in net.cores.values():
        assert reconfig.kraft_version(core) == 1
        assert core.voter_set() == VoterSet(tuple(VoterNode(n, directory(n), endpoint(n)) for n in (1, 2, 3)))
    assert _upgrade(leader) == (None, [])  # already at 1: nothing more to write
    # Once upgraded, voters can change; a restart from the log keeps kraft.version 1.
    assert isinstance(net.remove_voter(min({1, 2, 3} - {leader.node_id})), VoterChangeAppended)
    net.start(3, entries=tuple(net.cores[3].log.entries))
    assert reconfig.kraft_version(net.cores[3]) == 1


def test_update_raft_voter_at_kraft_version_0_is_kept_in_memory_for_the_upgrade() -> None:
    net = Network({1, 2, 3}, kraft_version=0)
    leader = net.run_until_leader()
    follower = min({1, 2, 3} - {leader.node_id})
    moved = (VoterEndpoint("CONTROLLER", "127.0.0.2", 9100 + follower),)
    end = leader.log.end_offset
    result, _ = leader.change_voters(partial(reconfig.update_voter, voter=VoterNode(
        follower, directory(follower), moved, 0, 1)), net.now)
    assert result == VoterChangeRefused(ErrorCode.none, None)  # Kafka answers NONE and writes nothing
    assert leader.log.end_offset == end
    result, _ = leader.change_voters(partial(reconfig.update_voter, voter=VoterNode(9, directory(9), moved)), net.now)
    assert isinstance(result, VoterChangeRefused) and result.error_code == ErrorCode.voter_not_found
    net.run(1000)
    result, _actions = _upgrade(leader)  # type: ignore[misc]
    assert isinstance(result, VoterChangeAppended)
    entry = leader.voter_set().get(follower)
    assert entry is not None and entry.endpoints == moved


def test_a_node_with_a_voters_id_but_another_directory_is_an_observer() -> None:
    """Kafka 4.4's VoterNode.isVoter: where the voter set records a directory id, the replica's must be it."""
    net = Network({1, 2, 3})
    leader = net.run_until_leader()
    net.run(500)
    follower = min({1, 2, 3} - {leader.node_id})
    entries = tuple(net.cores[follower].log.entries)

    def restarted(directory_id: uuid.UUID, log: tuple[LogEntry, ...]) -> RaftCore:
        bootstrap = VoterSet(tuple(VoterNode(v, ZERO_DIRECTORY_ID, endpoint(v)) for v in (1, 2, 3)))
        return RaftCore(follower, QuorumConfig(voters=frozenset({1, 2, 3})), random.Random(1), net.now,
                        directory_id=directory_id, bootstrap_voters=bootstrap, entries=log)

    assert restarted(directory(follower), entries).is_voter
    replaced = restarted(uuid.UUID(int=4242), entries)  # its disk was replaced: a new directory id
    assert not replaced.is_voter and replaced.config.voters == {1, 2, 3}
    assert not restarted(ZERO_DIRECTORY_ID, entries).is_voter
    # It does not stand for election: it only fetches, as an observer.
    sent = [a for a in replaced.step(Tick(), net.now + 60_000) if isinstance(a, Send)]
    assert all(isinstance(a.message, FetchRequest) for a in sent) and sent
    # At kraft.version 0 the static voters carry no directory id: the id alone decides (Kafka likewise).
    assert restarted(uuid.UUID(int=4242), ()).is_voter


def test_a_fetch_from_a_voters_id_with_another_directory_does_not_acknowledge_for_the_voter() -> None:
    """Kafka 4.4's LeaderState.getOrCreateReplicaState: such a replica is an observer to the leader."""
    net = Network({1, 2, 3})
    leader = net.run_until_leader()
    net.run(500)
    followers = sorted({1, 2, 3} - {leader.node_id})
    net.down = set(followers)
    _result, actions = leader.propose([b"x"], net.now)
    net.feed(leader.node_id, actions)
    hw = leader.high_watermark
    end = leader.log.end_offset
    assert hw < end
    state = leader.state
    assert isinstance(state, Leader)
    before = state.replicas[followers[0]].last_fetch_ms

    def fetch(directory_id: uuid.UUID) -> list[Action]:
        request = FetchRequest(followers[0], leader.epoch, end, leader.log.last_fetched_epoch, 0, 0, directory_id)
        return leader.step(Received(followers[0], request, 99), net.now)

    answered = [a for a in fetch(uuid.UUID(int=4242)) if isinstance(a, Send)]
    assert answered and leader.high_watermark == hw  # answered, but no acknowledgement
    assert state.replicas[followers[0]].last_fetch_ms == before
    fetch(directory(followers[0]))
    assert leader.high_watermark == end  # the voter itself acknowledges
