"""The KIP-1071 streams-group coordinator, as a pure state machine: topology configuration, the sticky
task assignor, revocation before assignment, leaving, fencing and timers (answers checked against
Kafka 4.4.0's, see compat-tests/differential/kip1071.py for the wire-level comparison)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

from samsa.broker.group.streams_assignor import AssignmentMember, assign
from samsa.broker.group.streams_config import StreamsGroupConfig
from samsa.broker.group.streams_coordinator import StreamsGroupCoordinator, StreamsHeartbeatRequest
from samsa.broker.group.streams_group import (
    StreamsGroupState,
    StreamsStatus,
    Subtopology,
    TasksTuple,
    TopicInfo,
    Topology,
)
from samsa.broker.group.streams_topology import configure
from samsa.kproto.errors import ErrorCode


@dataclass
class Topic:
    topic_id: str
    partitions: dict[int, object]


@dataclass
class Catalog:
    topics_by_name: dict[str, Topic] = field(default_factory=dict)

    def add(self, name: str, partitions: int) -> None:
        self.topics_by_name[name] = Topic(str(uuid.uuid5(uuid.NAMESPACE_DNS, name)), dict.fromkeys(range(partitions)))


# Word count: subtopology 0 reads the input and writes a repartition topic; 1 counts (a changelog).
TOPOLOGY = Topology(0, (
    Subtopology("0", source_topics=("in",), repartition_sink_topics=("app-rep",)),
    Subtopology("1", repartition_source_topics=(TopicInfo("app-rep"),),
                state_changelog_topics=(TopicInfo("app-changelog"),)),
))
NO_TASKS = TasksTuple()


def join(member: str, process: str = "", topology: Topology = TOPOLOGY, **kw: object) -> StreamsHeartbeatRequest:
    return StreamsHeartbeatRequest("app", member, 0, rebalance_timeout_ms=30_000, topology=topology,
                                   owned=NO_TASKS, process_id=process or member, **kw)  # type: ignore[arg-type]


def beat(member: str, epoch: int, owned: TasksTuple | None = NO_TASKS) -> StreamsHeartbeatRequest:
    return StreamsHeartbeatRequest("app", member, epoch, owned=owned)


def coordinator(**kw: int) -> StreamsGroupCoordinator:
    config = StreamsGroupConfig(initial_rebalance_delay_ms=kw.get("delay", 0),
                                assignment_interval_ms=kw.get("interval", 0),
                                num_standby_replicas=kw.get("standbys", 0))
    return StreamsGroupCoordinator(config, lambda _g: False)


def ready_catalog() -> Catalog:
    catalog = Catalog()
    for name in ("in", "app-rep", "app-changelog"):
        catalog.add(name, 4)
    return catalog


ALL = {"0": frozenset(range(4)), "1": frozenset(range(4))}


def test_configure_reports_missing_source_then_internal_topics_with_their_partitions() -> None:
    catalog = Catalog()
    count = lambda t: len(catalog.topics_by_name[t].partitions) if t in catalog.topics_by_name else None  # noqa: E731
    missing = configure(TOPOLOGY, count)
    assert not missing.ready
    assert missing.status == (StreamsStatus.MISSING_SOURCE_TOPICS, "Source topics in are missing.")
    catalog.add("in", 3)
    internal = configure(TOPOLOGY, count)
    # Kafka lists them in the order of a java.util.HashMap's key set.
    assert internal.status == (StreamsStatus.MISSING_INTERNAL_TOPICS,
                               "Internal topics are missing: app-rep, app-changelog")
    assert [(t.name, t.partitions) for t in internal.to_create] == [("app-changelog", 3), ("app-rep", 3)]
    catalog.add("app-rep", 3)
    catalog.add("app-changelog", 2)
    wrong = configure(TOPOLOGY, count)
    assert wrong.status is not None and wrong.status[0] is StreamsStatus.INCORRECTLY_PARTITIONED_TOPICS
    catalog.add("app-changelog", 3)
    ready = configure(TOPOLOGY, count)
    assert ready.ready and dict(ready.tasks) == {"0": 3, "1": 3}


def test_assignor_balances_and_keeps_previous_owners() -> None:
    tasks = {"0": 4, "1": 4}
    first = assign({"a": AssignmentMember("p1", NO_TASKS)}, tasks, {"1"}, 0)
    assert first["a"].active == ALL
    second = assign({"a": AssignmentMember("p1", first["a"]), "b": AssignmentMember("p2", NO_TASKS)}, tasks, {"1"}, 0)
    # Kafka 4.4's answer for the same step (measured): a keeps the first half of each subtopology.
    assert second["a"].active == {"0": frozenset({0, 1}), "1": frozenset({0, 1})}
    assert second["b"].active == {"0": frozenset({2, 3}), "1": frozenset({2, 3})}


def test_assignor_places_standbys_on_other_processes_only() -> None:
    members = {m: AssignmentMember(p, NO_TASKS) for m, p in (("a", "p1"), ("b", "p1"), ("c", "p2"))}
    out = assign(members, {"0": 4, "1": 4}, {"1"}, 1)
    every_active = [(s, p) for t in out.values() for s, ps in t.active.items() for p in ps]
    assert sorted(every_active) == sorted((s, p) for s in "01" for p in range(4))  # each task exactly once
    process = {m: members[m].process_id for m in members}
    for m, t in out.items():
        assert "0" not in t.standby  # stateless: no standby
        for p in t.standby.get("1", ()):
            owner = next(o for o, a in out.items() if p in a.active.get("1", ()))
            assert process[owner] != process[m]
    assert sum(len(t.standby.get("1", ())) for t in out.values()) == 4


def test_first_member_waits_for_internal_topics_then_gets_every_task() -> None:
    c, catalog = coordinator(), Catalog()
    catalog.add("in", 4)
    r = c.heartbeat(join("a"), catalog, 1000)
    assert r.error is ErrorCode.none and r.member_epoch == 2 and r.tasks == NO_TASKS
    assert [s for s, _ in r.statuses] == [StreamsStatus.MISSING_INTERNAL_TOPICS]
    assert [t.name for t in r.to_create] == ["app-changelog", "app-rep"]
    assert c.groups["app"].state is StreamsGroupState.NOT_READY
    catalog.add("app-rep", 4)
    catalog.add("app-changelog", 4)
    r = c.heartbeat(beat("a", 2), catalog, 2000)
    assert r.member_epoch == 3 and r.statuses == () and r.tasks is not None and r.tasks.active == ALL
    assert c.groups["app"].state is StreamsGroupState.STABLE
    r = c.heartbeat(beat("a", 3, None), catalog, 3000)
    assert r.tasks is None  # unchanged: not sent again


def test_initial_rebalance_delay_and_assignment_interval_are_statuses() -> None:
    c, catalog = coordinator(delay=3000, interval=1000), ready_catalog()
    r = c.heartbeat(join("a"), catalog, 10_000)
    assert r.member_epoch == 1 and r.statuses == (
        (StreamsStatus.ASSIGNMENT_DELAYED, "Assignment delayed due to the configured initial rebalance delay."),)
    r = c.heartbeat(beat("a", 1), catalog, 13_000)
    assert r.member_epoch == 2 and r.tasks is not None and r.tasks.active == ALL
    r = c.heartbeat(join("b"), catalog, 13_500)
    assert r.statuses == ((StreamsStatus.ASSIGNMENT_DELAYED,
                           "Assignment delayed due to the configured assignment interval."),)


def test_a_task_moves_only_after_its_owner_revoked_it() -> None:
    c, catalog = coordinator(), ready_catalog()
    c.heartbeat(join("a"), catalog, 0)
    everything = TasksTuple(ALL)
    b = c.heartbeat(join("b"), catalog, 1)
    assert b.tasks == NO_TASKS  # a still owns b's target tasks
    a = c.heartbeat(beat("a", 2, everything), catalog, 2)
    assert a.member_epoch == 2 and a.tasks is not None  # asked to give up half, epoch unchanged
    half = a.tasks
    assert half.active == {"0": frozenset({0, 1}), "1": frozenset({0, 1})}
    b = c.heartbeat(beat("b", 3), catalog, 3)
    assert b.tasks is None or b.tasks.active == {}  # still held by a
    a = c.heartbeat(beat("a", 2, half), catalog, 4)
    assert a.member_epoch == 3
    b = c.heartbeat(beat("b", 3), catalog, 5)
    assert b.tasks is not None and b.tasks.active == {"0": frozenset({2, 3}), "1": frozenset({2, 3})}
    assert c.groups["app"].state is StreamsGroupState.STABLE


def test_session_timeout_frees_a_dead_members_tasks() -> None:
    c, catalog = coordinator(), ready_catalog()
    c.heartbeat(join("a"), catalog, 0)
    c.heartbeat(join("b"), catalog, 1)
    a = c.heartbeat(beat("a", 2, TasksTuple(ALL)), catalog, 2)
    assert a.tasks is not None
    c.heartbeat(beat("a", 2, a.tasks), catalog, 3)
    c.heartbeat(beat("b", 3), catalog, 4)
    c.tick(catalog, 45_003)  # a's session (45 s) has expired; b's has not
    assert set(c.groups["app"].members) == {"b"}
    b = c.heartbeat(beat("b", 3, TasksTuple({"0": frozenset({2, 3}), "1": frozenset({2, 3})})), catalog, 45_003)
    assert b.tasks is not None and b.tasks.active == ALL


def test_leave_static_membership_and_errors() -> None:
    c, catalog = coordinator(), ready_catalog()
    r = c.heartbeat(join("a", instance_id="i1"), catalog, 0)
    assert r.error is ErrorCode.none
    assert c.heartbeat(join("b", instance_id="i1"), catalog, 1).error is ErrorCode.unreleased_instance_id
    left = c.heartbeat(StreamsHeartbeatRequest("app", "a", -2, instance_id="i1"), catalog, 2)
    assert left.error is ErrorCode.none and left.member_epoch == -2
    r = c.heartbeat(join("b", instance_id="i1"), catalog, 3)
    assert r.error is ErrorCode.none and r.tasks is not None and r.tasks.active == ALL  # b takes a's place
    assert c.heartbeat(beat("zz", 5), catalog, 4).error is ErrorCode.unknown_member_id
    assert c.heartbeat(beat("b", 99), catalog, 5).error is ErrorCode.fenced_member_epoch
    newer = Topology(1, TOPOLOGY.subtopologies)
    r = c.heartbeat(join("c", topology=newer), catalog, 6)
    assert (r.error, r.error_message) == (ErrorCode.invalid_request, "Topology updates are not supported yet.")
    r = c.heartbeat(StreamsHeartbeatRequest("app", "", 0, rebalance_timeout_ms=1, topology=TOPOLOGY), catalog, 7)
    assert (r.error, r.error_message) == (ErrorCode.invalid_request, "MemberId can't be empty.")
    r = c.heartbeat(StreamsHeartbeatRequest("app", "b", -1), catalog, 8)
    assert r.member_epoch == -1 and "b" not in c.groups["app"].members
    assert c.groups["app"].state is StreamsGroupState.EMPTY
    assert c.heartbeat(beat("x", 1), catalog, 9).error is ErrorCode.unknown_member_id
    assert c.heartbeat(StreamsHeartbeatRequest("nope", "x", 1), catalog, 9).error is ErrorCode.group_id_not_found


def test_offset_commit_validation_uses_member_and_task_assignment_epochs() -> None:
    c, catalog = coordinator(), ready_catalog()
    r = c.heartbeat(join("a"), catalog, 0)
    epoch = r.member_epoch
    assert c.validate_offset_commit("app", "a", epoch, 9) is ErrorCode.none
    assert c.validate_offset_commit("app", "a", epoch + 1, 9) is ErrorCode.stale_member_epoch
    assert c.validate_offset_commit("app", "zz", epoch, 9) is ErrorCode.unknown_member_id
    assert c.validate_offset_commit("app", "a", epoch, 8) is ErrorCode.unsupported_version
    c.heartbeat(join("b"), catalog, 1)  # a gives up half: it keeps tasks 0 and 1, assigned at its first epoch
    a = c.heartbeat(beat("a", epoch, TasksTuple(ALL)), catalog, 2)
    assert a.tasks is not None
    a = c.heartbeat(beat("a", epoch, a.tasks), catalog, 3)
    assert a.member_epoch > epoch
    # Kafka 4.4: a commit with the older epoch is accepted for the tasks the member has held since then...
    assert c.validate_offset_commit("app", "a", epoch, 9, [("in", 0), ("app-rep", 1)]) is ErrorCode.none
    # ...and refused whole if one partition is not one of them (now b's, or not in the topology).
    assert c.validate_offset_commit("app", "a", epoch, 9, [("in", 0), ("in", 3)]) is ErrorCode.stale_member_epoch
    assert c.validate_offset_commit("app", "a", epoch, 9, [("elsewhere", 0)]) is ErrorCode.stale_member_epoch


def test_a_group_written_to_its_records_is_loaded_back_as_it_was() -> None:
    from samsa.broker.group.classic_group import GroupRecord
    from samsa.broker.group.records import decode_key
    from samsa.broker.group.streams_keys import StreamsGroupKey

    written: list[GroupRecord] = []
    c, catalog = StreamsGroupCoordinator(StreamsGroupConfig(initial_rebalance_delay_ms=0, assignment_interval_ms=0),
                                         lambda _g: False, written.append), ready_catalog()
    c.heartbeat(join("a", instance_id="i1"), catalog, 0)
    c.heartbeat(join("b"), catalog, 1)
    a = c.heartbeat(beat("a", 2, TasksTuple(ALL)), catalog, 2)  # a revoking half: UNREVOKED_TASKS
    assert written and all(isinstance(decode_key(r.key), StreamsGroupKey) for r in written)
    count = len(written)
    c.heartbeat(beat("a", 2, None), catalog, 3)  # nothing changed: nothing written
    assert len(written) == count

    loaded = StreamsGroupCoordinator(StreamsGroupConfig(), lambda _g: False)
    for record in written:
        key = decode_key(record.key)
        assert isinstance(key, StreamsGroupKey)
        loaded.replay(key, record.value)
    loaded.finish_loading(1000)
    before, after = c.groups["app"], loaded.groups["app"]
    assert (after.group_epoch, after.assignment_epoch, after.topology) == (
        before.group_epoch, before.assignment_epoch, before.topology)
    assert after.members == before.members and after.target_assignment == before.target_assignment
    assert after.static_member("i1") is not None and set(after.session_deadlines_ms) == {"a", "b"}
    # The member carries on where it was: it finishes revoking and b gets the tasks.
    assert a.tasks is not None
    assert loaded.heartbeat(beat("a", 2, a.tasks), catalog, 1001).member_epoch == 3
    b = loaded.heartbeat(beat("b", 3), catalog, 1002)
    assert b.error is ErrorCode.none and b.tasks is not None and b.tasks.active == {
        "0": frozenset({2, 3}), "1": frozenset({2, 3})}


def test_missing_internal_topics_are_listed_in_kafkas_order() -> None:
    from samsa.broker.group.streams_topology import java_hash_map_order

    # As Kafka 4.4.0 answered (measured): a java.util.HashMap's iteration order, not sorted.
    assert java_hash_map_order(["app1-rep-repartition", "app1-store-changelog"], 2) == [
        "app1-rep-repartition", "app1-store-changelog"]
    assert java_hash_map_order(["diff-streams-group-members-app-rep-repartition",
                                "diff-streams-group-members-app-store-changelog"], 2) == [
        "diff-streams-group-members-app-store-changelog", "diff-streams-group-members-app-rep-repartition"]


def test_an_active_task_demoted_to_standby_is_a_standby_at_once() -> None:
    """Kafka 4.4: the member is told of both halves of a role change in one heartbeat (it recycles the task),
    while the active half is still revoked before anyone else gets it."""
    c = coordinator(standbys=1)
    catalog = ready_catalog()
    c.heartbeat(join("a"), catalog, 0)
    c.heartbeat(join("b"), catalog, 1)
    a = c.heartbeat(beat("a", 2, TasksTuple(ALL)), catalog, 2)
    assert a.tasks is not None
    moved = {"1": frozenset({2, 3})}  # stateful tasks a gives to b
    assert a.tasks.standby == moved  # and keeps as standbys, in the same answer
    b = c.heartbeat(beat("b", 3), catalog, 3)
    assert b.tasks is None or b.tasks.active == {}  # not before a revoked them
    a = c.heartbeat(beat("a", 2, TasksTuple(a.tasks.active, a.tasks.standby)), catalog, 4)
    assert a.member_epoch == 3
    b = c.heartbeat(beat("b", 3), catalog, 5)
    assert b.tasks is not None and b.tasks.active == {"0": frozenset({2, 3}), "1": frozenset({2, 3})}
    assert b.tasks.standby == {"1": frozenset({0, 1})}


def test_topology_rules_and_owned_tasks_are_checked_as_kafka_does() -> None:
    c, catalog = coordinator(), ready_catalog()
    a = c.heartbeat(join("a", topology=Topology(2, TOPOLOGY.subtopologies)), catalog, 0)
    assert a.error is ErrorCode.none
    # An older topology epoch is stale: the member joins and is told so.
    b = c.heartbeat(join("b", topology=TOPOLOGY), catalog, 1)
    assert b.error is ErrorCode.none and [s for s, _ in b.statuses] == [StreamsStatus.STALE_TOPOLOGY]
    assert b.statuses[0][1] == "The member's topology epoch 0 is behind the group's topology epoch 2."
    # The same epoch with other subtopologies is an update, which Kafka 4.4 refuses.
    other = Topology(2, (Subtopology("0", source_topics=("in",)),))
    r = c.heartbeat(join("c", topology=other), catalog, 2)
    assert (r.error, r.error_message) == (ErrorCode.invalid_request, "Topology updates are not supported yet.")
    r = c.heartbeat(beat("a", a.member_epoch, TasksTuple({"7": frozenset({0})})), catalog, 3)
    assert (r.error, r.error_message) == (ErrorCode.invalid_request, "Subtopology 7 does not exist in the topology.")
    r = c.heartbeat(beat("a", a.member_epoch, TasksTuple({"1": frozenset({4})})), catalog, 4)
    assert r.error_message == "Task 4 for subtopology 1 is invalid. Number of tasks for this subtopology: 4"


def test_missing_client_tags_is_told_from_v1_only_and_names_the_missing_tags() -> None:
    """Kafka 4.4 (KAFKA-20744): with group.streams.rack.aware.assignment.tags set, a v1 member that did not send
    every tag is told MISSING_CLIENT_TAGS (6) after the other statuses; a v0 member never is."""
    config = StreamsGroupConfig(initial_rebalance_delay_ms=0, assignment_interval_ms=0,
                                rack_aware_assignment_tags=("zone", "cluster"))
    c, catalog = StreamsGroupCoordinator(config, lambda _g: False), ready_catalog()
    v1 = c.heartbeat(join("a", client_tags=(("zone", "z1"),), api_version=1), catalog, 0)
    assert v1.error == ErrorCode.none
    assert v1.statuses == ((StreamsStatus.MISSING_CLIENT_TAGS,
                            "Missing required client tags for rack-aware standby assignment: [cluster]. Configure "
                            "them via 'client.tag.<tagKey>' in your Streams config."),)
    v0 = c.heartbeat(join("b", client_tags=(), api_version=0), catalog, 0)
    assert v0.error == ErrorCode.none and v0.statuses == ()
    tagged = c.heartbeat(join("c", client_tags=(("zone", "z1"), ("cluster", "k")), api_version=1), catalog, 0)
    assert tagged.statuses == ()
    # A group's own streams.rack.aware.assignment.tags replaces the broker's.
    own = StreamsGroupConfig(rack_aware_assignment_tags=("zone",),
                             group_configs=lambda _g: {"streams.rack.aware.assignment.tags": "rack , zone"})
    assert own.rack_aware_assignment_tags_for("app") == ("rack", "zone")


def test_acceptable_recovery_lag_and_assignor_name_are_the_groups_or_the_brokers() -> None:
    c, catalog = coordinator(), ready_catalog()
    assert c.heartbeat(join("a"), catalog, 0).acceptable_recovery_lag == 10_000  # Kafka 4.4's default
    own = StreamsGroupConfig(acceptable_recovery_lag=5, group_configs=lambda g: (
        {"streams.acceptable.recovery.lag": "7", "streams.assignor.name": "mock"} if g == "app" else {}))
    assert (own.acceptable_recovery_lag_for("app"), own.acceptable_recovery_lag_for("other")) == (7, 5)
    assert (own.assignor_name_for("app"), own.assignor_name_for("other")) == ("mock", "sticky")


def test_reported_task_offsets_are_kept_per_member_until_it_leaves() -> None:
    """Kafka 4.4's MemberTaskOffsets: a list sent replaces the member's last one, null keeps it; in memory only,
    dropped with the member."""
    c, catalog = coordinator(), ready_catalog()
    a = c.heartbeat(join("a", task_offsets=(("1", 0, 7),), task_end_offsets=(("1", 0, 9),)), catalog, 0)
    group = c.groups["app"]
    assert group.task_offsets["a"] == ((("1", 0, 7),), (("1", 0, 9),))
    c.heartbeat(StreamsHeartbeatRequest("app", "a", a.member_epoch, task_end_offsets=(("1", 0, 12),)), catalog, 1)
    assert group.task_offsets["a"] == ((("1", 0, 7),), (("1", 0, 12),))
    c.heartbeat(StreamsHeartbeatRequest("app", "a", -1), catalog, 2)
    assert "a" not in group.task_offsets
