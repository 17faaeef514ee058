"""The pure KIP-848 coordinator: assignors, reconciliation, timers and replay, driven with now_ms."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field

from samsa.broker.group.assignors import MemberSubscription, range_assignor, uniform
from samsa.broker.group.classic_group import GroupRecord
from samsa.broker.group.consumer_coordinator import (
    ConsumerGroupConfig,
    ConsumerGroupCoordinator,
    HeartbeatRequest,
    HeartbeatResult,
)
from samsa.broker.group.consumer_group import ConsumerGroupState, MemberState
from samsa.broker.group.metadata_hash import group_hash, topic_hash
from samsa.broker.group.records import (
    CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY,
    decode_key,
    decode_target_metadata_value,
)
from samsa.kproto.errors import ErrorCode

T1 = str(uuid.UUID(int=1))
T2 = str(uuid.UUID(int=2))


@dataclass
class Topic:
    topic_id: str
    partitions: Mapping[int, object]


@dataclass
class Catalog:
    topics_by_name: dict[str, Topic] = field(default_factory=dict)

    def add(self, name: str, topic_id: str, partitions: int) -> None:
        self.topics_by_name[name] = Topic(topic_id, dict.fromkeys(range(partitions)))


def coordinator(session_ms: int = 1000) -> tuple[ConsumerGroupCoordinator, list[GroupRecord]]:
    records: list[GroupRecord] = []
    return ConsumerGroupCoordinator(ConsumerGroupConfig(session_timeout_ms=session_ms), records.append,
                                    lambda _g: False), records


def hb(c: ConsumerGroupCoordinator, catalog: Catalog, member: str, epoch: int, now: int,
       topics: tuple[str, ...] | None = None, owned: dict[str, frozenset[int]] | None = None,
       instance: str | None = None) -> HeartbeatResult:
    return c.heartbeat(HeartbeatRequest("g", member, epoch, instance, None, 5000 if epoch == 0 else -1,
                                        topics, None, None, {} if epoch == 0 else owned), catalog, now)


def test_uniform_is_balanced_and_sticky() -> None:
    subs = {m: MemberSubscription(frozenset({T1}), {}) for m in ("a", "b", "c")}
    first = uniform(subs, {T1: 7})
    sizes = sorted(len(a.get(T1, ())) for a in first.values())
    assert sizes == [2, 2, 3]
    # A fourth member takes partitions from the others; nobody else's partitions move.
    subs2 = {m: MemberSubscription(frozenset({T1}), first.get(m, {})) for m in ("a", "b", "c", "d")}
    second = uniform(subs2, {T1: 7})
    for m in ("a", "b", "c"):
        assert second[m].get(T1, frozenset()) <= first[m][T1]
    assert sorted(len(a.get(T1, ())) for a in second.values()) == [1, 2, 2, 2]
    every = [p for a in second.values() for p in a.get(T1, ())]
    assert sorted(every) == list(range(7))


def test_uniform_respects_heterogeneous_subscriptions() -> None:
    subs = {"a": MemberSubscription(frozenset({T1}), {}), "b": MemberSubscription(frozenset({T1, T2}), {})}
    out = uniform(subs, {T1: 2, T2: 2})
    assert T2 not in out["a"]
    assert out["b"][T2] == {0, 1}


def test_range_is_co_partitioned() -> None:
    subs = {m: MemberSubscription(frozenset({T1, T2}), {}) for m in ("a", "b")}
    out = range_assignor(subs, {T1: 3, T2: 3})
    assert out["a"] == {T1: {0, 1}, T2: {0, 1}} and out["b"] == {T1: {2}, T2: {2}}


def test_revocation_before_assignment_and_session_expiry() -> None:
    c, _ = coordinator()
    cat = Catalog()
    cat.add("t", T1, 4)
    a = hb(c, cat, "a", 0, 0, ("t",))
    assert a.assignment == {T1: frozenset(range(4))}
    b = hb(c, cat, "b", 0, 10, ("t",))
    assert b.assignment == {}  # everything is still a's
    group = c.groups["g"]
    assert group.members["b"].state is MemberState.UNRELEASED_PARTITIONS
    a2 = hb(c, cat, "a", a.member_epoch, 20, owned={T1: frozenset(range(4))})
    assert a2.assignment is not None and len(a2.assignment[T1]) == 2
    assert group.members["a"].state is MemberState.UNREVOKED_PARTITIONS
    # While a still reports the partitions it must give up, b gets none of them.
    b2 = hb(c, cat, "b", b.member_epoch, 30, owned={})
    assert b2.assignment is None and group.members["b"].assigned_partitions == {}
    hb(c, cat, "a", a2.member_epoch, 40, owned=a2.assignment)
    b3 = hb(c, cat, "b", b2.member_epoch, 50, owned={})
    assert b3.assignment is not None and len(b3.assignment[T1]) == 2
    assert group.state is ConsumerGroupState.STABLE
    # b stops heartbeating: after the session timeout it is fenced and a gets everything back.
    a4 = hb(c, cat, "a", group.members["a"].member_epoch, 900, owned=group.members["a"].assigned_partitions)
    c.tick(1051)
    assert "b" not in group.members
    a5 = hb(c, cat, "a", a4.member_epoch, 1060, owned=group.members["a"].assigned_partitions)
    assert a5.assignment == {T1: frozenset(range(4))}


def test_rebalance_timeout_fences_a_member_that_does_not_revoke() -> None:
    c, _ = coordinator(session_ms=60_000)
    cat = Catalog()
    cat.add("t", T1, 2)
    a = hb(c, cat, "a", 0, 0, ("t",))
    hb(c, cat, "b", 0, 0, ("t",))
    hb(c, cat, "a", a.member_epoch, 1, owned={T1: frozenset({0, 1})})  # asked to revoke one
    c.tick(5002)  # rebalance timeout (5000 ms) passed without a revoking heartbeat
    assert "a" not in c.groups["g"].members
    assert hb(c, cat, "a", a.member_epoch, 5003, owned={}).error == ErrorCode.unknown_member_id


def test_replay_rebuilds_the_group() -> None:
    c, records = coordinator()
    cat = Catalog()
    cat.add("t", T1, 3)
    a = hb(c, cat, "a", 0, 0, ("t",), instance="i-a")
    b = hb(c, cat, "b", 0, 0, ("t",))
    hb(c, cat, "a", a.member_epoch, 1, owned=a.assignment)
    hb(c, cat, "b", b.member_epoch, 2, owned={})
    before = c.groups["g"]
    replayed, _ = coordinator()
    for record in records:
        key = decode_key(record.key)
        assert key is not None and hasattr(key, "record_type")
        replayed.replay(key.record_type, key.group_id, key.member_id, record.value)  # type: ignore[union-attr]
    replayed.finish_loading(cat, 10)
    after = replayed.groups["g"]
    assert (after.group_epoch, after.assignment_epoch) == (before.group_epoch, before.assignment_epoch)
    assert after.members == before.members
    assert after.target_assignment == before.target_assignment
    assert after.static_members == {"i-a": "a"}
    assert after.partition_epochs == before.partition_epochs


def test_loading_other_partitions_does_not_hide_a_topic_change_from_a_live_group() -> None:
    c, _ = coordinator(session_ms=60_000)
    cat = Catalog()
    cat.add("t", T1, 2)
    a = hb(c, cat, "a", 0, 0, ("t",))
    epoch = c.groups["g"].group_epoch
    grown = Catalog()
    grown.add("t", T1, 3)  # partitions added; then this broker takes over another partition and replays it
    c.finish_loading(grown, 10)
    r = hb(c, grown, "a", a.member_epoch, 20, owned=a.assignment)
    assert c.groups["g"].group_epoch == epoch + 1 and r.assignment == {T1: frozenset({0, 1, 2})}


def test_a_new_group_starts_at_epoch_one_and_targets_are_batched_per_assignment_interval() -> None:
    """Kafka 4.4 (KAFKA-20268, KIP-1263): a group starts at group and target epoch 1, so its first member gets
    epoch 2; a later change waits for group.consumer.assignment.interval.ms (1000 by default) after the last
    target: until then the group is Assigning and a joining member reconciles to the last target."""
    c, records = coordinator(session_ms=60_000)
    cat = Catalog()
    cat.add("t", T1, 4)
    start = 1_000_000
    a = hb(c, cat, "a", 0, start, ("t",))
    group = c.groups["g"]
    assert a.member_epoch == 2 and a.assignment == {T1: frozenset(range(4))}
    assert (group.group_epoch, group.assignment_epoch, group.assignment_timestamp_ms) == (2, 2, start)
    b = hb(c, cat, "b", 0, start + 10, ("t",))
    assert b.member_epoch == 2 and b.assignment == {}
    assert (group.group_epoch, group.assignment_epoch) == (3, 2) and group.state is ConsumerGroupState.ASSIGNING
    # Within the interval a's heartbeat changes nothing: the target is still epoch 2's.
    a2 = hb(c, cat, "a", 2, start + 999, owned={T1: frozenset(range(4))})
    assert a2.member_epoch == 2 and a2.assignment is None and group.assignment_epoch == 2
    # Once the interval has passed, the next heartbeat computes the target for epoch 3: a revokes first.
    a3 = hb(c, cat, "a", 2, start + 1000, owned={T1: frozenset(range(4))})
    assert group.assignment_epoch == 3 and group.assignment_timestamp_ms == start + 1000
    assert a3.assignment is not None and len(a3.assignment[T1]) == 2 and a3.member_epoch == 2
    assert group.state is ConsumerGroupState.RECONCILING
    # The target metadata record carries the time it was computed (tag 0 of the value).
    target_metadata = [rec for rec in records if (k := decode_key(rec.key)) is not None
                       and getattr(k, "record_type", None) == CONSUMER_GROUP_TARGET_ASSIGNMENT_METADATA_KEY]
    assert decode_target_metadata_value(target_metadata[-1].value or b"") == (3, start + 1000)


def test_the_group_assignment_interval_overrides_the_brokers_and_zero_computes_at_once() -> None:
    records: list[GroupRecord] = []
    group_configs = {"consumer.assignment.interval.ms": "0"}
    c = ConsumerGroupCoordinator(ConsumerGroupConfig(group_configs=lambda _g: group_configs), records.append,
                                 lambda _g: False)
    cat = Catalog()
    cat.add("t", T1, 2)
    hb(c, cat, "a", 0, 5_000, ("t",))
    b = hb(c, cat, "b", 0, 5_001, ("t",))
    assert c.groups["g"].assignment_epoch == 3 and b.member_epoch == 3
    group_configs["consumer.assignment.interval.ms"] = "60000"
    hb(c, cat, "c", 0, 5_002, ("t",))
    assert (c.groups["g"].group_epoch, c.groups["g"].assignment_epoch) == (4, 3)


def test_the_last_member_leaving_brings_the_target_epoch_to_the_group_epoch() -> None:
    """Kafka 4.4 (KAFKA-20442): an emptied group has matching epochs, and its next member is assigned at once."""
    c, _ = coordinator(session_ms=60_000)
    cat = Catalog()
    cat.add("t", T1, 2)
    a = hb(c, cat, "a", 0, 1_000_000, ("t",))
    hb(c, cat, "a", -1, 1_000_001)
    group = c.groups["g"]
    assert (group.group_epoch, group.assignment_epoch, group.assignment_timestamp_ms) == (3, 3, 0)
    assert group.state is ConsumerGroupState.EMPTY
    b = hb(c, cat, "b", 0, 1_000_002, ("t",))
    assert b.member_epoch == 4 == a.member_epoch + 2 and b.assignment == {T1: frozenset({0, 1})}


def test_metadata_hash_is_kafkas() -> None:
    """KIP-1101's topic and group hashes; the expected values are what Kafka 4.4's hash4j 0.22.0 HashStream64
    (xxh3_64) gives for the same stream (magic 0, the id's longs, name, 3 partitions, rack "rackA" on partition 2)."""
    topic_id = str(uuid.UUID(int=(0x0123456789ABCDEF << 64) | ((1 << 64) - 2)))
    assert topic_hash(topic_id, "topic-é", [[], [], ["rackA"]]) == -8623688676110999755
    assert group_hash({"b": -99, "a": 12345}) == 2344557788103207415
    assert group_hash({}) == 0


def test_the_group_epoch_record_carries_the_metadata_hash_and_a_reload_sees_a_topic_change() -> None:
    """As Kafka (KIP-1101): the hash in ConsumerGroupMetadataValue survives a reload, so partitions added while
    the group was away from this coordinator still bump its epoch on the next heartbeat."""
    c, records = coordinator(session_ms=60_000)
    cat = Catalog()
    cat.add("t", T1, 2)
    a = hb(c, cat, "a", 0, 0, ("t",))
    group = c.groups["g"]
    expected = group_hash({"t": topic_hash(T1, "t", [[], []])})
    assert group.metadata_hash == expected != 0
    epoch_records = [rec for rec in records if getattr(decode_key(rec.key), "record_type", None) == 3]
    assert decode_target_metadata_value(epoch_records[-1].value or b"") == (2, expected)
    grown = Catalog()
    grown.add("t", T1, 3)
    replayed, _ = coordinator(session_ms=60_000)
    for record in records:
        key = decode_key(record.key)
        replayed.replay(key.record_type, key.group_id, key.member_id, record.value)  # type: ignore[union-attr]
    replayed.finish_loading(grown, 10)
    assert replayed.groups["g"].metadata_hash == expected
    r = hb(replayed, grown, "a", a.member_epoch, 20, owned=a.assignment)
    assert replayed.groups["g"].group_epoch == 3 and r.assignment == {T1: frozenset({0, 1, 2})}
