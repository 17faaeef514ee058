"""Produce, Fetch, ListOffsets, Metadata and InitProducerId under ACLs: allowed and denied, Kafka's error
codes, and no answer that tells an unauthorized principal whether a topic exists."""

from __future__ import annotations

import uuid
from typing import Any

from samsa.broker.broker import Broker
from samsa.broker.security.acl import AclOperation, PatternType, ResourceType
from samsa.kproto.errors import ErrorCode
from samsa.kproto.records import encode_batch
from tests.acl.harness import ADMIN, ALICE, MALLORY, T0_MS, allow, call, create_topic, deny

Op, TOPIC, CLUSTER, TXN = AclOperation, ResourceType.TOPIC, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
AUTH_FAILED = ErrorCode.topic_authorization_failed


def produce(broker: Broker, topic: str, principal: str = ALICE, *, producer_id: int = -1,
            transactional_id: str | None = None, transactional: bool = False) -> Any:
    records = encode_batch([(None, b"v", ())], timestamp_ms=T0_MS, producer_id=producer_id,
                           producer_epoch=0 if producer_id >= 0 else -1, base_sequence=0 if producer_id >= 0 else -1,
                           is_transactional=transactional)
    r = call(broker, 0, 9, {"transactional_id": transactional_id, "acks": 1, "timeout": 5000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": records}]}]}, principal)
    return r.responses[0].partition_responses[0]


def fetch(broker: Broker, topic: str, principal: str = ALICE, replica_id: int = -1) -> Any:
    r = call(broker, 1, 12, {"replica_id": replica_id, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20,
                             "isolation_level": 0, "session_id": 0, "session_epoch": -1, "topics": [
        {"topic": topic, "partitions": [{"partition": 0, "current_leader_epoch": -1, "fetch_offset": 0,
                                         "last_fetched_epoch": -1, "log_start_offset": -1,
                                         "partition_max_bytes": 1 << 20}]}],
                             "forgotten_topics_data": [], "rack_id": ""}, principal)
    return r.responses[0].partitions[0]


def metadata(broker: Broker, topics: list[str] | None, principal: str = ALICE, *, auto_create: bool = False,
             ops: bool = False) -> Any:
    return call(broker, 3, 10, {
        "topics": None if topics is None else [{"name": t, "topic_id": uuid.UUID(int=0)} for t in topics],
        "allow_auto_topic_creation": auto_create, "include_cluster_authorized_operations": ops,
        "include_topic_authorized_operations": ops}, principal)


def test_produce_needs_write_on_the_topic_and_does_not_leak_existence(broker: Broker) -> None:
    create_topic(broker, "orders")
    allow(broker, ALICE, Op.WRITE, TOPIC, "orders")
    assert produce(broker, "orders").error_code == ErrorCode.none
    assert produce(broker, "orders", MALLORY).error_code == AUTH_FAILED
    assert produce(broker, "no-such-topic", MALLORY).error_code == AUTH_FAILED  # not UNKNOWN_TOPIC_OR_PARTITION
    allow(broker, ALICE, Op.WRITE, TOPIC, "no-such-topic")
    assert produce(broker, "no-such-topic").error_code == ErrorCode.unknown_topic_or_partition
    assert produce(broker, "orders", ADMIN).error_code == ErrorCode.none  # super user


def test_produce_deny_wins_and_prefixes_apply(broker: Broker) -> None:
    create_topic(broker, "pay-in")
    create_topic(broker, "pay-secret")
    allow(broker, ALICE, Op.WRITE, TOPIC, "pay-", pattern=PatternType.PREFIXED)
    deny(broker, ALICE, Op.WRITE, TOPIC, "pay-secret")
    assert produce(broker, "pay-in").error_code == ErrorCode.none
    assert produce(broker, "pay-secret").error_code == AUTH_FAILED


def test_transactional_produce_needs_write_on_the_transactional_id(broker: Broker) -> None:
    create_topic(broker, "t")
    allow(broker, ALICE, Op.WRITE, TOPIC, "t")
    answer = produce(broker, "t", producer_id=5, transactional_id="tx", transactional=True)
    assert answer.error_code == ErrorCode.transactional_id_authorization_failed


def test_a_producer_id_issued_to_one_principal_is_refused_to_another(broker: Broker) -> None:
    create_topic(broker, "t")
    for who in (ALICE, MALLORY):
        allow(broker, who, Op.WRITE, TOPIC, "t")
    r = call(broker, 22, 4, {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1,
                             "producer_epoch": -1})
    assert r.error_code == ErrorCode.none  # WRITE on a topic allows idempotence (KIP-679)
    stolen = produce(broker, "t", MALLORY, producer_id=r.producer_id)
    assert stolen.error_code == ErrorCode.invalid_producer_id_mapping
    assert "another principal" in stolen.error_message
    assert produce(broker, "t", ALICE, producer_id=r.producer_id).error_code == ErrorCode.none


def test_init_producer_id_without_any_write_is_cluster_authorization_failed(broker: Broker) -> None:
    r = call(broker, 22, 4, {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1,
                             "producer_epoch": -1}, MALLORY)
    assert r.error_code == ErrorCode.cluster_authorization_failed
    allow(broker, MALLORY, Op.IDEMPOTENT_WRITE, CLUSTER, "kafka-cluster")
    r = call(broker, 22, 4, {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1,
                             "producer_epoch": -1}, MALLORY)
    assert r.error_code == ErrorCode.none
    r = call(broker, 22, 4, {"transactional_id": "tx", "transaction_timeout": 60000, "producer_id": -1,
                             "producer_epoch": -1}, MALLORY)
    assert r.error_code == ErrorCode.transactional_id_authorization_failed


def test_fetch_needs_read_and_a_follower_cluster_action(broker: Broker) -> None:
    create_topic(broker, "orders")
    allow(broker, ALICE, Op.READ, TOPIC, "orders")
    assert fetch(broker, "orders").error_code == ErrorCode.none
    assert fetch(broker, "orders", MALLORY).error_code == AUTH_FAILED
    assert fetch(broker, "missing", MALLORY).error_code == AUTH_FAILED
    assert fetch(broker, "orders", ALICE, replica_id=2).error_code == AUTH_FAILED  # a follower: CLUSTER_ACTION
    allow(broker, ALICE, Op.CLUSTER_ACTION, CLUSTER, "kafka-cluster")
    assert fetch(broker, "orders", ALICE, replica_id=2).error_code != AUTH_FAILED


def test_metadata_lists_only_describable_topics(broker: Broker) -> None:
    for name in ("orders", "hidden"):
        create_topic(broker, name)
    allow(broker, ALICE, Op.READ, TOPIC, "orders")  # READ implies DESCRIBE
    names = {t.name for t in metadata(broker, None).topics}
    assert names == {"orders"}
    answered = {t.name: t.error_code for t in metadata(broker, ["orders", "hidden", "missing"]).topics}
    assert answered == {"orders": ErrorCode.none, "hidden": AUTH_FAILED, "missing": AUTH_FAILED}
    assert {t.name for t in metadata(broker, None, ADMIN).topics} >= {"orders", "hidden"}


def test_metadata_auto_creation_needs_create(broker: Broker) -> None:
    allow(broker, ALICE, Op.DESCRIBE, TOPIC, "new")
    (t,) = metadata(broker, ["new"], auto_create=True).topics
    assert t.error_code == AUTH_FAILED
    assert "new" not in broker.image.topics_by_name
    allow(broker, ALICE, Op.CREATE, TOPIC, "new")
    (t,) = metadata(broker, ["new"], auto_create=True).topics
    assert t.error_code in (ErrorCode.none, ErrorCode.leader_not_available)
    assert "new" in broker.image.topics_by_name


def test_metadata_authorized_operations(broker: Broker) -> None:
    create_topic(broker, "orders")
    allow(broker, ALICE, Op.READ, TOPIC, "orders")
    r = metadata(broker, ["orders"], ops=True)
    assert r.topics[0].topic_authorized_operations == (1 << Op.READ) | (1 << Op.DESCRIBE)
    assert r.cluster_authorized_operations == 0  # no DESCRIBE on the cluster
    allow(broker, ALICE, Op.DESCRIBE, CLUSTER, "kafka-cluster")
    assert metadata(broker, ["orders"], ops=True).cluster_authorized_operations == 1 << Op.DESCRIBE


def test_list_offsets_needs_describe(broker: Broker) -> None:
    create_topic(broker, "orders")
    allow(broker, ALICE, Op.DESCRIBE, TOPIC, "orders")

    def list_offsets(topic: str, principal: str) -> Any:
        r = call(broker, 2, 7, {"replica_id": -1, "isolation_level": 0, "topics": [
            {"name": topic, "partitions": [{"partition_index": 0, "current_leader_epoch": -1, "timestamp": -1}]}]},
            principal)
        return r.topics[0].partitions[0]

    assert list_offsets("orders", ALICE).error_code == ErrorCode.none
    assert list_offsets("orders", MALLORY).error_code == AUTH_FAILED
    assert list_offsets("missing", MALLORY).error_code == AUTH_FAILED


def test_a_producer_id_issued_to_the_anonymous_principal_is_refused_to_a_named_one(broker: Broker) -> None:
    create_topic(broker, "t")
    allow(broker, "User:ANONYMOUS", Op.WRITE, TOPIC, "t")
    allow(broker, ALICE, Op.WRITE, TOPIC, "t")
    r = call(broker, 22, 4, {"transactional_id": None, "transaction_timeout": 60000, "producer_id": -1,
                             "producer_epoch": -1}, "User:ANONYMOUS")
    assert r.error_code == ErrorCode.none
    assert produce(broker, "t", ALICE, producer_id=r.producer_id).error_code == ErrorCode.invalid_producer_id_mapping
    assert produce(broker, "t", "User:ANONYMOUS", producer_id=r.producer_id).error_code == ErrorCode.none


def test_a_producer_id_issued_elsewhere_is_bound_to_its_first_user_here(broker: Broker) -> None:
    create_topic(broker, "t")
    for who in (ALICE, MALLORY):
        allow(broker, who, Op.WRITE, TOPIC, "t")
    foreign = 987_654  # never issued by this broker (another broker's block, or before a restart)
    assert produce(broker, "t", ALICE, producer_id=foreign).error_code == ErrorCode.none
    assert produce(broker, "t", MALLORY, producer_id=foreign).error_code == ErrorCode.invalid_producer_id_mapping
