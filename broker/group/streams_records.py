"""A streams group in `__consumer_offsets` in Kafka 4.4's record formats (StreamsCoordinatorRecordHelpers),
written as the group changes and replayed on load (GroupMetadataManager.replay), so a restart, a coordinator
move, or Kafka's own tools (`kafka-dump-log.sh --offsets-decoder`) read the same group.

Each key is the int16 record type (the JSON schema's apiKey) then the key struct; each value is the int16
version (0) then the flexible value struct; a deleted record is a tombstone (null value). The schemas are
kio data classes generated from Kafka 4.4.0's group-coordinator JSON (`samsa.kproto.schema`):

    17  StreamsGroupMetadata                group          -> epoch, metadata hash, validated topology epoch,
                                                              last assignment configs (+ description epochs)
    19  StreamsGroupMemberMetadata          group, member  -> instance, rack, client, rebalance timeout, topology
                                                              epoch, process, user endpoint, client tags
    20  StreamsGroupTargetAssignmentMetadata group         -> assignment epoch, assignment timestamp
    21  StreamsGroupTargetAssignmentMember  group, member  -> target active / standby / warm-up tasks
    22  StreamsGroupCurrentMemberAssignment group, member  -> member epochs, state, tasks held and pending
                                                              revocation (active ones with their assignment epochs)
    23  StreamsGroupTopology                group          -> the topology as the member sent it

Which records a change writes follows from what changed, in the order Kafka's heartbeat writes them: a
member's metadata when it joins or its metadata changes, the topology when the group gets one, the group
metadata on an epoch bump, a target member record per member whose target changed and the target metadata
when a target is computed, a member's current assignment when it moves (a new group's epochs, 1, are no
record). `changes` finds them by comparing the group with what was last written (a record whose bytes did not
change is not written again). A member that goes leaves three tombstones (current assignment, target,
metadata, in that order, as Kafka's removeStreamsMember); a deleted group leaves Kafka's
createGroupTombstoneRecords order, so Kafka's own loader accepts either. compat-tests/differential/
test_streams_group_records.py checks the records of a group's whole life against Kafka 4.4.0's, field by field.

Before these, Samsa wrote a whole group as one JSON record of its own type 32002 (kio then had no streams
schemas). Such a record is still read on load (`decode_legacy`), and tombstoned at the group's next write.

Timers are not durable: after a load every member gets a fresh session (as Kafka schedules them on load),
and the topology is configured again from the image.
"""

from __future__ import annotations

import datetime
import json
import struct
from collections.abc import Callable, Mapping
from dataclasses import replace
from functools import lru_cache, partial
from typing import Any

from kio.static.primitive import i8, i16, i32, i32Timedelta, i64, u16

from samsa.broker.group.classic_group import GroupRecord
from samsa.broker.group.records import STREAMS_GROUP_SNAPSHOT_KEY, StreamsGroupSnapshotKey, encode_key
from samsa.broker.group.streams_group import (
    StreamsGroup,
    StreamsGroupMember,
    StreamsMemberState,
    Subtopology,
    Tasks,
    TasksTuple,
    TopicInfo,
    Topology,
    tasks_of,
)
from samsa.broker.group.streams_keys import STREAMS_GROUP_CURRENT_MEMBER_ASSIGNMENT_KEY as CURRENT_ASSIGNMENT
from samsa.broker.group.streams_keys import STREAMS_GROUP_MEMBER_METADATA_KEY as MEMBER_METADATA
from samsa.broker.group.streams_keys import STREAMS_GROUP_METADATA_KEY as GROUP_METADATA
from samsa.broker.group.streams_keys import STREAMS_GROUP_TARGET_ASSIGNMENT_MEMBER_KEY as TARGET_MEMBER
from samsa.broker.group.streams_keys import STREAMS_GROUP_TARGET_ASSIGNMENT_METADATA_KEY as TARGET_METADATA
from samsa.broker.group.streams_keys import STREAMS_GROUP_TOPOLOGY_KEY as TOPOLOGY
from samsa.broker.group.streams_keys import StreamsGroupKey, decode_value, encode_value
from samsa.broker.group.streams_keys import encode_key as encode_streams_key
from samsa.kproto.schema.streams_group_current_member_assignment_value.v0 import data as current_v
from samsa.kproto.schema.streams_group_member_metadata_value.v0 import data as member_v
from samsa.kproto.schema.streams_group_metadata_value.v0 import data as metadata_v
from samsa.kproto.schema.streams_group_target_assignment_member_value.v0 import data as target_v
from samsa.kproto.schema.streams_group_target_assignment_metadata_value.v0 import data as target_metadata_v
from samsa.kproto.schema.streams_group_topology_value.v0 import data as topology_v

_LEGACY_VERSION = 0  # of the 32002 record
_I16 = struct.Struct(">h")
_MS = datetime.timedelta(milliseconds=1)

Written = dict[bytes, tuple[object, bytes]]  # StreamsGroup.written

# Tombstones go first, in this order of record types: Kafka's removeStreamsMember writes a member's current
# assignment, target and metadata tombstones in that order, and createGroupTombstoneRecords the current
# assignments, targets, target metadata, members, group metadata, topology (its loader checks the order).
# A member's state as Kafka's MemberState.value() writes it (STABLE is 1, not 0: 4.4.0's bytecode).
_STATE_BYTES = {StreamsMemberState.STABLE: 1, StreamsMemberState.UNREVOKED_TASKS: 2,
                StreamsMemberState.UNRELEASED_TASKS: 3, StreamsMemberState.UNKNOWN: 127}
_STATES = {value: state for state, value in _STATE_BYTES.items()}

_TOMBSTONE_ORDER = (STREAMS_GROUP_SNAPSHOT_KEY, CURRENT_ASSIGNMENT, TARGET_MEMBER, TARGET_METADATA, MEMBER_METADATA,
                    GROUP_METADATA, TOPOLOGY)


# --- values ------------------------------------------------------------------------------------

def _target_tasks(tasks: Tasks) -> tuple[target_v.TaskIds, ...]:
    return tuple(target_v.TaskIds(subtopology_id=s, partitions=tuple(i32(p) for p in sorted(ps)))
                 for s, ps in sorted(tasks.items()))


def _tasks(tasks: Tasks) -> tuple[current_v.TaskIds, ...]:
    return tuple(current_v.TaskIds(subtopology_id=s, partitions=tuple(i32(p) for p in sorted(ps)))
                 for s, ps in sorted(tasks.items()))


def _active(tasks: Tasks, member: StreamsGroupMember) -> tuple[current_v.TaskIds, ...]:
    default = max(member.member_epoch, 0)
    return tuple(current_v.TaskIds(
        subtopology_id=s, partitions=tuple(i32(p) for p in sorted(ps)),
        assignment_epochs=tuple(i32(member.active_epochs.get((s, p), default)) for p in sorted(ps)))
        for s, ps in sorted(tasks.items()))


def _topic(t: TopicInfo) -> topology_v.TopicInfo:
    return topology_v.TopicInfo(name=t.name, partitions=i32(t.partitions), replication_factor=i16(t.replication_factor),
                                topic_configs=tuple(topology_v.TopicConfig(key=k, value=v) for k, v in t.configs))


def _copartition(s: Subtopology, names: frozenset[str]) -> topology_v.CopartitionGroup:
    """Kafka's copartition groups hold indexes into the subtopology's source and repartition source topics."""
    repartition = [r.name for r in s.repartition_source_topics]
    return topology_v.CopartitionGroup(
        source_topics=tuple(i16(i) for i, t in enumerate(s.source_topics) if t in names),
        repartition_source_topics=tuple(i16(i) for i, t in enumerate(repartition) if t in names))


def encode_topology(topology: Topology) -> bytes:
    return encode_value(topology_v.StreamsGroupTopologyValue(epoch=i32(topology.epoch), subtopologies=tuple(
        topology_v.Subtopology(
            subtopology_id=s.subtopology_id, source_topics=s.source_topics,
            state_changelog_topics=tuple(_topic(c) for c in s.state_changelog_topics),
            repartition_sink_topics=s.repartition_sink_topics,
            repartition_source_topics=tuple(_topic(r) for r in s.repartition_source_topics),
            copartition_groups=tuple(_copartition(s, g) for g in s.copartition_groups))
        for s in topology.subtopologies)))


def encode_group_metadata(group: StreamsGroup, assignment_configs: Mapping[str, str]) -> bytes:
    validated = group.topology.epoch if group.topology is not None and group.is_ready() else -1
    return encode_value(metadata_v.StreamsGroupMetadataValue(
        epoch=i32(group.group_epoch), metadata_hash=i64(group.metadata_hash), validated_topology_epoch=i32(validated),
        last_assignment_configs=tuple(metadata_v.LastAssignmentConfig(key=k, value=v)
                                      for k, v in sorted(assignment_configs.items()))))


def encode_member_metadata(m: StreamsGroupMember) -> bytes:
    return encode_value(member_v.StreamsGroupMemberMetadataValue(
        instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
        rebalance_timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=m.rebalance_timeout_ms)),
        topology_epoch=i32(m.topology_epoch), process_id=m.process_id,
        user_endpoint=None if m.user_endpoint is None else member_v.Endpoint(host=m.user_endpoint[0],
                                                                             port=u16(m.user_endpoint[1])),
        client_tags=tuple(member_v.KeyValue(key=k, value=v) for k, v in sorted(m.client_tags))))


def encode_target_metadata(group: StreamsGroup) -> bytes:
    return encode_value(target_metadata_v.StreamsGroupTargetAssignmentMetadataValue(
        assignment_epoch=i32(group.assignment_epoch), assignment_timestamp=i64(group.assignment_timestamp_ms)))


def encode_target_member(tasks: TasksTuple) -> bytes:
    return encode_value(target_v.StreamsGroupTargetAssignmentMemberValue(
        active_tasks=_target_tasks(tasks.active), standby_tasks=_target_tasks(tasks.standby),
        warmup_tasks=_target_tasks(tasks.warmup)))


def encode_current_assignment(m: StreamsGroupMember) -> bytes:
    held, pending = m.assigned, m.pending_revocation
    return encode_value(current_v.StreamsGroupCurrentMemberAssignmentValue(
        member_epoch=i32(m.member_epoch), previous_member_epoch=i32(m.previous_member_epoch),
        state=i8(_STATE_BYTES[m.state]),
        active_tasks=_active(held.active, m), standby_tasks=_tasks(held.standby), warmup_tasks=_tasks(held.warmup),
        active_tasks_pending_revocation=_active(pending.active, m),
        standby_tasks_pending_revocation=_tasks(pending.standby),
        warmup_tasks_pending_revocation=_tasks(pending.warmup)))


# --- what a change writes ------------------------------------------------------------------------

@lru_cache(maxsize=65_536)
def key(record_type: int, group_id: str, member_id: str = "") -> bytes:
    """A record's key; the keys of live groups are asked for at every change, so the latest are kept."""
    return encode_streams_key(StreamsGroupKey(record_type, group_id, member_id))


# The (epoch, hash) and (assignment epoch, timestamp) of a new StreamsGroup: Kafka 4.4 writes neither record of
# a group that has not moved from them (a new group's first target assignment metadata is not written).
_FRESH = (1, 0)

_Wanted = list[tuple[bytes, object, Callable[[], bytes]]]


def _wanted(group: StreamsGroup, assignment_configs: Mapping[str, str]) -> _Wanted:
    """(key, what the value is made from, how to encode it) of every record the group needs now, in the order
    Kafka's heartbeat writes them: member metadata, topology, group metadata, targets, current assignments."""
    g = group.group_id
    members = sorted(group.members.items())
    out: _Wanted = [(key(MEMBER_METADATA, g, mid), m, partial(encode_member_metadata, m)) for mid, m in members]
    if group.topology is not None:
        out.append((key(TOPOLOGY, g), group.topology, partial(encode_topology, group.topology)))
    out.append((key(GROUP_METADATA, g), (group.group_epoch, group.metadata_hash),
                partial(encode_group_metadata, group, assignment_configs)))
    out += [(key(TARGET_MEMBER, g, mid), t, partial(encode_target_member, t))
            for mid, t in sorted(group.target_assignment.items())]
    out.append((key(TARGET_METADATA, g), (group.assignment_epoch, group.assignment_timestamp_ms),
                partial(encode_target_metadata, group)))
    out += [(key(CURRENT_ASSIGNMENT, g, mid), m, partial(encode_current_assignment, m))
            for mid, m in members]
    return out


def _same_source(a: object, b: object) -> bool:
    """The very same immutable member, assignment or topology object (held, so never a reused id), or equal
    epochs: the bytes would be the same."""
    return a is b or (type(a) is tuple and a == b)


def changes(group: StreamsGroup, written: Written, assignment_configs: Mapping[str, str]
            ) -> tuple[list[GroupRecord], Written]:
    """The records that bring what the log holds (`written`) to the group as it is, and the new `written`."""
    now: Written = {}
    upserts: list[GroupRecord] = []
    for record_key, source, encode in _wanted(group, assignment_configs):
        old = written.get(record_key)
        if old is not None and old[0] is not None and _same_source(old[0], source):
            now[record_key] = (source, old[1])
            continue
        value = encode()
        now[record_key] = (source, value)
        if old is None and source == _FRESH:
            continue  # a new group's epochs, which a load gives any group (Kafka writes no record of them either)
        if old is None or old[1] != value:
            upserts.append(GroupRecord(group.group_id, record_key, value))
    gone = [k for k in written if k not in now]
    gone.sort(key=lambda k: _TOMBSTONE_ORDER.index(_I16.unpack_from(k)[0]))
    return [GroupRecord(group.group_id, k, None) for k in gone] + upserts, now


def tombstones(group_id: str, written: Written) -> list[GroupRecord]:
    """Every record of a deleted group, tombstoned in Kafka's createGroupTombstoneRecords order."""
    gone = sorted(written, key=lambda k: _TOMBSTONE_ORDER.index(_I16.unpack_from(k)[0]))
    return [GroupRecord(group_id, k, None) for k in gone]


# --- replay ----------------------------------------------------------------------------------------

def _decode_tasks(tasks: tuple[Any, ...]) -> Tasks:
    return tasks_of({t.subtopology_id: {int(p) for p in t.partitions} for t in tasks})


def _decode_epochs(tasks: tuple[current_v.TaskIds, ...], default: int, into: dict[tuple[str, int], int]) -> None:
    """Each active task's assignment epoch; a list missing or of the wrong length reads as the member epoch."""
    for t in tasks:
        epochs = [int(e) for e in t.assignment_epochs or ()]
        if len(epochs) != len(t.partitions):
            epochs = [default] * len(t.partitions)
        into.update(((t.subtopology_id, int(p)), e) for p, e in zip(t.partitions, epochs, strict=True))


def _decode_topic(t: topology_v.TopicInfo) -> TopicInfo:
    return TopicInfo(t.name, int(t.partitions), int(t.replication_factor),
                     tuple((c.key, c.value) for c in t.topic_configs))


def decode_topology(data: bytes) -> Topology:
    v = decode_value(topology_v.StreamsGroupTopologyValue, data)
    subtopologies = []
    for s in v.subtopologies:
        repartition = tuple(_decode_topic(r) for r in s.repartition_source_topics)
        groups = []
        for c in s.copartition_groups:
            names = {s.source_topics[i] for i in c.source_topics if 0 <= i < len(s.source_topics)}
            names |= {repartition[i].name for i in c.repartition_source_topics if 0 <= i < len(repartition)}
            groups.append(frozenset(names))
        subtopologies.append(Subtopology(s.subtopology_id, tuple(s.source_topics), tuple(s.repartition_sink_topics),
                                         tuple(_decode_topic(c) for c in s.state_changelog_topics), repartition,
                                         tuple(groups)))
    return Topology(int(v.epoch), tuple(subtopologies))


def _member(group: StreamsGroup, member_id: str) -> StreamsGroupMember:
    return group.members.get(member_id) or StreamsGroupMember(member_id)


def replay(groups: dict[str, StreamsGroup], record: StreamsGroupKey, value: bytes | None) -> None:
    """Apply one record (None: a tombstone) in log order, as Kafka's GroupMetadataManager.replay; the group's
    `written` keeps every live record, so the next change writes only what differs and a deletion
    tombstones them all."""
    group_id, member_id = record.group_id, record.member_id
    group = groups.get(group_id)
    record_key = key(record.record_type, group_id, member_id)
    if value is None:
        if group is None:
            return
        group.written.pop(record_key, None)  # in place: no change is in flight while a partition loads
        record_type = record.record_type
        if record_type == GROUP_METADATA:
            del groups[group_id]
        elif record_type == TOPOLOGY:
            group.topology, group.configured = None, None
        elif record_type == MEMBER_METADATA:
            group.remove_member(member_id)
        elif record_type == TARGET_METADATA:
            group.assignment_epoch, group.assignment_timestamp_ms = -1, 0
        elif record_type == TARGET_MEMBER:
            group.target_assignment.pop(member_id, None)
        elif record_type == CURRENT_ASSIGNMENT:
            if member_id in group.members:
                group.update_member(replace(group.members[member_id], member_epoch=-1, previous_member_epoch=-1,
                                            state=StreamsMemberState.STABLE, assigned=TasksTuple(),
                                            pending_revocation=TasksTuple(), active_epochs={}))
        return
    if group is None:
        group = groups[group_id] = StreamsGroup(group_id)
    record_type = record.record_type
    if record_type == GROUP_METADATA:
        v = decode_value(metadata_v.StreamsGroupMetadataValue, value)
        group.group_epoch, group.metadata_hash = int(v.epoch), int(v.metadata_hash)
    elif record_type == TOPOLOGY:
        group.topology, group.configured = decode_topology(value), None
    elif record_type == MEMBER_METADATA:
        m = decode_value(member_v.StreamsGroupMemberMetadataValue, value)
        endpoint = m.user_endpoint
        group.update_member(replace(
            _member(group, member_id), instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id,
            client_host=m.client_host, rebalance_timeout_ms=int(m.rebalance_timeout // _MS),
            topology_epoch=int(m.topology_epoch), process_id=m.process_id,
            user_endpoint=None if endpoint is None else (endpoint.host, int(endpoint.port)),
            client_tags=tuple((t.key, t.value) for t in m.client_tags)))
    elif record_type == TARGET_METADATA:
        t = decode_value(target_metadata_v.StreamsGroupTargetAssignmentMetadataValue, value)
        group.assignment_epoch, group.assignment_timestamp_ms = int(t.assignment_epoch), int(t.assignment_timestamp)
    elif record_type == TARGET_MEMBER:
        a = decode_value(target_v.StreamsGroupTargetAssignmentMemberValue, value)
        group.target_assignment[member_id] = TasksTuple(_decode_tasks(a.active_tasks),
                                                        _decode_tasks(a.standby_tasks),
                                                        _decode_tasks(a.warmup_tasks))
    elif record_type == CURRENT_ASSIGNMENT:
        c = decode_value(current_v.StreamsGroupCurrentMemberAssignmentValue, value)
        state = _STATES.get(int(c.state), StreamsMemberState.UNKNOWN)
        epochs: dict[tuple[str, int], int] = {}
        default = max(int(c.member_epoch), 0)
        _decode_epochs(c.active_tasks, default, epochs)
        _decode_epochs(c.active_tasks_pending_revocation, default, epochs)
        group.update_member(replace(
            _member(group, member_id), member_epoch=int(c.member_epoch),
            previous_member_epoch=int(c.previous_member_epoch), state=state,
            assigned=TasksTuple(_decode_tasks(c.active_tasks), _decode_tasks(c.standby_tasks),
                                _decode_tasks(c.warmup_tasks)),
            pending_revocation=TasksTuple(_decode_tasks(c.active_tasks_pending_revocation),
                                          _decode_tasks(c.standby_tasks_pending_revocation),
                                          _decode_tasks(c.warmup_tasks_pending_revocation)),
            active_epochs=epochs))
    # What the value stands for, where that is the group's own state: the next change then writes the group metadata
    # only if the epoch or the hash moved (its validated topology epoch is re-derived only then, as Kafka writes it
    # at a bump), and keeps what a record says as long as it holds. A member's two records are compared by bytes.
    source: object = None
    if record_type == GROUP_METADATA:
        source = (group.group_epoch, group.metadata_hash)
    elif record_type == TARGET_METADATA:
        source = (group.assignment_epoch, group.assignment_timestamp_ms)
    elif record_type == TOPOLOGY:
        source = group.topology
    elif record_type == TARGET_MEMBER:
        source = group.target_assignment[member_id]
    group.written[record_key] = (source, value)


# --- Samsa's record of before: type 32002, the whole group as JSON ----------------------------------

def legacy_key(group_id: str) -> bytes:
    return encode_key(StreamsGroupSnapshotKey(group_id))


def _legacy_tasks(t: Mapping[str, list[int]]) -> Tasks:
    return tasks_of({s: set(ps) for s, ps in t.items()})


def _legacy_tuple(t: Mapping[str, Any]) -> TasksTuple:
    return TasksTuple(_legacy_tasks(t["active"]), _legacy_tasks(t["standby"]), _legacy_tasks(t["warmup"]))


def _legacy_topic(t: list[Any]) -> TopicInfo:
    return TopicInfo(str(t[0]), int(t[1]), int(t[2]), tuple((str(k), str(v)) for k, v in t[3]))


def decode_legacy(group_id: str, value: bytes) -> StreamsGroup:
    """The group a 32002 record of an older Samsa holds; ValueError if it is not one."""
    if len(value) < 2 or _I16.unpack_from(value)[0] != _LEGACY_VERSION:
        raise ValueError("unknown streams group snapshot version")
    state = json.loads(value[2:])
    group = StreamsGroup(group_id)
    group.group_epoch, group.assignment_epoch = int(state["group_epoch"]), int(state["assignment_epoch"])
    group.assignment_timestamp_ms = int(state["assignment_timestamp_ms"])
    group.metadata_hash = int(state["metadata_hash"])
    t = state["topology"]
    if t is not None:
        group.topology = Topology(int(t["epoch"]), tuple(Subtopology(
            str(s["id"]), tuple(s["source"]), tuple(s["sink"]), tuple(_legacy_topic(c) for c in s["changelog"]),
            tuple(_legacy_topic(r) for r in s["repartition"]), tuple(frozenset(g) for g in s["copartition"]))
            for s in t["subtopologies"]))
    for m in state["members"]:
        endpoint = m["user_endpoint"]
        group.update_member(StreamsGroupMember(
            member_id=str(m["id"]), member_epoch=int(m["epoch"]), previous_member_epoch=int(m["previous_epoch"]),
            state=StreamsMemberState(int(m["state"])), instance_id=m["instance_id"], rack_id=m["rack_id"],
            client_id=str(m["client_id"]), client_host=str(m["client_host"]),
            rebalance_timeout_ms=int(m["rebalance_timeout_ms"]), topology_epoch=int(m["topology_epoch"]),
            process_id=str(m["process_id"]), user_endpoint=None if endpoint is None else (str(endpoint[0]),
                                                                                           int(endpoint[1])),
            client_tags=tuple((str(k), str(v)) for k, v in m["client_tags"]), assigned=_legacy_tuple(m["assigned"]),
            pending_revocation=_legacy_tuple(m["pending_revocation"]),
            active_epochs={(str(s), int(p)): int(e) for s, p, e in m["active_epochs"]}))
    group.target_assignment = {str(member_id): _legacy_tuple(t) for member_id, t in state["target"].items()}
    # Nothing of Kafka's formats is written yet; the 32002 record is tombstoned at the next write.
    group.written = {legacy_key(group_id): (None, value)}
    return group


def replay_legacy(groups: dict[str, StreamsGroup], group_id: str, value: bytes | None) -> None:
    if value is None:
        groups.pop(group_id, None)
    else:
        groups[group_id] = decode_legacy(group_id, value)
