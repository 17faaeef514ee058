"""KIP-848's online migration, on the pure coordinators: a classic group upgraded by a consumer-protocol member,
classic members working inside a consumer group, the downgrade when the last consumer-protocol member goes,
the records that make a restart reload a mixed group, and the migration policy."""

from __future__ import annotations

import random
import struct
import uuid

from samsa.broker.group import consumer_group_records as cg_records
from samsa.broker.group import migration
from samsa.broker.group.classic_group import GroupRecord, JoinRequest, JoinResult, OffsetAndMetadata, SyncResult
from samsa.broker.group.consumer_coordinator import ConsumerGroupConfig, ConsumerGroupCoordinator, HeartbeatRequest
from samsa.broker.group.consumer_group import MemberState
from samsa.broker.group.consumer_protocol import assigned_partitions, encode_assignment, parse_subscription
from samsa.broker.group.coordinator import GroupConfig, GroupCoordinator
from samsa.broker.group.records import (
    GROUP_METADATA_KEY,
    ConsumerGroupKey,
    ConsumerGroupMemberMetadataValue,
    GroupMetadataKey,
    decode_group_metadata_value,
    decode_key,
    decode_member_metadata_value,
    encode_member_metadata_value,
)
from samsa.broker.group.state import GroupState
from samsa.kproto.errors import ErrorCode

from .test_consumer_coordinator import Catalog

T1 = str(uuid.UUID(int=1))
G = "g"
SESSION_MS = 10_000
REBALANCE_MS = 20_000


def subscription(topics: list[str], owned: list[tuple[str, list[int]]] | None = None, version: int = 1) -> bytes:
    """ConsumerProtocolSubscription v0/v1 bytes (v1 adds the owned partitions, as a cooperative consumer sends)."""
    out = [struct.pack(">hi", version, len(topics))]
    out += [struct.pack(">h", len(t)) + t.encode() for t in topics]
    out.append(struct.pack(">i", -1))
    if version >= 1:
        owned = owned or []
        out.append(struct.pack(">i", len(owned)))
        for t, ps in owned:
            out.append(struct.pack(">h", len(t)) + t.encode() + struct.pack(">i", len(ps)))
            out += [struct.pack(">i", p) for p in ps]
    return b"".join(out)


class Cluster:
    """The two coordinators wired as GroupService wires them (one record list, migration callbacks)."""

    def __init__(self, policy: migration.MigrationPolicy = migration.MigrationPolicy.BIDIRECTIONAL) -> None:
        self.classic = GroupCoordinator(GroupConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=1),
                                        random.Random(7))
        self.catalog = Catalog()
        self.catalog.add("t", T1, 2)
        self.policy = policy
        self.consumer = ConsumerGroupCoordinator(
            ConsumerGroupConfig(session_timeout_ms=SESSION_MS), self.classic.emit, self._in_use,
            lambda gid, cat, now: migration.upgrade(self.classic, self.consumer, gid, cat, self.policy, now),
            lambda group, leaving, now: migration.downgrade(self.classic, self.consumer, group, leaving,
                                                            self.catalog, self.policy, now))

    def _in_use(self, group_id: str) -> bool:
        group = self.classic.groups.get(group_id)
        return group is not None and bool(group.members) and group_id not in self.consumer.groups

    def records(self) -> list[GroupRecord]:
        return self.classic.drain_records()

    def join_request(self, member_id: str, owned: list[tuple[str, list[int]]] | None = None,
                     protocols: tuple[str, ...] = ("range",)) -> JoinRequest:
        meta = subscription(["t"], owned)
        return JoinRequest(G, member_id, None, "client", "/127.0.0.1", SESSION_MS, REBALANCE_MS, "consumer",
                           tuple((p, meta) for p in protocols), require_known_member_id=False)

    # The classic member as a classic group knows it, until the upgrade.
    def classic_group_of_one(self, now: int) -> str:
        pending = self.classic.join_group(self.join_request(""), now)
        self.classic.tick(now + 1)
        joined = pending.result
        assert joined is not None and joined.error == ErrorCode.none and joined.generation_id == 1
        assignment = encode_assignment(1, [("t", [0, 1])])
        sync = self.classic.sync_group(G, 1, joined.member_id, None, "consumer", "range",
                                       {joined.member_id: assignment}, now + 2)
        self.classic.on_assignment_stored(G, joined.member_id, 1, ErrorCode.none, now + 2)
        assert sync.result == SyncResult(ErrorCode.none, "consumer", "range", assignment)
        return joined.member_id

    def consumer_join(self, member_id: str, now: int) -> int:
        result = self.consumer.heartbeat(HeartbeatRequest(G, member_id, 0, None, None, REBALANCE_MS, ("t",), None,
                                                          None, {}), self.catalog, now)
        assert result.error == ErrorCode.none, result
        return result.member_epoch

    def consumer_heartbeat(self, member_id: str, epoch: int, owned: dict[str, frozenset[int]], now: int
                           ) -> tuple[int, frozenset[int] | None]:
        result = self.consumer.heartbeat(HeartbeatRequest(G, member_id, epoch, None, None, -1, None, None, None,
                                                          owned), self.catalog, now)
        assert result.error == ErrorCode.none, result
        return result.member_epoch, None if result.assignment is None else result.assignment.get(T1, frozenset())

    def classic_join(self, member_id: str, owned: list[int], now: int) -> JoinResult:
        return self.consumer.classic_join(self.join_request(member_id, [("t", owned)] if owned else []),
                                          self.catalog, now)

    def classic_sync(self, member_id: str, generation: int, now: int) -> tuple[ErrorCode, list[int]]:
        result = self.consumer.classic_sync(G, generation, member_id, None, "consumer", "range", self.catalog, now)
        parts = assigned_partitions(result.assignment) or []
        return result.error, sorted(p for _, ps in parts for p in ps)


def upgraded(now: int = 0) -> tuple[Cluster, str, int]:
    """A classic member A owning t-0 and t-1, then consumer member B joins: the group is upgraded."""
    c = Cluster()
    a = c.classic_group_of_one(now)
    c.records()
    b_epoch = c.consumer_join("B", now + 10)
    return c, a, b_epoch


def test_a_consumer_member_upgrades_a_classic_group_and_the_classic_member_hands_over_by_rejoining() -> None:
    c, a, b_epoch = upgraded()
    group = c.consumer.groups[G]
    assert b_epoch == 2 and group.group_epoch == 2
    member_a = group.members[a]
    assert member_a.classic is not None and member_a.classic.session_timeout_ms == SESSION_MS
    assert member_a.member_epoch == 1 and member_a.assigned_partitions == {T1: frozenset({0, 1})}
    # The classic group keeps only its id (and offsets); its record is tombstoned.
    assert not c.classic.groups[G].members
    # B must wait: A still holds what the new target gives B.
    b = group.members["B"]
    assert b.assigned_partitions == {} and b.state is MemberState.UNRELEASED_PARTITIONS
    # A learns of the rebalance from its heartbeat, rejoins owning both, and is told to keep only one.
    assert c.consumer.classic_heartbeat(G, 1, a, None, 20) == ErrorCode.rebalance_in_progress
    joined = c.classic_join(a, [0, 1], 30)
    assert (joined.error, joined.generation_id, joined.protocol_name, joined.leader_id) == (
        ErrorCode.none, 1, "range", "")
    error, kept = c.classic_sync(a, 1, 31)
    assert error == ErrorCode.none and len(kept) == 1
    given = {0, 1} - set(kept)
    # Until A gives the other partition up, B gets nothing and A is asked to rejoin.
    assert c.consumer_heartbeat("B", 2, {}, 32)[1] in (None, frozenset())
    assert c.consumer.classic_heartbeat(G, 1, a, None, 33) == ErrorCode.rebalance_in_progress
    joined = c.classic_join(a, kept, 40)
    assert (joined.error, joined.generation_id) == (ErrorCode.none, 2)
    assert c.classic_sync(a, 2, 41) == (ErrorCode.none, kept)
    assert c.consumer.classic_heartbeat(G, 2, a, None, 42) == ErrorCode.none
    assert c.consumer_heartbeat("B", 2, {}, 43) == (2, frozenset(given))
    assert c.consumer.groups[G].members[a].state is MemberState.STABLE


def test_upgrade_records_are_kafkas_and_replay_to_the_same_mixed_group() -> None:
    c = Cluster()
    a = c.classic_group_of_one(0)
    c.classic.commit_offsets(G, a, {("t", 0): OffsetAndMetadata(5, -1, "", 0)}, 1)
    log = c.records()
    c.consumer_join("B", 10)
    records = c.records()
    keys = [decode_key(r.key) for r in records]
    # The classic group's tombstone first, then the consumer group's records (Kafka's convertToConsumerGroup).
    assert keys[0] == GroupMetadataKey(G) and records[0].value is None
    assert keys[1] == ConsumerGroupKey(cg_records.MEMBER_METADATA, G, a)
    assert decode_member_metadata_value(records[1].value or b"").classic == (
        SESSION_MS, (("range", subscription(["t"], [])),))
    # Replayed into fresh coordinators (a restart, or another broker taking the partition over).
    fresh = Cluster()
    for record in log + records:
        key = decode_key(record.key)
        if isinstance(key, ConsumerGroupKey):
            fresh.consumer.replay(key.record_type, key.group_id, key.member_id, record.value)
        elif isinstance(key, GroupMetadataKey):
            fresh.classic.load_group(key.group_id, None if record.value is None
                                     else decode_group_metadata_value(record.value), 100)
        else:
            from samsa.broker.group.records import OffsetCommitKey, decode_offset_commit_value
            assert isinstance(key, OffsetCommitKey)
            fresh.classic.load_offset(key.group_id, key.topic, key.partition,
                                      None if record.value is None else decode_offset_commit_value(record.value), 100)
    fresh.classic.finish_loading(100)
    fresh.consumer.finish_loading(fresh.catalog, 100)
    assert fresh.consumer.groups[G].members == c.consumer.groups[G].members
    assert fresh.classic.committed_offsets(G)[("t", 0)].offset == 5  # the tombstone kept the offsets
    assert not fresh.classic.groups[G].members
    # The reloaded classic member goes on heartbeating at its generation.
    assert fresh.consumer.classic_heartbeat(G, 1, a, None, 110) == ErrorCode.rebalance_in_progress


def test_member_metadata_value_round_trips_the_classic_tag() -> None:
    value = ConsumerGroupMemberMetadataValue("i", None, "c", "/h", ("a", "b"), None, 300, None,
                                             (45000, (("range", b"\x00\x01"), ("cooperative-sticky", b""))))
    assert decode_member_metadata_value(encode_member_metadata_value(value)) == value
    plain = ConsumerGroupMemberMetadataValue(None, None, "c", "/h", ("a",), "re.*", -1, "uniform")
    data = encode_member_metadata_value(plain)
    assert data.endswith(b"\x00") and decode_member_metadata_value(data) == plain


def test_the_last_consumer_member_leaving_downgrades_the_group() -> None:
    c, a, _ = upgraded()
    c.records()
    target = sorted(c.consumer.groups[G].target_assignment[a][T1])
    assert len(target) == 1  # B's join gave B the other partition
    left = c.consumer.heartbeat(HeartbeatRequest(G, "B", -1, None, None, -1, None, None, None, None), c.catalog, 50)
    assert left.error == ErrorCode.none and left.member_epoch == -1
    assert G not in c.consumer.groups
    classic = c.classic.groups[G]
    assert classic.state is GroupState.PREPARING_REBALANCE and list(classic.members) == [a]
    assert classic.generation_id == 2 and classic.protocol_name == "range" and classic.leader_id == a
    records = c.records()
    keys = [decode_key(r.key) for r in records]
    # Every consumer group record tombstoned, then the classic group's record (Kafka's convertToClassicGroup).
    assert all(r.value is None for r in records[:-1]) and keys[-1] == GroupMetadataKey(G)
    assert {k.record_type for k in keys[:-1] if isinstance(k, ConsumerGroupKey)} == {3, 4, 5, 6, 7, 8}
    stored = decode_group_metadata_value(records[-1].value or b"")
    assert stored.generation_id == 2 and [m.member_id for m in stored.members] == [a]
    # A's target assignment, as Kafka's fromConsumerGroup writes it (the next rebalance gives A the rest).
    assert assigned_partitions(stored.members[0].assignment) == [("t", target)]
    assert records[-1].key[:2] == struct.pack(">h", GROUP_METADATA_KEY)
    # A is told to rejoin, and the classic rebalance completes with A alone.
    assert c.classic.heartbeat(G, 2, a, None, 60) == ErrorCode.rebalance_in_progress
    pending = c.classic.join_group(c.join_request(a, [("t", [0, 1])]), 61)
    c.classic.tick(62)
    assert pending.result is not None and (pending.result.error, pending.result.generation_id,
                                           pending.result.leader_id) == (ErrorCode.none, 3, a)


def test_downgrade_and_upgrade_obey_the_migration_policy() -> None:
    c = Cluster(migration.MigrationPolicy.DOWNGRADE)
    c.classic_group_of_one(0)
    refused = c.consumer.heartbeat(HeartbeatRequest(G, "B", 0, None, None, REBALANCE_MS, ("t",), None, None, {}),
                                   c.catalog, 10)
    assert (refused.error, refused.error_message) == (ErrorCode.group_id_not_found,
                                                      f"Group {G} is not a consumer group")
    assert G not in c.consumer.groups and len(c.classic.groups[G].members) == 1

    c, a, _ = upgraded()
    c.policy = migration.MigrationPolicy.UPGRADE
    c.consumer.heartbeat(HeartbeatRequest(G, "B", -1, None, None, -1, None, None, None, None), c.catalog, 50)
    group = c.consumer.groups[G]  # still a consumer group, now of one classic member
    assert list(group.members) == [a] and group.group_epoch == 3
    assert migration.MigrationPolicy.parse(" Disabled ") is migration.MigrationPolicy.DISABLED


def test_classic_member_timers_in_a_consumer_group() -> None:
    c, a, _ = upgraded()
    # Told to rejoin, A has its rebalance timeout to do so; it does not, and is fenced (B is left alone).
    assert c.consumer.classic_heartbeat(G, 1, a, None, 20) == ErrorCode.rebalance_in_progress
    for now in range(5000, REBALANCE_MS, 5000):  # both keep their sessions; A's heartbeats do not reset the timer
        assert c.consumer.classic_heartbeat(G, 1, a, None, now) == ErrorCode.rebalance_in_progress
        c.consumer_heartbeat("B", 2, {}, now)
    c.consumer.tick(20 + REBALANCE_MS - 1)
    assert a in c.consumer.groups[G].members
    c.consumer.tick(20 + REBALANCE_MS)
    assert list(c.consumer.groups[G].members) == ["B"]
    # A classic member's session is its own (SESSION_MS here, the group's default for B is SESSION_MS too, so
    # check the deadline it is given directly).
    c2, a2, _ = upgraded()
    c2.consumer.classic_heartbeat(G, 1, a2, None, 100)
    assert c2.consumer.groups[G].session_deadlines_ms[a2] == 100 + SESSION_MS


def test_classic_requests_to_a_consumer_group_are_validated_as_kafka_does() -> None:
    c, a, _ = upgraded()
    assert c.consumer.classic_heartbeat(G, 7, a, None, 20) == ErrorCode.illegal_generation
    assert c.consumer.classic_heartbeat(G, 2, "B", None, 20) == ErrorCode.unknown_member_id  # consumer protocol
    assert c.consumer.classic_heartbeat(G, 1, "nobody", None, 20) == ErrorCode.unknown_member_id
    # SyncGroup before rejoining a newer epoch: rejoin first.
    assert c.classic_sync(a, 1, 21)[0] == ErrorCode.rebalance_in_progress
    wrong = c.consumer.classic_sync(G, 1, a, None, "consumer", "roundrobin", c.catalog, 22)
    assert wrong.error == ErrorCode.inconsistent_group_protocol
    # A joining member must share a protocol with the classic members.
    odd = c.consumer.classic_join(c.join_request("", protocols=("roundrobin",)), c.catalog, 23)
    assert odd.error == ErrorCode.inconsistent_group_protocol
    other = c.consumer.classic_join(JoinRequest(G, "", None, "c", "/h", SESSION_MS, REBALANCE_MS, "connect",
                                                (("range", b""),)), c.catalog, 23)
    assert other.error == ErrorCode.inconsistent_group_protocol
    # JoinGroup v4+: the member id first.
    required = c.consumer.classic_join(JoinRequest(G, "", None, "c", "/h", SESSION_MS, REBALANCE_MS, "consumer",
                                                   (("range", subscription(["t"])),)), c.catalog, 24)
    assert required.error == ErrorCode.member_id_required and required.member_id
    # Offsets: a classic member commits with its generation, any OffsetCommit version; an older one is refused for a
    # partition assigned after it (KIP-1251: A's partitions were assigned at generation 1).
    validate = c.consumer.validate_offset_commit
    t0 = [(T1, 0)]
    assert validate(G, a, None, 1, 2, 25, t0) == ErrorCode.none
    assert validate(G, a, None, 0, 8, 25, t0) == ErrorCode.illegal_generation
    assert validate(G, "B", None, 2, 8, 25, t0) == ErrorCode.unsupported_version
    # TxnOffsetCommit (Kafka's validateTransactionalOffsetCommit): any version, a stale epoch is ILLEGAL_GENERATION
    # below v6, and a producer's commit without the group's membership (-1, no member id) is not checked.
    assert validate(G, "B", None, 2, 5, 25, t0, transactional=True) == ErrorCode.none
    assert validate(G, "B", None, 1, 5, 25, t0, transactional=True) == ErrorCode.illegal_generation
    assert validate(G, "B", None, 1, 6, 25, t0, transactional=True) == ErrorCode.stale_member_epoch
    assert validate(G, "", None, -1, 5, 25, t0, transactional=True) == ErrorCode.none
    assert validate(G, "", "i", -1, 5, 25, t0, transactional=True) == ErrorCode.unknown_member_id
    # LeaveGroup: only classic members; the epoch is bumped once.
    epoch = c.consumer.groups[G].group_epoch
    results = c.consumer.classic_leave(G, [("B", None), (a, None), ("nobody", None)], c.catalog)
    assert results == [("B", None, ErrorCode.unknown_member_id), (a, None, ErrorCode.none),
                       ("nobody", None, ErrorCode.unknown_member_id)]
    assert list(c.consumer.groups[G].members) == ["B"] and c.consumer.groups[G].group_epoch == epoch + 1


def test_subscription_parsing_reads_every_version() -> None:
    v0 = parse_subscription(subscription(["a", "b"], version=0))
    assert v0 is not None and (v0.version, v0.topics, v0.owned_partitions) == (0, ("a", "b"), ())
    v1 = parse_subscription(subscription(["a"], [("a", [2, 3])]))
    assert v1 is not None and v1.owned_partitions == (("a", (2, 3)),)
    v3 = parse_subscription(subscription(["a"], [("a", [1])], version=3) + struct.pack(">ih", 4, 2) + b"r1")
    assert v3 is not None and v3.rack_id == "r1" and v3.owned_partitions == (("a", (1,)),)
    assert parse_subscription(b"\x00") is None


def test_a_group_with_a_malformed_subscription_is_not_upgraded() -> None:
    c = Cluster()
    c.classic_group_of_one(0)
    group = c.classic.groups[G]
    member = next(iter(group.members.values()))
    member.protocols = (("range", b"\x00"),)
    assert migration.consumer_group_from_classic(group, c.catalog) is None
    refused = c.consumer.heartbeat(HeartbeatRequest(G, "B", 0, None, None, REBALANCE_MS, ("t",), None, None, {}),
                                   c.catalog, 10)
    assert refused.error == ErrorCode.group_id_not_found
    assert G not in c.consumer.groups and len(c.classic.groups[G].members) == 1


def test_a_classic_static_member_replacing_the_last_consumer_member_downgrades_without_a_rebalance() -> None:
    c = Cluster()
    a = c.classic_group_of_one(0)
    joined = c.consumer.heartbeat(HeartbeatRequest(G, "S", 0, "inst", None, REBALANCE_MS, ("t",), None, None, {}),
                                  c.catalog, 10)
    assert joined.error == ErrorCode.none and G in c.consumer.groups
    target_of_s = c.consumer.groups[G].target_assignment["S"]
    c.records()
    meta = subscription(["t"])
    replacing = JoinRequest(G, "", "inst", "client", "/127.0.0.1", SESSION_MS, REBALANCE_MS, "consumer",
                            (("range", meta),))
    result = c.consumer.classic_join(replacing, c.catalog, 20)
    assert result.error == ErrorCode.none and result.member_id and result.member_id != "S"
    # The group is a classic group now, Stable: no rebalance; the newcomer holds S's target assignment.
    assert G not in c.consumer.groups
    classic = c.classic.groups[G]
    assert classic.state is GroupState.STABLE and set(classic.members) == {a, result.member_id}
    assert classic.static_members == {"inst": result.member_id}
    new = classic.members[result.member_id]
    assert assigned_partitions(new.assignment) == [("t", sorted(target_of_s[T1]))]
    assert all(m.heartbeat_deadline_ms == 20 + SESSION_MS for m in classic.members.values())
    records = c.records()
    assert decode_key(records[-1].key) == GroupMetadataKey(G) and records[-1].value is not None
    # The newcomer syncs as any member of a Stable classic group and gets that assignment.
    synced = c.classic.sync_group(G, classic.generation_id, result.member_id, "inst", "consumer", "range", {}, 21)
    assert synced.result is not None and synced.result.assignment == new.assignment


def test_a_consumer_static_member_takes_a_classic_static_members_place_at_once() -> None:
    """A rolling upgrade with group.instance.id: the classic static member does not leave when it stops; its
    consumer-protocol successor takes its place at once (Kafka checks UNRELEASED_INSTANCE_ID only between two
    consumer-protocol members)."""
    c = Cluster()
    meta = subscription(["t"])
    static = JoinRequest(G, "", "inst", "client", "/127.0.0.1", SESSION_MS, REBALANCE_MS, "consumer",
                         (("range", meta),), require_known_member_id=False)
    pending = c.classic.join_group(static, 0)
    c.classic.tick(1)
    old = pending.result
    assert old is not None and old.error == ErrorCode.none
    c.classic.sync_group(G, 1, old.member_id, "inst", "consumer", "range",
                         {old.member_id: encode_assignment(1, [("t", [0, 1])])}, 2)
    c.classic.on_assignment_stored(G, old.member_id, 1, ErrorCode.none, 2)
    joined = c.consumer.heartbeat(HeartbeatRequest(G, "new", 0, "inst", None, REBALANCE_MS, ("t",), None, None, {}),
                                  c.catalog, 10)
    assert joined.error == ErrorCode.none and joined.assignment == {T1: frozenset({0, 1})}
    group = c.consumer.groups[G]
    assert list(group.members) == ["new"] and group.members["new"].classic is None
    assert group.static_members == {"inst": "new"}


def test_an_upgrade_that_would_overfill_the_group_is_not_made() -> None:
    c = Cluster()
    c.consumer.config = ConsumerGroupConfig(session_timeout_ms=SESSION_MS, max_size=1)
    c.classic_group_of_one(0)
    refused = c.consumer.heartbeat(HeartbeatRequest(G, "B", 0, None, None, REBALANCE_MS, ("t",), None, None, {}),
                                   c.catalog, 10)
    assert refused.error == ErrorCode.group_max_size_reached
    assert G not in c.consumer.groups and len(c.classic.groups[G].members) == 1
