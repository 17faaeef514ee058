"""Preferred/unclean leader elections, the leader balancer and partition reassignments, decided by an
in-process controller over a one-voter quorum (partitions with several replicas are injected as
PartitionRecords); then the three APIs over the wire of one `samsa serve`, per version.

Real multi-broker reassignments (followers catching up, logs moving) are in tests/cluster.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from samsa.broker.client import Connection
from samsa.broker.config import BrokerConfig
from samsa.broker.controller import AlterPartitionChange, Controller
from samsa.broker.metadata.image import MetadataImage, PartitionImage
from samsa.broker.metadata.log import METADATA_LOG_CONFIG
from samsa.broker.metadata.quorum import Endpoint, MetadataQuorum
from samsa.broker.metadata.records import (
    ConfigRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    TopicRecord,
    decode_record,
    encode_record,
)
from samsa.broker.reassignment import ElectionType, OngoingReassignment, PartitionResult, TopicResults
from samsa.kproto.errors import ErrorCode
from samsa.storage.log import Log

BROKERS = (1, 2, 3, 4)


class Harness:
    """A one-voter controller with brokers 1-4 registered and unfenced."""

    def __init__(self, directory: Path, overrides: dict[str, str] | None = None) -> None:
        self.directory = directory
        self.overrides = {"node.id": "1", "broker.session.timeout.ms": "1000", **(overrides or {})}
        self.log = Log.open(directory / "__cluster_metadata-0", METADATA_LOG_CONFIG, now_ms=int(time.time() * 1000))
        self.quorum = MetadataQuorum(node_id=1, cluster_id="c", voters={1: Endpoint("127.0.0.1", 0)}, log=self.log)
        self.controller = Controller(BrokerConfig(overrides=self.overrides, data_dir=directory), self.quorum)
        self.epochs: dict[int, int] = {}

    def register(self, brokers: tuple[int, ...] = BROKERS) -> None:
        c = self.controller
        for node in brokers:
            self.epochs[node] = c.register_broker(node, f"inc-{node}", "h", 9000 + node, None, 0).result()
        for node in brokers:
            c.heartbeat(node, self.epochs[node], c.image.offset, False, False, 0)
        assert c.live_brokers() == brokers

    def fence(self, node: int) -> None:
        error, beat = self.controller.heartbeat(node, self.epochs[node], self.controller.image.offset, True, False, 0)
        assert error == ErrorCode.none and beat is not None and beat.result().is_fenced

    def write(self, *records: MetadataRecord) -> None:
        self.quorum.write_nowait(list(records))

    def topic(self, name: str, *partitions: tuple[tuple[int, ...], tuple[int, ...], int]) -> None:
        """A topic whose partition i has (replicas, isr, leader) = partitions[i]."""
        self.write(TopicRecord(name, f"id-{name}"), *(
            PartitionRecord(f"id-{name}", i, replicas, isr, leader, 0, 0)
            for i, (replicas, isr, leader) in enumerate(partitions)))

    def part(self, name: str, partition: int = 0) -> PartitionImage:
        return self.controller.image.topics_by_name[name].partitions[partition]

    def elect(self, election: ElectionType, partitions: list[tuple[str, list[int]]] | None
              ) -> dict[tuple[str, int], ErrorCode]:
        results = self.controller.reassignments.elect_leaders(election, partitions).result()
        return _codes(results)

    def reassign(self, name: str, partition: int, target: tuple[int, ...] | None) -> ErrorCode:
        (topic,) = self.controller.reassignments.alter([(name, [(partition, target)])]).result()
        (row,) = topic.partitions
        return row.error_code

    def ongoing(self, topics: list[tuple[str, list[int]]] | None = None
                ) -> dict[tuple[str, int], OngoingReassignment]:
        return {(name, o.partition_id): o for name, rows in self.controller.reassignments.list_ongoing(topics)
                for o in rows}

    def alter_isr(self, name: str, partition: int, isr: tuple[int, ...]) -> ErrorCode:
        p = self.part(name, partition)
        error, pending = self.controller.alter_partition(p.leader, self.epochs[p.leader], [
            AlterPartitionChange(f"id-{name}", partition, p.leader_epoch, p.partition_epoch, isr)])
        assert error == ErrorCode.none and pending is not None
        (result,) = pending.result()
        return result.error_code

    def close(self) -> None:
        self.log.close()


def _codes(results: list[TopicResults]) -> dict[tuple[str, int], ErrorCode]:
    return {(t.topic, r.partition_id): r.error_code for t in results for r in t.partitions}


@pytest.fixture
def h(tmp_path: Path) -> Iterator[Harness]:
    harness = Harness(tmp_path)
    harness.register()
    yield harness
    harness.close()


# --- ElectLeaders ------------------------------------------------------------------------------------


def test_preferred_election_moves_leadership_to_the_first_replica_once(h: Harness) -> None:
    h.topic("t", ((1, 2, 3), (1, 2, 3), 2))
    assert h.elect(ElectionType.PREFERRED, [("t", [0])]) == {("t", 0): ErrorCode.none}
    p = h.part("t")
    assert (p.leader, p.leader_epoch, p.isr) == (1, 1, (1, 2, 3))
    # It already leads: nothing to do, nothing written.
    offset = h.controller.image.offset
    assert h.elect(ElectionType.PREFERRED, [("t", [0])]) == {("t", 0): ErrorCode.election_not_needed}
    assert h.controller.image.offset == offset and h.part("t").leader_epoch == 1


def test_preferred_election_needs_the_preferred_replica_in_the_isr_and_live(h: Harness) -> None:
    h.topic("out-of-isr", ((1, 2), (2,), 2))
    h.topic("fenced", ((3, 2), (3, 2), 2))
    h.fence(3)  # leaves the ISR of "fenced" as it is fenced
    h.write(PartitionChangeRecord("id-fenced", 0, (3, 2), None, None))  # and pretend it were still in sync
    codes = h.elect(ElectionType.PREFERRED, [("out-of-isr", [0]), ("fenced", [0])])
    assert codes == {("out-of-isr", 0): ErrorCode.preferred_leader_not_available,
                     ("fenced", 0): ErrorCode.preferred_leader_not_available}
    assert h.part("out-of-isr").leader == 2 and h.part("fenced").leader == 2


def test_unknown_topics_and_partitions_are_named_in_the_answer(h: Harness) -> None:
    h.topic("t", ((1, 2), (1, 2), 2))
    codes = h.elect(ElectionType.PREFERRED, [("nope", [0]), ("t", [0, 7])])
    assert codes == {("nope", 0): ErrorCode.unknown_topic_or_partition, ("t", 0): ErrorCode.none,
                     ("t", 7): ErrorCode.unknown_topic_or_partition}


def test_all_partitions_leaves_out_those_that_need_no_election(h: Harness) -> None:
    h.topic("a", ((1, 2), (1, 2), 1), ((2, 1), (2, 1), 1), ((3, 4), (4,), 4))
    h.topic("b", ((4, 3), (4, 3), 4))
    results = h.controller.reassignments.elect_leaders(ElectionType.PREFERRED, None).result()
    assert {t.topic: t.partitions for t in results} == {
        "a": (PartitionResult(1, ErrorCode.none),
              PartitionResult(2, ErrorCode.preferred_leader_not_available, results[0].partitions[1].error_message)),
        "b": (),
    }
    assert h.part("a", 1).leader == 2


def test_unclean_election_only_for_a_partition_without_a_leader(h: Harness) -> None:
    h.topic("led", ((1, 2), (1,), 1))
    h.topic("offline", ((2, 3), (2,), 2))
    h.topic("dead", ((2,), (2,), 2))
    h.fence(2)  # offline and dead lose their leader: 2 was their only in-sync replica
    assert h.part("offline").leader == -1 and h.part("dead").leader == -1
    codes = h.elect(ElectionType.UNCLEAN, [("led", [0]), ("offline", [0]), ("dead", [0])])
    assert codes == {("led", 0): ErrorCode.election_not_needed, ("offline", 0): ErrorCode.none,
                     ("dead", 0): ErrorCode.eligible_leaders_not_available}
    offline = h.part("offline")
    assert (offline.leader, offline.isr, offline.leader_epoch) == (3, (3,), 2)  # from outside the ISR
    assert h.part("led").leader == 1


def test_unclean_election_prefers_a_live_in_sync_replica(h: Harness) -> None:
    # No leader, though an in-sync replica is live (say, a controller restarted before electing one).
    h.topic("t", ((2, 3, 4), (3, 4), -1))
    assert h.elect(ElectionType.UNCLEAN, [("t", [0])]) == {("t", 0): ErrorCode.none}
    assert (h.part("t").leader, h.part("t").isr) == (3, (3, 4))


# --- the leader balancer -----------------------------------------------------------------------------


def _imbalanced(h: Harness, away: int, total: int = 10) -> None:
    """Broker 1 is the preferred replica of `total` partitions and leads all but `away` of them."""
    h.topic("bal", *(((1, 2), (1, 2), 2 if i < away else 1) for i in range(total)))


def test_the_balancer_moves_leaders_back_once_a_broker_is_over_the_imbalance_percentage(h: Harness) -> None:
    _imbalanced(h, away=2)  # 20% > 10%
    reassignments = h.controller.reassignments
    assert reassignments.tick(0) is None  # the first check comes one interval after activation
    assert reassignments.tick(299_000) is None
    pending = reassignments.tick(300_000)
    assert pending is not None and pending.result() == 2
    assert all(p.leader == 1 for p in h.controller.image.topics_by_name["bal"].partitions.values())


def test_the_balancer_tolerates_the_imbalance_percentage(h: Harness) -> None:
    _imbalanced(h, away=1)  # 10% is not over 10%
    assert h.controller.reassignments.tick(0) is None
    assert h.controller.reassignments.tick(300_000) is None
    assert h.part("bal", 0).leader == 2


def test_the_balancer_can_be_turned_off(tmp_path: Path) -> None:
    h = Harness(tmp_path, {"auto.leader.rebalance.enable": "false", "leader.imbalance.check.interval.seconds": "1"})
    h.register()
    _imbalanced(h, away=5)
    assert h.controller.reassignments.tick(0) is None
    assert h.controller.reassignments.tick(5_000) is None
    assert h.part("bal", 0).leader == 2
    h.close()


def test_the_balancer_skips_a_preferred_replica_out_of_the_isr(h: Harness) -> None:
    h.topic("bal", ((1, 2), (2,), 2), ((1, 2), (1, 2), 2))
    h.controller.reassignments.tick(0)
    pending = h.controller.reassignments.tick(300_000)
    assert pending is not None and pending.result() == 1
    assert h.part("bal", 0).leader == 2 and h.part("bal", 1).leader == 1


# --- AlterPartitionReassignments / ListPartitionReassignments ---------------------------------------


def test_a_move_adds_the_target_then_completes_when_it_joins_the_isr(h: Harness) -> None:
    h.topic("t", ((1, 2), (1, 2), 1))
    assert h.reassign("t", 0, (2, 3)) == ErrorCode.none
    p = h.part("t")
    # The target first, then the replicas being removed; ISR and leader unchanged until 3 catches up.
    assert (p.replicas, p.adding_replicas, p.removing_replicas, p.isr, p.leader) == ((2, 3, 1), (3,), (1,), (1, 2), 1)
    assert p.leader_epoch == 0  # adding a replica keeps the epoch
    assert h.ongoing() == {("t", 0): OngoingReassignment(0, (2, 3, 1), (3,), (1,))}
    assert h.ongoing([("t", [0, 1]), ("nope", [0])]) == h.ongoing()

    # The leader adds 3 to the ISR: in the same record the reassignment finishes, and since the leader
    # (1) is being removed, 2 (the first in-sync target replica) leads.
    assert h.alter_isr("t", 0, (1, 2, 3)) == ErrorCode.new_leader_elected
    p = h.part("t")
    assert (p.replicas, p.isr, p.leader, p.adding_replicas, p.removing_replicas) == ((2, 3), (2, 3), 2, (), ())
    assert p.leader_epoch == 1
    assert h.ongoing() == {}


def test_partitions_added_during_a_reassignment_get_the_target_replication_factor(h: Harness) -> None:
    h.topic("t", ((1, 2), (1, 2), 1))
    assert h.reassign("t", 0, (2, 3)) == ErrorCode.none
    assert h.part("t").replicas == (2, 3, 1)  # the target, then the replica being removed
    assert h.controller.create_partitions("t", 2, None, validate_only=False).result() == (ErrorCode.none, None)
    assert len(h.part("t", 1).replicas) == 2


def test_a_move_that_keeps_the_leader_completes_in_its_isr_change(h: Harness) -> None:
    h.topic("t", ((1, 2), (1, 2), 1))
    assert h.reassign("t", 0, (1, 3)) == ErrorCode.none
    assert h.alter_isr("t", 0, (1, 2)) == ErrorCode.none  # an unrelated change: 3 not in yet
    assert h.part("t").adding_replicas == (3,)
    assert h.alter_isr("t", 0, (1, 2, 3)) == ErrorCode.none
    p = h.part("t")
    # Same leader, but replica 2 left the replica set: the epoch goes up, so 2 is fenced if it fetches.
    assert (p.replicas, p.isr, p.leader, p.leader_epoch) == ((1, 3), (1, 3), 1, 1)


def test_a_reassignment_the_isr_already_allows_completes_at_once(h: Harness) -> None:
    h.topic("t", ((1, 2, 3), (1, 2, 3), 1), ((1, 2), (1, 2), 1))
    assert h.reassign("t", 0, (3, 2)) == ErrorCode.none  # fewer replicas, all in sync
    p = h.part("t", 0)
    assert (p.replicas, p.isr, p.leader, p.adding_replicas, p.removing_replicas) == ((3, 2), (2, 3), 3, (), ())
    assert h.reassign("t", 1, (2, 1)) == ErrorCode.none  # a new preferred replica only
    p = h.part("t", 1)
    assert (p.replicas, p.leader) == ((2, 1), 1)
    # The same assignment again writes nothing.
    offset = h.controller.image.offset
    assert h.reassign("t", 1, (2, 1)) == ErrorCode.none and h.controller.image.offset == offset
    assert h.ongoing() == {}


def test_invalid_assignments_unknown_partitions_and_cancels_of_nothing_are_refused(h: Harness) -> None:
    h.topic("t", ((1, 2), (1, 2), 1), ((1, 2), (1, 2), 1))
    offset = h.controller.image.offset
    assert h.reassign("t", 0, ()) == ErrorCode.invalid_replica_assignment
    assert h.reassign("t", 0, (2, 2)) == ErrorCode.invalid_replica_assignment
    assert h.reassign("t", 0, (2, 9)) == ErrorCode.invalid_replica_assignment  # 9 never registered
    assert h.reassign("t", 5, (2, 3)) == ErrorCode.unknown_topic_or_partition
    assert h.reassign("nope", 0, (2, 3)) == ErrorCode.unknown_topic_or_partition
    assert h.reassign("t", 0, None) == ErrorCode.no_reassignment_in_progress
    assert h.controller.image.offset == offset
    # In one request, the refused rows do not stop the others.
    results = h.controller.reassignments.alter([("t", [(0, (1, 1)), (1, (2, 3))])]).result()
    assert _codes(results) == {("t", 0): ErrorCode.invalid_replica_assignment, ("t", 1): ErrorCode.none}
    assert h.part("t", 1).adding_replicas == (3,) and h.part("t", 0).replicas == (1, 2)


def test_without_allow_replication_factor_change_the_target_keeps_the_replica_count(h: Harness) -> None:
    """KIP-860 (AlterPartitionReassignments v1): the count compared is the replica set the partition is headed
    for, so a reassignment under way from (1, 2) to (2, 3) may be replaced by another two-replica target."""
    h.topic("t", ((1, 2), (1, 2), 1))

    def reassign(target: tuple[int, ...]) -> tuple[ErrorCode, str | None]:
        (topic,) = h.controller.reassignments.alter([("t", [(0, target)])], False).result()
        (row,) = topic.partitions
        return row.error_code, row.error_message

    offset = h.controller.image.offset
    assert reassign((1, 2, 3)) == (ErrorCode.invalid_replication_factor,
                                   "The replication factor is changed from 2 to 3")
    assert reassign((3,)) == (ErrorCode.invalid_replication_factor, "The replication factor is changed from 2 to 1")
    assert reassign((3, 3))[0] == ErrorCode.invalid_replica_assignment  # the assignment is checked first
    assert h.controller.image.offset == offset
    assert reassign((2, 3)) == (ErrorCode.none, None)
    assert h.part("t").replicas == (2, 3, 1)  # under way: three replicas, headed for two
    assert reassign((3, 4)) == (ErrorCode.none, None)
    assert reassign((2, 3, 4))[0] == ErrorCode.invalid_replication_factor
    assert h.reassign("t", 0, (2, 3, 4)) == ErrorCode.none  # allowed by default (v0's meaning)


def test_a_fenced_but_registered_broker_is_a_valid_target(h: Harness) -> None:
    h.topic("t", ((1, 2), (1, 2), 1))
    h.fence(3)
    assert h.reassign("t", 0, (1, 3)) == ErrorCode.none  # Kafka checks registration, not liveness
    assert h.part("t").adding_replicas == (3,)


def test_cancel_reverts_to_the_original_replicas(h: Harness) -> None:
    h.topic("t", ((1, 2), (1, 2), 1))
    assert h.reassign("t", 0, (3, 4)) == ErrorCode.none
    assert h.part("t").replicas == (3, 4, 1, 2)
    assert h.alter_isr("t", 0, (1, 2, 3)) == ErrorCode.none  # 3 caught up, 4 not yet
    assert h.reassign("t", 0, None) == ErrorCode.none
    p = h.part("t")
    assert (p.replicas, p.isr, p.leader, p.adding_replicas, p.removing_replicas) == ((1, 2), (1, 2), 1, (), ())
    assert h.ongoing() == {}


def test_cancel_when_only_added_replicas_are_in_sync_needs_unclean_election(h: Harness) -> None:
    h.topic("t", ((1,), (1,), 1))
    h.topic("u", ((1,), (1,), 1))
    h.write(ConfigRecord(2, "u", "unclean.leader.election.enable", "true"))
    for name in ("t", "u"):
        assert h.reassign(name, 0, (2,)) == ErrorCode.none
        # As if 2 had caught up and 1 then left the ISR and the leadership (2 stays in the ISR alone).
        h.write(PartitionChangeRecord(f"id-{name}", 0, (2,), 2, None))
    assert h.reassign("t", 0, None) == ErrorCode.invalid_replica_assignment
    assert h.part("t").adding_replicas == (2,)
    assert h.reassign("u", 0, None) == ErrorCode.none
    p = h.part("u")
    assert (p.replicas, p.isr, p.leader, p.adding_replicas) == ((1,), (1,), 1, ())


def test_a_new_target_replaces_an_ongoing_reassignment(h: Harness) -> None:
    h.topic("t", ((1, 2), (1, 2), 1))
    assert h.reassign("t", 0, (2, 3)) == ErrorCode.none
    assert h.reassign("t", 0, (2, 4)) == ErrorCode.none
    p = h.part("t")
    # From the current (union) replica list: 3 is now among those being removed.
    assert (p.replicas, p.adding_replicas, p.removing_replicas) == ((2, 4, 1, 3), (4,), (1, 3))
    assert h.alter_isr("t", 0, (1, 2, 4)) == ErrorCode.new_leader_elected
    p = h.part("t")
    assert (p.replicas, p.isr, p.leader) == ((2, 4), (2, 4), 2)


def test_a_new_active_controller_carries_on_with_a_reassignment(tmp_path: Path) -> None:
    h = Harness(tmp_path)
    h.register()
    h.topic("t", ((1, 2), (1, 2), 1))
    assert h.reassign("t", 0, (1, 3)) == ErrorCode.none
    h.close()

    h2 = Harness(tmp_path)  # replays the log (a restart: a new leader epoch, the same metadata)
    h2.epochs = dict(h.epochs)
    assert h2.ongoing() == {("t", 0): OngoingReassignment(0, (1, 3, 2), (3,), (2,))}
    assert h2.alter_isr("t", 0, (1, 2, 3)) == ErrorCode.none
    assert (h2.part("t").replicas, h2.part("t").isr) == ((1, 3), (1, 3))
    h2.close()


def test_the_periodic_pass_finishes_a_reassignment_the_isr_already_allows(h: Harness) -> None:
    # Written by hand: a reassignment whose target is already in sync (no AlterPartition will come).
    h.write(TopicRecord("t", "id-t"), PartitionRecord("id-t", 0, (2, 3, 1), (1, 2, 3), 1, 0, 0, (1,), (3,)))
    pending = h.controller.reassignments.tick(0)
    assert pending is not None and pending.result() == 1
    p = h.part("t")
    assert (p.replicas, p.isr, p.leader, p.adding_replicas, p.removing_replicas) == ((2, 3), (2, 3), 2, (), ())


def test_reassignment_fields_survive_snapshots_and_old_records_still_decode(h: Harness) -> None:
    h.topic("t", ((1, 2), (1, 2), 1))
    h.reassign("t", 0, (2, 3))
    image = h.controller.image
    rebuilt = MetadataImage().apply(image.to_records(), image.offset)
    assert rebuilt.topics_by_name["t"].partitions[0] == image.topics_by_name["t"].partitions[0]
    # Records written before reassignments existed (no adding/removing fields) decode with defaults...
    old = {"type": "PartitionRecord", "version": 0, "topic_id": "x", "partition_id": 0, "replicas": [1],
           "isr": [1], "leader": 1, "leader_epoch": 0, "partition_epoch": 0}
    record = decode_record(json.dumps(old).encode())
    assert isinstance(record, PartitionRecord) and record.adding_replicas == () and record.removing_replicas == ()
    change = decode_record(b'{"type":"PartitionChangeRecord","version":0,"topic_id":"x","partition_id":0,'
                           b'"isr":[1],"leader":null,"replicas":null}')
    assert isinstance(change, PartitionChangeRecord) and change.adding_replicas is None
    # ...and records that do not use them encode exactly as before.
    assert json.loads(encode_record(PartitionRecord("x", 0, (1,), (1,), 1, 0, 0))) == old
    for with_fields in (PartitionChangeRecord("x", 0, None, None, (2, 3, 1), (1,), (3,)),
                        PartitionChangeRecord("x", 0, None, None, (2, 3), (), ()),  # () ends a reassignment
                        PartitionRecord("x", 0, (2, 1), (1,), 1, 0, 0, (1,), (2,))):
        assert decode_record(encode_record(with_fields)) == with_fields


# --- over the wire: one samsa serve (single broker), each API and version ----------------------------


def _create(conn: Connection, topic: str) -> None:
    r = conn.request(19, {"timeout": 10000, "validate_only": False, "topics": [
        {"name": topic, "num_partitions": 2, "replication_factor": 1, "assignments": (), "configs": ()}]})
    assert r.topics[0].error_code == ErrorCode.none


def test_the_apis_over_the_wire(conn: Connection) -> None:
    _create(conn, "wire")
    for version in (0, 1, 2):
        body = {"topic_partitions": [{"topic": "wire", "partitions": [0, 9]}], "timeout": 5000}
        if version >= 1:
            body["election_type"] = 1 if version == 2 else 0
        r = conn.request(43, body, version=version)
        (topic,) = r.replica_election_results
        codes = {p.partition_id: p.error_code for p in topic.partition_result}
        assert codes == {0: ErrorCode.election_not_needed, 9: ErrorCode.unknown_topic_or_partition}, version
        if version >= 1:
            assert r.error_code == ErrorCode.none
    r = conn.request(43, {"election_type": 0, "topic_partitions": None, "timeout": 5000}, version=2)
    assert all(not t.partition_result for t in r.replica_election_results)
    r = conn.request(43, {"election_type": 7, "topic_partitions": None, "timeout": 5000}, version=2)
    assert r.error_code == ErrorCode.invalid_request

    r = conn.request(45, {"timeout": 5000, "topics": [{"name": "wire", "partitions": [
        {"partition_index": 0, "replicas": [1]}, {"partition_index": 1, "replicas": [2]},
        {"partition_index": 2, "replicas": [1]}]}, {"name": "nope", "partitions": [
            {"partition_index": 0, "replicas": None}]}]})
    assert r.error_code == ErrorCode.none
    codes = {(t.name, p.partition_index): p.error_code for t in r.responses for p in t.partitions}
    assert codes == {("wire", 0): ErrorCode.none, ("wire", 1): ErrorCode.invalid_replica_assignment,
                     ("wire", 2): ErrorCode.unknown_topic_or_partition,
                     ("nope", 0): ErrorCode.unknown_topic_or_partition}
    r = conn.request(45, {"timeout": 5000, "topics": [{"name": "wire", "partitions": [
        {"partition_index": 0, "replicas": None}]}]})
    assert r.responses[0].partitions[0].error_code == ErrorCode.no_reassignment_in_progress
    for allow in (False, True):  # v1: the same replica count passes either way
        r = conn.request(45, {"timeout": 5000, "allow_replication_factor_change": allow, "topics": [
            {"name": "wire", "partitions": [{"partition_index": 0, "replicas": [1]}]}]}, version=1)
        assert (r.error_code, r.responses[0].partitions[0].error_code) == (ErrorCode.none, ErrorCode.none)

    for topics in (None, [{"name": "wire", "partition_indexes": [0, 1]}]):
        r = conn.request(46, {"timeout": 5000, "topics": topics})
        assert r.error_code == ErrorCode.none and r.topics == ()
