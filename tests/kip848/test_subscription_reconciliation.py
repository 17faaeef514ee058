"""Kafka 4.4's CurrentAssignmentBuilder: a member's subscription bounds what it may keep. A topic it no longer
subscribes to leaves its assignment at the heartbeat that changes the subscription (revoked first if it still
reports the partitions), without waiting for the next target assignment (KIP-1263 batches those); a target
computed before the change does not give it back; a partition the target returns while the member itself is
still revoking it is given at once."""

from __future__ import annotations

from samsa.broker.group.consumer_config import ConsumerGroupConfig
from samsa.broker.group.consumer_coordinator import ConsumerGroupCoordinator, HeartbeatRequest, HeartbeatResult
from samsa.broker.group.consumer_group import ConsumerGroupMember, MemberState
from samsa.broker.group.reconciliation import reconcile

from .test_consumer_coordinator import T1, T2, Catalog

ALL = {T1: frozenset({0, 1}), T2: frozenset({0, 1})}


def batched() -> ConsumerGroupCoordinator:
    # One target per minute: the heartbeats below all fall in the interval after the first target.
    return ConsumerGroupCoordinator(ConsumerGroupConfig(session_timeout_ms=600_000,
                                                        assignment_interval_ms=lambda: 60_000),
                                    lambda _r: None, lambda _g: False)


def heartbeat(c: ConsumerGroupCoordinator, catalog: Catalog, epoch: int, now: int, topics: tuple[str, ...] | None,
              owned: dict[str, frozenset[int]] | None) -> HeartbeatResult:
    return c.heartbeat(HeartbeatRequest("g", "a", epoch, None, None, 5000 if epoch == 0 else -1, topics, None, None,
                                        owned), catalog, now)


def catalog() -> Catalog:
    cat = Catalog()
    cat.add("t1", T1, 2)
    cat.add("t2", T2, 2)
    return cat


def test_an_unsubscribed_topic_is_revoked_at_once_without_a_new_target() -> None:
    c, cat = batched(), catalog()
    joined = heartbeat(c, cat, 0, 1000, ("t1", "t2"), {})
    assert joined.assignment == ALL
    epoch = joined.member_epoch
    group = c.groups["g"]
    # The member drops t2 while it still holds its partitions; no new target can be computed yet.
    r = heartbeat(c, cat, epoch, 1010, ("t1",), ALL)
    assert group.assignment_epoch == epoch < group.group_epoch
    member = group.members["a"]
    assert r.member_epoch == epoch and r.assignment == {T1: frozenset({0, 1})}
    assert member.state is MemberState.UNREVOKED_PARTITIONS
    assert member.partitions_pending_revocation == {T2: frozenset({0, 1})}
    # Once its heartbeat no longer reports them, t2's partitions are free (no owner epoch left).
    r = heartbeat(c, cat, epoch, 1020, None, {T1: frozenset({0, 1})})
    assert r.assignment is None or r.assignment == {T1: frozenset({0, 1})}
    assert group.current_partition_epoch(T2, 0) == -1 and group.current_partition_epoch(T1, 0) != -1
    assert group.members["a"].partitions_pending_revocation == {}


def test_partitions_the_member_no_longer_reports_are_dropped_without_a_revocation() -> None:
    c, cat = batched(), catalog()
    epoch = heartbeat(c, cat, 0, 1000, ("t1", "t2"), {}).member_epoch
    r = heartbeat(c, cat, epoch, 1010, ("t1",), {T1: frozenset({0, 1})})
    member = c.groups["g"].members["a"]
    assert r.assignment == {T1: frozenset({0, 1})}
    assert member.state is MemberState.STABLE and member.partitions_pending_revocation == {}
    assert c.groups["g"].current_partition_epoch(T2, 1) == -1


def test_a_target_computed_before_the_change_does_not_give_an_unsubscribed_topic_back() -> None:
    member = ConsumerGroupMember("a", member_epoch=3, previous_member_epoch=2, subscribed_topic_names=("t1",),
                                 assigned_partitions={T1: frozenset({0})})
    moved = reconcile(member, 4, ALL, lambda _t, _p: -1, {T1: frozenset({0})}, {T1})
    assert moved.member_epoch == 4 and moved.state is MemberState.STABLE
    assert moved.assigned_partitions == {T1: frozenset({0, 1})}


def test_a_partition_the_member_is_revoking_itself_is_given_back_at_once() -> None:
    # a revokes t1-1 (epoch 3, still reporting it); the next target gives it back to a.
    member = ConsumerGroupMember("a", member_epoch=3, previous_member_epoch=2, state=MemberState.UNREVOKED_PARTITIONS,
                                 subscribed_topic_names=("t1",), assigned_partitions={T1: frozenset({0})},
                                 partitions_pending_revocation={T1: frozenset({1})},
                                 assignment_epochs={(T1, 0): 2, (T1, 1): 2})
    owners = {(T1, 0): 3, (T1, 1): 3}  # both held by a itself

    def current_partition_epoch(topic_id: str, partition: int) -> int:
        return owners.get((topic_id, partition), -1)

    moved = reconcile(member, 5, {T1: frozenset({0, 1})}, current_partition_epoch, {T1: frozenset({0})}, {T1})
    assert moved.state is MemberState.STABLE and moved.member_epoch == 5
    assert moved.assigned_partitions == {T1: frozenset({0, 1})} and moved.partitions_pending_revocation == {}


def test_a_member_that_revoked_and_must_revoke_more_keeps_its_epoch() -> None:
    # a revoked t1-1 at epoch 3; meanwhile the target (epoch 6) takes t1-0 too: a is asked to revoke it, still
    # at epoch 3 (Kafka 4.4's CurrentAssignmentBuilder passes the member's epoch, not a made-up 4).
    member = ConsumerGroupMember("a", member_epoch=3, previous_member_epoch=2, state=MemberState.UNREVOKED_PARTITIONS,
                                 subscribed_topic_names=("t1",), assigned_partitions={T1: frozenset({0})},
                                 partitions_pending_revocation={T1: frozenset({1})},
                                 assignment_epochs={(T1, 0): 2, (T1, 1): 2})
    moved = reconcile(member, 6, {}, lambda _t, _p: -1, {T1: frozenset({0})}, {T1})
    assert moved.state is MemberState.UNREVOKED_PARTITIONS and moved.member_epoch == 3
    assert moved.assigned_partitions == {} and moved.partitions_pending_revocation == {T1: frozenset({0})}
