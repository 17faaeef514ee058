"""StandardAuthorizer's decisions: a table of ACLs x requests, DENY winning, prefixes, the wildcards, hosts,
super users, allow.everyone.if.no.acl.found, the implied operations and authorizeByResourceType."""

from __future__ import annotations

import pytest

from samsa.broker.security.acl import (
    CLUSTER_NAME,
    Acl,
    AclFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
    check_new_acl,
)
from samsa.broker.security.authorizer import Authorizer

TOPIC, GROUP, CLUSTER, TXN = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER, ResourceType.TRANSACTIONAL_ID
LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALLOW, DENY = AclPermissionType.ALLOW, AclPermissionType.DENY
Op = AclOperation
ALICE, BOB = "User:alice", "User:bob"
HOST, OTHER_HOST = "10.0.0.1", "10.0.0.2"


def acl(rt: ResourceType, name: str, pt: PatternType, principal: str, op: AclOperation,
        perm: AclPermissionType = ALLOW, host: str = "*") -> Acl:
    return Acl(rt, name, pt, principal, host, op, perm)


ACLS = [
    acl(TOPIC, "orders", LIT, ALICE, Op.READ),
    acl(TOPIC, "orders", LIT, ALICE, Op.WRITE, DENY),
    acl(TOPIC, "pay-", PRE, ALICE, Op.WRITE),
    acl(TOPIC, "pay-secret", LIT, ALICE, Op.ALL, DENY),
    acl(TOPIC, "*", LIT, BOB, Op.DESCRIBE),
    acl(TOPIC, "bob-only", LIT, BOB, Op.READ, host=HOST),
    acl(TOPIC, "public", LIT, "User:*", Op.READ),
    acl(TOPIC, "public", LIT, BOB, Op.READ, DENY),
    acl(GROUP, "g-", PRE, ALICE, Op.READ),
    acl(TOPIC, "conf", LIT, ALICE, Op.ALTER_CONFIGS),
    acl(CLUSTER, CLUSTER_NAME, LIT, ALICE, Op.IDEMPOTENT_WRITE),
]

# (principal, host, operation, resource type, name, allowed, why)
TABLE = [
    (ALICE, HOST, Op.READ, TOPIC, "orders", True, "literal allow"),
    (ALICE, HOST, Op.WRITE, TOPIC, "orders", False, "explicit deny"),
    (ALICE, HOST, Op.DESCRIBE, TOPIC, "orders", True, "READ implies DESCRIBE"),
    (ALICE, HOST, Op.DELETE, TOPIC, "orders", False, "ACLs on the resource, none for DELETE"),
    (ALICE, HOST, Op.WRITE, TOPIC, "pay-in", True, "prefixed allow"),
    (ALICE, HOST, Op.DESCRIBE, TOPIC, "pay-in", True, "WRITE implies DESCRIBE"),
    (ALICE, HOST, Op.WRITE, TOPIC, "pay-secret", False, "DENY ALL wins over the prefixed ALLOW"),
    (ALICE, HOST, Op.DESCRIBE, TOPIC, "pay-secret", False, "DENY ALL denies DESCRIBE too"),
    (ALICE, HOST, Op.WRITE, TOPIC, "pay", False, "prefix longer than the name does not match"),
    (ALICE, HOST, Op.READ, TOPIC, "nothing", False, "no ACL: allow.everyone.if.no.acl.found is false"),
    (BOB, HOST, Op.DESCRIBE, TOPIC, "anything", True, "wildcard resource"),
    (BOB, HOST, Op.READ, TOPIC, "anything", False, "wildcard is DESCRIBE only"),
    (BOB, HOST, Op.READ, TOPIC, "bob-only", True, "host matches"),
    (BOB, OTHER_HOST, Op.READ, TOPIC, "bob-only", False, "host does not match"),
    (ALICE, HOST, Op.READ, TOPIC, "public", True, "User:* allow"),
    (BOB, HOST, Op.READ, TOPIC, "public", False, "bob's DENY wins over User:* ALLOW"),
    (BOB, HOST, Op.DESCRIBE, TOPIC, "public", True, "a DENY READ does not deny DESCRIBE (bob has * DESCRIBE)"),
    (ALICE, HOST, Op.READ, GROUP, "g-1", True, "prefixed group"),
    (ALICE, HOST, Op.READ, GROUP, "h-1", False, "no group ACL"),
    (ALICE, HOST, Op.DESCRIBE_CONFIGS, TOPIC, "conf", True, "ALTER_CONFIGS implies DESCRIBE_CONFIGS"),
    (ALICE, HOST, Op.DESCRIBE, TOPIC, "conf", False, "ALTER_CONFIGS does not imply DESCRIBE"),
    (ALICE, HOST, Op.IDEMPOTENT_WRITE, CLUSTER, CLUSTER_NAME, True, "cluster ACL"),
    (ALICE, HOST, Op.CREATE, CLUSTER, CLUSTER_NAME, False, "cluster ACL for another operation"),
    ("User:admin", HOST, Op.DELETE, TOPIC, "orders", True, "super user"),
]


@pytest.mark.parametrize(("principal", "host", "op", "rt", "name", "allowed", "why"), TABLE,
                         ids=[row[-1] for row in TABLE])
def test_decision_table(principal: str, host: str, op: AclOperation, rt: ResourceType, name: str,
                        allowed: bool, why: str) -> None:
    authorizer = Authorizer(ACLS, ["User:admin"], allow_if_no_acl=False)
    assert authorizer.decide(principal, host, op, rt, name).allowed is allowed, why


def test_allow_everyone_if_no_acl_found_only_where_no_acl_names_the_resource() -> None:
    authorizer = Authorizer(ACLS, [], allow_if_no_acl=True)
    assert authorizer.decide(ALICE, HOST, Op.WRITE, TXN, "t").allowed
    assert authorizer.decide(BOB, HOST, Op.READ, GROUP, "h-1").allowed
    # "g-1" is named by alice's prefixed ACL: bob matches none of the ACLs there, and is denied
    assert not authorizer.decide(BOB, HOST, Op.READ, GROUP, "g-1").allowed
    # bob's wildcard DESCRIBE names every topic, so no topic falls to the default any more
    assert not authorizer.decide(ALICE, HOST, Op.READ, TOPIC, "nothing").allowed


def test_no_acls_at_all_denies_by_default() -> None:
    assert not Authorizer([], [], allow_if_no_acl=False).decide(ALICE, HOST, Op.READ, TOPIC, "t").allowed


def test_authorize_by_resource_type() -> None:
    acls = [acl(TOPIC, "a-", PRE, ALICE, Op.WRITE), acl(TOPIC, "a-", PRE, ALICE, Op.WRITE, DENY),
            acl(TOPIC, "b", LIT, BOB, Op.WRITE), acl(TOPIC, "b", LIT, BOB, Op.WRITE, DENY),
            acl(TOPIC, "c", LIT, "User:carol", Op.WRITE)]
    authorizer = Authorizer(acls, [], allow_if_no_acl=False)
    assert not authorizer.decide_by_resource_type(ALICE, HOST, Op.WRITE, TOPIC)  # its only allow is denied
    assert not authorizer.decide_by_resource_type(BOB, HOST, Op.WRITE, TOPIC)
    assert authorizer.decide_by_resource_type("User:carol", HOST, Op.WRITE, TOPIC)
    assert not authorizer.decide_by_resource_type("User:carol", HOST, Op.READ, TOPIC)
    wildcard_deny = Authorizer([*acls, acl(TOPIC, "*", LIT, "User:*", Op.WRITE, DENY)], [], allow_if_no_acl=False)
    assert not wildcard_deny.decide_by_resource_type("User:carol", HOST, Op.WRITE, TOPIC)
    wildcard_allow = Authorizer([acl(TOPIC, "*", LIT, ALICE, Op.WRITE), acl(TOPIC, "a", PRE, ALICE, Op.WRITE, DENY)],
                                [], allow_if_no_acl=False)
    assert wildcard_allow.decide_by_resource_type(ALICE, HOST, Op.WRITE, TOPIC)  # Kafka: "*" allows, whatever prefix
    # allow.everyone.if.no.acl.found: some name is covered by no ACL at all, so some topic may be written
    assert Authorizer(acls, [], allow_if_no_acl=True).decide_by_resource_type(ALICE, HOST, Op.WRITE, TOPIC)
    assert Authorizer(acls, ["User:root"], allow_if_no_acl=False).decide_by_resource_type("User:root", HOST,
                                                                                        Op.WRITE, TOPIC)


def test_authorized_operations_bits() -> None:
    authorizer = Authorizer(ACLS, [], allow_if_no_acl=False)
    bits = authorizer.operations(ALICE, HOST, TOPIC, "orders")
    assert bits == (1 << Op.READ) | (1 << Op.DESCRIBE)


def test_filters() -> None:
    prefixed = acl(TOPIC, "pay-", PRE, ALICE, Op.WRITE)
    literal = acl(TOPIC, "pay-in", LIT, ALICE, Op.READ)
    wildcard = acl(TOPIC, "*", LIT, BOB, Op.READ)
    match = AclFilter(TOPIC, "pay-in", PatternType.MATCH)
    assert match.matches(prefixed) and match.matches(literal) and match.matches(wildcard)
    assert AclFilter(TOPIC, "pay-", PatternType.ANY).matches(prefixed)
    assert not AclFilter(TOPIC, "pay-in", PatternType.ANY).matches(prefixed)
    assert not AclFilter(TOPIC, "pay-", LIT).matches(prefixed)
    assert AclFilter(principal=BOB).matches(wildcard) and not AclFilter(principal=BOB).matches(literal)
    assert AclFilter(operation=Op.READ, permission_type=ALLOW).matches(literal)
    assert not AclFilter(resource_type=GROUP).matches(literal)
    assert AclFilter(pattern_type=PatternType.UNKNOWN).unknown_field() == "pattern_type"


def test_new_acl_checks() -> None:
    good = acl(TOPIC, "t", LIT, ALICE, Op.READ)
    assert check_new_acl(good) is None
    assert check_new_acl(acl(CLUSTER, "other", LIT, ALICE, Op.ALTER)) is not None
    assert check_new_acl(acl(TOPIC, "t", PatternType.MATCH, ALICE, Op.READ)) is not None
    assert check_new_acl(acl(TOPIC, "t", LIT, "alice", Op.READ)) is not None
    assert check_new_acl(acl(TOPIC, "t", LIT, ALICE, Op.ANY)) is not None
    assert check_new_acl(acl(TOPIC, "", LIT, ALICE, Op.READ)) is not None
