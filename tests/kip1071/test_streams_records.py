"""A streams group in __consumer_offsets in Kafka 4.4's record formats (streams_records.py): the bytes of the
keys, which records a change writes, the tombstones of a member that goes and of a deleted group, replay, and
the upgrade from Samsa's own 32002 record."""

from __future__ import annotations

import io
import json
import shutil
import struct
import subprocess
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import pytest
from kio.serial import entity_writer

from samsa.broker.group import streams_records
from samsa.broker.group.batches import encode_batch
from samsa.broker.group.classic_group import GroupRecord
from samsa.broker.group.records import StreamsGroupSnapshotKey, decode_key, encode_key
from samsa.broker.group.streams_config import StreamsGroupConfig
from samsa.broker.group.streams_coordinator import StreamsGroupCoordinator
from samsa.broker.group.streams_group import (
    StreamsGroup,
    StreamsGroupMember,
    StreamsMemberState,
    Subtopology,
    TasksTuple,
    TopicInfo,
    Topology,
)
from samsa.broker.group.streams_keys import StreamsGroupKey, decode_value, record_classes
from samsa.kproto.errors import ErrorCode
from samsa.storage import Log, LogConfig
from tests.kip1071.test_streams_coordinator import ALL, beat, join, ready_catalog


def _coordinator(written: list[GroupRecord]) -> StreamsGroupCoordinator:
    return StreamsGroupCoordinator(StreamsGroupConfig(initial_rebalance_delay_ms=0, assignment_interval_ms=0),
                                   lambda _g: False, written.append)


def _types(records: list[GroupRecord]) -> list[tuple[int, str, bool]]:
    """(record type, member id, tombstone?) of each record."""
    out = []
    for r in records:
        key = decode_key(r.key)
        assert isinstance(key, StreamsGroupKey)
        out.append((key.record_type, key.member_id, r.value is None))
    return out


def _load(records: list[GroupRecord]) -> dict[str, StreamsGroup]:
    groups: dict[str, StreamsGroup] = {}
    for r in records:
        key = decode_key(r.key)
        if isinstance(key, StreamsGroupSnapshotKey):
            streams_records.replay_legacy(groups, key.group_id, r.value)
        else:
            assert isinstance(key, StreamsGroupKey)
            streams_records.replay(groups, key, r.value)
    return groups


def _str(s: str) -> bytes:
    return struct.pack(">h", len(s)) + s.encode()


def test_keys_are_the_record_type_then_kafkas_key_struct_and_values_start_with_version_0() -> None:
    assert streams_records.key(17, "app") == struct.pack(">h", 17) + _str("app")
    assert streams_records.key(22, "app", "m1") == struct.pack(">h", 22) + _str("app") + _str("m1")
    assert decode_key(streams_records.key(19, "app", "m1")) == StreamsGroupKey(19, "app", "m1")
    group = StreamsGroup("app")
    # A new group's epochs are no record (Kafka writes none for them either); moved, they are.
    assert streams_records.changes(group, {}, {"num.standby.replicas": "0"}) == ([], {
        streams_records.key(17, "app"): ((1, 0), mock.ANY), streams_records.key(20, "app"): ((1, 0), mock.ANY)})
    group.group_epoch = group.assignment_epoch = 2
    records, _ = streams_records.changes(group, {}, {"num.standby.replicas": "0"})
    # Its metadata (epoch 2, hash 0, the assignment configs as tag 1; the validated topology epoch is at its
    # default -1, which a tagged field leaves out) and target metadata (epoch 2, no timestamp: no tag).
    assert _types(records) == [(17, "", False), (20, "", False)]
    assert records[0].value == (struct.pack(">hiq", 0, 2, 0) + b"\x01" + b"\x01\x19"
                                + b"\x02\x15num.standby.replicas\x020\x00")
    assert records[1].value == struct.pack(">hi", 0, 2) + b"\x00"


def _full_group() -> StreamsGroup:
    group = StreamsGroup("app")
    group.group_epoch, group.assignment_epoch, group.assignment_timestamp_ms = 7, 6, 1234
    group.metadata_hash = -42
    group.topology = Topology(3, (
        Subtopology("0", source_topics=("a", "b"), repartition_sink_topics=("app-rep",),
                    copartition_groups=(frozenset({"a", "b"}),)),
        Subtopology("1", repartition_source_topics=(TopicInfo("app-rep", 4, 3, (("cleanup.policy", "delete"),)),),
                    state_changelog_topics=(TopicInfo("app-changelog", 0, 0, (("x", "y"),)),)),
    ))
    group.update_member(StreamsGroupMember(
        "m1", member_epoch=7, previous_member_epoch=5, state=StreamsMemberState.UNREVOKED_TASKS, instance_id="i1",
        rack_id="r1", client_id="c1", client_host="/127.0.0.1", rebalance_timeout_ms=30_000, topology_epoch=3,
        process_id="p1", user_endpoint=("localhost", 8080), client_tags=(("az", "a"), ("zone", "z1")),  # by key
        assigned=TasksTuple({"0": frozenset({0, 1})}, {"1": frozenset({2})}),
        pending_revocation=TasksTuple({"1": frozenset({3})}),
        active_epochs={("0", 0): 5, ("0", 1): 7, ("1", 3): 2}))
    group.update_member(StreamsGroupMember("m2", member_epoch=6, previous_member_epoch=6, process_id="p2"))
    group.target_assignment = {"m1": TasksTuple({"0": frozenset({0, 1})}, {"1": frozenset({2})}),
                               "m2": TasksTuple({"1": frozenset({3})})}
    return group


def test_records_replay_into_the_same_group() -> None:
    group = _full_group()
    group.configured = SimpleNamespace(ready=True)  # its topology validated: the metadata says so (epoch 3)
    records, written = streams_records.changes(group, {}, {"num.standby.replicas": "1"})
    # Kafka's heartbeat order: members, topology, group metadata, targets, target metadata, current assignments.
    assert _types(records) == [(19, "m1", False), (19, "m2", False), (23, "", False), (17, "", False),
                               (21, "m1", False), (21, "m2", False), (20, "", False), (22, "m1", False),
                               (22, "m2", False)]
    # Kafka's MemberState bytes: STABLE 1, UNREVOKED_TASKS 2 (not the order of our enum).
    states = [decode_value(record_classes(22)[1], r.value).state for r in records if r.key[:2] == b"\x00\x16"]
    assert states == [2, 1]
    loaded = _load(records)["app"]
    assert (loaded.group_epoch, loaded.assignment_epoch, loaded.assignment_timestamp_ms, loaded.metadata_hash) == (
        7, 6, 1234, -42)
    assert loaded.topology == group.topology
    assert loaded.members == group.members and loaded.target_assignment == group.target_assignment
    assert loaded.static_member("i1") is not None
    # What the load remembers is what was written: the same group writes nothing again.
    assert set(loaded.written) == set(written)
    assert streams_records.changes(loaded, loaded.written, {"num.standby.replicas": "1"})[0] == []
    # A loaded group's topology is configured again at its next heartbeat (not ready till then, though its record
    # says epoch 3 was validated): the group metadata is written again only when its epoch or hash moves.
    assert loaded.configured is None
    assert decode_value(record_classes(17)[1], records[3].value).validated_topology_epoch == 3
    assert streams_records.changes(loaded, loaded.written, {"num.standby.replicas": "1"})[0] == []


def test_values_are_the_bytes_of_kios_own_writer_and_reader() -> None:
    """encode_value uses kproto's compiled writer for speed: its bytes must be kio's entity_writer's, and kio's
    reader must give the value back."""
    records, _ = streams_records.changes(_full_group(), {}, {"num.standby.replicas": "1"})
    for r in records:
        key = decode_key(r.key)
        assert isinstance(key, StreamsGroupKey) and r.value is not None
        value_class = record_classes(key.record_type)[1]
        value = decode_value(value_class, r.value)
        out = io.BytesIO()
        entity_writer(value_class)(out, value)
        assert r.value[2:] == out.getvalue() and r.value[:2] == b"\x00\x00"


def test_a_change_writes_only_the_records_that_changed() -> None:
    written: list[GroupRecord] = []
    c, catalog = _coordinator(written), ready_catalog()
    c.heartbeat(join("a"), catalog, 0)
    assert [t for t, _, _ in _types(written)] == [19, 23, 17, 21, 20, 22]
    del written[:]
    a = c.heartbeat(join("b"), catalog, 1)  # b joins: its metadata, the epoch bump, the new targets
    types = _types(written)
    assert types[:2] == [(19, "b", False), (17, "", False)] and (23, "", False) not in types
    del written[:]
    a = c.heartbeat(beat("a", 2, TasksTuple(ALL)), catalog, 2)  # a revokes: its current assignment only
    assert a.error is ErrorCode.none and _types(written) == [(22, "a", False)]


def test_a_member_that_leaves_is_tombstoned_in_kafkas_order_and_replay_drops_it() -> None:
    written: list[GroupRecord] = []
    c, catalog = _coordinator(written), ready_catalog()
    c.heartbeat(join("a"), catalog, 0)
    c.heartbeat(join("b"), catalog, 1)
    start = len(written)
    c.heartbeat(beat("b", -1), catalog, 2)
    types = _types(written[start:])
    # Kafka's removeStreamsMember: current assignment, target, metadata; then the bumped group epoch.
    assert types[:4] == [(22, "b", True), (21, "b", True), (19, "b", True), (17, "", False)]
    loaded = _load(written)["app"]
    assert set(loaded.members) == {"a"} and set(loaded.target_assignment) == {"a"}
    assert loaded.group_epoch == c.groups["app"].group_epoch


def test_a_deleted_group_leaves_kafkas_tombstones_and_is_gone_after_a_load() -> None:
    written: list[GroupRecord] = []
    c, catalog = _coordinator(written), ready_catalog()
    c.heartbeat(join("a"), catalog, 0)
    c.heartbeat(beat("a", -1), catalog, 1)
    start = len(written)
    assert c.delete_group("app") is ErrorCode.none
    # Kafka's createGroupTombstoneRecords: target metadata, group metadata, topology (no members are left).
    assert _types(written[start:]) == [(20, "", True), (17, "", True), (23, "", True)]
    assert _load(written) == {}


def _legacy_record(group_id: str) -> bytes:
    """A 32002 record as Samsa wrote it before it wrote Kafka's formats."""
    tasks = {"active": {"0": [0, 1]}, "standby": {}, "warmup": {}}
    none: dict[str, dict[str, list[int]]] = {"active": {}, "standby": {}, "warmup": {}}
    state = {"group_epoch": 3, "assignment_epoch": 3, "assignment_timestamp_ms": 5, "metadata_hash": 9,
             "topology": {"epoch": 0, "subtopologies": [{"id": "0", "source": ["in"], "sink": [], "changelog": [],
                                                         "repartition": [], "copartition": []}]},
             "members": [{"id": "m1", "epoch": 3, "previous_epoch": 2, "state": 0, "instance_id": None,
                          "rack_id": None, "client_id": "c", "client_host": "/h", "rebalance_timeout_ms": 100,
                          "topology_epoch": 0, "process_id": "p", "user_endpoint": None, "client_tags": [],
                          "assigned": tasks, "pending_revocation": none, "active_epochs": [["0", 0, 3], ["0", 1, 2]]}],
             "target": {"m1": tasks}}
    return struct.pack(">h", 0) + json.dumps(state).encode()


def test_a_legacy_32002_record_is_loaded_then_replaced_by_kafkas_records() -> None:
    legacy = GroupRecord("app", encode_key(StreamsGroupSnapshotKey("app")), _legacy_record("app"))
    groups = _load([legacy])
    group = groups["app"]
    assert group.group_epoch == 3 and group.members["m1"].assigned.active == {"0": frozenset({0, 1})}
    assert group.members["m1"].active_epochs == {("0", 0): 3, ("0", 1): 2}
    records, _ = streams_records.changes(group, group.written, {"num.standby.replicas": "0"})
    # The old record is tombstoned first, then the group is written whole in Kafka's formats.
    assert records[0] == GroupRecord("app", legacy.key, None)
    assert [t for t, _, _ in _types(records[1:])] == [19, 23, 17, 21, 20, 22]
    reloaded = _load([legacy, *records])["app"]
    assert reloaded.members == group.members and reloaded.target_assignment == group.target_assignment
    assert reloaded.topology == group.topology and reloaded.group_epoch == 3
    assert list(reloaded.written) == [r.key for r in records[1:]]  # nothing left of the 32002 record


ORACLE = Path(__file__).resolve().parent.parent.parent / "compat-tests" / "oracle"


def _have_kafka_jars() -> bool:
    lib = ORACLE / "lib"
    return shutil.which("java") is not None and lib.is_dir() and any(lib.glob("kafka_*.jar"))


@pytest.mark.slow
@pytest.mark.skipif(not _have_kafka_jars(), reason="Kafka jars (compat-tests/oracle/lib) or java missing")
def test_kafkas_dump_log_offsets_decoder_reads_the_records(tmp_path: Path) -> None:
    written: list[GroupRecord] = []
    c, catalog = _coordinator(written), ready_catalog()
    c.heartbeat(join("a", user_endpoint=("localhost", 8080), client_tags=(("zone", "z1"),)), catalog, 0)
    c.heartbeat(join("b"), catalog, 1)
    c.heartbeat(beat("a", 2, TasksTuple(ALL)), catalog, 2)
    c.heartbeat(beat("b", -1), catalog, 3)
    log = Log.open(tmp_path / "__consumer_offsets-0", LogConfig(), now_ms=1000)
    log.append_as_leader(encode_batch([(r.key, r.value) for r in written], 1000), leader_epoch=0, now_ms=1000)
    log.close()
    segment = tmp_path / "__consumer_offsets-0" / "00000000000000000000.log"
    out = subprocess.run([str(ORACLE / "kafka-run.sh"), "org.apache.kafka.tools.DumpLogSegments", "--offsets-decoder",
                          "--files", str(segment)], capture_output=True, text=True, timeout=300, check=True).stdout
    lines = [line for line in out.splitlines() if line.startswith("| offset:")]
    assert len(lines) == len(written) and "Unknown" not in out and "error" not in out.lower()
    assert ('key: {"type":"19","data":{"groupId":"app","memberId":"a"}} payload: {"version":"0","data":{'
            '"instanceId":null,"rackId":null,"clientId":"","clientHost":"","rebalanceTimeoutMs":30000,"topologyEpoch":0,'
            '"processId":"a","userEndpoint":{"host":"localhost","port":8080},"clientTags":[{"key":"zone","value":"z1"}]}}'
            ) in out
    assert 'key: {"type":"23","data":{"groupId":"app"}} payload: {"version":"0","data":{"epoch":0,' in out
    assert '"lastAssignmentConfigs":[{"key":"num.standby.replicas","value":"0"}]' in out
    assert '"activeTasks":[{"subtopologyId":"0","partitions":[0,1],"assignmentEpochs":[2,2]}' in out
    assert 'key: {"type":"19","data":{"groupId":"app","memberId":"b"}} payload: <DELETE>' in out


def test_a_corrupt_record_is_an_error_the_loader_skips_not_a_crash() -> None:
    """The loader logs and skips a record that raises ValueError (service._load_partition)."""
    good = streams_records.encode_current_assignment(_full_group().members["m1"])
    for bad in (good[:7], good[:2] + b"\xff" * 40, b"\x00\x01" + good[2:]):
        with pytest.raises(ValueError):
            streams_records.replay({}, StreamsGroupKey(22, "app", "m1"), bad)
    with pytest.raises(ValueError):
        decode_key(streams_records.key(19, "app", "m1")[:-1])
