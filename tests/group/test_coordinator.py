"""The pure classic group coordinator, driven with a fake clock (no I/O, no sleeping)."""

from __future__ import annotations

import random

import pytest

from samsa.broker.group.coordinator import (
    TIMER_RESOLUTION_MS,
    GroupConfig,
    GroupCoordinator,
    JoinRequest,
    JoinResult,
    OffsetAndMetadata,
    Pending,
    SyncResult,
)
from samsa.broker.group.records import (
    GroupMetadataKey,
    OffsetCommitKey,
    decode_group_metadata_value,
    decode_key,
    decode_offset_commit_value,
)
from samsa.broker.group.state import TRANSITIONS, VALID_PREVIOUS_STATES, GroupState
from samsa.kproto.errors import ErrorCode

SESSION_MS = 10_000
REBALANCE_MS = 30_000
G = "g"


class ShellTimedCoordinator(GroupCoordinator):
    """The coordinator as the service runs it when requests come more than a timer resolution apart: the
    timer a JoinGroup set to fire at once (the initial join of group.initial.rebalance.delay.ms=0) fires
    before the next request. Tests of requests arriving together use GroupCoordinator itself."""

    def join_group(self, request: JoinRequest, now_ms: int) -> Pending[JoinResult]:
        pending = super().join_group(request, now_ms)
        group = self.groups.get(request.group_id)
        if group is not None and group.join_deadline_ms is not None and \
                group.join_deadline_ms <= now_ms + TIMER_RESOLUTION_MS:
            self.fire_timers(request.group_id, group.join_deadline_ms)
        return pending


def make(delay_ms: int = 0, **kw: int) -> GroupCoordinator:
    return ShellTimedCoordinator(GroupConfig(initial_rebalance_delay_ms=delay_ms, **kw), random.Random(7))


def req(member_id: str = "", instance: str | None = None, protocols: tuple[tuple[str, bytes], ...] | None = None,
        client: str = "c", require_known: bool = False, session_ms: int = SESSION_MS,
        rebalance_ms: int = REBALANCE_MS) -> JoinRequest:
    return JoinRequest(G, member_id, instance, client, "/127.0.0.1", session_ms, rebalance_ms, "consumer",
                       protocols or (("range", b"m-" + client.encode()),), require_known_member_id=require_known)


def result(p: Pending[JoinResult]) -> JoinResult:
    assert p.result is not None, "join not complete"
    return p.result


def sync_result(p: Pending[SyncResult]) -> SyncResult:
    assert p.result is not None, "sync not complete"
    return p.result


def sync(c: GroupCoordinator, group_id: str, generation_id: int, member_id: str, instance: str | None,
         protocol_type: str | None, protocol_name: str | None, assignments: dict[str, bytes],
         now: int) -> Pending[SyncResult]:
    """SyncGroup as the shell runs it: the leader's assignment record is written, then reported."""
    pending = c.sync_group(group_id, generation_id, member_id, instance, protocol_type, protocol_name, assignments,
                           now)
    c.on_assignment_stored(group_id, member_id, generation_id, ErrorCode.none, now)
    return pending


def join_all(c: GroupCoordinator, pendings: list[Pending[JoinResult]]) -> list[JoinResult]:
    return [result(p) for p in pendings]


def stable_group(c: GroupCoordinator, n: int, now: int = 0) -> list[JoinResult]:
    """n members join (rejoining as clients do after each rebalance) and sync; returns their join results."""
    pendings: list[Pending[JoinResult] | None] = [None] * n
    ids = [""] * n
    for _ in range(2 * n + 2):
        group = c.groups.get(G)
        for i in range(n):
            p = pendings[i]
            if p is not None and not p.done:
                continue
            if p is not None:
                ids[i] = result(p).member_id
                if group is not None and result(p).generation_id == group.generation_id and \
                        group.state is GroupState.COMPLETING_REBALANCE:
                    continue
            pendings[i] = c.join_group(req(ids[i], client=f"m{i}"), now)
        group = c.groups[G]
        if group.state is GroupState.COMPLETING_REBALANCE and all(
                p is not None and p.done and result(p).generation_id == group.generation_id for p in pendings):
            break
    results = [result(p) for p in pendings if p is not None]
    assert len(results) == n and all(r.error == ErrorCode.none for r in results)
    leader = next(r for r in results if r.member_id == r.leader_id)
    for r in results:
        assignment = {m.member_id: f"a-{m.member_id}".encode() for m in leader.members} if r is leader else {}
        sync(c, G, r.generation_id, r.member_id, None, None, None, assignment, now)
    assert c.groups[G].state is GroupState.STABLE
    return results


def test_transition_table_is_kafkas() -> None:
    E, P, C, S, D = (GroupState.EMPTY, GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE,
                     GroupState.STABLE, GroupState.DEAD)
    assert TRANSITIONS[E] == {P, D}
    assert TRANSITIONS[P] == {E, C, D}
    assert TRANSITIONS[C] == {P, S, D}
    assert TRANSITIONS[S] == {P, D}
    assert TRANSITIONS[D] == {D}
    assert all(VALID_PREVIOUS_STATES[t] for t in GroupState)


def test_single_member_join_sync_heartbeat() -> None:
    c = make()
    r = result(c.join_group(req(client="solo"), 0))
    assert r.error == ErrorCode.none and r.generation_id == 1 and r.leader_id == r.member_id
    assert r.member_id.startswith("solo-") and r.protocol_name == "range"
    assert [m.metadata for m in r.members] == [b"m-solo"]
    assert c.groups[G].state is GroupState.COMPLETING_REBALANCE
    s = sync_result(sync(c, G, 1, r.member_id, None, "consumer", "range", {r.member_id: b"A"}, 0))
    assert s == SyncResult(ErrorCode.none, "consumer", "range", b"A")
    assert c.groups[G].state is GroupState.STABLE
    assert c.heartbeat(G, 1, r.member_id, None, 100) == ErrorCode.none


def test_member_id_required_round_trip() -> None:
    c = make()
    first = result(c.join_group(req(require_known=True), 0))
    assert first.error == ErrorCode.member_id_required and first.member_id
    assert G in c.groups and not c.groups[G].members
    second = result(c.join_group(req(first.member_id, require_known=True), 1))
    assert second.error == ErrorCode.none and second.member_id == first.member_id and second.generation_id == 1


def test_pending_member_expires_after_session_timeout() -> None:
    c = make()
    first = result(c.join_group(req(require_known=True), 0))
    c.tick(SESSION_MS + 1)
    late = result(c.join_group(req(first.member_id, require_known=True), SESSION_MS + 2))
    assert late.error == ErrorCode.unknown_member_id


def test_three_members_leader_gets_all_metadata() -> None:
    c = make()
    results = stable_group(c, 3)
    assert len({r.member_id for r in results}) == 3
    assert {r.generation_id for r in results} == {2}
    leader = [r for r in results if r.members]
    assert len(leader) == 1 and len(leader[0].members) == 3
    for r in results:
        s = sync_result(sync(c, G, 2, r.member_id, None, None, None, {}, 1))
        assert s.assignment == f"a-{r.member_id}".encode()


def test_follower_sync_waits_for_leader() -> None:
    c = make(delay_ms=100)
    pa = c.join_group(req(client="a"), 0)
    pb = c.join_group(req(client="b"), 0)
    c.tick(100)
    c.tick(200)
    ra, rb = result(pa), result(pb)
    follower, leader = (rb, ra) if ra.leader_id == ra.member_id else (ra, rb)
    waiting = sync(c, G, 1, follower.member_id, None, None, None, {}, 201)
    assert not waiting.done
    sync(c, G, 1, leader.member_id, None, None, None, {follower.member_id: b"F", leader.member_id: b"L"}, 202)
    assert sync_result(waiting).assignment == b"F"


def test_protocol_selection_by_vote() -> None:
    c = make(delay_ms=100)
    p1 = c.join_group(req(client="a", protocols=(("roundrobin", b"x"), ("range", b"y"))), 0)
    p2 = c.join_group(req(client="b", protocols=(("range", b"y"), ("roundrobin", b"x"))), 0)
    p3 = c.join_group(req(client="c", protocols=(("range", b"y"), ("cooperative-sticky", b"z"))), 0)
    c.tick(100)
    c.tick(200)
    assert {result(p).protocol_name for p in (p1, p2, p3)} == {"range"}
    # the leader sees each member's metadata for the chosen protocol, untouched
    leader = next(result(p) for p in (p1, p2, p3) if result(p).members)
    assert sorted(m.metadata for m in leader.members) == [b"y", b"y", b"y"]


def test_inconsistent_protocol_rejected() -> None:
    c = make()
    stable_group(c, 1)
    bad = result(c.join_group(req(client="x", protocols=(("sticky", b""),)), 5))
    assert bad.error == ErrorCode.inconsistent_group_protocol


def test_invalid_session_timeout() -> None:
    c = make()
    assert result(c.join_group(req(session_ms=10), 0)).error == ErrorCode.invalid_session_timeout


def test_initial_rebalance_delay_collects_members() -> None:
    c = make(delay_ms=3000)
    pa = c.join_group(req(client="a"), 0)
    c.tick(1000)
    pb = c.join_group(req(client="b"), 1000)
    c.tick(2999)
    assert not pa.done and not pb.done
    c.tick(3000)  # a member joined during the delay: wait another delay
    assert not pa.done
    c.tick(6000)
    assert result(pa).generation_id == result(pb).generation_id == 1
    assert len(next(result(p) for p in (pa, pb) if result(p).members).members) == 2


def test_without_initial_delay_the_first_join_completes_from_its_timer() -> None:
    """group.initial.rebalance.delay.ms=0: Kafka's prepareRebalance still completes the initial join from a
    timer (of 0 ms), so JoinGroups queued behind the first share generation 1 instead of forcing a second
    rebalance; each member added meanwhile buys one more timer round (tryCompleteInitialRebalanceElseSchedule)."""
    c = GroupCoordinator(GroupConfig(initial_rebalance_delay_ms=0), random.Random(7))
    pa = c.join_group(req(client="a"), 0)
    assert not pa.done and c.groups[G].state is GroupState.PREPARING_REBALANCE
    pb = c.join_group(req(client="b"), 0)  # before the timer fires
    c.tick(TIMER_RESOLUTION_MS)  # b was added during the delay: one more round
    assert not pa.done and not pb.done
    pc = c.join_group(req(client="c"), TIMER_RESOLUTION_MS)
    c.tick(2 * TIMER_RESOLUTION_MS)
    assert not pc.done
    c.tick(3 * TIMER_RESOLUTION_MS)  # nobody came in the last round
    results = [result(p) for p in (pa, pb, pc)]
    assert {r.generation_id for r in results} == {1}
    leader = next(r for r in results if r.members)
    assert len(leader.members) == 3


def test_without_initial_delay_a_join_after_the_timer_is_a_new_generation() -> None:
    c = GroupCoordinator(GroupConfig(initial_rebalance_delay_ms=0), random.Random(7))
    pa = c.join_group(req(client="a"), 0)
    c.tick(TIMER_RESOLUTION_MS)
    ra = result(pa)
    assert (ra.generation_id, len(ra.members)) == (1, 1)
    # A JoinGroup once the timer is due fires it first (as its own request would find it fired in Kafka).
    c2 = GroupCoordinator(GroupConfig(initial_rebalance_delay_ms=0), random.Random(7))
    pa = c2.join_group(req(client="a"), 0)
    pb = c2.join_group(req(client="b"), TIMER_RESOLUTION_MS)
    assert result(pa).generation_id == 1 and len(result(pa).members) == 1
    assert not pb.done and c2.groups[G].state is GroupState.PREPARING_REBALANCE


def test_a_pending_member_stays_pending_when_a_generation_completes_without_it() -> None:
    """A member given its id by MEMBER_ID_REQUIRED whose JoinGroup comes after the join phase closed starts
    the next rebalance (Kafka keeps pending members); it is not answered UNKNOWN_MEMBER_ID."""
    c = GroupCoordinator(GroupConfig(initial_rebalance_delay_ms=0), random.Random(7))
    ids = [result(c.join_group(req(client=x, require_known=True), 0)).member_id for x in "ab"]
    pa = c.join_group(req(ids[0], client="a", require_known=True), 0)
    c.tick(TIMER_RESOLUTION_MS)
    assert (result(pa).generation_id, len(result(pa).members)) == (1, 1)
    pb = c.join_group(req(ids[1], client="b", require_known=True), 5)
    assert not pb.done and c.groups[G].state is GroupState.PREPARING_REBALANCE
    pa = c.join_group(req(ids[0], client="a", require_known=True), 6)
    assert [(result(p).error, result(p).generation_id) for p in (pa, pb)] == [(ErrorCode.none, 2)] * 2


def test_initial_delay_bounded_by_rebalance_timeout() -> None:
    c = make(delay_ms=3000)
    pendings = [c.join_group(req(client="a", rebalance_ms=4000), 0)]
    for t in range(500, 4000, 500):
        c.tick(t)
        pendings.append(c.join_group(req(client=f"m{t}", rebalance_ms=4000), t))
    c.tick(4000)
    c.tick(4500)
    assert all(p.done for p in pendings)


def test_stale_generation_commit_and_heartbeat_rejected() -> None:
    c = make()
    results = stable_group(c, 2)
    m = results[0].member_id
    assert c.validate_offset_commit(G, 1, m, None, 8, 0) == ErrorCode.illegal_generation
    assert c.heartbeat(G, 1, m, None, 1) == ErrorCode.illegal_generation
    assert c.validate_offset_commit(G, 2, m, None, 8, 0) == ErrorCode.none


def test_unknown_member_rejected_everywhere() -> None:
    c = make()
    stable_group(c, 1)
    assert c.heartbeat(G, 2, "ghost", None, 1) == ErrorCode.unknown_member_id
    assert c.validate_offset_commit(G, 2, "ghost", None, 8, 0) == ErrorCode.unknown_member_id
    assert sync_result(sync(c, G, 2, "ghost", None, None, None, {}, 1)).error == ErrorCode.unknown_member_id
    assert result(c.join_group(req("ghost"), 1)).error == ErrorCode.unknown_member_id
    assert c.heartbeat("nope", 1, "ghost", None, 1) == ErrorCode.unknown_member_id


def test_rebalance_in_progress() -> None:
    c = make()
    results = stable_group(c, 2)
    a, b = results
    # a new member triggers a rebalance: heartbeats say REBALANCE_IN_PROGRESS, commits still pass
    pc = c.join_group(req(client="new"), 10)
    assert c.groups[G].state is GroupState.PREPARING_REBALANCE
    assert c.heartbeat(G, 2, a.member_id, None, 11) == ErrorCode.rebalance_in_progress
    assert c.validate_offset_commit(G, 2, a.member_id, None, 8, 0) == ErrorCode.none
    assert sync_result(sync(c, G, 2, a.member_id, None, None, None, {}, 11)).error == \
        ErrorCode.rebalance_in_progress
    pa = c.join_group(req(a.member_id, client="m0"), 12)
    pb = c.join_group(req(b.member_id, client="m1"), 12)
    assert all(p.done for p in (pa, pb, pc))
    # join phase done, leader has not synced: commits get REBALANCE_IN_PROGRESS
    assert c.groups[G].state is GroupState.COMPLETING_REBALANCE
    assert c.validate_offset_commit(G, 3, a.member_id, None, 8, 0) == ErrorCode.rebalance_in_progress
    # ... but a TxnOffsetCommit's offsets wait for their transaction: Kafka's ClassicGroup.validateOffsetCommit
    # checks the state only for a consumer's commit.
    assert c.validate_offset_commit(G, 3, a.member_id, None, 8, 0, transactional=True) == ErrorCode.none
    assert c.validate_offset_commit(G, 2, a.member_id, None, 8, 0, transactional=True) == ErrorCode.illegal_generation


def test_generation_minus_one_commit_only_for_empty_group() -> None:
    c = make()
    assert c.validate_offset_commit("simple", -1, "", None, 8, 0) == ErrorCode.none
    c.commit_offsets("simple", "", {("t", 0): OffsetAndMetadata(5, -1, "", 0)}, 0)
    assert c.committed_offsets("simple")[("t", 0)].offset == 5
    assert c.validate_offset_commit("missing", 3, "m", None, 8, 0) == ErrorCode.illegal_generation
    assert c.validate_offset_commit("missing", 3, "m", None, 9, 0) == ErrorCode.group_id_not_found
    stable_group(c, 1)
    assert c.validate_offset_commit(G, -1, "", None, 8, 0) == ErrorCode.unknown_member_id


def test_session_expiry_triggers_rebalance_and_survivor_rejoins() -> None:
    c = make()
    a, b = stable_group(c, 2)
    for t in range(1000, SESSION_MS, 1000):
        assert c.heartbeat(G, 2, a.member_id, None, t) == ErrorCode.none
        c.tick(t)
    c.tick(SESSION_MS + 1)  # b never heartbeated
    group = c.groups[G]
    assert b.member_id not in group.members
    assert group.state is GroupState.PREPARING_REBALANCE
    assert c.heartbeat(G, 2, a.member_id, None, SESSION_MS + 2) == ErrorCode.rebalance_in_progress
    ra = result(c.join_group(req(a.member_id, client="m0"), SESSION_MS + 3))
    assert ra.generation_id == 3 and ra.leader_id == a.member_id and len(ra.members) == 1


def test_rebalance_timeout_removes_members_that_do_not_rejoin() -> None:
    c = make()
    a, b = stable_group(c, 2)
    pa = c.join_group(req(a.member_id, client="m0", rebalance_ms=REBALANCE_MS), 0)
    # b keeps heartbeating (so no session expiry) but never rejoins
    for t in range(1000, REBALANCE_MS, 1000):
        c.heartbeat(G, 2, b.member_id, None, t)
        c.tick(t)
    assert not pa.done
    c.tick(REBALANCE_MS)
    assert result(pa).generation_id == 3 and b.member_id not in c.groups[G].members


def test_leave_rebalances_at_once() -> None:
    c = make()
    a, b, d = stable_group(c, 3)
    error, per_member = c.leave_group(G, [(b.member_id, None)], 5)
    assert error == ErrorCode.none and per_member == [(b.member_id, None, ErrorCode.none)]
    assert c.groups[G].state is GroupState.PREPARING_REBALANCE
    pa = c.join_group(req(a.member_id, client="m0"), 6)
    pd = c.join_group(req(d.member_id, client="m2"), 6)
    assert result(pa).generation_id == result(pd).generation_id == 3
    _, unknown = c.leave_group(G, [("ghost", None)], 7)
    assert unknown[0][2] == ErrorCode.unknown_member_id


def test_all_members_leave_group_becomes_empty_and_records_it() -> None:
    c = make()
    (a,) = stable_group(c, 1)
    c.drain_records()
    c.leave_group(G, [(a.member_id, None)], 5)
    group = c.groups[G]
    assert group.state is GroupState.EMPTY and group.generation_id == 2
    records = c.drain_records()
    assert [decode_key(r.key) for r in records] == [GroupMetadataKey(G)]
    value = records[0].value
    assert value is not None and decode_group_metadata_value(value).members == ()


def test_static_member_rejoin_keeps_assignment_without_rebalance() -> None:
    c = make(delay_ms=100)
    ps = c.join_group(req(instance="i1", client="s"), 0)
    pd = c.join_group(req(client="dyn"), 0)
    c.tick(100)
    c.tick(200)
    rs, rd = result(ps), result(pd)
    assert rs.member_id.startswith("i1-") and rs.generation_id == rd.generation_id == 1
    leader = rs if rs.members else rd
    sync(c, G, 1, leader.member_id, "i1" if leader is rs else None, None, None,
                 {rs.member_id: b"P", rd.member_id: b"D"}, 201)
    assert c.groups[G].state is GroupState.STABLE
    # the static member restarts: a new member id, same generation, same assignment, no rebalance
    restarted = result(c.join_group(req(instance="i1", client="s"), 300))
    assert restarted.error == ErrorCode.none and restarted.member_id != rs.member_id
    assert restarted.generation_id == 1 and c.groups[G].state is GroupState.STABLE
    s = sync_result(sync(c, G, 1, restarted.member_id, "i1", None, None, {}, 301))
    assert s.assignment == b"P"
    assert c.heartbeat(G, 1, rd.member_id, None, 302) == ErrorCode.none
    # the old incarnation is fenced
    assert c.heartbeat(G, 1, rs.member_id, "i1", 303) == ErrorCode.fenced_instance_id
    assert c.validate_offset_commit(G, 1, rs.member_id, "i1", 8, 0) == ErrorCode.fenced_instance_id
    _, left = c.leave_group(G, [(rs.member_id, "i1")], 304)
    assert left[0][2] == ErrorCode.fenced_instance_id
    assert c.groups[G].state is GroupState.STABLE


def test_static_member_survives_rebalance_timeout_but_not_session_timeout() -> None:
    c = make()
    s = result(c.join_group(req(instance="i1", client="s"), 0))
    sync(c, G, 1, s.member_id, "i1", None, None, {s.member_id: b""}, 0)
    c.heartbeat(G, 1, s.member_id, "i1", 9000)
    c.tick(SESSION_MS + 1)
    assert s.member_id in c.groups[G].members
    c.tick(9000 + SESSION_MS + 1)
    assert c.groups[G].state is GroupState.EMPTY


def test_fenced_static_member_pending_join_is_answered() -> None:
    c = make()
    a = result(c.join_group(req(instance="i1", client="a"), 0))
    sync(c, G, 1, a.member_id, "i1", None, None, {a.member_id: b""}, 0)
    pb = c.join_group(req(client="b"), 1)  # new dynamic member: rebalance, a must rejoin
    assert not pb.done
    pa = c.join_group(req(a.member_id, instance="i1", client="a"), 2)
    assert pa.done and pb.done  # everyone joined
    assert c.groups[G].state is GroupState.COMPLETING_REBALANCE
    # a restarts during CompletingRebalance: rebalance again; the old id is fenced
    p_new = c.join_group(req(instance="i1", client="a"), 3)
    assert c.groups[G].state is GroupState.PREPARING_REBALANCE and not p_new.done
    assert c.heartbeat(G, 2, a.member_id, "i1", 4) == ErrorCode.fenced_instance_id


def test_sync_timeout_removes_members_that_never_sync() -> None:
    c = make()
    a, b = stable_group(c, 2)
    pa = c.join_group(req(a.member_id, client="m0"), 100)
    pb = c.join_group(req(b.member_id, client="m1"), 100)
    assert pa.done and pb.done
    leader = result(pa) if result(pa).members else result(pb)
    follower = result(pb) if leader is result(pa) else result(pa)
    sync(c, G, 3, leader.member_id, None, None, None, {}, 200)
    for t in range(1000, REBALANCE_MS + 2000, 1000):
        c.heartbeat(G, 3, leader.member_id, None, t)
        c.heartbeat(G, 3, follower.member_id, None, t)
        c.tick(t)
    assert follower.member_id not in c.groups[G].members


def test_commits_are_records_and_load_restores_them() -> None:
    c = make()
    (m,) = stable_group(c, 1)
    c.drain_records()
    errors = c.commit_offsets(G, m.member_id, {("t", 0): OffsetAndMetadata(42, 3, "meta", 1000),
                                               ("t", 1): OffsetAndMetadata(7, -1, "x" * 5000, 1000)}, 1000)
    assert errors == {("t", 0): ErrorCode.none, ("t", 1): ErrorCode.offset_metadata_too_large}
    records = c.drain_records()
    assert len(records) == 1
    assert decode_key(records[0].key) == OffsetCommitKey(G, "t", 0)
    value = records[0].value
    assert value is not None
    decoded = decode_offset_commit_value(value)
    assert (decoded.offset, decoded.leader_epoch, decoded.metadata) == (42, 3, "meta")
    fresh = make()
    fresh.load_offset(G, "t", 0, decoded, 2000)
    assert fresh.committed_offsets(G)[("t", 0)].offset == 42


def test_group_metadata_load_restores_stable_group() -> None:
    c = make()
    results = stable_group(c, 2)
    group_records = [r for r in c.drain_records() if isinstance(decode_key(r.key), GroupMetadataKey)]
    value = group_records[-1].value
    assert value is not None
    fresh = make()
    fresh.load_group(G, decode_group_metadata_value(value), 100)
    group = fresh.groups[G]
    assert group.state is GroupState.STABLE and group.generation_id == 2
    assert set(group.members) == {r.member_id for r in results}
    assert fresh.heartbeat(G, 2, results[0].member_id, None, 200) == ErrorCode.none
    # members that never come back expire after their session timeout
    fresh.tick(100 + SESSION_MS + 1)
    assert fresh.groups[G].state is GroupState.PREPARING_REBALANCE


def expire(c: GroupCoordinator, now_ms: int) -> int:
    """One expiry run whose tombstones were written (the shell applies it only then)."""
    expiries = c.expire_offsets(now_ms)
    for expiry in expiries:
        c.apply_expiry(expiry, now_ms)
    return sum(len(e.partitions) for e in expiries)


def test_offset_expiry_waits_for_empty_group() -> None:
    c = make(offsets_retention_ms=60_000)
    (m,) = stable_group(c, 1)
    c.commit_offsets(G, m.member_id, {("t", 0): OffsetAndMetadata(1, -1, "", 0)}, 0)
    assert expire(c, 100_000) == 0  # stable and subscribed: kept
    c.leave_group(G, [(m.member_id, None)], 100_000)
    assert expire(c, 150_000) == 0
    assert expire(c, 160_000) == 1
    assert G not in c.groups  # empty with no offsets: gone


def test_delete_groups_and_offset_delete() -> None:
    c = make()
    (m,) = stable_group(c, 1)
    c.commit_offsets(G, m.member_id, {("t", 0): OffsetAndMetadata(1, -1, "", 0)}, 0)
    assert c.delete_groups([G, "nope"], 1) == {G: ErrorCode.non_empty_group, "nope": ErrorCode.group_id_not_found}
    c.leave_group(G, [(m.member_id, None)], 2)
    c.commit_offsets("h", "", {("t", 0): OffsetAndMetadata(1, -1, "", 0), ("u", 0): OffsetAndMetadata(2, -1, "", 0)},
                     0)
    error, per = c.delete_offsets("h", [("t", 0)], 3)
    assert error == ErrorCode.none and per == {("t", 0): ErrorCode.none}
    assert set(c.committed_offsets("h")) == {("u", 0)}
    c.drain_records()
    assert c.delete_groups([G], 4) == {G: ErrorCode.none}
    assert G not in c.groups
    tombstones = c.drain_records()
    assert all(r.value is None for r in tombstones) and len(tombstones) == 2


def test_describe_and_list() -> None:
    c = make()
    stable_group(c, 2)
    d = c.describe_group(G)
    assert d is not None and d.state is GroupState.STABLE and d.protocol_name == "range" and len(d.members) == 2
    assert all(m.assignment for m in d.members)
    c.commit_offsets("simple", "", {("t", 0): OffsetAndMetadata(1, -1, "", 0)}, 0)
    assert sorted(g for g, _, _ in c.list_groups()) == [G, "simple"]
    assert [g for g, _, _ in c.list_groups({GroupState.EMPTY})] == ["simple"]


@pytest.mark.parametrize("n", [10])
def test_many_members_one_generation(n: int) -> None:
    c = make()
    results = stable_group(c, n)
    assert {r.generation_id for r in results} == {2}
    assert len(c.groups[G].members) == n


def test_commits_do_not_count_as_heartbeats() -> None:
    c = make()
    a, b = stable_group(c, 2)
    for t in range(1000, SESSION_MS + 1000, 1000):
        c.commit_offsets(G, b.member_id, {("t", 0): OffsetAndMetadata(t, -1, "", t)}, t)
        c.heartbeat(G, 2, a.member_id, None, t)
        c.tick(t)
    assert b.member_id not in c.groups[G].members  # expired although it kept committing (Kafka 4)


def test_request_sees_expiry_without_a_tick() -> None:
    """Timers are exact: a heartbeat just after another member's session ran out already sees the
    rebalance, however rarely the shell ticks (Kafka's timer wheel behaves the same)."""
    c = make()
    a, b = stable_group(c, 2)
    c.heartbeat(G, 2, a.member_id, None, 1000)
    c.heartbeat(G, 2, b.member_id, None, 1000)
    assert c.heartbeat(G, 2, a.member_id, None, 1000 + SESSION_MS - 1) == ErrorCode.none
    # b's session expired at 1000 + SESSION_MS; no tick ran since
    assert c.heartbeat(G, 2, a.member_id, None, 1000 + SESSION_MS + 1) == ErrorCode.rebalance_in_progress
    assert b.member_id not in c.groups[G].members


def test_leader_sync_waits_for_its_record_and_a_failed_write_rebalances() -> None:
    """Kafka's classicGroupSyncToLeader: Stable, and assignments handed out, only once the record is written;
    a failed write answers every member the error and rebalances, so nobody consumes by an unstored assignment."""
    c = make(delay_ms=100)
    pa = c.join_group(req(client="a"), 0)
    pb = c.join_group(req(client="b"), 0)
    c.tick(100)
    c.tick(200)
    ra, rb = result(pa), result(pb)
    follower, leader = (rb, ra) if ra.leader_id == ra.member_id else (ra, rb)
    waiting = c.sync_group(G, 1, follower.member_id, None, None, None, {}, 201)
    assignment = {follower.member_id: b"F", leader.member_id: b"L"}
    lead = c.sync_group(G, 1, leader.member_id, None, None, None, assignment, 202)
    assert [decode_key(r.key) for r in c.drain_records()] == [GroupMetadataKey(G)]
    assert not waiting.done and not lead.done
    assert c.groups[G].state is GroupState.COMPLETING_REBALANCE
    # The follower's own (empty) write finishing first does not hand out the leader's assignment.
    c.on_assignment_stored(G, follower.member_id, 1, ErrorCode.none, 203)
    assert not waiting.done and c.groups[G].state is GroupState.COMPLETING_REBALANCE

    c.on_assignment_stored(G, leader.member_id, 1, ErrorCode.not_coordinator, 204)
    assert sync_result(waiting).error == ErrorCode.not_coordinator
    assert sync_result(lead).error == ErrorCode.not_coordinator
    group = c.groups[G]
    assert group.state is GroupState.PREPARING_REBALANCE
    assert all(m.assignment == b"" for m in group.members.values())
    # A late report of the same write changes nothing.
    c.on_assignment_stored(G, leader.member_id, 1, ErrorCode.none, 205)
    assert c.groups[G].state is GroupState.PREPARING_REBALANCE


def test_a_second_leader_sync_in_flight_hands_out_the_latest_assignment() -> None:
    c = make()
    r = result(c.join_group(req(client="solo"), 0))
    first = c.sync_group(G, 1, r.member_id, None, None, None, {r.member_id: b"old"}, 1)
    second = c.sync_group(G, 1, r.member_id, None, None, None, {r.member_id: b"new"}, 2)
    assert sync_result(first).error == ErrorCode.unknown_member_id  # replaced by the retry, as before
    c.on_assignment_stored(G, r.member_id, 1, ErrorCode.none, 3)  # the first write's report comes first
    assert sync_result(second) == SyncResult(ErrorCode.none, "consumer", "range", b"new")
    c.on_assignment_stored(G, r.member_id, 1, ErrorCode.none, 4)
    assert c.groups[G].state is GroupState.STABLE and c.groups[G].members[r.member_id].assignment == b"new"
