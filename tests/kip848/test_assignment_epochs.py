"""KIP-1251: an offset commit of a consumer group member is checked per partition against the epoch at which
the member was assigned it (assignment epoch <= request epoch <= member epoch), the epochs kept in
ConsumerGroupCurrentMemberAssignmentValue's AssignmentEpochs (TopicPartitions tag 0) and reloaded from it."""

from __future__ import annotations

import struct
import uuid

from samsa.broker.group.assignment_records import (
    ConsumerGroupCurrentMemberAssignmentValue,
    decode_current_member_assignment_value,
    encode_current_member_assignment_value,
)
from samsa.broker.group.classic_group import GroupRecord
from samsa.broker.group.consumer_coordinator import ConsumerGroupConfig, ConsumerGroupCoordinator, HeartbeatRequest
from samsa.broker.group.consumer_group import LEAVE_GROUP_STATIC_MEMBER_EPOCH, MemberState
from samsa.broker.group.consumer_group_records import CURRENT_ASSIGNMENT
from samsa.broker.group.records import decode_key
from samsa.kproto.errors import ErrorCode

from .test_consumer_coordinator import Catalog, hb
from .test_migration import T1, G, upgraded

OK, STALE, ILLEGAL, UNKNOWN = (ErrorCode.none, ErrorCode.stale_member_epoch, ErrorCode.illegal_generation,
                               ErrorCode.unknown_member_id)


def coordinator(records: list[GroupRecord]) -> ConsumerGroupCoordinator:
    # A new target at every heartbeat that needs one (no KIP-1263 batching), so each step is one epoch.
    return ConsumerGroupCoordinator(ConsumerGroupConfig(session_timeout_ms=10_000, assignment_interval_ms=lambda: 0),
                                    records.append, lambda _g: False)


def commit(c: ConsumerGroupCoordinator, member: str, epoch: int, partitions: list[int], version: int = 9,
           transactional: bool = False, group: str = "g") -> ErrorCode:
    return c.validate_offset_commit(group, member, None, epoch, version, 100, [(T1, p) for p in partitions],
                                    transactional)


def grown_group() -> tuple[ConsumerGroupCoordinator, list[GroupRecord], Catalog, int, int]:
    """Member a holds t-0 and t-1 from epoch e1; t grows a partition, which a gets at epoch e2 > e1."""
    records: list[GroupRecord] = []
    c = coordinator(records)
    cat = Catalog()
    cat.add("t", T1, 2)
    first = hb(c, cat, "a", 0, 0, ("t",))
    assert first.assignment == {T1: frozenset({0, 1})}
    grown = Catalog()
    grown.add("t", T1, 3)
    c.finish_loading(grown, 10)  # the image shows the new partition
    second = hb(c, grown, "a", first.member_epoch, 20, owned=first.assignment)
    assert second.assignment == {T1: frozenset({0, 1, 2})} and second.member_epoch > first.member_epoch
    return c, records, grown, first.member_epoch, second.member_epoch


def test_a_commit_at_an_older_epoch_is_accepted_for_the_partitions_the_member_held_then() -> None:
    c, _, _, e1, e2 = grown_group()
    member = c.groups["g"].members["a"]
    assert dict(member.assignment_epochs) == {(T1, 0): e1, (T1, 1): e1, (T1, 2): e2}
    assert commit(c, "a", e2, [0, 1, 2]) == OK
    # The member has not heard of e2 yet: its commit of what it held at e1 goes through ...
    assert commit(c, "a", e1, [0, 1]) == OK
    # ... but not of the partition it was given at e2, and one such partition fails the whole request.
    assert commit(c, "a", e1, [2]) == STALE
    assert commit(c, "a", e1, [0, 2]) == STALE
    # Older than the assignment, newer than the member, or a partition it does not hold: fenced.
    assert commit(c, "a", e1 - 1, [0]) == STALE
    assert commit(c, "a", e2 + 1, [0]) == STALE
    assert commit(c, "a", e1, [7]) == STALE
    assert commit(c, "nobody", e2, [0]) == UNKNOWN
    # No partitions to check: an older epoch passes (Kafka's validator has nothing to refuse).
    assert commit(c, "a", e1, []) == OK
    # TxnOffsetCommit below v6 is told ILLEGAL_GENERATION for the same refusal; v6 knows STALE_MEMBER_EPOCH.
    assert commit(c, "a", e1, [0], version=5, transactional=True) == OK
    assert commit(c, "a", e1, [2], version=5, transactional=True) == ILLEGAL
    assert commit(c, "a", e1, [2], version=6, transactional=True) == STALE


def test_revoked_partitions_keep_their_epoch_until_given_up_and_moved_ones_get_the_new_owners() -> None:
    records: list[GroupRecord] = []
    c = coordinator(records)
    cat = Catalog()
    cat.add("t", T1, 4)
    a = hb(c, cat, "a", 0, 0, ("t",))
    assert a.assignment is not None
    b = hb(c, cat, "b", 0, 10, ("t",))
    a2 = hb(c, cat, "a", a.member_epoch, 20, owned=a.assignment)
    group = c.groups["g"]
    member_a = group.members["a"]
    assert member_a.state is MemberState.UNREVOKED_PARTITIONS and a2.assignment is not None
    revoking = sorted(member_a.partitions_pending_revocation[T1])
    kept = sorted(a2.assignment[T1])
    # Partitions pending revocation are still the member's, at the epoch it got them.
    assert all(member_a.assignment_epochs[(T1, p)] == a.member_epoch for p in revoking + kept)
    assert commit(c, "a", a.member_epoch, revoking + kept) == OK
    a3 = hb(c, cat, "a", a2.member_epoch, 30, owned=a2.assignment)  # revoked: a moves to the new epoch
    assert a3.member_epoch > a.member_epoch
    assert commit(c, "a", a.member_epoch, kept) == OK
    assert commit(c, "a", a.member_epoch, revoking) == STALE
    b2 = hb(c, cat, "b", b.member_epoch, 40, owned={})
    assert b2.assignment == {T1: frozenset(revoking)}
    member_b = group.members["b"]
    assert {member_b.assignment_epochs[(T1, p)] for p in revoking} == {member_b.member_epoch}
    assert commit(c, "b", member_b.member_epoch, revoking) == OK
    assert commit(c, "b", member_b.member_epoch - 1, revoking) == STALE


def test_assignment_epochs_are_written_in_kafkas_format_and_survive_a_reload() -> None:
    c, records, grown, e1, e2 = grown_group()
    last = [r for r in records if (k := decode_key(r.key)) is not None
            and getattr(k, "record_type", None) == CURRENT_ASSIGNMENT][-1]
    assert last.value is not None
    # Version 0, epochs, state, one topic: id, partitions 0-2, one tagged field (tag 0: the epochs), no tags.
    expected = (struct.pack(">hiib", 0, e2, e1, 0) + b"\x02" + uuid.UUID(T1).bytes + b"\x04"
                + struct.pack(">iii", 0, 1, 2) + b"\x01\x00\x0d\x04" + struct.pack(">iii", e1, e1, e2)
                + b"\x01" + b"\x00")
    assert last.value == expected
    reloaded = coordinator([])
    for record in records:
        key = decode_key(record.key)
        assert key is not None and hasattr(key, "record_type")
        reloaded.replay(key.record_type, key.group_id, key.member_id, record.value)  # type: ignore[union-attr]
    reloaded.finish_loading(grown, 50)
    assert reloaded.groups["g"].members == c.groups["g"].members
    assert commit(reloaded, "a", e1, [0, 1]) == OK
    assert commit(reloaded, "a", e1, [2]) == STALE


def test_a_record_without_assignment_epochs_reads_as_assigned_at_the_member_epoch() -> None:
    # Kafka 4.1's (and Samsa's before KIP-1251) record: no tagged field in TopicPartitions.
    old = (struct.pack(">hiib", 0, 5, 4, 0) + b"\x02" + uuid.UUID(T1).bytes + b"\x03" + struct.pack(">ii", 0, 1)
           + b"\x00" + b"\x01" + b"\x00")
    value = decode_current_member_assignment_value(old)
    assert value.assigned_partitions == {T1: frozenset({0, 1})}
    assert dict(value.assignment_epochs) == {(T1, 0): 5, (T1, 1): 5}
    # A static member away (-2) reads as assigned at 0, never below.
    away = decode_current_member_assignment_value(struct.pack(">hiib", 0, -2, 4, 0) + old[11:])
    assert dict(away.assignment_epochs) == {(T1, 0): 0, (T1, 1): 0}
    # A list of the wrong length is ignored the same way (Kafka logs it and uses the default).
    bad = encode_current_member_assignment_value(ConsumerGroupCurrentMemberAssignmentValue(
        5, 4, 0, {T1: frozenset({0, 1})}, {}, {(T1, 0): 3, (T1, 1): 3}))
    truncated = bad.replace(b"\x01\x00\x09\x03" + struct.pack(">ii", 3, 3), b"\x01\x00\x05\x02" + struct.pack(">i", 3))
    assert truncated != bad
    assert dict(decode_current_member_assignment_value(truncated).assignment_epochs) == {(T1, 0): 5, (T1, 1): 5}
    # Pending revocation partitions carry theirs too.
    both = ConsumerGroupCurrentMemberAssignmentValue(7, 6, 1, {T1: frozenset({0})}, {T1: frozenset({1})},
                                                     {(T1, 0): 2, (T1, 1): 6})
    assert decode_current_member_assignment_value(encode_current_member_assignment_value(both)) == both


def test_a_static_member_that_leaves_holds_its_partitions_at_epoch_zero() -> None:
    records: list[GroupRecord] = []
    c = coordinator(records)
    cat = Catalog()
    cat.add("t", T1, 2)
    a = hb(c, cat, "a", 0, 0, ("t",), instance="i-a")
    assert a.assignment == {T1: frozenset({0, 1})}
    away = hb(c, cat, "a", LEAVE_GROUP_STATIC_MEMBER_EPOCH, 10, instance="i-a")
    assert away.error == OK
    member = c.groups["g"].members["a"]
    assert member.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH
    assert dict(member.assignment_epochs) == {(T1, 0): 0, (T1, 1): 0}
    # The instance comes back under a new member id and keeps its partitions, still assigned at epoch 0.
    back = c.heartbeat(HeartbeatRequest("g", "a2", 0, "i-a", None, 5000, ("t",), None, None, {}), cat, 20)
    assert back.error == OK and back.assignment == {T1: frozenset({0, 1})}
    member = c.groups["g"].members["a2"]
    assert dict(member.assignment_epochs) == {(T1, 0): 0, (T1, 1): 0}
    assert commit(c, "a2", member.member_epoch, [0, 1]) == OK
    assert commit(c, "a2", 1, [0, 1]) == OK  # any epoch up to the member's
    assert commit(c, "a", a.member_epoch, [0]) == UNKNOWN  # the replaced member id is gone


def test_a_fenced_member_can_no_longer_commit() -> None:
    c, _, _, e1, e2 = grown_group()
    c.tick(20 + 10_000)  # no heartbeat for a session: a is fenced and removed
    assert "a" not in c.groups["g"].members
    assert commit(c, "a", e2, [0]) == UNKNOWN
    assert commit(c, "a", e1, [0]) == UNKNOWN
    # The group is empty: an administrative commit (-1, no member) goes through.
    assert commit(c, "", -1, [0]) == OK


def test_classic_members_of_a_consumer_group_commit_with_an_older_generation_per_partition() -> None:
    """The differential scenario consumer_group_online_upgrade's step: a classic member whose partitions were
    converted at generation 1 rejoins at generation 2 and commits with generation 1 (Kafka 4.4: NONE)."""
    c, a, _ = upgraded()
    group = c.consumer.groups[G]
    assert dict(group.members[a].assignment_epochs) == {(T1, 0): 1, (T1, 1): 1}  # converted at generation 1
    assert c.consumer.classic_heartbeat(G, 1, a, None, 20) == ErrorCode.rebalance_in_progress
    joined = c.classic_join(a, [0, 1], 30)
    error, kept = c.classic_sync(a, joined.generation_id, 31)
    assert error == OK and len(kept) == 1
    given = sorted({0, 1} - set(kept))
    again = c.classic_join(a, kept, 40)
    assert again.generation_id == 2 and c.classic_sync(a, 2, 41) == (OK, kept)
    validate = c.consumer.validate_offset_commit
    assert validate(G, a, None, 2, 8, 42, [(T1, p) for p in kept]) == OK
    assert validate(G, a, None, 1, 8, 42, [(T1, p) for p in kept]) == OK  # assigned at 1 <= 1 <= 2
    assert validate(G, a, None, 1, 8, 42, [(T1, p) for p in given]) == ILLEGAL  # no longer a's
    assert validate(G, a, None, 0, 8, 42, [(T1, p) for p in kept]) == ILLEGAL  # older than the assignment
    assert validate(G, a, None, 3, 8, 42, [(T1, p) for p in kept]) == ILLEGAL  # newer than the member
    assert validate(G, a, None, 1, 5, 42, [(T1, p) for p in kept], True) == OK  # TxnOffsetCommit alike
    assert validate(G, a, None, 1, 5, 42, [(T1, p) for p in given], True) == ILLEGAL
