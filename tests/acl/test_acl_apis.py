"""CreateAcls / DescribeAcls / DeleteAcls as Kafka answers them, ACL records in the metadata log and its
snapshots, the configs that turn authorization on, and the audit log of denials."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from samsa.broker.broker import Broker
from samsa.broker.config import BrokerConfig, check_static_config
from samsa.broker.metadata.image import MetadataImage
from samsa.broker.metadata.records import (
    AccessControlEntryRecord,
    RemoveAccessControlEntryRecord,
    decode_records,
    encode_records,
)
from samsa.broker.security.acl import CLUSTER_NAME, STANDARD_AUTHORIZER, AclOperation, ResourceType
from samsa.broker.security.authorizer import AUDIT_LINES_PER_SECOND
from samsa.kproto.errors import ErrorCode
from tests.acl.harness import ADMIN, ALICE, MALLORY, T0_MS, acl_broker, allow, call, create_topic

ANY, MATCH, LITERAL, PREFIXED = 1, 2, 3, 4


def creation(name: str, principal: str = ALICE, operation: int = 3, pattern: int = LITERAL, permission: int = 3,
             resource_type: int = 2, host: str = "*") -> dict[str, Any]:
    return {"resource_type": resource_type, "resource_name": name, "resource_pattern_type": pattern,
            "principal": principal, "host": host, "operation": operation, "permission_type": permission}


def acl_filter(name: str | None = None, pattern: int = ANY, principal: str | None = None,
               resource_type: int = 1) -> dict[str, Any]:
    return {"resource_type_filter": resource_type, "resource_name_filter": name, "pattern_type_filter": pattern,
            "principal_filter": principal, "host_filter": None, "operation": 1, "permission_type": 1}


def describe(broker: Broker, **kw: Any) -> Any:
    return call(broker, 29, 3, acl_filter(**kw), ADMIN)


def test_create_describe_delete(broker: Broker) -> None:
    r = call(broker, 30, 3, {"creations": [creation("orders"), creation("pay-", pattern=PREFIXED),
                                           creation("orders")]}, ADMIN)
    assert [x.error_code for x in r.results] == [ErrorCode.none] * 3
    assert len(broker.image.acls) == 2  # the same ACL twice is one ACL
    d = describe(broker)
    assert d.error_code == ErrorCode.none
    assert {(res.resource_name, res.pattern_type) for res in d.resources} == {("orders", LITERAL), ("pay-", PREFIXED)}
    matched = describe(broker, name="pay-in", pattern=MATCH, resource_type=2)
    assert [res.resource_name for res in matched.resources] == ["pay-"]
    r = call(broker, 31, 3, {"filters": [acl_filter("orders", LITERAL), acl_filter("nothing", LITERAL)]}, ADMIN)
    first, second = r.filter_results
    assert [a.resource_name for a in first.matching_acls] == ["orders"] and not second.matching_acls
    assert [res.resource_name for res in describe(broker).resources] == ["pay-"]


def test_invalid_creations_and_filters_are_invalid_request(broker: Broker) -> None:
    r = call(broker, 30, 3, {"creations": [
        creation("t", principal="alice"), creation("other", resource_type=4), creation("t", pattern=MATCH),
        creation("t", operation=1), creation("t", resource_type=99), creation("ok")]}, ADMIN)
    assert [x.error_code for x in r.results] == [ErrorCode.invalid_request] * 5 + [ErrorCode.none]
    assert all(x.error_message for x in r.results[:5])
    assert call(broker, 29, 3, acl_filter(pattern=0), ADMIN).error_code == ErrorCode.invalid_request
    (bad,) = call(broker, 31, 3, {"filters": [acl_filter(pattern=0)]}, ADMIN).filter_results
    assert bad.error_code == ErrorCode.invalid_request


def test_without_an_authorizer_the_acl_apis_are_security_disabled(tmp_path: Path) -> None:
    broker = Broker(BrokerConfig(data_dir=tmp_path / "data"))
    try:
        assert call(broker, 29, 3, acl_filter()).error_code == ErrorCode.security_disabled
        (c,) = call(broker, 30, 3, {"creations": [creation("t")]}).results
        assert c.error_code == ErrorCode.security_disabled
        (d,) = call(broker, 31, 3, {"filters": [acl_filter()]}).filter_results
        assert d.error_code == ErrorCode.security_disabled
        create_topic(broker, "t")  # and everything else is allowed, as before
        assert call(broker, 3, 10, {"topics": None, "allow_auto_topic_creation": False,
                                    "include_cluster_authorized_operations": False,
                                    "include_topic_authorized_operations": False}, MALLORY).topics[0].name == "t"
    finally:
        broker.close()


def test_allow_everyone_if_no_acl_found(tmp_path: Path) -> None:
    broker = acl_broker(tmp_path, **{"allow.everyone.if.no.acl.found": "true"})
    try:
        create_topic(broker, "free")
        create_topic(broker, "guarded")
        allow(broker, ALICE, AclOperation.READ, ResourceType.TOPIC, "guarded")
        names = {t.name: t.error_code for t in call(broker, 3, 10, {
            "topics": [{"name": "free"}, {"name": "guarded"}], "allow_auto_topic_creation": False,
            "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False},
            MALLORY).topics}
        assert names == {"free": ErrorCode.none, "guarded": ErrorCode.topic_authorization_failed}
    finally:
        broker.close()


def test_an_unknown_authorizer_class_is_refused_at_start() -> None:
    assert not check_static_config({"authorizer.class.name": STANDARD_AUTHORIZER}).errors
    (error,) = check_static_config({"authorizer.class.name": "com.example.MyAuthorizer"}).errors
    assert "authorizer.class.name" in error


def test_acl_records_round_trip_and_live_in_snapshots(broker: Broker) -> None:
    record = AccessControlEntryRecord("id-1", 2, "t", 4, "User:a", "*", 3, 3)
    assert decode_records(encode_records([record, RemoveAccessControlEntryRecord("id-0")])) == [
        record, RemoveAccessControlEntryRecord("id-0")]
    allow(broker, ALICE, AclOperation.WRITE, ResourceType.TOPIC, "orders")
    allow(broker, ALICE, AclOperation.ALTER, ResourceType.CLUSTER, CLUSTER_NAME)
    image = broker.image
    rebuilt = MetadataImage().apply(image.to_records(), image.offset)
    assert dict(rebuilt.acls) == dict(image.acls) and len(rebuilt.acls) == 2
    removed = rebuilt.apply([RemoveAccessControlEntryRecord(next(iter(rebuilt.acls)))], image.offset + 1)
    assert len(removed.acls) == 1 and len(rebuilt.acls) == 2  # images stay immutable


def test_denials_are_audited_and_rate_limited(broker: Broker, caplog: pytest.LogCaptureFixture) -> None:
    create_topic(broker, "orders")
    caplog.set_level(logging.INFO, logger="samsa.authorizer")
    request = {"topics": [{"name": "orders"}], "allow_auto_topic_creation": False,
               "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False}
    second_ms = T0_MS + 3_600_000  # a second no other test's requests fall in
    for _ in range(AUDIT_LINES_PER_SECOND + 5):
        call(broker, 3, 10, request, MALLORY, host="10.1.2.3", now_ms=second_ms)
    lines = [r.getMessage() for r in caplog.records if r.name == "samsa.authorizer"]
    assert len(lines) == AUDIT_LINES_PER_SECOND
    call(broker, 3, 10, request, MALLORY, host="10.1.2.3", now_ms=second_ms + 1000)  # the next second
    last = [r.getMessage() for r in caplog.records if r.name == "samsa.authorizer"][-1]
    assert last.endswith("(5 more denials not logged)")
    assert lines[0] == ("Principal = User:mallory is Denied operation = DESCRIBE from host = 10.1.2.3 on resource = "
                        "TOPIC:LITERAL:orders for request = Metadata based on rule DefaultDeny")


def test_more_creations_than_one_operation_may_write_are_refused_whole(broker: Broker) -> None:
    r = call(broker, 30, 3, {"creations": [creation(f"t{i}") for i in range(10_001)]}, ADMIN)
    assert {x.error_code for x in r.results} == {ErrorCode.policy_violation}
    assert not broker.image.acls
