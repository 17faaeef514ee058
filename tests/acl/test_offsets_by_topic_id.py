"""OffsetCommit v10 and OffsetFetch v10 name topics by id (Kafka 4.4, KIP-848 follow-up), under ACLs.

As Kafka's KafkaApis: without READ on the group every partition, even of an unknown id, answers
GROUP_AUTHORIZATION_FAILED; an id no topic has (or the zero id) answers UNKNOWN_TOPIC_ID before any topic
authorization (it names no topic); a known id is resolved to its name for the topic's ACLs. Answers echo the
request's ids. Offsets are kept by topic name: v9 reads what v10 wrote.
"""

from __future__ import annotations

import uuid
from typing import Any

from samsa.broker.broker import Broker
from samsa.broker.security.acl import AclOperation, ResourceType
from samsa.kproto.errors import ErrorCode
from tests.acl.harness import ALICE, allow, call, create_topic

GROUP = "g10"
UNKNOWN = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")


def _ids(broker: Broker) -> tuple[uuid.UUID, uuid.UUID]:
    create_topic(broker, "a", 2)
    create_topic(broker, "b", 1)
    by_name = broker.image.topics_by_name
    return uuid.UUID(by_name["a"].topic_id), uuid.UUID(by_name["b"].topic_id)


def _commit(broker: Broker, topics: list[tuple[uuid.UUID | None, list[int]]], version: int = 10) -> Any:
    return call(broker, 8, version, {"group_id": GROUP, "generation_id_or_member_epoch": -1, "member_id": "",
                                     "group_instance_id": None, "topics": [
                                         {"topic_id": key, "partitions": [
                                             {"partition_index": i, "committed_offset": 0,
                                              "committed_leader_epoch": 0, "committed_metadata": f"m{i}"}
                                             for i in parts]} for key, parts in topics]})


def _answered(r: Any) -> list[tuple[Any, list[tuple[int, ErrorCode]]]]:
    return [(t.topic_id, [(p.partition_index, p.error_code) for p in t.partitions]) for t in r.topics]


def _fetch(broker: Broker, topics: list[tuple[uuid.UUID | None, list[int]]] | None) -> Any:
    r = call(broker, 9, 10, {"groups": [{"group_id": GROUP, "member_id": None, "member_epoch": -1, "topics": None
                                         if topics is None else [{"topic_id": key, "partition_indexes": parts}
                                                                 for key, parts in topics]}],
                             "require_stable": False})
    (group,) = r.groups
    return group.error_code, [(t.topic_id, [(p.partition_index, p.committed_offset, p.metadata, p.error_code)
                                            for p in t.partitions]) for t in group.topics]


def test_commit_v10_without_group_read_denies_every_partition(broker: Broker) -> None:
    a, _ = _ids(broker)
    r = _commit(broker, [(UNKNOWN, [0]), (a, [0])])
    assert _answered(r) == [(UNKNOWN, [(0, ErrorCode.group_authorization_failed)]),
                            (a, [(0, ErrorCode.group_authorization_failed)])]


def test_commit_and_fetch_v10_by_topic_id(broker: Broker) -> None:
    a, b = _ids(broker)
    allow(broker, ALICE, AclOperation.READ, ResourceType.GROUP, GROUP)
    allow(broker, ALICE, AclOperation.READ, ResourceType.TOPIC, "a")  # READ implies DESCRIBE; nothing on b
    r = _commit(broker, [(a, [0, 7]), (UNKNOWN, [0]), (b, [0]), (None, [1]), (a, [1])])
    # Kafka's order: the answers made before the coordinator, in request order, then the coordinator's.
    assert _answered(r) == [
        (a, [(7, ErrorCode.unknown_topic_or_partition), (0, ErrorCode.none), (1, ErrorCode.none)]),
        (UNKNOWN, [(0, ErrorCode.unknown_topic_id)]),
        (b, [(0, ErrorCode.topic_authorization_failed)]),
        (None, [(1, ErrorCode.unknown_topic_id)])]
    error, topics = _fetch(broker, [(UNKNOWN, [2]), (b, [0]), (a, [0, 1, 5])])
    assert error == ErrorCode.none
    assert topics == [(a, [(0, 0, "m0", ErrorCode.none), (1, 0, "m1", ErrorCode.none), (5, -1, "", ErrorCode.none)]),
                      (UNKNOWN, [(2, -1, "", ErrorCode.unknown_topic_id)]),
                      (b, [(0, -1, "", ErrorCode.topic_authorization_failed)])]
    assert _fetch(broker, None) == (ErrorCode.none, [(a, [(0, 0, "m0", ErrorCode.none), (1, 0, "m1", ErrorCode.none)])])
    # Kept by name: OffsetFetch v9 reads them.
    r = call(broker, 9, 9, {"groups": [{"group_id": GROUP, "member_id": None, "member_epoch": -1,
                                        "topics": [{"name": "a", "partition_indexes": [1]}]}]})
    assert [(t.name, p.committed_offset, p.metadata) for t in r.groups[0].topics for p in t.partitions] == \
        [("a", 0, "m1")]


def test_fetch_v10_of_all_topics_leaves_out_a_topic_without_an_id(broker: Broker) -> None:
    a, b = _ids(broker)
    allow(broker, ALICE, AclOperation.READ, ResourceType.GROUP, GROUP)
    allow(broker, ALICE, AclOperation.READ, ResourceType.TOPIC, "*")
    assert [e for _, ps in _answered(_commit(broker, [(a, [0]), (b, [0])])) for _, e in ps] == [ErrorCode.none] * 2
    ((_, _, deleted),) = broker.controller.delete_topics(["b"]).result()
    assert deleted == ErrorCode.none
    error, topics = _fetch(broker, None)
    assert error == ErrorCode.none and [t for t, _ in topics] == [a]
