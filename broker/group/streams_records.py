"""A streams group in `__consumer_offsets`, so it survives a broker restart or a coordinator move.

Kafka 4.4 writes a streams group as seven record types (StreamsGroupMetadata, StreamsGroupTopology,
StreamsGroupMemberMetadata, the target and current assignments...). kio 0.6.5, Samsa's protocol library,
has none of their schemas, and they are still marked "subject to non-backwards-compatible changes"
upstream; rather than hand-write byte formats that Kafka's own readers could misread, Samsa writes one
record of its own per group, record type 32002 (like the offset-reset audit record, 32001): key = type +
group id, value = version 0 + a JSON object of the group's durable state. Compaction keeps the latest;
a deleted group is a tombstone. Kafka's loader skips record types it does not know, so the topic stays
readable by Kafka's tools (the group's committed offsets are ordinary offset commits).

What is durable: epochs, the topology, each member (identity, process, endpoint, tags, epochs, state,
current and pending tasks) and the target assignment. Timers are not: after a load every member gets a
fresh session (as Kafka schedules them on load), and the topology is configured again from the image.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping
from typing import Any

from samsa.broker.group.classic_group import GroupRecord
from samsa.broker.group.records import StreamsGroupSnapshotKey, encode_key
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

VERSION = 0
_I16 = struct.Struct(">h")


def key(group_id: str) -> bytes:
    return encode_key(StreamsGroupSnapshotKey(group_id))


def tombstone(group_id: str) -> GroupRecord:
    return GroupRecord(group_id, key(group_id), None)


def _tasks(t: Tasks) -> dict[str, list[int]]:
    return {s: sorted(ps) for s, ps in sorted(t.items())}


def _tuple(t: TasksTuple) -> dict[str, Any]:
    return {"active": _tasks(t.active), "standby": _tasks(t.standby), "warmup": _tasks(t.warmup)}


def _topic(t: TopicInfo) -> list[Any]:
    return [t.name, t.partitions, t.replication_factor, [list(kv) for kv in t.configs]]


def _topology(t: Topology) -> dict[str, Any]:
    return {"epoch": t.epoch, "subtopologies": [{
        "id": s.subtopology_id, "source": list(s.source_topics), "sink": list(s.repartition_sink_topics),
        "changelog": [_topic(c) for c in s.state_changelog_topics],
        "repartition": [_topic(r) for r in s.repartition_source_topics],
        "copartition": [sorted(g) for g in s.copartition_groups]} for s in t.subtopologies]}


def _member(m: StreamsGroupMember) -> dict[str, Any]:
    return {"id": m.member_id, "epoch": m.member_epoch, "previous_epoch": m.previous_member_epoch,
            "state": int(m.state), "instance_id": m.instance_id, "rack_id": m.rack_id, "client_id": m.client_id,
            "client_host": m.client_host, "rebalance_timeout_ms": m.rebalance_timeout_ms,
            "topology_epoch": m.topology_epoch, "process_id": m.process_id,
            "user_endpoint": None if m.user_endpoint is None else list(m.user_endpoint),
            "client_tags": [list(kv) for kv in m.client_tags], "assigned": _tuple(m.assigned),
            "pending_revocation": _tuple(m.pending_revocation),
            "active_epochs": sorted([s, p, e] for (s, p), e in m.active_epochs.items())}


def encode(group: StreamsGroup) -> bytes:
    state = {"group_epoch": group.group_epoch, "assignment_epoch": group.assignment_epoch,
             "assignment_timestamp_ms": group.assignment_timestamp_ms, "metadata_hash": group.metadata_hash,
             "topology": None if group.topology is None else _topology(group.topology),
             "members": [_member(m) for _, m in sorted(group.members.items())],
             "target": {m: _tuple(t) for m, t in sorted(group.target_assignment.items())}}
    return _I16.pack(VERSION) + json.dumps(state, separators=(",", ":"), sort_keys=True).encode()


def record(group: StreamsGroup) -> GroupRecord:
    return GroupRecord(group.group_id, key(group.group_id), encode(group))


def _decode_tasks(t: Mapping[str, list[int]]) -> Tasks:
    return tasks_of({s: set(ps) for s, ps in t.items()})


def _decode_tuple(t: Mapping[str, Any]) -> TasksTuple:
    return TasksTuple(_decode_tasks(t["active"]), _decode_tasks(t["standby"]), _decode_tasks(t["warmup"]))


def _decode_topic(t: list[Any]) -> TopicInfo:
    return TopicInfo(str(t[0]), int(t[1]), int(t[2]), tuple((str(k), str(v)) for k, v in t[3]))


def decode(group_id: str, value: bytes) -> StreamsGroup:
    """The group a record holds; ValueError if it is not one this broker wrote."""
    if len(value) < 2 or _I16.unpack_from(value)[0] != VERSION:
        raise ValueError("unknown streams group snapshot version")
    state = json.loads(value[2:])
    group = StreamsGroup(group_id)
    group.group_epoch, group.assignment_epoch = int(state["group_epoch"]), int(state["assignment_epoch"])
    group.assignment_timestamp_ms = int(state["assignment_timestamp_ms"])
    group.metadata_hash = int(state["metadata_hash"])
    t = state["topology"]
    if t is not None:
        group.topology = Topology(int(t["epoch"]), tuple(Subtopology(
            str(s["id"]), tuple(s["source"]), tuple(s["sink"]), tuple(_decode_topic(c) for c in s["changelog"]),
            tuple(_decode_topic(r) for r in s["repartition"]), tuple(frozenset(g) for g in s["copartition"]))
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
            client_tags=tuple((str(k), str(v)) for k, v in m["client_tags"]), assigned=_decode_tuple(m["assigned"]),
            pending_revocation=_decode_tuple(m["pending_revocation"]),
            active_epochs={(str(s), int(p)): int(e) for s, p, e in m["active_epochs"]}))
    group.target_assignment = {str(member_id): _decode_tuple(t) for member_id, t in state["target"].items()}
    return group
