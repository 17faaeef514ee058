"""The ACL matrix: the same users, ACLs and requests against Kafka 4.1.2's StandardAuthorizer and Samsa's.

Both brokers run a SASL_PLAINTEXT listener with PLAIN users (``USERS``, from
``listener.name.sasl_plaintext.plain.sasl.jaas.config``), ``super.users=User:admin`` (and the anonymous
PLAINTEXT / CONTROLLER principal, which Kafka's own broker-to-controller traffic uses), and
``auto.create.topics.enable=false``. As admin, ``setup`` creates the topics and a group and adds ``ACLS``
(LITERAL and PREFIXED, ALLOW and DENY, a wildcard principal and a wildcard resource). Then alice and bob, each
on their own SASL connection, send every API Samsa implements against resources they may and may not use,
existing and not. ``run`` returns, per request, the error codes of the answer and what it lets the user see
(names, authorized operations), with everything else of the answer left out (``essentials``): that is the
outcome compared by test_acl_matrix.py through framework.compare (normalize.KNOWN_DIFFERENCES["acl_matrix"]).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from typing import Any

from differential.framework import jsonable, sasl_plain_connection
from samsa.broker.client import Connection
from samsa.kproto.records import encode_batch

USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
SUPER_USERS = "User:admin;User:ANONYMOUS"
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
LISTENER = "SASL_PLAINTEXT"
UNKNOWN_ID = uuid.UUID("6ba7b810-9dad-11d1-80b4-00c04fd430c8")  # a topic id no topic has


def jaas_plain() -> str:
    entries = " ".join(f'user_{name}="{password}"' for name, password in USERS.items())
    return f"org.apache.kafka.common.security.plain.PlainLoginModule required {entries};"


def broker_settings() -> dict[str, str]:
    """server.properties both brokers share (the listener itself is added by each fixture)."""
    return {
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": SUPER_USERS,
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas_plain(),
        "auto.create.topics.enable": "false",
        "group.initial.rebalance.delay.ms": "0",
        "offsets.topic.num.partitions": "1",
        "transaction.state.log.num.partitions": "1",
    }


# Topics (partitions: 1); MISSING ones are never created.
ORDERS, PUB, PUB_HIDDEN, SECRET, OPEN, DOOMED = (
    "acl-orders", "acl-pub-x", "acl-pub-hidden", "acl-secret", "acl-open", "acl-doomed")
TOPICS = (ORDERS, PUB, PUB_HIDDEN, SECRET, OPEN, DOOMED)
MISSING = ("acl-missing", "acl-pub-missing")
GROUP, OTHER_GROUP = "acl-g", "other-g"
TXN, OTHER_TXN = "acl-tx", "other-tx"

# Kafka's codes: resource 2 topic, 3 group, 4 cluster, 5 transactional id; pattern 3 literal, 4 prefixed;
# operation 2 ALL, 3 READ, 4 WRITE, 5 CREATE, 6 DELETE, 7 ALTER, 8 DESCRIBE, 10 DESCRIBE_CONFIGS,
# 11 ALTER_CONFIGS, 12 IDEMPOTENT_WRITE; permission 2 DENY, 3 ALLOW.
ACLS: list[tuple[int, str, int, str, int, int]] = [  # resource, name, pattern, principal, operation, permission
    (2, ORDERS, 3, "User:alice", 2, 3),
    (2, "acl-pub-", 4, "User:alice", 4, 3),
    (2, "acl-pub-", 4, "User:bob", 3, 3),
    (2, PUB_HIDDEN, 3, "User:bob", 8, 2),
    (2, OPEN, 3, "User:*", 8, 3),
    (2, "*", 3, "User:bob", 8, 3),
    (2, "acl-new-", 4, "User:alice", 5, 3),
    (2, DOOMED, 3, "User:alice", 6, 3),
    (2, OPEN, 3, "User:bob", 10, 3),
    (2, OPEN, 3, "User:bob", 11, 3),
    (2, OPEN, 3, "User:bob", 4, 3),
    (3, GROUP, 3, "User:alice", 3, 3),
    (3, "acl-", 4, "User:bob", 8, 3),
    (5, TXN, 3, "User:alice", 4, 3),
    (4, "kafka-cluster", 3, "User:bob", 8, 3),
]

ZERO = uuid.UUID(int=0)
# Keys kept from an answer: what tells the user something (errors, names, what is visible and allowed).
KEPT_SCALARS = ("error_code", "partition_error_code", "name", "topic", "partition_index", "partition", "index",
                "group_id", "transactional_id", "resource_name", "topic_authorized_operations",
                "cluster_authorized_operations", "authorized_operations", "is_internal", "user", "key",
                "mechanism_name", "state", "group_state", "protocol_type")


def essentials(value: Any) -> Any:
    """An answer reduced to ``KEPT_SCALARS`` and the lists and records that hold them (order kept)."""
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if isinstance(v, (dict, list)):
                kept = essentials(v)
                if kept not in ({}, []):
                    out[k] = kept
            elif k in KEPT_SCALARS:
                out[k] = v
        return out
    if isinstance(value, list):
        kept_items = [essentials(v) for v in value]
        kept_items = [v for v in kept_items if v not in ({}, [])]
        if all(isinstance(v, dict) for v in kept_items):  # answers built from hash maps: order unspecified
            kept_items.sort(key=lambda v: json.dumps(v, sort_keys=True, default=str))
        return kept_items
    return value


def setup(admin: Connection) -> None:
    for name in TOPICS:
        r = admin.request(19, {"topics": [{"name": name, "num_partitions": 1, "replication_factor": 1,
                                           "assignments": (), "configs": ()}],
                               "timeout": 30000, "validate_only": False}, version=5)
        assert r.topics[0].error_code.value in (0, 36), r  # 36: TOPIC_ALREADY_EXISTS (a retried setup)
    r = admin.request(30, {"creations": [
        {"resource_type": rt, "resource_name": name, "resource_pattern_type": pt, "principal": principal,
         "host": "*", "operation": op, "permission_type": perm} for rt, name, pt, principal, op, perm in ACLS]},
        version=3)
    assert all(x.error_code.value == 0 for x in r.results), r
    deadline = time.monotonic() + 60
    while True:  # until every partition has a leader, the ACLs are visible and the coordinators are up
        m = admin.request(3, {"topics": [{"name": n} for n in TOPICS], "allow_auto_topic_creation": False},
                          version=9)
        acls = admin.request(29, {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                                  "principal_filter": None, "host_filter": None, "operation": 1,
                                  "permission_type": 1}, version=3)
        g = admin.request(10, {"key_type": 0, "coordinator_keys": [GROUP]}, version=4).coordinators[0]
        t = admin.request(10, {"key_type": 1, "coordinator_keys": [TXN]}, version=4).coordinators[0]
        ready = (all(x.error_code.value == 0 and x.partitions and x.partitions[0].leader_id >= 0 for x in m.topics)
                 and sum(len(x.acls) for x in acls.resources) == len(ACLS)
                 and g.error_code.value == 0 and t.error_code.value == 0)
        if ready:
            return
        assert time.monotonic() < deadline, f"setup not ready: {m} {acls} {g} {t}"
        time.sleep(0.2)


def _batch(producer_id: int = -1, epoch: int = -1, sequence: int = -1) -> bytes:
    # a current timestamp: an old one would fall to time-based retention (Kafka deletes it at its first check)
    return encode_batch([(b"k", b"v", ())], timestamp_ms=int(time.time() * 1000), producer_id=producer_id,
                        producer_epoch=epoch, base_sequence=sequence)


def _offsets(topics: tuple[str, ...]) -> list[dict[str, Any]]:
    return [{"name": t, "partitions": [{"partition_index": 0, "committed_offset": 0, "committed_leader_epoch": -1,
                                        "committed_metadata": ""}]} for t in topics]


Request = tuple[int, int, dict[str, Any]]


def topic_requests(t: str) -> dict[str, Request]:
    """Requests about one topic (with the group and transactional id the user may use)."""
    return {
        "Produce": (0, 9, {"transactional_id": None, "acks": -1, "timeout": 10000, "topic_data": [
            {"name": t, "partition_data": [{"index": 0, "records": _batch()}]}]}),
        "Fetch": (1, 12, {"replica_id": -1, "max_wait": 0, "min_bytes": 0, "max_bytes": 1 << 20, "isolation_level": 0,
                          "session_id": 0, "session_epoch": -1, "forgotten_topics_data": (), "rack_id": "",
                          "topics": [{"topic": t, "topic_id": None, "partitions": [
                              {"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1 << 20,
                               "current_leader_epoch": -1, "log_start_offset": -1}]}]}),
        "ListOffsets": (2, 7, {"replica_id": -1, "isolation_level": 0, "timeout": 10000, "topics": [
            {"name": t, "partitions": [{"partition_index": 0, "timestamp": -1, "current_leader_epoch": -1,
                                        "max_num_offsets": 1}]}]}),
        "Metadata": (3, 12, {"topics": [{"name": t}], "allow_auto_topic_creation": False,
                             "include_topic_authorized_operations": True}),
        "Metadata/v4-no-ops": (3, 4, {"topics": [{"name": t}], "allow_auto_topic_creation": False}),
        "OffsetForLeaderEpoch": (23, 4, {"replica_id": -1, "topics": [
            {"topic": t, "partitions": [{"partition": 0, "current_leader_epoch": -1, "leader_epoch": 0}]}]}),
        "OffsetCommit": (8, 8, {"group_id": GROUP, "generation_id_or_member_epoch": -1, "member_id": "",
                                "group_instance_id": None, "topics": _offsets((t,))}),
        "OffsetFetch": (9, 7, {"group_id": GROUP, "require_stable": False, "topics": [
            {"name": t, "partition_indexes": [0]}]}),
        "OffsetDelete": (47, 0, {"group_id": GROUP, "topics": [{"name": t, "partitions": [{"partition_index": 0}]}]}),
        "CreatePartitions": (37, 3, {"timeout": 5000, "validate_only": True, "topics": [
            {"name": t, "count": 2, "assignments": None}]}),
        "DescribeConfigs": (32, 4, {"include_synonyms": False, "include_documentation": False, "resources": [
            {"resource_type": 2, "resource_name": t, "configuration_keys": ["retention.ms"]}]}),
        "AlterConfigs": (33, 2, {"validate_only": True, "resources": [
            {"resource_type": 2, "resource_name": t, "configs": [{"name": "retention.ms", "value": "1000"}]}]}),
        "IncrementalAlterConfigs": (44, 1, {"validate_only": True, "resources": [
            {"resource_type": 2, "resource_name": t, "configs": [
                {"name": "retention.ms", "config_operation": 0, "value": "1000"}]}]}),
        "DeleteRecords": (21, 2, {"timeout": 5000, "topics": [
            {"name": t, "partitions": [{"partition_index": 0, "offset": 0}]}]}),
        "DescribeProducers": (61, 0, {"topics": [{"name": t, "partition_indexes": [0]}]}),
        "AlterReplicaLogDirs": (34, 2, {"dirs": [{"path": "/no/such/dir", "topics": [
            {"name": t, "partitions": [0]}]}]}),
        "ElectLeaders": (43, 2, {"election_type": 0, "timeout": 5000, "topic_partitions": [
            {"topic": t, "partitions": [0]}]}),
        "AlterPartitionReassignments": (45, 0, {"timeout": 5000, "topics": [
            {"name": t, "partitions": [{"partition_index": 0, "replicas": None}]}]}),
        "ListPartitionReassignments": (46, 0, {"timeout": 5000, "topics": [{"name": t, "partition_indexes": [0]}]}),
        "DescribeLogDirs": (35, 5, {"topics": [{"topic": t, "partitions": [0]}]}),
        "CreateTopics": (19, 7, {"timeout": 5000, "validate_only": True, "topics": [
            {"name": t.replace("acl-", "acl-new-"), "num_partitions": 1, "replication_factor": 1,
             "assignments": [], "configs": []}]}),
    }


def group_requests(g: str) -> dict[str, Request]:
    return {
        "FindCoordinator": (10, 4, {"key_type": 0, "coordinator_keys": [g]}),
        "JoinGroup": (11, 7, {"group_id": g, "session_timeout": 10000, "rebalance_timeout": 10000, "member_id": "",
                              "group_instance_id": None, "protocol_type": "consumer", "reason": None,
                              "protocols": [{"name": "range", "metadata": b""}]}),
        "SyncGroup": (14, 5, {"group_id": g, "generation_id": 1, "member_id": "m", "group_instance_id": None,
                              "protocol_type": "consumer", "protocol_name": "range", "assignments": []}),
        "Heartbeat": (12, 4, {"group_id": g, "generation_id": 1, "member_id": "m", "group_instance_id": None}),
        "LeaveGroup": (13, 4, {"group_id": g, "members": [{"member_id": "m", "group_instance_id": None}]}),
        "OffsetFetch/all": (9, 7, {"group_id": g, "topics": None, "require_stable": False}),
        # v10 names topics by id: one no topic has (KafkaApis answers it before any topic authorization)
        "OffsetCommit/v10-unknown-id": (8, 10, {"group_id": g, "generation_id_or_member_epoch": -1, "member_id": "",
                                                "group_instance_id": None, "topics": [
                                                    {"topic_id": UNKNOWN_ID, "partitions": [
                                                        {"partition_index": 0, "committed_offset": 0,
                                                         "committed_leader_epoch": -1, "committed_metadata": ""}]}]}),
        "OffsetFetch/v10-unknown-id": (9, 10, {"require_stable": False, "groups": [
            {"group_id": g, "member_id": None, "member_epoch": -1,
             "topics": [{"topic_id": UNKNOWN_ID, "partition_indexes": [0]}]}]}),
        "DescribeGroups": (15, 5, {"groups": [g], "include_authorized_operations": True}),
        "DeleteGroups": (42, 2, {"groups_names": [g]}),
        "ConsumerGroupHeartbeat": (68, 0, {"group_id": g, "member_id": str(uuid.UUID(int=7)), "member_epoch": 0,
                                           "instance_id": None, "rack_id": None, "rebalance_timeout": 10000,
                                           "subscribed_topic_names": [ORDERS], "server_assignor": None,
                                           "topic_partitions": []}),
        "ConsumerGroupDescribe": (69, 0, {"group_ids": [g], "include_authorized_operations": True}),
        # leave again (epoch -1): what bob sees later must not depend on the session timeout
        "ConsumerGroupHeartbeat/leave": (68, 0, {"group_id": g, "member_id": str(uuid.UUID(int=7)),
                                                 "member_epoch": -1, "instance_id": None, "rack_id": None,
                                                 "rebalance_timeout": 10000, "subscribed_topic_names": None,
                                                 "server_assignor": None, "topic_partitions": None}),
    }


def txn_requests(tx: str, producer_id: int, epoch: int) -> dict[str, Request]:
    return {
        "FindCoordinator": (10, 4, {"key_type": 1, "coordinator_keys": [tx]}),
        "AddPartitionsToTxn": (24, 3, {"v3_and_below_transactional_id": tx, "v3_and_below_producer_id": producer_id,
                                       "v3_and_below_producer_epoch": epoch,
                                       "v3_and_below_topics": [{"name": t, "partitions": [0]}
                                                               for t in (ORDERS, PUB, SECRET, MISSING[0])]}),
        "AddOffsetsToTxn": (25, 3, {"transactional_id": tx, "producer_id": producer_id, "producer_epoch": epoch,
                                    "group_id": GROUP}),
        "AddOffsetsToTxn/other-group": (25, 3, {"transactional_id": tx, "producer_id": producer_id,
                                                "producer_epoch": epoch, "group_id": OTHER_GROUP}),
        "TxnOffsetCommit": (28, 3, {"transactional_id": tx, "group_id": GROUP, "producer_id": producer_id,
                                    "producer_epoch": epoch, "generation_id": -1, "member_id": "",
                                    "group_instance_id": None, "topics": _offsets((ORDERS, SECRET))}),
        # v6 names topics by id: one no topic has (answered after the transactional id's and the group's checks)
        "TxnOffsetCommit/v6-unknown-id": (28, 6, {"transactional_id": tx, "group_id": GROUP, "producer_id": producer_id,
                                                  "producer_epoch": epoch, "generation_id_or_member_epoch": -1,
                                                  "member_id": "", "group_instance_id": None, "topics": [
                                                      {"topic_id": UNKNOWN_ID, "partitions": [
                                                          {"partition_index": 0, "committed_offset": 0,
                                                           "committed_leader_epoch": -1,
                                                           "committed_metadata": ""}]}]}),
        "DescribeTransactions": (65, 0, {"transactional_ids": [tx]}),
        "EndTxn": (26, 3, {"transactional_id": tx, "producer_id": producer_id, "producer_epoch": epoch,
                           "committed": False}),
    }


def cluster_requests() -> dict[str, Request]:
    return {
        "Metadata/all": (3, 12, {"topics": None, "allow_auto_topic_creation": False,
                                 "include_topic_authorized_operations": True}),
        "Metadata/all-v10-cluster-ops": (3, 10, {"topics": None, "allow_auto_topic_creation": False,
                                                 "include_cluster_authorized_operations": True,
                                                 "include_topic_authorized_operations": False}),
        "Metadata/auto-create": (3, 12, {"topics": [{"name": "acl-new-auto"}, {"name": "acl-auto"}],
                                         "allow_auto_topic_creation": True,
                                         "include_topic_authorized_operations": False}),
        "InitProducerId/idempotent": (22, 4, {"transactional_id": None, "transaction_timeout": -1,
                                              "producer_id": -1, "producer_epoch": -1}),
        "InitProducerId/other-txn": (22, 4, {"transactional_id": OTHER_TXN, "transaction_timeout": 60000,
                                             "producer_id": -1, "producer_epoch": -1}),
        "ListGroups": (16, 4, {"states_filter": []}),
        "ListTransactions": (66, 0, {"state_filters": [], "producer_id_filters": []}),
        "DescribeCluster": (60, 1, {"include_cluster_authorized_operations": True, "endpoint_type": 1}),
        "DescribeLogDirs/all": (35, 5, {"topics": None}),
        "ListPartitionReassignments/all": (46, 0, {"timeout": 5000, "topics": None}),
        "DescribeConfigs/broker": (32, 4, {"include_synonyms": False, "include_documentation": False, "resources": [
            {"resource_type": 4, "resource_name": "1", "configuration_keys": ["log.retention.hours"]}]}),
        "IncrementalAlterConfigs/broker": (44, 1, {"validate_only": True, "resources": [
            {"resource_type": 4, "resource_name": "", "configs": [
                {"name": "log.retention.ms", "config_operation": 0, "value": "100000"}]}]}),
        "IncrementalAlterConfigs/broker-static": (44, 1, {"validate_only": True, "resources": [
            {"resource_type": 4, "resource_name": "", "configs": [
                {"name": "node.id", "config_operation": 0, "value": "1"}]}]}),
        "DescribeAcls": (29, 3, {"resource_type_filter": 1, "resource_name_filter": None, "pattern_type_filter": 1,
                                 "principal_filter": None, "host_filter": None, "operation": 1,
                                 "permission_type": 1}),
        "CreateAcls": (30, 3, {"creations": [
            {"resource_type": 2, "resource_name": "x", "resource_pattern_type": 3, "principal": "User:bob",
             "host": "*", "operation": 3, "permission_type": 3}]}),
        "DeleteAcls": (31, 3, {"filters": [
            {"resource_type_filter": 2, "resource_name_filter": "no-such", "pattern_type_filter": 3,
             "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}]}),
        # (users: null would show a Kafka 4.1.2 bug: a denied request with null users gets no answer at all,
        # DescribeUserScramCredentialsRequest.getErrorResponse throws a NullPointerException)
        "DescribeUserScramCredentials": (50, 0, {"users": [{"name": "alice"}, {"name": "bob"}]}),
        "DescribeClientQuotas": (48, 1, {"components": [], "strict": False}),
        "AlterUserScramCredentials": (51, 0, {"deletions": [{"name": "carol", "mechanism": 2}], "upsertions": []}),
        "DeleteTopics": (20, 6, {"timeout": 5000, "topics": [{"name": t, "topic_id": ZERO}
                                                             for t in (SECRET, MISSING[0], DOOMED)]}),
    }


def _ask(conn: Connection, request: Request, visible: Callable[[Any], Any] = essentials) -> Any:
    api_key, version, values = request
    try:
        return visible(jsonable(conn.request(api_key, values, version=version)))
    except Exception as e:  # a broker that closes the connection is an outcome too
        return f"no answer: {type(e).__name__}"


def _listing(answer: Any) -> Any:
    """Listings without the internal topics (created on first use, at different moments on the two brokers)."""
    if isinstance(answer, dict):
        for key in ("topics", "groups", "transaction_states"):
            if isinstance(answer.get(key), list):
                answer[key] = sorted((x for x in answer[key] if not str(x.get("name", "")).startswith("__")),
                                     key=lambda x: str(x))
    return answer


def idempotent_produce(c: Connection, topic: str, producer: tuple[int, int] | None) -> dict[str, Any]:
    """An idempotent batch (sequence 0) with `producer`'s id and epoch, or with one this user is given now."""
    out: dict[str, Any] = {}
    if producer is None:
        init = c.request(22, {"transactional_id": None, "transaction_timeout": -1, "producer_id": -1,
                              "producer_epoch": -1}, version=4)
        out["InitProducerId"] = essentials(jsonable(init))
        producer = (init.producer_id, init.producer_epoch)
    out["Produce"] = _ask(c, (0, 9, {"transactional_id": None, "acks": -1, "timeout": 10000, "topic_data": [
        {"name": topic, "partition_data": [{"index": 0, "records": _batch(*producer, 0)}]}]}))
    out["producer"] = producer
    return out


def run_user(bootstrap: str, user: str, shared: dict[str, Any]) -> dict[str, Any]:
    """The matrix as `user`; `shared` carries what one user's run hands the next (alice's producer id)."""
    out: dict[str, Any] = {}

    def conn() -> Connection:  # a fresh connection per section: a broker may close one after an error
        return sasl_plain_connection(bootstrap, user, USERS[user], client_id=f"acl-matrix-{user}")

    for t in (*TOPICS[:-1], *MISSING):
        c = conn()
        try:
            for api, request in topic_requests(t).items():
                out[f"{api} {t}"] = _ask(c, request)
        finally:
            c.close()
    for g in (GROUP, OTHER_GROUP):
        c = conn()
        try:
            for api, request in group_requests(g).items():
                out[f"{api} {g}"] = _ask(c, request)
        finally:
            c.close()
    c = conn()
    try:
        deadline = time.monotonic() + 60
        while True:  # until the transaction coordinator has loaded (14, 15) and any earlier attempt ended (51)
            init = c.request(22, {"transactional_id": TXN, "transaction_timeout": 60000, "producer_id": -1,
                                  "producer_epoch": -1}, version=4)
            if init.error_code.value not in (14, 15, 51) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        out[f"InitProducerId {TXN}"] = essentials(jsonable(init))
        pid, epoch = (init.producer_id, init.producer_epoch) if init.error_code.value == 0 else (1, 0)
        for tx in (TXN, OTHER_TXN):
            for api, request in txn_requests(tx, pid, epoch).items():
                out[f"{api} {tx}"] = _ask(c, request)
        for api, request in cluster_requests().items():
            listing = api.startswith(("Metadata/all", "List"))
            out[api] = _ask(c, request, (lambda a: essentials(_listing(a))) if listing else essentials)
        # alice's idempotent producer id, used by bob: Samsa binds producer ids to their principal (see
        # normalize.KNOWN_DIFFERENCES), Kafka does not
        topic, producer = (ORDERS, None) if user == "alice" else (OPEN, shared.get("alice producer"))
        answer = idempotent_produce(c, topic, producer)
        shared[f"{user} producer"] = answer.pop("producer")
        out.update({f"idempotent {api} {topic}": value for api, value in answer.items()})
    finally:
        c.close()
    return out


def run(bootstrap: str) -> dict[str, Any]:
    """Set up as admin, then the matrix as alice and as bob."""
    admin = sasl_plain_connection(bootstrap, "admin", USERS["admin"], client_id="acl-matrix-admin")
    try:
        setup(admin)
    finally:
        admin.close()
    # outcome keys hold no "/": normalize's paths are "/"-joined keys (KNOWN_DIFFERENCES patterns)
    shared: dict[str, Any] = {}
    return {user: {key.replace("/", ":"): value for key, value in run_user(bootstrap, user, shared).items()}
            for user in ("alice", "bob")}
